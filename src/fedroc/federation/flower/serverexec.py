"""A warm executor of the SuperLink's ServerApp tasks: a job starts without a new interpreter.

Stock Flower 1.41 runs every job's ServerApp in a new ``flwr-serverapp`` process started by
``flower-superexec``: Python, Flower, numpy, scipy and fedroc load again for each job,
1.5-2 s on an idle 2-core machine and several times that on a busy one. This executor
imports all of that once, then, for each ServerApp task it acquires from the SuperLink's
Runtime API (the same ``AcquireTask`` call ``flower-superexec`` makes), forks a child that
runs Flower's own ``flwr-serverapp`` entry point with the task's token. The child is a fresh
process (a crash or a leaked state ends with it) that starts with everything loaded.

The SuperLink must run with ``--isolation process`` (it then starts no SuperExec of its
own); ``fedroc flower superlink`` does both unless ``--serverapp-executor stock``. The
acquire loop uses Flower 1.41's Runtime API client, so :func:`run` refuses other versions
and the launcher falls back to the stock SuperExec. POSIX only (``os.fork``).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["main", "preload", "run"]

log = logging.getLogger("fedroc.flower")

# Pause between two AcquireTask calls: short for a while after a job (batches of jobs),
# then longer while idle (each call is an HTTPS request the SuperLink answers).
POLL_BUSY, POLL_IDLE, BUSY_FOR = 0.1, 0.25, 5.0


def preload() -> None:
    """Import what every job's ServerApp needs, before forking."""
    import flwr.superlink.cli.flwr_serverapp
    import flwr.superlink.runtime.run_serverapp  # noqa: F401

    from fedroc.federation.flower import SERVER_APP_REF, load_app

    load_app(SERVER_APP_REF)  # the application: every site function, method and job


def _client(address: str, root_certificates: str | None) -> Any:
    import httpx
    from flwr.supercore.interceptors import RuntimeVersionHttpInterceptor
    from flwr.supercore.retry import RetryInvoker, exponential
    from flwr.supercore.runtime import RuntimeHttpClient

    certificates = None
    if root_certificates is not None:
        with open(root_certificates, "rb") as fh:
            certificates = fh.read()
    return RuntimeHttpClient.from_server_address(
        server_address=address,
        insecure=root_certificates is None,
        root_certificates=certificates,
        interceptors=[RuntimeVersionHttpInterceptor(component_name="SuperExec")],
        # Not Flower's default invoker: on HTTP 401 it sends SIGINT to its own process.
        retry_invoker=RetryInvoker(
            lambda: exponential(max_delay=1),
            (httpx.ConnectError, httpx.ReadError, httpx.WriteError, httpx.ConnectTimeout),
            max_tries=3,
            max_time=5.0,
        ),
    )


def _child(address: str, root_certificates: str | None, token: str) -> int:
    """In the forked child: Flower's ``flwr-serverapp`` for this task."""
    from flwr.superlink.cli.flwr_serverapp import flwr_serverapp

    sys.argv = ["flwr-serverapp", "--runtime-api-address", address, "--token", token]
    sys.argv += ["--parent-pid", str(os.getppid())]
    if root_certificates is None:
        sys.argv.append("--insecure")
    else:
        sys.argv += ["--root-certificates", root_certificates]
    try:
        flwr_serverapp()
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else 1
    return 0


def _reap(children: set[int]) -> None:
    for pid in list(children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            children.discard(pid)


def run(address: str, root_certificates: str | None) -> None:
    """Acquire ServerApp tasks from the SuperLink at ``address`` and fork one child each."""
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore.constant import TaskType

    from fedroc.federation.flower._tuning import check_flower_version

    check_flower_version()
    preload()
    client = _client(address, root_certificates)
    children: set[int] = set()
    last_task = 0.0
    while True:
        _reap(children)
        try:
            res = client.AcquireTask(AcquireTaskRequest(supported_task_types=[TaskType.SERVER_APP]))
        except Exception as exc:  # the SuperLink is starting or restarting
            log.warning("fedroc ServerApp executor: cannot acquire a task: %s", exc)
            time.sleep(0.5)
            continue
        if res.HasField("task") and res.token:
            last_task = time.monotonic()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child's coverage is not collected
                code = 1
                try:
                    code = _child(address, root_certificates, str(res.token))
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            children.add(pid)
            continue
        busy = time.monotonic() - last_task < BUSY_FOR
        time.sleep(POLL_BUSY if busy else POLL_IDLE)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and run the warm executor (see :func:`run`; blocks)."""
    import argparse

    from fedroc.federation.flower._logs import configure

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime-api-address", required=True)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--root-certificates")
    group.add_argument("--insecure", action="store_true")
    args = parser.parse_args(argv)
    configure("serverapp-executor")
    run(args.runtime_api_address, None if args.insecure else args.root_certificates)


if __name__ == "__main__":
    main()
