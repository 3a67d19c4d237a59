"""Reproduce the simulations of Michael & Tian, section 6 (paper 3).

Coverage (section 6.2, Table 1): I = 60 clusters, allocation of section 6.1 with
rho_MN in {0, 0.1, 0.4, 0.8}, (theta12, theta11) in {(.7, .7), (.7, .8), (.8, .8), (.8, .9)},
1000 replicates per setting, under the bivariate normal model (11) and the censored model
(13). For each setting: coverage of the 95% confidence ellipse (14) built with Sigma^ of
Corollary 6, bias of both estimates, and bias of Sigma^ against the Monte Carlo covariance
(times I), beside the paper's coverage. Columns for each population estimator (eq. 5 x
I/(I-1), fedroc's default; eq. 5 as printed; the between-cluster pair fraction) and each
Sigma11 divisor (Corollary 6's I - 1, fedroc's default; the authors' code's (I-1)^2 / I).

Few clusters: coverage of theta12 by 95% Wald intervals at I = 4 to 60, with the
cluster-level SEs, DeLong's (clusters ignored) and the larger of the two: the evidence behind
the few-cluster caveat of fedroc.methods.clustered.

Power (section 6.3, Figure 4): I = 10 clusters, one-sided z-test of H0: theta12 = theta11
against theta12 < theta11 at level 0.05, over a grid of the triangle
1/2 < theta12 <= theta11 < 1 (the paper draws random points of the triangle; a grid gives the
same surface with a fixed number of replicates per point).

Every replicate of a setting is simulated and estimated at once (fedroc.methods.clustered.models).

Usage::

    nice -n 10 python scripts/clustered_coverage.py [--replicates 1000]
        [--power-replicates 1000] [--few-replicates 1000] [--seed 20240601]
        [--out scripts/results]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy import stats

from fedroc.exceptions import InputError
from fedroc.experiments.clustered import CENSOR_BOUND, power_grid, power_surface_figure
from fedroc.methods.clustered._core import cluster_terms
from fedroc.methods.clustered._estimators import (
    ellipse_radius2,
    ellipse_statistic,
    joint_estimates,
    obuchowski,
)
from fedroc.methods.clustered.models import (
    binormal_parameters,
    censored_binormal_aucs,
    censored_binormal_parameters,
    estimate_replicates,
    sample_allocation,
    sample_binormal,
)
from fedroc.metrics import delong

BOUND = CENSOR_BOUND
AUC_PAIRS = [(0.7, 0.7), (0.7, 0.8), (0.8, 0.8), (0.8, 0.9)]
RHO_MNS = [0.0, 0.1, 0.4, 0.8]
FEW_SIZES = [4, 6, 10, 20, 60]
FEW_PAIRS = [(0.7, 0.8), (0.8, 0.8)]


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


# The paper's Table 1 coverage column, in the order of AUC_PAIRS x RHO_MNS.
PAPER_COVERAGE = {
    "binormal": [
        0.94,
        0.93,
        0.94,
        0.94,
        0.94,
        0.93,
        0.93,
        0.93,
        0.92,
        0.94,
        0.93,
        0.93,
        0.92,
        0.92,
        0.91,
        0.90,
    ],
    "censored": [
        0.94,
        0.94,
        0.93,
        0.94,
        0.94,
        0.91,
        0.94,
        0.93,
        0.94,
        0.93,
        0.95,
        0.92,
        0.93,
        0.92,
        0.92,
        0.93,
    ],
}
# (population estimator, Sigma11 divisor); the first is fedroc's default.
VARIANTS = [
    ("corrected", "corollary6"),
    ("corrected", "authors"),
    ("eq5", "corollary6"),
    ("between", "corollary6"),
    ("between", "authors"),
]


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
    for estimator, sigma11 in VARIANTS:
        est = estimate_replicates(sample, population_estimator=estimator, sigma11=sigma11)
        centre = np.stack([est.population, est.personalized], -1)
        stat = ellipse_statistic(centre, est.covariance, truth)
        row[f"coverage_{estimator}_{sigma11}"] = float(np.mean(stat < q))
        row[f"bias12_{estimator}"] = float(est.population.mean() - true12)
        mc = np.cov(centre.T) * n_clusters
        diff = est.sigma.mean(0) - mc
        row[f"bias_s11_{estimator}_{sigma11}"] = diff[0, 0]
        if (estimator, sigma11) == VARIANTS[0]:
            row["bias11"] = float(est.personalized.mean() - true11)
            row["bias_s12"], row["bias_s22"] = diff[0, 1], diff[1, 1]
            row["s11"], row["s12"], row["s22"] = mc[0, 0], mc[0, 1], mc[1, 1]
    return row


def coverage_table(rows: list[dict[str, float | str]]) -> str:
    head = (
        "| model | theta12 | theta11 | rho_MN | paper | cov. default | cov. authors' "
        "Sigma11 | cov. eq5 | cov. between | cov. between, authors' Sigma11 | "
        "bias theta12 default | bias theta12 eq5 | bias theta12 between | bias theta11 | "
        "bias S11 | bias S11 authors' | bias S12 | bias S22 | MC S11 | MC S12 | MC S22 |"
    )
    lines = [head, "|" + "---|" * 21]
    counters = {"binormal": 0, "censored": 0}
    for r in rows:
        star = "*" if r["note"] else ""
        paper = PAPER_COVERAGE[str(r["model"])][counters[str(r["model"])]]
        counters[str(r["model"])] += 1
        lines.append(
            f"| {r['model']} | {r['theta12']:.2f} | {r['theta11']:.2f}{star} | "
            f"{r['rho_mn']:.1f} | {paper:.2f} | {r['coverage_corrected_corollary6']:.3f} | "
            f"{r['coverage_corrected_authors']:.3f} | {r['coverage_eq5_corollary6']:.3f} | "
            f"{r['coverage_between_corollary6']:.3f} | {r['coverage_between_authors']:.3f} | "
            f"{r['bias12_corrected']:+.4f} | {r['bias12_eq5']:+.4f} | "
            f"{r['bias12_between']:+.4f} | {r['bias11']:+.4f} | "
            f"{r['bias_s11_corrected_corollary6']:+.4f} | "
            f"{r['bias_s11_corrected_authors']:+.4f} | {r['bias_s12']:+.4f} | "
            f"{r['bias_s22']:+.4f} | {r['s11']:.4f} | {r['s12']:.4f} | {r['s22']:.4f} |"
        )
    notes = sorted({str(r["note"]) for r in rows if r["note"]})
    lines += [f"\n* censored model (bound {BOUND:.4f}): {n}" for n in notes]
    means = {
        key: float(np.mean([float(r[key]) for r in rows]))
        for key in [f"coverage_{e}_{s}" for e, s in VARIANTS]
    }
    lines.append(
        "\nMean coverage over the 32 settings: "
        + ", ".join(f"{k.removeprefix('coverage_')} {v:.3f}" for k, v in means.items())
        + f"; the paper's Table 1: {np.mean(np.concatenate(list(PAPER_COVERAGE.values()))):.3f}."
    )
    return "\n".join(lines)


def few_clusters_rows(
    sizes: list[int], pairs: list[tuple[float, float]], reps: int, seed: int
) -> list[dict[str, float]]:
    """Coverage of theta12 by 95% Wald intervals when the clusters are few.

    Binormal model (11), allocation of section 6.1 with rho_MN = 0.4. Intervals: the
    population AUC with Sigma11 (each estimator and divisor), and Obuchowski's AUC with
    his SE, with DeLong's SE (which ignores the clusters) and with the larger of the two.
    """
    z = float(stats.norm.ppf(0.975))
    rows = []
    for t12, t11 in pairs:
        delta, rho = binormal_parameters(t12, t11)
        for n_clusters in sizes:
            rng = np.random.default_rng([seed, n_clusters, int(100 * t11)])
            m, n = sample_allocation(n_clusters, 0.4, rng=rng, replicates=reps)
            sample = sample_binormal(m, n, delta=delta, rho=rho, rng=rng)
            terms = cluster_terms(
                sample.y_true,
                sample.y_score,
                sample.cluster,
                n_clusters * reps,
                group=sample.replicate,
            )
            shape = (reps, n_clusters)
            args = [getattr(terms, k).reshape(shape) for k in ("m", "n", "within", "row", "col")]
            row: dict[str, float] = {"theta12": t12, "theta11": t11, "clusters": n_clusters}
            for estimator, sigma11 in VARIANTS:
                est = joint_estimates(
                    *args,
                    population_estimator=estimator,  # type: ignore[arg-type]
                    sigma11=sigma11,  # type: ignore[arg-type]
                )
                se = np.sqrt(est.covariance[:, 0, 0])
                row[f"{estimator}_{sigma11}"] = float(
                    np.mean(np.abs(est.population - t12) <= z * se)
                )
                if estimator == "corrected":
                    row["above_one"] = float(np.mean(est.population > 1))
            auc, var = obuchowski(args[0], args[1], args[3], args[4])
            with np.errstate(invalid="ignore"):
                obu_se = np.sqrt(var)
            dl_se = np.array(
                [
                    delong(
                        sample.y_true[sample.replicate == r], sample.y_score[sample.replicate == r]
                    ).se
                    for r in range(reps)
                ]
            )
            wider = np.fmax(obu_se, dl_se)
            for name, se in (("obuchowski", obu_se), ("delong", dl_se), ("max", wider)):
                row[name] = float(np.mean(np.abs(auc - t12) <= z * se))
            row["obuchowski_negative_variance"] = float(np.mean(~(var >= 0)))
            rows.append(row)
    return rows


def few_clusters_table(rows: list[dict[str, float]]) -> str:
    lines = [
        "| theta12 | theta11 | clusters | default | authors' Sigma11 | between | between, "
        "authors' | Obuchowski SE | DeLong SE | max(Obuchowski, DeLong) | P(theta12^ > 1) |",
        "|" + "---|" * 12,
    ]
    for r in rows:
        lines.append(
            f"| {r['theta12']:.2f} | {r['theta11']:.2f} | {r['clusters']:.0f} | "
            f"{r['corrected_corollary6']:.3f} | {r['corrected_authors']:.3f} | "
            f"{r['between_corollary6']:.3f} | {r['between_authors']:.3f} | "
            f"{r['obuchowski']:.3f} | {r['delong']:.3f} | {r['max']:.3f} | "
            f"{r['above_one']:.3f} |"
        )
    return "\n".join(lines)


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
    parser.add_argument("--few-replicates", type=int, default=1000)
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
    few = few_clusters_rows(FEW_SIZES, FEW_PAIRS, args.few_replicates, args.seed)
    ftable = few_clusters_table(few)
    few_seconds = time.perf_counter() - start
    print(f"\nFew clusters, {args.few_replicates} replicates\n{ftable}\n({few_seconds:.1f} s)")

    start = time.perf_counter()
    step = 0.025
    results = {
        model: power_grid(model, args.power_replicates, args.power_clusters, args.seed + k, step)
        for k, model in enumerate(("binormal", "censored"))
    }
    figure = args.out / "clustered_power.png"
    power_surface_figure(results, figure, step, args.power_clusters)
    ptable = power_table(results)
    power_seconds = time.perf_counter() - start
    print(f"\nPower, I = {args.power_clusters}, {args.power_replicates} replicates per point")
    print(ptable)
    print(f"figure: {figure} ({power_seconds:.1f} s)")

    report = args.out / "clustered_coverage.md"
    report.write_text(
        "# Clustered AUCs: coverage and power (paper 3, section 6)\n\n"
        f"Command: `python scripts/clustered_coverage.py --replicates {args.replicates} "
        f"--power-replicates {args.power_replicates} --few-replicates {args.few_replicates} "
        f"--seed {args.seed}`\n\n"
        f"## Table 1: coverage of the 95% confidence ellipse (I = {args.clusters}, "
        f"{args.replicates} replicates)\n\n"
        "Columns: the paper's Table 1 coverage; fedroc's default (theta12^ = eq. 5 x I/(I-1), "
        "Sigma11 of Corollary 6 divided by I - 1); the same with the authors' Sigma11 "
        "(divided by (I-1)^2/I, as their R code `auc.cluster` and hence their Table 1); eq. 5 "
        "as printed; the between-cluster pair fraction ('between', always in [0, 1]) with each "
        "Sigma11. Bias of S = mean Sigma^ minus I times the Monte Carlo covariance, order "
        "(population, personalized); 'bias S11' is Corollary 6's, 'bias S11 authors'' the "
        "authors'.\n\n"
        f"{table}\n\n"
        f"## Few clusters: coverage of theta12 by 95% Wald intervals ({args.few_replicates} "
        "replicates)\n\n"
        "Binormal model (11), rho_MN = 0.4. The population AUC with its Sigma11 (each "
        "estimator and divisor); Obuchowski's AUC with his SE, with DeLong's SE (clusters "
        "ignored) and with the larger of the two; the share of replicates where eq. 5 x "
        "I/(I-1) exceeds 1.\n\n"
        f"{ftable}\n\n"
        f"## Power (I = {args.power_clusters}, {args.power_replicates} replicates "
        f"per grid point)\n\n```\n{ptable}\n```\n\n![power]({figure.name})\n\n"
        f"Run time: {cov_seconds:.0f} s (Table 1), {few_seconds:.0f} s (few clusters), "
        f"{power_seconds:.0f} s (power), nice -n 10 on a shared, loaded 2-core machine.\n"
    )
    print(f"report: {report}")


if __name__ == "__main__":
    main()
