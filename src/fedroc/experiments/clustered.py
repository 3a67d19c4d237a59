"""Paper 3's figures that fedroc reproduces (``fedroc figures --paper 3 --out DIR``).

- Figure 1: rug plots of fifteen clusters under the random-effects model (8): (a) the
  personalized AUC informative, the population AUC not (Z independent of (M, N), large
  Var(Z), section 3.1.1); (b) the reverse (E(Z) depending on (M, N), no shift, 3.1.2).
- Figure 4: power of the one-sided z-test of H0: theta12 = theta11 (section 6.3) over
  the triangle 1/2 < theta12 <= theta11 < 1, I = 10, under models (11) and (13).

Not reproduced: Figure 2 (causal diagrams, drawings without data), Figure 3 (a sketch of
atoms near the diagonal; its content is :func:`~fedroc.methods.clustered.finite_support_bounds`)
and Figure 5 (confidence ellipses of the NYC and Boston Terry-stop data, which fedroc does
not ship; ``fedroc clustered DATA --plot`` draws that view for any data).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from fedroc._plotting import new_figure, save_figure
from fedroc.exceptions import InputError
from fedroc.figures import paper_figure
from fedroc.methods.clustered import clustered_auc, equality_z
from fedroc.methods.clustered.models import (
    ZMean,
    allocation_pmf,
    binormal_parameters,
    censored_binormal_parameters,
    estimate_replicates,
    random_effects_aucs,
    sample_allocation,
    sample_binormal,
    sample_from_pmf,
    sample_random_effects,
)
from fedroc.methods.clustered.plots import rug_axes

__all__ = ["CENSOR_BOUND", "figure1", "figure4", "power_grid", "power_surface_figure"]

# The authors' R code censors at |qnorm(0.2)|; the paper does not state the bound.
CENSOR_BOUND = float(-stats.norm.ppf(0.2))


def _informative_population_mean(m: NDArray[np.int64], n: NDArray[np.int64]) -> NDArray:
    # The authors' Figure 1b: clusters with more cases than controls sit high, the others low.
    return (n * (n > m) - m * (n <= m)) / 5.0


@dataclass(frozen=True)
class _Panel:
    delta: float
    z_sd: float
    noise_sd: float
    z_mean: ZMean | None
    pmf: dict[tuple[int, int], float]


FIGURE1_PANELS = {
    # (a) Section 3.1.1: Z independent of (M, N) with Var(Z) = 0.99 against a noise variance
    # of 0.01 (the authors' cc = .99), shift 0.3: theta11 near 1, theta12 near 1/2.
    "a": _Panel(
        0.3,
        float(np.sqrt(0.99)),
        0.1,
        None,
        {(m, n): 1 / 64 for m in range(1, 9) for n in range(1, 9)},
    ),
    # (b) Section 3.1.2: no shift, E(Z) rising with the share of cases (the authors' mm),
    # unbalanced clusters (section 6.1's allocation of 8 with rho_MN = .99).
    "b": _Panel(
        0.0, 0.0, float(np.sqrt(0.5)), _informative_population_mean, allocation_pmf(0.99, (8,))
    ),
}


@paper_figure(3, "1", "Rug plots of 15 clusters: personalized vs population AUC (model (8))")
def figure1(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    """Figure 1 (a) and (b), with the true and estimated AUCs in each panel's title."""
    rng = np.random.default_rng(seed)
    fig = new_figure((10, 5.5))
    axes = fig.subplots(1, 2)
    for ax, (panel, spec) in zip(axes, FIGURE1_PANELS.items(), strict=True):
        m, n = sample_from_pmf(spec.pmf, 15, rng=rng)
        sample = sample_random_effects(
            m,
            n,
            delta=spec.delta,
            rng=rng,
            z_sd=spec.z_sd,
            z_mean=spec.z_mean,
            noise_sd=spec.noise_sd,
        )
        truth = random_effects_aucs(
            spec.delta, spec.pmf, z_sd=spec.z_sd, z_mean=spec.z_mean, noise_sd=spec.noise_sd
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the figure shows estimates, not intervals
            est = clustered_auc(sample.y_true, sample.y_score, sample.cluster)
        rug_axes(
            ax,
            sample.y_true,
            sample.y_score,
            sample.cluster,
            title=(
                f"({panel}) theta11 = {truth['theta11']:.2f} (est. {est.personalized_auc:.2f}), "
                f"theta12 = {truth['theta12']:.2f} (est. {est.population_auc:.2f})"
            ),
        )
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8)
    fig.suptitle(
        "Paper 3, Figure 1: (a) informative personalized AUC, uninformative population AUC; "
        "(b) the reverse",
        fontsize=10,
    )
    return save_figure(fig, path, dpi=110, rect=(0, 0.05, 1, 1))


def power_grid(
    model: str,
    reps: int,
    n_clusters: int,
    seed: int,
    step: float = 0.025,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Rejection rates of the one-sided test (level 0.05) on a grid of cell centres.

    Returns the centres and the rates with theta12^ = I/(I-1) eq. 5 (fedroc's default) and
    with eq. 5 as printed, both indexed [theta11, theta12]; NaN outside the triangle and
    where the censored model cannot reach the point. The paper draws random points of the
    triangle; a grid gives the same surface with a fixed number of replicates per point.
    """
    if model not in ("binormal", "censored"):
        raise InputError(f"model must be 'binormal' or 'censored'; got {model!r}")
    centres = np.arange(0.5 + step / 2, 1.0, step)
    power = np.full((2, centres.size, centres.size), np.nan)
    seeds = np.random.SeedSequence(seed).spawn(centres.size**2)
    z_crit = stats.norm.ppf(0.05)
    for j, t12 in enumerate(centres):
        for i, t11 in enumerate(centres):
            if t11 < t12:
                continue
            try:
                if model == "binormal":
                    delta, rho = binormal_parameters(t12, t11)
                    bound = None
                else:
                    delta, rho = censored_binormal_parameters(t12, t11, CENSOR_BOUND)
                    bound = CENSOR_BOUND
            except InputError:
                continue  # outside what the censored model can reach
            rng = np.random.default_rng(seeds[i * centres.size + j])
            m, n = sample_allocation(n_clusters, 0.0, rng=rng, replicates=reps)
            sample = sample_binormal(m, n, delta=delta, rho=rho, rng=rng, bound=bound)
            for k, corrected in enumerate((True, False)):
                est = estimate_replicates(sample, pair_correction=corrected)
                z = equality_z(est.population, est.personalized, est.covariance)
                power[k, i, j] = float(np.mean(np.nan_to_num(z, nan=0.0) < z_crit))
    return centres, power[0], power[1]


def power_surface_figure(
    results: dict[str, tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]],
    path: Path,
    step: float,
    n_clusters: int,
) -> Path:
    """Draw the power surfaces of :func:`power_grid` side by side (Figure 4)."""
    fig = new_figure((10, 4.6))
    axes = np.atleast_1d(fig.subplots(1, len(results)))
    titles = {"binormal": "(a) bivariate normal model (11)", "censored": "(b) censored model (13)"}
    mesh = None
    for ax, (model, (centres, power, _)) in zip(axes, results.items(), strict=True):
        edges = np.append(centres - step / 2, centres[-1] + step / 2)
        mesh = ax.pcolormesh(edges, edges, power, vmin=0, vmax=1, cmap="viridis")
        ax.plot([0.5, 1], [0.5, 1], color="white", lw=0.8)
        ax.set(
            xlim=(0.5, 1),
            ylim=(0.5, 1),
            aspect="equal",
            xlabel="population AUC theta12",
            ylabel="personalized AUC theta11",
            title=titles[model],
        )
    fig.colorbar(mesh, ax=list(axes), label="power (one-sided, level 0.05)")
    fig.suptitle(
        f"Paper 3, Figure 4: power of the z-test of H0: theta12 = theta11 vs theta12 < "
        f"theta11, I = {n_clusters} (theta12^ = I/(I-1) eq. 5)",
        fontsize=10,
    )
    fig.savefig(path, dpi=120)
    return Path(path)


@paper_figure(3, "4", "Power of the test of H0: theta12 = theta11, I = 10 (section 6.3)")
def figure4(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    """Figure 4 (a) and (b): 1000 replicates per point on a 0.025 grid (quick: 40, 0.1)."""
    reps, step = (40, 0.1) if quick else (1000, 0.025)
    results = {
        model: power_grid(model, reps, 10, seed + k, step)
        for k, model in enumerate(("binormal", "censored"))
    }
    return power_surface_figure(results, path, step, 10)
