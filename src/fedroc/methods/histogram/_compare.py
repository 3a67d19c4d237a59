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
the analyst the same counts again. The grid is also held to the site's one tree (the
request names the ``(branching, height)`` it is a level of, bound as a tree request binds
it): a grid off the tree's levels or range, subtracted from the tree, would count the
pooled rows between the two sets of edges, finer than a leaf.

Under distributed DP (``epsilon``) each site adds its share of Laplace noise to every cell
(one row moves one cell of one class: L1 sensitivity 1), and the release is charged to its
ledger, so repeated releases (which could be averaged) end with the site's budget. The
analyst's interval adds the noise's delta-method variance to DeLong's
(:func:`dp_comparison_extra`); the grid is coarser by default (16 x 16) because the noise
grows with the number of cells. Under local DP the method refuses (the joint counts would
travel in the clear).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedroc._validation import FloatArray
from fedroc.exceptions import InputError
from fedroc.federation import Federation
from fedroc.federation.basic import bind_exact_counts, bind_tree
from fedroc.federation.schema import ArgumentRefused, Choice, Float, Int
from fedroc.federation.site import (
    Reply,
    SiteContext,
    bind_before_reading,
    site_function,
)
from fedroc.metrics import PairedDeLongResult, PlacementSums, TiePattern
from fedroc.privacy import continuous_laplace_shares, discrete_laplace_shares, keys
from fedroc.secagg import secure_sum

from ._protocol import secagg_threshold
from ._site import (
    NOISES,
    TRANSFORMS,
    charged_for_a_moved_row,
    check_leaves,
    leaf_index,
    scores_in_range,
)

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
BIND_GRID = keys.JOINT_GRID


#: Bins per score under DP by default: 2 x 16 x 16 noisy cells (a 64 x 64 grid carries so
#: many noisy cells that the noise swamps the comparison; docs/analysis.md).
DEFAULT_DP_JOINT_BINS = 16


def joint_bins(
    requested: Any, branching: int, height: int, default: int = DEFAULT_JOINT_BINS
) -> int:
    """Choose the bins per score of the joint grid: a level ``branching ** l`` of the tree.

    ``None`` takes the largest level with at most :data:`DEFAULT_JOINT_BINS` bins; a
    given number must be such a level (at most the leaves, at most :data:`MAX_JOINT_BINS`).
    """
    levels = [branching**level for level in range(1, height + 1)]
    allowed = [b for b in levels if b <= MAX_JOINT_BINS]
    if requested is None:
        fitting = [b for b in allowed if b <= default]
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


def _grid_refused(ctx: SiteContext, grid: list[Any], first: Any) -> ArgumentRefused:
    return ArgumentRefused(
        f"site {ctx.site!r} refuses {JOINT_NAME!r}: its joint histogram grid (bins, lo, "
        f"hi, transform) was {list(first)} in its first release and may not change (got "
        f"{grid}); pooled counts over two grids could be subtracted",
        site=ctx.site,
        function=JOINT_NAME,
        argument="bins",
    )


@site_function(
    JOINT_NAME,
    schema={
        "bins": Int(2, MAX_JOINT_BINS),
        # The tree the grid is a level of (default: a tree of one level, the grid itself).
        "branching": Int(2, MAX_JOINT_BINS, default=None),
        "height": Int(1, 64, default=None),
        "lo": Float(),
        "hi": Float(),
        "transform": Choice(*sorted(TRANSFORMS), default=None),
        "epsilon": Float(0.0, 1e3, open_lo=True, default=None),
        "noise": Choice(*NOISES, default="discrete"),
    },
    release="secure",
    # With epsilon; without it, exact: refused before it runs where exact releases are
    # (allow_exact false, rows changed). A refused exact grid over the analyst's range
    # bound that range for good, and the site's DP histograms were refused over any other
    # (review 8).
    noisy=lambda args: args["epsilon"] is not None,
)
def _joint_input(ctx: SiteContext, args: dict[str, Any]) -> Reply:
    """Count the site's joint class histograms of its two scores, as input of secagg only.

    With ``epsilon`` the site adds its share of Laplace noise to every cell (a row moves
    one cell of one class by 1: L1 sensitivity 1), split into the session's
    ``noise_shares`` as the tree's noise is; the release is charged to its ledger.
    """
    bins, lo, hi = int(args["bins"]), float(args["lo"]), float(args["hi"])
    transform = args["transform"]
    if not lo < hi:
        raise InputError(f"the score range must have lo < hi; got [{lo:g}, {hi:g}]")
    grid = [bins, lo, hi, transform]
    if (args["branching"] is None) != (args["height"] is None):
        raise InputError("give branching and height together (the tree the grid is a level of)")
    tree = (bins, 1) if args["branching"] is None else (int(args["branching"]), int(args["height"]))
    check_leaves(*tree)
    joint_bins(bins, *tree)  # bins: a level of that tree
    # Bound before the site reads its rows, so that refusals cannot search for a grid. First
    # the site's one tree: the first score's margin is a union of its leaves over its range
    # (a grid off its levels or its range places pooled rows between the two sets of edges,
    # finer than a leaf: R30). Then the grid itself, one per lifetime.
    try:
        bind_tree(ctx, JOINT_NAME, lo, hi, transform, tree)
    except ArgumentRefused as exc:
        raise ArgumentRefused(
            f"{exc} (a joint grid is a level of the site's one tree, over its range)",
            site=ctx.site,
            function=JOINT_NAME,
            argument=exc.argument,
        ) from None
    bind_before_reading(ctx, BIND_GRID, grid, lambda first: _grid_refused(ctx, grid, first))
    # Exact joint counts, or noisy ones (exact in effect at a large epsilon, R33): one way for
    # the site's lifetime.
    bind_exact_counts(ctx, JOINT_NAME, "secure")
    data = ctx.data
    if data.score_b is None:
        raise InputError(
            f"site {ctx.site!r} holds one score column; comparing two models needs a second "
            "score of the same rows (--compare-score)"
        )
    a, b = scores_in_range(ctx, lo, hi, transform, compare=True)
    pos, neg = count_joint(data.label, a, b, bins, lo, hi)
    if args["epsilon"] is None:
        return Reply({"pos": pos, "neg": neg}, counts=ctx.class_counts())
    shares = discrete_laplace_shares if args["noise"] == "discrete" else continuous_laplace_shares
    noise, event = shares(
        2 * bins * bins,
        n_shares=ctx.noise_shares,
        epsilon=float(args["epsilon"]),
        rng=ctx.noise_rng(JOINT_NAME),
    )
    noisy = {
        "pos": pos.reshape(-1) + noise[: bins * bins],
        "neg": neg.reshape(-1) + noise[bins * bins :],
    }
    # No exact class counts on a DP release: min_count would refuse them, free of budget,
    # when a class holds fewer than q rows (A8-1).
    return Reply(noisy, dp=(charged_for_a_moved_row(event),))


def collect_joint(
    federation: Federation,
    *,
    bins: int,
    lo: float,
    hi: float,
    transform: str | None,
    threshold: int | None,
    allow_dropouts: bool,
    epsilon: float | None = None,
    noise: str = "discrete",
    frac_bits: int = 0,
    tree: tuple[int, int] | None = None,
) -> tuple[NDArray[Any], NDArray[Any], list[str], float]:
    """One round of secure aggregation: the pooled joint counts and the sites in the sum.

    ``tree`` is the method's ``(branching, height)``, of which ``bins`` is a level; each
    site binds it (or holds the grid to the tree it bound), as a tree request does.

    With ``epsilon`` (distributed DP) the counts are noisy; the last value is the number of
    full noise draws on each cell (``sites / threshold``; 0 without DP).
    """
    t = secagg_threshold(
        len(federation.site_names),
        threshold,
        dp=epsilon is not None,
        allow_dropouts=allow_dropouts,
    )
    dp: dict[str, Any] = {} if epsilon is None else {"epsilon": epsilon, "noise": noise}
    summed = secure_sum(
        federation,
        JOINT_NAME,
        threshold=t,
        allow_dropouts=allow_dropouts,
        frac_bits=frac_bits if epsilon is not None else 0,
        bins=bins,
        branching=None if tree is None else tree[0],
        height=None if tree is None else tree[1],
        lo=lo,
        hi=hi,
        transform=transform,
        **dp,
    )
    kind = np.int64 if epsilon is None else np.float64
    pos = np.asarray(summed["pos"], dtype=kind).reshape(bins, bins)
    neg = np.asarray(summed["neg"], dtype=kind).reshape(bins, bins)
    draws = 0.0 if epsilon is None else len(summed.sites) / summed.threshold
    return pos, neg, list(summed.sites), draws


def noise_variance_of_difference(pos: NDArray[Any], neg: NDArray[Any], sigma2: float) -> float:
    """Delta-method variance of ``AUC_a - AUC_b`` from independent noise on every cell.

    ``dAUC_a / dpos[i, j] = (V10_a(i) - AUC_a) / P`` (the first score's placement value of
    bin i) and ``dAUC_a / dneg[i, j] = (V01_a(i) - AUC_a) / N``; likewise for b with bin j.
    Each cell's noise has variance ``sigma2``; the gradient is taken at the noisy counts.
    """
    p, q = np.asarray(pos, np.float64), np.asarray(neg, np.float64)
    n_pos, n_neg = float(p.sum()), float(q.sum())
    out = 0.0
    for mp_a, mn_a, mp_b, mn_b, total, placement in (
        (p.sum(1), q.sum(1), p.sum(0), q.sum(0), n_pos, "v10"),
        (p.sum(1), q.sum(1), p.sum(0), q.sum(0), n_neg, "v01"),
    ):
        devs = []
        for mp, mn in ((mp_a, mn_a), (mp_b, mn_b)):
            v10 = (np.cumsum(mn) - 0.5 * mn) / n_neg
            v01 = (n_pos - np.cumsum(mp) + 0.5 * mp) / n_pos
            auc = float(mp @ v10) / n_pos
            devs.append((v10 if placement == "v10" else v01) - auc)
        x, y = devs
        b = x.size
        # sum over cells (i, j) of (x_i - y_j)^2
        ss = b * float(x @ x) + b * float(y @ y) - 2.0 * float(x.sum()) * float(y.sum())
        out += ss / total**2
    return sigma2 * out


def binning_bound(pos: NDArray[Any], neg: NDArray[Any]) -> float:
    """Bound how far the rows' own AUC difference can be from that of their bins.

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
    """Paired DeLong of the two binned scores from the pooled joint counts.

    Each score's tie pattern (its rows per bin, both classes: the margins of the joint
    counts) goes with it for the default interval with a small class (the MOVER interval of
    :class:`~fedroc.metrics.PairedDeLongResult` from each score's default interval).
    """
    p, q = np.asarray(pos, np.float64), np.asarray(neg, np.float64)
    ties = (
        TiePattern.from_level_counts(p.sum(axis=1) + q.sum(axis=1)),
        TiePattern.from_level_counts(p.sum(axis=0) + q.sum(axis=0)),
    )
    return PairedDeLongResult.from_sums(
        PlacementSums.from_joint_counts(p, q), confidence_level, ties=ties
    )


def dp_comparison_extra(
    pos: NDArray[Any],
    neg: NDArray[Any],
    bins: int,
    confidence_level: float,
    sigma2: float,
    epsilon: float,
    min_snr: float,
) -> dict[str, Any]:
    """Build the ``comparison`` from noisy joint counts (distributed DP).

    The difference of the binned AUCs of the noisy counts (the noise is independent across
    cells and classes, so the bilinear numerators are unbiased) with a Wald interval whose
    variance is DeLong's paired variance at the noisy counts plus the delta-method variance
    of the noise (:func:`noise_variance_of_difference`). Withheld (null) when a class total
    is within ``min_snr`` noise SDs of 0. Wald at every size (``ci`` equals ``ci_wald``):
    the MOVER default of the secure mode below 100 rows of a class is built from intervals
    that know nothing of the noise.
    """
    from scipy import stats

    p, q = np.asarray(pos, np.float64), np.asarray(neg, np.float64)
    total_sd = math.sqrt(sigma2 * p.size)
    method = (
        f"paired DeLong of the {bins} x {bins} joint bin counts with distributed DP noise "
        f"(epsilon {epsilon:g}), plus the noise's delta-method variance"
    )
    out: dict[str, Any] = {
        "auc_difference": None,
        "se": None,
        "ci": None,
        "ci_wald": None,
        "p_value": None,
        "auc_b": None,
        "auc_b_ci": None,
        "method": method,
        "auc_a": None,
        "bins": bins,
        "binning_bound": None,
        "noise_se": None,
    }
    low = min(float(p.sum()), float(q.sum()))
    if low < min_snr * total_sd:
        out["note"] = (
            f"withheld: the smaller noisy class total {low:.1f} is within {min_snr:g} noise "
            f"SDs ({total_sd:.3g}) of 0; use a larger epsilon or more rows"
        )
        return out
    res = joint_comparison(p, q, confidence_level)
    noise_var = noise_variance_of_difference(p, q, sigma2)
    var = res.se_difference**2 + noise_var
    se = math.sqrt(var)
    z = float(stats.norm.ppf(0.5 + confidence_level / 2))
    diff = res.difference
    out.update(
        auc_difference=diff,
        se=se,
        ci=[diff - z * se, diff + z * se],
        ci_wald=[diff - z * se, diff + z * se],
        p_value=float(2 * stats.norm.sf(abs(diff) / se)) if se > 0 else None,
        auc_b=res.auc_b,
        auc_a=res.auc_a,
        noise_se=math.sqrt(noise_var),
        note=(
            f"both AUCs are those of the scores rounded to {bins} bins, from noisy counts; "
            "the interval includes the noise (no binning bound: the noise hides the ties)"
        ),
    )
    return out


def comparison_extra(
    pos: NDArray[Any], neg: NDArray[Any], bins: int, confidence_level: float
) -> dict[str, Any]:
    """Build the ``comparison`` entry of the result (the keys of the pooled and mpc methods')."""
    from fedroc.methods.asks import comparison_dict

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
