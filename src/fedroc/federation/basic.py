"""The first federated computations (paper 1, section 4.1).

Distributed mean and variance, Brier score and calibration curve.

Threat model: honest-but-curious analyst. Each site releases sums over at least q rows
(its policy's ``min_count``); the analyst learns the per-site sums and counts, nothing
else. The calibration curve suppresses, at each site, any bin with fewer than q rows; the
analyst computes each bin's fractions only from the sites that released it (the reference
code kept suppressed bins in the denominator, which biased the curve).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedroc._docs import fill_doc
from fedroc._results import ResultMixin, format_table
from fedroc.exceptions import DisclosureError, InputError
from fedroc.federation.federation import Federation
from fedroc.federation.records import Record
from fedroc.federation.schema import ArgumentRefused, Choice, Float, Int
from fedroc.federation.site import (
    Reply,
    SiteContext,
    bind_before_reading,
    binding_refused,
    grid_range_text,
    site_function,
)
from fedroc.metrics import (
    EDGE_GRID_HEIGHT,
    SCORE_TRANSFORM_INVERSES,
    SCORE_TRANSFORMS,
    CalibrationCurve,
    bin_edges,
    bin_index,
    leaf_index,
    on_grid,
)
from fedroc.privacy import keys

__all__ = [
    "DistributedMoments",
    "SiteCalibration",
    "all_probabilities",
    "apart_from_local_trees",
    "bind_declared_range",
    "bind_exact_counts",
    "bind_probability_grid",
    "bind_tree",
    "bound_grid",
    "bound_grid_or_none",
    "check_calibration_bins",
    "check_exact_counts",
    "clear_cuts",
    "declared_range",
    "distributed_brier",
    "distributed_calibration",
    "distributed_mean",
    "distributed_variance",
    "grid_range_text",
    "grid_representatives",
    "in_grid_range",
    "levels_fill_grid",
    "levels_hold_grid",
    "levels_text",
    "local_tree_leaves",
    "probability_sites",
    "site_limits",
    "site_probabilities",
    "site_sizes",
]

_COLUMNS = ("score", "label")
_SUBSETS = ("all", "positive", "negative")
FN_INFO = "fedroc.info"
FN_CLASS_COUNTS = "fedroc.class_counts"
FN_SUM = "fedroc.sum"
FN_CENTERED_SS = "fedroc.centered_ss"
FN_BRIER = "fedroc.brier"
FN_CALIBRATION = "fedroc.calibration"
FN_IS_PROBABILITY = "fedroc.is_probability"
FN_EPSILON_LEFT = "fedroc.epsilon_left"
MAX_CALIBRATION_BINS = 100


def check_calibration_bins(bins: Any) -> int:
    """Refuse, before any call, bins the sites' ``fedroc.calibration`` would refuse.

    Its schema takes 2 to :data:`MAX_CALIBRATION_BINS`; a caller that asks the curve after
    other releases (a method's, the moments job's) checks first, so that the refusal does
    not come after them.

    Parameters
    ----------
    bins : int
        The bins asked for.

    Returns
    -------
    int
        ``bins``.

    Raises
    ------
    InputError
        For anything but an integer from 2 to ``MAX_CALIBRATION_BINS``.
    """
    ok = isinstance(bins, (int, np.integer)) and not isinstance(bins, bool)
    if not ok or not 2 <= bins <= MAX_CALIBRATION_BINS:
        raise InputError(
            f"calibration_bins must be an integer from 2 to {MAX_CALIBRATION_BINS}; got {bins!r}"
        )
    return int(bins)


# Ledger keys. How the site releases exact binned counts (clear or secure: one way per
# lifetime, see bind_exact_counts; the key's name is the one calibration alone bound before,
# so that a site's earlier binding holds), its calibration bins (the argument binding of
# n_bins), and the thresholds of the confusion tables it released in the clear
# (rocglm.confusion, a higher layer, writes them under this prefix).
EXACT_COUNTS_KEY = keys.EXACT_COUNTS
CALIBRATION_BINS_KEY = f"{keys.ARGUMENT}{FN_CALIBRATION}:n_bins"
# In the refusal of the other way, so that a method can tell it from other refusals.
EXACT_COUNTS_ONE_WAY = "it released exact binned counts"
_WAYS = {"clear": "in the clear", "secure": "through secure aggregation"}
CONFUSION_THRESHOLD_KEY = keys.CONFUSION_THRESHOLD
# The inner edges of the clustered histograms a site released in the clear (one per group
# of edges with no row between them; fedroc.methods.clustered writes them).
CLEAR_EDGES_KEY = keys.CLEAR_EDGES
# The site's one grid of exact binned counts released securely: [lo, hi, transform] and
# [branching, height] (see bind_tree; the names are the histogram method's, whose tree bound
# them first, so that a site's earlier bindings hold).
BIND_RANGE = keys.HISTOGRAM_RANGE
BIND_TREE = keys.HISTOGRAM_TREE
# The score levels the site answered a question about, which its exact counts are held to
# (see levels_hold_grid).
SCORE_LEVELS_KEY = keys.SCORE_LEVELS
# The leaf counts of the local-DP trees a site released in the clear (one key per count;
# the histogram method writes them): clear cuts of a sort, exact in effect at a large
# epsilon (R24, R43; see apart_from_local_trees).
LOCAL_TREE_KEY = keys.LOCAL_TREE
_COLUMN_ARGS = {
    "column": Choice(*_COLUMNS, default="score"),
    "subset": Choice(*_SUBSETS, default="all"),
}


def _column_counts(ctx: SiteContext, args: Record, n: int) -> dict[str, object]:
    """Return the counts a sum of ``args``' column and subset declares to the policy.

    Its rows, and the site's class counts when the sum is over one class or of the labels.
    A sum over one class is the sum over all rows minus the sum over the other class, and
    the labels' sum is the positive count: each is a class aggregate, held to q as
    ``fedroc.class_counts`` is. Declared by rows only, a site of one positive (q = 5)
    that refused its class counts gave its positive count (the labels' sum) and that
    positive's exact score (all rows' scores minus the negatives'): review 12, R12-3, 20 of
    20 (tests/test_attacks_review12.py).
    """
    counts: dict[str, object] = {}
    if args["subset"] != "all" or args["column"] == "label":
        # The class counts first: the policy names the first count under q, and a sum over
        # the negatives declared as "rows" (their count) first was refused as "too few
        # rows" exactly when the negatives were under q too, where fedroc.class_counts says
        # only "positive count": at a site of 8 public rows, 4 positives against 1 to 3.
        counts.update(ctx.class_counts())
    counts["rows"] = n
    return counts


def _counts_first(ctx: SiteContext, function: str, args: Record, n: int) -> dict[str, object]:
    """Check the counts a sum declares before it is computed; return them for its reply.

    Its own refusal (an overflowing sum) must not be a fact about rows the policy would not
    release: ``fedroc.centered_ss`` centres on the analyst's ``mean``, and with mean^2 just
    under float64's largest / (k + 1/2) the sum of squares over the positives overflowed
    exactly when they were more than k, said before the policy refused the class counts
    (review 17, H17-1: a count of 1 to 4 positives, 20 of 20 sites).
    """
    counts = _column_counts(ctx, args, n)
    ctx.policy.check_release(site=ctx.site, function=function, kind="aggregate",
                             counts=counts, dp=(), ledger=ctx.ledger,
                             n_rows=ctx.data.n)  # fmt: skip
    return counts


def _values(ctx: SiteContext, args: Record) -> np.ndarray:
    column, subset = args["column"], args["subset"]
    values = ctx.data.score if column == "score" else ctx.data.label.astype(np.float64)
    if subset == "positive":
        return values[ctx.data.label]
    if subset == "negative":
        return values[~ctx.data.label]
    return values


@fill_doc
def site_probabilities(ctx: SiteContext, function: str) -> np.ndarray:
    """Return the site's scores, refusing if any lies outside [0, 1].

    The message travels to the analyst, so it states the cause and no number computed
    from the rows (no count, no value, no index). A site under ``min_count`` rows refuses
    first, in the policy's words, before it reads a score: "outside [0, 1]" was a fact
    about the rows of a site that says nothing else of them (one row's score, at a site of
    one row; review 16, as H16-3).

    Parameters
    ----------
    {ctx}
    function : str
        The site function asking (named in the refusal).

    Returns
    -------
    ndarray of float64, shape (n,)
        The site's scores (read-only), all in [0, 1].

    Raises
    ------
    DisclosureError
        The site holds fewer than ``min_count`` rows, or its operator declared a
        ``score_range`` not inside [0, 1].
    InputError
        A score lies outside [0, 1].
    """
    ctx.policy.check_release(site=ctx.site, function=function, kind="aggregate",
                             counts={"rows": ctx.data.n}, dp=(), ledger=ctx.ledger,
                             n_rows=ctx.data.n)  # fmt: skip
    s = ctx.data.score
    declared = declared_range(ctx)
    if declared is not None:
        # Answered from the public declaration, which the site checked its rows against
        # when it was built: no row is read to say whether they are probabilities.
        if not _inside_unit(declared):
            raise _declared_not_probabilities(ctx, function, declared)
        return s
    if ((s < 0.0) | (s > 1.0)).any():
        raise InputError(
            f"scores of site {ctx.site!r} lie outside [0, 1]; the Brier score and "
            "calibration need probabilities"
        )
    return s


@fill_doc
def declared_range(ctx: SiteContext) -> tuple[float, float] | None:
    """Return the score range the site's operator declared (policy ``score_range``), or None.

    Public: the site checked its rows against it when it was built
    (:func:`fedroc.federation.site.check_score_range`), and answers from it, not from its
    rows, whether its scores are probabilities and lie in an asked range; its one grid of
    exact counts is over it (:func:`bind_declared_range`), whatever range an analyst asks,
    so no answer about where its scores lie binds another grid (the cost of H14-2).

    Parameters
    ----------
    {ctx}

    Returns
    -------
    (float, float) or None
        The declared ``(lo, hi)``, or None when the operator declared none.
    """
    return ctx.policy.score_range


def _inside_unit(declared: tuple[float, float]) -> bool:
    """Whether a declared range lies in [0, 1] (the scores are then probabilities)."""
    return 0.0 <= declared[0] and declared[1] <= 1.0


def _declared_not_probabilities(
    ctx: SiteContext, function: str, declared: tuple[float, float], advice: str = ""
) -> DisclosureError:
    """Build the refusal of a function needing probabilities at a site declared outside [0, 1].

    One refusal for the Brier score, the calibration curve (clear or secure) and every
    function that binds the [0, 1] grid first: the clear curve raised an InputError of
    other words for the same public declaration.
    """
    return DisclosureError(
        f"site {ctx.site!r} refuses {function!r}: its operator declared its scores "
        f"in [{declared[0]:g}, {declared[1]:g}] (score_range in its policy), not "
        "inside [0, 1], and this function needs probabilities" + advice,
        site=ctx.site,
        function=function,
    )


@fill_doc
def bind_declared_range(ctx: SiteContext) -> None:
    """Bind the site's grid range to its declared ``score_range`` if it has one and none is bound.

    Before any grid request is checked, so that the request is held to the declared range
    (refused over another, naming it) and no analyst's range can bind the grid. A site whose
    ledger bound another range before refuses to start
    (:func:`fedroc.federation.site.check_score_range`'s companion check).

    Parameters
    ----------
    {ctx}
    """
    declared = declared_range(ctx)
    if declared is None:
        return
    with ctx.ledger.transaction():
        if BIND_RANGE not in ctx.ledger.bindings:
            ctx.ledger.bind(BIND_RANGE, [declared[0], declared[1], None])


def _grid_origin(ctx: SiteContext) -> str:
    """Say where the site's grid range comes from, for refusals."""
    if declared_range(ctx) is not None:
        return "declared by its operator (score_range in its policy)"
    return (
        "bound by its first histogram, calibration, clustered or ROC-GLM request or score "
        "range question"
    )


# Its number of rows is public (every method reports the sites' sizes, and the DP releases
# take it as known): it does not bind the rows (bind_rows), so that after its rows changed a
# site still says how many it holds, and its DP releases still compose.
@site_function(FN_INFO, schema={}, rows=False)
def _info(ctx: SiteContext, args: Record) -> Reply:
    return Reply({"n": ctx.data.n}, counts={"rows": ctx.data.n})


@site_function(FN_CLASS_COUNTS, schema={}, release="both")
def _class_counts(ctx: SiteContext, args: Record) -> Reply:
    d = ctx.data
    return Reply({"n_pos": d.n_pos, "n_neg": d.n_neg}, counts=ctx.class_counts())


@site_function(FN_SUM, schema=_COLUMN_ARGS)
def _sum(ctx: SiteContext, args: Record) -> Reply:
    v = _values(ctx, args)
    counts = _counts_first(ctx, FN_SUM, args, v.size)
    with np.errstate(over="ignore"):
        total = float(v.sum())
    if not np.isfinite(total):  # as in fedroc.centered_ss
        raise InputError(
            f"site {ctx.site!r}: the sum of its {args['column']!r} column overflows float64; "
            "rescale the column"
        )
    return Reply({"n": v.size, "sum": total}, counts=counts)


@site_function(FN_CENTERED_SS, schema={**_COLUMN_ARGS, "mean": Float()})
def _centered_ss(ctx: SiteContext, args: Record) -> Reply:
    v = _values(ctx, args)
    counts = _counts_first(ctx, FN_CENTERED_SS, args, v.size)
    mean = float(args["mean"])
    with np.errstate(over="ignore", invalid="ignore"):
        ss = float(np.sum((v - mean) ** 2))
    if not np.isfinite(ss):
        # Values over ~1e154 from the mean: the squares overflow float64, and an inf sum
        # would end as a variance of inf (null in JSON) at the analyst. No value in the
        # text: it travels to the analyst.
        raise InputError(
            f"site {ctx.site!r}: the centred sum of squares of its {args['column']!r} column "
            "overflows float64 (values too far from the mean); rescale the column"
        )
    return Reply({"n": v.size, "ss": ss}, counts=counts)


@site_function(FN_BRIER, schema={}, release="both")
def _brier(ctx: SiteContext, args: Record) -> Reply:
    # Answered or refused, it says whether every score lies in [0, 1] (H15-2's statement).
    bind_probability_grid(ctx, FN_BRIER)
    p = site_probabilities(ctx, FN_BRIER)
    sse = float(np.sum((ctx.data.label - p) ** 2))
    # Its sum is n_pos - 2 sum_pos(p) + sum(p^2): with the sum of squares
    # (fedroc.centered_ss), the positives' score sum, a class aggregate (R12-3). Through
    # secure aggregation too: the partners' clear Brier sums are public, and the total
    # minus them was the site's own (H13-1, review 13).
    return Reply({"n": p.size, "sse": sse}, counts={"rows": p.size, **ctx.class_counts()})


# In the clear the number of bins is bound (one value per site lifetime): bins of two
# widths overlap in intervals that can hold fewer than q rows, which subtraction of the
# released sums would isolate despite the per-bin suppression.
@site_function(
    FN_CALIBRATION,
    schema={"n_bins": Int(2, MAX_CALIBRATION_BINS, default=10, bind=True)},
    release="both",
)
def _calibration(ctx: SiteContext, args: Record) -> Reply:
    n_bins = int(args["n_bins"])
    mode = "clear" if ctx.sites is None else "secure"
    bind_exact_counts(ctx, FN_CALIBRATION, mode)
    if mode == "secure":
        # Every row's count and label per bin (R25): bins on the site's one grid of exact
        # counts, as the histogram tree's leaves (R31), the default tree's when none is bound.
        bind_tree(ctx, FN_CALIBRATION, 0.0, 1.0, None, (2, EDGE_GRID_HEIGHT),
                  edges=bin_edges(n_bins), argument="n_bins")  # fmt: skip
    if mode == "clear":
        # The declared binding of n_bins, bound before reading here too: the check against
        # confusion thresholds below may refuse, and a refusal must leave it bound.
        bind_before_reading(
            ctx,
            CALIBRATION_BINS_KEY,
            n_bins,
            lambda first: binding_refused(ctx, FN_CALIBRATION, "n_bins", first, n_bins),
        )
    p = site_probabilities(ctx, FN_CALIBRATION)
    idx = bin_index(p, n_bins)
    count = np.bincount(idx, minlength=n_bins)
    sum_pred = np.bincount(idx, weights=p, minlength=n_bins)
    sum_obs = np.bincount(idx, weights=ctx.data.label.astype(np.float64), minlength=n_bins)
    # Any bin below q rows (empty ones included) is withheld: its count is disclosive too.
    suppressed = withheld_bins(count, ctx.policy.min_count)
    keep = ~suppressed
    kept_predicted = np.where(keep, sum_pred, 0.0)
    if ctx.sites is not None:
        # Inside secure aggregation no site's bins are seen, but their sums are: a pooled
        # bin of one row had that row's score as its mean (R21). So the scores of the bins
        # the site would withhold in the clear stay out of the sum; their rows enter it at
        # the bin's middle, and the bin is flagged ("withheld", the clear curve's
        # suppressed flag: 1 at this site). Their count sent apart was the site's own count
        # in the bin wherever the other sites withheld nothing (H13-2, review 13: 1 to
        # q - 1 rows, 20 of 20). Every row's count and label go in, as in the exact tree's
        # pooled leaves: leaving them out too made the pooled tree minus the curve a site's
        # own withheld bin (R25).
        edges = bin_edges(n_bins)
        middle = (edges[:-1] + edges[1:]) / 2.0
        secure = {
            "count": count.astype(np.int64),
            "sum_predicted": np.where(keep, sum_pred, count * middle),
            "sum_observed": sum_obs,
            "withheld": suppressed.astype(np.int64),
        }
        # Its observed counts add up to the site's positive count, and the partners' class
        # counts are public (fedroc.class_counts): the total minus them was a count under q
        # (H13-1, review 13). Held to q as the secure exact tree holds it.
        return Reply(secure, counts={"rows": p.size, **ctx.class_counts()})
    cuts = np.array(confusion_thresholds(ctx) + clustered_clear_edges(ctx))
    if not apart_from_local_trees(ctx, bin_edges(n_bins)[1:-1]):
        raise DisclosureError(
            f"site {ctx.site!r} refuses {FN_CALIBRATION!r} at {n_bins} bins: a bin edge "
            "splits a leaf of a local-DP histogram tree it released into parts of fewer "
            f"than {ctx.policy.min_count} rows of a class, and the tree, exact in effect at "
            "a large epsilon, would subtract to them (R43)",
            site=ctx.site,
            function=FN_CALIBRATION,
        )
    if not cuts_keep_q_rows(ctx, cuts, n_bins, suppressed):
        raise DisclosureError(
            f"site {ctx.site!r} refuses {FN_CALIBRATION!r} at {n_bins} bins: a confusion "
            "table or clustered histogram it released is cut too close to a bin edge (fewer "
            f"than {ctx.policy.min_count} rows of a class between them), and the two would "
            "subtract to those rows; calibration bins on the same edges pass where no bin "
            "is withheld (e.g. --bins equal to the clustered method's --cluster-bins)",
            site=ctx.site,
            function=FN_CALIBRATION,
        )
    clear = {
        "count": np.where(keep, count, 0).astype(np.int64),
        "sum_predicted": kept_predicted,
        "sum_observed": np.where(keep, sum_obs, 0.0),
        "suppressed": suppressed,
    }
    # Its bins' observed counts add up to the positive count (less only a withheld bin's):
    # a class count, held to q as fedroc.class_counts holds it (R12-3: a site of one
    # positive gave its count and its bin).
    return Reply(clear, counts={"bin": count[keep], **ctx.class_counts()})


@fill_doc
def bind_tree(
    ctx: SiteContext,
    function: str,
    lo: float,
    hi: float,
    transform: Any,
    tree: Any = None,
    *,
    edges: Any = None,
    argument: str = "edges",
) -> None:
    """Hold the site's grid of exact binned counts to its first request, before it reads rows.

    The grid is a range ``[lo, hi]`` of the (transformed) score, bound first, and a tree
    over it, ``tree = (branching, height)``: ``branching ** height`` equal cells. A tree is
    answered if it is the bound one or coarser: its leaves divide the bound tree's, so that
    every bin of it is a union of bound cells. With ``edges`` (the bins of another exact
    partition of the score released securely: the calibration bins, the clustered method's
    histograms), ``tree`` is the grid bound when none is, and the request is answered if
    every edge is a boundary of the bound grid's cells. So every exact count a site sums
    securely, whatever function asks, is a sum of one grid's cells: two partitions apart
    from each other subtracted to the rows between two nearby edges, finer than a cell (R30
    for the joint grid; R31 the calibration bins, R32 the clustered edges).

    A site held to score levels (:func:`levels_hold_grid`) refuses first when a cell of its
    bound grid holds none of them.

    ``tree`` None binds the range only (the class counts: one bin). A request that passes
    the range check repeats the range of any bound tree. A first tree whose leaves divide
    the default grid's (``2 ** EDGE_GRID_HEIGHT``) binds the default grid, which it is
    coarser than and which the site would answer first: so a first histogram of 2048
    leaves leaves the default calibration and clustered edges answered (U2).

    Parameters
    ----------
    {ctx, refused_function}
    lo, hi : float
        The range of the (transformed) score.
    transform : str or None
        The public map of the score onto the range (the histogram method's), or None.
    tree : (int, int), optional
        ``(branching, height)``.
    edges : array-like of float, optional
        The edges of a partition to hold to the grid (``tree`` is then the default grid).
    argument : str, default "edges"
        The argument the edges come from, for the refusal.

    Raises
    ------
    ArgumentRefused
        Another range, a finer tree, or edges off the bound grid.
    DisclosureError
        The site is held to score levels that a cell of its bound grid holds none of.
    """
    # A site held to score levels answers no grid whose cells could tell them from other
    # values (H15-1): checked on its bound grid, before anything else is bound.
    levels_hold_grid(ctx, function)
    # A declared range is the grid's, whatever the request's (its own refusal names it).
    bind_declared_range(ctx)
    scale = [lo, hi, transform]
    e = None if edges is None else np.asarray(edges, dtype=np.float64)

    def on_the_grid(grid: Any) -> bool:
        assert e is not None
        return on_grid(e, lo, hi, int(grid[0]) ** int(grid[1]))

    def refusal(grid: Any) -> ArgumentRefused:
        return _edges_refused(ctx, function, grid, argument)

    # Unbound, the edges bind the default grid, which must hold them: checked before the
    # range is bound, so that a refused request binds nothing (U1). (Bindings stay: if the
    # key is bound now, it is when bind_before_reading checks the edges against it.)
    if e is not None and tree is not None and BIND_TREE not in ctx.ledger.bindings:
        if not on_the_grid(tree):
            raise refusal(tree)
    bind_before_reading(
        ctx, BIND_RANGE, scale, lambda first: _range_refused(ctx, function, scale, first)
    )
    if tree is None:
        return
    b, h = int(tree[0]), int(tree[1])
    if e is None:
        # A tree whose leaves divide the default grid's binds the default grid, which it is
        # coarser than: the default calibration and clustered edges lie on that grid, and
        # a first tree of 2048 leaves (512 quantiles) left them refused for good (U2).
        grid = [b, h]
        if (2**EDGE_GRID_HEIGHT) % (b**h) == 0:
            grid = [2, EDGE_GRID_HEIGHT]
        bind_before_reading(
            ctx,
            BIND_TREE,
            grid,
            lambda first: _tree_refused(ctx, function, (b, h), first),
            accepts=lambda first: (int(first[0]) ** int(first[1])) % (b**h) == 0,
        )
        return
    bind_before_reading(ctx, BIND_TREE, [b, h], refusal, accepts=on_the_grid)


def _on_scale(scores: np.ndarray, transform: str | None) -> np.ndarray:
    """Put the scores on the scale a grid's range is given in (after its public transform)."""
    t = np.asarray(scores, np.float64)
    return t if transform is None else SCORE_TRANSFORMS[transform](t)


@fill_doc
def bound_grid(ctx: SiteContext, lo: float, hi: float) -> tuple[float, float, Any, int]:
    """Return the site's one grid of exact counts, binding the default over [lo, hi] if none.

    The grid is the range, transform and tree a first histogram, calibration curve or
    clustered request bound (:func:`bind_tree`); a site that bound none binds here the
    default grid (``2 ** EDGE_GRID_HEIGHT`` equal cells) of ``[lo, hi]`` without a
    transform. Nothing is refused: a computation that can round its rows to any grid takes
    the one that is bound. Bound before the site reads its rows.

    Parameters
    ----------
    {ctx}
    lo, hi : float
        The range to bind when the site bound none.

    Returns
    -------
    lo, hi : float
        The bound range (of the transformed score).
    transform : str or None
        The bound transform.
    cells : int
        The bound tree's leaves.
    """
    with ctx.ledger.transaction():
        bind_declared_range(ctx)  # a declared range, not [lo, hi]
        if BIND_RANGE not in ctx.ledger.bindings:
            ctx.ledger.bind(BIND_RANGE, [float(lo), float(hi), None])
        if BIND_TREE not in ctx.ledger.bindings:
            ctx.ledger.bind(BIND_TREE, [2, EDGE_GRID_HEIGHT])
        glo, ghi, transform = ctx.ledger.bindings[BIND_RANGE]
        b, h = (int(v) for v in ctx.ledger.bindings[BIND_TREE])
    return float(glo), float(ghi), transform, b**h


@fill_doc
def range_holds_grid(ctx: SiteContext, function: str, lo: float, hi: float) -> bool:
    """Refuse a public range that does not hold the site's grid; tell whether one is bound.

    For a clear answer about where the site's scores lie (``rocglm.scale``'s ``in_range``,
    the ROC-GLM setup's check of its range): "no score outside [lo, hi]" is a count of 0
    outside, and inside the range of the grid whose cells the site sums securely it said
    that the site adds nothing to the pooled cells there. Asked of the partners over [0,
    0.9], the secure calibration curve's bin [0.9, 1] was a victim's rows alone, their count
    under q and their positives (H14-2, review 14: 20 of 20). A range that holds the grid's
    says nothing of its cells. A site with no grid yet answers over any range; the caller
    binds the default grid over it (:func:`bound_grid`) before it reads its rows, whatever
    the answer: an answer "outside", unbound, said that a pooled lone row above the range
    was the site's (H14-2 the other way, 20 of 20), so a mistyped range binds the grid too.
    Call it holding the ledger's transaction, until that binding.

    Parameters
    ----------
    {ctx, refused_function}
    lo, hi : float
        The range asked about, on the scores' own scale.

    Returns
    -------
    bool
        Whether the site's grid is bound (then ``[lo, hi]`` holds it).

    Raises
    ------
    ArgumentRefused
        ``lo >= hi``, or the range leaves out part of the bound grid's range (after its
        transform).
    """
    if not lo < hi:
        raise ArgumentRefused(
            f"site {ctx.site!r} refuses {function!r}: argument 'score_range' needs lo < hi; "
            f"got [{lo:g}, {hi:g}]",
            site=ctx.site,
            function=function,
            argument="score_range",
        )
    bind_declared_range(ctx)  # a declared range is the grid's: asked ranges are held to it
    if BIND_RANGE not in ctx.ledger.bindings:
        return False
    glo, ghi, transform = ctx.ledger.bindings[BIND_RANGE]
    t = _on_scale(np.array([lo, hi], np.float64), transform)
    if not (t[0] <= glo and t[1] >= ghi):
        raise ArgumentRefused(
            f"site {ctx.site!r} refuses {function!r}: argument 'score_range' [{lo:g}, {hi:g}] "
            f"does not hold the range {grid_range_text([glo, ghi, transform])} of its one grid "
            f"of exact counts, {_grid_origin(ctx)}; whether its scores lie in a narrower range "
            "would say which of that grid's cells it adds no row to. Give a range that holds it "
            "(score_range=, --score-range on the command line)",
            site=ctx.site,
            function=function,
            argument="score_range",
        )
    return True


def in_grid_range(scores: np.ndarray, grid: tuple[float, float, Any, int]) -> bool:
    """Tell whether every score lies in the range of ``grid`` (after its transform).

    Parameters
    ----------
    scores : ndarray of float
        The site's scores.
    grid : (float, float, str or None, int)
        ``(lo, hi, transform, cells)`` from :func:`bound_grid`.

    Returns
    -------
    bool
        False when a (transformed) score lies outside ``[lo, hi]``.
    """
    lo, hi, transform = grid[0], grid[1], grid[2]
    t = _on_scale(scores, transform)
    return bool(((t >= lo) & (t <= hi)).all())


def levels_fill_grid(levels: np.ndarray, grid: tuple[float, float, Any, int]) -> bool:
    """Tell whether every cell of ``grid`` holds at least one of ``levels``.

    Parameters
    ----------
    levels : ndarray of float
        Score levels, on the scores' own scale.
    grid : (float, float, str or None, int)
        ``(lo, hi, transform, cells)``, as :func:`bound_grid` returns it.

    Returns
    -------
    bool
        False when some cell (as :func:`~fedroc.metrics.leaf_index` assigns scores to
        cells, after the grid's transform) holds no level.
    """
    lo, hi, transform, cells = grid
    lv = np.asarray(levels, np.float64).reshape(-1)
    if cells > lv.size:
        return False
    t = _on_scale(lv, transform)
    t = t[(t >= lo) & (t <= hi)]
    return bool(np.unique(leaf_index(t, int(cells), float(lo), float(hi))).size == cells)


@fill_doc
def bound_grid_or_none(ctx: SiteContext) -> tuple[float, float, Any, int] | None:
    """Return the site's bound grid, or None if none is bound; binds nothing.

    Parameters
    ----------
    {ctx}

    Returns
    -------
    (float, float, str or None, int) or None
        ``(lo, hi, transform, cells)`` as :func:`bound_grid` returns it (one cell when only
        the range is bound).
    """
    if BIND_RANGE not in ctx.ledger.bindings:
        return None
    lo, hi, transform = ctx.ledger.bindings[BIND_RANGE]
    tree = ctx.ledger.bindings.get(BIND_TREE)
    cells = 1 if tree is None else int(tree[0]) ** int(tree[1])
    return float(lo), float(hi), transform, cells


@fill_doc
def levels_hold_grid(ctx: SiteContext, function: str, *, on_levels: Any = None) -> None:
    """Refuse exact counts on a grid whose cells could tell the site's levels from others.

    A site that answered whether its scores all lie on a set of levels (``rocglm.scale``'s
    ``on_levels``, the ROC-GLM setup's check) said, if yes, that it adds no row to a cell
    that holds none of them, and if no, that it holds a row off them. Asked of two partners
    with levels 0..0.8, the secure exact tree over [0, 1] then had in its cells above 0.85
    the victim's rows at 0.9 alone, their count under q and their classes (H15-1, review
    15: 20 of 20). So a site bound to levels (:data:`SCORE_LEVELS_KEY`, one set for its
    lifetime, bound with its grid) sums exact counts only on a grid every cell of which
    holds one of them: every count it releases is then a union of cells each of which may
    hold rows of any site, on its level. Checked on the bound grid, the finest the site
    releases: a check of each request's own cells would let two coarser partitions differ
    by a cell without a level. Nothing here reads the rows.

    The one exception, ``on_levels``: a computation that itself refuses unless every one
    of the site's scores lies on those levels, and whose partners in a sum do the same (the
    ROC-GLM's grid tables on declared levels, whose setup digest holds the levels): a cell
    without a level is then empty at every site that takes part.

    Parameters
    ----------
    {ctx, refused_function}
    on_levels : array-like of float, optional
        The levels the caller checks every score against.

    Raises
    ------
    DisclosureError
        The site is bound to levels and a cell of its bound grid holds none of them.
    """
    bound = ctx.ledger.bindings.get(SCORE_LEVELS_KEY)
    if bound is None:
        return
    levels = np.asarray(bound, np.float64)
    if on_levels is not None and np.array_equal(np.asarray(on_levels, np.float64), levels):
        return
    grid = bound_grid_or_none(ctx)
    if grid is None or levels_fill_grid(levels, grid):
        return
    raise DisclosureError(
        f"site {ctx.site!r} refuses {function!r}: it answered whether its scores lie on the "
        f"score levels {levels_text(levels)}, and some cells of its one grid of exact counts "
        f"({grid[3]} cells over {grid_range_text(grid)}) hold none of them: their pooled "
        "counts would be the rows off those levels of the sites that took part (H15-1). On "
        "that grid it sums exact counts only in a ROC-GLM on those levels (--score-levels); "
        "for other requests its operator may start it on a new ledger",
        site=ctx.site,
        function=function,
    )


def levels_text(levels: Any) -> str:
    """Write score levels as refusals name them: the first six, and how many.

    Parameters
    ----------
    levels : array-like of float
        The levels.

    Returns
    -------
    str
        For example ``[0, 0.1, 0.2] (3 levels)``.
    """
    lv = np.asarray(levels, np.float64).reshape(-1)
    shown = ", ".join(f"{v:g}" for v in lv[:6])
    return f"[{shown}{', ...' if lv.size > 6 else ''}] ({lv.size} levels)"


def grid_representatives(
    scores: np.ndarray,
    grid: tuple[float, float, Any, int],
    levels: np.ndarray | None = None,
) -> np.ndarray:
    """Replace each score by one value per cell of ``grid`` (from :func:`bound_grid`).

    An exact computation on the representatives depends on the rows only through their
    counts per cell, whatever cutoffs or functions of the scores it applies afterwards: so
    it tells nothing finer than the site's one grid (R31), however often it is asked. The
    representative of a cell is its midpoint (mapped back through the grid's transform);
    with ``levels`` (scores on a public scale, each on a level) it is the lowest level in
    the cell, so that the scores stay on their levels (one level per cell: unchanged).
    Scores outside the grid's range go to its end cells.

    Parameters
    ----------
    scores : ndarray of float
        The site's scores.
    grid : (float, float, str or None, int)
        ``(lo, hi, transform, cells)``.
    levels : ndarray of float, optional
        Sorted distinct levels that every score is one of.

    Returns
    -------
    ndarray of float64
        One value per cell, for each score.
    """
    lo, hi, transform, cells = grid

    def cell(values: np.ndarray) -> np.ndarray:
        t = _on_scale(values, transform)
        return leaf_index(np.clip(t, lo, hi), cells, lo, hi)

    j = cell(scores)
    if levels is not None:
        lv = np.asarray(levels, np.float64)
        first = np.searchsorted(cell(lv), j, side="left")  # levels sorted: cells ascending
        return lv[np.minimum(first, lv.size - 1)]
    mid = lo + (hi - lo) * ((j + 0.5) / cells)
    return mid if transform is None else SCORE_TRANSFORM_INVERSES[transform](mid)


def _range_refused(
    ctx: SiteContext, function: str, scale: list[Any], first: Any
) -> ArgumentRefused:
    lo, hi, transform = first
    ask = f"Ask over that range (--score-range={_cli_number(lo)},{_cli_number(hi)}" + (
        f" --score-transform {transform})" if transform else ", no --score-transform)"
    )
    if declared_range(ctx) is not None:
        return ArgumentRefused(
            f"site {ctx.site!r} refuses {function!r}: its operator declared its score range "
            f"{grid_range_text(first)} (score_range in its policy), the range of its one grid "
            f"of exact counts, which does not change (got {scale}). {ask}",
            site=ctx.site,
            function=function,
            argument="lo",
        )
    return ArgumentRefused(
        f"site {ctx.site!r} refuses {function!r}: the score range and transform of its "
        f"histograms were bound to {grid_range_text(first)} by its first request "
        f"and may not change (got {scale}); histograms over two ranges could be "
        "subtracted, and a range check answered on any range bisects the extreme scores. "
        f"{ask}"
        ". A request or an answer about its scores over a mistyped range binds it too: if "
        "its scores do not all lie in that range, it takes part in no exact counts on a grid "
        "under this ledger, and its operator may start it on a new ledger (declaring "
        "score_range in its policy, so that no question binds another range again)",
        site=ctx.site,
        function=function,
        argument="lo",
    )


def _cli_number(value: float) -> str:
    """Write a bound number as the CLI reads it back, exactly: ``0`` for 0.0, not 6 digits (U3)."""
    short = f"{float(value):g}"
    return short if float(short) == float(value) else repr(float(value))


def _answered(leaves: int, branching: int) -> str:
    """Say what a site bound to ``leaves`` leaves answers at ``branching``, in the CLI's terms."""
    height = 0
    while leaves % branching ** (height + 1) == 0:
        height += 1
    if height == 0:
        return f"it answers no tree of branching {branching}"
    # The histogram method's height is ceil(log_b Q) + 2 (tree_height).
    most = branching ** max(height - 2, 0)
    quantiles = f"--quantiles {most} or fewer" if height > 2 else "no --quantiles"
    return (
        f"at branching {branching} it answers height {height} or less: {quantiles}, "
        f"or --height {height} or less"
    )


def _tree_refused(
    ctx: SiteContext, function: str, tree: tuple[int, int], first: Any
) -> ArgumentRefused:
    b0, h0 = (int(v) for v in first)
    hint = _answered(b0**h0, int(tree[0]))
    if int(tree[0]) != b0:
        hint += f"; {_answered(b0**h0, b0)}"
    return ArgumentRefused(
        f"site {ctx.site!r} refuses {function!r}: its tree was bound to branching {b0}, "
        f"height {h0} ({b0**h0} leaves, its one grid of exact binned counts) by its first "
        "request (a histogram tree, which binds at least the default grid of 4096 leaves; a "
        "calibration curve or clustered histograms bind that grid too); it answers that "
        "tree or a coarser one whose leaves are unions of its "
        f"leaves (got branching {tree[0]}, height {tree[1]}), as finer trees would place "
        f"pooled rows one by one. {hint[0].upper()}{hint[1:]}",
        site=ctx.site,
        function=function,
        argument="height",
    )


def _edges_refused(ctx: SiteContext, function: str, grid: Any, argument: str) -> ArgumentRefused:
    b0, h0 = (int(v) for v in grid)
    return ArgumentRefused(
        f"site {ctx.site!r} refuses {function!r}: its exact binned counts are held to one "
        f"grid of {b0**h0} equal cells over its score range (a tree of branching {b0}, "
        f"height {h0}, bound by its first request), and the bin edges of {argument!r} are "
        "not all cell boundaries; counts over two sets of edges subtract to the rows "
        "between two nearby edges, finer than a cell",
        site=ctx.site,
        function=function,
        argument=argument,
    )


@fill_doc
def bind_exact_counts(ctx: SiteContext, function: str, way: str) -> None:
    """Hold the site to one way, clear or secure, for all its exact binned counts.

    Exact counts of rows per score bin (calibration bins, confusion tables, the clustered
    histograms, the histogram method's exact trees and joint counts) leave a site either
    in the clear, each bin under q rows withheld, or through secure aggregation, never
    both: a secure total minus the sites' clear bins is the bins they withheld, and minus
    the *other* sites' clear bins it is a site's own bins, a lone row included, though that
    site released nothing in the clear. Bound in the ledger before the site reads its rows,
    for its lifetime. Other noisy (DP) releases do not bind, but for the histogram trees,
    exact in effect at a large epsilon: the local-DP tree binds the clear way (R24), the
    distributed-DP tree and joint grid the secure way (R33).

    Parameters
    ----------
    {ctx, refused_function}
    way : {"clear", "secure"}
        How this request releases its counts.

    Raises
    ------
    DisclosureError
        The site released exact binned counts the other way before; the text holds
        :data:`EXACT_COUNTS_ONE_WAY`.
    """
    bind_before_reading(
        ctx, EXACT_COUNTS_KEY, way, lambda first: _one_way_refused(ctx, function, way, first)
    )


@fill_doc
def check_exact_counts(ctx: SiteContext, function: str, way: str) -> None:
    """Refuse, as :func:`bind_exact_counts` would, without binding anything.

    For a question asked before a release (``fedroc.secagg.check``): would the site still
    release exact binned counts ``way``?

    Parameters
    ----------
    {ctx}
    function : str
        The function whose release is asked about, for the refusal.
    way : {"clear", "secure"}
        How that request would release its counts.

    Raises
    ------
    DisclosureError
        The site released exact binned counts the other way before.
    """
    first = ctx.ledger.bindings.get(EXACT_COUNTS_KEY)
    if first is not None and first != way:
        raise _one_way_refused(ctx, function, way, first)


def _one_way_refused(ctx: SiteContext, function: str, way: str, first: object) -> DisclosureError:
    # A local-DP tree binds the clear way too (R24): say so, or its analyst cannot tell why.
    local = " (or a local-DP histogram tree, exact in effect at a large epsilon)"
    return DisclosureError(
        f"site {ctx.site!r} refuses {function!r} {_WAYS[way]}: {EXACT_COUNTS_ONE_WAY} "
        f"{_WAYS.get(str(first), str(first))}{local if first == 'clear' else ''} before, and "
        "a secure total minus clear bins of "
        "the same rows would be the rows a site withheld or holds alone (a site answers "
        "calibration, confusion tables and exact histograms one way for its lifetime)",
        site=ctx.site,
        function=function,
    )


def withheld_bins(count: np.ndarray, q: int) -> np.ndarray:
    """Return the bins a site withholds from a clear calibration curve.

    Every bin under ``q`` rows; and, when those hold 1 to q - 1 rows together, the smallest
    other bin too (secondary suppression). The site's row count and sums leave it anyway
    (``fedroc.info``, ``fedroc.sum``), so the withheld bins together are known by
    subtraction: they must hold no row or at least q rows.
    """
    suppressed = count < q
    rows = int(count[suppressed].sum())
    if 0 < rows < q and not suppressed.all():
        released = np.flatnonzero(~suppressed)
        suppressed[released[np.argmin(count[released])]] = True
    return suppressed


def confusion_thresholds(ctx: SiteContext) -> list[float]:
    """Return the thresholds of the confusion tables the site released in the clear."""
    return sorted(
        float(v) for k, v in ctx.ledger.bindings.items() if k.startswith(CONFUSION_THRESHOLD_KEY)
    )


def clear_calibration_bins(ctx: SiteContext) -> int | None:
    """Return the bins of the site's clear calibration curve, or None if it released none."""
    if CALIBRATION_BINS_KEY not in ctx.ledger.bindings:
        return None
    if ctx.ledger.bindings.get(EXACT_COUNTS_KEY) == "secure":
        return None
    return int(ctx.ledger.bindings[CALIBRATION_BINS_KEY])


def clustered_clear_edges(ctx: SiteContext) -> list[float]:
    """Return the inner edges of the clustered histograms the site released in the clear."""
    bound = ctx.ledger.bindings.get(CLEAR_EDGES_KEY, [])
    return [float(v) for v in ctx.ledger.unseal(CLEAR_EDGES_KEY, bound)]


@fill_doc
def clear_cuts(ctx: SiteContext) -> np.ndarray:
    """Return every cut of the site's clear exact counts: bin edges and thresholds.

    Parameters
    ----------
    {ctx}

    Returns
    -------
    ndarray of float64
        The inner edges of its clear calibration bins, the thresholds of its clear
        confusion tables and the inner edges of its clear clustered histograms.
    """
    n_bins = clear_calibration_bins(ctx)
    calibration = [] if n_bins is None else bin_edges(n_bins)[1:-1].tolist()
    cuts = calibration + confusion_thresholds(ctx) + clustered_clear_edges(ctx)
    return np.asarray(cuts, dtype=np.float64)


@fill_doc
def local_tree_leaves(ctx: SiteContext) -> list[int]:
    """Return the leaf counts of the local-DP trees the site released.

    Parameters
    ----------
    {ctx}

    Returns
    -------
    list of int
        One per tree shape, increasing; empty if it released none.
    """
    return sorted(int(v) for k, v in ctx.ledger.bindings.items() if k.startswith(LOCAL_TREE_KEY))


@fill_doc
def apart_from_local_trees(
    ctx: SiteContext, cuts: np.ndarray, leaves: list[int] | None = None
) -> bool:
    """Tell whether clear cuts split no leaf of the site's local-DP trees into a sliver.

    A local tree is noisy, but exact in effect at a large epsilon (noise 0 with
    probability 0.9999 at epsilon 10, one level: R24). A clear cut ``c`` inside one of its
    leaves ``[e_k, e_(k+1))`` (a calibration edge, a confusion threshold, a clustered
    edge) then subtracts from the leaves below to the rows in ``[e_k, c)``: 16 leaves and
    15 calibration bins gave a site's lone row and its class, in either order (R43). So a
    leaf the cut splits (rows of it on both sides) must hold at least q rows of each class
    on each side. A cut that splits no leaf's rows cuts them as a leaf edge does, finer
    levels than the tree's leaves being no sliver the tree itself does not give.

    Parameters
    ----------
    {ctx}
    cuts : ndarray of float
        Cuts of the score (``score < c`` below) released in the clear, or asked to be.
    leaves : list of int, optional
        The leaf counts of the trees to check against; by default every local tree the
        site released (:func:`local_tree_leaves`). Their range and transform are the
        site's bound ones.

    Returns
    -------
    bool
        False when a cut splits a leaf into parts under q rows of a class.
    """
    leaves = local_tree_leaves(ctx) if leaves is None else leaves
    c = np.asarray(cuts, dtype=np.float64).reshape(-1)
    if not leaves or c.size == 0 or BIND_RANGE not in ctx.ledger.bindings:
        return True
    lo, hi, transform = ctx.ledger.bindings[BIND_RANGE]
    d = ctx.data
    order = np.argsort(d.score, kind="stable")
    score = d.score[order]
    t = _on_scale(score, transform)
    # Per class, how many rows of the sorted scores up to each position.
    cum = [np.r_[0, np.cumsum(d.label[order])], np.r_[0, np.cumsum(~d.label[order])]]
    at = np.searchsorted(score, c, side="left")  # rows below each cut
    q = ctx.policy.min_count
    for n_leaves in leaves:
        leaf = leaf_index(np.clip(t, lo, hi), int(n_leaves), float(lo), float(hi))
        for i in at[(at > 0) & (at < score.size)]:
            split = leaf[i - 1]
            if leaf[i] != split:
                continue  # the cut falls between two leaves' rows
            start = np.searchsorted(leaf, split, side="left")
            stop = np.searchsorted(leaf, split, side="right")
            for k in cum:
                if min(k[i] - k[start], k[stop] - k[i]) < q:
                    return False
    return True


def _below(ctx: SiteContext, values: np.ndarray) -> list[np.ndarray]:
    """Per class (positives, negatives): how many of the site's scores lie below each value."""
    d = ctx.data
    return [np.searchsorted(np.sort(d.score[c]), values, "left") for c in (d.label, ~d.label)]


def cuts_keep_q_rows(
    ctx: SiteContext, thresholds: np.ndarray, n_bins: int, withheld: np.ndarray
) -> bool:
    """Tell whether clear cuts at ``thresholds`` and the clear calibration bins are apart.

    Apart: they subtract to no fewer than q rows of each class. A confusion table or a
    clustered histogram cut at t, minus the calibration bins above an inner edge e, is the
    rows between t and e; so there must be at least q rows of each class between every
    threshold and every inner edge. A threshold on an edge is allowed only if the withheld
    bins hold no row: it would split their total otherwise.
    """
    t = np.asarray(thresholds, dtype=np.float64).reshape(-1)
    edges = bin_edges(n_bins)[1:-1]
    on_edge = np.isin(t, edges)
    if on_edge.any():
        idx = bin_index(ctx.data.score, n_bins)
        if np.isin(idx, np.flatnonzero(withheld)).any():
            return False
    return cuts_apart(ctx, t[~on_edge], edges, allow_equal=False)


@fill_doc
def apart_from_clear_calibration(ctx: SiteContext, cuts: np.ndarray) -> bool:
    """Tell whether clear cuts are apart from the site's clear calibration bins.

    Parameters
    ----------
    {ctx}
    cuts : ndarray of float
        Thresholds or inner edges the site is asked to release in the clear.

    Returns
    -------
    bool
        True when the site released no clear calibration curve, else
        :func:`cuts_keep_q_rows` against its bins and the bins it withheld.
    """
    n_bins = clear_calibration_bins(ctx)
    if n_bins is None:
        return True
    count = np.bincount(bin_index(ctx.data.score, n_bins), minlength=n_bins)
    return cuts_keep_q_rows(ctx, cuts, n_bins, withheld_bins(count, ctx.policy.min_count))


def cuts_apart(
    ctx: SiteContext, cuts: np.ndarray, others: np.ndarray, *, allow_equal: bool = True
) -> bool:
    """Tell whether every cut and every other cut hold q rows of each class between them.

    Cuts at the same value are no sliver (``allow_equal``).
    """
    a = np.asarray(cuts, dtype=np.float64).reshape(-1)
    b = np.asarray(others, dtype=np.float64).reshape(-1)
    if a.size == 0 or b.size == 0:
        return True
    care = (a[:, None] != b[None, :]) if allow_equal else np.ones((a.size, b.size), bool)
    q = ctx.policy.min_count
    for below in _below(ctx, np.concatenate([a, b])):  # one sort of each class's scores
        between = np.abs(below[: a.size, None] - below[None, a.size :])
        if (between[care] < q).any():
            return False
    return True


@dataclass(frozen=True, repr=False)
class DistributedMoments(ResultMixin):
    """Mean and sample variance (ddof 1) pooled over the sites (distrAVG / distrVAR).

    Attributes
    ----------
    mean : float
        The mean over all sites' rows.
    variance : float
        The sample variance (ddof 1) about that mean; NaN for fewer than two rows.
    n : int
        Rows over all sites.
    """

    mean: float
    variance: float
    n: int

    def summary(self) -> str:
        """Format n, mean and variance as a table."""
        return format_table(
            [("n", self.n), ("mean", self.mean), ("variance", self.variance)],
            title="Distributed moments",
        )


@fill_doc
def site_sizes(federation: Federation) -> dict[str, int]:
    """Ask every site for its number of rows.

    Parameters
    ----------
    {federation}

    Returns
    -------
    dict of str to int
        Rows of each site, by name.

    Raises
    ------
    {site_failure}
    """
    return {name: int(r["n"]) for name, r in federation.call(FN_INFO).items()}


# What the site's epsilon limit leaves: what a budget refusal tells (the limit and the
# spend), about no row, so that a run of several DP releases in the clear (the histogram's
# local DP: class counts, then the tree) is refused before the first when the whole would
# not fit. Secure sums ask it through their own check (fedroc.secagg.check). With it the
# floor of a local-DP tree's epsilon (histogram_min_epsilon), the delta its limit leaves and
# the floor of the ROC-GLM's sensitivity (rocglm_min_sensitivity), which its refusals tell
# too: a release under a floor or over the delta left was refused after the other sites had
# released theirs (review diffrev2).
@site_function(FN_EPSILON_LEFT, schema={}, rows=False)
def _epsilon_left(ctx: SiteContext, args: Record) -> Reply:
    policy = ctx.policy
    delta_left = policy.delta_limit_for(ctx.data.n) - ctx.ledger.spent()[1]
    return Reply(
        {
            "epsilon_left": policy.epsilon_left(ctx.ledger),
            "delta_left": float(delta_left),
            "histogram_min_epsilon": float(policy.histogram_min_epsilon),
            "rocglm_min_sensitivity": float(policy.rocglm_min_sensitivity),
        }
    )


@fill_doc
def site_limits(federation: Federation) -> dict[str, dict[str, float]]:
    """Ask every site what its limits leave and its floors (``fedroc.epsilon_left``).

    Nothing is released but the limits minus the spend, which a site's budget refusal tells
    anyway, and its operator's floors; a site whose policy lists its ``allowed_functions``
    lists ``fedroc.epsilon_left`` for the runs that check against it first (the histogram's
    local DP, the ROC-GLM).

    Parameters
    ----------
    {federation}

    Returns
    -------
    dict of str to dict of str to float
        By site: ``epsilon_left`` (``inf`` without a limit), ``delta_left``,
        ``histogram_min_epsilon`` and ``rocglm_min_sensitivity``.

    Raises
    ------
    {site_failure}
    """
    return {
        k: {key: float(v) for key, v in r.items()}
        for k, r in federation.call(FN_EPSILON_LEFT).items()
    }


@fill_doc
def distributed_mean(
    federation: Federation, *, column: str = "score", subset: str = "all"
) -> tuple[float, int]:
    """DistrAVG of paper 1: ``(sum of site sums) / (sum of site counts)``.

    Parameters
    ----------
    {federation}
    {column}
    {subset}

    Returns
    -------
    mean : float
        The mean of the column over the rows of every site.
    n : int
        Number of rows it is taken over.

    Raises
    ------
    {site_failure}
    """
    replies = federation.call(FN_SUM, column=column, subset=subset)
    n = sum(int(r["n"]) for r in replies.values())
    total = sum(float(r["sum"]) for r in replies.values())
    if not math.isfinite(total):
        raise InputError(
            f"the {column!r} column's sum over the sites overflows float64; rescale the column"
        )
    return total / n, n


@fill_doc
def distributed_variance(
    federation: Federation, *, column: str = "score", subset: str = "all"
) -> DistributedMoments:
    """DistrVAR of paper 1: the mean goes out first, then centred sums of squares come back.

    Two rounds, so the sample variance is computed about the global mean (numerically as
    stable as the pooled two-pass formula), not from per-site sums of squares.

    Parameters
    ----------
    {federation, column, subset}

    Returns
    -------
    DistributedMoments
        Mean, sample variance (ddof 1) and number of rows.

    Raises
    ------
    {site_failure}
    """
    mean, n = distributed_mean(federation, column=column, subset=subset)
    replies = federation.call(FN_CENTERED_SS, column=column, subset=subset, mean=mean)
    ss = sum(float(r["ss"]) for r in replies.values())
    if not math.isfinite(ss):  # each site's is finite, their sum is not
        raise InputError(
            f"the {column!r} column's centred sum of squares over the sites overflows "
            "float64; rescale the column"
        )
    variance = ss / (n - 1) if n > 1 else float("nan")
    return DistributedMoments(mean, variance, n)


@fill_doc
def distributed_brier(federation: Federation) -> tuple[float, int]:
    """Brier score from each site's sum of squared residuals (paper 1, eq. 5).

    :func:`fedroc.secagg.secure_brier` computes the same through secure aggregation, so
    that the analyst sees only the total over the sites.

    Parameters
    ----------
    {federation}

    Returns
    -------
    brier : float
        Mean squared difference between label and probability over every site's rows.
    n : int
        Number of rows.

    Raises
    ------
    {site_failure}
        A site whose scores are not probabilities in [0, 1] fails the call.
    """
    replies = federation.call(FN_BRIER)
    n = sum(int(r["n"]) for r in replies.values())
    return sum(float(r["sse"]) for r in replies.values()) / n, n


@dataclass(frozen=True, repr=False)
class SiteCalibration(ResultMixin):
    """The distributed calibration curve and which bins each site withheld.

    Attributes
    ----------
    curve : CalibrationCurve
        The curve from the bins the sites released; ``curve.suppressed`` flags the bins
        withheld by at least one site.
    suppressed_by_site : dict of str to list of int
        For each site, the indices of the bins it withheld (fewer than its ``min_count``
        rows).
    """

    curve: CalibrationCurve
    suppressed_by_site: dict[str, list[int]]

    def summary(self) -> str:
        """Format the curve's table and, per site, the bins it withheld."""
        lines = [self.curve.summary()]
        withheld = {s: b for s, b in self.suppressed_by_site.items() if b}
        if withheld:
            lines.append("bins withheld (under q rows at the site, or to keep the withheld at q):")
            lines += [f"  {site}: bins {bins}" for site, bins in withheld.items()]
        return "\n".join(lines)


@fill_doc
def distributed_calibration(federation: Federation, *, n_bins: int = 10) -> SiteCalibration:
    """Calibration curve from per-site bin sums (paper 1, section 4.1).

    A bin's predicted and observed fractions use only the sites that released it; a bin
    withheld by any site is flagged ``suppressed`` in the curve, and
    ``suppressed_by_site`` lists, per site, the bins it withheld.
    :func:`fedroc.secagg.secure_calibration` sums the bins through secure aggregation
    instead: no site's bins are seen, and each site leaves the same bins out of the sums.

    Parameters
    ----------
    {federation}
    n_bins : int, default 10
        Number of equal-width probability bins on [0, 1] (edges on the 1/4096 grid), from 2
        to 100 (the sites' limit); a site binds the first number it is asked for and refuses
        any other.

    Returns
    -------
    SiteCalibration
        The curve and, per site, the bins it withheld.

    Raises
    ------
    {site_failure}
    """
    edges = bin_edges(n_bins)
    replies = federation.call(FN_CALIBRATION, n_bins=int(n_bins))
    count = np.zeros(n_bins, np.int64)
    sum_pred = np.zeros(n_bins)
    sum_obs = np.zeros(n_bins)
    suppressed = np.zeros(n_bins, bool)
    per_site: dict[str, list[int]] = {}
    for name, r in replies.items():
        count += np.asarray(r["count"], np.int64)
        sum_pred += r["sum_predicted"]
        sum_obs += r["sum_observed"]
        sup = np.asarray(r["suppressed"], bool)
        suppressed |= sup
        per_site[name] = np.flatnonzero(sup).tolist()
    curve = CalibrationCurve.from_sums(edges, count, sum_pred, sum_obs, suppressed)
    return SiteCalibration(curve, per_site)


@site_function(FN_IS_PROBABILITY, schema={})
def _is_probability(ctx: SiteContext, args: Record) -> Reply:
    declared = declared_range(ctx)
    if declared is not None:  # from the public declaration: no row read, nothing bound
        return Reply({"ok": _inside_unit(declared)}, counts={"rows": ctx.data.n})
    bind_probability_grid(ctx, FN_IS_PROBABILITY)
    s = ctx.data.score
    ok = bool(np.all((s >= 0.0) & (s <= 1.0)))
    return Reply({"ok": ok}, counts={"rows": ctx.data.n})


@fill_doc
def bind_probability_grid(ctx: SiteContext, function: str, advice: str = "") -> None:
    """Hold the site's grid to [0, 1] before it says whether its scores all lie in [0, 1].

    "Every score in [0, 1]" is a clear statement that the site adds no row to the cells of
    a wider grid outside [0, 1]: the partners' yes (``fedroc.is_probability``) and a secure
    tree over [-0.5, 1.5] gave a victim's rows above 1, their count under q and their
    classes (H15-2, review 15: 20 of 20), as ``rocglm.scale``'s range did (H14-2). And
    "some score outside", unbound, named the site of a pooled lone row outside [0, 1] (as
    H14-2 the other way); the partners' Brier sums and sensitivity heuristic, each refused
    for a score outside [0, 1], made the same two statements (20 of 20 each, branch
    lockgrid). So, as there: answered only where [0, 1] holds the site's grid of exact
    counts, and the default grid over [0, 1] is bound when none is, before the rows are
    read, whatever the answer.

    A site that declares its ``score_range`` answers from it (:func:`declared_range`):
    refused when it is not inside [0, 1], else nothing is bound (its rows, checked against
    the declaration when the site was built, are probabilities).

    Parameters
    ----------
    {ctx, refused_function}
    advice : str, optional
        What to do instead, appended to the refusal.

    Raises
    ------
    DisclosureError
        The site's grid is wider than [0, 1], or its declared ``score_range`` is not inside
        [0, 1].
    """
    declared = declared_range(ctx)
    if declared is not None:
        if not _inside_unit(declared):
            raise _declared_not_probabilities(ctx, function, declared, advice)
        return
    with ctx.ledger.transaction():
        try:
            range_holds_grid(ctx, function, 0.0, 1.0)
        except ArgumentRefused:
            raise DisclosureError(
                f"site {ctx.site!r} refuses {function!r}: its one grid of exact "
                f"counts spans {grid_range_text(ctx.ledger.bindings[BIND_RANGE])}, wider than "
                "[0, 1]; whether every "
                "score lies in [0, 1] would say which of that grid's cells it adds no row to"
                + advice,
                site=ctx.site,
                function=function,
            ) from None
        bound_grid(ctx, 0.0, 1.0)


def all_probabilities(federation: Federation) -> bool:
    """Whether every site's scores are probabilities; False where a site will not say.

    :func:`probability_sites` in one answer: a site whose grid of exact counts is wider
    than [0, 1] refuses the question (H15-2), and the run then treats its scores as not
    probabilities (no Brier score or calibration).

    Parameters
    ----------
    federation : Federation
        As for :func:`probability_sites`.

    Returns
    -------
    bool
        True when every site answers that its scores lie in [0, 1].
    """
    answer = probability_sites(federation)
    return answer is not None and not answer[1]


def probability_sites(federation: Federation) -> tuple[list[str], list[str]] | None:
    """Name the sites whose scores are probabilities and those whose are not.

    None where a site will not say: a site whose grid of exact counts is wider than [0, 1]
    refuses the question (H15-2). The analyst gets one reply per site either way
    (:func:`all_probabilities` asks the same): naming the sites that say no tells the
    analyst which site to look at when the others' scores are probabilities (logits at one
    site by mistake).

    Parameters
    ----------
    federation : Federation
        The sites asked (``fedroc.is_probability``).

    Returns
    -------
    (list of str, list of str) or None
        The sites whose scores lie in [0, 1] and those whose scores do not, in the
        federation's order.
    """
    try:
        replies = federation.call(FN_IS_PROBABILITY)
    except DisclosureError:
        return None
    yes = [name for name, r in replies.items() if r["ok"]]
    no = [name for name, r in replies.items() if not r["ok"]]
    return yes, no
