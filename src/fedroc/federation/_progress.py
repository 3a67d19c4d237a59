"""The progress of a call to the sites, a type of its own module.

Both the analyst's :class:`~fedroc.federation.Federation` (which reports it) and ``fedroc
flower run`` (which reads it back from the ServerApp's log,
:mod:`fedroc.federation.flower._marked`) use it; the latter imports no site code (pandas,
scipy), which :mod:`fedroc.federation.federation` would bring.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CallProgress"]


@dataclass(frozen=True)
class CallProgress:
    """A call of a site function as it starts, for a progress display (:attr:`Federation.progress`).

    Nothing in it leaves the analyst's process or reaches a site.

    Attributes
    ----------
    round : int
        The call's number, from 1: in the federation's transcript, or within ``phase``
        (so that a method's last round is the ``rounds`` its result's ``released`` reports,
        and the calls that follow it are numbered apart).
    function : str
        The site function called.
    sites : tuple of str
        The sites it is sent to, in order.
    site : str or None
        The site reached now, where the transport calls the sites in turn (in-process);
        None when the call starts (and for transports that reach all sites at once).
    done : bool
        True once every site has answered (the analyst's own work follows).
    phase : str or None
        What the calls of :meth:`Federation.progress_phase` are for (None outside one).
    """

    round: int
    function: str
    sites: tuple[str, ...]
    site: str | None = None
    done: bool = False
    phase: str | None = None
