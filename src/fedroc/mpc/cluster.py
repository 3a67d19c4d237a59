"""A cluster of three local processes (the embedded case), or a handle on a running one.

:class:`LocalCluster` writes throw-away certificates and keys into a temporary directory,
picks free ports on 127.0.0.1, starts ``python -m fedroc.mpc.party`` three times and stops
exactly those processes when closed (shutdown message first, then terminate, then kill).
Their logs are kept so that an error can quote them. The data owners are registered before
the parties start (:meth:`LocalCluster.register_owners`; ``start`` happens on the first job
if not called before), since a party reads its cluster file once.

Whoever starts a local cluster holds all its keys: it protects the owners' data from
nobody but outsiders. Against a curious analyst the three parties must be run by others.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

from fedroc.exceptions import InputError, ProtocolError
from fedroc.mpc.bundle import Bundle
from fedroc.mpc.certs import generate_cluster, owners_table
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

    description: str = "a cluster"

    def proxy_keys(self) -> tuple[X25519PublicKey, X25519PublicKey]:
        """Load the proxies' public keys that owners seal their shares to."""
        return self.config.proxy_keys()

    def proxy_key_bytes(self) -> tuple[bytes, bytes]:
        """Return the proxies' public keys as raw 32-byte strings (as job terms hold them)."""
        return self.config.proxy_key_bytes()

    def run(
        self,
        bundles: list[Bundle],
        *,
        connecting: Callable[[str], None] | None = None,
        **kwargs: Any,
    ) -> ClusterResult:
        """Run the job the owners' bundles were made for (see :meth:`ClusterClient.run`).

        ``connecting`` is the client's (:class:`ClusterClient`): told a line when party 0
        has not answered within half a second.
        """
        return ClusterClient(self.config, connecting=connecting).run(bundles, **kwargs)

    def close(self) -> None:
        """Release the cluster (nothing to do for a remote one)."""
        pass

    def __enter__(self) -> Cluster:
        """Return the cluster, so that ``with`` closes it at the end."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the cluster (see :meth:`close`)."""
        self.close()


class RemoteCluster(Cluster):
    """A cluster already running, described by its cluster file.

    Parameters
    ----------
    path : str or pathlib.Path
        The cluster file (TOML), read and checked at once.

    Raises
    ------
    InputError
        The file is missing or malformed (:meth:`ClusterConfig.load`).
    """

    def __init__(self, path: str | Path) -> None:
        self.config = ClusterConfig.load(path)
        self.description = f"cluster {str(path)!r}"


class LocalCluster(Cluster):
    """Three party processes on this machine.

    Started by :meth:`start` (at once unless ``start=False``, else by the first job) and
    stopped by :meth:`close`, which also deletes its temporary folder of keys and logs.

    Parameters
    ----------
    timeout : float, default 60
        Seconds a party waits for a peer's message (the cluster file's ``timeout``).
    die_after_rounds, fail_first_job : dict of int to int, optional
        Fault injection for tests: party id -> rounds after which it exits, or after which
        its first job fails.
    startup_timeout : float, default 60
        Seconds a party waits for its peers to connect.
    owners : mapping of str to bytes, optional
        Data owners' Ed25519 public keys to register (also possible later with
        :meth:`register_owners`, before the parties start).
    start : bool, default True
        Start the parties now.
    """

    def __init__(
        self,
        *,
        timeout: float = 60.0,
        die_after_rounds: dict[int, int] | None = None,
        fail_first_job: dict[int, int] | None = None,
        startup_timeout: float = 60.0,
        owners: Mapping[str, bytes] | None = None,
        start: bool = True,
    ) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="fedroc-mpc-"))
        self.description = "three local processes"
        self.die_after_rounds = die_after_rounds
        self.fail_first_job = fail_first_job
        self.startup_timeout = startup_timeout
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs = [self.workdir / f"party{pid}.log" for pid in range(3)]
        ports = free_ports(3)
        self.path = generate_cluster(
            self.workdir, ports=dict(enumerate(ports)), timeout=timeout, days=2, owners=owners
        )
        self.config = ClusterConfig.load(self.path)
        if start:
            self.start()

    def register_owners(self, owners: Mapping[str, bytes]) -> None:
        """Register data owners' public keys (before the parties start)."""
        if self.procs:
            raise InputError("owners must be registered before the local cluster starts")
        known = dict(self.config.owners)
        for name, key in owners.items():
            if known.get(name, key) != key:
                raise InputError(f"owner {name!r} is registered with another key")
            known[name] = key
        text = self.path.read_text()
        head = text.split("[owners]")[0].rsplit("# Data owners", 1)[0]
        self.path.write_text(head + "\n".join(owners_table(known)))
        self.config = ClusterConfig.load(self.path)

    def start(self) -> None:
        """Start the three party processes (once; a failed start closes the cluster)."""
        if self.procs:
            return
        try:
            for pid in range(3):
                cmd = [
                    sys.executable,
                    "-m",
                    "fedroc.mpc.party",
                    "--cluster",
                    str(self.path),
                    "--id",
                    str(pid),
                    "--startup-timeout",
                    str(self.startup_timeout),
                ]
                if self.die_after_rounds and pid in self.die_after_rounds:
                    cmd += ["--die-after-rounds", str(self.die_after_rounds[pid])]
                if self.fail_first_job and pid in self.fail_first_job:
                    cmd += ["--fail-first-job-after", str(self.fail_first_job[pid])]
                with self.logs[pid].open("wb") as log:
                    self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
        except BaseException:
            self.close()
            raise

    def log_tail(self, lines: int = 3) -> str:
        """Return the last ``lines`` lines of each party's log, on one line for an error message."""
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
        self.start()
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
            time.sleep(0.01)

    def run(
        self,
        bundles: list[Bundle],
        *,
        connecting: Callable[[str], None] | None = None,
        **kwargs: Any,
    ) -> ClusterResult:
        """Run a job once the parties are ready.

        A :class:`~fedroc.exceptions.ProtocolError` carries the last lines of the parties' logs.
        """
        self.wait_ready()
        try:
            return ClusterClient(self.config, connecting=connecting).run(bundles, **kwargs)
        except ProtocolError as exc:
            # Give the parties a moment to write why they stopped.
            time.sleep(0.2)
            raise ProtocolError(f"{exc} [{self.log_tail(2)}]") from exc

    def close(self) -> None:
        """Shut the parties down and delete the work folder.

        Parties still running after 5 s are terminated, then killed.
        """
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
