"""Data models of section 6.1 of Michael & Tian, with their closed-form AUCs.

- Allocation: a cluster first draws ``k`` uniformly from ``sizes`` (default {2, 3, 4, 5});
  ``k`` normal variables with unit variance and pairwise correlation ``rho_mn`` are drawn,
  those above 0 are the preliminary controls, the rest the preliminary cases, and one of
  each is added: ``M = Mbar + 1``, ``N = Nbar + 1``. Larger ``rho_mn`` makes clusters more
  unbalanced. (The authors' R code draws one ``k`` per simulation setting and clamps M to
  [1, k - 1] instead; the paper's text, followed here, draws ``k`` per cluster.)
- Bivariate normal model (11): within a cluster all M + N scores have unit variance and
  pairwise correlation ``rho``; controls have mean 0 and cases mean ``delta``. By
  Proposition 2 (eq. 12) ``theta12 = Phi(delta / sqrt 2)`` and
  ``theta11 = Phi(delta / sqrt(2 (1 - rho)))``.
- Censored model (13): the same scores clipped to ``[-bound, bound]``, which creates ties.

Generators are vectorized over simulation replicates: ``m`` and ``n`` of shape ``(R, I)``
give R independent samples of I clusters in one flat :class:`ClusteredSample`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import integrate, optimize, special, stats

from fedroc.clustered._core import cluster_terms
from fedroc.clustered._estimators import JointEstimates, joint_estimates
from fedroc.exceptions import InputError

__all__ = [
    "ClusteredSample",
    "binormal_aucs",
    "binormal_parameters",
    "censored_binormal_aucs",
    "censored_binormal_parameters",
    "estimate_replicates",
    "sample_allocation",
    "sample_binormal",
]

FloatArray = NDArray[np.float64]
_SQRT_2PI = math.sqrt(2.0 * math.pi)


# -- closed forms -----------------------------------------------------------------------
def binormal_aucs(delta: float, rho: float) -> tuple[float, float]:
    """``(theta12, theta11)`` of the bivariate normal model (eq. 12)."""
    _check_rho(rho)
    return (
        float(stats.norm.cdf(delta / math.sqrt(2.0))),
        float(stats.norm.cdf(delta / math.sqrt(2.0 * (1.0 - rho)))),
    )


def binormal_parameters(population_auc: float, personalized_auc: float) -> tuple[float, float]:
    """``(delta, rho)`` of the bivariate normal model with the given AUCs (eq. 12 solved).

    ``delta = sqrt 2 Phi^-1(theta12)`` and ``rho = 1 - delta^2 / (2 Phi^-1(theta11)^2)``. The
    model needs theta12 and theta11 on the same side of 1/2 with
    ``|theta11 - 1/2| >= |theta12 - 1/2|`` (so that ``0 <= rho < 1``).
    """
    t12, t11 = float(population_auc), float(personalized_auc)
    for name, v in (("population_auc", t12), ("personalized_auc", t11)):
        if not 0.0 < v < 1.0:
            raise InputError(f"{name} must lie in (0, 1); got {v!r}")
    z12, z11 = stats.norm.ppf(t12), stats.norm.ppf(t11)
    if z12 == 0.0 and z11 == 0.0:
        return 0.0, 0.0
    if z12 * z11 <= 0 or abs(z11) < abs(z12):
        raise InputError(
            f"the bivariate normal model cannot give population_auc={t12!r} with "
            f"personalized_auc={t11!r}: they must lie on the same side of 1/2 with the "
            "personalized AUC at least as far from 1/2"
        )
    delta = math.sqrt(2.0) * z12
    rho = max(0.0, 1.0 - delta**2 / (2.0 * z11**2))  # rounding can give -1e-16 at equality
    return float(delta), float(rho)


def _censored_auc(delta: float, rho: float, bound: float) -> float:
    # theta = P(Xb < Yb) - P(Xb < Yb, both clipped to one bound) + 1/2 P(X = Y), where the
    # clipped scores tie only when both fall beyond the same bound. With
    # Yb | Xb = x ~ N(delta + rho x, 1 - rho^2), each piece is a one-dimensional integral.
    a = bound
    s = math.sqrt(1.0 - rho * rho)

    # scipy.special.ndtr rather than stats.norm: quad calls these thousands of times.
    def cond_cdf(y: float, x: float) -> float:
        return float(special.ndtr((y - delta - rho * x) / s))

    def cond_sf(y: float, x: float) -> float:
        return float(special.ndtr((delta + rho * x - y) / s))

    def pdf(x: float) -> float:
        return math.exp(-0.5 * x * x) / _SQRT_2PI

    p_less = float(stats.norm.cdf(delta / math.sqrt(2.0 * (1.0 - rho))))
    below, _ = integrate.quad(
        lambda x: pdf(x) * (cond_cdf(-a, x) - cond_cdf(x, x)), -np.inf, -a, epsabs=1e-13
    )
    above, _ = integrate.quad(lambda x: pdf(x) * cond_sf(x, x), a, np.inf, epsabs=1e-13)
    tie_low, _ = integrate.quad(lambda x: pdf(x) * cond_cdf(-a, x), -np.inf, -a, epsabs=1e-13)
    tie_high, _ = integrate.quad(lambda x: pdf(x) * cond_sf(a, x), a, np.inf, epsabs=1e-13)
    return p_less - below - above + 0.5 * (tie_low + tie_high)


def censored_binormal_aucs(delta: float, rho: float, bound: float) -> tuple[float, float]:
    """``(theta12, theta11)`` of the censored bivariate normal model (13).

    By Proposition 2 both reduce to one control and one case: theta12 with independent
    scores (between clusters), theta11 with correlation ``rho`` (within a cluster). Computed
    by one-dimensional quadrature (absolute error about 1e-12). As ``delta`` grows both tend
    to ``(1 + Phi(bound)) / 2``.
    """
    _check_rho(rho)
    if not bound > 0:
        raise InputError(f"bound must be > 0; got {bound!r}")
    return _censored_auc(delta, 0.0, bound), _censored_auc(delta, rho, bound)


def censored_binormal_parameters(
    population_auc: float, personalized_auc: float, bound: float, *, closest: bool = False
) -> tuple[float, float]:
    """``(delta, rho)`` of the censored model with the given AUCs (root finding).

    ``delta`` solves theta12(delta) = population_auc, then ``rho`` in [0, 1) solves
    theta11(delta, rho) = personalized_auc. Censoring caps both AUCs below 1, so a target may
    be unreachable: then an InputError names the attainable range, or with ``closest=True``
    the ``rho`` that comes closest is returned.
    """
    t12, t11 = float(population_auc), float(personalized_auc)
    cap = 0.5 * (1.0 + float(stats.norm.cdf(bound)))
    if not 0.5 <= t12 < cap:
        raise InputError(
            f"population_auc must lie in [0.5, {cap:.6g}) for bound={bound!r}; got {t12!r}"
        )
    if t12 == 0.5:
        delta = 0.0
    else:
        hi = 1.0
        while _censored_auc(hi, 0.0, bound) < t12:
            hi *= 2.0
        delta = optimize.brentq(lambda d: _censored_auc(d, 0.0, bound) - t12, 0.0, hi, xtol=1e-12)
    rho_max = 1.0 - 1e-6

    def gap(r: float) -> float:
        return _censored_auc(delta, r, bound) - t11

    if gap(0.0) > 1e-12:
        raise InputError(
            f"personalized_auc={t11!r} is below population_auc={t12!r}; the censored model "
            "has theta11 >= theta12"
        )
    if gap(rho_max) < 0:
        if closest:
            res = optimize.minimize_scalar(
                lambda r: -_censored_auc(delta, r, bound),
                bounds=(0.0, rho_max),
                method="bounded",
                options={"xatol": 1e-9},
            )
            return float(delta), float(res.x)
        best = _censored_auc(delta, rho_max, bound)
        raise InputError(
            f"the censored model with bound={bound!r} and population_auc={t12!r} cannot reach "
            f"personalized_auc={t11!r}; it reaches about {best:.4f} at rho -> 1"
        )
    rho = 0.0 if gap(0.0) >= 0 else optimize.brentq(gap, 0.0, rho_max, xtol=1e-12)
    return float(delta), float(rho)


def _check_rho(rho: float) -> None:
    if not 0.0 <= rho < 1.0:
        raise InputError(f"rho must lie in [0, 1); got {rho!r}")


# -- generators -------------------------------------------------------------------------
def sample_allocation(
    n_clusters: int,
    rho_mn: float,
    *,
    rng: np.random.Generator,
    replicates: int | None = None,
    sizes: Sequence[int] = (2, 3, 4, 5),
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Controls ``m`` and cases ``n`` per cluster under the allocation of section 6.1.

    Returns arrays of shape ``(n_clusters,)``, or ``(replicates, n_clusters)``.
    """
    if not 0.0 <= rho_mn <= 1.0:
        raise InputError(f"rho_mn must lie in [0, 1]; got {rho_mn!r}")
    if int(n_clusters) != n_clusters or n_clusters < 1:
        raise InputError(f"n_clusters must be a positive integer; got {n_clusters!r}")
    size_choices = np.asarray(sizes, dtype=np.int64)
    if size_choices.ndim != 1 or size_choices.size == 0 or (size_choices < 1).any():
        raise InputError(f"sizes must be positive integers; got {sizes!r}")
    shape = (int(n_clusters),) if replicates is None else (int(replicates), int(n_clusters))
    k = rng.choice(size_choices, size=shape)
    width = int(size_choices.max())
    shared = rng.standard_normal((*shape, 1))
    own = rng.standard_normal((*shape, width))
    latent = math.sqrt(rho_mn) * shared + math.sqrt(1.0 - rho_mn) * own
    active = np.arange(width) < k[..., None]
    m_bar = np.count_nonzero((latent > 0) & active, axis=-1)
    return (m_bar + 1).astype(np.int64), (k - m_bar + 1).astype(np.int64)


@dataclass(frozen=True)
class ClusteredSample:
    """Flat arrays of one or more simulated samples.

    Attributes
    ----------
    y_true : ndarray of bool
        True for cases.
    y_score : ndarray of float
    cluster : ndarray of int
        Cluster code, ``replicate * n_clusters + i``.
    replicate : ndarray of int
    n_clusters : int
        Clusters per replicate.
    n_replicates : int
    """

    y_true: NDArray[np.bool_]
    y_score: FloatArray
    cluster: NDArray[np.int64]
    replicate: NDArray[np.int64]
    n_clusters: int
    n_replicates: int


def sample_binormal(
    m: ArrayLike,
    n: ArrayLike,
    *,
    delta: float,
    rho: float,
    rng: np.random.Generator,
    bound: float | None = None,
) -> ClusteredSample:
    """Scores of the bivariate normal model (11), censored at ``+-bound`` (13) if given.

    ``m`` and ``n`` (controls and cases per cluster) have shape ``(I,)`` or ``(R, I)``.
    """
    _check_rho(rho)
    m_arr = np.atleast_2d(np.asarray(m, dtype=np.int64))
    n_arr = np.atleast_2d(np.asarray(n, dtype=np.int64))
    if m_arr.shape != n_arr.shape or m_arr.ndim != 2:
        raise InputError(f"m and n must have one shape; got {m_arr.shape} and {n_arr.shape}")
    if (m_arr < 0).any() or (n_arr < 0).any():
        raise InputError("m and n must be non-negative")
    n_rep, n_clu = m_arr.shape
    mf, nf = m_arr.reshape(-1), n_arr.reshape(-1)
    size = mf + nf
    cluster = np.repeat(np.arange(mf.size, dtype=np.int64), size)
    start = np.cumsum(size) - size
    position = np.arange(cluster.size) - start[cluster]
    is_case = position >= mf[cluster]
    effect = rng.standard_normal(mf.size)
    noise = rng.standard_normal(cluster.size)
    score = math.sqrt(rho) * effect[cluster] + math.sqrt(1.0 - rho) * noise + delta * is_case
    if bound is not None:
        if not bound > 0:
            raise InputError(f"bound must be > 0; got {bound!r}")
        np.clip(score, -bound, bound, out=score)
    return ClusteredSample(
        y_true=is_case,
        y_score=score,
        cluster=cluster,
        replicate=cluster // n_clu,
        n_clusters=n_clu,
        n_replicates=n_rep,
    )


def estimate_replicates(sample: ClusteredSample, *, pair_correction: bool = True) -> JointEstimates:
    """theta12^, theta11^ and Sigma^ of every replicate at once (arrays of shape (R,)).

    Every cluster must have both classes, as the allocation of section 6.1 guarantees.
    """
    total = sample.n_clusters * sample.n_replicates
    terms = cluster_terms(
        sample.y_true, sample.y_score, sample.cluster, total, group=sample.replicate
    )
    if (terms.m == 0).any() or (terms.n == 0).any():
        raise InputError("estimate_replicates needs both classes in every cluster")
    shape = (sample.n_replicates, sample.n_clusters)
    return joint_estimates(
        terms.m.reshape(shape),
        terms.n.reshape(shape),
        terms.within.reshape(shape),
        terms.row.reshape(shape),
        terms.col.reshape(shape),
        pair_correction=pair_correction,
    )
