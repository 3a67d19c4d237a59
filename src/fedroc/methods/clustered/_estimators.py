"""Clustered AUC estimators from per-cluster terms, vectorized over replicates.

Every function takes arrays whose last axis runs over the clusters (shape ``(I,)`` for one
sample, ``(R, I)`` for R simulation replicates of I clusters each) and returns one value per
replicate. Notation follows Michael & Tian: for cluster i, ``m_i`` controls, ``n_i`` cases,
``psi_ii`` its within-cluster kernel sum, ``row_i = sum_j psi_ij`` and
``col_i = sum_j psi_ji`` (both including j = i), ``M = sum m_i`` and ``N = sum n_i``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from fedroc.exceptions import InputError

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class JointEstimates:
    """(theta12^, theta11^) and Sigma^ for each replicate.

    Attributes
    ----------
    population, personalized : ndarray, shape (...,)
    sigma : ndarray, shape (..., 2, 2)
        Sigma^ of Corollary 6 in the order (population, personalized); the covariance of
        the two estimates is ``sigma / n_clusters``.
    n_clusters : int
    """

    population: FloatArray
    personalized: FloatArray
    sigma: FloatArray
    n_clusters: int

    @property
    def covariance(self) -> FloatArray:
        """Covariance of the two estimates, ``sigma / n_clusters``: shape ``(..., 2, 2)``."""
        return self.sigma / self.n_clusters


PopulationEstimator = Literal["corrected", "eq5", "between"]
POPULATION_ESTIMATORS: tuple[str, ...] = ("corrected", "eq5", "between")
Sigma11Divisor = Literal["corollary6", "authors"]
SIGMA11_DIVISORS: tuple[str, ...] = ("corollary6", "authors")


def check_population_estimator(value: str) -> str:
    if value not in POPULATION_ESTIMATORS:
        raise InputError(
            f"population_estimator must be one of {POPULATION_ESTIMATORS}; got {value!r}"
        )
    return value


def check_sigma11(value: str) -> str:
    if value not in SIGMA11_DIVISORS:
        raise InputError(f"sigma11 must be one of {SIGMA11_DIVISORS}; got {value!r}")
    return value


def population_estimates(
    m: FloatArray, n: FloatArray, within: FloatArray, row: FloatArray
) -> dict[str, FloatArray]:
    """theta12^ by each of the three estimators (values may exceed 1 only for "corrected").

    - ``"eq5"``: ``sum_{i != j} psi_ij / (M N)``, eq. 5 as printed; it divides the
      between-cluster pairs by all ``M N`` pairs, biased by about ``-theta12 / I``.
    - ``"corrected"``: eq. 5 times ``I / (I - 1)``: the ratio of U-statistics
      ``(I)_2^-1 sum_{i != j} psi_ij / (I^-2 M N)`` analysed in the proof of Theorem 5 and
      computed by the authors' R code. Not bounded by 1: with few clusters and a perfect
      ranking it exceeds 1 (4 clusters: up to 4/3 of eq. 5).
    - ``"between"``: ``sum_{i != j} psi_ij / sum_{i != j} m_i n_j``, the fraction of
      concordant pairs among the pairs of different clusters (Proposition 1 without the
      within-cluster pairs). Always in [0, 1]; its denominator is unbiased for
      ``I (I - 1) E(M) E(N)``, so it has no first-order bias from ``Cov(M, N)``, and it has
      the same asymptotic distribution (Theorem 5) as the other two.
    """
    n_clusters = m.shape[-1]
    big_m = m.sum(-1)
    big_n = n.sum(-1)
    between = row.sum(-1) - within.sum(-1)
    eq5 = between / (big_m * big_n)
    with np.errstate(invalid="ignore", divide="ignore"):
        pairs = big_m * big_n - np.sum(m * n, axis=-1)
        return {
            "eq5": eq5,
            "corrected": eq5 * (n_clusters / (n_clusters - 1)),
            "between": between / pairs,
        }


def joint_estimates(
    m: FloatArray,
    n: FloatArray,
    within: FloatArray,
    row: FloatArray,
    col: FloatArray,
    *,
    pair_correction: bool = True,
    population_estimator: PopulationEstimator | None = None,
    sigma11: Sigma11Divisor = "corollary6",
) -> JointEstimates:
    """Estimate population and personalized AUCs with Sigma^ (Michael & Tian, eq. 5, Cor. 6).

    Every cluster must have both classes (``m_i, n_i >= 1``) and there must be at least two.

    - ``theta11^ = mean_i psi_ii / (m_i n_i)``.
    - ``theta12^`` by ``population_estimator`` (see :func:`population_estimates`); None
      means ``"corrected"`` with ``pair_correction`` and ``"eq5"`` without.
    - ``Sigma11 = 1/(I-1) sum_i (a_i - theta12 (m_i/Mbar + n_i/Nbar))^2`` with
      ``a_i = (psi_i. + psi_.i) / (Mbar Nbar)``, ``psi_i. = row_i / I``,
      ``psi_.i = col_i / I`` and ``Mbar = M / I``. The extracted text of Corollary 6
      divides by ``M_i N_i``; Theorem 5, whose plug-in estimate this is,
      divides by ``E(M) E(N)``, estimated by ``Mbar Nbar``. ``sigma11="authors"`` divides
      the sum by ``(I-1)^2 / I`` instead of ``I - 1``, as the authors' R code
      (``auc.cluster``) and hence their Table 1 do: ``I / (I - 1)`` times larger.
    - ``Sigma22 = 1/(I-1) sum_i (phi_i - phibar)^2`` with ``phi_i = psi_ii / (m_i n_i)``.
    - ``Sigma12 = theta12 / I sum_i phi_i ((psi_i. + psi_.i) / psi.. - m_i/Mbar - n_i/Nbar)``,
      the plug-in of Theorem 5's ``Sigma12`` (the extracted Corollary 6 lost the factor
      ``theta12``, which the authors' code has).
    """
    estimator = population_estimator or ("corrected" if pair_correction else "eq5")
    check_population_estimator(estimator)
    check_sigma11(sigma11)
    n_clusters = m.shape[-1]
    big_m = m.sum(-1)
    big_n = n.sum(-1)
    total = row.sum(-1)
    population = population_estimates(m, n, within, row)[estimator]
    phi = within / (m * n)
    personalized = phi.mean(-1)

    size_term = n_clusters * (m / big_m[..., None] + n / big_n[..., None])
    pair_sum = row + col
    a = n_clusters * pair_sum / (big_m * big_n)[..., None]
    divisor = n_clusters - 1 if sigma11 == "corollary6" else (n_clusters - 1) ** 2 / n_clusters
    s11 = np.sum((a - population[..., None] * size_term) ** 2, axis=-1) / divisor
    s22 = phi.var(axis=-1, ddof=1)
    # psi_i. + psi_.i over psi.. is I (row_i + col_i) / total; when no pair is concordant
    # (total = 0) theta12 is 0 and so is the covariance.
    share = np.divide(
        n_clusters * pair_sum,
        total[..., None],
        out=np.zeros_like(pair_sum),
        where=total[..., None] > 0,
    )
    s12 = population * np.mean(phi * (share - size_term), axis=-1)
    sigma = np.stack([np.stack([s11, s12], -1), np.stack([s12, s22], -1)], -2)
    return JointEstimates(population, personalized, sigma, n_clusters)


def jackknife_population(
    m: FloatArray,
    n: FloatArray,
    within: FloatArray,
    row: FloatArray,
    col: FloatArray,
    population_estimator: PopulationEstimator = "corrected",
) -> FloatArray:
    """Leave-one-cluster-out jackknife variance of theta12^ (Quenouille 1956, Tukey 1958).

    ``(I - 1) / I sum_i (theta12^(-i) - mean_i theta12^(-i))^2``, where ``theta12^(-i)`` is
    the same estimator on the other ``I - 1`` clusters: without cluster i the between-
    cluster pairs lose ``row_i + col_i - 2 psi_ii``, M and N lose ``m_i`` and ``n_i`` (and
    ``sum_j m_j n_j`` loses ``m_i n_i`` for ``"between"``), and the corrected estimator's
    factor becomes ``(I - 1) / (I - 2)``. With few clusters Corollary 6's Sigma11 / I is
    too small (0.79-0.95 of the Monte-Carlo variance at 10 clusters in
    scripts/results/clustered_small_sample.md), the jackknife slightly large (1.1-1.3):
    the jackknife of a ratio keeps the second-order terms the delta method drops; in linear
    models the cluster jackknife is the CR3 variance (MacKinnon, Nielsen & Webb 2023).

    Returns
    -------
    ndarray, shape (...,)
        NaN with fewer than 3 clusters.
    """
    check_population_estimator(population_estimator)
    n_clusters = m.shape[-1]
    if n_clusters < 3:
        return np.full(m.shape[:-1], np.nan)
    big_m = m.sum(-1, keepdims=True)
    big_n = n.sum(-1, keepdims=True)
    between = (row.sum(-1) - within.sum(-1))[..., None]
    pairs = (big_m - m) * (big_n - n)
    if population_estimator == "between":
        pairs = pairs - (np.sum(m * n, axis=-1, keepdims=True) - m * n)
    with np.errstate(invalid="ignore", divide="ignore"):
        left = (between - (row + col - 2.0 * within)) / pairs
    if population_estimator == "corrected":
        left = left * ((n_clusters - 1) / (n_clusters - 2))
    dev = left - left.mean(-1, keepdims=True)
    return np.asarray((n_clusters - 1) / n_clusters * np.sum(dev**2, axis=-1), dtype=np.float64)


def equal_weight_estimate(
    m: FloatArray,
    n: FloatArray,
    within: FloatArray,
    wrow: FloatArray,
    wcol: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """theta'12^ of eq. 6 (every pair of clusters weighted equally) and its variance.

    ``theta'12 = E(psi(X_1, Y_2) / (M_1 N_2))`` is estimated by the U-statistic
    ``(I)_2^-1 sum_{i != j} h_ij`` with the asymmetric kernel ``h_ij = psi_ij / (m_i n_j)``.
    Its variance is Hoeffding's first-order term, ``Var(U) ~ Var(g(W)) / I`` with
    ``g(W_i) = E(h_i2 + h_2i | W_i)``, estimated by the sample variance of
    ``g_i = (sum_{j != i} h_ij + sum_{j != i} h_ji) / (I - 1)`` (Sen 1960). From the
    per-cluster sums of :func:`~fedroc.methods.clustered._core.equal_weight_terms`:
    ``sum_{j != i} h_ij = wrow_i / m_i - phi_i`` and ``sum_{j != i} h_ji = wcol_i / n_i - phi_i``.

    Returns
    -------
    estimate, variance : ndarray, shape (...,)
    """
    n_clusters = m.shape[-1]
    phi = within / (m * n)
    out_pairs = wrow / m - phi
    in_pairs = wcol / n - phi
    estimate = out_pairs.sum(-1) / (n_clusters * (n_clusters - 1))
    g = (out_pairs + in_pairs) / (n_clusters - 1)
    return estimate, g.var(axis=-1, ddof=1) / n_clusters


def obuchowski(
    m: FloatArray, n: FloatArray, row: FloatArray, col: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Obuchowski's (1997) clustered AUC (paper eq. 7) and its variance.

    Clusters may lack a class (``m_i = 0`` or ``n_i = 0``). With ``X_i. = row_i / N`` and
    ``Y_i. = col_i / M`` (sums of the placement values of the cluster's controls and cases)::

        theta = sum_i row_i / (M N)
        S10 = I10 / ((I10 - 1) M) sum_i (X_i. - m_i theta)^2
        S01 = I01 / ((I01 - 1) N) sum_i (Y_i. - n_i theta)^2
        S11 = I / (I - 1) sum_i (X_i. - m_i theta)(Y_i. - n_i theta)
        var = S10 / M + S01 / N + 2 S11 / (M N)

    where I10 (I01) counts the clusters with at least one control (case).

    Returns
    -------
    auc, variance : ndarray, shape (...,)
    """
    n_clusters = m.shape[-1]
    big_m = m.sum(-1)
    big_n = n.sum(-1)
    theta = row.sum(-1) / (big_m * big_n)
    x = row / big_n[..., None] - m * theta[..., None]
    y = col / big_m[..., None] - n * theta[..., None]
    i10 = np.count_nonzero(m > 0, axis=-1)
    i01 = np.count_nonzero(n > 0, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        s10 = i10 / ((i10 - 1) * big_m) * np.sum(x**2, axis=-1)
        s01 = i01 / ((i01 - 1) * big_n) * np.sum(y**2, axis=-1)
        s11 = n_clusters / (n_clusters - 1) * np.sum(x * y, axis=-1)
        variance = s10 / big_m + s01 / big_n + 2.0 * s11 / (big_m * big_n)
    return theta, variance


def ellipse_statistic(
    estimate: FloatArray, covariance: FloatArray, point: FloatArray
) -> FloatArray:
    """``(point - estimate)' covariance^-1 (point - estimate)``: the quantity (14).

    Vectorized: ``estimate`` and ``point`` of shape (..., 2), ``covariance`` (..., 2, 2).
    Approximately chi-squared with 2 degrees of freedom at the true point. A singular
    covariance gives inf (or NaN for a point on the estimate).
    """
    d = np.asarray(point, dtype=np.float64) - estimate
    c = np.asarray(covariance, dtype=np.float64)
    a, b, dd = c[..., 0, 0], c[..., 0, 1], c[..., 1, 1]
    det = a * dd - b * b
    quad = dd * d[..., 0] ** 2 - 2.0 * b * d[..., 0] * d[..., 1] + a * d[..., 1] ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(det > 0, quad / np.where(det > 0, det, 1.0), np.inf)


def ellipse_radius2(confidence_level: float) -> float:
    """Upper ``1 - level`` quantile of chi-squared with 2 degrees of freedom."""
    return float(stats.chi2.ppf(confidence_level, df=2))


def equality_z(
    population: FloatArray, personalized: FloatArray, covariance: FloatArray
) -> FloatArray:
    """``(theta12^ - theta11^) / sqrt(c' Cov c)`` with ``c = (1, -1)`` (section 6.3).

    Parameters
    ----------
    population : ndarray of float
        Estimates of the population AUC theta12.
    personalized : ndarray of float
        Estimates of the personalized AUC theta11, of the same shape.
    covariance : ndarray of float, shape (..., 2, 2)
        Covariance of (theta12^, theta11^), broadcast against the estimates.

    Returns
    -------
    ndarray of float
        The z statistic of H0: theta12 = theta11; NaN where the variance is not positive.
    """
    var = covariance[..., 0, 0] + covariance[..., 1, 1] - 2.0 * covariance[..., 0, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(var > 0, (population - personalized) / np.sqrt(np.maximum(var, 0)), np.nan)
