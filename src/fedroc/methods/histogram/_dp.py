"""Statistics of a noisy tree that carry their noise: AUC, Brier score, calibration.

Under DP every released node holds independent noise of variance ``sigma2``
(:func:`~._tree.node_noise_variance`). The paper's curves come from leaf masses clipped at
0, which is biased: on small data with a high AUC the area under the curves falls by
several noise SDs (fedroc 0.1: AUC 0.96 read as 0.93 at epsilon 1, 5 x 300 rows). Here
the statistics are computed from the *unclipped* consistent counts, which are unbiased
(consistency is linear), and their noise follows exactly from the adjoint of the
consistency step:

- the AUC of the counts at one level d, ``A_d = P' K N / (n+ n-)`` with ``K`` counting
  pairs in two bins as 1 and in one bin as 1/2 (DeLong's binned AUC). Its numerator is
  unbiased (the two trees' noises are independent); the ratio's second-order bias is
  removed (delta method, :func:`level_auc`). Its noise variance is the delta-method
  variance with the exact covariance of the level (:func:`~._tree.level_noise_covariance`).
  The level trades the binning bias (pairs in one bin count 1/2: at most half the
  fraction of such pairs) against the noise, which grows with the number of bins
  (:func:`choose_level`).
- the AUC's interval: Fieller's test inversion for the ratio (:class:`RatioTest`,
  :func:`dp_interval`). It can condition on a release rule that reads the tree's own
  class totals; the method's rule reads class counts with noise of their own instead
  (:func:`fedroc.methods.histogram.run_histogram`), which selects nothing in the tree's
  noise, so the method does not condition (coverage among the released runs:
  scripts/results/histogram_dp_bias.md).
- the Brier score and the calibration curve: ratios of linear statistics of the leaves,
  with their noise SD by the delta method (:func:`dp_brier`, :func:`dp_calibration`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from fedroc._validation import FloatArray
from fedroc.metrics import CalibrationCurve, DeLongResult, bin_edges, bin_index, delong_from_counts

from ._tree import level_noise_covariance, linear_noise_variance, tree_leaf_masses

MAX_AUC_BINS = 1024  # the level's covariance is dense: (bins x bins)
PAIR_NOISE_SD = 0.01  # largest SD the product of the two trees' noises may add to the AUC
SELECTIVE_GRID = 4000  # candidate AUCs on [0, 1] for the selective interval


@dataclass(frozen=True)
class LevelAuc:
    """The AUC of one level's noisy counts, with its noise.

    Attributes
    ----------
    auc : float
        Second-order bias-corrected ratio (may leave [0, 1] under heavy noise).
    raw : float
        The plain ratio ``P' K N / (n+ n-)``.
    noise_variance : float
        Delta-method variance of ``auc`` due to the DP noise (plug-in; its expectation
        exceeds the true variance by the noise-times-noise term, a conservative margin).
    ties : float
        Estimated fraction of pairs in one bin (binning bias at most ``ties / 2``).
    """

    auc: float
    raw: float
    noise_variance: float
    ties: float


def level_auc(pos: FloatArray, neg: FloatArray, cov: FloatArray, sigma2: float) -> LevelAuc | None:
    """:class:`LevelAuc` of one level; None if a class total is not positive."""
    p = np.asarray(pos, dtype=np.float64)
    q = np.asarray(neg, dtype=np.float64)
    n_pos, n_neg = float(p.sum()), float(q.sum())
    if not (n_pos > 0 and n_neg > 0):
        return None
    v10 = (np.cumsum(q) - 0.5 * q) / n_neg  # K N / n-: placement of a positive per bin
    v01 = (p.sum() - np.cumsum(p) + 0.5 * p) / n_pos  # K' P / n+
    auc = float(p @ v10 / n_pos)
    g_pos = (v10 - auc) / n_pos
    g_neg = (v01 - auc) / n_neg
    variance = sigma2 * float(g_pos @ cov @ g_pos + g_neg @ cov @ g_neg)
    # Second-order bias of the ratio: 1/2 tr(H Sigma), in closed form for each tree.
    row = cov.sum(axis=1)
    bias = sigma2 * (row @ (auc - v10) / n_pos**2 + row @ (auc - v01) / n_neg**2)
    ties = max(float(p @ q) / (n_pos * n_neg), 0.0)
    return LevelAuc(auc - bias, auc, max(variance, 0.0), ties)


@dataclass(frozen=True)
class RatioTest:
    """The AUC's interval by test inversion (Fieller's method for a ratio), after selection.

    The AUC of one level is the ratio ``U / M`` of the bilinear ``U = P' K N`` and
    ``M = n+ n-``. For a candidate value ``rho``, ``D(rho) = P' (K - rho 1 1') N`` has
    mean 0 at the true (binned) AUC: the two trees' noises are independent, so the
    bilinear form is unbiased, with no ratio and no bias correction. Its variance is the
    noise's (delta method, evaluated at ``rho`` rather than at the estimate) plus the
    sampling part ``M^2 V_DeLong``; all quadratic in ``rho``:
    ``Var D(rho) = c0 + c1 rho + c2 rho^2``. The interval is
    ``{rho : D(rho)^2 <= z^2 Var D(rho)}`` (Fieller).

    Why not ``auc +- z se``: the noise variance depends on the AUC itself (the noise that
    lands on a class total moves the estimate towards the mean placement of a noise
    count, and the plug-in variance at such an estimate is too small): on issue 13's rare
    design (n = 1500, epsilon 1, Q 1024) the Wald interval lay wholly below the AUC in
    3.1% of the runs and above it in 0.2%, Fieller's in 1.8% and 1.6%, 13% narrower
    (scripts/results/histogram_dp_bias.md).

    Selection: the AUC is released only if both noisy class totals reach ``threshold``.
    A total is correlated with ``D(rho)`` (its noise spreads over the bins), so the runs
    that pass a threshold are those whose noise raised the total, and near the threshold
    they miss far more than 5% (a run with 3 SDs of noise too many positives passes
    and its estimate is pulled towards chance by 3 SDs). With ``threshold`` set, the test
    conditions on passing (Lee, Sun, Sun & Taylor 2016, the polyhedral lemma for one
    linear statistic): given the parts of the totals independent of ``D(rho)``, the
    selection bounds ``D(rho)`` to an interval, so ``D(rho)`` is a truncated normal under
    the hypothesis; the interval holds the ``rho`` in [0, 1] whose two-sided truncated
    pivot lies in ``[alpha/2, 1 - alpha/2]``. Far above the threshold this is Fieller's
    interval; just above it, the interval widens to what the data can support.

    Attributes
    ----------
    u, m : float
        ``U`` and ``M`` of the noisy counts.
    c0, c1, c2 : float
        ``Var D(rho) = c0 + c1 rho + c2 rho^2``.
    totals : (float, float)
        The noisy class totals (positives, negatives).
    cov_totals : ((float, float), (float, float))
        ``Cov(total_j, D(rho)) = a_j + b_j rho`` for each class total.
    threshold : float or None
        Both totals had to reach it for a release; None: no selection.
    """

    u: float
    m: float
    c0: float
    c1: float
    c2: float
    totals: tuple[float, float] = (math.nan, math.nan)
    cov_totals: tuple[tuple[float, float], tuple[float, float]] = ((0.0, 0.0), (0.0, 0.0))
    threshold: float | None = None

    def fieller(self, confidence_level: float) -> tuple[float, float] | None:
        """Fieller's set ``{rho : D(rho)^2 <= z^2 Var D(rho)}``; None if not bounded.

        Unbounded means that ``M`` (the product of the class totals) is not clearly away
        from 0 at this level.
        """
        z2 = float(special.ndtri(0.5 + confidence_level / 2.0)) ** 2
        a = self.m**2 - z2 * self.c2
        b = -(2.0 * self.u * self.m + z2 * self.c1)
        c = self.u**2 - z2 * self.c0
        disc = b * b - 4.0 * a * c
        if not (a > 0 and disc >= 0):
            return None
        root = math.sqrt(disc)
        return ((-b - root) / (2.0 * a), (-b + root) / (2.0 * a))

    def pivot(self, rho: FloatArray) -> FloatArray:
        """P(D <= D_obs | selection) under each candidate ``rho`` (the truncated pivot)."""
        r = np.asarray(rho, dtype=np.float64)
        var = np.maximum(self.c0 + self.c1 * r + self.c2 * r**2, 1e-300)
        sd = np.sqrt(var)
        d = self.u - r * self.m
        lower = np.full_like(r, -np.inf)
        upper = np.full_like(r, np.inf)
        if self.threshold is not None:
            for total, (a, b) in zip(self.totals, self.cov_totals, strict=True):
                gamma = (a + b * r) / var
                rest = total - gamma * d  # the part of the total independent of D(rho)
                with np.errstate(divide="ignore", invalid="ignore"):
                    bound = (self.threshold - rest) / gamma
                lower = np.where(gamma > 0, np.maximum(lower, bound), lower)
                upper = np.where(gamma < 0, np.minimum(upper, bound), upper)
        return np.asarray(stats.truncnorm.cdf(d / sd, lower / sd, upper / sd))

    def interval(self, confidence_level: float) -> tuple[float, float] | None:
        """Return the AUC interval (see the class); None where Fieller's set is not bounded."""
        bounds = self.fieller(confidence_level)
        if self.threshold is None or bounds is None:
            return bounds
        alpha = 1.0 - confidence_level
        grid = np.linspace(0.0, 1.0, SELECTIVE_GRID + 1)
        piv = self.pivot(grid)
        inside = (piv >= alpha / 2.0) & (piv <= 1.0 - alpha / 2.0)
        if not inside.any():  # every AUC in [0, 1] rejected (a miss): the closest one
            best = float(grid[np.argmin(np.abs(piv - 0.5))])
            return (best, best)
        hit = grid[inside]
        step = 1.0 / SELECTIVE_GRID
        # The grid's neighbours outside the set bound it: widen to them (conservative).
        return (max(0.0, float(hit[0]) - step), min(1.0, float(hit[-1]) + step))


def ratio_test(
    pos: FloatArray,
    neg: FloatArray,
    cov: FloatArray,
    sigma2: float,
    sampling_variance: float,
    threshold: float | None = None,
) -> RatioTest:
    """:class:`RatioTest` of one level's noisy (consistent) counts.

    The gradients of ``D(rho)`` are ``K N - rho n- 1`` (positives) and
    ``K' P - rho n+ 1`` (negatives); their plug-in from the noisy counts overstates the
    variance by the noise-times-noise term, the same term the plug-in leaves out, so the
    sum is right in expectation (as for :func:`level_auc`). A class total is the sum of
    any consistent level, so its noise covariance with a level's counts is the row sums
    of that level's covariance.
    """
    p = np.asarray(pos, dtype=np.float64)
    q = np.asarray(neg, dtype=np.float64)
    n_pos, n_neg = float(p.sum()), float(q.sum())
    kn = np.cumsum(q) - 0.5 * q  # K N
    kp = n_pos - np.cumsum(p) + 0.5 * p  # K' P
    row = cov.sum(axis=1)
    total = float(row.sum())
    m = n_pos * n_neg
    return RatioTest(
        u=float(p @ kn),
        m=m,
        c0=sigma2 * float(kn @ cov @ kn + kp @ cov @ kp) + m**2 * sampling_variance,
        c1=-2.0 * sigma2 * (n_neg * float(kn @ row) + n_pos * float(kp @ row)),
        c2=sigma2 * total * (n_neg**2 + n_pos**2),
        totals=(n_pos, n_neg),
        cov_totals=(
            (sigma2 * float(kn @ row), -sigma2 * n_neg * total),
            (sigma2 * float(kp @ row), -sigma2 * n_pos * total),
        ),
        threshold=threshold,
    )


@dataclass(frozen=True)
class DPAuc:
    """The AUC under DP: the chosen level's estimate, its noise and sampling variance."""

    auc: float
    level: int
    bins: int
    noise_variance: float
    delong: DeLongResult
    ties: float
    raw: float
    test: RatioTest


def pair_noise_trace(branching: int, height: int, level: int, post_processing: bool) -> float:
    """``tr(K C K' C)`` of one level: the noise-times-noise part of the AUC numerator.

    ``Var(e' K f) = sigma^4 tr(K C K' C)`` for the independent noises ``e``, ``f`` of the
    two trees at this level (``C`` their covariance / sigma^2).
    """
    return _pair_noise_trace(branching, height, level, post_processing)


@functools.lru_cache(maxsize=64)
def _pair_noise_trace(branching: int, height: int, level: int, post_processing: bool) -> float:
    c = level_noise_covariance(branching, height, level, post_processing=post_processing)
    kc = np.cumsum(c, axis=0) - 0.5 * c  # K C: pairs (i > j) count 1, (i = j) 1/2
    ck = c.sum(axis=1, keepdims=True) - np.cumsum(c, axis=1) + 0.5 * c  # C K
    return float(np.sum(kc * ck))


def choose_level(
    branching: int, height: int, sigma2: float, n_pos: float, n_neg: float, post_processing: bool
) -> int:
    """Choose the deepest level (at most 1024 bins) whose noise-times-noise SD is at most 0.01.

    Deeper levels tie fewer pairs (the binning bias is at most half the fraction of pairs
    in one bin), but the product of the two trees' noises grows with the number of bins.
    The rule looks at the data only through the class totals (the most precise numbers of
    a noisy tree), so that choosing the level does not select on the noise of the counts
    it then uses (choosing by each level's estimated error did: a bias of -0.006 at AUC
    0.96 on 5 x 300 rows).
    """
    chosen = 1
    for level in range(1, height + 1):
        if branching**level > MAX_AUC_BINS:
            break
        trace = pair_noise_trace(branching, height, level, post_processing)
        if sigma2**2 * trace / (n_pos * n_neg) ** 2 <= PAIR_NOISE_SD**2:
            chosen = level
        else:
            break
    return chosen


def dp_auc(
    pos_levels: Sequence[FloatArray],
    neg_levels: Sequence[FloatArray],
    *,
    branching: int,
    sigma2: float,
    post_processing: bool,
    confidence_level: float,
    threshold: float | None = None,
) -> DPAuc | None:
    """Estimate the noise-unbiased AUC at the level of :func:`choose_level`, with its variances.

    ``pos_levels`` and ``neg_levels`` are the consistent (or, without post-processing,
    the raw) noisy levels. The sampling variance is DeLong's on the non-negative masses
    of that level (:func:`~._tree.tree_leaf_masses`). ``threshold``: the level both
    class totals had to reach for a release (the interval then conditions on it, see
    :class:`RatioTest`); it applies to consistent levels only (without post-processing
    the totals come from level 1, whose noise is independent of the AUC's level). None if
    a class total is not positive.
    """
    height = len(pos_levels)
    n_pos, n_neg = float(np.sum(pos_levels[0])), float(np.sum(neg_levels[0]))
    if not (n_pos > 0 and n_neg > 0):
        return None
    level = choose_level(branching, height, sigma2, n_pos, n_neg, post_processing)
    cov = level_noise_covariance(branching, height, level, post_processing=post_processing)
    est = level_auc(pos_levels[level - 1], neg_levels[level - 1], cov, sigma2)
    if est is None:
        return None
    pos = tree_leaf_masses(pos_levels[:level], branching)
    neg = tree_leaf_masses(neg_levels[:level], branching)
    sampling = delong_from_counts(pos, neg, confidence_level=confidence_level)
    test = ratio_test(
        pos_levels[level - 1],
        neg_levels[level - 1],
        cov,
        sigma2,
        sampling.variance,
        threshold if post_processing else None,
    )
    return DPAuc(
        est.auc, level, branching**level, est.noise_variance, sampling, est.ties, est.raw, test
    )


def dp_interval(
    test: RatioTest, binning_bound: float, confidence_level: float
) -> tuple[float, float] | None:
    """Compute the DP AUC interval: :meth:`RatioTest.interval` widened by the binning bound.

    Clipped into [0, 1] at both ends: a set that lies wholly outside (the data reject
    every possible AUC, a miss) becomes the end point, never an inverted pair.
    """
    bounds = test.interval(confidence_level)
    if bounds is None:
        return None
    low = min(max(bounds[0] - binning_bound, 0.0), 1.0)
    high = max(min(bounds[1] + binning_bound, 1.0), 0.0)
    return (low, high)


def wald_interval(value: float, se: float, confidence_level: float) -> tuple[float, float]:
    """``value +- z se`` clipped to [0, 1]."""
    z = float(special.ndtri(0.5 + confidence_level / 2.0))
    return (max(0.0, value - z * se), min(1.0, value + z * se))


def _midpoints(n_leaves: int, lo: float, hi: float) -> FloatArray:
    return lo + (hi - lo) / n_leaves * (np.arange(n_leaves, dtype=np.float64) + 0.5)


@dataclass(frozen=True)
class NoisyBrier:
    value: float
    noise_sd: float


def dp_brier(
    pos: FloatArray,
    neg: FloatArray,
    *,
    branching: int,
    height: int,
    sigma2: float,
    post_processing: bool,
) -> NoisyBrier:
    """Brier score of leaf counts (scores at leaf midpoints, Sheppard's correction).

    ``pos``/``neg`` are the leaves of the consistent (or raw) noisy trees; with
    ``sigma2 = 0`` exact counts. The noise SD is the delta method's for the ratio.
    """
    p = np.asarray(pos, dtype=np.float64)
    q = np.asarray(neg, dtype=np.float64)
    mid = _midpoints(p.size, 0.0, 1.0)
    n = float(p.sum() + q.sum())
    raw = float((p @ ((1 - mid) ** 2) + q @ (mid**2)) / n)
    # Scores spread uniformly over a leaf add width^2/12 (Sheppard's correction).
    value = raw + (1.0 / p.size) ** 2 / 12.0
    if sigma2 == 0.0:
        return NoisyBrier(value, 0.0)
    grads = np.vstack([((1 - mid) ** 2 - raw) / n, (mid**2 - raw) / n])
    var = linear_noise_variance(grads, branching, height, post_processing=post_processing)
    return NoisyBrier(value, math.sqrt(sigma2 * float(var.sum())))


@dataclass(frozen=True)
class NoisyCalibration:
    curve: CalibrationCurve
    observed_sd: FloatArray  # noise SD of each bin's observed fraction (NaN if withheld)
    count_sd: FloatArray
    withheld: list[int]


def dp_calibration(
    pos: FloatArray,
    neg: FloatArray,
    n_bins: int,
    *,
    branching: int,
    height: int,
    sigma2: float,
    post_processing: bool,
) -> NoisyCalibration:
    """Calibration curve of leaf counts, each bin with the noise SD of its fraction.

    A bin whose noisy count is below three of its noise SDs is withheld (marked
    suppressed, NaN): its fraction would be a ratio of noise.
    """
    p = np.asarray(pos, dtype=np.float64)
    q = np.asarray(neg, dtype=np.float64)
    mid = _midpoints(p.size, 0.0, 1.0)
    k = bin_index(mid, n_bins)
    count = np.bincount(k, weights=p + q, minlength=n_bins)
    sum_pred = np.bincount(k, weights=(p + q) * mid, minlength=n_bins)
    sum_obs = np.bincount(k, weights=p, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = sum_obs / count
        mean_pred = sum_pred / count
    observed_sd = np.zeros(n_bins)
    count_sd = np.zeros(n_bins)
    if sigma2 > 0:
        member = (k[None, :] == np.arange(n_bins)[:, None]).astype(np.float64)
        safe = np.where(count > 0, count, 1.0)
        ind = linear_noise_variance(member, branching, height, post_processing=post_processing)
        count_sd = np.sqrt(sigma2 * 2.0 * ind)  # the same weights on both trees
        g_pos = member * ((1.0 - np.nan_to_num(observed))[:, None] / safe[:, None])
        g_neg = member * ((-np.nan_to_num(observed))[:, None] / safe[:, None])
        var = linear_noise_variance(
            g_pos, branching, height, post_processing=post_processing
        ) + linear_noise_variance(g_neg, branching, height, post_processing=post_processing)
        observed_sd = np.sqrt(sigma2 * var)
    withheld = (~(count > 3.0 * count_sd) | ~(count > 0)) & (sigma2 > 0)
    with np.errstate(invalid="ignore"):
        observed = np.where(withheld, np.nan, np.clip(observed, 0.0, 1.0))
    mean_pred = np.where(withheld, np.nan, mean_pred)
    observed_sd = np.where(withheld, np.nan, observed_sd)
    curve = CalibrationCurve(
        bin_edges(n_bins),
        np.rint(np.maximum(count, 0.0)).astype(np.int64),
        mean_pred,
        observed,
        withheld,
    )
    withheld_bins = [int(i) for i in np.flatnonzero(withheld)]
    return NoisyCalibration(curve, observed_sd, count_sd, withheld_bins)
