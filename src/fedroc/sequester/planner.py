"""The load-factor planner of paper 2 (Tang et al., MIDRC; papers/NOTES.md section 2).

A custodian holds ``phi`` sequestered images and answers AUC queries on ``rho`` test
subsets of ``N`` images each. The *load factor* of the hash table that maps images to
subsets is ``xi = N rho / phi`` (values per key). The planner answers:

- which subset size a load factor gives (``N = xi phi / rho``, rounded up so the load
  factor is reached);
- the h-Thresholdout_AUC budget of eq. 3,
  ``B = sigma^5 N^2 / (512 (ln 8 + 2 sigma^2 N))``, and its privacy parameter
  ``epsilon = B / (sigma phi)`` (as the paper states it; see the threat model in
  :mod:`fedroc.sequester.engine` for what it does and does not cover);
- the minimum subset size for a given power of the test "AUC = 0.5" at a prevalence
  (Obuchowski's variance, :func:`fedroc.metrics.auc_sample_size`);
- the AUC standard error of one subset (Hanley & McNeil 1982);
- the inverse questions: which subset size and load factor give a requested budget at a
  noise rate, and which noise rate gives it at a load factor.

The budget counts perturbed answers; the engine allows ``floor(B)`` of them (the paper
rounds ``B = 2.09`` to 2.0), so that the number of noisy releases never exceeds ``B``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize

from fedroc._results import ResultMixin, format_table
from fedroc.exceptions import InputError
from fedroc.metrics import (
    auc_sample_size,
    hanley_mcneil_se,
    obuchowski_variance,
    roc_auc,
)

__all__ = [
    "Plan",
    "auc_iqr_by_load_factor",
    "auc_se_at",
    "budget_figure",
    "epsilon_of",
    "load_factor",
    "load_factor_for_budget",
    "min_subset_size",
    "noise_rate_for_budget",
    "plan",
    "power_figure",
    "power_grid",
    "subset_size",
    "subset_size_for_budget",
    "thresholdout_budget",
]

_LN8 = math.log(8.0)


def _positive(value: float, name: str) -> float:
    v = float(value)
    if not (v > 0 and math.isfinite(v)):
        raise InputError(f"{name} must be a positive number; got {value!r}")
    return v


def _count(value: int, name: str) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise InputError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


def _prevalence(value: float) -> float:
    p = float(value)
    if not 0.0 < p < 1.0:
        raise InputError(f"prevalence must lie in (0, 1); got {value!r}")
    return p


def load_factor(subset_size: int, n_subsets: int, n_images: int) -> float:
    """Load factor ``xi = N rho / phi`` of the image-to-subset hash table."""
    n = _count(subset_size, "subset_size")
    rho = _count(n_subsets, "n_subsets")
    phi = _count(n_images, "n_images")
    return n * rho / phi


def subset_size(load_factor: float, n_images: int, n_subsets: int) -> int:
    """Images per subset for a load factor: ``ceil(xi phi / rho)`` (at least 1).

    Examples
    --------
    The paper's clinical plan (1047 images, 100 subsets, load factor 400):

    >>> subset_size(400, 1047, 100)
    4188
    """
    xi = _positive(load_factor, "load_factor")
    phi = _count(n_images, "n_images")
    rho = _count(n_subsets, "n_subsets")
    # Rounding up keeps the realised load factor at or above the requested one; the
    # tolerance stops 600 * 1047 / 100 = 6282.000000001 from becoming 6283.
    return max(1, math.ceil(xi * phi / rho - 1e-9))


_subset_size_of = subset_size  # plan() has a parameter of the same name


def thresholdout_budget(subset_size: float, noise_rate: float) -> float:
    """Eq. 3: ``B = sigma^5 N^2 / (512 (ln 8 + 2 sigma^2 N))`` for subsets of ``N`` images.

    Examples
    --------
    >>> round(thresholdout_budget(6282, 1.0), 2)
    6.13
    """
    n = _positive(subset_size, "subset_size")
    s = _positive(noise_rate, "noise_rate")
    return s**5 * n * n / (512.0 * (_LN8 + 2.0 * s * s * n))


def epsilon_of(budget: float, noise_rate: float, n_images: int) -> float:
    """Privacy parameter the paper attaches to a budget: ``epsilon = B / (sigma phi)``."""
    if not (budget >= 0 and math.isfinite(budget)):
        raise InputError(f"budget must be a non-negative number; got {budget!r}")
    return float(budget) / (_positive(noise_rate, "noise_rate") * _count(n_images, "n_images"))


def subset_size_for_budget(budget: float, noise_rate: float) -> int:
    """Smallest subset size ``N`` whose eq.-3 budget reaches ``budget`` at ``noise_rate``.

    Eq. 3 rearranged is the quadratic ``sigma^5 N^2 - 1024 B sigma^2 N - 512 B ln 8 = 0``;
    its positive root, rounded up, is returned (the budget grows with ``N``).
    """
    b = _positive(budget, "budget")
    s = _positive(noise_rate, "noise_rate")
    a2 = s**5
    a1 = 1024.0 * b * s * s
    a0 = 512.0 * b * _LN8
    root = (a1 + math.sqrt(a1 * a1 + 4.0 * a2 * a0)) / (2.0 * a2)
    n = max(1, math.ceil(root - 1e-9))
    # Guard against the last ulp of the root: the budget at n must reach the request.
    while thresholdout_budget(n, s) < b * (1 - 1e-12):
        n += 1
    return n


def load_factor_for_budget(
    budget: float, noise_rate: float, n_images: int, n_subsets: int
) -> tuple[float, int]:
    """Load factor and subset size that give ``budget`` at ``noise_rate``.

    Returns ``(xi, N)`` with ``N = subset_size_for_budget(budget, noise_rate)`` and
    ``xi = N rho / phi``.
    """
    n = subset_size_for_budget(budget, noise_rate)
    return load_factor(n, n_subsets, n_images), n


def noise_rate_for_budget(budget: float, subset_size: int) -> float:
    """Noise rate at which subsets of ``subset_size`` images have the eq.-3 ``budget``.

    The budget increases with the noise rate (about ``sigma^3 N / 1024`` for large ``N``),
    so the root is unique; it is found by Brent's method.
    """
    b = _positive(budget, "budget")
    n = _count(subset_size, "subset_size")

    def gap(log_s: float) -> float:
        return math.log(thresholdout_budget(n, math.exp(log_s))) - math.log(b)

    lo, hi = math.log(1e-6), math.log(1e6)
    if gap(lo) > 0 or gap(hi) < 0:
        raise InputError(
            f"no noise rate in [1e-6, 1e6] gives budget {budget!r} with subsets of {n} images"
        )
    return math.exp(optimize.brentq(gap, lo, hi, xtol=1e-14, rtol=1e-14))


def _class_sizes(n: int, prevalence: float) -> tuple[int, int]:
    """Positives and negatives of a subset of ``n`` images at ``prevalence`` (>= 1 each)."""
    n_pos = min(max(round(prevalence * n), 1), n - 1)
    return n_pos, n - n_pos


def auc_se_at(
    auc: float, prevalence: float, *, load_factor: float, n_images: int, n_subsets: int
) -> float:
    """Hanley & McNeil SE of the AUC of one subset at a load factor.

    The subset holds ``N = ceil(xi phi / rho)`` images, ``round(prevalence N)`` of them
    positive; the SE falls like ``sqrt(rho / (xi phi))``.
    """
    n = subset_size(load_factor, n_images, n_subsets)
    if n < 2:
        raise InputError(f"a subset of {n} image cannot hold both classes")
    n_pos, n_neg = _class_sizes(n, _prevalence(prevalence))
    return hanley_mcneil_se(auc, n_pos, n_neg)


def min_subset_size(
    auc: float, prevalence: float, *, power: float = 0.8, alpha: float = 0.05
) -> int:
    """Smallest subset that detects ``auc`` against 0.5 with ``power`` at ``prevalence``.

    Cases are the positives: ``kappa = (1 - p) / p`` controls per case, and the size is
    ``n_cases + n_controls`` from :func:`fedroc.metrics.auc_sample_size` (Obuchowski).
    """
    p = _prevalence(prevalence)
    ss = auc_sample_size(auc, power=power, alpha=alpha, kappa=(1.0 - p) / p)
    return ss.n_cases + ss.n_controls


def power_grid(
    auc: float,
    prevalence: float,
    load_factors: ArrayLike,
    n_subsets: ArrayLike,
    n_images: int,
    *,
    alpha: float = 0.05,
) -> NDArray[np.float64]:
    """Power of the two-sided test AUC = 0.5 for subsets on a (load factor, subsets) grid.

    Entry ``[i, j]`` is for ``n_subsets[i]`` and ``load_factors[j]``: subsets of
    ``N = ceil(xi phi / rho)`` images hold ``n_cases = p N`` positives (not rounded, so the
    surface is smooth) and ``kappa = (1 - p) / p`` controls per case; the power is
    ``Phi((sqrt(n_cases) |theta - 0.5| - z sqrt(V0)) / sqrt(V))`` with Obuchowski's ``V``
    (the formula of :func:`fedroc.metrics.auc_power`, vectorized). Paper 2, Figure 3.
    """
    from scipy import stats

    p = _prevalence(prevalence)
    phi = _count(n_images, "n_images")
    xi = np.asarray(load_factors, dtype=np.float64)
    rho = np.asarray(n_subsets, dtype=np.float64)
    if (xi <= 0).any() or (rho < 1).any():
        raise InputError("load factors must be > 0 and numbers of subsets >= 1")
    kappa = (1.0 - p) / p
    v0 = obuchowski_variance(0.5, kappa)
    va = obuchowski_variance(auc, kappa)
    z = float(stats.norm.isf(alpha / 2.0))
    n = np.maximum(np.ceil(xi[None, :] * phi / rho[:, None] - 1e-9), 1.0)
    cases = p * n
    zb = (np.sqrt(cases) * abs(auc - 0.5) - z * math.sqrt(v0)) / math.sqrt(va)
    return np.asarray(stats.norm.cdf(zb), dtype=np.float64)


@dataclass(frozen=True, repr=False)
class Plan(ResultMixin):
    """A sequestration plan: subsets, h-Thresholdout_AUC budget, privacy, precision.

    Attributes
    ----------
    n_images, n_subsets : int
        ``phi`` and ``rho``.
    load_factor : float
        Realised ``N rho / phi`` (at least the requested one).
    subset_size : int
        ``N``, images per subset.
    noise_rate : float
        ``sigma``, the scale of the Laplace perturbation.
    budget : float
        Eq. 3 at ``N`` and ``sigma``.
    budget_units : int
        ``floor(budget)``: perturbed answers a developer may receive.
    epsilon : float
        ``budget / (sigma phi)``.
    auc, prevalence : float or None
        Planning assumptions for the AUC SE and the power.
    auc_se : float or None
        Hanley & McNeil SE of one subset's AUC (when ``auc`` and ``prevalence`` are given).
    min_subset_size : int or None
        Smallest subset reaching ``power`` at ``alpha`` (Obuchowski).
    subset_power : float or None
        Power of one subset of ``N`` images.
    power, alpha : float
        Targets used for ``min_subset_size``.
    """

    n_images: int
    n_subsets: int
    load_factor: float
    subset_size: int
    noise_rate: float
    budget: float
    budget_units: int
    epsilon: float
    auc: float | None = None
    prevalence: float | None = None
    auc_se: float | None = None
    min_subset_size: int | None = None
    subset_power: float | None = None
    power: float = 0.8
    alpha: float = 0.05

    def summary(self) -> str:
        return format_table(
            [
                ("images (phi)", self.n_images),
                ("subsets (rho)", self.n_subsets),
                ("load factor (xi)", self.load_factor),
                ("subset size (N)", self.subset_size),
                ("noise rate (sigma)", self.noise_rate),
                ("budget (eq. 3)", self.budget),
                ("perturbed answers allowed", self.budget_units),
                ("epsilon = B / (sigma phi)", self.epsilon),
                ("AUC SE of one subset", self.auc_se),
                (f"minimum subset size (power {self.power:g})", self.min_subset_size),
                ("power of one subset", self.subset_power),
            ],
            title="Sequestration plan (h-Thresholdout_AUC)",
        )


def plan(
    n_images: int,
    n_subsets: int,
    *,
    noise_rate: float,
    load_factor: float | None = None,
    subset_size: int | None = None,
    budget: float | None = None,
    auc: float | None = None,
    prevalence: float | None = None,
    power: float = 0.8,
    alpha: float = 0.05,
) -> Plan:
    """Plan subsets from exactly one of a load factor, a subset size or a target budget.

    Examples
    --------
    >>> p = plan(1047, 100, noise_rate=1.0, load_factor=600)
    >>> p.subset_size, round(p.budget, 2), p.budget_units
    (6282, 6.13, 6)
    """
    phi = _count(n_images, "n_images")
    rho = _count(n_subsets, "n_subsets")
    sigma = _positive(noise_rate, "noise_rate")
    given = [k for k, v in (("load_factor", load_factor), ("subset_size", subset_size),
                            ("budget", budget)) if v is not None]  # fmt: skip
    if len(given) != 1:
        raise InputError(
            "give exactly one of load_factor, subset_size and budget; got "
            + (", ".join(given) if given else "none")
        )
    if load_factor is not None:
        n = _subset_size_of(load_factor, phi, rho)
    elif subset_size is not None:
        n = _count(subset_size, "subset_size")
    else:
        assert budget is not None
        n = subset_size_for_budget(budget, sigma)
    b = thresholdout_budget(n, sigma)
    xi = n * rho / phi
    if (auc is None) != (prevalence is None):
        raise InputError("give auc and prevalence together (both or neither)")
    se = min_n = sub_power = None
    if auc is not None and prevalence is not None:
        p = _prevalence(prevalence)
        if n >= 2:
            n_pos, n_neg = _class_sizes(n, p)
            se = hanley_mcneil_se(auc, n_pos, n_neg)
            sub_power = float(power_grid(auc, p, [xi], [rho], phi, alpha=alpha)[0, 0])
        min_n = min_subset_size(auc, p, power=power, alpha=alpha)
    return Plan(
        n_images=phi,
        n_subsets=rho,
        load_factor=xi,
        subset_size=n,
        noise_rate=sigma,
        budget=b,
        budget_units=math.floor(b + 1e-12),
        epsilon=epsilon_of(b, sigma, phi),
        auc=None if auc is None else float(auc),
        prevalence=None if prevalence is None else float(prevalence),
        auc_se=se,
        min_subset_size=min_n,
        subset_power=sub_power,
        power=power,
        alpha=alpha,
    )


# --------------------------------------------------------------------------- figures


def auc_iqr_by_load_factor(
    y_true: ArrayLike,
    y_score: ArrayLike,
    load_factors: ArrayLike,
    *,
    n_subsets: int = 100,
    prevalence: float | None = None,
    seed: int | np.random.Generator | None = 0,
) -> NDArray[np.float64]:
    """Interquartile range of subset AUCs when ``rho`` subsets are resampled at each load factor.

    At each load factor, ``n_subsets`` subsets of ``N = ceil(xi phi / rho)`` images are drawn
    with replacement at ``prevalence`` (default: the data's), as the paper's Figure 5 does
    with its clinical data; the IQR of their AUCs is returned (one value per load factor).
    """
    from fedroc.sequester.engine import draw_subsets, subset_aucs

    y = np.asarray(y_true, dtype=bool)
    s = np.asarray(y_score, dtype=np.float64)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    out = []
    for xi in np.asarray(load_factors, dtype=np.float64):
        n = subset_size(float(xi), y.size, n_subsets)
        table = draw_subsets(
            y, n_subsets=n_subsets, subset_size=n, prevalence=prevalence, replace=True, seed=rng
        )
        aucs = subset_aucs(table, y, s)
        q1, q3 = np.percentile(aucs, [25, 75])
        out.append(q3 - q1)
    return np.asarray(out)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def budget_figure(
    n_images: int = 1047,
    n_subsets: int = 100,
    *,
    noise_rates: Sequence[float] = (0.4, 0.6, 0.8, 1.0),
    load_factors: ArrayLike | None = None,
    auc: float = 0.81,
    prevalence: float = 0.12,
    data: tuple[ArrayLike, ArrayLike] | None = None,
    seed: int = 0,
) -> Any:
    """Paper 2, Figure 5: budget against load factor beside the AUC SE and resampled IQR.

    Left: eq.-3 budget for each noise rate. Right: Hanley & McNeil SE of one subset's AUC
    (dashed) and the IQR of resampled subset AUCs (solid) from ``data = (labels, scores)``;
    without data a binormal sample of ``n_images`` with AUC ``auc`` at ``prevalence`` is
    simulated (the paper's clinical data are not public).
    """
    from scipy import stats

    plt = _plt()
    xs = np.arange(10, 600, 20.0) if load_factors is None else np.asarray(load_factors, float)
    if data is None:
        rng = np.random.default_rng(seed)
        y = rng.random(n_images) < prevalence
        # Binormal with equal variances: AUC = Phi(d / sqrt(2)).
        d = math.sqrt(2.0) * float(stats.norm.ppf(auc))
        s = rng.normal(size=n_images) + d * y
        source = f"simulated binormal data, AUC {roc_auc(y, s):.3f}"
    else:
        y = np.asarray(data[0], dtype=bool)
        s = np.asarray(data[1], dtype=np.float64)
        source = f"given data, AUC {roc_auc(y, s):.3f}"
    phi = int(y.size)
    fig, (ax_b, ax_v) = plt.subplots(1, 2, figsize=(10, 4.2))
    for sigma in noise_rates:
        budgets = [thresholdout_budget(subset_size(x, phi, n_subsets), sigma) for x in xs]
        ax_b.plot(xs, budgets, lw=1.6, label=f"sigma = {sigma:g}")
    ax_b.set(xlabel="load factor", ylabel="h-Thresholdout_AUC budget (eq. 3)",
             title=f"Budget ({phi} images, {n_subsets} subsets)")  # fmt: skip
    ax_b.legend(fontsize=8)
    p_data = float(y.mean())
    auc_data = roc_auc(y, s)
    se = [auc_se_at(auc_data, p_data, load_factor=x, n_images=phi, n_subsets=n_subsets) for x in xs]
    iqr = auc_iqr_by_load_factor(y, s, xs, n_subsets=n_subsets, seed=seed)
    ax_v.plot(xs, iqr, color="tab:blue", lw=1.6, label="AUC IQR (resampled subsets)")
    ax_v.plot(xs, se, color="tab:blue", ls="--", lw=1.4, label="AUC SE (Hanley & McNeil)")
    ax_v.set(xlabel="load factor", ylabel="AUC variation", title=f"AUC variation ({source})")
    ax_v.legend(fontsize=8)
    fig.tight_layout()
    return fig


def power_figure(
    n_images: int = 1047,
    *,
    auc: float = 0.81,
    prevalence: float = 0.3,
    max_load_factor: float = 2.0,
    max_subsets: int = 100,
    alpha: float = 0.05,
    n_points: int = 10,
    seed: int = 0,
) -> Any:
    """Paper 2, Figure 3: power of the test AUC = 0.5 over load factor and number of subsets.

    ``n_points`` random (load factor, subsets) pairs are marked in red and labelled with
    their subset size, as in the paper.
    """
    plt = _plt()
    xi = np.linspace(max_load_factor / 200, max_load_factor, 200)
    rho = np.arange(1, max_subsets + 1)
    z = power_grid(auc, prevalence, xi, rho, n_images, alpha=alpha)
    fig, ax = plt.subplots(figsize=(6, 4.8))
    cs = ax.contourf(xi, rho, z, levels=np.linspace(0, 1, 11), cmap="viridis")
    ax.contour(xi, rho, z, levels=[0.8], colors="white", linewidths=1.0)
    fig.colorbar(cs, ax=ax, label="power")
    rng = np.random.default_rng(seed)
    px = rng.uniform(0.1 * max_load_factor, max_load_factor, n_points)
    py = rng.integers(5, max_subsets + 1, n_points)
    ax.scatter(px, py, color="red", s=18, zorder=3)
    for x, r in zip(px, py, strict=True):
        ax.annotate(f"n={subset_size(float(x), n_images, int(r))}", (x, r), fontsize=7,
                    color="red", xytext=(3, 3), textcoords="offset points")  # fmt: skip
    ax.set(xlabel="load factor", ylabel="number of test subsets",
           title=f"Power (AUC {auc:g}, prevalence {prevalence:g}, {n_images} images)")  # fmt: skip
    fig.tight_layout()
    return fig
