"""Child processes: the options on their command lines, and a lifetime bound to their parent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

__all__ = ["die_with_parent", "option_value"]


@overload
def option_value(args: Sequence[str], name: str) -> str | None: ...
@overload
def option_value(args: Sequence[str], name: str, default: str) -> str: ...
def option_value(args: Sequence[str], name: str, default: str | None = None) -> str | None:
    """Return the value of ``name`` in ``args`` (``NAME VALUE`` or ``NAME=VALUE``), or ``default``.

    The overloads give ``str`` when a default is given, ``str | None`` when it is not.
    """
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    """``preexec_fn``: on Linux the child gets SIGTERM when its parent *thread* exits.

    A killed ``fedroc flower up`` or site supervisor then leaves no SuperLink or SuperNode
    behind. Start such children from a long-lived thread (the main thread).
    """
    import signal

    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
