"""Latency tuning of Flower 1.41 for fedroc's many short rounds (this process only).

Flower's defaults suit model training (few, large rounds): an idle SuperNode polls the
SuperLink every 3 s, and a receiver that sees a message before all of its parts were
uploaded waits 1 s before retrying. fedroc's protocols are dozens of rounds of messages of a
few hundred bytes, where these pauses dominate. The functions here change them in the
current process only, by replacing names that Flower's modules look up at call time. They
depend on Flower's internals, so :func:`check_flower_version` refuses any version other
than 1.41.x and the stock components remain usable (only slower).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fedroc.exceptions import InputError

__all__ = [
    "EXECUTOR",
    "STATUS",
    "TASK_READY",
    "RunStopped",
    "check_flower_version",
    "previous_session_end",
    "pull_deadline",
    "stop_is_a_failure",
    "tune_log_stream",
    "tune_log_upload",
    "tune_node_activation",
    "tune_object_pulls",
    "tune_supernode_polling",
]

SUPPORTED_FLOWER = "1.41."
# First pause and cap (s) before pulling again a message part that is not uploaded yet.
PULL_BACKOFF = (0.005, 0.25)
# Longest wait for the parts of one message when no deadline is set (Flower: 2 hours).
PULL_MAX_TIME = 60.0

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "fedroc_pull_deadline", default=None
)


@contextlib.contextmanager
def pull_deadline(deadline: float) -> Iterator[None]:
    """Make pulls of message parts started inside give up at ``deadline`` (``time.monotonic``).

    A sender that dies after announcing a message but before uploading its parts would
    otherwise hold the receiver for minutes; Flower then returns an error reply instead.
    """
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


# Set when the SuperNode has stored a message and created its task (wakes the executor).
TASK_READY = threading.Event()


class ExecutorState:
    """Whether the in-process executor is running a task, and since when it is idle."""

    def __init__(self) -> None:
        self.busy = threading.Event()
        self.idle_since = time.monotonic()


EXECUTOR = ExecutorState()
# The SuperNode's loop waits for the reply to the message it stored. If the executor has
# been idle that long during the wait, the task ended without a reply (its run was stopped,
# its objects dropped) and the loop moves on; Flower's own loop would wait until the task
# token expires (up to a minute), deaf to new messages.
ABANDON_AFTER = 5.0


# Longest pause between two polls of an idle SuperNode (Flower: 3 s). It bounds the delay
# before a new run's first message is seen; 3 nodes polling twice a second cost the
# SuperLink a few requests per second.
IDLE_POLL = float(os.environ.get("FEDROC_FLOWER_IDLE_POLL", "0.5"))
# Longest pause between two polls for BUSY_WINDOW s after the node sent a reply: the run's
# next message usually comes within a second, and with pauses growing to IDLE_POLL it was
# picked up a sixth to a third of its wait late (measured: 0.1 s of a 0.5 s round).
BUSY_POLL = float(os.environ.get("FEDROC_FLOWER_BUSY_POLL", "0.1"))
BUSY_WINDOW = 3.0


class NodeStatus:
    """``status.json`` in the node directory: what ``fedroc flower health`` checks.

    Rewritten (atomically) when the node connects and then at most every few seconds while
    its polls of the SuperLink succeed, so a stale file means a node that lost the
    SuperLink (or hangs).
    """

    EVERY = 5.0

    def __init__(self) -> None:
        self.path: Path | None = None
        self.site: str | None = None
        self.node_id: int | None = None
        self.connected_at: float | None = None
        self._written = 0.0

    def configure(self, path: Path, site: str | None) -> None:
        self.path, self.site = path, site

    def contact(self, node_id: int | None) -> None:
        if self.path is None:
            return
        now = time.time()
        if node_id != self.node_id:
            self.node_id, self.connected_at, self._written = node_id, now, 0.0
        if now - self._written < self.EVERY:
            return
        self._written = now
        entry = {
            "site": self.site,
            "node_id": self.node_id,
            "pid": os.getpid(),
            "connected_at": self.connected_at,
            "last_contact": now,
        }
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            tmp.write_text(json.dumps(entry))
            os.replace(tmp, self.path)
        except OSError:
            pass


STATUS = NodeStatus()


class _Abandoned(Exception):
    """The reply the SuperNode's loop waits for will not come."""


class RunStopped(Exception):
    """The run of the message being received stopped (Flower's ``RunNotRunningException``)."""


def stop_is_a_failure(call: Callable[..., Any]) -> Callable[..., Any]:
    """Make ``call`` raise :class:`RunStopped` (an ``Exception``) when its run stopped.

    Flower 1.41's ``_pull_and_store_message`` stores the message and creates its task
    before it pulls the message's parts and confirms the receipt. Its cleanup (delete the
    message, fail the task) catches ``Exception``, but a run stopped at that moment raises
    ``RunNotRunningException``, a ``BaseException``: the message and its task stayed in
    the node's state, the ClientApp answered it, and from then on the node pushed each
    reply one message late (the previous run's), deaf to every new run until restarted.
    """
    from flwr.supercore.run import RunNotRunningException

    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except RunNotRunningException as exc:
            raise RunStopped("the message's run was stopped while it was received") from exc

    return checked


def check_flower_version() -> str:
    from flwr.supercore.version import package_version

    if not str(package_version).startswith(SUPPORTED_FLOWER):
        raise InputError(
            f"fedroc's Flower tuning supports Flower {SUPPORTED_FLOWER}x, found "
            f"{package_version}; use the stock components (flower-supernode --isolation "
            "process --node-config ... beside fedroc flower executor)"
        )
    return str(package_version)


def _fast_pulls(module: Any) -> None:
    original = module.pull_objects
    if getattr(original, "_fedroc", False):
        return

    def fast(*args: Any, **kwargs: Any) -> Any:
        deadline = _DEADLINE.get()
        limit = PULL_MAX_TIME if deadline is None else max(deadline - time.monotonic(), 0.05)
        # Some callers pass Flower's defaults explicitly: take the smaller of theirs and ours.
        given = kwargs.get("max_time")
        kwargs["max_time"] = limit if given is None else min(float(given), limit)
        for key, ours in (("initial_backoff", PULL_BACKOFF[0]), ("backoff_cap", PULL_BACKOFF[1])):
            kwargs[key] = min(float(kwargs.get(key, ours)), ours)
        return original(*args, **kwargs)

    fast._fedroc = True  # type: ignore[attr-defined]
    module.pull_objects = fast


def tune_object_pulls() -> None:
    """Retry message parts sooner and give up at the pull deadline.

    A not-yet-uploaded message part is retried after 5 ms (growing to 0.25 s), not 1 s, and
    given up at the :func:`pull_deadline` (or after a minute), not after two hours.
    """
    check_flower_version()
    import flwr.supercore.inflatable.inflatable_utils as inflatable
    import flwr.superlink.grid.http_grid as grid
    import flwr.supernode.start_client_internal as loop

    _fast_pulls(grid)
    _fast_pulls(loop)
    _fast_pulls(inflatable)  # pull_and_inflate_object_from_tree (ClientApp task input)


class _PollClock:
    """Stand-in for the ``time`` module of Flower's SuperNode loop (adaptive idle polls)."""

    def __init__(self, real: Any, fast: float) -> None:
        self._real = real
        self._fast = fast
        self._idle = fast
        self.wait_started = real.monotonic()
        self._active = -BUSY_WINDOW

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def activity(self) -> None:
        self._idle = self._fast
        self._active = self._real.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds >= 1.0:  # "no message for me": ask again soon, then back off
            busy = self._real.monotonic() - self._active < BUSY_WINDOW
            delay = min(self._idle, BUSY_POLL) if busy else self._idle
            self._idle = min(self._idle * 1.5, seconds, IDLE_POLL)
            self._real.sleep(delay)
        else:  # waiting for the reply this process is computing
            now = self._real.monotonic()
            # Only a task that ran (the executor finished one since this wait began) can
            # have ended without a reply; on a loaded machine the executor may not have
            # picked the task up yet, and giving up then would send this reply only with
            # the next message.
            ended = EXECUTOR.idle_since > self.wait_started
            if ended and not EXECUTOR.busy.is_set() and now - EXECUTOR.idle_since > ABANDON_AFTER:
                raise _Abandoned("the ClientApp task ended without a reply")
            self._real.sleep(min(seconds, self._fast / 2))


# Heartbeat interval a node declares (Flower: 30 s, lowest accepted 10 s). A node that
# crashed stays "online" for two intervals and cannot activate again meanwhile, so this
# bounds how long a restarted site waits to reconnect: 20 s instead of 60 s.
HEARTBEAT_INTERVAL = 10


# A node started again after its process crashed is refused by the SuperLink (Flower's
# FLEET_NODE_ACTIVATION_FAILED, HTTP 412) until the crashed process's session expires, two
# heartbeat intervals after its last heartbeat. Flower's node then exits, and whoever
# restarts it pays a new interpreter (2-4 s of CPU) per attempt; fedroc's node asks again
# every ACTIVATION_RETRY s in the same process until that session must have expired.
ACTIVATION_RETRY = 1.0


def previous_session_end(status: Any, now: float) -> float:
    """Return when the session of this node's crashed predecessor expires at the latest.

    ``status`` is what the predecessor wrote to ``status.json`` (:class:`NodeStatus`), or
    None; times are ``time.time()``. Returns ``now`` when there is nothing to wait for: no
    predecessor, one still running (a second node for the site is refused at once, as by
    Flower), or one whose session has expired. The predecessor's last heartbeat came at most
    :attr:`NodeStatus.EVERY` s after its last contact while it was polling; a node that
    crashed in the middle of a long call had heartbeats after that, and is then started
    again by its supervisor as before.
    """
    if not isinstance(status, dict):
        return now
    pid, last = status.get("pid"), status.get("last_contact")
    if not isinstance(pid, int) or not isinstance(last, (int, float)) or pid == os.getpid():
        return now
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        pass  # it is gone; its session may still be open at the SuperLink
    except OSError:
        return now
    else:
        return now
    end = float(last) + 2 * HEARTBEAT_INTERVAL + NodeStatus.EVERY + ACTIVATION_RETRY
    return max(end, now)


def tune_node_activation(until: float) -> None:
    """Retry this node's activation while the SuperLink refuses it, until ``until``.

    The SuperLink refuses while the session of the node's crashed predecessor is still open
    (see ``ACTIVATION_RETRY``); ``until`` is a ``time.time()``, from
    :func:`previous_session_end`. Any other error, or a refusal past ``until``, is raised
    as Flower raises it (the node exits).
    """
    check_flower_version()
    import httpx
    from flwr.supercore.error import ApiErrorCode, FlowerError
    from flwr.supernode.fleet_http_client import FleetHttpClient

    original = FleetHttpClient.ActivateNode
    activate_once = getattr(original, "_fedroc_original", original)

    def activate(self: Any, request: Any) -> Any:
        while True:
            try:
                return activate_once(self, request)
            except httpx.HTTPStatusError as exc:
                error = FlowerError.from_json(exc.response.text)
                refused = (
                    error is not None and error.code == ApiErrorCode.FLEET_NODE_ACTIVATION_FAILED
                )
                if not refused or time.time() + ACTIVATION_RETRY > until:
                    raise
            time.sleep(ACTIVATION_RETRY)

    activate._fedroc_original = activate_once  # type: ignore[attr-defined]
    FleetHttpClient.ActivateNode = activate  # type: ignore[method-assign]


class _LoopTurn:
    """What fedroc adds to each turn (pull a message, push its reply) of Flower's loop."""

    def __init__(self, clock: _PollClock, push: Callable[..., Any], pull: Callable[..., Any]):
        self._clock = clock
        self._push = push
        self._pull = pull
        # The message the loop pulled last and has not pushed a reply to yet.
        self.awaiting: str | None = None

    def _sent(self, send: Callable[..., Any]) -> Callable[..., Any]:
        def send_and_note(message: Any, *args: Any, **kwargs: Any) -> Any:
            if message.metadata.reply_to_message_id == self.awaiting:
                self.awaiting = None
            return send(message, *args, **kwargs)

        return send_and_note

    def _received(self, receive: Callable[[], Any]) -> Callable[[], Any]:
        def receive_and_note() -> Any:
            got = receive()
            if got is not None:
                self.awaiting = got[0].metadata.message_id
            return got

        return receive_and_note

    def push(self, *args: Any, **kwargs: Any) -> None:
        # Flower's loop would wait for the reply until the task token expires (up to a
        # minute); when the executor knows it will never come, move on to the next message.
        self._clock.wait_started = time.monotonic()
        noted = "send" in kwargs  # Flower's loop passes its callables by keyword
        if noted:
            kwargs["send"] = self._sent(kwargs["send"])
        try:
            # Flower pushes whatever replies the state holds and returns. Should a reply to
            # an earlier message be there (a ClientApp that answered late), it is pushed
            # alone and the loop would then push each reply one message late: wait on
            # until this message's own reply has gone (or will not come).
            self._push(*args, **kwargs)
            while noted and self.awaiting is not None:
                self._push(*args, **kwargs)
        except _Abandoned:
            pass
        finally:
            self.awaiting = None
            self._clock.activity()

    def pull(self, *args: Any, **kwargs: Any) -> Any:
        for name in ("pull_object", "confirm_message_received"):
            if name in kwargs:
                kwargs[name] = stop_is_a_failure(kwargs[name])
        if "receive" in kwargs:
            kwargs["receive"] = self._received(kwargs["receive"])
        run_id = self._pull(*args, **kwargs)
        if run_id is None:
            self.awaiting = None  # ignored or not received: no reply to wait for
        else:
            TASK_READY.set()
        state = kwargs.get("state")
        try:
            STATUS.contact(None if state is None else int(state.get_node_id()))
        except Exception:  # the status file is advisory; never stop the node's loop
            pass
        return run_id


def tune_supernode_polling(fast: float) -> None:
    """Poll fast after each message, then back off.

    After each message the node polls again after ``fast`` s, backing off to
    :data:`IDLE_POLL`; heartbeats every :data:`HEARTBEAT_INTERVAL` s. Each turn of the loop
    also ends with the reply to its own message (:class:`_LoopTurn`): a message whose run
    stops while it is received is cleaned up as Flower means it to be
    (:func:`stop_is_a_failure`), and a late reply to an earlier message no longer leaves
    the node one reply behind for good.
    """
    check_flower_version()
    import flwr.supercore.heartbeat as heartbeat
    import flwr.supernode.fleet_http_connection as fleet
    import flwr.supernode.start_client_internal as loop

    heartbeat.HEARTBEAT_DEFAULT_INTERVAL = HEARTBEAT_INTERVAL
    fleet.HEARTBEAT_DEFAULT_INTERVAL = HEARTBEAT_INTERVAL

    tune_object_pulls()
    clock = _PollClock(time, fast)
    turn = _LoopTurn(clock, loop._push_messages, loop._pull_and_store_message)
    loop.time = clock  # type: ignore[assignment]
    loop._push_messages = turn.push
    loop._pull_and_store_message = turn.pull


# A job's result is a line of the ServerApp's log: the ServerApp uploads its log every
# 0.2 s and the SuperLink streams it to ``flwr run`` every 0.5 s (Flower's defaults), which
# added 0.3-0.7 s to every job. Both loops only act when there is something to send.
LOG_STREAM_INTERVAL = 0.1
LOG_UPLOAD_INTERVAL = 0.05


def tune_log_stream() -> None:
    """Make the SuperLink of this process stream run logs every 0.1 s (Flower: 0.5 s)."""
    check_flower_version()
    import flwr.superlink.servicer.control.control_handlers as control

    control.LOG_STREAM_INTERVAL = LOG_STREAM_INTERVAL


def tune_log_upload() -> None:
    """Make a ServerApp of this process upload new log lines every 0.05 s (Flower: 0.2 s)."""
    check_flower_version()
    import flwr.supercore.logger as logger

    logger.LOG_UPLOAD_INTERVAL = LOG_UPLOAD_INTERVAL
