"""Site side of paper 5: the hierarchical histograms a site computes, and its noise.

Two site functions, one per way the tree leaves a site:

- ``fedroc.histogram.tree`` (:data:`INPUT_NAME`), an input of secure aggregation only:
  the leaf counts (mode "secure-aggregation") or every level plus the site's *share* of
  distributed DP noise (mode "distributed-dp"), split into the session's threshold.
- ``fedroc.histogram.tree_local`` (:data:`LOCAL_NAME`), released in the clear: every level
  plus a *full* draw of noise (mode "local-dp", the reference code's ``LDP``). Each site's
  tree is then epsilon-DP on its own, whoever sees it; the sum holds one draw per site.

Under DP the tree is preceded by the site's two class counts with noise of their own
(:data:`COUNT_NAME` through secure aggregation, :data:`COUNT_LOCAL_NAME` in the clear),
at the budget of one more level: the analyst decides from them alone whether the tree
can support an AUC, so that the decision reads no noise of the tree (see
:func:`fedroc.methods.histogram.run_histogram`).

Each site binds its 1-D histograms in its ledger before it reads its rows: the score range
and transform of its first request (class counts or tree) and the tree (branching, height)
of its first tree. Later requests may ask for that tree again or for a coarser one over the
same range (every level a union of its leaves), nothing else: trees over shifted ranges or
finer leaves would place pooled rows one by one, and a range check answered on any range
would bisect a site's extreme scores. A tree in the clear (local DP) needs an epsilon of at
least the site's ``histogram_min_epsilon``.

Leaf counting is one function, :func:`count_leaves`, so that the counting core of
:mod:`fedroc.metrics` can take its place.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedroc._docs import fill_doc
from fedroc._validation import FloatArray
from fedroc.data import SiteData
from fedroc.exceptions import DisclosureError, InputError
from fedroc.federation.basic import (
    LOCAL_TREE_KEY,
    apart_from_local_trees,
    bind_exact_counts,
    bind_tree,
    clear_cuts,
)
from fedroc.federation.schema import ArgumentRefused, Choice, Float, Int
from fedroc.federation.site import (
    RANGE_ROWS_KEY,
    Reply,
    SiteContext,
    bind_rows_read,
    rows_changed,
    site_function,
)
from fedroc.metrics import SCORE_TRANSFORMS, leaf_index
from fedroc.privacy import DPEvent, continuous_laplace_shares, discrete_laplace_shares

INPUT_NAME = "fedroc.histogram.tree"
LOCAL_NAME = "fedroc.histogram.tree_local"
COUNT_NAME = "fedroc.histogram.class_counts"
COUNT_LOCAL_NAME = "fedroc.histogram.class_counts_local"
MODE_SA = "secure-aggregation"
MODE_DDP = "distributed-dp"
MODE_LDP = "local-dp"
MODES = (MODE_SA, MODE_DDP, MODE_LDP)
NOISES = ("discrete", "continuous")
MAX_LEAVES = 2**22
TRANSFORMS = SCORE_TRANSFORMS


def check_int(value: Any, name: str, minimum: int) -> int:
    """``value`` as an int >= ``minimum``, or an InputError naming ``name``."""
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def tree_height(quantiles: int, branching: int = 2) -> int:
    """``ceil(log_b Q) + 2``, computed in integers (the reference code's rule).

    Parameters
    ----------
    quantiles : int
        Number of quantiles ``Q`` to estimate, at least 2.
    branching : int, default 2
        Children of each node ``b``, at least 2.

    Returns
    -------
    int
        The number of released levels of the tree.

    Raises
    ------
    InputError
        ``quantiles`` or ``branching`` below 2 or not an integer.
    """
    check_int(quantiles, "quantiles", 2)
    check_int(branching, "branching", 2)
    levels = 0
    while branching**levels < quantiles:
        levels += 1
    return levels + 2


@fill_doc
def levels_from_leaves(leaves: NDArray[Any], branching: int) -> list[NDArray[Any]]:
    """Levels 1..h (``branching ** l`` bins each) from the leaf level by summing siblings.

    Parameters
    ----------
    leaves : ndarray, shape (branching ** h,)
        Counts of the leaf level.
    {branching}

    Returns
    -------
    list of ndarray
        Levels 1 to h, the last being ``leaves``.
    """
    levels = [np.asarray(leaves)]
    while levels[0].size > branching:
        levels.insert(0, levels[0].reshape(-1, branching).sum(axis=1))
    return levels


@fill_doc
def count_leaves(
    label: NDArray[np.bool_], score: FloatArray, n_leaves: int, lo: float, hi: float
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Leaf counts of the positives and of the negatives (one pass, no sort).

    The only place where rows become counts; the trees, the curves and every statistic
    are built from its output.

    Parameters
    ----------
    label : ndarray of bool, shape (n,)
        True for the positives.
    score : ndarray of float, shape (n,)
        Scores inside ``[lo, hi]``.
    {n_leaves}
    {score_range_lo_hi}

    Returns
    -------
    positives, negatives : ndarray of int64, shape (n_leaves,)
        Rows of each class in each leaf.
    """
    k = leaf_index(score, n_leaves, lo, hi)
    np.add(k, n_leaves, out=k, where=label)  # positives in the upper half
    both = np.bincount(k, minlength=2 * n_leaves)
    return both[n_leaves:].astype(np.int64), both[:n_leaves].astype(np.int64)


@fill_doc
def site_leaves(
    data: SiteData, *, n_leaves: int, lo: float, hi: float, transform: str | None, site: str
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Leaf counts of one site's positives and negatives over the public score range.

    Parameters
    ----------
    data : SiteData
        The site's rows.
    {n_leaves}
    {score_range_lo_hi}
    transform : {"logistic", "arctan"} or None
        Public monotone map applied to the scores before binning (for scores on the real
        line); None bins them as they are.
    site : str
        The site's name.

    Returns
    -------
    positives, negatives : ndarray of int64, shape (n_leaves,)
        Rows of each class in each leaf.

    Raises
    ------
    InputError
        A (transformed) score outside ``[lo, hi]``; the message holds no value or row.
    """
    s = data.score if transform is None else TRANSFORMS[transform](data.score)
    outside = (s < lo) | (s > hi)
    if outside.any():
        # No value or row number in the message: it travels to the analyst.
        raise InputError(
            f"scores lie outside the public score range [{lo:g}, {hi:g}]; give a range "
            "that holds every score (--score-range) or a transform (--score-transform)"
        )
    return count_leaves(data.label, s, n_leaves, lo, hi)


#: The ledger key under which the range check bound the rows it first read before R11-1
#: (main d87878d; "+score_b": the joint grid's). It binds the rows themselves now
#: (:func:`~fedroc.federation.site.bind_rows_read`); the rows check still reads this key,
#: for ledgers written then.
BIND_RANGE_ROWS = RANGE_ROWS_KEY


def scores_in_range(
    ctx: SiteContext, lo: float, hi: float, transform: str | None, *, compare: bool = False
) -> list[NDArray[np.float64]]:
    """Return the site's (transformed) scores over the public range, checked on bound rows.

    A score outside ``[lo, hi]`` is refused (the message names no value or row) on the rows
    the check first read, which the ledger binds: that refusal is a bit of those rows, once
    (the range is bound before the rows are read, so it cannot be searched). On rows that
    changed since, the scores are clipped to the range instead. Asked again on the new rows,
    the check said, free of budget and before any noise, whether an added row lay outside
    or a withdrawn one had (review 9, R9-2: 20 of 20). A DP release of clipped scores is
    DP; an exact one is refused before it runs once exact releases bound other rows. A site
    of fewer than ``min_count`` rows clips as well (H17-3): its exact releases are refused
    by the policy, and its refusal told whether a row lay outside.

    "Changed" is against every rows binding of the ledger: the rows any earlier range check
    read (the 1-D one or the joint grid's), and those the site's first exact release read.
    Read for the first time after a change, the check said the same of the new row when an
    exact release (``fedroc.is_probability`` True) or the other check had said every old
    score lay inside (review 10, R10-1 and R10-2: 20 of 20 each).

    The first read binds the rows for the exact releases too
    (:func:`~fedroc.federation.site.bind_rows_read`): the other way round, its answer on the
    old rows and an exact release of the new ones said as much of the new row (review 11,
    R11-1: ``fedroc.is_probability`` after a row was added, 20 of 20).

    Parameters
    ----------
    ctx : SiteContext
        The site.
    lo, hi : float
        The public range of the (transformed) score.
    transform : str or None
        The public map of the scores onto the range, or None.
    compare : bool, default False
        Also the second score (the joint grid's).

    Returns
    -------
    list of ndarray
        The first score's values, and with ``compare`` the second's.

    Raises
    ------
    InputError
        A score outside the range, on the rows the check first read, at a site of at
        least ``min_count`` rows.
    """
    data = ctx.data
    raw = [data.score]
    if compare:
        if data.score_b is None:
            raise InputError(f"site {ctx.site!r} holds one score column (--compare-score)")
        raw.append(data.score_b)
    scores = [
        np.asarray(v if transform is None else TRANSFORMS[transform](v), np.float64) for v in raw
    ]
    # "Changed" against every rows binding: those of the exact releases and of earlier range
    # checks (the 1-D one's and the joint grid's alike), which bind the rows as a first exact
    # release does, every projection of the columns loaded. The answer below is an exact bit
    # of these rows (R11-1).
    with ctx.ledger.transaction():
        changed = rows_changed(ctx)
        if not changed:
            bind_rows_read(ctx)
    # A site under q rows clips too: its refusal, before the noise and the charge, said
    # whether a row of a site that names no count lay outside (review 17, H17-3, as H16-3:
    # a site of one row, whether its score lies in [0, 1], 10 of 10). Its exact releases
    # are refused by the policy after this; its DP releases are of the clipped scores.
    if changed or data.n < ctx.policy.min_count:
        return [np.clip(v, lo, hi) for v in scores]
    for name, v in zip(("first ", "second ") if compare else ("",), scores, strict=False):
        if ((v < lo) | (v > hi)).any():
            # No value or row number in the message: it travels to the analyst.
            raise InputError(
                f"site {ctx.site!r}: {name}scores lie outside the public score range "
                f"[{lo:g}, {hi:g}]; give a range that holds every score (--score-range) or "
                "a transform (--score-transform)"
            )
    return scores


#: The largest epsilon a site takes for one DP release (a level of the tree, the class counts).
MAX_RELEASE_EPSILON = 1e3

_TREE_SCHEMA = {
    "branching": Int(2, 64),
    "height": Int(1, 64),
    "lo": Float(),
    "hi": Float(),
    "transform": Choice(*sorted(TRANSFORMS), default=None),
    "epsilon": Float(0.0, MAX_RELEASE_EPSILON, open_lo=True, default=None),
    "noise": Choice(*NOISES, default="discrete"),
}


def check_leaves(branching: int, height: int) -> None:
    """Refuse a tree of more than :data:`MAX_LEAVES` leaves (before anything is bound)."""
    if branching**height > MAX_LEAVES:
        raise InputError(
            f"branching {branching} and height {height} give {branching**height} leaves; "
            "at most 2^22"
        )


def _leaves_for(ctx: SiteContext, args: dict[str, Any], function: str) -> tuple[int, int, Any, Any]:
    b, h = int(args["branching"]), int(args["height"])
    lo, hi = float(args["lo"]), float(args["hi"])
    check_leaves(b, h)
    if not lo < hi:
        raise InputError(f"the score range must have lo < hi; got [{lo:g}, {hi:g}]")
    bind_tree(ctx, function, lo, hi, args["transform"], (b, h))
    (score,) = scores_in_range(ctx, lo, hi, args["transform"])
    pos, neg = count_leaves(ctx.data.label, score, b**h, lo, hi)
    return b, h, pos, neg


#: How many times its epsilon a count release costs a site's ledger (a row moved: two cells
#: of a level change, see :func:`charged_for_a_moved_row`). The one place of the rule: the
#: sites' charge and the analyst's budget check (``_protocol.check_budget``) both read it.
MOVED_ROW_CHARGE = 2.0


def charged_for_a_moved_row(event: DPEvent) -> DPEvent:
    """Return a count release's event as a row that moves charges it: twice its epsilon.

    The count noise is calibrated to a row added or removed (one cell per level, the
    paper's sensitivity 1). But a site serves its exact n, n_pos and n_neg to any analyst
    (``fedroc.info``, ``fedroc.class_counts``), so the data sets an analyst would tell apart
    have the same counts and differ in where one row is: two cells of a level change (H1,
    attack review 7: the frequency ratio of an event between two such worlds was e^(2
    epsilon), ``scripts/results/histogram_dp_neighbours.md``). The ledger composes every
    release under that neighbouring (ROC-GLM's scores, a score moved, are charged so too),
    so a Laplace release at epsilon is charged 2 epsilon, sensitivity 2: the noise, and
    so every estimate, is the paper's.

    Parameters
    ----------
    event : DPEvent
        A pure (delta 0) Laplace-family release of counts at sensitivity 1.

    Returns
    -------
    DPEvent
        The same noise, with epsilon and sensitivity doubled.
    """
    if event.delta != 0.0:
        raise ValueError(f"a count release here is pure DP; got delta {event.delta!r}")
    return replace(
        event,
        epsilon=MOVED_ROW_CHARGE * event.epsilon,
        sensitivity=MOVED_ROW_CHARGE * event.sensitivity,
        note=f"{event.note}; charged for a row moved (2 cells), its counts public",
    )


def _noisy_levels(
    ctx: SiteContext, args: dict[str, Any], pos: Any, neg: Any, *, n_shares: int, stream: str
) -> tuple[dict[str, Any], tuple[DPEvent, ...]]:
    """Both trees, every level, with Laplace noise.

    Every level of both trees plus noise: a row adds 1 to one bin of one class per level
    (sensitivity 1), each level gets epsilon / h (basic composition).
    """
    if args["epsilon"] is None:
        raise InputError("the DP modes need epsilon")
    b, h = int(args["branching"]), int(args["height"])
    epsilon = float(args["epsilon"])
    rng = ctx.noise_rng(stream)
    shares = discrete_laplace_shares if args["noise"] == "discrete" else continuous_laplace_shares
    noisy_pos: list[NDArray[Any]] = []
    noisy_neg: list[NDArray[Any]] = []
    events: list[DPEvent] = []
    pairs = zip(levels_from_leaves(pos, b), levels_from_leaves(neg, b), strict=True)
    for level, (p, q) in enumerate(pairs, start=1):
        noise, event = shares(2 * p.size, n_shares=n_shares, epsilon=epsilon / h, rng=rng)
        noisy_pos.append(p + noise[: p.size])
        noisy_neg.append(q + noise[p.size :])
        event = replace(event, note=f"histogram level {level} of {h}; {event.note}")
        events.append(charged_for_a_moved_row(event))
    values = {"pos": np.concatenate(noisy_pos), "neg": np.concatenate(noisy_neg)}
    return values, tuple(events)


_COUNT_SCHEMA = {
    "lo": Float(),
    "hi": Float(),
    "transform": Choice(*sorted(TRANSFORMS), default=None),
    "epsilon": Float(0.0, MAX_RELEASE_EPSILON, open_lo=True),
    "noise": Choice(*NOISES, default="discrete"),
}


def _noisy_class_counts(
    ctx: SiteContext, args: dict[str, Any], *, n_shares: int, stream: str, function: str
) -> tuple[dict[str, Any], DPEvent]:
    """Release the site's positive and negative counts plus Laplace noise at ``epsilon``.

    A row adds 1 to one of the two counts (sensitivity 1). The scores are checked against
    the public range as the tree checks them, so that a site that would refuse the tree
    refuses here, before it spends anything.
    """
    lo, hi = float(args["lo"]), float(args["hi"])
    if not lo < hi:
        raise InputError(f"the score range must have lo < hi; got [{lo:g}, {hi:g}]")
    bind_tree(ctx, function, lo, hi, args["transform"])
    scores_in_range(ctx, lo, hi, args["transform"])
    shares = discrete_laplace_shares if args["noise"] == "discrete" else continuous_laplace_shares
    noise, event = shares(
        2, n_shares=n_shares, epsilon=float(args["epsilon"]), rng=ctx.noise_rng(stream)
    )
    event = replace(event, note=f"histogram class counts, before the tree; {event.note}")
    event = charged_for_a_moved_row(event)
    return {"counts": np.array([ctx.data.n_pos, ctx.data.n_neg]) + noise}, event


@site_function(COUNT_NAME, schema=_COUNT_SCHEMA, release="secure", noisy=True)
def _count_input(ctx: SiteContext, args: dict[str, Any]) -> Reply:
    """Noisy class counts as input of secure aggregation (a share of the noise).

    The noise is split into the session's ``noise_shares``, as the tree's.
    """
    values, event = _noisy_class_counts(
        ctx, args, n_shares=ctx.noise_shares, stream=COUNT_NAME, function=COUNT_NAME
    )
    # No class counts declared: the policy's min_count would refuse them when a class holds
    # fewer than q rows, an exact fact about the rows told free of budget (A8-1: around one
    # withdrawn row at a site of q positives, the row's label in 20 of 20). A DP release is
    # protected by its charge, as the local-DP releases are, not by a cell count.
    return Reply(values, dp=(event,))


@site_function(COUNT_LOCAL_NAME, schema=_COUNT_SCHEMA, release="clear", noisy=True)
def _count_local(ctx: SiteContext, args: dict[str, Any]) -> Reply:
    """Noisy class counts in the clear, with a full draw of noise (local DP)."""
    values, event = _noisy_class_counts(
        ctx, args, n_shares=1, stream=COUNT_LOCAL_NAME, function=COUNT_LOCAL_NAME
    )
    return Reply(values, kind="noisy", dp=(event,))


@site_function(
    INPUT_NAME,
    schema={**_TREE_SCHEMA, "mode": Choice(MODE_SA, MODE_DDP)},
    release="secure",
    noisy=lambda args: args["mode"] == MODE_DDP,  # the exact mode is checked before it runs
)
def _tree_input(ctx: SiteContext, args: dict[str, Any]) -> Reply:
    """Count the site's hierarchical histograms (plus its noise share), as input of secagg.

    Released only through secure aggregation. In DP mode the noise is split into the
    session's ``noise_shares`` (its threshold), a number the site takes from the protocol,
    not from the analyst. Without noise (secure aggregation mode) the trees are exact
    binned counts, and with it they are exact in effect at a large epsilon (noise 0 with
    probability 0.9999 at epsilon 10, one level): either way they hold the site to the secure
    way of exact binned counts for its lifetime (:func:`bind_exact_counts`; R33: the pooled
    noisy tree minus the partners' clear bins was a silent site's bins, as R24 with local
    trees).
    """
    bind_exact_counts(ctx, INPUT_NAME, "secure")
    _, _, pos, neg = _leaves_for(ctx, args, INPUT_NAME)
    if args["mode"] == MODE_SA:
        return Reply({"pos": pos, "neg": neg}, counts=ctx.class_counts())
    values, events = _noisy_levels(
        ctx, args, pos, neg, n_shares=ctx.noise_shares, stream=INPUT_NAME
    )
    return Reply(values, dp=events)  # no exact counts on a DP release (A8-1, as above)


@site_function(LOCAL_NAME, schema=_TREE_SCHEMA, release="clear", noisy=True)
def _tree_local(ctx: SiteContext, args: dict[str, Any]) -> Reply:
    """Release the site's noisy hierarchical histograms, each epsilon-DP by itself (local DP).

    A full draw of noise on every node (never a share), so the release protects the rows
    without secure aggregation and without trusting the analyst or any other site. Its
    epsilon is at least the site's ``histogram_min_epsilon``: a release at a negligible
    charge would be an almost free answer about the rows. It binds the site to the clear
    way of exact binned counts (:func:`~fedroc.federation.basic.bind_exact_counts`).
    """
    floor = ctx.policy.histogram_min_epsilon
    if args["epsilon"] is not None and float(args["epsilon"]) < floor:
        raise ArgumentRefused(
            f"site {ctx.site!r} refuses {LOCAL_NAME!r}: argument 'epsilon' is "
            f"{float(args['epsilon']):g}, below the floor of {floor:g} of its policy "
            "(histogram_min_epsilon)",
            site=ctx.site,
            function=LOCAL_NAME,
            argument="epsilon",
        )
    # Noisy, but at a large epsilon its leaves are the exact counts with high probability
    # (0.9999 at epsilon 10, one level): a secure exact tree of the same site and its
    # partners, minus the partners' local trees, was a silent site's bins (R24). So the
    # local tree holds the site to the clear way of exact binned counts, as a clear one.
    bind_exact_counts(ctx, LOCAL_NAME, "clear")
    with ctx.ledger.transaction():  # the cuts as every process of the site bound them
        changed = bool(clear_cuts(ctx).size) and rows_changed(ctx)
    if changed:
        # The check below reads the rows against cuts the old rows released: on the new
        # rows its refusal said whether a withdrawn row was one of q rows of a class beside
        # a cut, free of budget (review 9, R9-1: 20 of 20). So a site whose rows changed
        # refuses the tree while it has clear cuts, before it reads its rows.
        raise DisclosureError(
            f"site {ctx.site!r} refuses {LOCAL_NAME!r}: its rows changed since its first "
            "exact release under its privacy ledger, and a local tree is checked against the "
            "cuts of its clear releases (calibration, confusion tables, clustered "
            "histograms) on its rows. Its operator may start it on a new ledger for the new "
            "rows (a new audit log: a new --audit-dir for fedroc evaluate, a new --dir for "
            "fedroc flower up, a new `audit` path in a node config)",
            site=ctx.site,
            function=LOCAL_NAME,
        )
    b, h, pos, neg = _leaves_for(ctx, args, LOCAL_NAME)
    # Exact in effect, its leaf edges are clear cuts too: one beside a calibration edge,
    # confusion threshold or clustered edge it released subtracted to the rows between
    # (R43). Recorded first, so that a refused tree still holds later cuts apart; under a
    # hold of the ledger, which reloads it, so that the check below reads the cuts another
    # process of the site bound before it, and one that binds later reads this tree (Q3:
    # bound without the hold, a tree and a calibration curve sent at once to two processes
    # were both released, 5 of 40 trials).
    with ctx.ledger.transaction():
        ctx.ledger.bind(LOCAL_TREE_KEY + str(b**h), b**h)
    if not apart_from_local_trees(ctx, clear_cuts(ctx), [b**h]):
        raise DisclosureError(
            f"site {ctx.site!r} refuses {LOCAL_NAME!r} with {b**h} leaves: a calibration "
            "bin edge, confusion threshold or clustered histogram edge it released in the "
            f"clear splits a leaf into parts of fewer than {ctx.policy.min_count} rows of a "
            "class, and a tree exact in effect at a large epsilon would subtract to them "
            "(ask a tree with more leaves, whose edges those cuts lie on or split no leaf's "
            "rows; over [0, 1], the default 4096 leaves hold the default calibration edges)",
            site=ctx.site,
            function=LOCAL_NAME,
        )
    values, events = _noisy_levels(ctx, args, pos, neg, n_shares=1, stream=LOCAL_NAME)
    return Reply(values, kind="noisy", dp=events)
