"""Comparing two models with the histogram method: the joint histogram of two scores.

Each site counts, per class, its rows on a ``B x B`` grid of (first score bin, second
score bin) over the public score range, with equal-width bins: a level of the method's
tree (``B = branching ** l``), so the first score's margin is a coarsening of the leaves
the method already releases. The counts go through secure aggregation (the site function
``fedroc.histogram.joint``, :data:`JOINT_NAME`, ``release="secure"``): the analyst sees the
pooled joint counts only, as it sees the pooled leaf counts. From them it computes both
binned AUCs and DeLong's paired covariance with ties within a bin counted 1/2
(:meth:`fedroc.metrics.PlacementSums.from_joint_counts`), which is exactly the paired
DeLong of the pooled rows with each score rounded to its bin.

What the site enforces, beyond its policy's rules for every secure input (at least
``secagg_min_sites`` sites, one set of sites per quantity, at least ``min_count`` rows per
class): the grid (bins, range, transform) of its first joint histogram is bound in its
ledger for its lifetime. Pooled joint counts over two grids (shifted or refined) could be
subtracted to place pooled rows more finely than either grid; with one grid, a repeat gives
the analyst the same counts again. Under DP the joint counts would need noise of their own
and a budget; the method refuses the comparison there instead.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedroc._validation import FloatArray
from fedroc.exceptions import InputError
from fedroc.federation import Federation
from fedroc.federation.schema import ArgumentRefused, Choice, Float, Int
from fedroc.federation.site import Reply, SiteContext, site_function
from fedroc.metrics import PairedDeLongResult, PlacementSums
from fedroc.secagg import secure_sum

from ._site import TRANSFORMS, leaf_index

__all__ = [
    "DEFAULT_JOINT_BINS",
    "JOINT_NAME",
    "MAX_JOINT_BINS",
    "binning_bound",
    "collect_joint",
    "comparison_extra",
    "count_joint",
    "joint_bins",
    "joint_comparison",
]

JOINT_NAME = "fedroc.histogram.joint"
#: Bins per score of the joint grid by default (the largest tree level with at most this
#: many bins): 64 x 64 cells per class.
DEFAULT_JOINT_BINS = 64
#: A site accepts at most this many bins per score (2 x 256 x 256 counts per site).
MAX_JOINT_BINS = 256
#: Ledger key of the grid a site bound with its first joint histogram.
BIND_GRID = "histogram-joint:grid"


def joint_bins(requested: Any, branching: int, height: int) -> int:
    """The bins per score of the joint grid: a level ``branching ** l`` of the tree.

    ``None`` takes the largest level with at most :data:`DEFAULT_JOINT_BINS` bins; a
    given number must be such a level (at most the leaves, at most :data:`MAX_JOINT_BINS`).
    """
    levels = [branching**level for level in range(1, height + 1)]
    allowed = [b for b in levels if b <= MAX_JOINT_BINS]
    if requested is None:
        fitting = [b for b in allowed if b <= DEFAULT_JOINT_BINS]
        return fitting[-1] if fitting else allowed[0]
    if isinstance(requested, bool) or requested not in allowed:
        raise InputError(
            f"compare_bins must be a level of the tree (branching {branching}, height "
            f"{height}) with at most {MAX_JOINT_BINS} bins: one of {allowed}; got {requested!r}"
        )
    return int(requested)


def count_joint(
    label: NDArray[np.bool_],
    score_a: FloatArray,
    score_b: FloatArray,
    bins: int,
    lo: float,
    hi: float,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Joint counts ``(pos, neg)``, ``[i, j]`` = rows with score a in bin i and b in bin j.

    Bins are those of :func:`~fedroc.methods.histogram.leaf_index` (``[e_k, e_(k+1))``,
    the last one closed); one pass, no sort.
    """
    cell = leaf_index(score_a, bins, lo, hi) * bins + leaf_index(score_b, bins, lo, hi)
    np.add(cell, bins * bins, out=cell, where=label)  # positives in the upper half
    both = np.bincount(cell, minlength=2 * bins * bins).astype(np.int64)
    return both[bins * bins :].reshape(bins, bins), both[: bins * bins].reshape(bins, bins)


def _bind_grid(ctx: SiteContext, grid: list[Any]) -> None:
    first = ctx.ledger.bindings.get(BIND_GRID)
    if first is not None and list(first) != grid:
        raise ArgumentRefused(
            f"site {ctx.site!r} refuses {JOINT_NAME!r}: its joint histogram grid (bins, lo, "
            f"hi, transform) was {list(first)} in its first release and may not change (got "
            f"{grid}); pooled counts over two grids could be subtracted",
            site=ctx.site,
            function=JOINT_NAME,
            argument="bins",
        )
    # Bound before the site reads its rows, so that refusals cannot search for a grid.
    ctx.ledger.bind(BIND_GRID, grid)


@site_function(
    JOINT_NAME,
    schema={
        "bins": Int(2, MAX_JOINT_BINS),
        "lo": Float(),
        "hi": Float(),
        "transform": Choice(*sorted(TRANSFORMS), default=None),
    },
    release="secure",
)
def _joint_input(ctx: SiteContext, args: dict[str, Any]) -> Reply:
    """The site's joint class histograms of its two scores, as input of secagg only."""
    bins, lo, hi = int(args["bins"]), float(args["lo"]), float(args["hi"])
    transform = args["transform"]
    if not lo < hi:
        raise InputError(f"the score range must have lo < hi; got [{lo:g}, {hi:g}]")
    _bind_grid(ctx, [bins, lo, hi, transform])
    data = ctx.data
    if data.score_b is None:
        raise InputError(
            f"site {ctx.site!r} holds one score column; comparing two models needs a second "
            "score of the same rows (--compare-score)"
        )
    a, b = data.score, data.score_b
    if transform is not None:
        a, b = TRANSFORMS[transform](a), TRANSFORMS[transform](b)
    for name, s in (("first", a), ("second", b)):
        if ((s < lo) | (s > hi)).any():
            # No value or row number in the message: it travels to the analyst.
            raise InputError(
                f"site {ctx.site!r}: {name} scores lie outside the public score range "
                f"[{lo:g}, {hi:g}]; both scores must lie in it (--score-range) or be mapped "
                "by a transform (--score-transform)"
            )
    pos, neg = count_joint(data.label, a, b, bins, lo, hi)
    return Reply({"pos": pos, "neg": neg}, counts={"positive": data.n_pos, "negative": data.n_neg})


def collect_joint(
    federation: Federation,
    *,
    bins: int,
    lo: float,
    hi: float,
    transform: str | None,
    threshold: int | None,
    allow_dropouts: bool,
) -> tuple[NDArray[np.int64], NDArray[np.int64], list[str]]:
    """One round of secure aggregation: the pooled joint counts and the sites in the sum."""
    n_sites = len(federation.site_names)
    t = max(2, n_sites // 2 + 1) if threshold is None else threshold
    summed = secure_sum(
        federation,
        JOINT_NAME,
        threshold=t,
        allow_dropouts=allow_dropouts,
        frac_bits=0,
        bins=bins,
        lo=lo,
        hi=hi,
        transform=transform,
    )
    pos = np.asarray(summed["pos"], dtype=np.int64).reshape(bins, bins)
    neg = np.asarray(summed["neg"], dtype=np.int64).reshape(bins, bins)
    return pos, neg, list(summed.sites)


def binning_bound(pos: NDArray[Any], neg: NDArray[Any]) -> float:
    """The most the rows' own AUC difference can differ from that of their bins.

    A positive-negative pair in one bin of a score counts 1/2 binned and 0 or 1 on the
    rows, so each AUC moves by at most half the share of its tied pairs; the orders within
    the bins of the two scores are free of each other, so the bound of the difference is
    the sum, and it is reached.
    """
    p, q = np.asarray(pos, np.float64), np.asarray(neg, np.float64)
    pairs = p.sum() * q.sum()
    tied_a = float(p.sum(axis=1) @ q.sum(axis=1))
    tied_b = float(p.sum(axis=0) @ q.sum(axis=0))
    return 0.5 * (tied_a + tied_b) / pairs


def joint_comparison(
    pos: NDArray[Any], neg: NDArray[Any], confidence_level: float = 0.95
) -> PairedDeLongResult:
    """Paired DeLong of the two binned scores from the pooled joint counts."""
    sums = PlacementSums.from_joint_counts(pos, neg)
    n_pos, n_neg = round(sums.n_pos), round(sums.n_neg)
    if min(n_pos, n_neg) < 2:
        raise InputError(
            f"the paired comparison needs at least 2 rows per class; got {n_pos} positive "
            f"and {n_neg} negative"
        )
    return PairedDeLongResult(
        float(sums.auc[0]), float(sums.auc[1]), sums.covariance(), n_pos, n_neg, confidence_level
    )


def comparison_extra(
    pos: NDArray[Any], neg: NDArray[Any], bins: int, confidence_level: float
) -> dict[str, Any]:
    """The ``comparison`` entry of the result (the keys of the pooled and mpc methods')."""
    from fedroc.methods._asks import comparison_dict

    res = joint_comparison(pos, neg, confidence_level)
    out = comparison_dict(
        res,
        f"paired DeLong of the {bins} x {bins} joint bin counts (secure aggregation)",
    )
    bound = binning_bound(pos, neg)
    out["auc_a"] = res.auc_a
    out["bins"] = bins
    out["binning_bound"] = float(bound) if math.isfinite(bound) else None
    out["note"] = (
        f"both AUCs are those of the scores rounded to {bins} bins (ties within a bin count "
        "1/2); the rows' own difference lies within binning_bound of auc_difference"
    )
    return out
