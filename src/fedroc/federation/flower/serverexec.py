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

# Pause between two AcquireTask calls: short for a while after a job ended (batches of
# jobs), longer while idle, longest while a job runs: each call is an HTTPS request that
# costs the SuperLink a few SQL statements, and a job's rounds need the SuperLink's CPU (at
# 0.1-0.25 s these polls were a tenth of its requests during a job). A job submitted while
# another runs starts within POLL_RUNNING.
POLL_BUSY, POLL_IDLE, POLL_RUNNING, BUSY_FOR = 0.1, 0.25, 1.0, 5.0


def poll_pause(running: int, since_last_end: float) -> float:
    """Seconds before the next AcquireTask, with ``running`` children alive."""
    if running:
        return POLL_RUNNING
    return POLL_BUSY if since_last_end < BUSY_FOR else POLL_IDLE


def preload() -> None:
    """Import what every job's ServerApp needs, before forking."""
    import flwr.superlink.cli.flwr_serverapp
    import flwr.superlink.runtime.run_serverapp  # noqa: F401

    from fedroc.federation.flower import SERVER_APP_REF, load_app
    from fedroc.federation.flower._middleware import tuning_enabled
    from fedroc.federation.flower._tuning import tune_log_upload

    load_app(SERVER_APP_REF)  # the application: every site function, method and job
    if tuning_enabled():
        tune_log_upload()  # the job's result line reaches the SuperLink sooner


def _client(address: str, root_certificates: str | None, secret: bytes | None = None) -> Any:
    import httpx
    from flwr.supercore.interceptors import (
        RuntimeVersionHttpInterceptor,
        SuperExecAuthHttpInterceptor,
    )
    from flwr.supercore.retry import RetryInvoker, exponential
    from flwr.supercore.runtime import RuntimeHttpClient

    certificates = None
    if root_certificates is not None:
        with open(root_certificates, "rb") as fh:
            certificates = fh.read()
    interceptors: list[Any] = [RuntimeVersionHttpInterceptor(component_name="SuperExec")]
    if secret is not None:  # the SuperLink refuses AcquireTask without it
        interceptors.append(
            SuperExecAuthHttpInterceptor(
                master_secret=secret, protected_methods={"/flwr.proto.Runtime/AcquireTask"}
            )
        )
    return RuntimeHttpClient.from_server_address(
        server_address=address,
        insecure=root_certificates is None,
        root_certificates=certificates,
        interceptors=interceptors,
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


def run(address: str, root_certificates: str | None, secret: bytes | None = None) -> None:
    """Acquire ServerApp tasks from the SuperLink at ``address`` and fork one child each."""
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore.constant import TaskType

    from fedroc.federation.flower._tuning import check_flower_version

    check_flower_version()
    preload()
    client = _client(address, root_certificates, secret)
    children: set[int] = set()
    last_end = 0.0
    while True:
        try:
            res = client.AcquireTask(AcquireTaskRequest(supported_task_types=[TaskType.SERVER_APP]))
        except Exception as exc:  # the SuperLink is starting or restarting
            log.warning("fedroc ServerApp executor: cannot acquire a task: %s", exc)
            time.sleep(0.5)
            continue
        if res.HasField("task") and res.token:
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
        # Wait; a job that ends (checked every 50 ms, no request) ends a running pause early.
        end = time.monotonic() + poll_pause(len(children), time.monotonic() - last_end)
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(left, 0.05) if children else left)
            if children:
                _reap(children)
                if not children:
                    last_end = time.monotonic()
                    break


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and run the warm executor (see :func:`run`; blocks)."""
    import argparse

    from fedroc.federation.flower._logs import configure

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime-api-address", required=True)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--root-certificates")
    group.add_argument("--insecure", action="store_true")
    parser.add_argument("--superexec-auth-secret-file")
    args = parser.parse_args(argv)
    configure("serverapp-executor")
    secret = None
    if args.superexec_auth_secret_file:
        with open(args.superexec_auth_secret_file, "rb") as fh:
            secret = fh.read()
    run(args.runtime_api_address, None if args.insecure else args.root_certificates, secret)


if __name__ == "__main__":
    main()
