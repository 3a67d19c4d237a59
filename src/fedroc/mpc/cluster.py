"""A cluster of three local processes (the embedded case), or a handle on a running one.

:class:`LocalCluster` writes throw-away certificates and keys into a temporary directory,
picks free ports on 127.0.0.1, starts ``python -m fedroc.mpc.party`` three times and stops
exactly those processes when closed (shutdown message first, then terminate, then kill).
Their logs are kept so that an error can quote them.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

from fedroc.exceptions import ProtocolError
from fedroc.mpc.auc import AucSpec
from fedroc.mpc.bundle import Bundle
from fedroc.mpc.certs import generate_cluster
from fedroc.mpc.net import ClusterClient, ClusterConfig, ClusterResult

__all__ = ["Cluster", "LocalCluster", "RemoteCluster"]


def free_ports(count: int) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


class Cluster:
    """Common interface: the proxies' keys, running a job, closing."""

    config: ClusterConfig

    def proxy_keys(self) -> tuple[X25519PublicKey, X25519PublicKey]:
        return self.config.proxy_keys()

    def run(self, spec: AucSpec, bundles: list[Bundle]) -> ClusterResult:
        return ClusterClient(self.config).run(spec, bundles)

    def close(self) -> None:
        pass

    def __enter__(self) -> Cluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class RemoteCluster(Cluster):
    """A cluster already running, described by its cluster file."""

    def __init__(self, path: str | Path) -> None:
        self.config = ClusterConfig.load(path)
        self.description = f"cluster {str(path)!r}"


class LocalCluster(Cluster):
    """Three party processes on this machine, started now and stopped by :meth:`close`."""

    def __init__(
        self,
        *,
        timeout: float = 60.0,
        die_after_rounds: dict[int, int] | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="fedroc-mpc-"))
        self.description = "three local processes"
        ports = free_ports(3)
        path = generate_cluster(self.workdir, ports=dict(enumerate(ports)), timeout=timeout, days=2)
        self.config = ClusterConfig.load(path)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs = [self.workdir / f"party{pid}.log" for pid in range(3)]
        try:
            for pid in range(3):
                cmd = [
                    sys.executable,
                    "-m",
                    "fedroc.mpc.party",
                    "--cluster",
                    str(path),
                    "--id",
                    str(pid),
                    "--startup-timeout",
                    str(startup_timeout),
                ]
                if die_after_rounds and pid in die_after_rounds:
                    cmd += ["--die-after-rounds", str(die_after_rounds[pid])]
                with self.logs[pid].open("wb") as log:
                    self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
        except BaseException:
            self.close()
            raise

    def log_tail(self, lines: int = 3) -> str:
        parts = []
        for pid, log in enumerate(self.logs):
            try:
                text = log.read_text(errors="replace").strip().splitlines()[-lines:]
            except FileNotFoundError:
                text = []
            if text:
                parts.append(f"party {pid}: " + " | ".join(text))
        return "; ".join(parts)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the three parties are connected; fail fast if one of them exits."""
        deadline = time.monotonic() + timeout
        while True:
            dead = [(pid, p.returncode) for pid, p in enumerate(self.procs) if p.poll() is not None]
            if dead:
                raise ProtocolError(
                    f"MPC party process(es) exited (party, status): {dead}; {self.log_tail()}"
                )
            ready = 0
            for log in self.logs:
                try:
                    ready += "ready on" in log.read_text(errors="replace")
                except FileNotFoundError:
                    pass
            if ready == 3:
                return
            if time.monotonic() > deadline:
                raise ProtocolError(
                    f"MPC parties not ready within {timeout:g} s; {self.log_tail()}"
                )
            time.sleep(0.05)

    def run(self, spec: AucSpec, bundles: list[Bundle]) -> ClusterResult:
        self.wait_ready()
        try:
            return ClusterClient(self.config).run(spec, bundles)
        except ProtocolError as exc:
            # Give the parties a moment to write why they stopped.
            time.sleep(0.2)
            raise ProtocolError(f"{exc} [{self.log_tail(2)}]") from exc

    def close(self) -> None:
        if any(p.poll() is None for p in self.procs):
            with contextlib.suppress(Exception):
                ClusterClient(self.config, connect_timeout=2.0).shutdown()
        deadline = time.monotonic() + 5.0
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.1, deadline - time.monotonic()))
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(3.0)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(3.0)
        shutil.rmtree(self.workdir, ignore_errors=True)
