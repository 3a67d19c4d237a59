"""The analyst's side of the Flower transport: site-function calls as Flower messages.

:class:`FlowerTransport` runs inside a Flower ``ServerApp`` and reaches the sites through
its ``Grid``. Each call is one ``query.fedroc_call`` message per site, carrying the
function name and requester in a ``ConfigRecord`` and the arguments as records
(:mod:`._codec`); each site answers with its reply as records, or with a Flower error reply
that is raised here as :class:`~fedroc.exceptions.DisclosureError` (a policy refusal) or
:class:`~fedroc.exceptions.SiteError`, naming the site. A site that does not answer within
the timeout (its SuperNode died, hangs or lost its connection) fails the call naming it;
a partial set of replies is never returned.

Bytes are counted on fedroc's canonical encoding (:func:`fedroc.federation.records.encode`)
of the arguments and replies, as on the in-process transport, so ``released`` reports the
same numbers on both; Flower's own framing (protobuf, HTTP, TLS) is not included.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flwr.app import Message
from flwr.serverapp import Grid

from fedroc.exceptions import (
    FedrocError,
    InputError,
    ProtocolError,
    SiteError,
    error_from_dict,
)
from fedroc.federation.flower._codec import (
    PROTOCOL,
    from_recorddict,
    read_header,
    to_recorddict,
)
from fedroc.federation.flower._tuning import pull_deadline
from fedroc.federation.records import Record, encode
from fedroc.federation.transport import Exchange, Transport

__all__ = [
    "ERROR_DISCLOSURE",
    "ERROR_FEDROC",
    "ERROR_INTERNAL",
    "ERROR_MISCONFIGURED",
    "FlowerTransport",
]

# Seconds discovery waits, once every wanted site has answered, for the other connected
# nodes' answers (their refusals are part of the run's report).
HELLO_GRACE = 2.0
# Codes of fedroc's error replies (Flower's own codes are below 100).
ERROR_DISCLOSURE = 1001  # the site's policy refused the release
ERROR_FEDROC = 1002  # a fedroc error at the site (bad arguments, unknown function, ...)
ERROR_INTERNAL = 1003  # any other exception; the details stay in the site's log
ERROR_MISCONFIGURED = 1004  # the SuperNode's node config or data file is unusable

# Flower's codes for a message or reply that could not be delivered (node gone, upload cut).
_UNDELIVERED = {3, 4, 5}

CALL_TYPE = "query.fedroc_call"
HELLO_TYPE = "query.fedroc_hello"


def error_from_reply(site: str, code: int, reason: str) -> FedrocError:
    """Turn a site's error reply into the exception the analyst sees."""
    try:
        info = json.loads(reason)
    except (TypeError, ValueError):
        info = None
    if not isinstance(info, dict):
        # An error produced by Flower itself (ClientApp crashed, node unavailable, ...).
        return SiteError(f"Flower error {code} at site {site!r}: {reason}", site=site)
    if code == ERROR_DISCLOSURE:
        info["type"] = "DisclosureError"
    elif code != ERROR_FEDROC:
        info["type"] = "SiteError"  # internal or misconfigured: a failure of the site
    return error_from_dict(info, site=site)


def _discovery_done(
    wanted: list[str] | None,
    answered: dict[int, str],
    failed: dict[int, FedrocError],
    asked: set[int],
    min_sites: int,
    found_at: list[float],
) -> bool:
    """Whether discovery may stop: the wanted sites answered (or, without ``wanted``, every node).

    Once the wanted sites have answered, the other connected nodes (a rogue claiming a site,
    say) get :data:`HELLO_GRACE` seconds more, so that their refusals are reported with the
    run rather than lost to a race. ``found_at`` keeps when the wanted sites were complete.
    """
    settled = len(answered) + len(failed)
    if wanted is None:
        return settled >= max(min_sites, 1) and settled == len(asked)
    names = set(answered.values())
    if not all(w in names for w in wanted):
        return False
    found_at[:1] = found_at[:1] or [time.monotonic()]
    return settled == len(asked) or time.monotonic() - found_at[0] >= HELLO_GRACE


class FlowerTransport(Transport):
    """Site-function calls over a Flower ``Grid`` (inside a ``ServerApp``).

    On creation it asks every connected SuperNode for its site name (one
    ``query.fedroc_hello`` message each) and keeps the nodes that serve the requested sites.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
        The grid the ServerApp received.
    sites : sequence of str, optional
        Sites to use. Nodes serving other sites are ignored; a missing site fails after
        ``discovery_timeout``. Without it, every connected node must answer and each
        becomes a site (at least ``min_sites`` of them).
    timeout : float
        Seconds a call may take before the sites that did not answer are reported.
    discovery_timeout : float
        Seconds to wait for the SuperNodes to connect and name their sites.
    min_sites : int
        With ``sites=None``, the number of nodes to wait for.
    poll_interval : (float, float)
        First and largest pause between two pulls of replies (it grows geometrically).
    site_keys : mapping of str to sequence of str, optional
        Fingerprints (:func:`~fedroc.federation.flower.identity.fingerprint`) of the public
        keys each site may use. A node whose registered key is not one of the site it
        declares (or that declares a site with no pinned key) is refused, naming it.
    require_registered : bool
        Refuse nodes whose registered name (``flwr supernode register --name``) is not the
        site they declare; nodes that registered themselves (SuperNode authentication off)
        have no name and are refused too.
    status : callable, optional
        Told, while discovery waits for a wanted site that none of the connected nodes
        serves, which sites are missing and which are connected (``fedroc flower run``
        shows it: the site may yet connect, so the wait goes on to ``discovery_timeout``).
    """

    def __init__(
        self,
        grid: Grid,
        *,
        sites: Sequence[str] | None = None,
        timeout: float = 60.0,
        discovery_timeout: float = 60.0,
        min_sites: int = 1,
        poll_interval: tuple[float, float] = (0.01, 0.1),
        site_keys: Mapping[str, Sequence[str]] | None = None,
        require_registered: bool = False,
        status: Callable[[str], None] | None = None,
    ) -> None:
        if timeout <= 0 or discovery_timeout <= 0:
            raise InputError(
                f"timeouts must be positive; got timeout={timeout!r}, "
                f"discovery_timeout={discovery_timeout!r}"
            )
        if sites is not None and len(set(sites)) != len(list(sites)):
            raise InputError(f"sites are named twice in {list(sites)}")
        self.grid = grid
        self.timeout = float(timeout)
        self.poll_interval = poll_interval
        self.site_versions: dict[str, str] = {}
        self.site_keys = None if site_keys is None else {k: tuple(v) for k, v in site_keys.items()}
        self.require_registered = bool(require_registered)
        self.refused: dict[int, str] = {}
        self._calls = 0
        self._infos: dict[int, Any] = {}
        self._status = status
        self._nodes = self._discover(
            None if sites is None else list(sites), float(discovery_timeout), int(min_sites)
        )

    # -- Transport -------------------------------------------------------------------------
    @property
    def site_names(self) -> list[str]:
        """Names of the sites found at discovery."""
        return list(self._nodes)

    @property
    def node_ids(self) -> dict[str, int]:
        """Flower node id of each site."""
        return dict(self._nodes)

    def _deliver(
        self, function: str, site_args: Mapping[str, Record], requester: str, timeout: float | None
    ) -> tuple[dict[str, Exchange], dict[str, BaseException]]:
        """Send ``function`` to each site's SuperNode and gather the replies.

        Each message lives ``timeout + 30`` s on the SuperLink. A site whose reply does not
        arrive complete fails with a :class:`~fedroc.exceptions.SiteError` naming its
        Flower node.
        """
        limit = self.timeout if timeout is None else float(timeout)
        failures: dict[str, BaseException] = {}
        sent: dict[str, int] = {}
        messages: dict[str, Message] = {}
        self._calls += 1
        header = {"function": function, "requester": requester, "protocol": PROTOCOL}
        for name, args in site_args.items():
            sent[name] = len(encode(args))
            messages[name] = Message(
                to_recorddict(args, header),
                dst_node_id=self._nodes[name],
                message_type=CALL_TYPE,
                group_id=str(self._calls),
                ttl=limit + 30.0,
            )
        start = time.perf_counter()
        replies, missing = self._exchange(messages, limit)
        out: dict[str, Exchange] = {}
        for name in messages:  # the callers' order, as on the in-process transport
            reply = replies.get(name)
            if reply is None:
                continue
            if reply.has_error() and reply.error.code in _UNDELIVERED:
                failures[name] = SiteError(
                    f"site {name!r} (Flower node {self._nodes[name]}) did not answer "
                    f"{function!r}: its reply never arrived complete ({reply.error.reason})",
                    site=name,
                    function=function,
                )
                continue
            if reply.has_error():
                failures[name] = error_from_reply(name, reply.error.code, str(reply.error.reason))
                continue
            try:
                record = from_recorddict(reply.content)
            except FedrocError as exc:
                failures[name] = SiteError(
                    f"site {name!r} sent a malformed reply: {exc}", site=name
                )
                continue
            out[name] = Exchange(
                record, sent[name], len(encode(record)), time.perf_counter() - start
            )
        for name in missing:
            failures[name] = SiteError(
                f"site {name!r} (Flower node {self._nodes[name]}) did not answer {function!r} "
                f"within {limit:g} s: its SuperNode stopped, lost its connection or is stuck",
                site=name,
                function=function,
            )
        return out, failures

    # -- internals -------------------------------------------------------------------------
    def _exchange(
        self, messages: Mapping[str, Message], limit: float
    ) -> tuple[dict[str, Message], list[str]]:
        """Push one message per site, pull replies until all arrive or ``limit`` passes."""
        names = list(messages)
        ids = list(self.grid.push_messages([messages[n] for n in names]))
        pending: dict[str, str] = {}
        replies: dict[str, Message] = {}
        for name, message_id in zip(names, ids, strict=True):
            if not message_id:
                raise SiteError(f"the SuperLink refused the message to site {name!r}", site=name)
            pending[message_id] = name
        deadline = time.monotonic() + limit
        pause, longest = self.poll_interval
        while pending:
            with pull_deadline(deadline):
                pulled = list(self.grid.pull_messages(list(pending)))
            for reply in pulled:
                name = pending.pop(str(reply.metadata.reply_to_message_id), "")
                if name:
                    replies[name] = reply
            if not pending or time.monotonic() >= deadline:
                break
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 1.5, longest)
        return replies, sorted(pending.values())

    def _discover(self, wanted: list[str] | None, limit: float, min_sites: int) -> dict[str, int]:
        """Ask each connected node which site it serves."""
        deadline = time.monotonic() + limit
        asked: dict[str, int] = {}  # message id -> node id
        answered: dict[int, str] = {}
        failed: dict[int, FedrocError] = {}
        pause, longest = self.poll_interval

        found_at: list[float] = []
        told: tuple[tuple[str, ...], tuple[str, ...]] | None = None

        def done() -> bool:
            return _discovery_done(
                wanted, answered, failed, set(asked.values()), min_sites, found_at
            )

        while True:
            fresh = [n for n in self.grid.get_node_ids() if n not in asked.values()]
            if fresh:
                hello = [
                    Message(
                        to_recorddict({}, {"protocol": PROTOCOL}),
                        dst_node_id=node,
                        message_type=HELLO_TYPE,
                        ttl=limit + 30.0,
                    )
                    for node in fresh
                ]
                for node, message_id in zip(fresh, self.grid.push_messages(hello), strict=True):
                    if message_id:
                        asked[message_id] = node
            waiting = [m for m, n in asked.items() if n not in answered and n not in failed]
            if waiting:
                with pull_deadline(deadline):
                    pulled = list(self.grid.pull_messages(waiting))
                for reply in pulled:
                    found = asked.get(str(reply.metadata.reply_to_message_id))
                    if found is None:
                        continue
                    node = found
                    if reply.has_error():
                        failed[node] = error_from_reply(
                            f"node {node}", reply.error.code, str(reply.error.reason)
                        )
                        continue
                    try:
                        info: Any = read_header(reply.content)
                    except FedrocError as exc:
                        failed[node] = SiteError(
                            f"Flower node {node} is not a fedroc site: {exc}", site=f"node {node}"
                        )
                        continue
                    if int(info["protocol"]) != PROTOCOL:
                        failed[node] = ProtocolError(
                            f"Flower node {node} (site {info['site']!r}) speaks fedroc "
                            f"protocol {info['protocol']}, this analyst {PROTOCOL}; install "
                            "the same fedroc version on both"
                        )
                        continue
                    refusal = self._check_identity(node, str(info["site"]))
                    if refusal is not None:
                        self.refused[node] = refusal
                        failed[node] = SiteError(refusal, site=str(info["site"]))
                        continue
                    answered[node] = str(info["site"])
                    self.site_versions[str(info["site"])] = str(info["version"])
            if done() or time.monotonic() >= deadline:
                break
            if wanted is not None and self._status is not None:
                told = self._tell_missing(wanted, answered, failed, asked, deadline, told)
            time.sleep(pause)
            pause = min(pause * 1.5, longest)
        return self._assign(wanted, answered, failed, asked, limit)

    def _tell_missing(
        self,
        wanted: list[str],
        answered: dict[int, str],
        failed: dict[int, FedrocError],
        asked: dict[str, int],
        deadline: float,
        told: tuple[tuple[str, ...], tuple[str, ...]] | None,
    ) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """Say which wanted sites no connected node serves, once all of them have answered.

        Said again when the connected sites change; returns what was said last.
        """
        if len(answered) + len(failed) < len(asked):
            return told  # a connected node may still name a wanted site
        names = tuple(sorted(set(answered.values())))
        missing = tuple(w for w in wanted if w not in names)
        if not missing or (missing, names) == told:
            return told
        assert self._status is not None
        left = max(deadline - time.monotonic(), 0.0)
        self._status(
            f"waiting up to {left:.0f} s for site(s) {list(missing)}, which no connected "
            f"SuperNode serves (connected sites: {list(names)})"
        )
        return missing, names

    def _node_info(self, node: int) -> Any:
        """Return the SuperLink's record of a node (registered name and public key), or None."""
        get_nodes = getattr(self.grid, "get_nodes", None)
        if get_nodes is None:
            return None
        if node not in self._infos:
            self._infos.update({int(i.node_id): i for i in get_nodes()})
        return self._infos.get(node)

    def _check_identity(self, node: int, site: str) -> str | None:
        """Why a node may not serve the site it declares (None: it may)."""
        if self.site_keys is None and not self.require_registered:
            return None
        info = self._node_info(node)
        name = str(getattr(info, "name", "") or "")
        key = bytes(getattr(info, "public_key", b"") or b"")
        if self.site_keys is not None:
            from fedroc.federation.flower.identity import fingerprint

            pinned = self.site_keys.get(site)
            try:
                found = fingerprint(key) if key else "no key"
            except InputError:
                found = "an unreadable key"
            if pinned is None:
                # It said "which has no registered key in this deployment", also of a
                # genuine node with a registered key that the run merely did not pin.
                return (
                    f"Flower node {node} declares site {site!r}, whose key the analyst has not "
                    f"pinned (keys pinned for {sorted(self.site_keys)}: --site-key, or the "
                    "deployment's connection.json); refused"
                )
            if found not in pinned:
                return (
                    f"Flower node {node} declares site {site!r} but authenticated with "
                    f"{found}, not the key of {site!r} ({', '.join(pinned)}); refused"
                )
        if self.require_registered and name != site:
            registered = f"registered as {name!r}" if name else "not registered under a name"
            return (
                f"Flower node {node} declares site {site!r} but is {registered} at the "
                "SuperLink; refused"
            )
        return None

    @staticmethod
    def _assign(
        wanted: list[str] | None,
        answered: dict[int, str],
        failed: dict[int, FedrocError],
        asked: dict[str, int],
        limit: float,
    ) -> dict[str, int]:
        by_site: dict[str, list[int]] = {}
        for node, name in answered.items():
            by_site.setdefault(name, []).append(node)
        relevant = wanted if wanted is not None else sorted(by_site)
        twice = {n: nodes for n, nodes in by_site.items() if n in relevant and len(nodes) > 1}
        if twice:
            detail = "; ".join(f"site {n!r} by nodes {v}" for n, v in twice.items())
            raise SiteError(f"two SuperNodes serve the same site: {detail}", site=next(iter(twice)))
        if wanted is not None:
            missing = [w for w in wanted if w not in by_site]
            if missing:
                hint = ""
                if failed:
                    hint = "; nodes refused or unable to serve a site: " + "; ".join(
                        str(e) for e in failed.values()
                    )
                raise SiteError(
                    f"site(s) {missing} did not answer within {limit:g} s (connected sites: "
                    f"{sorted(by_site)}){hint}",
                    site=missing[0],
                )
            return {w: by_site[w][0] for w in wanted}
        if failed:
            first = next(iter(failed.values()))
            raise SiteError(
                "SuperNode(s) could not serve a site: "
                + "; ".join(f"node {n}: {e}" for n, e in failed.items()),
                site=getattr(first, "site", "unknown"),
            )
        silent = sorted(set(asked.values()) - set(answered))
        if silent:
            raise SiteError(
                f"Flower node(s) {silent} did not say which site they serve within {limit:g} s; "
                "name the sites you expect to skip nodes that are gone",
                site=f"node {silent[0]}",
            )
        if not by_site:
            raise SiteError(f"no SuperNode answered within {limit:g} s", site="none")
        return {name: nodes[0] for name, nodes in sorted(by_site.items())}
