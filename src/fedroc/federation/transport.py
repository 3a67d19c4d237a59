"""Transports: how the analyst's calls reach the sites.

A transport delivers one call to a set of sites and returns one :class:`Exchange` per site,
or raises naming the failing site(s). Arguments and replies are :mod:`records
<fedroc.federation.records>`, so the same method code runs on every transport: in-process
(the default, this module) and Flower (:mod:`fedroc.federation.flower`, across machines).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from fedroc.exceptions import DisclosureError, SiteError
from fedroc.federation.records import Record, decode, encode
from fedroc.federation.site import Site, site_names_unique

__all__ = ["Exchange", "InProcessTransport", "Transport", "raise_site_failures"]


@dataclass(frozen=True)
class Exchange:
    """One site's answer to one call.

    Attributes
    ----------
    reply : Record
        The site's decoded reply: the released values and their metadata (kind of
        release, DP events).
    bytes_sent : int
        Bytes from the analyst to the site (the encoded arguments).
    bytes_received : int
        Bytes from the site to the analyst (the encoded reply).
    seconds : float
        Time the site took to answer.
    """

    reply: Record
    bytes_sent: int  # analyst -> site
    bytes_received: int  # site -> analyst
    seconds: float


class Transport(ABC):
    """Delivers calls to sites. Implementations must not share objects with the sites.

    A transport implements :meth:`_deliver` (how one call reaches its sites); :meth:`call`
    refuses unknown sites and turns the failures into one error. A transport that wraps
    another one may override :meth:`call` instead.

    ``on_site``, when set (by :class:`~fedroc.federation.Federation` for its progress
    display), is called with a site's name as a transport that calls the sites in turn
    reaches it; transports that reach them all at once do not call it.
    """

    on_site: Callable[[str], None] | None = None

    @property
    @abstractmethod
    def site_names(self) -> list[str]:
        """Names of the sites this transport reaches."""

    def call(
        self,
        function: str,
        args_by_site: Mapping[str, Record],
        *,
        requester: str = "analyst",
        timeout: float | None = None,
    ) -> dict[str, Exchange]:
        """Run ``function`` at each site in ``args_by_site`` with that site's arguments.

        Returns one exchange per site, or raises :class:`SiteError` (or
        :class:`DisclosureError` for a policy refusal) naming every site that failed; a
        partial result is never returned. A call naming a site this transport does not
        reach reaches no site.
        """
        known = set(self.site_names)
        raise_site_failures(
            function,
            {n: SiteError(f"no site named {n!r}", site=n) for n in args_by_site if n not in known},
        )
        exchanges, failures = self._deliver(function, args_by_site, requester, timeout)
        raise_site_failures(function, failures)
        return exchanges

    def _deliver(
        self, function: str, site_args: Mapping[str, Record], requester: str, timeout: float | None
    ) -> tuple[dict[str, Exchange], dict[str, BaseException]]:
        """Run ``function`` at every site named (all known); the exchanges and the failures.

        A site's failure is returned, not raised, so that every site is heard from and
        :meth:`call` names them all; ``timeout`` is None for the transport's own default.
        """
        raise NotImplementedError(f"{type(self).__name__} delivers no calls")

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections or processes."""


def _site_reason(site: str, exc: BaseException) -> str:
    """Describe the failure of one site, naming the site once.

    A site's own refusal already starts ``site 'x' refuses ...`` and an input check
    ``site 'x': ...``: prefixing the name again read ``site 'x': site 'x' refuses ...``.
    """
    text = str(exc)
    named = text.startswith((f"site {site!r} ", f"site {site!r}:"))
    return text if named else f"site {site!r}: {text}"


def _grouped_reasons(failures: Mapping[str, BaseException]) -> list[str]:
    """Give one reason per distinct failure, naming together the sites that failed alike.

    Sites fail alike but for their own name when a whole federation refuses one request.
    """
    groups: dict[tuple[str, str], tuple[str, list[str]]] = {}
    for name, exc in failures.items():
        text = _site_reason(name, exc)
        # What follows the name, the name elsewhere in it too ("scores of site 'x' lie ...").
        key = (type(exc).__name__, text[len(f"site {name!r}") :].replace(f"site {name!r}", "\0"))
        groups.setdefault(key, (text, []))[1].append(name)
    return [
        text + (f" (and alike at {', '.join(map(repr, sites[1:]))})" if len(sites) > 1 else "")
        for text, sites in groups.values()
    ]


def raise_site_failures(function: str, failures: Mapping[str, BaseException]) -> None:
    """Raise one error naming every failed site (a refusal stays a DisclosureError)."""
    if not failures:
        return
    names = list(failures)
    first = failures[names[0]]
    detail = "; ".join(_grouped_reasons(failures))
    if all(isinstance(e, DisclosureError) for e in failures.values()):
        raise DisclosureError(
            f"{function!r} refused by {len(names)} site(s): {detail}",
            site=names[0],
            function=function,
        ) from first
    raise SiteError(
        f"{function!r} failed at {len(names)} site(s): {detail}", site=names[0], function=function
    ) from first


class InProcessTransport(Transport):
    """All sites in this process; messages still go through bytes, as on a network.

    Parameters
    ----------
    sites : iterable of Site
        The sites, with unique names; their order is the federation's order.

    Raises
    ------
    InputError
        Two sites share a name.
    """

    def __init__(self, sites: Iterable[Site]) -> None:
        sites = list(sites)
        site_names_unique(s.name for s in sites)
        self._sites = {s.name: s for s in sites}

    @property
    def site_names(self) -> list[str]:
        """Names of the sites, in the order they were given."""
        return list(self._sites)

    def _deliver(
        self, function: str, site_args: Mapping[str, Record], requester: str, timeout: float | None
    ) -> tuple[dict[str, Exchange], dict[str, BaseException]]:
        """Run ``function`` at each site in turn, encoding arguments and replies as bytes.

        Every site is called even if one fails. ``timeout`` is ignored: the sites run in
        this thread.
        """
        out: dict[str, Exchange] = {}
        failures: dict[str, BaseException] = {}
        for name, args in site_args.items():
            site = self._sites[name]
            if self.on_site is not None:
                self.on_site(name)
            start = time.perf_counter()
            try:
                sent = encode(args)
                received = encode(site.handle(function, decode(sent), requester))
            except Exception as exc:
                failures[name] = exc
                continue
            out[name] = Exchange(
                decode(received), len(sent), len(received), time.perf_counter() - start
            )
        return out, failures
