"""One retry helper: call until it works, a deadline passes, or the caller stops waiting.

Processes that start together (MPC parties, a SuperLink and its SuperNodes) connect to each
other before the other side listens; each such wait is this loop, with the errors that mean
"not yet" named by the caller and every other error raised at once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["RetryExpired", "retry"]

T = TypeVar("T")


class RetryExpired(Exception):
    """The deadline passed (or ``stop`` said so) before an attempt succeeded.

    Attributes
    ----------
    last : BaseException or None
        The error of the last attempt (None when none was made).
    """

    def __init__(self, last: BaseException | None) -> None:
        super().__init__(str(last))
        self.last = last


def retry(
    attempt: Callable[[], T],
    *,
    retry_on: tuple[type[BaseException], ...],
    deadline: float = math.inf,
    pause: float = 0.1,
    stop: Callable[[], bool] | None = None,
) -> T:
    """Call ``attempt`` until it returns, pausing after each error listed in ``retry_on``.

    Parameters
    ----------
    attempt : callable
        Takes no argument; its return value is returned. An error not in ``retry_on``
        propagates at once.
    retry_on : tuple of exception types
        The errors that mean "not yet" (a refused connection, a time-out).
    deadline : float
        :func:`time.monotonic` time after which no new attempt starts.
    pause : float
        Seconds between two attempts (never past the deadline).
    stop : callable, optional
        Checked before each attempt; True gives up (a process shutting down).

    Raises
    ------
    RetryExpired
        With the last attempt's error, when the deadline passed or ``stop`` said so.

    Examples
    --------
    >>> calls = []
    >>> def flaky():
    ...     calls.append(1)
    ...     if len(calls) < 3:
    ...         raise ConnectionRefusedError("not yet")
    ...     return "up"
    >>> retry(flaky, retry_on=(ConnectionRefusedError,), pause=0.0), len(calls)
    ('up', 3)
    """
    last: BaseException | None = None
    while time.monotonic() < deadline and not (stop is not None and stop()):
        try:
            return attempt()
        except retry_on as exc:
            last = exc
        time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
    raise RetryExpired(last)
