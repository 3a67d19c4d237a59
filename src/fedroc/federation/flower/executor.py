"""fedroc's executor beside a stock ``flower-supernode`` (``fedroc flower executor``).

A stock SuperNode in its default isolation mode (``subprocess``) starts Flower's SuperExec,
which installs each run's app bundle and runs the ClientApp the bundle names, with the
bundle's own code. The analyst submits that bundle: a ClientApp of its own reads the node
config's data file (R46 in docs/privacy.md). In ``--isolation process`` mode the stock node
runs no ClientApp itself; it waits for an executor to acquire each task from its local
Runtime API (HTTP, ``--host``/``--port``, default 127.0.0.1:9094).

This module is that executor for fedroc: it acquires the node's ClientApp tasks over the
Runtime API, as Flower's ``flower-superexec`` does (authenticated by the same
``--superexec-auth-secret-file``), and runs **fedroc's installed ClientApp** in its own
process; a run whose bundle names another ClientApp gets an error reply, so no code the
analyst ships runs at the site. It is the executor of fedroc's tuned node
(:class:`~fedroc.federation.flower.node.InProcessExecutor`) with an HTTP client instead of
calls in the node's process. Unlike the tuned node it changes nothing in Flower; the node
polls the SuperLink every 3 s while idle, so a job is slower than on ``fedroc flower
supernode``.

Two ways to run it:

* beside a stock node the operator runs (Flower's container images, say)::

      flower-supernode --isolation process --superexec-auth-secret-file S --node-config F ...
      fedroc flower executor --superexec-auth-secret-file S --node-config F --insecure

  (``--insecure``: the Runtime API on loopback is plain HTTP unless the node has
  ``--ssl-certfile``; then ``--root-certificates``);
* ``python -m fedroc.federation.flower.executor node FLOWER-SUPERNODE-ARGS...`` starts the
  stock ``flower-supernode`` in ``process`` isolation with a fresh secret and runs the
  executor beside it (what ``LocalDeployment(tuned=False)`` runs).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fedroc.exceptions import InputError
from fedroc.federation.flower._process import die_with_parent, option_value
from fedroc.federation.flower.node import InProcessExecutor, RuntimeApi, in_process_isolation

__all__ = ["HttpExecutor", "main", "run_beside_stock_node"]

DEFAULT_RUNTIME_API = "127.0.0.1:9094"  # flower-supernode's --host and --port defaults
_ACQUIRE = "/flwr.proto.Runtime/AcquireTask"


class HttpExecutor(InProcessExecutor):
    """Acquire a stock SuperNode's ClientApp tasks over its Runtime API; run fedroc's ClientApp.

    Parameters
    ----------
    address : str
        The node's Runtime API, ``HOST:PORT``.
    secret : bytes, optional
        The node's SuperExec secret (the bytes of its ``--superexec-auth-secret-file``);
        without one the node lets any local process acquire its tasks.
    insecure : bool
        Plain HTTP to the Runtime API (loopback); else TLS with ``root_certificates``.
    root_certificates : bytes, optional
        PEM of the CA of the node's Runtime API certificate.
    node_config : Path, optional
        The node's ``--node-config`` file: its site is built before the first task.
    poll : float, default 0.05
        Seconds before asking again after a task; while none comes the wait doubles up to
        :attr:`max_poll` (0.5 s; the node itself polls the SuperLink every 3 s).
    """

    max_poll = 0.5

    def __init__(
        self,
        address: str = DEFAULT_RUNTIME_API,
        *,
        secret: bytes | None = None,
        insecure: bool = True,
        root_certificates: bytes | None = None,
        node_config: Path | None = None,
        poll: float = 0.05,
    ) -> None:
        super().__init__(RuntimeApi(), node_config=node_config)
        self.address = address
        self.secret = secret
        self.insecure = insecure
        self.root_certificates = root_certificates
        self.poll = poll
        self._wait = poll

    def _client(self, token: str | None) -> Any:
        from flwr.supercore.interceptors import (
            RuntimeTokenHttpInterceptor,
            RuntimeVersionHttpInterceptor,
            SuperExecAuthHttpInterceptor,
        )
        from flwr.supercore.retry import make_simple_http_retry_invoker
        from flwr.supercore.runtime import RuntimeHttpClient

        interceptors: list[Any] = [
            RuntimeVersionHttpInterceptor(
                component_name="SuperExec" if token is None else "flwr-clientapp"
            )
        ]
        if token is not None:
            interceptors.append(RuntimeTokenHttpInterceptor(token))
        elif self.secret:
            interceptors.append(
                SuperExecAuthHttpInterceptor(
                    master_secret=self.secret, protected_methods=frozenset({_ACQUIRE})
                )
            )
        return RuntimeHttpClient.from_server_address(
            server_address=self.address,
            insecure=self.insecure,
            root_certificates=self.root_certificates,
            interceptors=interceptors,
            retry_invoker=make_simple_http_retry_invoker(),
        )

    def _wait_for_api(self) -> None:
        """Nothing to wait for: a node not up yet fails the first asks, which are retried."""

    def _arm(self) -> None:
        pass

    def _idle(self) -> None:
        self.stop.wait(self._wait)
        self._wait = min(2.0 * self._wait, max(self.max_poll, self.poll))

    def execute(self, token: str) -> None:
        """Run one task; then ask again soon (a protocol's next round follows at once)."""
        try:
            super().execute(token)
        finally:
            self._wait = self.poll


def run_beside_stock_node(flower_args: Sequence[str]) -> int:
    """Start the stock ``flower-supernode`` in process isolation and run the executor beside it.

    ``flower_args`` are ``flower-supernode``'s (without ``--isolation``, or with
    ``--isolation process``). Returns the node's exit status; the executor stops with it.
    """
    args = list(flower_args)
    config = option_value(args, "--node-config", "")
    node_config = Path(config) if config.endswith(".toml") and Path(config).is_file() else None
    node_dir = None if node_config is None else node_config.resolve().parent
    try:
        made = in_process_isolation(args, node_dir, "superexec.secret")
    except InputError as exc:
        raise SystemExit(str(exc)) from None
    secret_file = option_value(args, "--superexec-auth-secret-file", "")
    host = option_value(args, "--host", DEFAULT_RUNTIME_API.split(":")[0])
    port = option_value(args, "--port", DEFAULT_RUNTIME_API.split(":")[1])
    node = subprocess.Popen(
        [str(Path(sysconfig.get_path("scripts")) / "flower-supernode"), *args],
        preexec_fn=die_with_parent,
    )
    executor = HttpExecutor(
        f"{host}:{port}", secret=Path(secret_file).read_bytes(), node_config=node_config
    )
    thread = threading.Thread(target=executor.run, name="fedroc-executor", daemon=True)
    thread.start()
    try:
        return node.wait()
    finally:
        executor.stop.set()
        if node.poll() is None:
            node.terminate()
        thread.join(timeout=5.0)
        if made is not None and node_config is None:
            made.unlink(missing_ok=True)


def serve(
    runtime_api_address: str = DEFAULT_RUNTIME_API,
    *,
    secret_file: Path | None = None,
    node_config: Path | None = None,
    insecure: bool = False,
    root_certificates: Path | None = None,
) -> None:
    """Run :class:`HttpExecutor` until interrupted (``fedroc flower executor``)."""
    executor = HttpExecutor(
        runtime_api_address,
        secret=None if secret_file is None else secret_file.read_bytes(),
        insecure=insecure,
        root_certificates=None if root_certificates is None else root_certificates.read_bytes(),
        node_config=node_config,
    )
    with contextlib.suppress(KeyboardInterrupt):
        executor.run()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m fedroc.federation.flower.executor node FLOWER-SUPERNODE-ARGS...``.

    The launcher :func:`run_beside_stock_node` (what ``LocalDeployment(tuned=False)`` runs);
    the executor alone, beside a node its operator started, is ``fedroc flower executor``.
    """
    from fedroc.federation.flower._logs import configure

    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] != ["node"]:
        raise SystemExit(
            "usage: python -m fedroc.federation.flower.executor node FLOWER-SUPERNODE-ARGS...; "
            "beside a node of your own: fedroc flower executor --help"
        )
    configure("supernode", site=None)
    raise SystemExit(run_beside_stock_node(args[1:]))


if __name__ == "__main__":
    main()
