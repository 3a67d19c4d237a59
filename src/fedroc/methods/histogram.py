"""Federated ROC and PR curves from hierarchical histograms (paper 5, Xu & Cormode 2025).

Method (paper sections "Quantiles estimation via histograms" and "Curve approximation via
quantiles"; details from NOTES.md section 5):

1. Each site builds a hierarchical histogram of its positive and of its negative scores
   over a public score range (default [0, 1]; a user range, or a public monotone
   transform for unbounded scores): level l has b^l equal-width bins, l = 1..h, with
   branching b (default 2) and height ``h = ceil(log_b Q) + 2`` for Q quantiles.
2. The analyst aggregates the histograms through secure aggregation
   (:mod:`fedroc.secagg`). Mode "secure aggregation": the sites send their leaf counts and
   the analyst builds the upper levels. Mode "distributed DP": each site adds its share of
   noise to every level, with budget epsilon / h per level (sensitivity 1): discrete
   Laplace shares (difference of two negative-binomial NB(1/n, 1 - e^(-epsilon/h))
   variables; Goryczka & Xiong 2015) or, as the continuous variant, Laplace shares
   (difference of two Gamma(1/n, h/epsilon)). Each site draws from its own generator
   (the reference code's shared seed made all shares equal). The noisy tree is then made
   consistent (Hay et al. 2010: weighted averaging bottom-up, mean consistency top-down).
3. Q quantiles per class at fractions linspace(0, 1, Q), found by descending the tree to
   the bin holding each fraction (within the final leaf the position is interpolated
   linearly, where the reference code returned the bin's left edge).
4. Survival functions ``1 - Phi(s)`` by PCHIP through (quantile_k, 1 - k / (Q - 1)),
   clipped to [0, 1]; ROC ``(F(s), T(s))`` and PR ``(T(s), T n+ / (T n+ + F n-))``.
5. AUROC and AUPR by trapezoids along the approximated curves; the area errors of paper
   Definition 1 against a pooled curve when the caller holds one.

Beyond the paper: an AUC confidence interval from the aggregated leaf counts (DeLong's
variance of the binned scores, :func:`fedroc.metrics.delong_from_counts`, plus the
variance the DP noise adds, propagated exactly through the consistency step), and a
calibration curve and Brier score from the same leaves (leaf midpoints; the error is at
most one leaf width).

Threat model: honest-but-curious analyst and sites (that of :mod:`fedroc.secagg`). In the
secure-aggregation mode the analyst learns the pooled leaf histograms of each class (the
pooled scores rounded to a leaf width) and nothing about any single site; a site with
fewer than q positives or negatives refuses. In the distributed-DP mode what the analyst
learns is epsilon-differentially private with respect to adding or removing one row
(each row adds 1 to one bin per level; basic composition over the h levels), provided
the sites add their noise honestly; sites that collude with the analyst and reveal their
shares weaken the noise of the others. Per-site row counts are not released.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.interpolate import PchipInterpolator

from fedroc._results import ResultMixin, format_table
from fedroc._validation import FloatArray
from fedroc.data import SiteData
from fedroc.exceptions import InputError
from fedroc.federation.schema import Choice, Float, Int
from fedroc.federation.site import Reply, SiteContext, site_function
from fedroc.methods import EvaluationInputs, EvaluationResult, register_method
from fedroc.metrics import (
    CalibrationCurve,
    DeLongResult,
    bin_edges,
    bin_index,
    delong_from_counts,
    logit_ci,
    roc_curve,
)
from fedroc.privacy import (
    DPEvent,
    continuous_laplace_shares,
    discrete_laplace_shares,
)
from fedroc.secagg import SecureSum, secure_sum

__all__ = [
    "MODES",
    "TRANSFORMS",
    "HistogramCurves",
    "approximate_curves",
    "consistent_tree",
    "leaf_index",
    "levels_from_leaves",
    "pr_area_error",
    "roc_area_error",
    "run_histogram",
    "survival_function",
    "tree_height",
    "tree_leaf_masses",
    "tree_quantiles",
]

INPUT_NAME = "fedroc.histogram.tree"
MODE_SA = "secure-aggregation"
MODE_DDP = "distributed-dp"
MODES = (MODE_SA, MODE_DDP)
NOISES = ("discrete", "continuous")
TRANSFORMS: dict[str, Callable[[FloatArray], FloatArray]] = {
    # Public monotone maps of the real line onto (0, 1): ranks, hence ROC and PR, survive.
    "logistic": lambda s: 1.0 / (1.0 + np.exp(-s)),
    "arctan": lambda s: 0.5 + np.arctan(s) / np.pi,
}
ArrayLikeF = NDArray[Any] | Sequence[float]
_FRAC_BITS = 24  # fixed-point scale of the continuous noise shares in Z_2^64
_GRID_STEPS = 8  # score-grid points between consecutive quantiles when tracing curves


# -- tree geometry and site-side counting ----------------------------------------------------
def tree_height(quantiles: int, branching: int = 2) -> int:
    """``ceil(log_b Q) + 2``, computed in integers (the reference code's rule)."""
    _check_int(quantiles, "quantiles", 2)
    _check_int(branching, "branching", 2)
    levels = 0
    while branching**levels < quantiles:
        levels += 1
    return levels + 2


def leaf_index(
    scores: FloatArray, n_leaves: int, lo: float = 0.0, hi: float = 1.0
) -> NDArray[np.int64]:
    """Leaf of each score: ``[e_k, e_(k+1))`` with ``e = linspace(lo, hi, n_leaves + 1)``.

    The last leaf is closed (it holds ``hi``), the rule of
    :func:`fedroc.metrics.bin_index`. Computed arithmetically and then corrected against
    the edges, so it equals the binary search on the edges without its cost.
    """
    edges = np.linspace(lo, hi, n_leaves + 1)
    k = ((scores - lo) * (n_leaves / (hi - lo))).astype(np.int64)
    np.clip(k, 0, n_leaves - 1, out=k)
    k -= scores < edges[k]
    k += (scores >= edges[k + 1]) & (k < n_leaves - 1)
    return k


def levels_from_leaves(leaves: NDArray[Any], branching: int) -> list[NDArray[Any]]:
    """Levels 1..h (``branching ** l`` bins each) from the leaf level by summing siblings."""
    levels = [np.asarray(leaves)]
    while levels[0].size > branching:
        levels.insert(0, levels[0].reshape(-1, branching).sum(axis=1))
    return levels


def _site_leaves(
    data: SiteData, *, n_leaves: int, lo: float, hi: float, transform: str | None, site: str
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Leaf counts of the positives and of the negatives at one site (one pass, no sort)."""
    s = data.score if transform is None else TRANSFORMS[transform](data.score)
    outside = (s < lo) | (s > hi)
    if outside.any():
        # No value or row number in the message: it travels to the analyst.
        raise InputError(
            f"scores lie outside the public score range [{lo:g}, {hi:g}]; give a range "
            "that holds every score (--score-range) or a transform (--score-transform)"
        )
    k = leaf_index(s, n_leaves, lo, hi)
    np.add(k, n_leaves, out=k, where=data.label)  # positives in the upper half
    both = np.bincount(k, minlength=2 * n_leaves)
    return both[n_leaves:].astype(np.int64), both[:n_leaves].astype(np.int64)


MAX_LEAVES = 2**22


@site_function(
    INPUT_NAME,
    schema={
        "branching": Int(2, 64),
        "height": Int(1, 64),
        "lo": Float(),
        "hi": Float(),
        "transform": Choice(*sorted(TRANSFORMS), default=None),
        "mode": Choice(*MODES),
        "epsilon": Float(0.0, 1e3, open_lo=True, default=None),
        "noise": Choice(*NOISES, default="discrete"),
    },
    release="secure",
)
def _tree_input(ctx: SiteContext, args: dict[str, Any]) -> Reply:
    """The site's hierarchical histograms (plus its noise share), as input of secagg.

    Released only through secure aggregation. In DP mode the noise is split into the
    session's ``noise_shares`` (its threshold), a number the site takes from the protocol,
    not from the analyst.
    """
    b, h = int(args["branching"]), int(args["height"])
    lo, hi = float(args["lo"]), float(args["hi"])
    transform = args["transform"]
    if b**h > MAX_LEAVES:
        raise InputError(f"branching {b} and height {h} give {b**h} leaves; at most 2^22")
    if not lo < hi:
        raise InputError(f"the score range must have lo < hi; got [{lo:g}, {hi:g}]")
    pos, neg = _site_leaves(
        ctx.data, n_leaves=b**h, lo=lo, hi=hi, transform=transform, site=ctx.site
    )
    counts = {"positive": ctx.data.n_pos, "negative": ctx.data.n_neg}
    if args["mode"] == MODE_SA:
        return Reply({"pos": pos, "neg": neg}, counts=counts)
    if args["epsilon"] is None:
        raise InputError("the distributed-DP mode needs epsilon")
    epsilon = float(args["epsilon"])
    rng = ctx.noise_rng(INPUT_NAME)
    pos_levels, neg_levels = levels_from_leaves(pos, b), levels_from_leaves(neg, b)
    noisy_pos: list[NDArray[Any]] = []
    noisy_neg: list[NDArray[Any]] = []
    events: list[DPEvent] = []
    shares = discrete_laplace_shares if args["noise"] == "discrete" else continuous_laplace_shares
    for level, (p, q) in enumerate(zip(pos_levels, neg_levels, strict=True), start=1):
        # A row adds 1 to one bin of one class at each level: sensitivity 1, budget eps/h.
        noise, event = shares(2 * p.size, n_shares=ctx.noise_shares, epsilon=epsilon / h, rng=rng)
        noisy_pos.append(p + noise[: p.size])
        noisy_neg.append(q + noise[p.size :])
        events.append(
            DPEvent(
                event.mechanism,
                event.epsilon,
                event.delta,
                event.sensitivity,
                event.noise_scale,
                event.size,
                note=f"histogram level {level} of {h}; {event.note}",
            )
        )
    return Reply(
        {"pos": np.concatenate(noisy_pos), "neg": np.concatenate(noisy_neg)},
        counts=counts,
        dp=tuple(events),
    )


# -- consistency (Hay et al. 2010) -----------------------------------------------------------
def _weights(height: int, branching: int) -> list[float]:
    # Weight of a node's own noisy count against its children's sum, for a node whose
    # subtree has i levels: (b^i - b^(i-1)) / (b^i - 1) (Hay et al. 2010, section 4).
    b = branching
    sizes = [b ** (height - j) for j in range(height)]  # b^i for the subtree under level j
    return [(size - size // b) / (size - 1) for size in sizes]


def consistent_tree(levels: Sequence[ArrayLikeF], branching: int) -> list[FloatArray]:
    """Hay et al.'s consistent estimate of a noisy hierarchical histogram.

    ``levels[j]`` holds the ``branching ** (j + 1)`` noisy counts of level j + 1 (the root
    is not released). Bottom-up weighted averaging, then top-down mean consistency; the
    result is consistent (each node equals the sum of its children) and, for consistent
    input, equal to it. Linear in the input.
    """
    b = branching
    h = len(levels)
    a = _weights(h, b)
    z = [np.asarray(level, dtype=np.float64).copy() for level in levels]
    for j in range(h - 2, -1, -1):
        z[j] = a[j] * z[j] + (1.0 - a[j]) * z[j + 1].reshape(-1, b).sum(axis=1)
    x = [z[0]]
    for j in range(1, h):
        gap = (x[j - 1] - z[j].reshape(-1, b).sum(axis=1)) / b
        x.append(z[j] + np.repeat(gap, b))
    return x


# -- quantiles and survival functions --------------------------------------------------------
def tree_leaf_masses(levels: Sequence[NDArray[Any]], branching: int) -> FloatArray:
    """Non-negative leaf masses of a (noisy) tree, split top-down.

    The total is the sum of level 1 (the estimated class size); each node's mass is split
    among its children in proportion to their counts clipped at 0 (evenly if all are
    empty). For an exact tree these are the leaf counts. Under DP this keeps the totals of
    the coarse, reliable levels: clipping the noisy leaves themselves at 0 would add
    roughly ``0.4 sd`` of noise per empty leaf to the class size.
    """
    b = branching
    first = np.asarray(levels[0], dtype=np.float64)
    mass = np.array([max(float(first.sum()), 0.0)])
    for level in levels:
        children = np.maximum(np.asarray(level, dtype=np.float64), 0.0).reshape(-1, b)
        total = children.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(total > 0, children / total, 1.0 / b)
        mass = (mass[:, None] * share).ravel()
    return mass


def tree_quantiles(
    levels: Sequence[NDArray[Any]],
    branching: int,
    fractions: FloatArray,
    lo: float = 0.0,
    hi: float = 1.0,
) -> FloatArray:
    """Quantiles at ``fractions`` from the tree (all fractions at once).

    Descends the tree to the leaf holding each target fraction (the leaf masses of
    :func:`tree_leaf_masses`, so every level's children share their parent's mass), then
    interpolates linearly inside the leaf (scores uniform within a leaf; the reference
    code returned the leaf's left edge). The 0- and 1-quantiles are the lower edge of the
    first and the upper edge of the last non-empty leaf.
    """
    mass = tree_leaf_masses(levels, branching)
    total = mass.sum()
    if not total > 0:
        raise InputError("the aggregated histogram is empty: no quantile exists")
    frac = mass / total
    cdf = np.cumsum(frac)
    nonempty = np.flatnonzero(frac > 0)
    tau = np.asarray(fractions, dtype=np.float64)
    k = np.searchsorted(cdf, tau, side="left")
    k = np.clip(k, nonempty[0], nonempty[-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        within = np.where(frac[k] > 0, (tau - (cdf[k] - frac[k])) / frac[k], 0.0)
    width = (hi - lo) / mass.size
    return lo + width * (k + np.clip(within, 0.0, 1.0))


def survival_function(quantiles: FloatArray, fractions: FloatArray) -> Callable[[Any], FloatArray]:
    """``S(s) = 1 - Phi(s)`` by PCHIP through ``(quantile_k, 1 - fraction_k)``, in [0, 1].

    Repeated quantiles are merged (mean of their survival values); S is 1 below the
    smallest quantile and 0 above the largest.
    """
    q = np.asarray(quantiles, dtype=np.float64)
    y = 1.0 - np.asarray(fractions, dtype=np.float64)
    knots, inverse = np.unique(q, return_inverse=True)
    values = np.bincount(inverse, weights=y) / np.bincount(inverse)
    if knots.size < 2:
        point = float(knots[0])
        return lambda s: np.where(np.asarray(s, dtype=np.float64) < point, 1.0, 0.0)
    pchip = PchipInterpolator(knots, values, extrapolate=False)

    def survival(s: Any) -> FloatArray:
        s = np.asarray(s, dtype=np.float64)
        out = np.clip(np.nan_to_num(pchip(s), nan=0.0), 0.0, 1.0)
        out[s < knots[0]] = 1.0
        out[s > knots[-1]] = 0.0
        return out

    return survival


@dataclass(frozen=True)
class _Curves:
    scores: FloatArray
    fpr: FloatArray
    tpr: FloatArray
    precision: FloatArray
    auc: float
    pr_auc: float


def approximate_curves(
    q_pos: FloatArray,
    q_neg: FloatArray,
    fractions: FloatArray,
    n_pos: float,
    n_neg: float,
    lo: float,
    hi: float,
) -> _Curves:
    """ROC and PR curves traced from the two survival functions (paper eqs. 1-3).

    The score grid holds every quantile and ``_GRID_STEPS`` points between consecutive
    ones, so the curves follow the data where it is dense. Points run from the top of the
    range (0, 0) to the bottom (1, 1); precision is 1 where nothing is predicted positive.
    """
    knots = np.unique(np.r_[lo, hi, q_pos, q_neg])
    steps = np.linspace(0.0, 1.0, _GRID_STEPS + 1)[:-1]
    grid = np.r_[(knots[:-1, None] + np.diff(knots)[:, None] * steps).ravel(), knots[-1]]
    s = grid[::-1]
    tpr = np.r_[0.0, survival_function(q_pos, fractions)(s), 1.0]
    fpr = np.r_[0.0, survival_function(q_neg, fractions)(s), 1.0]
    # Monotone by construction up to rounding; enforce it so areas and inverses are sound.
    tpr, fpr = np.maximum.accumulate(tpr), np.maximum.accumulate(fpr)
    tp, fp = tpr * n_pos, fpr * n_neg
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(tp + fp > 0, tp / (tp + fp), 1.0)
    return _Curves(
        scores=np.r_[np.inf, s, -np.inf],
        fpr=fpr,
        tpr=tpr,
        precision=precision,
        auc=float(np.trapezoid(tpr, fpr)),
        pr_auc=float(np.trapezoid(precision, tpr)),
    )


# -- area errors (paper, Definition 1) -----------------------------------------------------
def _limit(x: FloatArray, xp: FloatArray, yp: FloatArray, side: str) -> FloatArray:
    """Left or right limit at ``x`` of the polyline through (xp, yp), xp non-decreasing.

    A vertical run (several points at one x) has its first point as the left limit and its
    last as the right limit.
    """
    x = np.clip(x, xp[0], xp[-1])
    if side == "left":
        i = np.searchsorted(xp, x, "left")
        exact = xp[np.minimum(i, xp.size - 1)] == x
        i0 = np.maximum(i - 1, 0)
        i1 = np.minimum(i, xp.size - 1)
    else:
        i = np.searchsorted(xp, x, "right") - 1
        exact = xp[np.maximum(i, 0)] == x
        i0 = np.maximum(i, 0)
        i1 = np.minimum(i + 1, xp.size - 1)
    x0, x1, y0, y1 = xp[i0], xp[i1], yp[i0], yp[i1]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(x1 > x0, (x - x0) / (x1 - x0), 0.0)
    value = y0 + t * (y1 - y0)
    return np.where(exact, yp[i1] if side == "left" else yp[i0], value)


def _abs_area(x1: FloatArray, y1: FloatArray, x2: FloatArray, y2: FloatArray) -> float:
    """Exact integral over [0, 1] of |curve1 - curve2| for two polylines in x."""
    xs = np.unique(np.clip(np.r_[0.0, 1.0, x1, x2], 0.0, 1.0))
    d0 = _limit(xs[:-1], x1, y1, "right") - _limit(xs[:-1], x2, y2, "right")
    d1 = _limit(xs[1:], x1, y1, "left") - _limit(xs[1:], x2, y2, "left")
    dx = np.diff(xs)
    same = d0 * d1 >= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        crossing = (d0**2 + d1**2) / (2.0 * (np.abs(d0) + np.abs(d1)))
    area = np.where(same, (np.abs(d0) + np.abs(d1)) / 2.0, np.nan_to_num(crossing))
    return float(np.sum(area * dx))


def roc_area_error(
    fpr_true: FloatArray, tpr_true: FloatArray, fpr_hat: FloatArray, tpr_hat: FloatArray
) -> float:
    """``integral_0^1 |T(f) - T_hat(f)| df`` between two ROC polylines (exact)."""
    return _abs_area(
        np.asarray(fpr_true, float),
        np.asarray(tpr_true, float),
        np.asarray(fpr_hat, float),
        np.asarray(tpr_hat, float),
    )


def _precision_at_recall(
    t: FloatArray, fpr: FloatArray, tpr: FloatArray, n_pos: float, n_neg: float
) -> FloatArray:
    f = np.interp(t, tpr, fpr)  # F(T^-1(t)) on the polyline ROC
    tp = t * n_pos
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tp + f * n_neg > 0, tp / (tp + f * n_neg), 1.0)


def pr_area_error(
    fpr_true: FloatArray,
    tpr_true: FloatArray,
    n_pos: float,
    n_neg: float,
    fpr_hat: FloatArray,
    tpr_hat: FloatArray,
    n_pos_hat: float,
    n_neg_hat: float,
    *,
    grid: int = 2**17,
) -> float:
    """``integral_0^1 |P(t) - P_hat(t)| dt`` with ``P(t) = t n+ / (t n+ + F(T^-1(t)) n-)``.

    The paper's Definition 1: each PR curve comes from its ROC polyline (the
    interpolation of Davis & Goadrich, not straight lines in PR space), evaluated by the
    midpoint rule on ``grid`` recall cells (error below 1 / grid per unit of jump).
    """
    t = (np.arange(grid) + 0.5) / grid
    p = _precision_at_recall(
        t, np.asarray(fpr_true, float), np.asarray(tpr_true, float), n_pos, n_neg
    )
    p_hat = _precision_at_recall(
        t, np.asarray(fpr_hat, float), np.asarray(tpr_hat, float), n_pos_hat, n_neg_hat
    )
    return float(np.mean(np.abs(p - p_hat)))


# -- the result ------------------------------------------------------------------------------
@dataclass(frozen=True, repr=False)
class HistogramCurves(ResultMixin):
    """ROC and PR curves approximated from aggregated hierarchical histograms.

    Attributes
    ----------
    mode : {"secure-aggregation", "distributed-dp"}
    quantiles, branching, height : int
    score_range : (float, float)
    transform : str or None
    epsilon : float or None
        Total budget per site (basic composition over the levels); None without DP.
    noise : str or None
    n_pos, n_neg : float
        Class sizes from the aggregated trees (noisy under DP).
    oversampling : int
        Quantiles read per requested quantile (the curves use ``quantiles * oversampling``).
    quantiles_pos, quantiles_neg : ndarray, shape (quantiles * oversampling,)
        Estimated quantiles of each class at ``linspace(0, 1, quantiles * oversampling)``.
    leaves_pos, leaves_neg : ndarray
        Aggregated (and, under DP, consistent) leaf counts, low scores first.
    scores, fpr, tpr, precision : ndarray
        The traced curves: at threshold ``scores[i]`` (decreasing), false and true
        positive rates and precision.
    auc, pr_auc : float
        Areas under the approximated ROC and PR curves.
    delong : DeLongResult
        DeLong's AUC and variance of the leaf-binned scores.
    noise_variance : float
        Variance the DP noise adds to the AUC (0 without DP).
    brier : float or None
    calibration : CalibrationCurve or None
        From the leaves (probability scores on [0, 1] only).
    roc_area_error, pr_area_error : float or None
        Against the pooled curves, when the caller held the pooled rows.
    sites, dropped : list and dict
        Sites whose histograms the sum holds, and those that dropped out.
    """

    mode: str
    quantiles: int
    oversampling: int
    branching: int
    height: int
    score_range: tuple[float, float]
    transform: str | None
    epsilon: float | None
    noise: str | None
    n_pos: float
    n_neg: float
    quantiles_pos: FloatArray
    quantiles_neg: FloatArray
    leaves_pos: FloatArray
    leaves_neg: FloatArray
    scores: FloatArray
    fpr: FloatArray
    tpr: FloatArray
    precision: FloatArray
    auc: float
    pr_auc: float
    delong: DeLongResult
    noise_variance: float
    confidence_level: float
    brier: float | None = None
    calibration: CalibrationCurve | None = None
    roc_area_error: float | None = None
    pr_area_error: float | None = None
    sites: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)

    @property
    def se(self) -> float:
        """Standard error of the AUC: DeLong on the leaves plus the DP noise."""
        return math.sqrt(self.delong.variance + self.noise_variance)

    def confidence_interval(self, confidence_level: float | None = None) -> tuple[float, float]:
        """Logit-scale interval (paper 1, eq. 3) around :attr:`auc`."""
        level = self.confidence_level if confidence_level is None else confidence_level
        return logit_ci(self.auc, self.se, level)

    def roc_points(self) -> tuple[FloatArray, FloatArray]:
        """``(fpr, tpr)`` of the approximated ROC curve (drawn by the HTML report)."""
        return self.fpr, self.tpr

    def pr_points(self) -> tuple[FloatArray, FloatArray]:
        """``(recall, precision)`` of the approximated PR curve."""
        return self.tpr, self.precision

    def survival_functions(self) -> tuple[Callable[[Any], FloatArray], Callable[[Any], FloatArray]]:
        """The PCHIP survival functions ``(T(s), F(s))`` of the positives and negatives."""
        fractions = np.linspace(0.0, 1.0, self.quantiles * self.oversampling)
        return (
            survival_function(self.quantiles_pos, fractions),
            survival_function(self.quantiles_neg, fractions),
        )

    def summary(self) -> str:
        rows: list[tuple[str, Any]] = [
            ("mode", self.mode),
            (
                "quantiles (Q)",
                f"{self.quantiles} (curves through {self.quantiles * self.oversampling})",
            ),
            ("tree", f"branching {self.branching}, height {self.height}"),
            ("epsilon", self.epsilon),
            ("positives / negatives", f"{self.n_pos:.1f} / {self.n_neg:.1f}"),
            ("AUROC", self.auc),
            (f"{self.confidence_level:.0%} CI", self.confidence_interval()),
            ("AUPR", self.pr_auc),
        ]
        if self.roc_area_error is not None:
            rows.append(("ROC area error", f"{self.roc_area_error:.3g}"))
            rows.append(("PR area error", f"{self.pr_area_error:.3g}"))
        if self.brier is not None:
            rows.append(("Brier score", self.brier))
        return format_table(rows, title="Federated ROC/PR curves from histograms")


# -- the analyst -------------------------------------------------------------------------------
def _check_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _split_levels(vector: NDArray[Any], branching: int, height: int) -> list[NDArray[Any]]:
    out, offset = [], 0
    for level in range(1, height + 1):
        size = branching**level
        out.append(np.asarray(vector[offset : offset + size], dtype=np.float64))
        offset += size
    return out


def _leaf_statistics(
    pos: FloatArray, neg: FloatArray, lo: float, hi: float, calibration_bins: int | None
) -> tuple[float | None, CalibrationCurve | None]:
    """Brier score and calibration curve from leaf counts (leaf midpoints stand in for scores)."""
    if calibration_bins is None or (lo, hi) != (0.0, 1.0):
        return None, None
    width = (hi - lo) / pos.size
    mid: FloatArray = lo + width * (np.arange(pos.size, dtype=np.float64) + 0.5)
    n = pos.sum() + neg.sum()
    # Sheppard's correction: scores spread uniformly over a leaf add width^2/12.
    brier = float((pos @ ((1 - mid) ** 2) + neg @ (mid**2)) / n + width**2 / 12)
    k = bin_index(mid, calibration_bins)
    count = np.bincount(k, weights=pos + neg, minlength=calibration_bins)
    sum_pred = np.bincount(k, weights=(pos + neg) * mid, minlength=calibration_bins)
    sum_obs = np.bincount(k, weights=pos, minlength=calibration_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_pred = np.where(count > 0, sum_pred / count, np.nan)
        observed = np.where(count > 0, sum_obs / count, np.nan)
    curve = CalibrationCurve(
        bin_edges(calibration_bins),
        np.rint(count).astype(np.int64),
        mean_pred,
        observed,
        np.zeros(calibration_bins, bool),
    )
    return brier, curve


def _simulate_noise(
    size: int, *, noise: str, eps_level: float, scale: float, rng: np.random.Generator
) -> FloatArray:
    """Total noise on one node: the sum of the included sites' shares.

    ``scale`` is (sites in the sum) / (shares per full noise draw): 1 when every site
    took part, so the total is one discrete (or continuous) Laplace variable.
    """
    if noise == "discrete":
        p = 1.0 - math.exp(-eps_level)
        draws = rng.negative_binomial(scale, p, (2, size))
        return (draws[0] - draws[1]).astype(np.float64)
    b = 1.0 / eps_level
    return rng.gamma(scale, b, size) - rng.gamma(scale, b, size)


def _curves_from_levels(
    pos_levels: Sequence[NDArray[Any]],
    neg_levels: Sequence[NDArray[Any]],
    branching: int,
    fractions: FloatArray,
    lo: float,
    hi: float,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, _Curves]:
    pos = tree_leaf_masses(pos_levels, branching)
    neg = tree_leaf_masses(neg_levels, branching)
    n_pos, n_neg = float(pos.sum()), float(neg.sum())
    if not (n_pos > 0 and n_neg > 0):
        raise InputError(
            f"the aggregated histograms hold {n_pos:g} positive and {n_neg:g} negative rows; "
            "both classes are needed"
        )
    q_pos = tree_quantiles(pos_levels, branching, fractions, lo, hi)
    q_neg = tree_quantiles(neg_levels, branching, fractions, lo, hi)
    curves = approximate_curves(q_pos, q_neg, fractions, n_pos, n_neg, lo, hi)
    return pos, neg, q_pos, q_neg, curves


def _noise_variance(
    pos: FloatArray,
    neg: FloatArray,
    *,
    branching: int,
    fractions: FloatArray,
    lo: float,
    hi: float,
    noise: str,
    eps_level: float,
    scale: float,
    post_processing: bool,
    replicates: int,
    rng: np.random.Generator,
) -> float:
    """Variance the DP noise adds to the AUC, by parametric bootstrap (post-processing).

    The estimated leaves stand in for the truth: each replicate adds fresh noise of the
    released law to every node of both trees and reruns consistency, quantiles and curves.
    This follows the whole nonlinear path (clipping, quantiles, PCHIP), which a linear
    propagation of the noise would miss.
    """
    truth = [levels_from_leaves(pos, branching), levels_from_leaves(neg, branching)]

    def draw(size: int) -> FloatArray:
        return _simulate_noise(size, noise=noise, eps_level=eps_level, scale=scale, rng=rng)

    aucs = []
    for _ in range(replicates):
        noisy = []
        for levels in truth:
            tree = [lv + draw(lv.size) for lv in levels]
            noisy.append(consistent_tree(tree, branching) if post_processing else tree)
        try:
            curves = _curves_from_levels(noisy[0], noisy[1], branching, fractions, lo, hi)[4]
        except InputError:  # a replicate without one class: skip it
            continue
        aucs.append(curves.auc)
    return float(np.var(aucs, ddof=1)) if len(aucs) > 1 else float("nan")


@register_method(
    "histogram",
    "ROC/PR curves from hierarchical histograms, secure aggregation or distributed DP (paper 5)",
)
def run_histogram(
    inputs: EvaluationInputs,
    *,
    quantiles: int = 1024,
    dp_epsilon: float | None = None,
    dp_noise: str = "discrete",
    branching: int = 2,
    height: int | None = None,
    score_range: tuple[float, float] | Sequence[float] | None = None,
    score_transform: str | None = None,
    post_processing: bool = True,
    threshold: int | None = None,
    allow_dropouts: bool = False,
    calibration_bins: int | None = 10,
    noise_replicates: int = 100,
    oversampling: int | None = None,
) -> EvaluationResult:
    """Approximate the pooled ROC and PR curves from aggregated hierarchical histograms.

    Parameters
    ----------
    inputs : EvaluationInputs
    quantiles : int, default 1024
        Q, the number of quantiles per class.
    dp_epsilon : float, optional
        Total epsilon per site for distributed DP; None for secure aggregation alone.
    dp_noise : {"discrete", "continuous"}
        Discrete Laplace (exact in integers) or continuous Laplace shares.
    branching : int, default 2
    height : int, optional
        Default ``ceil(log_b Q) + 2``.
    score_range : (lo, hi), optional
        Public score range, default [0, 1]. Every score must lie in it.
    score_transform : {"logistic", "arctan"}, optional
        Public monotone map of unbounded scores onto (0, 1) (instead of a range).
    post_processing : bool, default True
        Hay et al.'s consistency step for DP trees.
    threshold : int, optional
        Secure-aggregation threshold (default: a majority of the sites).
    allow_dropouts : bool, default False
        Go on without sites that drop out (down to ``threshold``); under DP each site
        then adds the noise share of ``threshold`` sites, so that any set of survivors
        holds the full noise.
    calibration_bins : int or None, default 10
        Bins of the calibration curve computed from the leaves (None to skip).
    noise_replicates : int, default 100
        Parametric-bootstrap replicates for the variance the DP noise adds to the AUC.
    oversampling : int, optional
        The curves go through ``oversampling * Q`` quantiles read from the same tree.
        Default 8 under secure aggregation (the 4Q exact leaves hold more than Q
        quantiles tell: on flchain at Q = 1024 the PR area error drops from 1.5e-3 to
        4.5e-4; post-processing, nothing more is released) and 1 under DP (the paper's
        setting; deep noisy levels gain nothing from it).
    """
    q = _check_int(quantiles, "quantiles", 2)
    b = _check_int(branching, "branching", 2)
    h = tree_height(q, b) if height is None else _check_int(height, "height", 1)
    if b**h > MAX_LEAVES:
        raise InputError(f"branching {b} and height {h} give {b**h} leaves; at most 2^22 allowed")
    if score_transform is not None:
        if score_transform not in TRANSFORMS:
            raise InputError(
                f"score_transform must be one of {sorted(TRANSFORMS)}; got {score_transform!r}"
            )
        if score_range is not None:
            raise InputError("give score_range or score_transform, not both")
        lo, hi = 0.0, 1.0
    else:
        lo, hi = (0.0, 1.0) if score_range is None else (float(v) for v in score_range)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise InputError(f"score_range must be two finite numbers lo < hi; got {score_range!r}")
    if dp_epsilon is not None and not (dp_epsilon > 0 and math.isfinite(dp_epsilon)):
        raise InputError(f"dp_epsilon must be a positive number; got {dp_epsilon!r}")
    if dp_noise not in NOISES:
        raise InputError(f"dp_noise must be one of {NOISES}; got {dp_noise!r}")
    mode = MODE_SA if dp_epsilon is None else MODE_DDP
    federation = inputs.federation
    n_sites = len(federation.site_names)
    # Under DP each site splits its noise into t shares (t = the threshold, as the site
    # reads it from the protocol); without dropouts t = n keeps the total at one draw.
    default_t = n_sites if mode == MODE_DDP and not allow_dropouts else n_sites // 2 + 1
    t = max(2, default_t) if threshold is None else int(threshold)
    start = federation.mark()
    summed: SecureSum = secure_sum(
        federation,
        INPUT_NAME,
        threshold=t,
        allow_dropouts=allow_dropouts,
        frac_bits=_FRAC_BITS,
        branching=b,
        height=h,
        lo=lo,
        hi=hi,
        transform=score_transform,
        mode=mode,
        epsilon=dp_epsilon,
        noise=dp_noise,
    )
    factor = (8 if mode == MODE_SA else 1) if oversampling is None else oversampling
    fractions = np.linspace(0.0, 1.0, q * _check_int(factor, "oversampling", 1))
    if mode == MODE_SA:
        pos_levels = levels_from_leaves(np.asarray(summed["pos"], np.float64), b)
        neg_levels = levels_from_leaves(np.asarray(summed["neg"], np.float64), b)
    else:
        pos_levels = _split_levels(summed["pos"], b, h)
        neg_levels = _split_levels(summed["neg"], b, h)
        if post_processing:
            pos_levels, neg_levels = consistent_tree(pos_levels, b), consistent_tree(neg_levels, b)
    pos_leaves, neg_leaves, q_pos, q_neg, curves = _curves_from_levels(
        pos_levels, neg_levels, b, fractions, lo, hi
    )
    n_pos, n_neg = float(pos_leaves.sum()), float(neg_leaves.sum())
    binned = delong_from_counts(pos_leaves, neg_leaves, confidence_level=inputs.confidence_level)
    noise_variance = 0.0
    if mode == MODE_DDP:
        noise_variance = _noise_variance(
            pos_leaves,
            neg_leaves,
            branching=b,
            fractions=fractions,
            lo=lo,
            hi=hi,
            noise=dp_noise,
            eps_level=float(dp_epsilon) / h,  # type: ignore[arg-type]
            # Each included site added the share of 1 / t of a full noise draw.
            scale=len(summed.sites) / summed.threshold,
            post_processing=post_processing,
            replicates=_check_int(noise_replicates, "noise_replicates", 2),
            rng=np.random.default_rng(inputs.seed),
        )
    brier, calibration = (
        _leaf_statistics(pos_leaves, neg_leaves, lo, hi, calibration_bins)
        if score_transform is None
        else (None, None)
    )
    roc_err = pr_err = None
    if inputs.pooled is not None and 0 < inputs.pooled.n_pos < inputs.pooled.n:
        y, s = inputs.pooled.label, inputs.pooled.score
        fpr_true, tpr_true, _ = roc_curve(y, s)
        roc_err = roc_area_error(fpr_true, tpr_true, curves.fpr, curves.tpr)
        pr_err = pr_area_error(
            fpr_true,
            tpr_true,
            inputs.pooled.n_pos,
            inputs.pooled.n_neg,
            curves.fpr,
            curves.tpr,
            n_pos,
            n_neg,
        )
    details = HistogramCurves(
        mode=mode,
        quantiles=q,
        oversampling=int(factor),
        branching=b,
        height=h,
        score_range=(lo, hi),
        transform=score_transform,
        epsilon=dp_epsilon,
        noise=dp_noise if mode == MODE_DDP else None,
        n_pos=n_pos,
        n_neg=n_neg,
        quantiles_pos=q_pos,
        quantiles_neg=q_neg,
        leaves_pos=pos_leaves,
        leaves_neg=neg_leaves,
        scores=curves.scores,
        fpr=curves.fpr,
        tpr=curves.tpr,
        precision=curves.precision,
        auc=curves.auc,
        pr_auc=curves.pr_auc,
        delong=binned,
        noise_variance=noise_variance,
        confidence_level=inputs.confidence_level,
        brier=brier,
        calibration=calibration,
        roc_area_error=roc_err,
        pr_area_error=pr_err,
        sites=list(summed.sites),
        dropped=dict(summed.dropped),
    )
    leaves = b**h
    if mode == MODE_SA:
        note = (
            f"secure aggregation over {len(summed.sites)} sites: the analyst saw only the sums "
            f"of 2 x {leaves} leaf counts"
        )
    else:
        note = (
            f"distributed DP ({dp_noise} Laplace shares, epsilon {dp_epsilon:g} split over "
            f"{h} levels): the analyst saw only the noisy sums of 2 x {2 * leaves - 2} counts"
        )
    released = federation.released(start).with_notes(note, "per-site row counts were not released")
    extra: dict[str, Any] = {
        "pr_auc": curves.pr_auc,
        "quantiles": q,
        "epsilon": dp_epsilon,
        "oversampling": int(factor),
        "mode": mode,
        "branching": b,
        "height": h,
        "n_pos": n_pos,
        "n_neg": n_neg,
        "auc_se": details.se,
        "auc_binned": binned.auc,
    }
    if roc_err is not None:
        extra["roc_area_error"] = roc_err
        extra["pr_area_error"] = pr_err
    if calibration is not None:
        extra["brier"] = brier
        extra["calibration"] = calibration
    if summed.dropped:
        extra["dropped"] = sorted(summed.dropped)
    return EvaluationResult(
        method="histogram",
        sites=[{"name": name, "n": None} for name in summed.sites],
        auc=curves.auc,
        auc_ci=details.confidence_interval(),
        released=released,
        extra=extra,
        confidence_level=inputs.confidence_level,
        details=details,
    )
