"""Simulation models of Michael & Tian (sections 3 and 6.1), with their closed-form AUCs.

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

- Random-effects model (8): ``X = Z + xi^x``, ``Y = Z + xi^y + delta`` with a cluster effect
  ``Z`` whose mean may depend on the cluster's allocation (M, N); closed forms (9), (10) and
  theta'12 of eq. 6 for any finitely supported allocation (:func:`allocation_pmf` gives the
  exact law of section 6.1's). With Z independent of (M, N) a large Var(Z) makes the
  population AUC uninformative (section 3.1.1); with E(Z) depending on (M, N) the population
  AUC is informative while the personalized one is not (section 3.1.2): Figure 1.
- Binary-response model (section 3.2): a cluster of K markers ``B = Z + xi``, statuses
  ``D ~ Bernoulli(sigma(beta0 Z + beta1 xi))``, analysed conditionally on M, N > 0; closed
  forms for the paper's two instances (``beta1 = 0``: theta11 = 1/2 < theta12;
  ``beta0 = 0``: theta12 near 1/2 < theta11).

Generators are vectorized over simulation replicates: ``m`` and ``n`` of shape ``(R, I)``
give R independent samples of I clusters in one flat :class:`ClusteredSample`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import integrate, optimize, special, stats

from fedroc.exceptions import InputError
from fedroc.methods.clustered._core import cluster_terms
from fedroc.methods.clustered._estimators import JointEstimates, joint_estimates

__all__ = [
    "LINKS",
    "ClusteredSample",
    "allocation_pmf",
    "binary_response_aucs",
    "binormal_aucs",
    "binormal_parameters",
    "censored_binormal_aucs",
    "censored_binormal_parameters",
    "estimate_replicates",
    "random_effects_aucs",
    "sample_allocation",
    "sample_binary_response",
    "sample_binormal",
    "sample_from_pmf",
    "sample_random_effects",
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
    """Draw controls ``m`` and cases ``n`` per cluster under the allocation of section 6.1.

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
        The sample each row belongs to, ``cluster // n_clusters`` (derived).
    n_clusters : int
        Clusters per replicate.
    n_replicates : int
    """

    y_true: NDArray[np.bool_]
    y_score: FloatArray
    cluster: NDArray[np.int64]
    replicate: NDArray[np.int64] = field(init=False)
    n_clusters: int
    n_replicates: int

    def __post_init__(self) -> None:
        """Derive :attr:`replicate` from the cluster codes."""
        object.__setattr__(self, "replicate", self.cluster // self.n_clusters)


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
        n_clusters=n_clu,
        n_replicates=n_rep,
    )


def estimate_replicates(
    sample: ClusteredSample,
    *,
    pair_correction: bool = True,
    population_estimator: str | None = None,
    sigma11: str = "corollary6",
) -> JointEstimates:
    """theta12^, theta11^ and Sigma^ of every replicate at once (arrays of shape (R,)).

    Every cluster must have both classes, as the allocation of section 6.1 guarantees.
    ``population_estimator`` and ``sigma11`` as in :func:`~fedroc.methods.clustered.clustered_auc`.
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
        population_estimator=population_estimator,  # type: ignore[arg-type]
        sigma11=sigma11,  # type: ignore[arg-type]
    )


# -- the exact allocation law of section 6.1 --------------------------------------------
Allocation = Mapping[tuple[int, int], float]


def allocation_pmf(
    rho_mn: float, sizes: Sequence[int] = (2, 3, 4, 5)
) -> dict[tuple[int, int], float]:
    """Tabulate the law of (M, N) under the allocation of section 6.1, ``{(m, n): probability}``.

    Given ``k`` (uniform over ``sizes``) the preliminary controls are the positive ones of
    ``k`` normals with pairwise correlation ``rho_mn``: given their common factor ``z``,
    each is positive with probability ``Phi(sqrt(rho_mn / (1 - rho_mn)) z)``, so
    ``P(Mbar = j | k) = C(k, j) E(Phi(a Z)^j (1 - Phi(a Z))^(k-j))``, a one-dimensional
    integral; ``M = Mbar + 1``, ``N = k - Mbar + 1``.
    """
    if not 0.0 <= rho_mn <= 1.0:
        raise InputError(f"rho_mn must lie in [0, 1]; got {rho_mn!r}")
    ks = [int(k) for k in sizes]
    if not ks or any(k < 1 for k in ks):
        raise InputError(f"sizes must be positive integers; got {sizes!r}")
    pmf: dict[tuple[int, int], float] = {}
    for k in ks:
        for j in range(k + 1):
            if rho_mn == 1.0:
                p = 0.5 if j in (0, k) else 0.0
                if k == 0:
                    p = 1.0
            elif rho_mn == 0.0:
                p = math.comb(k, j) / 2.0**k
            else:
                a = math.sqrt(rho_mn / (1.0 - rho_mn))

                def integrand(z: float, j: int = j, k: int = k, a: float = a) -> float:
                    q = float(special.ndtr(a * z))
                    return q**j * (1.0 - q) ** (k - j) * math.exp(-0.5 * z * z) / _SQRT_2PI

                p = math.comb(k, j) * integrate.quad(integrand, -np.inf, np.inf, epsabs=1e-13)[0]
            key = (j + 1, k - j + 1)
            pmf[key] = pmf.get(key, 0.0) + p / len(ks)
    return {key: p for key, p in pmf.items() if p > 0}


def _check_pmf(pmf: Allocation) -> tuple[NDArray[np.int64], NDArray[np.int64], FloatArray]:
    if not pmf:
        raise InputError("the allocation law is empty")
    keys = list(pmf)
    m = np.array([int(k[0]) for k in keys], dtype=np.int64)
    n = np.array([int(k[1]) for k in keys], dtype=np.int64)
    p = np.array([float(pmf[k]) for k in keys])
    if (m < 1).any() or (n < 1).any():
        raise InputError("every (m, n) of the allocation law must have m, n >= 1")
    if (p < 0).any() or abs(p.sum() - 1.0) > 1e-9:
        raise InputError(f"the allocation probabilities must be >= 0 and sum to 1; got {p.sum()!r}")
    return m, n, p / p.sum()


def sample_from_pmf(
    pmf: Allocation,
    n_clusters: int,
    *,
    rng: np.random.Generator,
    replicates: int | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Draw ``(m, n)`` per cluster from a finite allocation law."""
    m, n, p = _check_pmf(pmf)
    shape = (int(n_clusters),) if replicates is None else (int(replicates), int(n_clusters))
    idx = rng.choice(p.size, size=shape, p=p)
    return m[idx], n[idx]


# -- the random-effects model (8) -----------------------------------------------------------
ZMean = Callable[[NDArray[np.int64], NDArray[np.int64]], ArrayLike]


def sample_random_effects(
    m: ArrayLike,
    n: ArrayLike,
    *,
    delta: float,
    rng: np.random.Generator,
    z_sd: float = 1.0,
    z_mean: ZMean | None = None,
    noise_sd: float = 1.0,
) -> ClusteredSample:
    """Scores of the random-effects model (8).

    In cluster i, ``X_ik = Z_i + xi_ik`` (controls) and ``Y_il = Z_i + xi_il + delta``
    (cases), ``xi ~ N(0, noise_sd^2)`` independent of everything, and
    ``Z_i = z_mean(m_i, n_i) + z_sd e_i`` with ``e_i ~ N(0, 1)``: the cluster effect may
    depend on the cluster's allocation, which the paper allows (Z is not assumed
    independent of (M, N)). ``m`` and ``n`` have shape ``(I,)`` or ``(R, I)``.
    """
    if not noise_sd > 0 or not z_sd >= 0:
        raise InputError(f"noise_sd must be > 0 and z_sd >= 0; got {noise_sd!r}, {z_sd!r}")
    base = sample_binormal(m, n, delta=0.0, rho=0.0, rng=rng)
    m_arr = np.asarray(m, dtype=np.int64).reshape(-1)
    n_arr = np.asarray(n, dtype=np.int64).reshape(-1)
    mean = (
        np.zeros(m_arr.size)
        if z_mean is None
        else np.broadcast_to(np.asarray(z_mean(m_arr, n_arr), dtype=np.float64), m_arr.shape)
    )
    z = mean + z_sd * rng.standard_normal(m_arr.size)
    score = z[base.cluster] + noise_sd * base.y_score + delta * base.y_true
    return replace(base, y_score=score)


def random_effects_aucs(
    delta: float,
    pmf: Allocation,
    *,
    z_sd: float = 1.0,
    z_mean: ZMean | None = None,
    noise_sd: float = 1.0,
) -> dict[str, float]:
    """theta12, theta11 and theta'12 of the random-effects model (8), exactly.

    - theta11 = ``P(xi_1 - xi_2 < delta) = Phi(delta / (sqrt 2 noise_sd))`` (eq. 9);
    - theta12 = ``E(M_1 N_2 Phi((delta - mu_1 + mu_2) / s)) / (E(M) E(N))`` (eq. 10) with
      ``mu = z_mean(M, N)`` and ``s^2 = 2 z_sd^2 + 2 noise_sd^2``: a finite double sum over
      the allocation law ``pmf``;
    - theta'12 (eq. 6) = the same sum without the weights ``M_1 N_2 / (E(M) E(N))``.

    With ``z_mean`` None (Z independent of (M, N)) theta12 = theta'12.
    """
    if not noise_sd > 0 or not z_sd >= 0:
        raise InputError(f"noise_sd must be > 0 and z_sd >= 0; got {noise_sd!r}, {z_sd!r}")
    m, n, p = _check_pmf(pmf)
    mu = np.zeros(m.size) if z_mean is None else np.asarray(z_mean(m, n), dtype=np.float64)
    s = math.sqrt(2.0 * z_sd**2 + 2.0 * noise_sd**2)
    # Cluster a gives the control, cluster b the case.
    concordant = special.ndtr((delta - mu[:, None] + mu[None, :]) / s)
    pair_p = p[:, None] * p[None, :]
    e_m, e_n = float(p @ m), float(p @ n)
    return {
        "theta12": float(np.sum(pair_p * m[:, None] * n[None, :] * concordant) / (e_m * e_n)),
        "theta11": float(special.ndtr(delta / (math.sqrt(2.0) * noise_sd))),
        "theta12_prime": float(np.sum(pair_p * concordant)),
    }


# -- the binary-response model of section 3.2 ---------------------------------------------
LINKS: dict[str, Callable[[FloatArray], FloatArray]] = {
    "probit": lambda x: np.asarray(special.ndtr(x), dtype=np.float64),
    "logit": lambda x: np.asarray(special.expit(x), dtype=np.float64),
}


def _link(name: str) -> Callable[[FloatArray], FloatArray]:
    if name not in LINKS:
        raise InputError(f"link must be one of {sorted(LINKS)}; got {name!r}")
    return LINKS[name]


def sample_binary_response(
    n_clusters: int,
    size: int,
    *,
    beta0: float,
    beta1: float,
    rng: np.random.Generator,
    z_sd: float = 1.0,
    xi_sd: float = 1.0,
    link: str = "probit",
    replicates: int | None = None,
) -> ClusteredSample:
    """Clusters of the binary-response model of section 3.2, each holding both classes.

    A cluster of ``size`` markers ``B_i = Z + xi_i`` (``Z ~ N(0, z_sd^2)``,
    ``xi_i ~ N(0, xi_sd^2)``) with statuses ``D_i ~ Bernoulli(link(beta0 Z + beta1 xi_i))``;
    controls are the markers with ``D = 0``. Clusters without both classes are drawn again:
    the paper's analysis is conditional on M, N > 0.
    """
    sigma = _link(link)
    if int(size) != size or size < 2:
        raise InputError(f"size must be an integer >= 2; got {size!r}")
    if int(n_clusters) != n_clusters or n_clusters < 1:
        raise InputError(f"n_clusters must be a positive integer; got {n_clusters!r}")
    k = int(size)
    reps = 1 if replicates is None else int(replicates)
    need = reps * int(n_clusters)
    kept_b: list[FloatArray] = []
    kept_d: list[NDArray[np.bool_]] = []
    have = 0
    while have < need:
        batch = max(64, 2 * (need - have))
        z = z_sd * rng.standard_normal((batch, 1))
        xi = xi_sd * rng.standard_normal((batch, k))
        d = rng.random((batch, k)) < sigma(beta0 * z + beta1 * xi)
        both = d.any(axis=1) & ~d.all(axis=1)
        kept_b.append((z + xi)[both])
        kept_d.append(d[both])
        have += int(both.sum())
    b = np.concatenate(kept_b)[:need]
    d = np.concatenate(kept_d)[:need]
    cluster = np.repeat(np.arange(need, dtype=np.int64), k)
    return ClusteredSample(
        y_true=d.reshape(-1),
        y_score=b.reshape(-1),
        cluster=cluster,
        n_clusters=int(n_clusters),
        n_replicates=reps,
    )


def _grid(sd: float, points: int = 4001) -> tuple[FloatArray, FloatArray]:
    """Nodes and Simpson weights of N(0, sd^2)'s density over +-10 sd."""
    x = np.linspace(-10.0 * sd, 10.0 * sd, points)
    h = x[1] - x[0]
    w = np.ones(points)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return x, w * h / 3.0 * np.exp(-0.5 * (x / sd) ** 2) / (sd * _SQRT_2PI)


def binary_response_aucs(
    size: int,
    *,
    beta0: float,
    beta1: float,
    z_sd: float = 1.0,
    xi_sd: float = 1.0,
    link: str = "probit",
) -> tuple[float, float]:
    """``(theta12, theta11)`` of the binary-response model, conditional on M, N > 0.

    Closed forms (up to quadrature, absolute error about 1e-9) for the paper's two
    instances; other (beta0, beta1) have none here (simulate them).

    - ``beta1 = 0``: statuses follow the cluster effect only; theta11 = 1/2 and
      ``theta12 = E(Phi((Z_2 - Z_1) / (sqrt 2 xi_sd)) w0(Z_1) w1(Z_2)) / (E w0 E w1)`` with
      ``p = sigma(beta0 Z)``, ``w0 = (1 - p)(1 - (1 - p)^(K-1))`` (a control in a cluster
      holding a case) and ``w1 = p (1 - p^(K-1))``.
    - ``beta0 = 0``: statuses follow the within-cluster effects only; with
      ``f0(a) ~ phi(a) (1 - sigma(beta1 a))`` and ``f1(b) ~ phi(b) sigma(beta1 b)``,
      theta11 = ``P(a < b)`` and theta12 = ``E Phi((b - a) / (sqrt 2 z_sd))`` under f0 x f1.
    """
    sigma = _link(link)
    k = int(size)
    if k != size or k < 2:
        raise InputError(f"size must be an integer >= 2; got {size!r}")
    if not (xi_sd > 0 and z_sd > 0):
        raise InputError(f"z_sd and xi_sd must be > 0; got {z_sd!r}, {xi_sd!r}")
    if beta1 == 0:
        z, w = _grid(z_sd)
        p = sigma(beta0 * z)
        w0 = w * (1 - p) * (1 - (1 - p) ** (k - 1))
        w1 = w * p * (1 - p ** (k - 1))
        conc = special.ndtr((z[None, :] - z[:, None]) / (math.sqrt(2.0) * xi_sd))
        return float(w0 @ conc @ w1 / (w0.sum() * w1.sum())), 0.5
    if beta0 == 0:
        x, w = _grid(xi_sd)
        p = sigma(beta1 * x)
        f0 = w * (1 - p)
        f1 = w * p
        f0, f1 = f0 / f0.sum(), f1 / f1.sum()
        below = np.cumsum(f0) - 0.5 * f0  # P(a < b) on the grid, the node itself halved
        theta11 = float(f1 @ below)
        conc = special.ndtr((x[None, :] - x[:, None]) / (math.sqrt(2.0) * z_sd))
        return float(f0 @ conc @ f1), theta11
    raise InputError(
        "binary_response_aucs has closed forms for beta0 = 0 or beta1 = 0 (the paper's "
        f"instances); got beta0={beta0!r}, beta1={beta1!r}: estimate them by simulation"
    )
