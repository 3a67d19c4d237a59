"""A SuperNode tuned for fedroc's many short rounds (``fedroc flower supernode``).

A stock ``flower-supernode`` (Flower 1.41) serves fedroc correctly but slowly: while idle it
asks the SuperLink for work every 3 s, and it starts a new ClientApp process (Python,
Flower, fedroc, the site's data file) for every message. fedroc's protocols are many
rounds of small messages, so each round costs 3-6 s there.

This launcher runs the same ``flower-supernode`` (same flags, same Fleet API, same TLS) with
two changes, both confined to this process:

* polling: after each message the SuperNode polls again after 20 ms, backing off
  geometrically to 0.5 s (Flower: a fixed 3 s) while nothing arrives, so a run's next round
  and a new run's first message are picked up at once; a message part not uploaded yet is
  pulled again after 5 ms instead of 1 s; heartbeats every 10 s instead of 30 s, so a node
  that crashed can reconnect after 20 s instead of 60 s, and the node started again meanwhile
  asks the SuperLink every second until then instead of exiting (see :mod:`._tuning`);
* execution: the SuperNode runs in Flower's ``process`` isolation mode and a thread of this
  process is its executor: it acquires each ClientApp task from the SuperNode's local
  Runtime API and runs fedroc's ClientApp in this process (the site's table is loaded once).
  It runs only fedroc's ClientApp: a run whose app names another ClientApp gets an error
  reply, so no code shipped by an analyst ever runs at the site. Its local Runtime API
  skips Flower's tracing layer while tracing is off (:mod:`._middleware`).

:func:`supervise` (what ``fedroc flower supernode`` runs) starts the node as a child
process and starts it again when it exits, e.g. after a SuperLink outage; the node writes
``status.json`` in its node directory (the directory of its ``--node-config``) for
``fedroc flower health``, and logs JSON lines (:mod:`._logs`).

Semantics are those of the stock node: state between calls still travels in the run's
``Context.state``. Both changes use Flower internals of 1.41 (:mod:`._tuning`;
``pull_task_input``/``push_message``/``push_task_output`` of
``flwr.supernode.runtime.run_clientapp``), so the launcher refuses other Flower versions;
the stock ``flower-supernode --isolation process --node-config`` beside ``fedroc flower
executor`` (:mod:`.executor`) works too.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fedroc.exceptions import InputError
from fedroc.federation.flower import CLIENT_APP_REF, load_app
from fedroc.federation.flower._middleware import tune_supernode_middleware
from fedroc.federation.flower._process import die_with_parent, option_value
from fedroc.federation.flower._tuning import (
    EXECUTOR,
    STATUS,
    TASK_READY,
    check_flower_version,
    previous_session_end,
    pull_deadline,
    tune_node_activation,
    tune_supernode_polling,
)
from fedroc.federation.flower.identity import PUBLIC_NAME

__all__ = [
    "CLIENT_APP_REF",
    "InProcessExecutor",
    "in_process_isolation",
    "main",
    "run_supernode",
    "write_runtime_secret",
]

log = logging.getLogger("fedroc.flower")

FAST_POLL = float(os.environ.get("FEDROC_FLOWER_POLL", "0.02"))
STATUS_NAME = "status.json"


def _clientapp_ref(fab_content: bytes) -> str | None:
    try:
        with zipfile.ZipFile(io.BytesIO(fab_content)) as zf:
            config = tomllib.loads(zf.read("pyproject.toml").decode())
        return str(config["tool"]["flwr"]["app"]["components"]["clientapp"])
    except Exception:
        return None


class RuntimeApi:
    """The SuperNode's Runtime API app, once Flower has created it in this process."""

    def __init__(self) -> None:
        self.app: Any = None
        self.ready = threading.Event()

    def capture(self) -> None:
        """Record the app ``flower_supernode`` creates (``flwr.supernode.main.create_app``)."""
        import flwr.supernode.main as main

        original = main.create_app
        if getattr(original, "_fedroc_capture", False):
            return

        def create_app(*args: Any, **kwargs: Any) -> Any:
            self.app = original(*args, **kwargs)
            self.ready.set()
            return self.app

        create_app._fedroc_capture = True  # type: ignore[attr-defined]
        create_app.__wrapped__ = original  # type: ignore[attr-defined]
        main.create_app = create_app


RUNTIME = RuntimeApi()


def _route(handler: str) -> Callable[[DirectRuntimeClient, Any], Any]:
    """Return a client method that runs the Runtime API ``handler`` for the task of its token."""

    def method(self: DirectRuntimeClient, request: Any) -> Any:
        return self._call(handler, request)

    return method


class DirectRuntimeClient:
    """The SuperNode's Runtime API, called in this process instead of over HTTP.

    Each method runs what Flower 1.41's Runtime route of the same name runs
    (``flwr.supercore.routers.runtime.router``): the handler the SuperNode's app was built
    with, on its state, after authenticating the task token exactly as the route's
    dependency does (``authenticate_task``: an unknown, expired or revoked token fails with
    Flower's ``RUNTIME_AUTHENTICATION_FAILED``). ``AcquireTask`` needs no token; over HTTP
    it needs the SuperExec secret (:func:`run_supernode` sets one), which this process does
    not need because it calls the handler itself. No request leaves the process, so the
    executor and the node do not share a plain-HTTP channel any other local process could
    use.
    """

    def __init__(self, app: Any, token: str | None = None) -> None:
        self._app = app
        self._token = token

    def _state(self) -> Any:
        return self._app.state.runtime_state_factory.state()

    def _task(self, state: Any) -> Any:
        from flwr.supercore.error import ApiErrorCode, FlowerError

        task = state.get_task_by_token(self._token) if self._token else None
        if task is None:
            raise FlowerError(
                ApiErrorCode.RUNTIME_AUTHENTICATION_FAILED,
                "Runtime task-token authentication failed.",
            )
        return task

    def _call(self, name: str, request: Any) -> Any:
        state = self._state()
        task = self._task(state)
        return getattr(self._app.state.runtime_handlers, name)(request, state, task)

    # Flower's client method names.
    def AcquireTask(self, request: Any) -> Any:
        return self._app.state.runtime_handlers.acquire_task(request, self._state())

    def SendTaskHeartbeat(self, request: Any) -> Any:
        from flwr.supercore.servicer.runtime import runtime_handlers as core

        state = self._state()
        return core.send_task_heartbeat(request, state, self._task(state))

    # The routes that run their handler on the authenticated task (:meth:`_call`).
    PullTaskInput = _route("pull_task_input")
    PushTaskOutput = _route("push_task_output")
    PullMessages = _route("pull_messages")
    PushMessages = _route("push_messages")
    PullObject = _route("pull_object")
    PushObject = _route("push_object")
    ConfirmMessageReceived = _route("confirm_message_received")

    def close(self) -> None:
        pass


class InProcessExecutor:
    """Acquire the SuperNode's ClientApp tasks and run fedroc's ClientApp in this process.

    It calls the node's Runtime API in this process (:class:`DirectRuntimeClient`) once
    ``flower_supernode`` has created it (:data:`RUNTIME`).

    Parameters
    ----------
    runtime : RuntimeApi, default :data:`RUNTIME`
        Where the SuperNode's Runtime API app appears once Flower has created it.
    fast : float, default ``$FEDROC_FLOWER_POLL`` or 0.02
        The SuperNode's fast poll interval in seconds, kept with the executor.
    node_config : Path, optional
        The node's ``--node-config`` TOML file: its site is built (data loaded) before the
        first task, so that a freshly started node answers its first message at once.
    """

    def __init__(
        self,
        runtime: RuntimeApi = RUNTIME,
        *,
        fast: float = FAST_POLL,
        node_config: Path | None = None,
    ) -> None:
        self.runtime = runtime
        self.fast = fast
        self.node_config = node_config
        self.stop = threading.Event()

    def preload(self) -> None:
        """Import fedroc's ClientApp and build the node's site, as its first message would.

        On a loaded machine this took longer than an analyst's discovery timeout (the node
        was connected, its first hello unanswered). A failure is left to the first message,
        which answers "misconfigured" as without the preload.
        """
        from flwr.common.config import parse_config_args

        from fedroc.federation.flower.site_config import cached_site

        try:
            load_app(CLIENT_APP_REF)
            if self.node_config is not None:
                cached_site(parse_config_args([str(self.node_config)]))
        except Exception as exc:
            log.warning("fedroc executor: the site is not ready yet: %s", exc)

    def _client(self, token: str | None) -> Any:
        # Flower's run_clientapp functions take a RuntimeHttpClient; this one has its methods.
        return DirectRuntimeClient(self.runtime.app, token)

    def _wait_for_api(self) -> None:
        while not self.stop.is_set() and not self.runtime.ready.wait(0.1):
            pass

    def run(self) -> None:
        """Acquire ClientApp tasks from the SuperNode and run each one until :attr:`stop` is set."""
        from flwr.proto.runtime_pb2 import AcquireTaskRequest
        from flwr.supercore.constant import TaskType

        self.preload()
        self._wait_for_api()
        client = self._client(None)
        while not self.stop.is_set():
            self._arm()
            try:
                res = client.AcquireTask(
                    AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP])
                )
            except Exception as exc:  # the SuperNode is shutting down or restarting
                log.warning("fedroc executor: cannot acquire a task: %s", exc)
                time.sleep(1.0)
                continue
            if res.HasField("task") and res.token:
                self.execute(res.token)
                continue
            self._idle()

    def _arm(self) -> None:
        # Cleared before asking, so a task stored after the answer still wakes us.
        TASK_READY.clear()

    def _idle(self) -> None:
        """Wait until the node in this process stores a task (or a second has passed)."""
        TASK_READY.wait(timeout=1.0)

    def execute(self, token: str) -> None:
        """Run one ClientApp task, as ``flwr-clientapp`` would, without a new process."""
        EXECUTOR.busy.set()
        try:
            self._execute(token)
        finally:
            EXECUTOR.idle_since = time.monotonic()
            EXECUTOR.busy.clear()

    def _execute(self, token: str) -> None:
        from flwr.app import Error, Message
        from flwr.common.constant import ErrorCode, SubStatus
        from flwr.proto.runtime_pb2 import SendTaskHeartbeatRequest
        from flwr.supernode.runtime.run_clientapp import (
            pull_task_input,
            push_message,
            push_task_output,
        )

        client_app = load_app(CLIENT_APP_REF)

        client = self._client(token)
        done = threading.Event()

        def heartbeat() -> None:  # claimed tasks expire after 30 s without one
            while not done.wait(10.0):
                try:
                    client.SendTaskHeartbeat(SendTaskHeartbeatRequest())
                except Exception:
                    return

        threading.Thread(target=heartbeat, daemon=True).start()
        message = context = reply = None
        status, details = SubStatus.FAILED, "ClientApp task failed"
        try:
            # The node stored the message before creating the task: its parts are there at
            # once, or never (the run was stopped and its objects dropped).
            with pull_deadline(time.monotonic() + 10.0):
                message, context, _run, fab = pull_task_input(client)
            ref = _clientapp_ref(fab.content)
            if ref != CLIENT_APP_REF:
                reply = Message(
                    Error(
                        code=ErrorCode.LOAD_CLIENT_APP_EXCEPTION,
                        reason=f"this SuperNode runs only fedroc's ClientApp, not {ref!r}",
                    ),
                    reply_to=message,
                )
                details = "refused a foreign ClientApp"
            else:
                reply = client_app(message=message, context=context)
                status, details = SubStatus.COMPLETED, ""
        except Exception as exc:
            log.exception("fedroc executor: task failed")
            details = f"{type(exc).__name__}: {exc}"
            if message is not None:
                reply = Message(
                    Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=details),
                    reply_to=message,
                )
        finally:
            done.set()
            try:
                if reply is not None and context is not None:
                    push_message(client, reply, context)
                push_task_output(client, context, status, details)
            except Exception as exc:
                log.warning("fedroc executor: cannot push the reply: %s", exc)
            client.close()


def _node_config(args: Sequence[str]) -> tuple[str | None, Path | None]:
    """Return the site's name and the node directory (that of ``--node-config FILE``)."""
    path = option_value(args, "--node-config", "")
    if not path or not Path(path).is_file():
        return None, None
    try:
        site = tomllib.loads(Path(path).read_text()).get("site")
    except (OSError, ValueError):  # TOMLDecodeError, UnicodeDecodeError
        site = None
    return (None if site is None else str(site)), Path(path).resolve().parent


def write_runtime_secret(node_dir: Path | None, name: str = "runtime-api.secret") -> Path:
    """Write a fresh random secret for the node's Runtime API (owner-only file).

    In ``node_dir`` as ``name``, or a temporary file without a node directory.
    """
    if node_dir is None:
        fd, temporary = tempfile.mkstemp(prefix="fedroc-runtime-", suffix=".secret")
        os.close(fd)
        path = Path(temporary)
    else:
        path = node_dir / name
    path.touch(mode=0o600)
    os.chmod(path, 0o600)
    path.write_bytes(secrets.token_bytes(32))
    return path


def in_process_isolation(
    args: list[str], node_dir: Path | None, secret_name: str = "runtime-api.secret"
) -> Path | None:
    """Give ``flower-supernode`` arguments ``process`` isolation and a SuperExec secret.

    ``args`` change in place: ``--isolation process`` unless given, and
    ``--superexec-auth-secret-file`` with a fresh secret (:func:`write_runtime_secret`)
    unless given. Another isolation is refused: in ``subprocess`` isolation Flower's own
    executor runs the ClientApp the run's bundle names, not fedroc's (R46).

    Returns
    -------
    Path or None
        The secret file written, or None when ``args`` named one.
    """
    isolation = option_value(args, "--isolation", "process")
    if isolation != "process":
        raise InputError(
            "fedroc's executor runs the ClientApp itself (isolation 'process'); got "
            f"--isolation {isolation}, where Flower's executor runs the ClientApp the run's "
            "bundle names"
        )
    if "--isolation" not in args:
        args += ["--isolation", "process"]
    if option_value(args, "--superexec-auth-secret-file", ""):
        return None
    secret = write_runtime_secret(node_dir, secret_name)
    args += ["--superexec-auth-secret-file", str(secret)]
    return secret


#: Flower's words when the SuperLink refuses to activate a node (FLEET_NODE_ACTIVATION_FAILED).
ACTIVATION_FAILED = "Failed to activate SuperNode"


def activation_hint(flower_args: Sequence[str]) -> str:
    """Return the line said after Flower's "Failed to activate SuperNode": what to run.

    The SuperLink activates only a key registered with it (``fedroc flower register``,
    docs/flower.md step 4) and not active in another SuperNode. An unregistered node exited
    with Flower's words alone and was restarted every 1-30 s, printing them again.
    """
    site, _ = _node_config(flower_args)
    superlink = option_value(flower_args, "--superlink", "") or "HOST:PORT"
    private = option_value(flower_args, "--auth-supernode-private-key", "")
    public = str(Path(private).with_name(PUBLIC_NAME)) if private else "NODE_DIR/node-auth.pub"
    return (
        f"the SuperLink did not activate this SuperNode's key: is it registered? The "
        f"SuperLink's operator runs `fedroc flower register --superlink {superlink} "
        f"--root-certificates CA --site-key {site or 'SITE'}={public}` (or the key is in use "
        "by another SuperNode); this node tries again at its next restart"
    )


class _ActivationHint(logging.Handler):
    """Log :func:`activation_hint` after Flower's record that says the activation failed."""

    def __init__(self, hint: str) -> None:
        super().__init__(logging.ERROR)
        self.hint = hint

    def emit(self, record: logging.LogRecord) -> None:
        if ACTIVATION_FAILED in record.getMessage():
            log.error(self.hint)


def add_activation_hint(flower_args: Sequence[str]) -> logging.Handler:
    """Say what to run after Flower logs "Failed to activate SuperNode" (Flower unchanged).

    Added to Flower's logger after its other handlers, so that the hint follows Flower's
    lines; returns the handler.
    """
    handler = _ActivationHint(activation_hint(flower_args))
    logging.getLogger("flwr").addHandler(handler)
    return handler


def run_supernode(flower_args: Sequence[str], *, fast: float = FAST_POLL) -> None:
    """Run ``flower-supernode`` with ``flower_args``, tuned as described above (blocks)."""
    check_flower_version()
    args = list(flower_args)
    site, node_dir = _node_config(args)
    add_activation_hint(args)
    previous = None
    if node_dir is not None:
        STATUS.configure(node_dir / STATUS_NAME, site)
        with contextlib.suppress(OSError, ValueError):
            previous = json.loads((node_dir / STATUS_NAME).read_text())
    # The executor calls the Runtime API in this process; over HTTP, AcquireTask then needs
    # the secret, which nothing outside the process knows.
    secret = in_process_isolation(args, node_dir)
    tune_supernode_polling(fast)
    tune_node_activation(previous_session_end(previous, time.time()))
    tune_supernode_middleware()
    RUNTIME.capture()
    config = option_value(args, "--node-config", "")
    executor = InProcessExecutor(
        RUNTIME, fast=fast, node_config=Path(config) if config.endswith(".toml") else None
    )
    threading.Thread(target=executor.run, name="fedroc-executor", daemon=True).start()
    from flwr.supernode.cli import flower_supernode

    sys.argv = ["flower-supernode", *args]
    try:
        flower_supernode()
    finally:
        executor.stop.set()
        if secret is not None and node_dir is None:
            secret.unlink(missing_ok=True)


def supervise(
    flower_args: Sequence[str], *, restart: bool = True, log: Callable[[str], Any] = print
) -> int:
    """Run the tuned SuperNode as a child process and start it again when it exits.

    Flower's SuperNode gives up after a SuperLink outage (its connection is retried for a
    while, then the process exits); the SuperLink restarted on its database still knows
    the node's key, so starting the node again is all recovery takes. Restarts back off
    (1, 2, 4 ... 30 s; reset after a minute of running). SIGTERM/SIGINT stop the child and
    return 0. Returns the child's exit status when ``restart`` is False.
    """
    cmd = [sys.executable, "-m", "fedroc.federation.flower.node", *flower_args]
    state: dict[str, Any] = {"stopping": False, "child": None}

    def stop(signum: int, frame: Any) -> None:
        state["stopping"] = True
        child = state["child"]
        if child is not None and child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    failures = 0
    try:
        while True:
            started = time.monotonic()
            child = subprocess.Popen(cmd, start_new_session=True, preexec_fn=die_with_parent)
            state["child"] = child
            code = child.wait()
            if state["stopping"]:
                return 0
            if not restart:
                return code
            failures = 0 if time.monotonic() - started > 60.0 else failures + 1
            delay = min(2.0**failures, 30.0)
            log(f"the SuperNode exited with status {code}; starting it again in {delay:g} s")
            end = time.monotonic() + delay
            while time.monotonic() < end and not state["stopping"]:
                time.sleep(0.1)
            if state["stopping"]:
                return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main() -> None:
    """Run ``fedroc flower supernode``: a SuperNode with fedroc's ClientApp in process (blocks)."""
    import faulthandler
    import signal

    from fedroc.federation.flower._logs import configure

    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID` prints every thread's stack
    site, _ = _node_config(sys.argv[1:])
    configure("supernode", site=site)
    run_supernode(sys.argv[1:])


if __name__ == "__main__":
    main()
