"""The site: the only code that touches a site's rows.

A :class:`Site` holds one site's table, its :class:`~fedroc.privacy.DisclosurePolicy`, its
privacy ledger and an append-only audit log. It runs *site functions*, registered by name
with :func:`site_function`; each returns a :class:`Reply` of aggregates, noisy values or
secret shares, never rows.

The analyst is untrusted, so the site decides what runs and with what:

- every site function declares the arguments it accepts (a
  :mod:`~fedroc.federation.schema`); a request outside it is refused before the function
  runs, and the refusal names the site, the function and the argument;
- randomness that protects the site's rows is the site's own: DP noise comes from OpenDP's
  samplers (or the site's OS entropy), or, for reproducible simulations, from a seed in the
  site's own configuration (``noise_seed``); nothing the analyst sends reaches it;
- every DP release is composed in the site's ledger (on disk beside its audit log when it
  has one) and refused when it would exceed the site's lifetime budget;
- every reply passes the policy check and is written to the audit log before it leaves;
  a refusal is logged too.

A function registered with ``release="secure"`` is an input of secure aggregation only:
:func:`aggregate_input` runs it for :mod:`fedroc.secagg` and its values never leave the
site in the clear.

A site function is written once; what every call needs besides it (the policy's list of
functions, the argument schema, the disclosure check and ledger, the audit log) is
*middleware* around it, as Flower's mods wrap a ClientApp's handler: a :data:`Mod` takes the
:class:`Call` and the next handler and may refuse, change or check what passes. A direct call
runs :data:`DIRECT_MODS`; an input of secure aggregation runs :data:`AGGREGATE_MODS`, and the
secure-aggregation protocol (itself site functions, called directly) checks and charges what
the input releases through its own reply.

Site functions are registered by the layer that owns them when it is imported
(:mod:`fedroc.federation.basic` here, :mod:`fedroc.secagg` and :mod:`fedroc.methods` above);
this module names no higher layer. A process that serves sites imports the application
module :mod:`fedroc.apps.application`, which loads them all.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from fedroc._docs import fill_doc
from fedroc._results import jsonable
from fedroc.data import Columns, SiteData
from fedroc.exceptions import DisclosureError, FedrocError, InputError
from fedroc.federation.records import Record, check_record
from fedroc.federation.roster import SiteIdentity
from fedroc.federation.schema import ArgumentRefused, Schema, check_arguments
from fedroc.privacy import keys
from fedroc.privacy.ledger import (
    SEALED,
    BudgetLedger,
    DPEvent,
    ledger_path_for,
    salt_path_for,
)
from fedroc.privacy.policy import DisclosurePolicy, ReleaseKind

__all__ = [
    "AGGREGATE_MODS",
    "DIRECT_MODS",
    "KEYED_ROWS",
    "AuditLog",
    "Call",
    "Handler",
    "Mod",
    "Reply",
    "Site",
    "SiteContext",
    "aggregate_input",
    "bind_before_reading",
    "bind_rows",
    "bind_rows_read",
    "binding_refused",
    "check_noise_seed",
    "check_rows",
    "check_rows_salt",
    "exact_refused",
    "get_site_function",
    "grid_range_text",
    "keyed_digest",
    "registered_site_functions",
    "rows_changed",
    "site_function",
]

# Keys of a reply that carry metadata for the analyst's transcript, not results.
META_DP = "__dp__"
META_KIND = "__kind__"


@dataclass(frozen=True)
class Reply:
    """What a site function returns.

    Attributes
    ----------
    values : Record
        The released values.
    kind : {"aggregate", "noisy", "shares"}
        Aggregates must declare their row counts; noisy values their DP events.
    counts : mapping of str to int or array
        Number of rows behind each released aggregate; the policy refuses any below q.
    dp : sequence of DPEvent
        Differential-privacy releases in ``values``.
    statement : bytes
        Only for an input of secure aggregation: a statement about the input that the site
        releases in the clear (signed by the function itself), which the protocol returns
        in the site's reply to its unmasking stage, once the site has bound the set of
        sites the sum is over (the clustered method's signed row count); empty for most.
    source : str
        Only for a stage of secure aggregation: the input function whose values and DP
        events it carries. The site's ledger records it beside the stage, so that its
        operator sees what the budget went to (``fedroc privacy status``), not only
        ``fedroc.secagg.advertise_keys``; empty for most.
    """

    values: Mapping[str, Any]
    kind: ReleaseKind = "aggregate"
    counts: Mapping[str, Any] = field(default_factory=dict)
    dp: tuple[DPEvent, ...] = ()
    statement: bytes = b""
    source: str = ""


@dataclass
class SiteContext:
    """What a site function may use: the rows, the policy, its state and randomness.

    ``sites``, ``noise_shares`` and ``session`` are set when the function computes an input
    of secure aggregation: the sites of the session, the number of shares to split DP noise
    into (the session's threshold: no sum of fewer inputs can be unmasked, so any sum the
    analyst sees holds at least one full draw) and the session's id. They come from the
    protocol as checked by the site, never from an argument of the function. ``identity``
    is the site's signing key and its operator's roster of peers
    (:mod:`fedroc.federation.roster`), with which it authenticates the other members of a
    secure aggregation.

    Attributes
    ----------
    site : str
        This site's name.
    data : SiteData
        The site's rows (read-only arrays).
    policy : DisclosurePolicy
        The site's disclosure policy, which every reply must satisfy.
    state : dict of str to Record
        Values the site keeps between calls of a session (e.g. a fitted model), by key.
    requester : str
        Who made the call (the analyst's name as the transport authenticated it).
    ledger : BudgetLedger
        The site's record of the privacy budget spent, per binding.
    noise_seed : int, optional
        Seed of the site's DP noise (simulations and tests only); None draws from OpenDP or
        the operating system (:meth:`noise_rng`).
    sites : tuple of str, optional
        The sites of the secure-aggregation session this call is an input of; None for a
        direct call.
    noise_shares : int, default 1
        Number of shares the DP noise is split into (the session's threshold).
    identity : SiteIdentity, optional
        The site's signing key and its operator's roster of peers.
    session : str, optional
        The id of the secure-aggregation session this call is an input of (set by the
        protocol, like ``sites``); None for a direct call. A statement the input signs can
        name it, so that it is not taken for another sum's.
    """

    site: str
    data: SiteData
    policy: DisclosurePolicy
    state: dict[str, Record]
    requester: str
    ledger: BudgetLedger = field(default_factory=BudgetLedger)
    noise_seed: int | None = None
    sites: tuple[str, ...] | None = None
    noise_shares: int = 1
    identity: SiteIdentity | None = None
    session: str | None = None

    def class_counts(self) -> dict[str, int]:
        """Return the site's class counts as an aggregate over both classes declares them.

        ``Reply.counts`` of a release that gives a class count, or lets one be derived
        (a sum over one class, of the labels, a Brier sum): the policy holds each to q.
        """
        return {"positive": self.data.n_pos, "negative": self.data.n_neg}

    def noise_rng(self, stream: str) -> np.random.Generator | None:
        """Return the generator for this site's DP noise, or None for the production samplers.

        None (no ``noise_seed`` in the site's configuration) tells the mechanisms of
        :mod:`fedroc.privacy` to draw from OpenDP or the operating system. With a
        ``noise_seed`` (simulations, tests) the stream is derived from (seed, site name,
        stream, the number of DP releases in the site's ledger), so that every site draws
        independently (the reference code of paper 5 gave all clients the same seed), a run
        from a fresh ledger is reproducible call for call, and no two releases share their
        noise: with the same standard normal draws behind two releases at two noise scales,
        their difference gave the draws and every score exactly (A2 in
        tests/test_attacks_review2.py). Nothing the analyst sends enters either.
        """
        if self.noise_seed is None:
            return None
        with self.ledger.transaction():  # on disk: what every process of the site recorded
            released = len(self.ledger.events)
        digest = hashlib.sha256(f"{self.site}\x00{stream}\x00{released}".encode()).digest()
        words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
        return np.random.default_rng(np.random.SeedSequence([int(self.noise_seed), *words]))


SiteFn = Callable[[SiteContext, Record], Reply]
Release = Literal["clear", "secure", "both"]
RELEASES: tuple[str, ...] = ("clear", "secure", "both")


@dataclass(frozen=True)
class _Spec:
    name: str
    fn: SiteFn
    schema: Schema
    release: Release
    rows: bool
    noisy: bool | Callable[[Mapping[str, Any]], bool]

    def exact(self, args: Mapping[str, Any]) -> bool:
        """Return whether a call with (checked) ``args`` releases the rows exactly.

        Whatever it replies: a function of the rows not registered ``noisy``, or not for
        these arguments.
        """
        noisy = self.noisy(args) if callable(self.noisy) else self.noisy
        return self.rows and not noisy


_REGISTRY: dict[str, _Spec] = {}


def site_function(
    name: str,
    *,
    schema: Schema,
    release: Release = "clear",
    rows: bool = True,
    noisy: bool | Callable[[Mapping[str, Any]], bool] = False,
) -> Callable[[SiteFn], SiteFn]:
    """Register ``fn(ctx, args) -> Reply`` under ``name``.

    Parameters
    ----------
    name : str
        The name callers use (``Federation.call(name, ...)``), e.g. ``"fedroc.brier"``.
    schema : mapping of str to :class:`~fedroc.federation.schema.Field`
        The only arguments the site accepts for this function; checked before it runs.
    release : {"clear", "secure", "both"}
        ``"clear"``: called directly, its reply goes to the analyst. ``"secure"``: only as
        an input of secure aggregation (:func:`aggregate_input`). ``"both"``: either.
    rows : bool, default True
        Whether its reply is a function of the site's rows. An exact reply (one without
        DP events) of such a function binds the rows (:func:`bind_rows`); False only for
        what a protocol says of itself (secure aggregation's stages, whose input is the
        function it aggregates).
    noisy : bool or callable, default False
        Whether its replies with DP events are private whole (the histogram's DP trees and
        class counts); a callable says it of the checked arguments of a call (the
        histogram's secure tree: in its DP mode). Any other call of the rows is exact
        whatever it replies: the
        site refuses it before it runs where an exact release would be refused (its rows
        changed, or ``allow_exact`` false; :func:`check_rows`), so that no refusal of its
        own, which may depend on the new rows, is given instead; and its DP replies bind
        the rows as exact ones do (ROC-GLM's noisy scores, split by class: their lengths
        are the exact class sizes, and two of them, or one and an exact release, around a
        withdrawn row give that row's label).

    Returns
    -------
    callable
        A decorator that registers ``fn`` and returns it unchanged.

    Raises
    ------
    InputError
        ``release`` is not one of the three, or (when the decorator is applied) another
        function is already registered under ``name``.
    """
    if release not in RELEASES:
        raise InputError(f"release must be one of {RELEASES}; got {release!r}")

    def register(fn: SiteFn) -> SiteFn:
        existing = _REGISTRY.get(name)
        if existing is not None and existing.fn.__qualname__ != fn.__qualname__:
            raise InputError(f"site function {name!r} is already registered")
        _REGISTRY[name] = _Spec(name, fn, dict(schema), release, rows, noisy)
        return fn

    return register


def _spec(name: str) -> _Spec:
    if name not in _REGISTRY:
        # The foundation's own site functions (this layer's) are always served; those of
        # higher layers are registered by importing them (or the application,
        # fedroc.apps.application).
        import fedroc.federation.basic  # noqa: F401
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InputError(
            f"unknown site function {name!r}: a method's site functions are registered when "
            "its module is imported (e.g. fedroc.methods.rocglm), all of them with "
            "fedroc.apps.application"
        ) from None


def get_site_function(name: str) -> SiteFn:
    """Return the function registered as ``name``.

    Parameters
    ----------
    name : str
        The registered name.

    Returns
    -------
    callable
        ``fn(ctx: SiteContext, args: Record) -> Reply``.

    Raises
    ------
    InputError
        When no site function of that name is registered.
    """
    return _spec(name).fn


def site_function_schema(name: str) -> Schema:
    """Return the arguments a site function accepts (its declared schema)."""
    return _spec(name).schema


def aggregate_input(ctx: SiteContext, name: str, args: Mapping[str, Any]) -> Reply:
    """Run site function ``name`` as an input of secure aggregation at this site.

    The function must be registered with ``release="secure"`` or ``"both"`` and allowed by
    the site's policy; ``args`` are checked against its schema exactly as
    :meth:`Site.handle` checks a direct call (the mods :data:`AGGREGATE_MODS`).
    """
    return _chain(AGGREGATE_MODS)(Call(name, args, ctx))


def registered_site_functions() -> list[str]:
    """List the names of the site functions registered in this process.

    Returns
    -------
    list of str
        The names, sorted.
    """
    return sorted(_REGISTRY)


_INLINE_LIMIT = 4096  # arrays up to this many elements are written into the log line


class AuditLog:
    """Append-only log of every value a site released, as JSON lines.

    With a ``path`` each entry is appended and flushed to disk (``fsync``) before the reply
    leaves the site, so a crash loses nothing that was released; arrays larger than
    4096 elements go to ``<path>.blobs/<seq>-<key>.npy`` and the line records their file,
    shape and SHA-256. Without a path the entries are kept in memory.

    Parameters
    ----------
    path : str or pathlib.Path, optional
        The JSON-lines file to append to (its folder is created; an existing file is
        continued, its entries numbered on). None keeps the log in memory.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._memory: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._seq = 0
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                self._seq = sum(1 for _ in self.path.open("rb"))

    def _value(self, seq: int, key: str, value: Any) -> Any:
        if isinstance(value, np.ndarray) and value.size > _INLINE_LIMIT:
            item: dict[str, Any] = {
                "shape": list(value.shape),
                "dtype": value.dtype.str,
                "sha256": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest(),
            }
            if self.path is not None:
                blob_dir = self.path.with_name(self.path.name + ".blobs")
                blob_dir.mkdir(exist_ok=True)
                blob = blob_dir / f"{seq:08d}-{key}.npy"
                np.save(blob, value)
                item["file"] = str(blob.relative_to(self.path.parent))
            else:
                item["values"] = value.copy()
            return item
        if isinstance(value, bytes):
            return {"bytes": value.hex()}
        return jsonable(value)

    def append(self, entry: Mapping[str, Any], released: Mapping[str, Any] | None = None) -> None:
        """Append one entry with the values it released (a file log flushes it to disk).

        Parameters
        ----------
        entry : mapping
            What happened (site, function, requester, outcome, ...); a sequence number and the
            UTC time are added.
        released : mapping, optional
            The released values. Arrays of more than 4096 elements are written to a blob file
            (in-memory logs keep a copy) and recorded by shape, dtype and SHA-256; bytes as hex.
        """
        with self._lock:
            seq = self._seq
            self._seq += 1
            line = {"seq": seq, "time": _dt.datetime.now(_dt.UTC).isoformat(), **entry}
            if released is not None:
                line["released"] = {k: self._value(seq, k, v) for k, v in released.items()}
            if self.path is None:
                self._memory.append(line)
                return
            text = json.dumps(
                line, default=lambda o: jsonable(o) if not isinstance(o, np.ndarray) else None
            )
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(text + "\n")
                fh.flush()
                os.fsync(fh.fileno())

    def entries(self) -> list[dict[str, Any]]:
        """Return every entry logged so far, oldest first (read from the file if there is one)."""
        if self.path is None:
            return list(self._memory)
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]


def _summarize_args(args: Record) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in args.items():
        if isinstance(value, np.ndarray):
            out[key] = {
                "shape": list(value.shape),
                "sha256": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:16],
            }
        elif isinstance(value, bytes):
            out[key] = {"bytes": len(value)}
        else:
            out[key] = jsonable(value)
    return out


# -- middleware --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    """One request at a site, as it passes through the site's mods.

    Attributes
    ----------
    function : str
        The registered name of the site function.
    args : mapping of str to value
        The arguments as received; :func:`schema_mod` replaces them with the checked ones.
    ctx : SiteContext
        What the function may use at this site.
    audit : AuditLog or None
        The site's audit log (None for an input of secure aggregation, whose release the
        protocol's own reply logs).
    """

    function: str
    args: Mapping[str, Any]
    ctx: SiteContext
    audit: AuditLog | None = None


Handler = Callable[[Call], Reply]
Mod = Callable[[Call, Handler], Reply]


def _run(call: Call) -> Reply:
    """Run the site function itself: the innermost handler of every chain of mods."""
    reply = _spec(call.function).fn(call.ctx, dict(call.args))
    if not isinstance(reply, Reply):
        raise TypeError(
            f"site function {call.function!r} returned {type(reply).__name__}, not Reply"
        )
    return reply


def _chain(mods: Iterable[Mod], handler: Handler = _run) -> Handler:
    """``mods[0]`` outermost, ``handler`` innermost."""
    for mod in reversed(list(mods)):
        handler = (lambda m, h: lambda call: m(call, h))(mod, handler)
    return handler


def audit_mod(call: Call, next_handler: Handler) -> Reply:
    """Write the outcome of the call (released, refused or failed) to the site's audit log."""
    assert call.audit is not None
    base = {"site": call.ctx.site, "function": call.function, "requester": call.ctx.requester}
    try:
        reply = next_handler(call)
    except DisclosureError as exc:
        call.audit.append({**base, "outcome": "refused", "reason": str(exc)})
        raise
    except Exception as exc:
        call.audit.append({**base, "outcome": "error", "reason": f"{type(exc).__name__}: {exc}"})
        raise
    call.audit.append(
        {
            **base,
            "outcome": "released",
            "kind": reply.kind,
            "args": _summarize_args(dict(call.args)),
            "counts": jsonable(dict(reply.counts)),
            "dp": [jsonable(e) for e in reply.dp],
        },
        released=reply.values,
    )
    return reply


def _release_mod(refused: Release, reason: str) -> Mod:
    """Make a mod that refuses functions the policy does not allow, or registered as ``refused``."""

    def mod(call: Call, next_handler: Handler) -> Reply:
        call.ctx.policy.check_function(call.ctx.site, call.function)
        if _spec(call.function).release == refused:
            raise DisclosureError(
                f"site {call.ctx.site!r} refuses {call.function!r}: {reason}",
                site=call.ctx.site,
                function=call.function,
            )
        return next_handler(call)

    return mod


# A direct call: its reply goes to the requester in the clear.
direct_release_mod = _release_mod("secure", "it is released only through secure aggregation")
# An input of secure aggregation: its values are masked before they leave.
aggregate_release_mod = _release_mod("clear", "it is not an aggregate input")


def schema_mod(call: Call, next_handler: Handler) -> Reply:
    """Check the arguments against the function's schema before it runs."""
    schema = _spec(call.function).schema
    checked = check_arguments(schema, dict(call.args), site=call.ctx.site, function=call.function)
    return next_handler(replace(call, args=checked))


@fill_doc
def binding_refused(
    ctx: SiteContext, function: str, argument: str, first: Any, value: Any
) -> ArgumentRefused:
    """Return the refusal of an argument declared ``bind`` whose value changed.

    Parameters
    ----------
    {ctx, refused_function}
    argument : str
        The argument's name.
    first : JSON value
        The value it was bound to.
    value : JSON value
        The value this request gives.

    Returns
    -------
    ArgumentRefused
        Naming the site, the function, the argument and both values.
    """
    return ArgumentRefused(
        f"site {ctx.site!r} refuses {function!r}: argument {argument!r} was "
        f"{first!r} in its earlier releases and may not change (got {value!r}); "
        "aggregates under two choices could be subtracted",
        site=ctx.site,
        function=function,
        argument=argument,
    )


def _check_bindings(ctx: SiteContext, function: str, bound: Mapping[str, Any]) -> None:
    for key, value in bound.items():
        # Membership, not the value: an argument first bound to None (its default) is bound.
        if key not in ctx.ledger.bindings:
            continue
        first = ctx.ledger.bindings[key]
        if first != value:
            raise binding_refused(ctx, function, key.rsplit(":", 1)[-1], first, value)


def bind_before_reading(
    ctx: SiteContext,
    key: str,
    value: Any,
    refusal: Callable[[Any], Exception],
    *,
    accepts: Callable[[Any], bool] | None = None,
) -> None:
    """Hold ``key`` of the site's ledger to its first value: refuse another, else bind it.

    For what a site function checks itself, not as a declared argument: a value it derives
    from several arguments, or one a later request may narrow. Call it before the function
    reads its rows: a refusal that depends on the rows then leaves the binding in place, so
    that refusals cannot be used to search for a value that isolates a row.

    Parameters
    ----------
    ctx : SiteContext
    key : str
        The ledger key.
    value : JSON value
        This request's value; bound unless ``key`` is bound already.
    refusal : callable
        ``refusal(first)`` is the exception raised when ``key`` is bound to ``first`` and
        this request may not follow it.
    accepts : callable, optional
        ``accepts(first)`` says whether this request may follow ``first``; by default when
        ``first == value``.

    Notes
    -----
    The check and the bind hold the ledger's transaction (its lock, and on disk its file
    lock), so that no concurrent request binds another value in between. A key bound to
    None is bound.
    """
    with ctx.ledger.transaction():
        if key in ctx.ledger.bindings:
            first = ctx.ledger.bindings[key]
            if not (first == value if accepts is None else accepts(first)):
                raise refusal(first)
        ctx.ledger.bind(key, value)


def _bound(call: Call) -> dict[str, Any]:
    """Return the ledger keys and values of the call's arguments declared ``bind``."""
    return {
        f"{keys.ARGUMENT}{call.function}:{key}": call.args[key]
        for key, fld in _spec(call.function).schema.items()
        if fld.bind
    }


def binding_mod(call: Call, next_handler: Handler) -> Reply:
    """Hold arguments declared ``bind`` to their first value, for an aggregate input.

    A secure sum under another binning could be subtracted from the first as well as two
    direct releases could; the keys are the same as a direct call's, so one value holds for
    both. The value binds once the input is computed, before anything is unmasked.
    """
    bound = _bound(call)
    _check_rows_first(call)
    _check_bindings(call.ctx, call.function, bound)
    reply = _run_binding_refusals(call, next_handler)
    with call.ctx.ledger.transaction():
        _check_bindings(call.ctx, call.function, bound)
        bind_rows(call, reply)
        for key, value in bound.items():
            call.ctx.ledger.bind(key, value)
    return reply


ROWS_KEY = keys.ROWS
#: Where the DP histograms' range check binds the rows it first read ("+score_b": the joint
#: grid's), under the suffixes of :data:`ROWS_KEY` (fedroc.methods.histogram's
#: ``BIND_RANGE_ROWS``). The rows check reads them as bindings of the rows: a ledger written
#: before the range check bound the rows themselves (main d87878d) holds only these (R11-1).
RANGE_ROWS_KEY = keys.RANGE_ROWS


@fill_doc
def exact_refused(ctx: SiteContext, function: str) -> DisclosureError:
    """Return the refusal of an exact release at a site whose policy sets no ``allow_exact``.

    Parameters
    ----------
    {ctx, refused_function}

    Returns
    -------
    DisclosureError
        Naming the site, the function and the setting.
    """
    return DisclosureError(
        f"site {ctx.site!r} refuses {function!r}: its policy releases no exact aggregate of "
        "its rows (allow_exact = false), only differentially private ones (e.g. the "
        "histogram method with --dp-epsilon)",
        site=ctx.site,
        function=function,
    )


def bind_rows(call: Call, reply: Reply) -> None:
    """Hold the site's exact releases to one version of its rows, for its ledger's lifetime.

    Exact releases (of a function registered with ``rows=True``, without DP events) of two
    versions of the site's rows subtract to the rows that changed: a clear calibration
    before and after one patient's rows were withdrawn gives that patient's rows per bin,
    labels and predicted sums, a lone row's probability; two secure sums whose other inputs
    are the same, the same. A DP reply of a function not registered ``noisy`` (ROC-GLM's
    noisy scores, whose lengths are the exact class sizes) binds too. The first such
    release binds the rows' digests (:attr:`fedroc.data.SiteData.projection_digests`, keyed
    by the ledger's salt, :func:`keyed_digest`; the same for the rows in any order: of the
    labels and scores, and of them with each subset of the other columns loaded); after it,
    an exact release of other rows is refused. DP releases compose in the ledger instead and
    are not bound. A site whose rows changed releases exactly again only under a new ledger,
    which its operator chooses knowing that the old releases stay subtractable from the new.

    Call it holding the ledger's transaction, after the function ran and before its reply
    leaves.

    Parameters
    ----------
    call : Call
        The request.
    reply : Reply
        What the function would release.

    Raises
    ------
    DisclosureError
        The site's ledger is bound to other rows.
    """
    ctx = call.ctx
    spec = _spec(call.function)
    if not spec.rows or (reply.dp and not spec.exact(call.args)):
        return
    for key, value in check_rows(ctx, call.function).items():
        ctx.ledger.bind(key, value)


@fill_doc
def check_rows(ctx: SiteContext, function: str) -> dict[str, str]:
    """Refuse an exact release where :func:`bind_rows` would; return the digests it binds.

    Binds nothing. Called before an exact call reads the rows too (of a function not
    registered ``noisy``, or not for its arguments), so that a refusal of its own that
    depends on the new rows (a confusion table's cell under q, a score outside a range) is
    never given in place of this one: after one row's withdrawal, a confusion table refused
    for a small cell said whether the row was in it (review 8, 20 of 20).

    Parameters
    ----------
    {ctx, refused_function}

    Returns
    -------
    dict of str to str
        The ledger keys of the rows' digests and the values to bind (of the cluster ids as
        read, :attr:`~fedroc.data.SiteData.read_ids_digests`, where a ledger bound before
        their canonical form agrees with those only): each digest keyed by the ledger's
        salt (:func:`keyed_digest`).

    Raises
    ------
    DisclosureError
        The site allows no exact release, or its ledger is bound to other rows.
    """
    if not ctx.policy.allow_exact:
        raise exact_refused(ctx, function)
    digests = _row_digests(ctx, function)
    if _changed(ctx, digests, function):
        raise DisclosureError(
            f"site {ctx.site!r} refuses {function!r}: its rows changed since its first "
            "exact release under its privacy ledger (a refusal that read its rows, such as "
            "scores outside the range asked, counts as one), and exact releases of two "
            "versions of its rows subtract to the rows that changed. Its operator may start "
            "it on a new ledger for the new rows (a new audit log: a new --audit-dir for fedroc "
            "evaluate, a new --dir for fedroc flower up, a new `audit` path in a node "
            "config), knowing that what the old rows released stays subtractable from what "
            "the new ones release",
            site=ctx.site,
            function=function,
        )
    return _keyed(ctx, digests)


#: The start of a rows binding's value keyed by the ledger's salt. A value without it is the
#: digest itself, as fedroc up to main 553c50b bound it: such a ledger is read as before.
KEYED_ROWS = "keyed:"


def keyed_digest(salt: bytes, digest: str) -> str:
    """Return a digest of the rows as the ledger binds it: keyed by the ledger's salt.

    The digest (:attr:`fedroc.data.SiteData.projection_digests`) is a fixed function of the
    rows, its salt a constant of the code: bound as it was, a copy of the ledger file and
    every row but one label gave the label (the digests of its two candidates, one bound:
    20 of 20, ``tests/test_attacks_ledger_copy.py``). HMAC-SHA256 under the ledger's random
    salt (:meth:`fedroc.privacy.ledger.BudgetLedger.rows_salt`, kept beside the ledger
    file, not in it) tests no guess without the salt; the site, holding it, still checks
    its rows.

    Parameters
    ----------
    salt : bytes
        The ledger's salt.
    digest : str
        A digest of the rows.

    Returns
    -------
    str
        :data:`KEYED_ROWS` and 64 hexadecimal digits.
    """
    return KEYED_ROWS + hmac.new(salt, digest.encode("ascii"), hashlib.sha256).hexdigest()


def _keyed(ctx: SiteContext, digests: Mapping[str, str]) -> dict[str, str]:
    salt = ctx.ledger.rows_salt(create=True)
    assert salt is not None
    return {key: keyed_digest(salt, digest) for key, digest in digests.items()}


def _salt_missing(ctx: SiteContext, function: str) -> DisclosureError:
    path = ctx.ledger.path
    name = "" if path is None else f" ({salt_path_for(path).name}, beside its ledger)"
    return DisclosureError(
        f"site {ctx.site!r} refuses {function!r}: its ledger binds a digest of its rows "
        f"keyed by a salt whose file{name} is missing, so it cannot tell its rows from "
        "others; its operator restores the salt file from a copy, or starts the site on a "
        "new ledger",
        site=ctx.site,
        function=function,
    )


def check_rows_salt(ledger: BudgetLedger, site: str) -> None:
    """Refuse to start a site whose ledger binds keyed digests or sealed values but has no salt.

    Parameters
    ----------
    ledger : BudgetLedger
        The site's ledger.
    site : str
        The site's name, for the error.

    Raises
    ------
    InputError
        Naming the ledger and its missing salt file.
    """
    keyed = any(
        isinstance(v, str) and v.startswith(KEYED_ROWS)
        for k, v in ledger.bindings.items()
        if k.startswith((ROWS_KEY, RANGE_ROWS_KEY))
    ) or any(
        isinstance(v, str) and v.startswith(SEALED)
        for k, v in ledger.bindings.items()
        if k in keys.SEALED_KEYS
    )
    if keyed and ledger.path is not None and ledger.rows_salt(create=False) is None:
        raise InputError(
            f"site {site!r}: privacy ledger {str(ledger.path)!r} binds values keyed by or "
            f"sealed under the salt in {str(salt_path_for(ledger.path))!r}, which is missing; "
            "restore it from a copy of the site's files, or start the site on a new ledger"
        )


def _row_digests(ctx: SiteContext, function: str = "the rows check") -> dict[str, str]:
    # Labels and scores ("rows"), and with each subset of the other columns loaded
    # ("rows+cluster", ...): a run that names the table's cluster column or second score
    # after one that did not reads the same rows, and one column changed is refused
    # wherever it is loaded (every release that could depend on it).
    # In the form the ledger agrees with: a ledger bound before the cluster ids' canonical
    # form holds the digests of the ids as read, and the same reading is the same rows
    # (any change of an id is not); new keys bind in that form too.
    digests = _rows_keys(ctx.data.projection_digests)
    if _changed(ctx, digests, function) and ctx.data.cluster is not None:
        read = _rows_keys(ctx.data.read_ids_digests)
        if not _changed(ctx, read, function):
            return read
    return digests


def _rows_keys(projections: Mapping[tuple[str, ...], str]) -> dict[str, str]:
    """Key the rows' projection digests as the ledger binds them ("rows+cluster", ...)."""
    return {ROWS_KEY + "".join("+" + k for k in names): d for names, d in projections.items()}


def _changed(
    ctx: SiteContext, digests: Mapping[str, str], function: str = "the rows check"
) -> bool:
    """Whether a digest of the rows differs from the one bound under its key (if any).

    A bound value is the digest keyed by the ledger's salt (:func:`keyed_digest`), or the
    digest itself in a ledger written before the salt.
    """
    bindings = ctx.ledger.bindings
    for key, digest in digests.items():
        for bound_key in (key, RANGE_ROWS_KEY + key[len(ROWS_KEY) :]):
            if bound_key not in bindings:
                continue
            bound = bindings[bound_key]
            if isinstance(bound, str) and bound.startswith(KEYED_ROWS):
                salt = ctx.ledger.rows_salt(create=False)
                if salt is None:
                    raise _salt_missing(ctx, function)
                if not hmac.compare_digest(bound, keyed_digest(salt, digest)):
                    return True
            elif bound != digest:
                return True
    return False


def rows_changed(ctx: SiteContext) -> bool:
    """Whether the site's rows differ from those its first exact release bound.

    Or those a range check of the DP histograms bound (:data:`RANGE_ROWS_KEY`, R11-1).
    False where nothing bound them yet. Reads the ledger only (and the digests of
    the rows, which say nothing the rows binding's own refusal does not): a DP function
    whose check reads the rows against what the old rows released (a local-DP tree against
    the clear cuts) asks it first, so that its refusal does not depend on the new rows.

    Parameters
    ----------
    ctx : SiteContext
        The site.

    Returns
    -------
    bool
        True when a bound digest of the rows differs from the rows' now.
    """
    with ctx.ledger.transaction():
        return _changed(ctx, _row_digests(ctx))


def bind_rows_read(ctx: SiteContext) -> None:
    """Bind the site's rows as its first exact release does, for a check that read them.

    For a check that answers an exact bit of the rows free of budget before a DP release
    (the histograms' range check, :func:`fedroc.methods.histogram._site.scores_in_range`):
    its answer on these rows composes with an exact release of other rows as two exact
    releases do. DP class counts over [0, 1], answered, said every score lay in [0, 1];
    after one row was added, ``fedroc.is_probability`` said False exactly when the new row
    lay above 1 (review 11, R11-1: 20 of 20). Bound, an exact release of other rows is
    refused before it reads them. Call it holding the ledger's transaction, on rows that
    :func:`rows_changed` finds unchanged (keys bound already keep their values).

    Parameters
    ----------
    ctx : SiteContext
        The site.
    """
    for key, value in _keyed(ctx, _row_digests(ctx)).items():
        ctx.ledger.bind(key, value)


def _check_rows_first(call: Call) -> None:
    """Refuse a call that is exact whatever it replies, before it runs (check_rows)."""
    if _spec(call.function).exact(call.args):
        with call.ctx.ledger.transaction():
            check_rows(call.ctx, call.function)


def _run_binding_refusals(call: Call, next_handler: Handler) -> Reply:
    """Run an exact call; if it refuses of its own, bind the rows it read (as a release would).

    A refusal of an exact function after its rows check (a confusion cell under q, a
    calibration edge beside a local tree's leaf, a score outside [0, 1]) is a bit of the
    rows it read, and it binds what the function holds apart from later requests (the
    calibration's bins, the clustered edges, a confusion threshold asked). Binding nothing
    of the rows, it let the same request run again after a change, and its answer there
    said where the changed row lay: a table refused for q - 1 false negatives, answered
    after a row was added exactly when the row was one (review 10, R10-3: 20 of 20); and a
    local-DP tree checked the new rows against the refused calibration's bins, which
    :func:`rows_changed` took for unchanged rows (20 of 20). Nothing is bound when the rows
    check itself refuses.
    """
    try:
        return next_handler(call)
    except FedrocError:
        if _spec(call.function).rows and _spec(call.function).exact(call.args):
            with call.ctx.ledger.transaction():
                try:
                    values = check_rows(call.ctx, call.function)
                except DisclosureError:
                    values = {}  # another version bound meanwhile: nothing to add
                for key, value in values.items():
                    call.ctx.ledger.bind(key, value)
        raise


def disclosure_mod(call: Call, next_handler: Handler) -> Reply:
    """Check the reply against the policy and charge its DP events to the ledger.

    Arguments declared ``bind`` may not change between releases; the check runs before the
    function and again with the ledger held, so that no concurrent release can spend the
    same budget or bind another value.
    """
    if call.ctx.noise_seed is not None:
        # A seeded site names each release's noise by the releases its ledger holds
        # (SiteContext.noise_rng): held from the draw to the record, so that a second
        # process of the site numbers its draw after this release (Q5: two processes read
        # one number and released one noise at two scales, A2 again).
        with call.ctx.ledger.transaction():
            return _disclose(call, next_handler)
    return _disclose(call, next_handler)


def _disclose(call: Call, next_handler: Handler) -> Reply:
    ctx, function = call.ctx, call.function
    bound = _bound(call)
    _check_rows_first(call)
    _check_bindings(ctx, function, bound)
    reply = _run_binding_refusals(call, next_handler)
    values = check_record(reply.values, f"reply of {function!r}")
    if any(k.startswith("__") for k in values):
        raise InputError(f"reply keys starting with '__' are reserved ({function!r})")
    with ctx.ledger.transaction():
        _check_bindings(ctx, function, bound)
        bind_rows(call, reply)
        ctx.policy.check_release(
            site=ctx.site,
            function=function,
            kind=reply.kind,
            counts=reply.counts,
            dp=reply.dp,
            ledger=ctx.ledger,
            n_rows=ctx.data.n,
        )
        ctx.ledger.record(
            reply.dp,
            function=function,
            source=reply.source,
            limits=(ctx.policy.epsilon_limit, ctx.policy.delta_limit_for(ctx.data.n)),
        )
        for key, value in bound.items():
            ctx.ledger.bind(key, value)
    return replace(reply, values=values)


# What wraps every site function: a direct call (its reply goes to the requester) and an input
# of secure aggregation (its values are masked; the protocol's reply declares its counts and DP
# events, so the disclosure mod of that call checks and charges them).
DIRECT_MODS: tuple[Mod, ...] = (audit_mod, direct_release_mod, schema_mod, disclosure_mod)
AGGREGATE_MODS: tuple[Mod, ...] = (aggregate_release_mod, schema_mod, binding_mod)


def check_noise_seed(seed: Any, name: str = "noise_seed") -> int | None:
    """Return a site's noise seed (None, or an integer >= 0), refusing anything else.

    7.5 or "7" is not a seed the operator wrote: refused by ``name``, not truncated or parsed.
    """
    if seed is None:
        return None
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"{name} must be a non-negative integer; got {seed!r}")
    return int(seed)


def check_score_range(
    name: str, data: SiteData, policy: DisclosurePolicy, source: str | Path | None = None
) -> None:
    """Refuse to start a site whose scores do not all lie in its policy's ``score_range``.

    The operator's check when the site is built (never a reply to an analyst): the site
    answers from the declared range, not from its rows
    (:func:`fedroc.federation.basic.declared_range`), so every score must lie in it.

    Raises
    ------
    InputError
        Naming the site, the file (when given) and the declared range; no value or row.
    """
    declared = policy.score_range
    if declared is None:
        return
    lo, hi = declared
    s = data.score
    if ((s < lo) | (s > hi)).any():
        where = "" if source is None else f" ({str(source)!r})"
        raise InputError(
            f"site {name!r}{where}: some scores lie outside the score_range [{lo:g}, {hi:g}] "
            "its policy declares; declare a range that holds every score, or leave "
            "score_range out"
        )


def grid_range_text(grid: Sequence[Any]) -> str:
    """Write a grid's range as its refusals name it: ``[lo, hi]`` and its transform, if any.

    Parameters
    ----------
    grid : sequence
        The range's ``lo``, ``hi`` and transform (None or a name), first: the
        ``histogram-tree:range`` binding, or :func:`bound_grid`'s answer.

    Returns
    -------
    str
        For example ``[0, 1]``, or ``[-3, 3] (after the logit transform)``.
    """
    lo, hi, transform = grid[:3]
    return f"[{lo:g}, {hi:g}]" + (f" (after the {transform} transform)" if transform else "")


def check_declared_grid(name: str, policy: DisclosurePolicy, ledger: BudgetLedger) -> None:
    """Refuse a declared ``score_range`` other than the grid range the site's ledger bound.

    The grid of exact counts is bound for the ledger's lifetime; a declaration made after
    an analyst's request bound another range cannot replace it (sums over the two grids
    would subtract), so the operator declares the bound range or starts a new ledger.
    """
    declared = policy.score_range
    bound = ledger.bindings.get(keys.HISTOGRAM_RANGE)
    if declared is None or bound is None:
        return
    if [float(bound[0]), float(bound[1]), bound[2]] != [declared[0], declared[1], None]:
        raise InputError(
            f"site {name!r}: its policy declares score_range [{declared[0]:g}, "
            f"{declared[1]:g}], but its ledger bound its one grid of exact counts to "
            f"{grid_range_text(bound)} "
            "before; declare that range (without a transform), or start the site on a new "
            "ledger"
        )


class Site:
    """One site: its rows, its policy, its audit log and its state between calls.

    Parameters
    ----------
    name : str
        The site's name, used in every error and log entry.
    data : SiteData
    policy : DisclosurePolicy, optional
        Defaults to ``DisclosurePolicy()`` (q = 5).
    audit : AuditLog, path or None
        Where released values are logged; None keeps the log in memory.
    ledger : BudgetLedger, path or None
        The site's privacy ledger. By default it lives beside the audit log
        (``north.jsonl`` -> ``north.ledger.jsonl``), so that it survives restarts; a site
        without an audit file keeps it in memory (it then forgets its spending when the
        process ends, which the results of in-process runs say).
    noise_seed : int, optional
        Seed of the site's DP noise, for reproducible simulations and tests only. It is
        part of the site's own configuration; without it the noise comes from OpenDP's
        samplers and the operating system's entropy.
    identity : SiteIdentity, optional
        The site's signing key and its operator's roster of the sites it aggregates with
        (:mod:`fedroc.federation.roster`). A site without one refuses secure aggregation;
        an in-process federation gives its sites one when it is built
        (:meth:`Federation.from_sites`).
    source : str or Path, optional
        The file the rows came from, named when the site refuses to start on scores outside
        its policy's ``score_range`` (:meth:`from_file` gives it).
    """

    def __init__(
        self,
        name: str,
        data: SiteData,
        *,
        policy: DisclosurePolicy | None = None,
        audit: AuditLog | str | Path | None = None,
        ledger: BudgetLedger | str | Path | None = None,
        noise_seed: int | None = None,
        identity: SiteIdentity | None = None,
        source: str | Path | None = None,
    ) -> None:
        if not name or not isinstance(name, str):
            raise InputError(f"a site needs a non-empty name; got {name!r}")
        noise_seed = check_noise_seed(noise_seed)
        self.name = name
        self._data = data
        self.policy = policy or DisclosurePolicy()
        check_score_range(name, data, self.policy, source)
        self.audit = audit if isinstance(audit, AuditLog) else AuditLog(audit)
        if isinstance(ledger, BudgetLedger):
            self.ledger = ledger
        elif ledger is not None:
            self.ledger = BudgetLedger(path=Path(ledger))
        elif self.audit.path is not None:
            self.ledger = BudgetLedger(path=ledger_path_for(self.audit.path))
        else:
            self.ledger = BudgetLedger()
        check_rows_salt(self.ledger, name)
        check_declared_grid(name, self.policy, self.ledger)
        # Noted at start (written only when they changed), so that `fedroc privacy status`
        # shows the site's limits before its first DP release.
        self.ledger.note_limits(
            epsilon_limit=self.policy.epsilon_limit,
            delta_limit=self.policy.delta_limit_for(data.n),
            min_count=self.policy.min_count,
        )
        self.noise_seed = noise_seed
        if identity is not None and identity.name != name:
            raise InputError(f"site {name!r} was given the identity of site {identity.name!r}")
        self.identity = identity
        self.state: dict[str, Record] = {}
        self._lock = threading.Lock()

    @property
    def n_rows(self) -> int:
        """The site's number of rows (public: ``fedroc.info`` releases it)."""
        return int(self._data.n)

    def __repr__(self) -> str:
        """Show the name, the row count and q; never the rows."""
        return f"Site({self.name!r}, n={self._data.n}, min_count={self.policy.min_count})"

    @classmethod
    def from_frame(
        cls,
        name: str,
        frame: Any,
        columns: Columns = Columns(),
        *,
        pos_label: Any = None,
        **kwargs: Any,
    ) -> Site:
        """Build a site from a data frame (see :meth:`fedroc.data.SiteData.from_frame`).

        The remaining keywords (``policy``, ``audit``, ``ledger``, ``noise_seed``,
        ``identity``) go to :class:`Site`.
        """
        data = SiteData.from_frame(frame, columns, pos_label=pos_label, source=f"site {name!r}")
        return cls(name, data, **kwargs)

    @classmethod
    def from_file(
        cls,
        name: str,
        path: str | Path,
        columns: Columns = Columns(),
        *,
        pos_label: Any = None,
        **kwargs: Any,
    ) -> Site:
        """Build a site from a CSV or Parquet file (see :meth:`fedroc.data.SiteData.from_file`).

        The remaining keywords go to :class:`Site`, as in :meth:`from_frame`.
        """
        data = SiteData.from_file(path, columns, pos_label=pos_label, site=name)
        return cls(name, data, source=path, **kwargs)

    def context(self, requester: str = "analyst") -> SiteContext:
        """Return what a site function running here may use (rows, policy, state, ledger)."""
        return SiteContext(
            self.name,
            self._data,
            self.policy,
            self.state,
            requester,
            self.ledger,
            self.noise_seed,
            identity=self.identity,
        )

    def handle(self, function: str, args: Mapping[str, Any], requester: str = "analyst") -> Record:
        """Check a request, run the site function, check its reply, log it, return it.

        The call passes the mods :data:`DIRECT_MODS`: the policy's list of functions, the
        argument schema (before the function runs), the disclosure check (counts, release
        kind, privacy budget, before the reply leaves) and the audit log. One call at a time
        runs at a site.
        """
        with self._lock:
            call = Call(function, args, self.context(requester), self.audit)
            reply = _chain(DIRECT_MODS)(call)
        out = dict(reply.values)
        out[META_KIND] = reply.kind
        out[META_DP] = [e.to_json() for e in reply.dp]
        return out


def split_meta(reply: Record) -> tuple[Record, str, list[DPEvent]]:
    """Separate a site's reply into values, release kind and DP events."""
    values = {k: v for k, v in reply.items() if not k.startswith("__")}
    kind = str(reply.get(META_KIND, "aggregate"))
    events = [DPEvent.from_json(t) for t in reply.get(META_DP, [])]
    return values, kind, events


def site_names_unique(names: Iterable[str]) -> list[str]:
    """Return the names as a list, refusing a name used twice.

    Raises
    ------
    InputError
        Naming the first repeated site name.
    """
    seen: list[str] = []
    for name in names:
        if name in seen:
            raise InputError(f"site name {name!r} is used twice")
        seen.append(name)
    return seen
