"""Three OS processes over TCP with mutual TLS: the cluster file, the parties, the client.

Topology. Every party listens on its address and opens one TLS connection to each peer; a
party only *writes* to the connections it opened and only *reads* from those it accepted,
so no TLS socket is used by two threads (a reader thread per accepted link fills a queue;
sends block at most until the peer's reader drains them, which it always does). Every
certificate is checked against the cluster's CA and its common name against the role the
peer claims. Jobs come from a client (the analyst) to party 0 only, which forwards them;
results go back the same way, each proxy's result share sealed for the client's one-time
key, so party 0 cannot read party 1's share.

Failure. A party whose peer disconnects, sends an error or stays silent for ``timeout``
seconds stops the job, tells the others, answers the client (party 0) with the reason and
exits with status 1: the cluster never hangs and never returns a partial result. Start the
parties again after a failed job.

The cluster file (TOML; paths relative to it; :func:`fedroc.mpc.certs.generate_cluster`
writes one for local runs)::

    ca = "ca.pem"
    timeout = 60.0            # seconds to wait for a peer's message
    [party.0]                 # proxy 0; [party.1] proxy 1; [party.2] the helper
    host = "127.0.0.1"
    port = 7400
    cert = "party0.pem"
    key = "party0.key"        # needed only by party 0 itself
    share_public = "party0.share.pub"   # proxies: owners seal shares to this key
    share_key = "party0.share.key"      # proxies: needed only by that proxy
    [client]
    cert = "client.pem"
    key = "client.key"
"""

from __future__ import annotations

import contextlib
import json
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
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

from fedroc.exceptions import InputError, ProtocolError
from fedroc.mpc.auc import AucSpec, auc_program, decode_outputs
from fedroc.mpc.bundle import Bundle, open_bundle
from fedroc.mpc.certs import CLIENT_CN, party_cn
from fedroc.mpc.prg import new_seed
from fedroc.mpc.runtime import (
    ROLE,
    Channel,
    Party,
    PartyStats,
    PeerStopped,
    _Stop,
    execute,
    frame_size,
    pack,
    unpack,
)
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

ERROR_TAG = "__error__"


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


@dataclass(frozen=True)
class ClusterConfig:
    """A parsed cluster file."""

    path: Path
    ca: Path
    timeout: float
    parties: dict[int, PartyEntry]
    client_cert: Path | None
    client_key: Path | None

    @classmethod
    def load(cls, path: str | Path) -> ClusterConfig:
        p = Path(path)
        try:
            with p.open("rb") as fh:
                raw = tomllib.load(fh)
        except FileNotFoundError:
            raise InputError(f"cluster file {str(p)!r} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise InputError(f"cluster file {str(p)!r} is not valid TOML: {exc}") from exc
        base = p.parent

        def path_of(value: Any, what: str, required: bool = True) -> Path | None:
            if value is None:
                if required:
                    raise InputError(f"cluster file {str(p)!r}: {what} is missing")
                return None
            return (base / str(value)).resolve()

        if "ca" not in raw:
            raise InputError(f"cluster file {str(p)!r}: 'ca' (the CA certificate) is missing")
        parties_raw = raw.get("party")
        if not isinstance(parties_raw, dict) or sorted(parties_raw) != ["0", "1", "2"]:
            raise InputError(
                f"cluster file {str(p)!r} must have tables [party.0], [party.1] and [party.2]"
            )
        parties: dict[int, PartyEntry] = {}
        for key, entry in parties_raw.items():
            pid = int(key)
            for field in ("host", "port", "cert"):
                if field not in entry:
                    raise InputError(f"cluster file {str(p)!r}: [party.{pid}] has no {field!r}")
            port = entry["port"]
            if not isinstance(port, int) or not 0 < port < 65536:
                raise InputError(f"cluster file {str(p)!r}: [party.{pid}] port {port!r} is invalid")
            parties[pid] = PartyEntry(
                pid,
                str(entry["host"]),
                port,
                path_of(entry["cert"], f"[party.{pid}] cert"),  # type: ignore[arg-type]
                path_of(entry.get("key"), f"[party.{pid}] key", required=False),
                path_of(entry.get("share_public"), f"[party.{pid}] share_public", pid < 2),
                path_of(entry.get("share_key"), f"[party.{pid}] share_key", required=False),
            )
        client = raw.get("client", {})
        timeout = float(raw.get("timeout", 60.0))
        if timeout <= 0:
            raise InputError(f"cluster file {str(p)!r}: timeout must be positive; got {timeout}")
        return cls(
            p,
            path_of(raw["ca"], "ca"),  # type: ignore[arg-type]
            timeout,
            parties,
            path_of(client.get("cert"), "[client] cert", required=False),
            path_of(client.get("key"), "[client] key", required=False),
        )

    def proxy_keys(self) -> tuple[X25519PublicKey, X25519PublicKey]:
        """The proxies' public keys that owners seal their shares to."""
        keys = []
        for pid in (0, 1):
            path = self.parties[pid].share_public
            assert path is not None
            try:
                keys.append(load_public_key(path))
            except FileNotFoundError:
                raise InputError(
                    f"share key file {str(path)!r} of proxy {pid} does not exist"
                ) from None
        return keys[0], keys[1]


def _context(cfg: ClusterConfig, cert: Path, key: Path | None, server: bool) -> ssl.SSLContext:
    if key is None:
        raise InputError(f"cluster file {str(cfg.path)!r}: no private key for {cert.name}")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(cert), str(key))
        ctx.load_verify_locations(str(cfg.ca))
    except (FileNotFoundError, ssl.SSLError) as exc:
        raise InputError(f"cannot load TLS files ({cert}, {key}, {cfg.ca}): {exc}") from exc
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


class FrameSocket:
    """Length-prefixed frames (see :func:`fedroc.mpc.runtime.pack`) on a TLS socket."""

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self.sock = sock
        self._lock = threading.Lock()

    def send(self, tag: str, payload: Any) -> int:
        header, buffers = pack(tag, payload)
        size = frame_size(header, buffers)
        prefix = struct.pack("<QI", size - 8, len(header)) + header
        with self._lock:
            if size <= 1 << 16:
                self.sock.sendall(prefix + b"".join(buffers))
            else:
                self.sock.sendall(prefix)
                for buf in buffers:
                    if buf.nbytes:
                        self.sock.sendall(buf)
        return size

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

    def recv(self) -> tuple[str, Any, int]:
        body_len, header_len = struct.unpack("<QI", self._exact(12))
        body = self._exact(body_len - 4)
        tag, payload = unpack(bytes(body[:header_len]), memoryview(body)[header_len:])
        return tag, payload, body_len + 8

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _configure(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


# -- the party's links and channel -------------------------------------------------------


class Links:
    """Outgoing sockets and incoming queues of one party."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.out: dict[int, FrameSocket] = {}
        self.inbound: dict[int, FrameSocket] = {}
        self.queues: dict[int, queue.Queue[Any]] = {p: queue.Queue() for p in range(3) if p != pid}
        self.ready = {p: threading.Event() for p in range(3) if p != pid}
        self.dead: str | None = None

    def add_inbound(self, peer: int, fs: FrameSocket) -> None:
        self.inbound[peer] = fs
        thread = threading.Thread(target=self._read, args=(peer, fs), daemon=True)
        thread.start()
        self.ready[peer].set()

    def _read(self, peer: int, fs: FrameSocket) -> None:
        q = self.queues[peer]
        try:
            while True:
                q.put(fs.recv())
        except (EOFError, OSError, ValueError) as exc:
            reason = (
                f"connection from {ROLE[peer]} closed"
                if isinstance(exc, EOFError)
                else f"connection from {ROLE[peer]} failed: {exc}"
            )
            if self.dead is None:
                self.dead = reason
            q.put(_Stop(reason))

    def close(self) -> None:
        for fs in [*self.out.values(), *self.inbound.values()]:
            fs.close()


class NetChannel(Channel):
    def __init__(self, links: Links) -> None:
        self.links = links
        self.pid = links.pid

    def send(self, peer: int, tag: str, payload: Any) -> int:
        try:
            return self.links.out[peer].send(tag, payload)
        except OSError as exc:
            raise PeerStopped(f"{ROLE[self.pid]}: cannot send to {ROLE[peer]}: {exc}") from exc

    def recv(self, peer: int, timeout: float) -> tuple[str, Any, int]:
        try:
            item = self.links.queues[peer].get(timeout=timeout)
        except queue.Empty:
            raise PeerStopped(
                f"{ROLE[self.pid]}: no message from {ROLE[peer]} within {timeout:g} s"
            ) from None
        if isinstance(item, _Stop):
            self.links.queues[peer].put(item)  # later reads fail the same way
            raise PeerStopped(f"{ROLE[self.pid]}: {item.reason}")
        tag, payload, size = item
        if tag == ERROR_TAG:
            raise PeerStopped(f"{ROLE[self.pid]}: {ROLE[peer]} stopped: {payload}")
        return tag, payload, size

    def close(self, reason: str | None = None) -> None:
        if reason is None:
            return
        for _peer, fs in self.links.out.items():
            try:
                fs.send(ERROR_TAG, reason)
            except OSError:
                pass


# -- the party process -------------------------------------------------------------------


def _log(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


class PartyServer:
    """One party of a cluster: ``serve()`` runs until shutdown (0) or failure (1)."""

    def __init__(
        self,
        config: ClusterConfig,
        pid: int,
        *,
        startup_timeout: float = 60.0,
        die_after_rounds: int | None = None,
        log: Callable[[str], None] = _log,
    ) -> None:
        if pid not in (0, 1, 2):
            raise InputError(f"party id must be 0, 1 or 2; got {pid!r}")
        self.cfg = config
        self.pid = pid
        self.entry = config.parties[pid]
        self.startup_timeout = startup_timeout
        self.die_after_rounds = die_after_rounds
        self.log = log
        self.links = Links(pid)
        self.jobs: queue.Queue[tuple[FrameSocket, Any]] = queue.Queue()
        self.server_ctx = _context(config, self.entry.cert, self.entry.key, server=True)
        self.client_ctx = _context(config, self.entry.cert, self.entry.key, server=False)
        self.share_key = None
        if pid in (0, 1):
            if self.entry.share_key is None:
                raise InputError(
                    f"cluster file: [party.{pid}] needs share_key (this proxy's private key)"
                )
            self.share_key = load_private_key(self.entry.share_key)
        self._listener: socket.socket | None = None

    def name(self) -> str:
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
            fs = FrameSocket(tls)
            tag, hello, _ = fs.recv()
            cn = _peer_cn(tls)
            if tag == "hello" and hello[0] == "party":
                peer = int(hello[1])
                if peer == self.pid or peer not in (0, 1, 2) or cn != party_cn(peer):
                    raise ProtocolError(f"a peer claiming to be party {peer} presented {cn!r}")
                if self.links.ready[peer].is_set():
                    raise ProtocolError(f"party {peer} connected twice")
                tls.settimeout(None)
                self.links.add_inbound(peer, fs)
                return
            if tag == "hello" and hello[0] == "client":
                if cn != CLIENT_CN:
                    raise ProtocolError(f"a client presented certificate {cn!r}")
                if self.pid != 0:
                    fs.send("error", f"party {self.pid} takes no jobs; send them to party 0")
                    fs.close()
                    return
                tls.settimeout(None)
                tag, request, _ = fs.recv()
                self.jobs.put((fs, request))
                return
            raise ProtocolError(f"unexpected first message {tag!r}")
        except (OSError, EOFError, ssl.SSLError, ProtocolError, ValueError, IndexError) as exc:
            self.log(f"{self.name()}: refused a connection: {exc}")
            try:
                conn.close()
            except OSError:
                pass

    def _connect(self, peer: int, deadline: float) -> None:
        entry = self.cfg.parties[peer]
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                raw = socket.create_connection((entry.host, entry.port), timeout=5.0)
                _configure(raw)
                tls = self.client_ctx.wrap_socket(raw, server_hostname=entry.host)
                if _peer_cn(tls) != party_cn(peer):
                    raise ProtocolError(
                        f"party {peer} at {entry.host}:{entry.port} presented {_peer_cn(tls)!r}"
                    )
                tls.settimeout(None)
                fs = FrameSocket(tls)
                fs.send("hello", ["party", self.pid])
                self.links.out[peer] = fs
                return
            except (
                ConnectionRefusedError,
                ConnectionResetError,
                TimeoutError,
                socket.gaierror,
            ) as exc:
                last = exc
                time.sleep(0.05)
            except ssl.SSLError as exc:
                raise ProtocolError(f"TLS with party {peer} failed: {exc}") from exc
        raise ProtocolError(f"could not reach party {peer} at {entry.host}:{entry.port}: {last}")

    def start(self) -> None:
        """Listen, connect to both peers and wait for their connections."""
        self._listener = socket.create_server((self.entry.host, self.entry.port))
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

    # -- jobs --------------------------------------------------------------------------
    def serve(self) -> int:
        try:
            self.start()
        except (ProtocolError, OSError) as exc:
            self.log(f"{self.name()}: cannot start: {exc}")
            return 1
        try:
            while True:
                if self.links.dead is not None:
                    self.log(f"{self.name()}: stopping: {self.links.dead}")
                    return 1
                if self.pid == 0:
                    try:
                        client, request = self.jobs.get(timeout=0.25)
                    except queue.Empty:
                        continue
                    kind = request[0] if isinstance(request, list) and request else None
                    if kind == "shutdown":
                        for fs in self.links.out.values():
                            fs.send("shutdown", None)
                        client.send("ok", None)
                        client.close()
                        return 0
                    if kind != "job":
                        client.send("error", f"unknown request {kind!r}")
                        client.close()
                        continue
                    if not self._run_job(request, client):
                        return 1
                else:
                    try:
                        item = self.links.queues[0].get(timeout=0.25)
                    except queue.Empty:
                        continue
                    if isinstance(item, _Stop):
                        self.log(f"{self.name()}: stopping: {item.reason}")
                        return 1
                    tag, payload, size = item
                    if tag == "shutdown":
                        return 0
                    if tag != "job":
                        self.log(
                            f"{self.name()}: stopping: unexpected message {tag!r} from proxy 0"
                        )
                        return 1
                    if not self._run_job(payload, None, size):
                        return 1
        finally:
            self.links.close()
            if self._listener is not None:
                self._listener.close()

    def _run_job(self, request: Any, client: FrameSocket | None, received: int = 0) -> bool:
        channel = NetChannel(self.links)
        party: Party | None = None
        job_id = "?"
        if self.pid == 0:
            # A bad request (malformed, or shares sealed for other keys) is refused before
            # the other parties hear of it, so the cluster keeps serving.
            try:
                _, job_id, spec_json, client_pub, owners = request
                spec = AucSpec.from_dict(json.loads(spec_json))
                if [int(o[1]) for o in owners] != list(spec.sizes):
                    raise ProtocolError("the bundles' sizes do not match the job's sizes")
                bundles = [
                    Bundle(str(o[0]), int(o[1]), str(o[2]), bytes(o[3]), b"") for o in owners
                ]
                assert self.share_key is not None
                own_lists = [open_bundle(b, 0, self.share_key) for b in bundles]
            except Exception as exc:
                self.log(f"{self.name()}: refused job {job_id}: {exc}")
                assert client is not None
                with contextlib.suppress(OSError):
                    client.send("error", f"job refused by proxy 0: {exc}")
                    client.close()
                return True
        try:
            if self.pid == 0:
                seeds = {1: new_seed(), 2: new_seed()}
                party = self._party(channel, seeds)
                party.stats.bytes_sent += channel.send(
                    1,
                    "job",
                    [
                        job_id,
                        spec_json,
                        client_pub,
                        seeds[1],
                        [[o[0], o[1], o[2], o[4]] for o in owners],
                    ],
                )
                party.stats.bytes_sent += channel.send(2, "job", [job_id, spec_json, seeds[2]])
            elif self.pid == 1:
                job_id, spec_json, client_pub, seed01, owners = request
                spec = AucSpec.from_dict(json.loads(spec_json))
                seeds = {0: bytes(seed01), 2: new_seed()}
                party = self._party(channel, seeds)
                party.stats.bytes_received += received
                party.stats.bytes_sent += channel.send(2, "seed", seeds[2])
                bundles = [
                    Bundle(str(o[0]), int(o[1]), str(o[2]), b"", bytes(o[3])) for o in owners
                ]
            else:
                job_id, spec_json, seed02 = request
                spec = AucSpec.from_dict(json.loads(spec_json))
                tag, seed12, size = channel.recv(1, self.cfg.timeout)
                if tag != "seed":
                    raise ProtocolError(f"expected the seed from proxy 1, got {tag!r}")
                party = self._party(channel, {0: bytes(seed02), 1: bytes(seed12)})
                party.stats.bytes_received += received + size
                bundles = []
            self.log(
                f"{self.name()}: job {job_id}: {len(spec.sizes)} owners, "
                f"n = {spec.n}, sort = {spec.sort}"
            )
            if self.pid == 0:
                lists = own_lists
            elif self.pid == 1:
                assert self.share_key is not None
                lists = [open_bundle(b, self.pid, self.share_key) for b in bundles]
            else:
                lists = [np.zeros((n, 3), dtype=np.uint64) for n in spec.sizes]
            out = execute(party, auc_program(party, lists, spec))
            stats = json.dumps(party.stats.to_dict())
            if self.pid == 0:
                box0 = seal(
                    public_from_bytes(bytes(client_pub)),
                    np.ascontiguousarray(out, "<u8").tobytes(),
                    _result_aad(job_id, 0),
                )
                got = [channel.recv(peer, self.cfg.timeout) for peer in (1, 2)]
                for tag, _payload, _ in got:
                    if tag != "result":
                        raise ProtocolError(f"expected a result message, got {tag!r}")
                box1, stats1 = got[0][1]
                _, stats2 = got[1][1]
                assert client is not None
                client.send("result", [box0, box1, [stats, stats1, stats2]])
                client.close()
            elif self.pid == 1:
                box1 = seal(
                    public_from_bytes(bytes(client_pub)),
                    np.ascontiguousarray(out, "<u8").tobytes(),
                    _result_aad(job_id, 1),
                )
                channel.send(0, "result", [box1, stats])
            else:
                channel.send(0, "result", [b"", stats])
            self.log(
                f"{self.name()}: job {job_id} done: {party.stats.rounds} rounds, "
                f"{party.stats.bytes_sent} bytes sent"
            )
            return True
        except Exception as exc:
            reason = (
                f"{type(exc).__name__}: {exc}" if not isinstance(exc, ProtocolError) else str(exc)
            )
            self.log(f"{self.name()}: job {job_id} failed: {reason}")
            channel.close(reason)
            if client is not None:
                try:
                    client.send("error", f"MPC job failed at {ROLE[self.pid]}: {reason}")
                except OSError:
                    pass
            return False

    def _party(self, channel: Channel, seeds: dict[int, bytes]) -> Party:
        return Party(
            self.pid,
            channel,
            seeds,
            timeout=self.cfg.timeout,
            die_after_rounds=self.die_after_rounds,
            on_die=lambda: os._exit(3),
        )


def _result_aad(job_id: str, pid: int) -> bytes:
    return f"fedroc-mpc-result|{job_id}|proxy{pid}".encode()


# -- the client --------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterResult:
    values: dict[str, float]
    stats: list[PartyStats]
    seconds: float
    bytes_sent: int
    bytes_received: int


class ClusterClient:
    """Submits jobs to party 0 of a running cluster."""

    def __init__(self, config: ClusterConfig, *, connect_timeout: float = 10.0) -> None:
        self.cfg = config
        self.connect_timeout = connect_timeout
        if config.client_cert is None:
            raise InputError(f"cluster file {str(config.path)!r} has no [client] cert")
        self.ctx = _context(config, config.client_cert, config.client_key, server=False)

    def _connect(self) -> FrameSocket:
        entry = self.cfg.parties[0]
        deadline = time.monotonic() + self.connect_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                raw = socket.create_connection((entry.host, entry.port), timeout=5.0)
                _configure(raw)
                tls = self.ctx.wrap_socket(raw, server_hostname=entry.host)
                if _peer_cn(tls) != party_cn(0):
                    raise ProtocolError(
                        f"{entry.host}:{entry.port} is not party 0 ({_peer_cn(tls)!r})"
                    )
                fs = FrameSocket(tls)
                fs.send("hello", ["client"])
                return fs
            except (ConnectionRefusedError, ConnectionResetError, TimeoutError) as exc:
                last = exc
                time.sleep(0.05)
            except ssl.SSLError as exc:
                raise ProtocolError(f"TLS with party 0 failed: {exc}") from exc
        raise ProtocolError(f"cannot reach party 0 at {entry.host}:{entry.port}: {last}")

    def run(
        self, spec: AucSpec, bundles: list[Bundle], *, timeout: float | None = 3600.0
    ) -> ClusterResult:
        """Run one AUC job on the owners' bundles; only this client can open the result."""
        if [b.n for b in bundles] != list(spec.sizes):
            raise InputError("bundle sizes do not match the job's sizes")
        start = time.perf_counter()
        key = new_key()
        job_id = secrets.token_hex(8)
        fs = self._connect()
        try:
            sent = fs.send(
                "job",
                [
                    "job",
                    job_id,
                    json.dumps(spec.to_dict()),
                    public_bytes(key),
                    [[b.owner, b.n, b.context, b.box0, b.box1] for b in bundles],
                ],
            )
            fs.sock.settimeout(timeout)
            try:
                tag, payload, received = fs.recv()
            except EOFError:
                raise ProtocolError(
                    "proxy 0 closed the connection before answering (it stopped or died)"
                ) from None
            except TimeoutError:
                raise ProtocolError(f"no answer from the cluster within {timeout:g} s") from None
        finally:
            fs.close()
        if tag == "error":
            raise ProtocolError(str(payload))
        if tag != "result":
            raise ProtocolError(f"unexpected answer {tag!r} from party 0")
        box0, box1, stats = payload
        shares = [
            np.frombuffer(unseal(key, bytes(box), _result_aad(job_id, pid)), dtype="<u8").astype(
                np.uint64
            )
            for pid, box in ((0, box0), (1, box1))
        ]
        opened = shares[0] + shares[1]
        party_stats = [PartyStats(**json.loads(s)) for s in stats]
        return ClusterResult(
            decode_outputs(opened, spec), party_stats, time.perf_counter() - start, sent, received
        )

    def shutdown(self) -> None:
        fs = self._connect()
        try:
            fs.send("shutdown", ["shutdown"])
            fs.sock.settimeout(10.0)
            fs.recv()
        except (EOFError, OSError):
            pass
        finally:
            fs.close()
