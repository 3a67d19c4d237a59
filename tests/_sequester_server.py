"""A ``fedroc sequester serve`` subprocess on loopback for the service's tests."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ADMIN = "test-admin-token-" + secrets.token_hex(8)
PG_ENV = "FEDROC_TEST_POSTGRES_URL"
# The custodian token reaches the server through the environment, never its command line.
SERVER_ENV = {**os.environ, "FEDROC_SEQUESTER_ADMIN_TOKEN": ADMIN}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``fedroc sequester serve`` in a subprocess; always stopped by the fixture."""

    def __init__(
        self,
        db: str,
        log: Path,
        *,
        args: tuple[str, ...] = ("--rate-limit", "0"),
        env: dict[str, str] | None = None,
        scheme: str = "http",
        verify: Any = True,
    ) -> None:
        self.db = db
        self.log = log
        self.args = args
        self.env = SERVER_ENV if env is None else env
        self.scheme = scheme
        self.verify = verify
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self._context: ssl.SSLContext | None = None

    def start(self) -> None:
        for _ in range(3):  # a port picked free may be taken before uvicorn binds it
            port = free_port()
            self.url = f"{self.scheme}://127.0.0.1:{port}"
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "fedroc", "sequester", "serve", "--db", self.db,
                     "--host", "127.0.0.1", "--port", str(port), *self.args],
                    stdout=log, stderr=log, env=self.env,
                )  # fmt: skip
            deadline = time.monotonic() + 30
            # One client for all the probes: each new client loads the system's CA
            # certificates (65 ms of CPU), and a probe every 0.1 s spent seconds of CPU
            # beside the starting server.
            with httpx.Client(timeout=1, verify=self._ssl_context()) as probe:
                while time.monotonic() < deadline and self.proc.poll() is None:
                    with contextlib.suppress(httpx.HTTPError):
                        if probe.get(self.url + "/v1/health").status_code == 200:
                            return
                    time.sleep(0.1)
            self.stop()
        raise RuntimeError("server did not start:\n" + self.log.read_text()[-2000:])

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def _ssl_context(self) -> ssl.SSLContext:
        """The clients' TLS settings (``verify``), built once for all of them."""
        if self._context is None:
            self._context = httpx.create_ssl_context(verify=self.verify)
        return self._context

    def client(self, token: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url + "/v1",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
            verify=self._ssl_context(),
        )


@contextlib.contextmanager
def database(backend: str, tmp: Path) -> Iterator[str]:
    """A fresh database URL for one server (dropped afterwards on PostgreSQL)."""
    if backend == "sqlite":
        yield str(tmp / "sequester.db")
        return
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} is not set: no PostgreSQL server to test against")
    import psycopg
    from sqlalchemy.engine import make_url

    name = "fedroc_test_" + secrets.token_hex(6)
    base = make_url(url).set(drivername="postgresql")
    admin_dsn = base.render_as_string(hide_password=False)
    try:
        with psycopg.connect(admin_dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        pytest.fail(f"{PG_ENV} is set but the server cannot be reached: {exc}")
    except psycopg.errors.InsufficientPrivilege:
        pytest.skip(f"the role of {PG_ENV} may not create databases")
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
