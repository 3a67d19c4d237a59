"""Child processes that do not outlive the process that started them."""

from __future__ import annotations

__all__ = ["die_with_parent"]


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
