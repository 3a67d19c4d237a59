"""The runtime: parties, correlated randomness, channels, rounds and bytes.

A protocol is a generator run by every party (the same program, as in MPyC). Each time it
needs the network it yields a :class:`Step` (what to send to which peer, whom to receive
from) and gets back what it received. The driver :func:`execute` performs the step on the
party's :class:`Channel` and counts rounds and bytes. :func:`par` runs several protocols
side by side and merges their steps, so independent sub-protocols share rounds.

Channels: :class:`MemoryHub` connects three parties in one process (threads; the tests) and
:mod:`fedroc.mpc.net` connects three OS processes over TCP with TLS. Both move the same
frames (:class:`~fedroc.mpc.messages.StepFrame` records of fedroc's one record codec), so
rounds and bytes agree.

Every party runs the same sequence of steps: a protocol yields the same number of steps at
every party (idle parties yield empty steps) and draws from a shared stream at the same
step as its partner does; the tests check results against plain numpy, which any slip in
that discipline would break.
"""

from __future__ import annotations

import queue
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from fedroc.exceptions import ProtocolError
from fedroc.mpc.messages import FRAME_PREFIX, StepFrame, decode_message, encode_message
from fedroc.mpc.prg import Stream, derive_seed, new_seed

__all__ = [
    "HELPER",
    "ROLE",
    "Channel",
    "MemoryHub",
    "Party",
    "PartyStats",
    "PeerStopped",
    "Step",
    "Stop",
    "execute",
    "par",
    "read_step",
    "run_local",
    "step_frame",
]

HELPER = 2
PROXIES = (0, 1)
ROLE = {0: "proxy 0", 1: "proxy 1", 2: "helper"}


class PeerStopped(ProtocolError):
    """A peer stopped (died, failed or timed out) while this party waited for it."""


# -- steps and programs ------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One communication round of one party: messages out, peers to hear from."""

    send: dict[int, Any] = field(default_factory=dict)
    recv: tuple[int, ...] = ()
    tag: str = ""


Program = Generator[Step, dict[int, Any], Any]


def idle(tag: str = "") -> Step:
    return Step({}, (), tag)


def par(*gens: Program) -> Generator[Step, dict[int, Any], list[Any]]:
    """Run protocols side by side; step k of each is merged into one round."""
    results: list[Any] = [None] * len(gens)
    current: dict[int, Step] = {}
    for i, gen in enumerate(gens):
        try:
            current[i] = next(gen)
        except StopIteration as stop:
            results[i] = stop.value
    while current:
        send: dict[int, list[Any]] = {}
        recv: set[int] = set()
        for i, st in current.items():
            for peer, payload in st.send.items():
                send.setdefault(peer, []).append([i, st.tag, payload])
            recv.update(st.recv)
        got = yield Step(send, tuple(sorted(recv)), "par")
        routed: dict[int, dict[int, Any]] = {i: {} for i in current}
        for peer, entries in got.items():
            for i, _tag, payload in entries:
                routed[int(i)][peer] = payload
        nxt: dict[int, Step] = {}
        for i, st in current.items():
            missing = [peer for peer in st.recv if peer not in routed[i]]
            if missing:
                raise ProtocolError(
                    f"protocol out of step: sub-protocol {i} ({st.tag}) expected a message "
                    f"from party {missing[0]} that did not come"
                )
            try:
                nxt[i] = gens[i].send(routed[i])
            except StopIteration as stop:
                results[i] = stop.value
        current = nxt
    return results


# -- channels ----------------------------------------------------------------------------


def step_frame(tag: str, payload: Any, job: str = "") -> bytes:
    """Encode the wire frame of one step's message (:mod:`fedroc.mpc.messages`)."""
    return encode_message(StepFrame(tag, payload), job)


def read_step(body: bytes | bytearray | memoryview, who: str) -> tuple[str, Any]:
    """Tag and payload of a step frame's body (without its length prefix)."""
    _job, message = decode_message(body)
    if not isinstance(message, StepFrame):
        raise ProtocolError(f"{who}: expected protocol data, got a {message.KIND!r} message")
    return message.tag, message.payload


class Channel(ABC):
    """One party's links to its two peers."""

    @abstractmethod
    def send(self, peer: int, tag: str, payload: Any) -> int:
        """Send one frame; returns its size in bytes."""

    @abstractmethod
    def recv(self, peer: int, timeout: float) -> tuple[str, Any, int]:
        """Next frame from ``peer``: (tag, payload, bytes); raises PeerStopped."""

    def close(self, reason: str | None = None) -> None:  # noqa: B027 - optional hook
        """Tell the peers this party stops (with ``reason`` when it failed)."""


class Stop:
    """Queue item that ends a link: the peer stopped, failed or disconnected."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class MemoryHub:
    """Queues between three parties in one process."""

    def __init__(self) -> None:
        self.queues: dict[tuple[int, int], queue.Queue[Any]] = {
            (a, b): queue.Queue() for a in range(3) for b in range(3) if a != b
        }

    def channel(self, pid: int) -> MemoryChannel:
        """Return party ``pid``'s end of the queues."""
        return MemoryChannel(self, pid)


class MemoryChannel(Channel):
    def __init__(self, hub: MemoryHub, pid: int) -> None:
        self.hub = hub
        self.pid = pid

    def send(self, peer: int, tag: str, payload: Any) -> int:
        # Encoded and decoded as on a network: no array is shared, bytes count the same.
        frame = step_frame(tag, payload)
        self.hub.queues[(self.pid, peer)].put(frame)
        return len(frame)

    def recv(self, peer: int, timeout: float) -> tuple[str, Any, int]:
        try:
            item = self.hub.queues[(peer, self.pid)].get(timeout=timeout)
        except queue.Empty:
            raise PeerStopped(
                f"{ROLE[self.pid]}: no message from {ROLE[peer]} within {timeout:g} s"
            ) from None
        if isinstance(item, Stop):
            raise PeerStopped(f"{ROLE[self.pid]}: {ROLE[peer]} stopped: {item.reason}")
        tag, payload = read_step(memoryview(item)[FRAME_PREFIX:], ROLE[self.pid])
        return tag, payload, len(item)

    def close(self, reason: str | None = None) -> None:
        for peer in range(3):
            if peer != self.pid:
                self.hub.queues[(self.pid, peer)].put(Stop(reason or "finished"))


# -- parties -----------------------------------------------------------------------------


@dataclass
class PartyStats:
    """Communication of one party during one run."""

    rounds: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    messages_sent: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Return the statistics as JSON-ready types (seconds to the microsecond)."""
        return {**asdict(self), "seconds": round(self.seconds, 6)}


Recorder = Callable[[int, int, str, Any], None]


class Party:
    """One of the three computing parties.

    Parameters
    ----------
    pid : {0, 1, 2}
        0 and 1 are the proxies (they hold the shares), 2 is the helper.
    channel : Channel
    seeds : dict
        ``{peer: 32-byte seed}`` shared with each peer (the correlated randomness).
    timeout : float
        Seconds to wait for a peer's message before giving up.
    recorder : callable, optional
        ``recorder(pid, peer, tag, payload)`` sees every received message (the party's
        view); the security tests use it.
    die_after_rounds : int, optional
        Fault injection for tests: stop abruptly after that many rounds.
    on_die : callable, optional
        Called when the injected fault fires, before the party raises (a party process
        exits there, like a crash).
    """

    def __init__(
        self,
        pid: int,
        channel: Channel,
        seeds: dict[int, bytes],
        *,
        timeout: float = 60.0,
        recorder: Recorder | None = None,
        die_after_rounds: int | None = None,
        on_die: Callable[[], None] | None = None,
    ) -> None:
        if pid not in (0, 1, 2):
            raise ProtocolError(f"party id must be 0, 1 or 2; got {pid!r}")
        self.pid = pid
        self.channel = channel
        self.streams = {peer: Stream(seed) for peer, seed in seeds.items()}
        self.timeout = timeout
        self.recorder = recorder
        self.die_after_rounds = die_after_rounds
        self.on_die = on_die
        self.stats = PartyStats()

    @property
    def is_helper(self) -> bool:
        """Whether this party is the helper (party 2)."""
        return self.pid == HELPER

    @property
    def other(self) -> int:
        """The other proxy (for a proxy)."""
        return 1 - self.pid

    def shared(self, peer: int) -> Stream:
        """Return the stream this party shares with ``peer``."""
        return self.streams[peer]

    def __repr__(self) -> str:
        """Show the party's role."""
        return f"Party({ROLE[self.pid]})"


def _record(party: Party, peer: int, tag: str, payload: Any) -> None:
    assert party.recorder is not None
    if tag == "par":
        for _i, sub_tag, sub in payload:
            _record(party, peer, sub_tag, sub)
    else:
        party.recorder(party.pid, peer, tag, payload)


def execute(party: Party, program: Program) -> Any:
    """Run a program at one party to completion; returns the program's value."""
    start = time.perf_counter()
    got: dict[int, Any] | None = None
    try:
        step = next(program)
        while True:
            if step.send or step.recv:
                party.stats.rounds += 1
                if (
                    party.die_after_rounds is not None
                    and party.stats.rounds > party.die_after_rounds
                ):
                    if party.on_die is not None:
                        party.on_die()
                    raise ProtocolError(
                        f"{ROLE[party.pid]}: fault injected after {party.die_after_rounds} rounds"
                    )
            for peer, payload in step.send.items():
                party.stats.bytes_sent += party.channel.send(peer, step.tag, payload)
                party.stats.messages_sent += 1
            got = {}
            for peer in step.recv:
                tag, payload, nbytes = party.channel.recv(peer, party.timeout)
                party.stats.bytes_received += nbytes
                if tag != step.tag:
                    raise ProtocolError(
                        f"{ROLE[party.pid]}: protocol out of step: expected {step.tag!r} from "
                        f"{ROLE[peer]}, got {tag!r}"
                    )
                if party.recorder is not None:
                    _record(party, peer, tag, payload)
                got[peer] = payload
            step = program.send(got)
    except StopIteration as stop:
        return stop.value
    finally:
        party.stats.seconds += time.perf_counter() - start


# -- one process, three threads ----------------------------------------------------------


def make_seeds(master: bytes | None = None) -> dict[int, dict[int, bytes]]:
    """Pairwise seeds ``{pid: {peer: seed}}``; from ``secrets`` unless a test gives a master."""
    pair: dict[tuple[int, int], bytes] = {}
    for a, b in ((0, 1), (0, 2), (1, 2)):
        pair[(a, b)] = new_seed() if master is None else derive_seed(master, f"pair{a}{b}")
    return {
        pid: {peer: pair[(min(pid, peer), max(pid, peer))] for peer in range(3) if peer != pid}
        for pid in range(3)
    }


@dataclass
class LocalRun:
    results: list[Any]
    stats: list[PartyStats]


def run_local(
    programs: Sequence[Callable[[Party], Program]],
    *,
    master_seed: bytes | None = None,
    timeout: float = 30.0,
    recorder: Recorder | None = None,
    die_after_rounds: dict[int, int] | None = None,
) -> LocalRun:
    """Run three programs (one per party) in three threads of this process.

    The first party that fails stops the others; its error is raised (the others' errors
    are consequences). ``master_seed`` makes the correlated randomness reproducible (tests).
    """
    hub = MemoryHub()
    seeds = make_seeds(master_seed)
    results: list[Any] = [None] * 3
    errors: list[tuple[float, int, BaseException]] = []
    parties = [
        Party(
            pid,
            hub.channel(pid),
            seeds[pid],
            timeout=timeout,
            recorder=recorder,
            die_after_rounds=(die_after_rounds or {}).get(pid),
        )
        for pid in range(3)
    ]
    lock = threading.Lock()

    def work(pid: int) -> None:
        party = parties[pid]
        try:
            results[pid] = execute(party, programs[pid](party))
            party.channel.close()
        except BaseException as exc:
            with lock:
                errors.append((time.monotonic(), pid, exc))
            party.channel.close(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(pid,), daemon=True) for pid in range(3)]
    for t in threads:
        t.start()
    # No limit on a healthy run (each wait for a peer has its own timeout); once a party has
    # failed, the others must stop within two timeouts (plus a grace period).
    deadline: float | None = None
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(0.05)
        if errors and deadline is None:
            deadline = time.monotonic() + 2 * timeout + 5.0
        if deadline is not None and time.monotonic() > deadline:
            raise ProtocolError("a party thread did not stop after another failed")
    if errors:
        root = [e for e in errors if not isinstance(e[2], PeerStopped)]
        _, pid, exc = min(root or errors, key=lambda e: e[0])
        if isinstance(exc, ProtocolError):
            raise exc
        raise ProtocolError(f"{ROLE[pid]} failed: {type(exc).__name__}: {exc}") from exc
    return LocalRun(results, [p.stats for p in parties])
