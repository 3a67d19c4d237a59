"""The paper's figures (paper 2, Tang et al.): Figures 3, 4 and 5.

- :func:`power_figure`: Figure 3, power of the test AUC = 0.5 over load factor and number
  of subsets.
- :func:`perturbation_figure`: Figure 4, the perturbation h-Thresholdout_AUC adds to each
  subset's AUC at load factors 10 and 70 (perturbed subsets in blue, unperturbed in
  orange); the numbers are :func:`perturbation_by_subset`.
- :func:`budget_figure`: Figure 5, eq.-3 budget against load factor beside the AUC SE and
  the IQR of resampled subset AUCs (:func:`auc_iqr_by_load_factor`).

The noise of a figure comes from a seeded generator: a figure is an illustration for the
custodian, not a release. ``fedroc figures --paper 2 --out DIR`` writes all three
(registered with :func:`fedroc.figures.paper_figure`); ``fedroc sequester figure KIND``
writes one with its options.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from fedroc._plotting import new_figure, save_figure
from fedroc.exceptions import InputError
from fedroc.figures import paper_figure
from fedroc.methods.sequester import (
    Mechanism,
    SubsetTable,
    auc_se_at,
    draw_subsets,
    power_grid,
    subset_aucs,
    subset_size,
    thresholdout_budget,
)
from fedroc.metrics import roc_auc

__all__ = [
    "Perturbation",
    "auc_iqr_by_load_factor",
    "budget_figure",
    "perturbation_by_subset",
    "perturbation_figure",
    "power_figure",
]


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
    y = np.asarray(y_true, dtype=bool)
    s = np.asarray(y_score, dtype=np.float64)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    out = []
    for xi in np.asarray(load_factors, dtype=np.float64):
        _, aucs = _resampled_aucs(y, s, float(xi), n_subsets, prevalence, rng)
        q1, q3 = np.percentile(aucs, [25, 75])
        out.append(q3 - q1)
    return np.asarray(out)


def _resampled_aucs(
    y: NDArray[np.bool_],
    s: NDArray[np.float64],
    load_factor: float,
    n_subsets: int,
    prevalence: float | None,
    rng: np.random.Generator,
) -> tuple[SubsetTable, NDArray[np.float64]]:
    """Draw subsets of ``N = ceil(xi phi / rho)`` images as the paper does; give their AUCs.

    The paper draws with replacement, uncapped (``max_copies=0``): its figures are about
    the subsets' AUCs, not the privacy of a published plan.
    """
    n = subset_size(load_factor, y.size, n_subsets)
    table = draw_subsets(y, n_subsets=n_subsets, subset_size=n, prevalence=prevalence,
                         replace=True, max_copies=0, seed=rng)  # fmt: skip
    return table, subset_aucs(table, y, s)


def _figure_data(
    n_images: int,
    auc: float,
    prevalence: float,
    data: tuple[ArrayLike, ArrayLike] | None,
    seed: int,
) -> tuple[NDArray[np.bool_], NDArray[np.float64], str]:
    """Labels, scores and a caption: ``data`` if given, else a binormal sample.

    The paper's clinical data are not public: the sample has ``n_images`` images at
    ``prevalence`` and equal-variance binormal scores with AUC ``auc``.
    """
    if data is None:
        rng = np.random.default_rng(seed)
        y = rng.random(n_images) < prevalence
        # Binormal with equal variances: AUC = Phi(d / sqrt(2)).
        d = math.sqrt(2.0) * float(stats.norm.ppf(auc))
        s = rng.normal(size=n_images) + d * y
        return y, s, f"simulated binormal data, AUC {roc_auc(y, s):.3f}"
    y = np.asarray(data[0], dtype=bool)
    s = np.asarray(data[1], dtype=np.float64)
    return y, s, f"given data, AUC {roc_auc(y, s):.3f}"


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
    xs = np.arange(10, 600, 20.0) if load_factors is None else np.asarray(load_factors, float)
    y, s, source = _figure_data(n_images, auc, prevalence, data, seed)
    phi = int(y.size)
    fig = new_figure((10, 4.2))
    ax_b, ax_v = fig.subplots(1, 2)
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
    xi = np.linspace(max_load_factor / 200, max_load_factor, 200)
    rho = np.arange(1, max_subsets + 1)
    z = power_grid(auc, prevalence, xi, rho, n_images, alpha=alpha)
    fig = new_figure((6, 4.8))
    ax = fig.add_subplot()
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


@dataclass(frozen=True)
class Perturbation:
    """What h-Thresholdout_AUC does to each subset's AUC at one load factor (Figure 4).

    Attributes
    ----------
    load_factor : float
        Realised ``N rho / phi``.
    subset_size : int
    whole_auc : float
        AUC of the whole set.
    subset_auc : ndarray, shape (n_subsets,)
        Unperturbed AUC of each subset (subset ids 1..n_subsets in order).
    perturbed : ndarray of bool
        ``|subset_auc - whole_auc| > T``: the subsets whose answer carries noise.
    noise : ndarray
        ``psi ~ Lap(sigma)`` added to each perturbed subset, 0 elsewhere.
    """

    load_factor: float
    subset_size: int
    whole_auc: float
    subset_auc: NDArray[np.float64]
    perturbed: NDArray[np.bool_]
    noise: NDArray[np.float64]


def perturbation_by_subset(
    y_true: ArrayLike,
    y_score: ArrayLike,
    load_factor: float,
    *,
    n_subsets: int = 100,
    threshold: float = 0.02,
    noise_rate: float = 0.124,
    prevalence: float | None = None,
    seed: int | np.random.Generator | None = 0,
) -> Perturbation:
    """Answer every subset once with h-Thresholdout_AUC, as the paper's Figure 4 does.

    ``n_subsets`` subsets of ``N = ceil(xi phi / rho)`` images are drawn with replacement;
    each is answered by :class:`Mechanism` ``("h-thresholdout")`` against the whole set's
    AUC with an unlimited budget (the figure shows the rule, not a developer's session).
    """
    y = np.asarray(y_true, dtype=bool)
    s = np.asarray(y_score, dtype=np.float64)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    table, aucs = _resampled_aucs(y, s, float(load_factor), n_subsets, prevalence, rng)
    whole = roc_auc(y, s)
    mech = Mechanism("h-thresholdout", threshold=threshold, noise_rate=noise_rate)
    answers = [mech.answer(a, whole, budget=n_subsets, rng=rng) for a in aucs]
    return Perturbation(
        load_factor=table.load_factor,
        subset_size=table.subset_size,
        whole_auc=whole,
        subset_auc=aucs,
        perturbed=np.array([a.spent == 1 for a in answers]),
        noise=np.array([a.noise for a in answers]),
    )


def perturbation_figure(
    n_images: int = 1047,
    n_subsets: int = 100,
    *,
    load_factors: Sequence[float] = (10.0, 70.0),
    threshold: float = 0.02,
    noise_rate: float = 0.124,
    auc: float = 0.81,
    prevalence: float = 0.12,
    data: tuple[ArrayLike, ArrayLike] | None = None,
    seed: int = 0,
) -> Any:
    """Paper 2, Figure 4: perturbation of each subset's AUC at load factors 10 and 70.

    One panel per load factor: the noise ``psi`` added to each subset's AUC against the
    subset id, blue where ``|AUC(subset) - AUC(whole set)| > T`` (perturbed), orange at 0
    where the exact AUC is answered. Without ``data = (labels, scores)`` a binormal sample
    of ``n_images`` with AUC ``auc`` at ``prevalence`` is used.
    """
    if not load_factors:
        raise InputError("load_factors must name at least one load factor")
    y, s, source = _figure_data(n_images, auc, prevalence, data, seed)
    rng = np.random.default_rng(seed + 1)
    fig = new_figure((5.2 * len(load_factors), 4.0))
    axes = fig.subplots(1, len(load_factors), sharey=True, squeeze=False)
    ids = np.arange(1, n_subsets + 1)
    for ax, xi in zip(axes[0], load_factors, strict=True):
        p = perturbation_by_subset(y, s, xi, n_subsets=n_subsets, threshold=threshold,
                                   noise_rate=noise_rate, seed=rng)  # fmt: skip
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.scatter(ids[~p.perturbed], p.noise[~p.perturbed], color="tab:orange", s=14,
                   label=f"unperturbed ({int((~p.perturbed).sum())})")  # fmt: skip
        ax.scatter(ids[p.perturbed], p.noise[p.perturbed], color="tab:blue", s=14,
                   label=f"perturbed ({int(p.perturbed.sum())})")  # fmt: skip
        ax.set(xlabel="test subset id",
               title=f"load factor {xi:g} (subsets of {p.subset_size} images)")  # fmt: skip
        ax.legend(fontsize=8, loc="upper right")
    axes[0][0].set_ylabel("perturbation of the subset AUC (psi)")
    fig.suptitle(f"Paper 2, Figure 4: h-Thresholdout_AUC, T = {threshold:g}, "
                 f"sigma = {noise_rate:g}; "
                 f"{source}", fontsize=9)  # fmt: skip
    fig.tight_layout()
    return fig


def _save(fig: Any, path: Path, title: str) -> Path:
    """Write a figure titled with the paper's figure number (``title``, unless it has one)."""
    if title:
        fig.suptitle(title, fontsize=9)
    return save_figure(fig, path, dpi=120)


@paper_figure(2, "3", "Power of the test AUC = 0.5 over load factor and number of subsets")
def _figure3(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    fig = power_figure(seed=seed)
    return _save(fig, path, "Paper 2, Figure 3: power over load factor and subsets")


@paper_figure(2, "4", "Perturbation of each subset's AUC at load factors 10 and 70")
def _figure4(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    fig = perturbation_figure(n_subsets=40 if quick else 100, seed=seed)
    return _save(fig, path, "")


@paper_figure(2, "5", "Budget against load factor beside the AUC SE and IQR of subsets")
def _figure5(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    xs = np.arange(10, 600, 100.0) if quick else None
    fig = budget_figure(load_factors=xs, seed=seed)
    return _save(fig, path, "Paper 2, Figure 5: budget, AUC SE and IQR against load factor")
