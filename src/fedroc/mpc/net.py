"""Three OS processes over TCP with mutual TLS: the cluster file, the parties, the client.

Topology. Every party listens on its address and opens one TLS connection to each peer; a
party only *writes* to the connections it opened and only *reads* from those it accepted
(a reader thread per accepted link fills a queue), so no TLS socket is used by two threads.
Every certificate is checked against the cluster's CA and its common name against the role
the peer claims. Jobs come from a client (the analyst) to party 0 only, which forwards
them; results go back the same way, each proxy's result share sealed for the client's
one-time key, so party 0 cannot read party 1's share. Every message is a typed record of
:mod:`fedroc.mpc.messages`; a frame whose announced length exceeds the limit is refused
before anything is allocated for it.

Jobs. Each proxy checks the job on its own before it starts (:mod:`fedroc.mpc.jobs`:
registered owners, signatures, exact co-owners, unused job id, its own shares open) and
the three parties exchange verdicts; the job runs only if all three accept. A refused job,
and a job that fails while running (an error at any party, a peer silent for ``timeout``
seconds), ends for all three with a clear reason to the client, and the parties keep
serving: frames carry their job id, and those of an ended job are dropped. Only a lost
connection (a party died) stops the others, with status 1. A job's id is recorded in each
proxy's ledger before its result share leaves, so no job runs twice.

The cluster file (TOML; paths relative to it; :func:`fedroc.mpc.certs.generate_cluster`
writes one for local runs)::

    ca = "ca.pem"
    timeout = 60.0            # seconds to wait for a peer's message
    max_frame_mb = 1024       # largest frame a party accepts
    [party.0]                 # proxy 0; [party.1] proxy 1; [party.2] the helper
    host = "127.0.0.1"
    port = 7400
    cert = "party0.pem"
    key = "party0.key"        # needed only by party 0 itself
    share_public = "party0.share.pub"   # proxies: owners seal their shares to this key
    share_key = "party0.share.key"      # proxies: needed only by that proxy
    jobs = "party0.jobs"      # proxies: the ledger of jobs run (default party<N>.jobs)
    [client]
    cert = "client.pem"
    key = "client.key"
    [owners]                  # data owners whose bundles the proxies accept
    north = "<Ed25519 public key, 64 hex digits>"
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import secrets
import socket
import ssl
import struct
import sys
import threading
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from fedroc._retry import RetryExpired, retry
from fedroc.exceptions import InputError, ProtocolError
from fedroc.mpc.auc import AucOutputs, AucSpec, auc_program, decode_outputs
from fedroc.mpc.bundle import Bundle, digest, open_box
from fedroc.mpc.jobs import JobRefused, OwnerPart, check_job
from fedroc.mpc.ledger import JobLedger
from fedroc.mpc.messages import (
    CLIENT_CN,
    FRAME_PREFIX,
    HELLO_LIMIT,
    ErrorMessage,
    Forward,
    ForwardedBundle,
    Hello,
    HelperJob,
    JobRequest,
    Message,
    Ok,
    Result,
    ResultShare,
    Seed,
    Shutdown,
    StatsRecord,
    StepFrame,
    Verdict,
    check_frame_length,
    decode_message,
    encode_message,
    party_cn,
)
from fedroc.mpc.owner import JobTerms
from fedroc.mpc.prg import new_seed
from fedroc.mpc.runtime import ROLE, Channel, Party, PartyStats, PeerStopped, Stop, execute
from fedroc.mpc.seal import (
    load_private_key,
    load_public_key,
    new_key,
    public_bytes,
    public_from_bytes,
    seal,
    unseal,
)

__all__ = ["ClusterClient", "ClusterConfig", "ClusterResult", "PartyServer"]

DEFAULT_MAX_FRAME_MB = 1024
_Key = TypeVar("_Key")


# -- configuration -----------------------------------------------------------------------


@dataclass(frozen=True)
class PartyEntry:
    pid: int
    host: str
    port: int
    cert: Path
    key: Path | None
    share_public: Path | None
    share_key: Path | None
    jobs: Path | None


def _read_toml(p: Path, where: str) -> dict[str, Any]:
    try:
        with p.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise InputError(f"{where} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{where} is a directory, not a TOML file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:  # binary: an internal error
        raise InputError(f"{where} is not valid TOML: {exc}") from None


def _path_of(base: Path, where: str, value: Any, what: str, required: bool = True) -> Path | None:
    """Resolve a path of the cluster file, relative to its folder."""
    if value is None:
        if required:
            raise InputError(f"{where}: {what} is missing")
        return None
    if not isinstance(value, str):
        raise InputError(f"{where}: {what} must be a path string; got {value!r}")
    return (base / value).resolve()


def _party_entry(pid: int, entry: dict[str, Any], base: Path, where: str) -> PartyEntry:
    for field in ("host", "port", "cert"):
        if field not in entry:
            raise InputError(f"{where}: [party.{pid}] has no {field!r}")
    port = entry["port"]
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise InputError(f"{where}: [party.{pid}] port {port!r} is invalid")
    path_of = functools.partial(_path_of, base, where)
    jobs = path_of(entry.get("jobs"), f"[party.{pid}] jobs", required=False)
    if jobs is None and pid < 2:
        jobs = (base / f"party{pid}.jobs").resolve()
    return PartyEntry(
        pid,
        str(entry["host"]),
        port,
        path_of(entry["cert"], f"[party.{pid}] cert"),  # type: ignore[arg-type]
        path_of(entry.get("key"), f"[party.{pid}] key", required=False),
        path_of(entry.get("share_public"), f"[party.{pid}] share_public", pid < 2),
        path_of(entry.get("share_key"), f"[party.{pid}] share_key", required=False),
        jobs,
    )


def _owners(owners_raw: Any, where: str) -> dict[str, bytes]:
    if not isinstance(owners_raw, dict):
        raise InputError(f"{where}: [owners] must be a table of name = public key")
    owners: dict[str, bytes] = {}
    for name, value in owners_raw.items():
        try:
            key_bytes = bytes.fromhex(str(value))
        except ValueError:
            key_bytes = b""
        if len(key_bytes) != 32:
            raise InputError(
                f"{where}: [owners] {name!r} must be an Ed25519 public key in 64 hex "
                f"digits; got {value!r}"
            )
        owners[str(name)] = key_bytes
    return owners


@dataclass(frozen=True)
class ClusterConfig:
    """A parsed cluster file.

    Attributes
    ----------
    path : pathlib.Path
        The cluster file.
    ca : pathlib.Path
        The CA certificate every party's and the client's certificate is checked against.
    timeout : float
        Seconds a party waits for a peer's message.
    parties : dict of int to PartyEntry
        Parties 0 and 1 (the proxies) and 2 (the helper): host, port, certificate, keys.
    client_cert, client_key : pathlib.Path or None
        The client's (analyst's) certificate and key, if the file names them.
    owners : dict of str to bytes
        The data owners whose bundles the proxies accept, with their Ed25519 public keys.
    max_frame_bytes : int, default 1 GiB
        Largest frame a party accepts (``max_frame_mb`` in the file).
    """

    path: Path
    ca: Path
    timeout: float
    parties: dict[int, PartyEntry]
    client_cert: Path | None
    client_key: Path | None
    owners: dict[str, bytes]
    max_frame_bytes: int = DEFAULT_MAX_FRAME_MB << 20

    @classmethod
    def load(cls, path: str | Path) -> ClusterConfig:
        """Read and check a cluster file (TOML).

        Paths in the file are relative to its folder.

        Raises
        ------
        InputError
            On a missing ``ca`` or party table, a timeout or frame limit out of range, or a
            malformed ``[owners]`` entry; the message names the file.
        """
        p = Path(path)
        where = f"cluster file {str(p)!r}"
        raw = _read_toml(p, where)
        if "ca" not in raw:
            raise InputError(f"{where}: 'ca' (the CA certificate) is missing")
        parties_raw = raw.get("party")
        if not isinstance(parties_raw, dict) or sorted(parties_raw) != ["0", "1", "2"]:
            raise InputError(f"{where} must have tables [party.0], [party.1] and [party.2]")
        base = p.parent
        parties = {
            int(key): _party_entry(int(key), entry, base, where)
            for key, entry in parties_raw.items()
        }
        client = raw.get("client", {})
        try:
            timeout = float(raw.get("timeout", 60.0))
            max_mb = float(raw.get("max_frame_mb", DEFAULT_MAX_FRAME_MB))
        except (TypeError, ValueError):
            raise InputError(f"{where}: timeout and max_frame_mb must be numbers") from None
        if not timeout > 0:
            raise InputError(f"{where}: timeout must be positive; got {timeout}")
        if not 1 <= max_mb <= 1 << 16:
            raise InputError(f"{where}: max_frame_mb must be in [1, 65536]; got {max_mb}")
        owners = _owners(raw.get("owners", {}), where)
        path_of = functools.partial(_path_of, base, where)
        return cls(
            p,
            path_of(raw["ca"], "ca"),  # type: ignore[arg-type]
            timeout,
            parties,
            path_of(client.get("cert"), "[client] cert", required=False),
            path_of(client.get("key"), "[client] key", required=False),
            owners,
            int(max_mb * (1 << 20)),
        )

    def proxy_keys(self) -> tuple[X25519PublicKey, X25519PublicKey]:
        """Load the proxies' public keys that owners seal their shares to."""
        keys = []
        for pid in (0, 1):
            path = self.parties[pid].share_public
            assert path is not None
            keys.append(_load_key(load_public_key, path, "share key file", f"of proxy {pid}"))
        return keys[0], keys[1]

    def proxy_key_bytes(self) -> tuple[bytes, bytes]:
        """Return the proxies' public keys as raw 32-byte strings (as job terms hold them)."""
        k0, k1 = self.proxy_keys()
        return public_bytes(k0), public_bytes(k1)


def _load_key(load: Callable[[Path], _Key], path: Path, what: str, where: str) -> _Key:
    """``load(path)``; a missing or malformed key file is an InputError naming it."""
    try:
        return load(path)
    except FileNotFoundError:
        raise InputError(f"{what} {str(path)!r} {where} does not exist") from None
    except (ValueError, ProtocolError) as exc:
        raise InputError(f"{what} {str(path)!r} {where}: {exc}") from None


def _context(
    cfg: ClusterConfig, cert: Path, key: Path | None, server: bool, table: str
) -> ssl.SSLContext:
    """Make the TLS context of ``table`` (``[party.N]`` or ``[client]``) of the cluster file.

    A missing or unloadable file is an InputError naming the one file and its entry.
    """
    where = f"of cluster file {str(cfg.path)!r}"
    if key is None:
        raise InputError(f"cluster file {str(cfg.path)!r}: no private key for {cert.name}")
    for name, file in (("ca", cfg.ca), (f"{table} cert", cert), (f"{table} key", key)):
        if not file.is_file():
            raise InputError(f"{name} file {str(file)!r} {where} does not exist")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_verify_locations(str(cfg.ca))
    except (OSError, ssl.SSLError) as exc:
        raise InputError(f"ca file {str(cfg.ca)!r} {where} cannot load: {exc}") from exc
    # Parsed one by one first, so that the error names the file that is bad.
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    for name, file, parse in (
        (f"{table} cert", cert, lambda b: x509.load_pem_x509_certificate(b)),
        (f"{table} key", key, lambda b: serialization.load_pem_private_key(b, None)),
    ):
        try:
            parse(file.read_bytes())
        except (OSError, ValueError, TypeError) as exc:
            raise InputError(f"{name} file {str(file)!r} {where} cannot load: {exc}") from None
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        if "KEY_VALUES_MISMATCH" in str(exc):
            raise InputError(
                f"{table} key file {str(key)!r} and cert file {str(cert)!r} {where} do not "
                "match (each party's key goes with its own certificate)"
            ) from exc
        raise InputError(f"{table} key file {str(key)!r} {where} cannot load: {exc}") from exc
    ctx.verify_mode = ssl.CERT_REQUIRED
    if server:
        ctx.num_tickets = 0
    return ctx


def _peer_cn(sock: ssl.SSLSocket) -> str:
    cert: dict[str, Any] = dict(sock.getpeercert() or {})
    for rdn in cert.get("subject", ()):
        for item in rdn:
            if item[0] == "commonName":
                return str(item[1])
    return ""


# -- frames on a socket ------------------------------------------------------------------


class Oversized(ProtocolError):
    """A peer announced a frame above the limit; it was read and discarded."""


class BadFrame(ProtocolError):
    """A complete frame that does not decode to a valid message; the link stays in step."""


class CannotListen(ProtocolError):
    """A party's address in the cluster file cannot be listened on (a port in use, say)."""


class NotThisCluster(ProtocolError):
    """A peer's certificate is not signed by this cluster's CA (another cluster's files)."""


class FrameSocket:
    """Length-prefixed frames (:mod:`fedroc.mpc.messages`) on a TLS socket."""

    def __init__(self, sock: ssl.SSLSocket, who: str) -> None:
        self.sock = sock
        self.who = who
        self._lock = threading.Lock()

    def send(self, message: Message, job: str = "") -> int:
        return self.send_frame(encode_message(message, job))

    def send_frame(self, frame: bytes) -> int:
        with self._lock:
            self.sock.sendall(frame)
        return len(frame)

    def _exact(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], min(n - got, 1 << 20))
            if k == 0:
                raise EOFError("connection closed")
            got += k
        return buf

    def _discard(self, n: int) -> None:
        chunk = bytearray(1 << 20)
        while n > 0:
            k = self.sock.recv_into(chunk, min(n, len(chunk)))
            if k == 0:
                raise EOFError("connection closed")
            n -= k

    def recv(self, limit: int, *, discard_oversized: bool = False) -> tuple[str, Message, int]:
        """Next frame: ``(job id, message, size)``; the length is checked before reading."""
        (length,) = struct.unpack("<Q", self._exact(FRAME_PREFIX))
        try:
            check_frame_length(length, limit, self.who)
        except ProtocolError as exc:
            if discard_oversized and length <= 1 << 40:
                self._discard(length)  # keep the stream in step; the frame is dropped
                raise Oversized(str(exc)) from None
            raise
        body = self._exact(length)
        try:
            job, message = decode_message(body)
        except ProtocolError as exc:
            raise BadFrame(f"{self.who} sent {exc}") from None
        return job, message, length + FRAME_PREFIX

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def _configure(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


# TLS alerts a party gets from a peer that does not trust its certificate.
_FOREIGN_CERT = (
    "TLSV1_ALERT_UNKNOWN_CA",
    "SSLV3_ALERT_BAD_CERTIFICATE",
    "CERTIFICATE_VERIFY_FAILED",
)

# Errors that mean "the party is not listening yet" while the cluster starts.
_NOT_YET = (ConnectionRefusedError, ConnectionResetError, TimeoutError, socket.gaierror)


def _dial(
    ctx: ssl.SSLContext, entry: PartyEntry, peer: int, role: str, deadline: float, ca: Path
) -> FrameSocket:
    """Open a TLS connection to party ``peer``, its certificate checked.

    Retried until ``deadline`` while the party is not listening yet.
    """

    def attempt() -> FrameSocket:
        raw = socket.create_connection((entry.host, entry.port), timeout=5.0)
        _configure(raw)
        tls = ctx.wrap_socket(raw, server_hostname=entry.host)
        if _peer_cn(tls) != party_cn(peer):
            raise ProtocolError(
                f"{entry.host}:{entry.port} is not party {peer} (it presented {_peer_cn(tls)!r})"
            )
        tls.settimeout(None)
        return FrameSocket(tls, role)

    try:
        return retry(attempt, retry_on=_NOT_YET, deadline=deadline, pause=0.02)
    except ssl.SSLCertVerificationError as exc:
        raise NotThisCluster(
            f"party {peer} at {entry.host}:{entry.port} presented a certificate not signed by "
            f"this cluster's CA ({ca}): do all three parties and the analyst use the same "
            f"cluster files (one `fedroc mpc certs` run)? ({exc.verify_message})"
        ) from None
    except ssl.SSLError as exc:
        raise ProtocolError(f"TLS with party {peer} failed: {exc}") from exc
    except RetryExpired as exc:
        raise ProtocolError(
            f"could not reach party {peer} at {entry.host}:{entry.port}: {exc.last}"
        ) from None


# -- the party's links and channel -------------------------------------------------------


@dataclass(frozen=True)
class Incoming:
    job: str
    message: Message
    size: int


class Links:
    """Outgoing sockets and incoming queues of one party."""

    def __init__(self, pid: int, limit: int) -> None:
        self.pid = pid
        self.limit = limit
        self.out: dict[int, FrameSocket] = {}
        self.inbound: dict[int, FrameSocket] = {}
        self.queues: dict[int, queue.Queue[Any]] = {p: queue.Queue() for p in range(3) if p != pid}
        self.ready = {p: threading.Event() for p in range(3) if p != pid}
        self.dead: str | None = None
        self.aborted: dict[str, str] = {}  # job attempt -> why it ended (a peer's error)
        self._lock = threading.Lock()

    def add_inbound(self, peer: int, fs: FrameSocket) -> None:
        self.inbound[peer] = fs
        thread = threading.Thread(target=self._read, args=(peer, fs), daemon=True)
        thread.start()
        self.ready[peer].set()

    def _read(self, peer: int, fs: FrameSocket) -> None:
        q = self.queues[peer]
        while True:
            try:
                job, message, size = fs.recv(self.limit, discard_oversized=True)
            except (Oversized, BadFrame) as exc:
                # The current job cannot go on without that frame; the link stays usable.
                message, job, size = ErrorMessage(str(exc), "*"), "*", 0
            except (EOFError, OSError, ValueError, ProtocolError) as exc:
                reason = (
                    f"connection from {ROLE[peer]} closed"
                    if isinstance(exc, EOFError)
                    else f"connection from {ROLE[peer]} failed: {exc}"
                )
                if self.dead is None:
                    self.dead = reason
                q.put(Stop(reason))
                return
            if isinstance(message, ErrorMessage):
                with self._lock:
                    self.aborted.setdefault(
                        message.job or job, f"{ROLE[peer]} stopped: {message.reason}"
                    )
            q.put(Incoming(job, message, size))

    def abort_reason(self, run: str) -> str | None:
        with self._lock:
            return self.aborted.get(run) or self.aborted.get("*")

    def clear_oversized(self) -> None:
        with self._lock:
            self.aborted.pop("*", None)

    def close(self) -> None:
        for fs in [*self.out.values(), *self.inbound.values()]:
            fs.close()


class NetChannel(Channel):
    """The links of one party, scoped to one job: frames of other jobs are dropped."""

    def __init__(self, links: Links, job: str) -> None:
        self.links = links
        self.pid = links.pid
        self.job = job

    def send(self, peer: int, tag: str, payload: Any) -> int:
        return self.send_message(peer, StepFrame(tag, payload))

    def send_message(self, peer: int, message: Message) -> int:
        try:
            return self.links.out[peer].send(message, self.job)
        except OSError as exc:
            raise PeerStopped(f"{ROLE[self.pid]}: cannot send to {ROLE[peer]}: {exc}") from exc

    def receive(self, peer: int, timeout: float) -> Incoming:
        """Next message of this job from ``peer``; raises PeerStopped if the job ended."""
        deadline = time.monotonic() + timeout
        q = self.links.queues[peer]
        while True:
            reason = self.links.abort_reason(self.job)
            if reason is not None:
                raise PeerStopped(f"{ROLE[self.pid]}: {reason}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PeerStopped(
                    f"{ROLE[self.pid]}: no message from {ROLE[peer]} within {timeout:g} s"
                )
            try:
                item = q.get(timeout=min(remaining, 0.05))
            except queue.Empty:
                continue
            if isinstance(item, Stop):
                q.put(item)  # later reads fail the same way
                raise PeerStopped(f"{ROLE[self.pid]}: {item.reason}")
            if item.job != self.job:
                continue  # a frame of an ended job
            if isinstance(item.message, ErrorMessage):
                raise PeerStopped(f"{ROLE[self.pid]}: {ROLE[peer]} stopped: {item.message.reason}")
            return item

    def expect(self, peer: int, kind: type[Message], timeout: float) -> tuple[Any, int]:
        item = self.receive(peer, timeout)
        if not isinstance(item.message, kind):
            raise ProtocolError(
                f"{ROLE[self.pid]}: expected a {kind.KIND!r} message from {ROLE[peer]}, got "
                f"{item.message.KIND!r}"
            )
        return item.message, item.size

    def recv(self, peer: int, timeout: float) -> tuple[str, Any, int]:
        message, size = self.expect(peer, StepFrame, timeout)
        return message.tag, message.payload, size

    def close(self, reason: str | None = None) -> None:
        if reason is None:
            return
        for peer in self.links.out:
            with contextlib.suppress(OSError):
                self.links.out[peer].send(ErrorMessage(reason, self.job), self.job)


# -- the party process -------------------------------------------------------------------


def _log(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def _stats(party: Party) -> StatsRecord:
    s = party.stats
    return StatsRecord(s.rounds, s.bytes_sent, s.bytes_received, s.messages_sent, s.seconds)


def _result_aad(job_id: str, pid: int) -> bytes:
    return f"fedroc-mpc-result|{job_id}|proxy{pid}".encode()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, (ProtocolError, InputError)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class PartyServer:
    """One party of a cluster: ``serve()`` runs until shutdown (0) or a lost link (1).

    Parameters
    ----------
    config : ClusterConfig
        The cluster file.
    pid : {0, 1, 2}
        This party: proxy 0 (it takes clients' jobs), proxy 1, or the helper.
    startup_timeout : float, default 60
        Seconds to wait for the other parties to connect.
    die_after_rounds, fail_first_job_after_rounds : int, optional
        Fault injection for tests: exit after that many rounds, or fail the first job there.
    log : callable, default: print to stderr
        Where the party's log lines go.

    Raises
    ------
    InputError
        For a bad ``pid``, or a proxy whose share key is missing, unreadable or not the one
        the cluster file registers.
    """

    def __init__(
        self,
        config: ClusterConfig,
        pid: int,
        *,
        startup_timeout: float = 60.0,
        die_after_rounds: int | None = None,
        fail_first_job_after_rounds: int | None = None,
        log: Callable[[str], None] = _log,
    ) -> None:
        if pid not in (0, 1, 2):
            raise InputError(f"party id must be 0, 1 or 2; got {pid!r}")
        self.cfg = config
        self.pid = pid
        self.entry = config.parties[pid]
        self.startup_timeout = startup_timeout
        self.die_after_rounds = die_after_rounds
        # Fault injection for tests: the first job fails here (an error, not a crash).
        self.fail_after_rounds = fail_first_job_after_rounds
        self.log = log
        self.links = Links(pid, config.max_frame_bytes)
        self.jobs: queue.Queue[tuple[FrameSocket, Message]] = queue.Queue()
        table = f"[party.{pid}]"
        self.server_ctx = _context(config, self.entry.cert, self.entry.key, True, table)
        self.client_ctx = _context(config, self.entry.cert, self.entry.key, False, table)
        self.share_key: X25519PrivateKey | None = None
        self.ledger: JobLedger | None = None
        self.proxy_keys: tuple[bytes, bytes] = (b"", b"")
        if pid in (0, 1):
            path = self.entry.share_key
            if path is None:
                raise InputError(
                    f"cluster file {str(config.path)!r}: [party.{pid}] needs share_key (this "
                    "proxy's private key)"
                )
            self.share_key = _load_key(
                load_private_key, path, "share_key file", f"of [party.{pid}]"
            )
            self.proxy_keys = config.proxy_key_bytes()
            if public_bytes(self.share_key) != self.proxy_keys[pid]:
                raise InputError(
                    f"share_key {str(path)!r} of [party.{pid}] does not match its share_public"
                )
            self.ledger = JobLedger(self.entry.jobs)
        self._listener: socket.socket | None = None
        # Why a peer's TLS connection was refused for its certificate (said at startup).
        self.refused: str | None = None
        # Set, under _said, once the party says it cannot start: its last line then stays the
        # cause, not a refused connection its accept thread logs after it.
        self._stopping = threading.Event()
        self._said = threading.Lock()
        # The job this party is running, if any (named when it is interrupted).
        self.current_job: str | None = None

    def name(self) -> str:
        """Name this party in log lines (``fedroc mpc party 0 (proxy 0)``)."""
        return f"fedroc mpc party {self.pid} ({ROLE[self.pid]})"

    # -- connections -------------------------------------------------------------------
    def _accept_loop(self) -> None:
        assert self._listener is not None
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            _configure(conn)
            conn.settimeout(self.startup_timeout)
            tls = self.server_ctx.wrap_socket(conn, server_side=True)
            fs = FrameSocket(tls, "a connecting peer")
            _, hello, _ = fs.recv(HELLO_LIMIT)
            cn = _peer_cn(tls)
            if not isinstance(hello, Hello):
                raise ProtocolError(f"unexpected first message {hello.KIND!r}")
            if hello.role == "party":
                peer = hello.pid
                if peer == self.pid or peer not in (0, 1, 2) or cn != party_cn(peer):
                    raise ProtocolError(f"a peer claiming to be party {peer} presented {cn!r}")
                if self.links.ready[peer].is_set():
                    raise ProtocolError(f"party {peer} connected twice")
                tls.settimeout(None)
                fs.who = ROLE[peer]
                self.links.add_inbound(peer, fs)
                return
            if cn != CLIENT_CN:
                raise ProtocolError(f"a client presented certificate {cn!r}")
            if self.pid != 0:
                fs.send(ErrorMessage(f"party {self.pid} takes no jobs; send them to party 0"))
                fs.close()
                return
            fs.who = "the client"
            try:
                _, request, _ = fs.recv(self.cfg.max_frame_bytes)
            except ProtocolError as exc:
                with contextlib.suppress(OSError):
                    fs.send(ErrorMessage(f"request refused by proxy 0: {exc}"))
                raise
            tls.settimeout(None)
            self.jobs.put((fs, request))
        except (OSError, EOFError, ssl.SSLError, ProtocolError, ValueError) as exc:
            with self._said:
                if not self._stopping.is_set():
                    self.log(f"{self.name()}: refused a connection: {exc}")
            if isinstance(exc, ssl.SSLError) and exc.reason in _FOREIGN_CERT:
                self.refused = str(exc)
            with contextlib.suppress(OSError):
                conn.close()

    def _connect(self, peer: int, deadline: float) -> None:
        fs = _dial(self.client_ctx, self.cfg.parties[peer], peer, ROLE[peer], deadline, self.cfg.ca)
        fs.send(Hello("party", self.pid))
        self.links.out[peer] = fs

    def start(self) -> None:
        """Listen, connect to both peers and wait for their connections."""
        try:
            self._listener = socket.create_server((self.entry.host, self.entry.port))
        except OSError as exc:
            raise CannotListen(
                f"cannot listen on {self.entry.host}:{self.entry.port}: {exc.strerror or exc}"
            ) from None
        threading.Thread(target=self._accept_loop, daemon=True).start()
        deadline = time.monotonic() + self.startup_timeout
        for peer in range(3):
            if peer != self.pid:
                self._connect(peer, deadline)
        for peer, event in self.links.ready.items():
            if not event.wait(max(0.0, deadline - time.monotonic())):
                raise ProtocolError(
                    f"party {peer} did not connect within {self.startup_timeout:g} s"
                )
        self.log(f"{self.name()}: ready on {self.entry.host}:{self.entry.port}")

    # -- serving -----------------------------------------------------------------------
    def serve(self) -> int:
        """Serve jobs until shut down (returns 0) or until a peer is lost (returns 1).

        A party that cannot start returns 2 when its own address cannot be listened on (the
        user fixes the cluster file, as a bad ``--port`` of other commands), else 1.
        """
        try:
            self.start()
        except (ProtocolError, OSError) as exc:
            hint = ""
            if self.refused is not None and not isinstance(exc, NotThisCluster):
                hint = (
                    f"; a peer's TLS connection failed on a certificate ({self.refused}): "
                    "do all three parties use the same cluster files?"
                )
            with self._said:
                self._stopping.set()
                self.log(f"{self.name()}: cannot start: {exc}{hint}")
            mismatch = isinstance(exc, (CannotListen, NotThisCluster)) or bool(hint)
            return 2 if mismatch else 1
        try:
            return self._serve_proxy0() if self.pid == 0 else self._serve_follower()
        except KeyboardInterrupt:
            # Ctrl-C at the party's terminal: say so (typer would exit 130 without a word).
            # The peers see the link close and stop (exit 1); the job's result was not sent,
            # and the ledger records a job only once its result is complete.
            job = self.current_job
            during = f" during job {job}" if job is not None else ""
            self.log(f"{self.name()}: interrupted (Ctrl-C){during}: stopping")
            return 130
        finally:
            self.links.close()
            if self._listener is not None:
                self._listener.close()

    def _serve_proxy0(self) -> int:
        while True:
            if self.links.dead is not None:
                self.log(f"{self.name()}: stopping: {self.links.dead}")
                return 1
            try:
                client, request = self.jobs.get(timeout=0.1)
            except queue.Empty:
                continue
            if isinstance(request, Shutdown):
                for fs in self.links.out.values():
                    with contextlib.suppress(OSError):
                        fs.send(Shutdown())
                with contextlib.suppress(OSError):
                    client.send(Ok())
                client.close()
                self.log(f"{self.name()}: shut down by a stop request (fedroc mpc stop)")
                return 0
            if not isinstance(request, JobRequest):
                with contextlib.suppress(OSError):
                    client.send(ErrorMessage(f"unexpected request {request.KIND!r}"))
                client.close()
                continue
            self._job_proxy0(request, client)
            self.current_job = None
            client.close()

    def _serve_follower(self) -> int:
        q = self.links.queues[0]
        while True:
            try:
                item = q.get(timeout=0.1)
            except queue.Empty:
                if self.links.dead is not None:
                    self.log(f"{self.name()}: stopping: {self.links.dead}")
                    return 1
                continue
            if isinstance(item, Stop):
                self.log(f"{self.name()}: stopping: {item.reason}")
                return 1
            message = item.message
            if isinstance(message, Shutdown):
                self.log(f"{self.name()}: shut down by a stop request (fedroc mpc stop)")
                return 0
            if self.pid == 1 and isinstance(message, Forward):
                self._job_proxy1(item.job, message, item.size)
            elif self.pid == 2 and isinstance(message, HelperJob):
                self._job_helper(item.job, message, item.size)
            self.current_job = None
            # Anything else is a frame of an ended job: dropped.
            if self.links.dead is not None:
                self.log(f"{self.name()}: stopping: {self.links.dead}")
                return 1

    # -- one job at each party ---------------------------------------------------------
    def _party(self, channel: Channel, seeds: dict[int, bytes]) -> Party:
        if self.fail_after_rounds is not None:
            fail, self.fail_after_rounds = self.fail_after_rounds, None
            return Party(self.pid, channel, seeds, timeout=self.cfg.timeout, die_after_rounds=fail)
        return Party(
            self.pid,
            channel,
            seeds,
            timeout=self.cfg.timeout,
            die_after_rounds=self.die_after_rounds,
            on_die=lambda: os._exit(3),
        )

    def _verdicts(self, channel: NetChannel, own: Verdict, party: Party) -> str | None:
        """Send this party's verdict, hear the others'; the first refusal's reason, if any."""
        for peer in self.links.out:
            party.stats.bytes_sent += channel.send_message(peer, own)
        refusals = [] if own.accept else [f"{ROLE[self.pid]}: {own.reason}"]
        for peer in sorted(self.links.out):
            verdict, size = channel.expect(peer, Verdict, self.cfg.timeout)
            party.stats.bytes_received += size
            if not verdict.accept:
                refusals.append(f"{ROLE[peer]}: {verdict.reason}")
        return refusals[0] if refusals else None

    def _run(self, party: Party, lists: list[np.ndarray], spec: AucSpec) -> np.ndarray:
        self.current_job = party.channel.job.split(".")[0]  # type: ignore[attr-defined]
        self.log(
            f"{self.name()}: job {party.channel.job}: {len(spec.sizes)} owners, "  # type: ignore[attr-defined]
            f"n = {spec.n}, sort = {spec.sort}, ci = {spec.ci}, precision = 2^-{spec.frac_bits}"
        )
        return np.asarray(execute(party, auc_program(party, lists, spec)))

    def _run_sealed(
        self, party: Party, lists: list[np.ndarray], spec: AucSpec, job: str, client_key: bytes
    ) -> bytes:
        """Run the job; this proxy's share of the outputs, sealed for the analyst."""
        share = np.ascontiguousarray(self._run(party, lists, spec), "<u8").tobytes()
        return seal(public_from_bytes(client_key), share, _result_aad(job, self.pid))

    def _fail(self, channel: NetChannel, exc: BaseException) -> str:
        reason = _reason(exc)
        self.log(f"{self.name()}: job {channel.job} failed: {reason}")
        channel.close(reason)
        return reason

    def _admit_job(
        self, terms: JobTerms, parts: list[OwnerPart], boxes: list[bytes]
    ) -> tuple[AucSpec, list[np.ndarray]]:
        """Check a job against the owners' registry and the ledger; open this proxy's boxes.

        ``boxes`` are this proxy's share of each owner's bundle, in the order of ``parts``.
        Raises :class:`ProtocolError` or :class:`InputError` when the job is refused.
        """
        assert self.share_key is not None and self.ledger is not None
        spec = check_job(
            terms, parts, registry=self.cfg.owners, proxy_keys=self.proxy_keys, ledger=self.ledger
        )
        lists = [
            open_box(terms, part.owner, part.n, box, self.pid, self.share_key)
            for part, box in zip(parts, boxes, strict=True)
        ]
        return spec, lists

    def _job_proxy0(self, request: JobRequest, client: FrameSocket) -> None:
        assert self.share_key is not None and self.ledger is not None
        # Checked before the others hear of the job: a bad request costs them nothing.
        try:
            terms = request.bundles[0].terms
            if any(b.terms != terms for b in request.bundles):
                raise JobRefused("the bundles were made for different jobs")
            parts = [
                OwnerPart(b.owner, b.n, b.owner_key, b.signature, digest(b.box0), digest(b.box1))
                for b in request.bundles
            ]
            spec, lists = self._admit_job(terms, parts, [b.box0 for b in request.bundles])
        except (ProtocolError, InputError) as exc:
            self.log(f"{self.name()}: refused a job: {exc}")
            with contextlib.suppress(OSError):
                client.send(ErrorMessage(f"job refused by proxy 0: {exc}"))
            return
        job = terms.job
        # Frames carry the job id and an attempt number: a job refused or failed before its
        # result was released may be submitted again, and frames of the ended attempt that
        # are still on their way must not be taken for the new one's.
        run = f"{job}.{secrets.token_hex(6)}"
        self.links.clear_oversized()
        channel = NetChannel(self.links, run)
        seeds = {1: new_seed(), 2: new_seed()}
        party = self._party(channel, seeds)
        try:
            forward = Forward(
                terms,
                tuple(
                    ForwardedBundle(b.owner, b.n, b.owner_key, b.signature, digest(b.box0), b.box1)
                    for b in request.bundles
                ),
                request.client_key,
                seeds[1],
            )
            party.stats.bytes_sent += channel.send_message(1, forward)
            party.stats.bytes_sent += channel.send_message(2, HelperJob(spec, seeds[2]))
            refused = self._verdicts(channel, Verdict(True), party)
            if refused is not None:
                self.log(f"{self.name()}: job {job} refused by {refused}")
                with contextlib.suppress(OSError):
                    client.send(ErrorMessage(f"job refused by {refused}", run))
                return
            box0 = self._run_sealed(party, lists, spec, job, request.client_key)
            share1, _ = channel.expect(1, ResultShare, self.cfg.timeout)
            share2, _ = channel.expect(2, ResultShare, self.cfg.timeout)
            self.ledger.record(job, list(terms.owners), [p.fingerprint() for p in parts])
        except Exception as exc:
            reason = self._fail(channel, exc)
            here = f"{ROLE[self.pid]}: "
            reason = reason[len(here) :] if reason.startswith(here) else reason
            # Proxy 0 records a job only once all result shares are in: nothing opened. A
            # helper proxy records it just before it sends its share, so one that failed in
            # that gap refuses the same bundles later as run before (the walkthrough's find).
            with contextlib.suppress(OSError):
                client.send(
                    ErrorMessage(
                        f"MPC job failed at {ROLE[self.pid]}: {reason}; nothing was released; "
                        "the same bundles may be submitted again (should a proxy refuse them "
                        "as run before, the owners share anew under a new job id)",
                        run,
                    )
                )
            return
        with contextlib.suppress(OSError):
            client.send(Result(box0, share1.box, (_stats(party), share1.stats, share2.stats)), run)
        self.log(
            f"{self.name()}: job {job} done: {party.stats.rounds} rounds, "
            f"{party.stats.bytes_sent} bytes sent"
        )

    def _job_proxy1(self, run: str, forward: Forward, size: int) -> None:
        assert self.share_key is not None and self.ledger is not None
        job = run.split(".")[0]
        self.links.clear_oversized()
        channel = NetChannel(self.links, run)
        seeds = {0: forward.seed, 2: new_seed()}
        party = self._party(channel, seeds)
        party.stats.bytes_received += size
        try:
            party.stats.bytes_sent += channel.send_message(2, Seed(seeds[2]))
            terms = forward.terms
            lists: list[np.ndarray] = []
            try:
                if terms.job != job:
                    raise JobRefused(f"frames of job {job} carry terms of job {terms.job}")
                parts = [
                    OwnerPart(b.owner, b.n, b.owner_key, b.signature, b.digest0, digest(b.box1))
                    for b in forward.bundles
                ]
                spec, lists = self._admit_job(terms, parts, [b.box1 for b in forward.bundles])
                own = Verdict(True)
            except (ProtocolError, InputError) as exc:
                self.log(f"{self.name()}: refused job {job}: {exc}")
                own = Verdict(False, str(exc))
            refused = self._verdicts(channel, own, party)
            if refused is not None:
                return
            box1 = self._run_sealed(party, lists, spec, job, forward.client_key)
            self.ledger.record(job, list(terms.owners), [p.fingerprint() for p in parts])
            channel.send_message(0, ResultShare(box1, _stats(party)))
        except Exception as exc:
            self._fail(channel, exc)
            return
        self.log(f"{self.name()}: job {job} done: {party.stats.rounds} rounds")

    def _job_helper(self, run: str, helper_job: HelperJob, size: int) -> None:
        job = run.split(".")[0]
        self.links.clear_oversized()
        channel = NetChannel(self.links, run)
        spec = helper_job.spec
        try:
            seed12, seed_size = channel.expect(1, Seed, self.cfg.timeout)
            party = self._party(channel, {0: helper_job.seed, 1: seed12.seed})
            party.stats.bytes_received += size + seed_size
            if self._verdicts(channel, Verdict(True), party) is not None:
                return
            lists = [np.zeros((n, spec.fields), dtype=np.uint64) for n in spec.sizes]
            self._run(party, lists, spec)
            channel.send_message(0, ResultShare(b"", _stats(party)))
        except Exception as exc:
            self._fail(channel, exc)
            return
        self.log(f"{self.name()}: job {job} done: {party.stats.rounds} rounds")


# -- the client --------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterResult:
    """What a client gets back from a cluster job.

    Attributes
    ----------
    outputs : AucOutputs
        The opened values (only the client can open the result shares).
    stats : list of PartyStats
        Communication of each party during the job.
    seconds : float
        Wall time of the job as the client saw it.
    bytes_sent, bytes_received : int
        The client's own traffic with proxy 0.
    """

    outputs: AucOutputs
    stats: list[PartyStats]
    seconds: float
    bytes_sent: int
    bytes_received: int

    @property
    def values(self) -> dict[str, float]:
        """The opened values by name (see :meth:`AucOutputs.values`)."""
        return self.outputs.values()


def job_of(bundles: list[Bundle], *, strict: bool = True) -> tuple[Any, AucSpec]:
    """Return the terms all bundles share and the job's spec.

    InputError if they disagree (unless ``strict`` is False: tests that play a dishonest client send
    such jobs anyway).
    """
    if not bundles:
        raise InputError("a job needs at least one owner's bundle")
    terms = bundles[0].terms
    for b in bundles[1:]:
        if strict and b.terms != terms:
            raise InputError(
                f"the bundles of {bundles[0].owner!r} and {b.owner!r} were made for different "
                f"jobs ({terms.job} and {b.terms.job})"
            )
    return terms, terms.spec(tuple(b.n for b in bundles))


#: Seconds the client waits for party 0 before it says it is trying to reach it.
CONNECT_NOTICE_AFTER = 0.5


class ClusterClient:
    """Submit jobs to party 0 of a running cluster.

    Parameters
    ----------
    config : ClusterConfig
        The cluster file; it must name the client's certificate (``[client] cert``).
    connect_timeout : float, default 10
        Seconds to keep trying to reach party 0.
    connecting : callable, optional
        Called with one line (``trying to reach party 0 at HOST:PORT ...``) when party 0
        has not answered within :data:`CONNECT_NOTICE_AFTER` seconds, so that a user is not
        left waiting the whole ``connect_timeout`` in silence before "could not reach party
        0" (``fedroc mpc run`` prints it on stderr). Not called when party 0 answers at
        once.
    """

    def __init__(
        self,
        config: ClusterConfig,
        *,
        connect_timeout: float = 10.0,
        connecting: Callable[[str], None] | None = None,
    ) -> None:
        self.cfg = config
        self.connect_timeout = connect_timeout
        self.connecting = connecting
        if config.client_cert is None:
            raise InputError(f"cluster file {str(config.path)!r} has no [client] cert")
        self.ctx = _context(config, config.client_cert, config.client_key, False, "[client]")

    def _connect(self) -> FrameSocket:
        deadline = time.monotonic() + self.connect_timeout
        entry = self.cfg.parties[0]
        notice = None
        if self.connecting is not None:
            line = (
                f"trying to reach party 0 (proxy 0) at {entry.host}:{entry.port}, for up to "
                f"{self.connect_timeout:g} s"
            )
            notice = threading.Timer(CONNECT_NOTICE_AFTER, self.connecting, args=(line,))
            notice.daemon = True
            notice.start()
        try:
            fs = _dial(self.ctx, entry, 0, "proxy 0", deadline, self.cfg.ca)
        except (NotThisCluster, CannotListen):
            raise
        except ProtocolError as exc:
            if "could not reach" not in str(exc):
                raise
            raise ProtocolError(
                f"{exc}; is the cluster running (fedroc mpc party --cluster {self.cfg.path} "
                "--id 0, 1 and 2)?"
            ) from None
        finally:
            if notice is not None:
                notice.cancel()
        fs.send(Hello("client"))
        return fs

    def run(
        self,
        bundles: list[Bundle],
        *,
        timeout: float | None = 3600.0,
        strict: bool = True,
        progress: Callable[[float], None] | None = None,
        every: float = 10.0,
    ) -> ClusterResult:
        """Run the job the owners' bundles were made for; only this client opens the result.

        ``strict=False`` skips the client's own consistency checks (the proxies check
        everything again); tests use it to play a dishonest client. ``progress``, if given,
        is called with the seconds waited so far every ``every`` seconds while the cluster
        computes (the client's clock only: the parties send nothing more).
        """
        terms, spec = job_of(list(bundles), strict=strict)
        start = time.perf_counter()
        key = new_key()
        fs = self._connect()
        done = threading.Event()
        if progress is not None:
            beat = progress

            def heartbeat() -> None:
                begun = time.monotonic()
                while not done.wait(every):
                    beat(time.monotonic() - begun)

            threading.Thread(target=heartbeat, daemon=True).start()
        try:
            sent = fs.send(JobRequest(tuple(bundles), public_bytes(key)))
            fs.sock.settimeout(timeout)
            try:
                _, answer, received = fs.recv(self.cfg.max_frame_bytes)
            except EOFError:
                raise ProtocolError(
                    "proxy 0 closed the connection before answering (it stopped or died)"
                ) from None
            except TimeoutError:
                raise ProtocolError(f"no answer from the cluster within {timeout:g} s") from None
        finally:
            done.set()
            fs.close()
        if isinstance(answer, ErrorMessage):
            raise ProtocolError(answer.reason)
        if not isinstance(answer, Result):
            raise ProtocolError(f"unexpected answer {answer.KIND!r} from party 0")
        shares = [
            np.frombuffer(unseal(key, box, _result_aad(terms.job, pid)), dtype="<u8").astype(
                np.uint64
            )
            for pid, box in ((0, answer.box0), (1, answer.box1))
        ]
        if shares[0].shape != shares[1].shape:
            raise ProtocolError("the proxies' result shares differ in length")
        opened = shares[0] + shares[1]
        party_stats = [
            PartyStats(s.rounds, s.bytes_sent, s.bytes_received, s.messages_sent, s.seconds)
            for s in answer.stats
        ]
        return ClusterResult(
            decode_outputs(opened, spec),
            party_stats,
            time.perf_counter() - start,
            sent,
            received,
        )

    def shutdown(self) -> None:
        """Ask the cluster to stop: proxy 0 passes it on to the other parties."""
        fs = self._connect()
        try:
            fs.send(Shutdown())
            fs.sock.settimeout(10.0)
            fs.recv(HELLO_LIMIT)
        except (EOFError, OSError, ProtocolError):
            pass
        finally:
            fs.close()
