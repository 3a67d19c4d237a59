"""fedroc's Flower apps: the ClientApp every site runs and the ServerApp the analyst runs.

``client_app`` answers two query messages:

* ``query.fedroc_hello``: the site's name (from its node config) and fedroc's version;
* ``query.fedroc_call``: run one site function through :meth:`Site.handle`, so the site's
  disclosure policy and audit log apply exactly as in-process, and reply with the released
  record, or with an error reply (policy refusal, bad arguments, misconfigured node).

State between calls: with Flower's default isolation each message runs in a new ClientApp
process, so nothing survives in memory. The site's ``state`` (what site functions keep
between the calls of one protocol, keyed by session id) is stored as records in the run's
``Context.state``, which the SuperNode keeps for the run and hands to the next message.
The site's privacy ledger (its spending and its bindings) is a file beside its audit log,
which every SuperNode has (:mod:`.site_config`), so its limits and bindings hold across
messages, runs and restarts.

``server_app`` runs one fedroc *job* (see :mod:`.jobs`) described by the run config key
``fedroc-job`` (JSON), on a :class:`Federation` backed by :class:`FlowerTransport`, and
prints the JSON result (or the error) as one marked line to its log, which
``fedroc flower run`` reads back through ``flwr log``.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from flwr.app import ConfigRecord, Context, Error, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from fedroc._version import __version__
from fedroc.exceptions import DisclosureError, FedrocError, InputError, SiteError, error_to_dict
from fedroc.federation.federation import Federation
from fedroc.federation.flower._codec import (
    PROTOCOL,
    from_recorddict,
    read_header,
    to_recorddict,
)
from fedroc.federation.flower._marked import (
    MARK,
    emit_marked,
    emit_progress,
    emit_status,
    parse_marked,
    process_started,
)
from fedroc.federation.flower.site_config import cached_site
from fedroc.federation.flower.transport import (
    ERROR_DISCLOSURE,
    ERROR_FEDROC,
    ERROR_INTERNAL,
    ERROR_MISCONFIGURED,
    FlowerTransport,
)
from fedroc.federation.records import decode, encode
from fedroc.federation.site import Site

__all__ = ["JOB_KEY", "MARK", "client_app", "emit_marked", "parse_marked", "server_app"]

_IMPORTED = time.time()  # when this process had Flower and fedroc loaded (job timing)

log = logging.getLogger("fedroc.flower")

JOB_KEY = "fedroc-job"
_STATE = "fedroc.state"

# Flower loads these through fedroc.apps.flower (CLIENT_APP_REF, SERVER_APP_REF); its check
# looks for plain assignments, so they are not annotated.
client_app = ClientApp()
server_app = ServerApp()


# -- site side -------------------------------------------------------------------------------
def _error_reply(
    message: Message, code: int, exc: BaseException, function: str | None = None
) -> Message:
    info = error_to_dict(exc)
    info["function"] = info["function"] or function  # the call's, unless the error names one
    reason = json.dumps(info)
    return Message(Error(code=code, reason=reason), reply_to=message)


def _bundle_executor() -> bool:
    """Whether Flower's own executor runs this ClientApp (``flwr-clientapp``).

    That is a stock SuperNode in its default ``subprocess`` isolation, which runs the
    ClientApp each run's bundle names: the analyst's code could run in fedroc's place and
    read the site's data file (R46). fedroc's executors (the tuned node's, and
    ``fedroc flower executor`` beside a stock node in ``process`` isolation) run it in
    their own processes.
    """
    return Path(sys.argv[0]).name == "flwr-clientapp"


def _site(context: Context, message: Message) -> Site | Message:
    """Return the site of this SuperNode, or an error reply that does not reveal its settings.

    A node whose executor runs the bundle's ClientApp (:func:`_bundle_executor`) serves
    nothing: fedroc fails closed there, so that an operator learns at the first job, not
    from a leak, that the node would run an analyst's code. (Against an analyst this
    check is no guard, since the analyst's bundle need not run it: the node's executor is.)
    """
    if _bundle_executor():
        name = str(dict(context.node_config).get("site", f"node {context.node_id}"))
        return _error_reply(
            message,
            ERROR_MISCONFIGURED,
            SiteError(
                f"site {name!r} serves no fedroc job: its SuperNode runs each run's ClientApp "
                "with Flower's own executor (isolation 'subprocess'), which runs an analyst's "
                "code if the app bundle names it; its operator starts flower-supernode with "
                "--isolation process beside 'fedroc flower executor', or runs "
                "'fedroc flower supernode'",
                site=name,
            ),
        )
    try:
        return cached_site(dict(context.node_config))
    except Exception as exc:
        name = str(dict(context.node_config).get("site", f"node {context.node_id}"))
        # Paths, column names and file contents stay on the site: only its log sees them.
        log.error("fedroc site %r cannot start: %s: %s", name, type(exc).__name__, exc)
        print(f"fedroc site {name!r} cannot start: {exc}", file=sys.stderr, flush=True)
        return _error_reply(
            message,
            ERROR_MISCONFIGURED,
            SiteError(
                f"site {name!r} is misconfigured on its SuperNode (details in its log)", site=name
            ),
        )


def _load_state(context: Context, site: Site) -> None:
    state = context.state[_STATE] if _STATE in context.state else ConfigRecord()
    site.state = {key: decode(bytes(blob)) for key, blob in state.items()}  # type: ignore[arg-type]
    if site.ledger.path is None:  # SiteNodeConfig.build always gives the site a ledger file
        raise InputError(f"site {site.name!r} has no ledger file; a SuperNode needs one")


def _save_state(context: Context, site: Site) -> None:
    blobs: dict[str, Any] = {}
    for key, value in site.state.items():
        try:
            blobs[key] = encode(value)
        except InputError as exc:
            raise InputError(
                f"site state {key!r} is not a record ({exc}); on Flower the state kept "
                "between calls must be records"
            ) from None
    context.state[_STATE] = ConfigRecord(blobs)


@client_app.query("fedroc_hello")
def _hello(message: Message, context: Context) -> Message:
    site = _site(context, message)
    if isinstance(site, Message):
        return site
    info: dict[str, Any] = {
        "site": site.name,
        "version": __version__,
        "protocol": PROTOCOL,
    }
    return Message(to_recorddict({}, info), reply_to=message)


@client_app.query("fedroc_call")
def _call(message: Message, context: Context) -> Message:
    site = _site(context, message)
    if isinstance(site, Message):
        return site
    function: str | None = None
    try:
        call = read_header(message.content)
        function = str(call["function"])
        if int(call["protocol"]) != PROTOCOL:
            raise InputError(
                f"the analyst speaks fedroc protocol {call['protocol']}, site {site.name!r} "
                f"{PROTOCOL}; install the same fedroc version on both"
            )
        args = from_recorddict(message.content)
        requester = f"{call['requester']} (Flower run {context.run_id})"
        _load_state(context, site)
        try:
            reply = site.handle(function, args, requester)
        finally:
            _save_state(context, site)
    except DisclosureError as exc:
        return _error_reply(message, ERROR_DISCLOSURE, exc, function)
    except FedrocError as exc:
        return _error_reply(message, ERROR_FEDROC, exc, function)
    except Exception as exc:
        # Messages of other exceptions may quote data or paths: they stay in the site's log
        # (and its audit log); the analyst learns the type only.
        log.exception("site %r: %r failed", site.name, function)
        hidden = SiteError(
            f"site {site.name!r}: {function!r} failed with {type(exc).__name__} "
            "(details in the site's log)",
            site=site.name,
            function=function,
        )
        return _error_reply(message, ERROR_INTERNAL, hidden)
    return Message(to_recorddict(reply), reply_to=message)


# -- analyst side ----------------------------------------------------------------------------
@server_app.main()
def _main(grid: Grid, context: Context) -> None:
    from fedroc.federation.flower._tuning import tune_object_pulls
    from fedroc.federation.flower.jobs import run_job

    clock = {"serverapp_process": process_started(), "serverapp_imported": _IMPORTED}
    clock["serverapp_main"] = time.time()
    if os.environ.get("FEDROC_FLOWER_TUNING", "on") != "off":
        try:
            tune_object_pulls()
        except InputError:
            pass  # another Flower version: its default (slower) retries apply
    try:
        spec = json.loads(str(context.run_config[JOB_KEY]))
        for module in spec.get("modules") or []:
            importlib.import_module(str(module))
        started = time.perf_counter()
        transport = FlowerTransport(
            grid,
            sites=spec.get("sites"),
            timeout=float(spec.get("timeout", 60.0)),
            discovery_timeout=float(spec.get("discovery_timeout", 60.0)),
            min_sites=int(spec.get("min_sites", 1)),
            site_keys=spec.get("site_keys"),
            require_registered=bool(spec.get("require_registered", False)),
            status=emit_status,
        )
        federation = Federation(
            transport, requester=str(spec.get("requester", "analyst")), timeout=transport.timeout
        )
        federation.progress = emit_progress  # relayed by `fedroc flower run` to its terminal
        discovered = time.perf_counter()
        clock["discovered"] = time.time()
        result = run_job(str(spec["job"]), federation, dict(spec.get("options", {})))
        clock["job_done"] = time.time()
        payload = {
            "job": spec["job"],
            "result": result,
            "sites": federation.site_names,
            "node_ids": transport.node_ids,
            "site_versions": transport.site_versions,
            "refused": {str(node): why for node, why in transport.refused.items()},
            "run_id": context.run_id,
            "seconds": {
                "discovery": discovered - started,
                "job": time.perf_counter() - discovered,
                "calls": [c.seconds for c in federation.transcript],
            },
            "clock": clock,
        }
    except (FedrocError, KeyError, ValueError, TypeError) as exc:
        emit_marked("error", error_to_dict(exc))
        raise
    except Exception as exc:
        emit_marked("error", error_to_dict(SiteError(f"{type(exc).__name__}: {exc}", site="?")))
        raise
    emit_marked("result", payload)
