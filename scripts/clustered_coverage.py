"""Reproduce the simulations of Michael & Tian, section 6 (paper 3).

Coverage (section 6.2, Table 1): I = 60 clusters, allocation of section 6.1 with
rho_MN in {0, 0.1, 0.4, 0.8}, (theta12, theta11) in {(.7, .7), (.7, .8), (.8, .8), (.8, .9)},
1000 replicates per setting, under the bivariate normal model (11) and the censored model
(13). For each setting: coverage of the 95% confidence ellipse (14) built with Sigma^ of
Corollary 6, bias of both estimates, and bias of Sigma^ against the Monte Carlo covariance
(times I). Rows are given for theta12^ of eq. 5 and for the I/(I-1)-corrected version.

Power (section 6.3, Figure 4): I = 10 clusters, one-sided z-test of H0: theta12 = theta11
against theta12 < theta11 at level 0.05, over a grid of the triangle
1/2 < theta12 <= theta11 < 1 (the paper draws random points of the triangle; a grid gives the
same surface with a fixed number of replicates per point).

Every replicate of a setting is simulated and estimated at once (fedroc.clustered.models).

Usage::

    python scripts/clustered_coverage.py [--replicates 1000] [--power-replicates 1000]
        [--seed 20240601] [--out scripts/results]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy import stats

from fedroc.clustered._estimators import ellipse_radius2, ellipse_statistic, equality_z
from fedroc.clustered.models import (
    binormal_parameters,
    censored_binormal_aucs,
    censored_binormal_parameters,
    estimate_replicates,
    sample_allocation,
    sample_binormal,
)
from fedroc.exceptions import InputError

# The authors' R code censors at |qnorm(0.2)|; the paper does not state the bound.
BOUND = float(-stats.norm.ppf(0.2))
AUC_PAIRS = [(0.7, 0.7), (0.7, 0.8), (0.8, 0.8), (0.8, 0.9)]
RHO_MNS = [0.0, 0.1, 0.4, 0.8]


def model_parameters(model: str, t12: float, t11: float) -> tuple[float, float, float, float, str]:
    """(delta, rho, true theta12, true theta11, note) for a target pair of AUCs."""
    if model == "binormal":
        delta, rho = binormal_parameters(t12, t11)
        return delta, rho, t12, t11, ""
    try:
        delta, rho = censored_binormal_parameters(t12, t11, BOUND)
        return delta, rho, t12, t11, ""
    except InputError:
        delta, rho = censored_binormal_parameters(t12, t11, BOUND, closest=True)
        true12, true11 = censored_binormal_aucs(delta, rho, BOUND)
        return delta, rho, true12, true11, f"theta11={t11} unreachable; truth {true11:.4f}"


def coverage_row(
    model: str, t12: float, t11: float, rho_mn: float, reps: int, n_clusters: int, seed: int
) -> dict[str, float | str]:
    rng = np.random.default_rng(seed)
    delta, rho, true12, true11, note = model_parameters(model, t12, t11)
    m, n = sample_allocation(n_clusters, rho_mn, rng=rng, replicates=reps)
    bound = None if model == "binormal" else BOUND
    sample = sample_binormal(m, n, delta=delta, rho=rho, rng=rng, bound=bound)
    row: dict[str, float | str] = {
        "model": model,
        "theta12": t12,
        "theta11": t11,
        "rho_mn": rho_mn,
        "note": note,
    }
    truth = np.array([true12, true11])
    q = ellipse_radius2(0.95)
    for label, corrected in (("eq5", False), ("corr", True)):
        est = estimate_replicates(sample, pair_correction=corrected)
        centre = np.stack([est.population, est.personalized], -1)
        stat = ellipse_statistic(centre, est.covariance, truth)
        row[f"coverage_{label}"] = float(np.mean(stat < q))
        row[f"bias12_{label}"] = float(est.population.mean() - true12)
        if corrected:
            row["bias11"] = float(est.personalized.mean() - true11)
            mc = np.cov(centre.T) * n_clusters
            diff = est.sigma.mean(0) - mc
            row["bias_s11"], row["bias_s12"], row["bias_s22"] = diff[0, 0], diff[0, 1], diff[1, 1]
            row["s11"], row["s12"], row["s22"] = mc[0, 0], mc[0, 1], mc[1, 1]
    return row


def coverage_table(rows: list[dict[str, float | str]]) -> str:
    head = (
        "| model | theta12 | theta11 | rho_MN | coverage eq5 | coverage I/(I-1) | "
        "bias theta12 eq5 | bias theta12 I/(I-1) | bias theta11 | bias S11 | bias S12 | "
        "bias S22 | MC S11 | MC S12 | MC S22 |"
    )
    lines = [head, "|" + "---|" * 15]
    for r in rows:
        star = "*" if r["note"] else ""
        lines.append(
            f"| {r['model']} | {r['theta12']:.2f} | {r['theta11']:.2f}{star} | "
            f"{r['rho_mn']:.1f} | {r['coverage_eq5']:.3f} | {r['coverage_corr']:.3f} | "
            f"{r['bias12_eq5']:+.4f} | {r['bias12_corr']:+.4f} | {r['bias11']:+.4f} | "
            f"{r['bias_s11']:+.4f} | {r['bias_s12']:+.4f} | {r['bias_s22']:+.4f} | "
            f"{r['s11']:.4f} | {r['s12']:.4f} | {r['s22']:.4f} |"
        )
    notes = sorted({str(r["note"]) for r in rows if r["note"]})
    lines += [f"\n* censored model (bound {BOUND:.4f}): {n}" for n in notes]
    return "\n".join(lines)


def power_grid(
    model: str, reps: int, n_clusters: int, seed: int, step: float = 0.025
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rejection rates of the one-sided test on a grid of (theta12, theta11) cell centres.

    Returns the centres and the rates with theta12^ = I/(I-1) eq. 5 (fedroc's default) and
    with eq. 5 as printed, both indexed [theta11, theta12].
    """
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
                    delta, rho = censored_binormal_parameters(t12, t11, BOUND)
                    bound = BOUND
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


def power_figure(
    results: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], path: Path, step: float
) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(results))
    titles = {"binormal": "(a) bivariate normal model (11)", "censored": "(b) censored model (13)"}
    mesh = None
    for ax, (model, (centres, power, _)) in zip(np.atleast_1d(axes), results.items(), strict=True):
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
    fig.colorbar(mesh, ax=list(np.atleast_1d(axes)), label="power (one-sided, level 0.05)")
    fig.suptitle(
        "Power of the z-test of H0: theta12 = theta11 vs theta12 < theta11, I = 10 "
        "(theta12^ = I/(I-1) eq. 5)"
    )
    fig.savefig(path, dpi=120)


def power_table(results: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]) -> str:
    lines = []
    for model, (centres, power, power_eq5) in results.items():
        for name, p in (("I/(I-1) eq. 5 (default)", power), ("eq. 5 as printed", power_eq5)):
            diag = np.array([p[k, k] for k in range(centres.size)])
            lines.append(
                f"{model}, theta12^ = {name}: size on the diagonal (theta12 = theta11) mean "
                f"{np.nanmean(diag):.3f}, range [{np.nanmin(diag):.3f}, {np.nanmax(diag):.3f}]"
            )
        j = int(np.argmin(np.abs(centres - 0.7125)))
        row = ", ".join(
            f"{centres[i]:.3f}: {power[i, j]:.2f}"
            for i in range(j, centres.size, 2)
            if np.isfinite(power[i, j])
        )
        lines.append(f"  power (default) at theta12 = {centres[j]:.4f} by theta11: {row}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--clusters", type=int, default=60)
    parser.add_argument("--power-replicates", type=int, default=1000)
    parser.add_argument("--power-clusters", type=int, default=10)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--out", type=Path, default=Path("scripts/results"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    rows = []
    seeds = iter(np.random.SeedSequence(args.seed).generate_state(64))
    for model in ("binormal", "censored"):
        for t12, t11 in AUC_PAIRS:
            for rho_mn in RHO_MNS:
                rows.append(
                    coverage_row(
                        model, t12, t11, rho_mn, args.replicates, args.clusters, int(next(seeds))
                    )
                )
    table = coverage_table(rows)
    cov_seconds = time.perf_counter() - start
    print(f"Coverage of the 95% ellipse, I = {args.clusters}, {args.replicates} replicates")
    print(table)
    print(f"({cov_seconds:.1f} s)")

    start = time.perf_counter()
    step = 0.025
    results = {
        model: power_grid(model, args.power_replicates, args.power_clusters, args.seed + k, step)
        for k, model in enumerate(("binormal", "censored"))
    }
    figure = args.out / "clustered_power.png"
    power_figure(results, figure, step)
    ptable = power_table(results)
    power_seconds = time.perf_counter() - start
    print(f"\nPower, I = {args.power_clusters}, {args.power_replicates} replicates per point")
    print(ptable)
    print(f"figure: {figure} ({power_seconds:.1f} s)")

    report = args.out / "clustered_coverage.md"
    report.write_text(
        "# Clustered AUCs: coverage and power (paper 3, section 6)\n\n"
        f"Command: `python scripts/clustered_coverage.py --replicates {args.replicates} "
        f"--power-replicates {args.power_replicates} --seed {args.seed}`\n\n"
        f"## Coverage of the 95% confidence ellipse (I = {args.clusters}, "
        f"{args.replicates} replicates)\n\n"
        "Bias of S = mean Sigma^ minus I times the Monte Carlo covariance, order "
        "(population, personalized).\n\n"
        f"{table}\n\n## Power (I = {args.power_clusters}, {args.power_replicates} replicates "
        f"per grid point)\n\n```\n{ptable}\n```\n\n![power]({figure.name})\n"
    )
    print(f"report: {report}")


if __name__ == "__main__":
    main()
