"""Requests skip Flower 1.41's HTTP middleware that has nothing to do for them.

Flower 1.41's SuperLink serves every API (Fleet, Runtime, Control) from one FastAPI app
whose stack holds nine Starlette ``BaseHTTPMiddleware`` layers (six on a SuperNode's local
Runtime API: three). Each layer costs a task group, memory streams and a wrapped response
per request, whether or not it acts: profiled on a fedroc job, this machinery was over half
of the SuperLink's CPU, which a job spends on about a thousand small requests. Most layers
act on one API only (the Control API's authentication, licence, event log and no-cache
headers; the Fleet API's node authentication and event log) or only when a feature is on
(tracing, event-log plugins), and otherwise call the next layer unchanged.

:func:`lean_app` wraps each such layer in a plain ASGI dispatcher that hands the request to
the layer when its condition holds and straight to the next layer otherwise. The condition
is the one the layer tests itself before calling the next layer unchanged, so every request
is treated as before; requests that the layer acts on still pass through it. The conditions
are read from Flower 1.41's code, hence :func:`~._tuning.check_flower_version` and a test
per layer (``tests/test_flower_tuning.py``) that checks the skipped layers and the kept ones
on the real app. ``FEDROC_FLOWER_TUNING=off`` leaves Flower's stack as it is.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["SkipUnless", "lean_app", "superlink_conditions", "supernode_conditions"]

Scope = MutableMapping[str, Any]
# A layer's condition: (scope, path) -> whether the layer may act on the request.
Condition = Callable[[Scope, str], bool]


class SkipUnless:
    """Plain ASGI: run ``layer`` (a middleware around ``app``) only when ``applies``."""

    def __init__(self, app: Any, *, layer: Any, applies: Condition, name: str) -> None:
        self.app = app
        self.layer = layer.cls(app, *layer.args, **layer.kwargs)
        self.applies = applies
        self.name = name

    async def __call__(
        self, scope: Scope, receive: Callable[[], Awaitable[Any]], send: Callable[..., Any]
    ) -> None:
        if scope["type"] == "http":
            from starlette.datastructures import URL

            # The path exactly as the layer reads it (``request.url.path``).
            if not self.applies(scope, URL(scope=scope).path):
                await self.app(scope, receive, send)
                return
        await self.layer(scope, receive, send)


def _control(scope: Scope, path: str) -> bool:
    return path.startswith("/v1/control/")


def _fleet(scope: Scope, path: str) -> bool:
    return path.startswith("/v1/fleet/")


def _tracing(scope: Scope, path: str) -> bool:
    return os.getenv("FLWR_TRACING_ENABLED") == "1"


def _fleet_event_log(scope: Scope, path: str) -> bool:
    app = scope.get("app")
    if app is None:
        return True
    return _fleet(scope, path) and getattr(app.state, "fleet_event_log_plugin", None) is not None


def superlink_conditions() -> dict[type, Condition]:
    """List the SuperLink's layers that act only on some requests, and when (Flower 1.41)."""
    from flwr.supercore.routers.runtime.tracing import RuntimeTracingMiddleware
    from flwr.superlink.routers.control import middlewares as control
    from flwr.superlink.routers.fleet.middlewares import FleetEventLogMiddleware
    from flwr.superlink.routers.fleet.node_auth import NodeAuthMiddleware

    sensitive = control.CONTROL_SENSITIVE_ROUTE_KEYS

    def _sensitive(scope: Scope, path: str) -> bool:
        return (scope.get("method"), path) in sensitive

    return {
        control.ControlSensitiveResponseMiddleware: _sensitive,
        control.ControlAuthenticationMiddleware: _control,
        control.ControlLicenseMiddleware: _control,
        control.ControlEventLogMiddleware: _control,
        RuntimeTracingMiddleware: _tracing,
        NodeAuthMiddleware: _fleet,
        FleetEventLogMiddleware: _fleet_event_log,
    }


def supernode_conditions() -> dict[type, Condition]:
    """List the SuperNode's layers that act only on some requests (Flower 1.41)."""
    from flwr.supercore.routers.runtime.tracing import RuntimeTracingMiddleware

    return {RuntimeTracingMiddleware: _tracing}


def lean_app(app: Any, conditions: dict[type, Condition]) -> Any:
    """Wrap the layers of ``app`` (a FastAPI app not yet serving) named in ``conditions``."""
    from starlette.middleware import Middleware

    wrapped = []
    for layer in app.user_middleware:
        applies = conditions.get(layer.cls)
        if applies is None:
            wrapped.append(layer)
        else:
            wrapped.append(
                Middleware(SkipUnless, layer=layer, applies=applies, name=layer.cls.__name__)
            )
    app.user_middleware[:] = wrapped
    return app


def _patch_create_app(module: Any, conditions: Callable[[], dict[type, Condition]]) -> None:
    original = module.create_app
    if getattr(original, "_fedroc", False):
        return

    def create_app(*args: Any, **kwargs: Any) -> Any:
        return lean_app(original(*args, **kwargs), conditions())

    create_app._fedroc = True  # type: ignore[attr-defined]
    create_app.__wrapped__ = original  # type: ignore[attr-defined]
    module.create_app = create_app


def tuning_enabled() -> bool:
    """Whether fedroc may patch Flower's internals in this process."""
    return os.environ.get("FEDROC_FLOWER_TUNING", "on") != "off"


def tune_superlink_middleware() -> None:
    """Make the SuperLink of this process (``flower_superlink``) build a lean stack."""
    from fedroc.federation.flower._tuning import check_flower_version

    check_flower_version()
    import flwr.superlink.main as main

    _patch_create_app(main, superlink_conditions)


def tune_supernode_middleware() -> None:
    """Make the SuperNode of this process serve its local Runtime API with a lean stack."""
    from fedroc.federation.flower._tuning import check_flower_version

    check_flower_version()
    import flwr.supernode.main as main

    _patch_create_app(main, supernode_conditions)
