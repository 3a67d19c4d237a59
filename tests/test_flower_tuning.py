"""fedroc's speed-ups of Flower 1.41 without processes (fast): the lean middleware stacks
of the SuperLink and the SuperNode answer every request as Flower's own stacks do, while
skipping the layers that have nothing to do; the version gate; the app references that
``flwr run`` checks load nothing heavy; the ServerApp executor's polling. A job on the
stock stack (``FEDROC_FLOWER_TUNING=off``) runs in test_flower_deploy.py
(``test_flower_up_cli_insecure_stock``)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("flwr")

from flwr.proto.control_pb2 import GetLoginDetailsRequest, ListRunsRequest
from flwr.proto.fleet_pb2 import PullMessagesRequest
from flwr.proto.runtime_pb2 import AcquireTaskRequest, GetNodesRequest
from flwr.supercore.constant import TaskType
from flwr.supercore.protobuf.translation import PROTOBUF_MEDIA_TYPE

from fedroc.exceptions import InputError
from fedroc.federation.flower import _middleware, serverexec
from fedroc.federation.flower._middleware import (
    SkipUnless,
    lean_app,
    superlink_conditions,
    supernode_conditions,
)

# (method, path, protobuf request or None): one of each API, a sensitive Control route.
REQUESTS = [
    ("GET", "/health", None),
    ("POST", "/v1/control/get-login-details", GetLoginDetailsRequest()),
    ("POST", "/v1/control/list-runs", ListRunsRequest(run_id=12345)),  # unknown run
    ("POST", "/v1/fleet/pull-messages", PullMessagesRequest()),
    (
        "POST",
        "/v1/runtime/acquire-task",
        AcquireTaskRequest(supported_task_types=[TaskType.SERVER_APP]),
    ),
    ("POST", "/v1/runtime/get-nodes", GetNodesRequest()),
    ("POST", "/v1/nowhere", None),
]

CONTROL = {
    "ControlAuthenticationMiddleware",
    "ControlLicenseMiddleware",
    "ControlEventLogMiddleware",
}
# The conditional layers a lean SuperLink runs for each request above (a stock one: all).
EXPECTED_LEAN = {
    "/health": set(),
    "/v1/control/get-login-details": CONTROL | {"ControlSensitiveResponseMiddleware"},
    "/v1/control/list-runs": CONTROL,
    "/v1/fleet/pull-messages": {"NodeAuthMiddleware"},
    "/v1/runtime/acquire-task": set(),
    "/v1/runtime/get-nodes": set(),
    "/v1/nowhere": set(),
}


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Names of the conditional layers whose ``dispatch`` ran, in order."""
    calls: list[str] = []
    for cls in {**superlink_conditions(), **supernode_conditions()}:
        original = cls.dispatch

        async def dispatch(self: Any, request: Any, call_next: Any, _o: Any = original) -> Any:
            calls.append(type(self).__name__)
            return await _o(self, request, call_next)

        monkeypatch.setattr(cls, "dispatch", dispatch)
    yield calls


class Client:
    """Requests to an ASGI app in this process (no server, no lifespan)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def send(self, method: str, path: str, body: Any) -> tuple[int, bytes, list]:
        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                if body is None:
                    return await client.request(method, path)
                return await client.request(
                    method,
                    path,
                    content=body.SerializeToString(),
                    headers={"content-type": PROTOBUF_MEDIA_TYPE},
                )

        res = asyncio.run(go())
        return res.status_code, res.content, sorted(res.headers.items())


def _send(client: Client, method: str, path: str, body: Any) -> tuple[int, bytes, list]:
    return client.send(method, path, body)


def _superlink(lean: bool) -> Any:
    from flwr.superlink.main import create_app

    app = create_app()
    return lean_app(app, superlink_conditions()) if lean else app


def test_lean_superlink_answers_as_flowers_own_and_skips_idle_layers(ran: list[str]) -> None:
    stock = Client(_superlink(False))
    lean = Client(_superlink(True))
    every = {c.__name__ for c in superlink_conditions()}
    for method, path, body in REQUESTS:
        ran.clear()
        expected = _send(stock, method, path, body)
        in_stock = set(ran)
        ran.clear()
        got = _send(lean, method, path, body)
        assert got == expected, path
        assert set(ran) == EXPECTED_LEAN[path], path
        assert set(ran) <= in_stock
        if path == "/health":  # Flower's stack runs every layer on a request nothing stops
            assert in_stock == every
    # The layers still act where they apply: the no-cache headers, Fleet authentication.
    _, _, headers = _send(
        lean, "POST", "/v1/control/get-login-details", GetLoginDetailsRequest()
    )
    assert ("cache-control", "no-store") in headers
    status, _, _ = _send(lean, "POST", "/v1/fleet/pull-messages", PullMessagesRequest())
    assert status == 401


def test_tracing_layer_runs_when_tracing_is_on(
    ran: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lean = Client(_superlink(True))
    _send(lean, "POST", "/v1/runtime/get-nodes", GetNodesRequest())
    assert "RuntimeTracingMiddleware" not in ran
    monkeypatch.setenv("FLWR_TRACING_ENABLED", "1")
    _send(lean, "POST", "/v1/runtime/get-nodes", GetNodesRequest())
    assert "RuntimeTracingMiddleware" in ran


def test_lean_supernode_answers_as_flowers_own(ran: list[str]) -> None:
    from flwr.supernode.main import create_app

    stock = Client(create_app())
    lean_application = lean_app(create_app(), supernode_conditions())
    assert [m.cls for m in lean_application.user_middleware].count(SkipUnless) == 1
    lean = Client(lean_application)
    for method, path, body in REQUESTS:
        ran.clear()
        expected = _send(stock, method, path, body)
        assert ran == ["RuntimeTracingMiddleware"], path
        ran.clear()
        assert _send(lean, method, path, body) == expected, path
        assert ran == [], path


def test_patches_install_once_and_only_on_flower_1_41(monkeypatch: pytest.MonkeyPatch) -> None:
    import flwr.superlink.main as main
    import flwr.supernode.main as node_main

    for module in (main, node_main):
        monkeypatch.setattr(module, "create_app", module.create_app)
    _middleware.tune_superlink_middleware()
    _middleware.tune_supernode_middleware()
    patched = main.create_app
    _middleware.tune_superlink_middleware()  # idempotent
    assert main.create_app is patched
    assert any(m.cls is SkipUnless for m in main.create_app().user_middleware)
    assert any(m.cls is SkipUnless for m in node_main.create_app().user_middleware)

    import flwr.supercore.version as version

    monkeypatch.setattr(version, "package_version", "1.42.0")
    monkeypatch.setattr(main, "create_app", patched.__wrapped__)
    with pytest.raises(InputError, match="1.42.0"):
        _middleware.tune_superlink_middleware()
    assert not getattr(main.create_app, "_fedroc", False)


def test_tuning_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FEDROC_FLOWER_TUNING", raising=False)
    assert _middleware.tuning_enabled()
    monkeypatch.setenv("FEDROC_FLOWER_TUNING", "off")
    assert not _middleware.tuning_enabled()


def test_app_references_checked_by_flwr_run_load_nothing_heavy() -> None:
    # `flwr run` validates the app's components with importlib.util.find_spec, which imports
    # their parent packages; an eager fedroc.apps once cost every job 2-3 s of the CLI.
    code = (
        "import importlib.util, sys\n"
        "from fedroc.federation.flower import CLIENT_APP_REF, SERVER_APP_REF\n"
        "for ref in (CLIENT_APP_REF, SERVER_APP_REF):\n"
        "    assert importlib.util.find_spec(ref.partition(':')[0]) is not None\n"
        "print(sorted(m for m in ('numpy', 'pandas', 'scipy', 'flwr', 'fedroc.methods')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_serverapp_executor_polls_slowly_while_a_job_runs() -> None:
    assert serverexec.poll_pause(1, 0.0) == serverexec.POLL_RUNNING
    assert serverexec.poll_pause(0, 1.0) == serverexec.POLL_BUSY  # just after a job
    assert serverexec.poll_pause(0, 60.0) == serverexec.POLL_IDLE
    assert serverexec.POLL_BUSY < serverexec.POLL_IDLE < serverexec.POLL_RUNNING
