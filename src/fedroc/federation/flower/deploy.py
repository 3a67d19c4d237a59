"""Running fedroc on Flower: TLS certificates, a local deployment, and submitting jobs.

* :func:`generate_certificates`: a self-signed CA and a SuperLink certificate signed by it
  (``cryptography``), for a deployment's lifetime.
* :class:`LocalDeployment`: a SuperLink and one SuperNode per site as real processes on
  loopback, with TLS or ``insecure``; what ``fedroc flower up`` starts.
* :func:`submit_job`: the analyst's entry point. It submits fedroc's Flower app with
  ``flwr run`` (the job travels in the run config), follows the run with ``flwr log``
  and returns the JSON result the ServerApp printed, or raises the error it reported
  (:class:`SiteError` / :class:`DisclosureError` naming the site).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import tomli_w

from fedroc._retry import RetryExpired, retry
from fedroc._version import __version__
from fedroc.exceptions import (
    FedrocError,
    InputError,
    error_from_dict,
)
from fedroc.federation.flower import CLIENT_APP_REF, SERVER_APP_REF
from fedroc.federation.flower._process import die_with_parent as _die_with_parent

if TYPE_CHECKING:  # the analyst's `fedroc flower run` needs no site code (pandas, scipy)
    from fedroc.federation._progress import CallProgress
    from fedroc.federation.flower.site_config import SiteNodeConfig

__all__ = [
    "FlowerConnection",
    "LocalDeployment",
    "TlsFiles",
    "flwr_executable",
    "free_port",
    "generate_certificates",
    "node_config_toml",
    "submit_job",
]

CONNECTION_NAME = "fedroc"
_RUN_ID = re.compile(r"Successfully started run (\d+)")
_RESTART = "--- fedroc: process started ---"
JOB_KEY = "fedroc-job"

# Every process we start: no telemetry, no update check against the network.
QUIET_ENV = {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"}


def unavailable_why(connection: FlowerConnection, text: str) -> str:
    """Why Flower found the SuperLink "unavailable", from a direct check of its ``/health``.

    ``flwr run`` says "Connection to the SuperLink is unavailable" for a SuperLink that is
    down and for one whose certificate the analyst's CA did not sign (a wrong
    ``--root-certificates``) alike; the check names which (e.g. CERTIFICATE_VERIFY_FAILED).
    """
    if "unavailable" not in text:
        return ""
    from fedroc.federation.flower.health import check_superlink

    ca = None if connection.insecure else connection.root_certificates
    report = check_superlink(connection.address, ca, timeout=5.0)
    if report["healthy"]:
        return ""
    detail = str(report["detail"])
    if "CERTIFICATE_VERIFY_FAILED" in detail or "certificate" in detail.lower():
        return (
            f" (a direct check of its /health: {detail}: the SuperLink's certificate is not "
            f"one the CA of --root-certificates {str(ca)!r} signed, or does not name "
            f"{connection.address.rpartition(':')[0]})"
        )
    return f" (a direct check of its /health: {detail})"


def check_address(address: str, name: str = "address") -> str:
    """Return ``address`` if it is ``HOST:PORT`` with a port from 1 to 65535, else refuse it.

    A bad address reached Flower, which failed only after its start-up, in words of its own
    and without naming the option: ``flower run --superlink 127.0.0.1:99999`` after 7 s
    ("Connection to the SuperLink is unavailable"), ``flower supernode`` after 18 s with
    exit status 1 ("Exit Code: 600 ... cannot be parsed").

    Raises
    ------
    InputError
        Naming ``name`` (the option) and the value.
    """
    text = str(address)
    host, sep, port = text.rpartition(":")
    if "://" in text:
        problem = "give HOST:PORT without a URL prefix"
    elif text.startswith("[") and text.endswith("]"):  # "[::1]": bracketed, no port
        problem = "give HOST:PORT with a port after the bracketed host, e.g. [::1]:9093"
    elif not sep or not host or host in ("[", "[]") or host != host.strip() or " " in host:
        problem = "give HOST:PORT, e.g. 127.0.0.1:9093"
    elif host.startswith("[") != host.endswith("]") or (":" in host and not host.startswith("[")):
        problem = "write an IPv6 host in brackets, e.g. [::1]:9093"
    # ASCII digits: str.isdecimal takes any script's ("٨٠" is 80 to int(), not to gRPC).
    elif not (port.isascii() and port.isdecimal()) or not 1 <= int(port) <= 65535:
        problem = f"the port must be a number from 1 to 65535; got {port!r}"
    else:
        return text
    raise InputError(f"{name} {text!r}: {problem}")


def app_pyproject(version: str) -> str:
    """Write the ``pyproject.toml`` of the Flower app bundle (FAB) fedroc submits for a job."""
    return tomli_w.dumps(
        {
            "project": {
                "name": "fedroc-job",
                "version": version,
                "description": (
                    "fedroc: federated evaluation of a classifier (ROC, AUC, calibration)"
                ),
                "license": "MIT",
                "dependencies": [],
            },
            "tool": {
                "flwr": {
                    "app": {
                        "publisher": "fedroc",
                        "components": {"serverapp": SERVER_APP_REF, "clientapp": CLIENT_APP_REF},
                        "config": {JOB_KEY: ""},
                    }
                }
            },
        }
    )


# -- certificates ----------------------------------------------------------------------------
@dataclass(frozen=True)
class TlsFiles:
    """PEM files of a deployment: the CA every party trusts, the SuperLink's key pair."""

    ca_cert: Path
    server_cert: Path
    server_key: Path


def generate_certificates(
    directory: str | Path,
    hosts: Iterable[str] = ("127.0.0.1", "localhost"),
    *,
    days: int = 30,
) -> TlsFiles:
    """Create a self-signed CA and a SuperLink certificate for ``hosts`` (names or IP addresses).

    The SuperLink's certificate must name every address its clients use, including
    127.0.0.1 (its own ServerApp processes connect there); keys are ECDSA P-256.
    """
    from fedroc._tls import issue_certificate, new_ca, write_certificate, write_private_key

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    names = list(dict.fromkeys(["127.0.0.1", "localhost", *hosts]))
    ca_cert, ca_key = new_ca("fedroc deployment CA", days=days)
    cert, key = issue_certificate(
        ca_cert, ca_key, names[-1], hosts=names, days=days, server_only=True
    )
    files = TlsFiles(out / "ca.crt", out / "server.pem", out / "server.key")
    write_certificate(files.ca_cert, ca_cert)
    write_certificate(files.server_cert, cert)
    write_private_key(files.server_key, key)
    return files


# -- connection and jobs ---------------------------------------------------------------------
@dataclass(frozen=True)
class FlowerConnection:
    """How the analyst reaches a SuperLink, and which sites a job expects.

    Attributes
    ----------
    address : str
        ``host:port`` of the SuperLink (one port serves the Control, Fleet and Runtime APIs
        in Flower 1.41).
    root_certificates : Path or None
        CA certificate (PEM) that signed the SuperLink's certificate.
    insecure : bool
        Plain HTTP, no TLS (loopback tests only).
    sites : tuple of str or None
        Sites a job waits for (None: every connected SuperNode).
    site_keys : mapping of str to tuple of str, optional
        Fingerprints of the public keys each site's SuperNode may authenticate with
        (:mod:`.identity`); a node whose key is not its declared site's is refused.
    node_auth : bool, optional
        Accept only SuperNodes registered under the name of the site they declare (the
        SuperLink runs with ``--enable-supernode-auth``). Default: on unless ``insecure``
        (Flower authenticates SuperNodes only over TLS).
    """

    address: str
    root_certificates: Path | None = None
    insecure: bool = False
    sites: tuple[str, ...] | None = None
    site_keys: Mapping[str, tuple[str, ...]] | None = None
    node_auth: bool | None = None

    def __post_init__(self) -> None:
        """Check that TLS has a CA unless ``insecure``; default ``node_auth`` to ``not insecure``.

        Raises
        ------
        InputError
            When neither ``root_certificates`` nor ``insecure`` is given.
        """
        check_address(self.address)
        if not self.insecure and self.root_certificates is None:
            raise InputError(
                "a Flower connection needs root_certificates (the CA of the SuperLink's "
                "certificate) unless insecure=True"
            )
        if self.node_auth is None:
            object.__setattr__(self, "node_auth", not self.insecure)
        if self.site_keys is not None:
            keys = {str(k): tuple(str(f) for f in v) for k, v in self.site_keys.items()}
            object.__setattr__(self, "site_keys", keys)

    def with_sites(self, sites: Sequence[str] | None) -> FlowerConnection:
        """Return a copy that waits for ``sites`` (None: every connected SuperNode)."""
        return replace(self, sites=None if sites is None else tuple(sites))

    def to_dict(self) -> dict[str, Any]:
        """Return the connection as JSON-ready types (the content of ``connection.json``)."""
        return {
            "address": self.address,
            "root_certificates": None
            if self.root_certificates is None
            else str(self.root_certificates),
            "insecure": self.insecure,
            "sites": None if self.sites is None else list(self.sites),
            "node_auth": self.node_auth,
            "site_keys": None
            if self.site_keys is None
            else {k: list(v) for k, v in self.site_keys.items()},
        }

    @classmethod
    def from_file(cls, path: str | Path) -> FlowerConnection:
        """Read the ``connection.json`` that ``fedroc flower up`` writes."""
        p = Path(path)
        if p.is_dir():
            p = p / "connection.json"
        try:
            data = json.loads(p.read_text())
        except FileNotFoundError:
            raise InputError(f"Flower connection file {str(p)!r} does not exist") from None
        except ValueError as exc:
            raise InputError(
                f"Flower connection file {str(p)!r} is not JSON ({exc}); give the directory "
                "of `fedroc flower up` or its connection.json"
            ) from None
        root = data.get("root_certificates")
        sites = data.get("sites")
        keys = data.get("site_keys")
        auth = data.get("node_auth")
        return cls(
            str(data["address"]),
            None if root is None else Path(root),
            bool(data.get("insecure", False)),
            None if sites is None else tuple(sites),
            None if keys is None else {k: tuple(v) for k, v in keys.items()},
            None if auth is None else bool(auth),
        )

    def flower_config(self) -> str:
        """Write the Flower configuration file (``$FLWR_HOME/config.toml``) for this SuperLink."""
        link: dict[str, Any] = {"address": self.address}
        if self.insecure:
            link["insecure"] = True
        else:
            link["root-certificates"] = str(Path(str(self.root_certificates)).resolve())
        return tomli_w.dumps({"superlink": {"default": CONNECTION_NAME, CONNECTION_NAME: link}})


def flwr_executable() -> str:
    """Find the ``flwr`` command of this Python environment (else the one on ``PATH``)."""
    here = Path(sysconfig.get_path("scripts")) / "flwr"
    if here.exists():
        return str(here)
    found = shutil.which("flwr")
    if found is None:
        raise InputError("the 'flwr' command is not installed; pip install 'fedroc[flower]'")
    return found


def flwr_home(connection: FlowerConnection, directory: Path) -> dict[str, str]:
    """Write a ``FLWR_HOME`` for ``connection`` under ``directory``; its environment."""
    home = directory / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(connection.flower_config())
    return {**QUIET_ENV, "FLWR_HOME": str(home)}


def _flwr(
    args: Sequence[str], env: Mapping[str, str], timeout: float | None, *, check: bool = True
) -> str:
    proc = subprocess.run(
        [flwr_executable(), *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-5:]
        raise FedrocError(f"`flwr {args[0]}` failed: " + " | ".join(detail))
    if not check and proc.returncode != 0:
        return proc.stdout + "\n" + proc.stderr
    return proc.stdout


def _raise_reported(info: Mapping[str, Any]) -> None:
    raise error_from_dict(dict(info), fallback="FedrocError")


def submit_job(
    connection: FlowerConnection,
    job: str,
    options: Mapping[str, Any] | None = None,
    *,
    timeout: float = 60.0,
    discovery_timeout: float = 60.0,
    run_timeout: float | None = None,
    requester: str = "analyst",
    min_sites: int = 1,
    modules: Sequence[str] = (),
    log: IO[str] | None = None,
    progress: Callable[[CallProgress | str], None] | None = None,
) -> dict[str, Any]:
    """Run a fedroc job on a Flower federation and return what the ServerApp reported.

    Parameters
    ----------
    connection : FlowerConnection
    job : str
        ``evaluate``, ``moments``, ``sites`` or ``calls`` (see :mod:`.jobs`).
    options : mapping
        The job's options (JSON-ready).
    timeout : float
        Seconds each site-function call may take; a site that does not answer in time
        fails the job with an error naming it.
    discovery_timeout : float
        Seconds to wait for the sites' SuperNodes to answer at the start.
    run_timeout : float, optional
        Wall-clock limit of the whole run; past it the run is stopped (``flwr stop``).
    requester : str
        Name written to the sites' audit logs.
    min_sites : int
        Without ``connection.sites``: the number of SuperNodes to wait for.
    modules : sequence of str
        Modules the ServerApp imports before the job (the analyst's own methods, registered
        with :func:`fedroc.methods.register_method`); they must be installed at the SuperLink.
    log : text stream, optional
        Receives the ServerApp's log when the run ends.
    progress : callable, optional
        Called (from a reader thread) with each call to the sites as the ServerApp's log
        reports it starting and ending (:class:`~fedroc.federation.CallProgress`,
        the fields of :class:`~fedroc.federation.CallProgress`), as
        :attr:`Federation.progress <fedroc.federation.Federation.progress>` in process,
        and with a text where the job waits between calls (for a site that no connected
        SuperNode serves, at discovery).

    Returns
    -------
    dict
        ``job``, ``result`` (the job's JSON), ``sites``, ``node_ids``, ``site_versions``,
        ``run_id``.
    """
    for name, value in (
        ("timeout", timeout),
        ("discovery_timeout", discovery_timeout),
        ("run_timeout", 1.0 if run_timeout is None else run_timeout),
    ):
        if not value > 0:  # checked here too: the ServerApp's check costs a run's start-up
            raise InputError(f"{name} must be positive; got {value!r}")
    spec = {
        "job": job,
        "options": dict(options or {}),
        "sites": None if connection.sites is None else list(connection.sites),
        "site_keys": None
        if connection.site_keys is None
        else {k: list(v) for k, v in connection.site_keys.items()},
        "require_registered": bool(connection.node_auth),
        "timeout": float(timeout),
        "discovery_timeout": float(discovery_timeout),
        "min_sites": int(min_sites),
        "requester": requester,
        "modules": list(modules),
    }
    with tempfile.TemporaryDirectory(prefix="fedroc-flower-") as tmp:
        app = Path(tmp) / "app"
        app.mkdir()
        (app / "pyproject.toml").write_text(app_pyproject(__version__))
        overrides = Path(tmp) / "job.toml"
        overrides.write_text(tomli_w.dumps({JOB_KEY: json.dumps(spec)}))
        env = {**os.environ, **QUIET_ENV, **flwr_home(connection, Path(tmp))}
        # One `flwr run --stream`: it starts the run, then follows its log. fedroc's result
        # is one checksummed line; once it is complete, the rest of the log is not needed.
        args = [str(app), CONNECTION_NAME, "--run-config", str(overrides), "--stream"]
        clock: dict[str, float] = {"submitted": time.time()}
        text, finished = _follow_run(args, env, run_timeout, clock, progress)
        found = _RUN_ID.search(text)
        if not finished:
            if found is None:
                raise FedrocError(
                    f"the Flower run did not start within {run_timeout:g} s (plus "
                    f"{_START_GRACE:g} s to learn its id); `flwr run` was stopped"
                )
            why = _stop(connection, int(found.group(1)), env)
            if why:
                raise FedrocError(
                    f"the Flower run {found.group(1)} did not finish within {run_timeout:g} s "
                    f"and could not be stopped: {why}"
                )
            raise FedrocError(
                f"the Flower run did not finish within {run_timeout:g} s; it was stopped"
            )
        if found is None:
            raise FedrocError(
                f"`flwr run` started no run at the SuperLink {connection.address}: "
                + _unboxed(text)[-300:]
                + unavailable_why(connection, text)
            )
        run_id = found.group(1)
        if log is not None:
            log.write(text)
        from fedroc.federation.flower._marked import parse_marked

        marked = parse_marked(text)
        if marked is None:
            status = _run_status(run_id, env)
            tail = " | ".join(line for line in text.strip().splitlines()[-4:])
            raise FedrocError(
                f"Flower run {run_id} ended without a fedroc result (status: {status}); "
                f"last log lines: {tail}"
            )
        kind, payload = marked
        if kind == "error":
            _raise_reported(payload)
        out = dict(payload)
        clock["returned"] = time.time()
        out["clock"] = {**clock, **dict(out.get("clock") or {})}
        return out


def _unboxed(text: str) -> str:
    """Return ``flwr``'s output as one line, without the box it draws around its errors.

    "╭──────╮ │ Connection to the SuperLink is unavailable. ... │ ╰──────╯" was quoted with
    its frame, cut in the middle of it.
    """
    kept = re.sub(r"[\u2500-\u257f]+", " ", text)
    return " ".join(kept.split())


_START_GRACE = 30.0  # seconds `flwr run` may still take to report a run past --run-timeout


def _stop(connection: FlowerConnection, run_id: int, env: Mapping[str, str]) -> str:
    """Stop run ``run_id``; return why it could not be stopped ("" once it is stopped).

    A run that finished meanwhile counts as stopped. Flower 1.41: one Control API request
    from this process; otherwise ``flwr stop``.
    """
    from fedroc.federation.flower._flwr_run import lean, stop_run

    if lean():
        try:
            root = connection.root_certificates
            if stop_run(connection.address, None if root is None else str(root), run_id):
                return ""
            why = "the SuperLink did not stop it"
        except Exception as exc:  # an HTTP error, the SuperLink unreachable, ...
            why = f"{type(exc).__name__}: {exc}"
    else:
        try:
            out = _flwr(["stop", str(run_id), CONNECTION_NAME], env, 60.0, check=False)
        except (subprocess.TimeoutExpired, OSError) as exc:
            out = f"{type(exc).__name__}: {exc}"
        if "successfully stopped" in out:
            return ""
        why = " | ".join(out.strip().splitlines()[-2:])
    status = _run_status(str(run_id), env)
    return "" if status.startswith("finished") else f"{why} (status: {status})"


def _follow_run(
    args: Sequence[str],
    env: Mapping[str, str],
    run_timeout: float | None,
    clock: dict[str, float],
    progress: Callable[[CallProgress | str], None] | None = None,
) -> tuple[str, bool]:
    """Run ``flwr run ARGS`` (``--stream``) until fedroc's marked result line (or the process) ends.

    Returns the output and whether the run ended within ``run_timeout``. Records in
    ``clock`` when the run was started and when the result arrived (``time.time()``), and
    hands ``progress`` each call to the sites that the log reports.
    """
    from fedroc.federation.flower._flwr_run import command
    from fedroc.federation.flower._marked import (
        MARK,
        PROGRESS_MARK,
        STATUS_MARK,
        parse_marked,
        parse_progress,
        parse_status,
    )

    proc = subprocess.Popen(
        [*command(flwr_executable()), *args],
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
    )
    lines: list[str] = []
    done = threading.Event()
    started = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "started" not in clock and _RUN_ID.search(line):
                clock["started"] = time.time()
                started.set()
            if progress is not None and STATUS_MARK in line:
                status = parse_status(line)
                if status is not None:
                    try:
                        progress(status)
                    except Exception:  # display only, as below
                        pass
            if progress is not None and PROGRESS_MARK in line:
                step = parse_progress(line)
                if step is not None:
                    try:
                        progress(step)
                    except Exception:  # display only: this thread must read on to the result
                        pass
            if MARK in line and parse_marked(line) is not None:  # complete and intact
                clock["result"] = time.time()
                done.set()
        done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    finished = done.wait(timeout=run_timeout)
    if not finished and not started.is_set():
        # Stopping `flwr run` before it reports the run's id could leave a run nobody can
        # stop (the SuperLink may have created it): wait for the id, then stop the run.
        give_up = time.monotonic() + _START_GRACE
        while not started.wait(0.1) and proc.poll() is None and time.monotonic() < give_up:
            pass
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    reader.join(timeout=10)
    return "".join(lines), finished


def _run_status(run_id: str, env: Mapping[str, str]) -> str:
    """Ask the SuperLink for the status of a run, or say why it is not known (never raises)."""
    try:
        out = _flwr(["ls", CONNECTION_NAME, "--run-id", run_id, "--format", "json"], env, 60.0)
    except (FedrocError, subprocess.TimeoutExpired, OSError) as exc:
        return f"unknown: {exc}"
    try:
        data = json.loads(out[out.index("{") :])
    except ValueError:
        return "unknown: `flwr ls` did not print JSON: " + " | ".join(out.strip().splitlines()[-2:])
    runs = data.get("runs") if isinstance(data, dict) else None
    if not runs:
        # Flower's JSON errors are {"success": false, "error-message": ...}.
        return "unknown: " + str(
            data.get("error-message", data) if isinstance(data, dict) else data
        )
    run = runs[0]
    details = str(run.get("status-details", ""))
    return f"{run.get('status')}" + ("" if details in ("", "N/A") else f" ({details})")


# -- local deployment ------------------------------------------------------------------------
MARKER = "FEDROC_DEPLOYMENT"  # environment variable every process of a deployment inherits


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is free on ``host`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _wait_port(host: str, port: int, deadline: float, proc: subprocess.Popen[bytes]) -> None:
    def attempt() -> None:
        if proc.poll() is not None:
            raise FedrocError(f"process {proc.args!r} exited with status {proc.returncode}")
        socket.create_connection((host, port), timeout=0.5).close()

    try:
        retry(attempt, retry_on=(OSError,), deadline=deadline, pause=0.1)
    except RetryExpired:
        raise FedrocError(f"nothing listens on {host}:{port} after the start-up timeout") from None


def marked_processes(marker: str) -> list[int]:
    """List the processes whose environment carries ``FEDROC_DEPLOYMENT=<marker>`` (``/proc``).

    Flower starts its helpers (``flower-superexec``, ``flwr-serverapp``) in sessions of
    their own, so killing a process group misses them; they inherit the environment.
    """
    needle = f"{MARKER}={marker}".encode()
    below = needle + b"/"
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if any(v == needle or v.startswith(below) for v in fh.read().split(b"\0")):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _kill_marked(marker: str) -> None:
    for pid in marked_processes(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@dataclass
class _Proc:
    name: str
    cmd: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    handle: IO[bytes] | None = field(default=None, repr=False)
    restarts: int = 0
    next_restart: float = 0.0

    @property
    def marker(self) -> str:
        return self.env[MARKER]

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None


class LocalDeployment:
    """A SuperLink and one SuperNode per site on this machine (real processes).

    Parameters
    ----------
    sites : sequence of SiteNodeConfig
        One per SuperNode (data file, columns, policy, audit log). A site without a node
        directory gets ``DIR/nodes/<site>``: it keeps what the site must not lose (its keys,
        audit log and privacy ledger, and the roster of the sites it aggregates with, which
        :meth:`start` writes with every site's secure-aggregation key).
    directory : path
        Working directory: certificates, the SuperLink's database, per-node directories,
        logs and ``connection.json`` (what ``fedroc flower run --deployment DIR`` reads).
    insecure : bool
        Plain HTTP instead of TLS (certificates are generated otherwise).
    tuned : bool
        Run ``fedroc flower supernode`` (fast polling, in-process ClientApp) instead of the
        stock ``flower-supernode`` (3 s idle polls) in ``process`` isolation with fedroc's
        executor beside it (:mod:`.executor`: fedroc's ClientApp only) and the stock
        SuperLink.
    bundle_clientapp : bool
        With ``tuned=False``: leave the stock node in its default ``subprocess`` isolation,
        where Flower's SuperExec runs the ClientApp each run's bundle names, the analyst's
        code (R46). It protects nothing: for the attack test only.
    host : str
        Loopback address everything binds to.
    port : int, optional
        The SuperLink's port (default: a free one).
    env : mapping, optional
        Extra environment variables of every process (e.g. ``PYTHONPATH`` for site modules).
    node_auth : bool, optional
        SuperNode authentication (default: on with TLS): each site gets a key pair in its
        node directory, the SuperLink accepts only the registered keys, and jobs accept a
        node only for the site its key is registered and pinned for (:mod:`.identity`).
    database : str, optional
        The SuperLink's database: default ``DIR/superlink/state.db``, so that a restarted
        SuperLink knows its registered nodes (with the tuned SuperLink only they are kept
        there, runs live in memory; stock: Flower's SQL state); ``":memory:"`` keeps
        nothing.
    """

    def __init__(
        self,
        sites: Sequence[SiteNodeConfig],
        directory: str | Path,
        *,
        insecure: bool = False,
        tuned: bool = True,
        bundle_clientapp: bool = False,
        host: str = "127.0.0.1",
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        node_auth: bool | None = None,
        database: str | None = None,
    ) -> None:
        names = [s.site for s in sites]
        if not names:
            raise InputError("a deployment needs at least one site")
        if len(set(names)) != len(names):
            raise InputError(f"site names must be unique; got {names}")
        if node_auth and insecure:
            raise InputError(
                "SuperNode authentication needs TLS (Flower refuses it over plain HTTP); "
                "drop insecure or node_auth"
            )
        self.directory = Path(directory).resolve()
        homed = [
            s if s.node_dir else replace(s, node_dir=self.node_directory(s.site)) for s in sites
        ]
        self.sites = {
            s.site: s if s.audit is not None else replace(s, audit=s.node_directory / "audit.jsonl")
            for s in homed
        }
        self.insecure = insecure
        self.tuned = tuned
        self.bundle_clientapp = bundle_clientapp
        self.host = host
        self.port = port
        self.extra_env = dict(env or {})
        self.node_auth = (not insecure) if node_auth is None else bool(node_auth)
        self.database = database or str(self.directory / "superlink" / "state.db")
        self.tls: TlsFiles | None = None
        self.keys: dict[str, Any] = {}
        self._link: _Proc | None = None
        self._nodes: dict[str, _Proc] = {}
        self._id = f"{os.getpid()}-{time.time_ns()}"

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> LocalDeployment:
        """Start the SuperLink and the sites' SuperNodes (see :meth:`start`)."""
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop every process the deployment started (see :meth:`stop`)."""
        self.stop()

    @property
    def address(self) -> str:
        """``host:port`` of the SuperLink."""
        return f"{self.host}:{self.port}"

    @property
    def connection(self) -> FlowerConnection:
        """How the analyst reaches this deployment (its CA, its sites and their keys)."""
        return FlowerConnection(
            self.address,
            None if self.tls is None else self.tls.ca_cert,
            self.insecure,
            tuple(self.sites),
            {k: (v.fingerprint,) for k, v in self.keys.items()} if self.node_auth else None,
            self.node_auth,
        )

    def node_directory(self, site: str) -> Path:
        """Where a site's node keeps its key, audit log, privacy ledger and Flower home."""
        return self.directory / "nodes" / site

    def start(self, timeout: float = 180.0, progress: Callable[[str], None] | None = None) -> None:
        """Start the deployment and wait until every node is connected.

        Start the SuperLink, register the sites' keys, start the SuperNodes; return once every node
        is connected. ``progress`` is told each step as it is done (``flower up`` printed
        nothing for the 30-45 s these take on a loaded 2-core machine).
        """
        began = time.monotonic()
        deadline = began + timeout

        def done(step: str) -> None:
            if progress is not None:
                progress(f"{step} ({time.monotonic() - began:.0f} s)")

        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "logs").mkdir(exist_ok=True)
        if not self.insecure:
            certs = self.directory / "certs"
            existing = TlsFiles(certs / "ca.crt", certs / "server.pem", certs / "server.key")
            # A deployment started again in the same directory keeps its CA and keys.
            self.tls = (
                existing
                if all(p.exists() for p in vars(existing).values())
                else generate_certificates(certs, [self.host])
            )
        if self.node_auth:
            from fedroc.federation.flower.identity import generate_node_key

            for name in self.sites:
                self.keys[name] = generate_node_key(self.node_directory(name), name)
        self.write_rosters()
        self.port = self.port or free_port(self.host)
        try:
            self._link = self._superlink()
            self._start_superlink(deadline, done)
            for name in self.sites:
                self._nodes[name] = self._supernode(name)
                self._spawn(self._nodes[name])
            for name in self.sites:
                self.wait_registered(name, deadline - time.monotonic())
                done(f"site {name!r}: its SuperNode is connected")
            (self.directory / "connection.json").write_text(
                json.dumps(self.connection.to_dict(), indent=2)
            )
        except BaseException:
            self.stop()
            raise

    def write_rosters(self) -> None:
        """Give every site a secure-aggregation key and a roster of all the sites' keys.

        A key that exists is kept (the site's identity survives a restart); sites whose
        configuration names its own key or roster are left alone.
        """
        from fedroc.federation.roster import (
            KEY_NAME,
            ROSTER_NAME,
            Roster,
            public_key_bytes,
            write_signing_key,
        )

        managed = {n: s for n, s in self.sites.items() if s.secagg_key is None and s.roster is None}
        keys = {n: write_signing_key(s.node_directory / KEY_NAME) for n, s in managed.items()}
        if not keys:
            return
        roster = Roster({n: public_key_bytes(k) for n, k in keys.items()})
        for s in managed.values():
            roster.write(s.node_directory / ROSTER_NAME)

    def _start_superlink(
        self, deadline: float, done: Callable[[str], None] = lambda step: None
    ) -> None:
        assert self._link is not None
        self._spawn(self._link)
        assert self._link.popen is not None
        _wait_port(self.host, int(self.port or 0), deadline, self._link.popen)
        done(f"the SuperLink listens on {self.host}:{self.port}")
        if self.node_auth:
            self.register_sites(timeout=max(deadline - time.monotonic(), 10.0))
            done(f"the sites' keys are registered: {', '.join(self.sites)}")

    def register_sites(self, timeout: float = 120.0) -> None:
        """Register every site's public key under its name (already registered: kept)."""
        from fedroc.federation.flower.identity import register_sites

        with tempfile.TemporaryDirectory(prefix="fedroc-flwr-") as tmp:
            env = {**self._env(Path(tmp) / "home"), **flwr_home(self.connection, Path(tmp))}
            register_sites(
                [flwr_executable()],
                env,
                {name: key.public_key for name, key in self.keys.items()},
                connection_name=CONNECTION_NAME,
                timeout=timeout,
            )

    def stop(self) -> None:
        """Stop every process this deployment started.

        SuperNodes first, then what they started, including Flower's helpers that run in
        sessions of their own.
        """
        for proc in [*self._nodes.values(), *([self._link] if self._link else [])]:
            self._terminate(proc)
        _kill_marked(self._id)

    def kill_site(self, name: str) -> None:
        """SIGKILL a site's SuperNode (and its children), as a crash would."""
        self._terminate(self._node(name), sig=signal.SIGKILL)

    def restart_site(self, name: str, timeout: float = 60.0) -> None:
        """Start a site's SuperNode again (after :meth:`kill_site`)."""
        proc = self._node(name)
        self._terminate(proc)
        self._spawn(proc)
        self.wait_registered(name, timeout)

    def kill_superlink(self) -> None:
        """SIGKILL the SuperLink and the processes it started, as a crash would."""
        if self._link is not None:
            self._terminate(self._link, sig=signal.SIGKILL)

    def restart_superlink(self, timeout: float = 60.0) -> None:
        """Start the SuperLink again on the same port and database."""
        if self._link is None:
            raise InputError("the deployment was not started")
        self._terminate(self._link)
        self._start_superlink(time.monotonic() + timeout)

    def is_alive(self, name: str) -> bool:
        """Whether a site's SuperNode (``"superlink"``: the SuperLink) is running."""
        proc = self._link if name == "superlink" else self._node(name)
        return proc is not None and proc.alive()

    @property
    def superlink_pid(self) -> int:
        """Process id of the SuperLink (0 when it is not running)."""
        popen = None if self._link is None else self._link.popen
        return 0 if popen is None or popen.poll() is not None else popen.pid

    def processes(self, name: str | None = None) -> list[int]:
        """List the running processes this deployment started.

        Of one of its processes with ``name`` when given, including Flower's helpers in
        sessions of their own.
        """
        return marked_processes(self._id if name is None else f"{self._id}/{name}")

    def node_status(self, site: str) -> dict[str, Any]:
        """Read a site's node ``status.json`` (empty when the node never connected)."""
        from fedroc.federation.flower.node import STATUS_NAME

        try:
            return dict(json.loads((self.node_directory(site) / STATUS_NAME).read_text()))
        except (OSError, ValueError):
            return {}

    def supervise(self, *, restart: bool = True) -> list[str]:
        """Notice processes that exited and restart them.

        Notice processes that exited; restart them (backing off) unless ``restart`` is False.
        Returns one line per event, for the operator.
        """
        events: list[str] = []
        now = time.monotonic()
        procs = [*([self._link] if self._link else []), *self._nodes.values()]
        for proc in procs:
            if proc.popen is None or proc.alive():
                continue
            label = "the SuperLink" if proc is self._link else f"site {proc.name!r}'s SuperNode"
            if not restart:
                events.append(f"{label} exited with status {proc.popen.returncode}")
                continue
            if now < proc.next_restart:
                continue
            events.append(
                f"{label} exited with status {proc.popen.returncode}; restarting it "
                f"(restart {proc.restarts + 1}, log {proc.log})"
            )
            proc.restarts += 1
            proc.next_restart = now + min(2.0**proc.restarts, 30.0)
            try:
                if proc is self._link:
                    self._terminate(proc)
                    self._start_superlink(time.monotonic() + 60.0)
                else:
                    self._terminate(proc)
                    self._spawn(proc)
            except FedrocError as exc:
                events.append(f"{label} could not be restarted: {exc}")
        return events

    def submit(self, job: str, options: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """:func:`submit_job` on this deployment."""
        return submit_job(self.connection, job, options, **kwargs)

    def log_text(self, name: str) -> str:
        """Return the log of a site's SuperNode (``"superlink"`` for the SuperLink)."""
        proc = self._link if name == "superlink" else self._node(name)
        if proc is None or not proc.log.exists():
            return ""
        return proc.log.read_text(errors="replace")

    def wait_registered(self, name: str, timeout: float) -> None:
        """Wait until a site's SuperNode has connected to the SuperLink.

        A node that exits meanwhile is started again every 2 s: after a crash the
        SuperLink keeps the node "online" for two heartbeat intervals (20 s for fedroc's
        node, 60 s for Flower's) and refuses to activate its key again until then.
        """
        proc = self._node(name)
        deadline = time.monotonic() + max(timeout, 0.0)
        while time.monotonic() < deadline:
            if proc.popen is None or proc.popen.poll() is not None:
                if time.monotonic() + 2.0 >= deadline:
                    break
                time.sleep(2.0)
                self._terminate(proc)
                self._spawn(proc)
                continue
            # The log is appended across restarts: look at the latest start only.
            if "SuperNode ID:" in self.log_text(name).split(_RESTART)[-1]:
                return
            time.sleep(0.1)
        tail = " | ".join(self.log_text(name).split(_RESTART)[-1].strip().splitlines()[-3:])
        raise FedrocError(
            f"the SuperNode of site {name!r} did not connect within {timeout:g} s; see "
            f"{proc.log}: {tail}"
        )

    # -- processes ---------------------------------------------------------------------------
    def _node(self, name: str) -> _Proc:
        try:
            return self._nodes[name]
        except KeyError:
            raise InputError(f"no site {name!r} in this deployment ({list(self.sites)})") from None

    def _env(self, home: Path, marker: str = "") -> dict[str, str]:
        home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **QUIET_ENV, **self.extra_env, "FLWR_HOME": str(home)}
        env["FLWR_SUPEREXEC_TASK_POLL_INTERVAL"] = "0.1"  # ServerApp start-up latency
        env["PYTHONUNBUFFERED"] = "1"
        env[MARKER] = f"{self._id}/{marker}" if marker else self._id
        # Flower starts its helpers (flower-superexec, flwr-serverapp, ...) from PATH.
        scripts = sysconfig.get_path("scripts")
        env["PATH"] = os.pathsep.join([scripts, env.get("PATH", "")])
        return env

    def _superlink(self) -> _Proc:
        cmd = [sys.executable, "-m", "fedroc.federation.flower.superlink"]
        cmd += ["--host", self.host, "--port", str(self.port)]
        cmd += ["--disable-runtime-dependency-installation", "--database", self.database]
        if self.database != ":memory:":
            Path(self.database).parent.mkdir(parents=True, exist_ok=True)
        if self.node_auth:
            cmd.append("--enable-supernode-auth")
        env = self._env(self.directory / "superlink" / "home", "superlink")
        if not self.tuned:  # Flower's own components only: no patch of Flower's internals
            cmd += ["--serverapp-executor", "stock"]
            env["FEDROC_FLOWER_TUNING"] = "off"  # read by fedroc's ServerApp
        cmd += self._tls_server_args()
        return _Proc("superlink", cmd, env, self.directory / "logs" / "superlink.log")

    def _tls_server_args(self) -> list[str]:
        if self.tls is None:
            return ["--insecure"]
        return [
            "--ssl-ca-certfile",
            str(self.tls.ca_cert),
            "--ssl-certfile",
            str(self.tls.server_cert),
            "--ssl-keyfile",
            str(self.tls.server_key),
        ]

    def _supernode(self, name: str) -> _Proc:
        base = self.node_directory(name)
        base.mkdir(parents=True, exist_ok=True)
        config = base / "node-config.toml"
        config.write_text(node_config_toml(self.sites[name].to_node_config()))
        args = [
            "--superlink",
            self.address,
            "--host",
            self.host,
            "--port",
            str(free_port(self.host)),
            "--node-config",
            str(config),
        ]
        args += (
            ["--insecure"] if self.tls is None else ["--root-certificates", str(self.tls.ca_cert)]
        )
        key = self.keys.get(name)
        if key is not None:
            args += ["--auth-supernode-private-key", str(key.private_key)]
        if self.tuned:
            cmd = [sys.executable, "-m", "fedroc.federation.flower.node", *args]
        elif self.bundle_clientapp:
            scripts = Path(sysconfig.get_path("scripts"))
            cmd = [str(scripts / "flower-supernode"), *args, "--isolation", "subprocess"]
        else:
            cmd = [sys.executable, "-m", "fedroc.federation.flower.executor", "node", *args]
        return _Proc(
            name, cmd, self._env(base / "home", name), self.directory / "logs" / f"{name}.log"
        )

    def _spawn(self, proc: _Proc) -> None:
        if proc.handle is not None:
            proc.handle.close()
        proc.log.parent.mkdir(parents=True, exist_ok=True)
        proc.handle = proc.log.open("ab")
        proc.handle.write(f"\n{_RESTART}\n".encode())
        proc.handle.flush()
        # Its own session, so that stopping it also stops the processes it starts
        # (SuperExec, ServerApp and ClientApp processes).
        proc.popen = subprocess.Popen(
            proc.cmd,
            env=proc.env,
            stdout=proc.handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.directory,
            start_new_session=True,
            # Dies with this process (Linux), so a killed `fedroc flower up` leaves none.
            preexec_fn=_die_with_parent,
        )

    @staticmethod
    def _terminate(proc: _Proc, sig: int = signal.SIGTERM) -> None:
        popen = proc.popen
        if popen is None:
            return
        if popen.poll() is None or sig == signal.SIGKILL:
            try:
                os.killpg(popen.pid, sig)
            except ProcessLookupError:
                pass
            try:
                popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(popen.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                popen.wait(timeout=10)
        # Children that outlived their parent: its process group, and the helpers Flower
        # started in sessions of their own (they carry the process's marker).
        try:
            os.killpg(popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _kill_marked(proc.marker)
        if proc.handle is not None:
            proc.handle.close()
            proc.handle = None


def node_config_toml(config: Mapping[str, Any]) -> str:
    """Write a node config as the TOML file ``flower-supernode --node-config FILE`` reads."""
    return tomli_w.dumps(
        {k: v if isinstance(v, (bool, int, float, str)) else str(v) for k, v in config.items()}
    )
