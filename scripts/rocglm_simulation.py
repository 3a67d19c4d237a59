"""Paper 1's simulation (section 5): Table 1, the recommended settings, the Figure 4/5 grid.

Data of section 5.2 as the reference simulation code generates it
(``fedroc.experiments.rocglm_simulation``: gamma ~ U[0, 1], not the text's U[0.5, 1], see
there); each data set is split at random over K = 5 sites (policy q = 1 so that small
simulated sites are not refused, and budgets lifted: the paper's settings exceed a site's
default budget; the paper's simulation has no q either).

Outputs (under --out, default scripts/results):

- ``rocglm_table1.csv``: AUC - AUC_ROC-GLM of the pooled, noise-free ROC-GLM by bins of
  the empirical AUC of width 0.025 (paper Table 1).
- ``rocglm_recommended.csv``: the distributed ROC-GLM *through the federation* at paper 1's
  recommended (epsilon, delta) for l2-sensitivity 0.01, 0.03, 0.05, 0.07: the paper's
  estimate and fedroc's corrected one, MAE of the AUC against the empirical AUC, the
  paper's CI error, and coverage of the empirical AUC by each interval.
- ``rocglm_grid.csv``, ``paper1_figure4.png``, ``paper1_figure5.png``: the
  epsilon x delta x sensitivity grid of Figures 4 and 5 (MAE of the AUC and CI error per AUC
  bin), computed from the pooled noisy scores, which equals the distributed run on them.
- ``rocglm_simulation.md``: the tables above with the Figure 4 finding.

Run: nice .venv/bin/python scripts/rocglm_simulation.py [--reps 600] [--grid-reps 300]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from fedroc.data import SiteData
from fedroc.exceptions import FedrocWarning
from fedroc.experiments.rocglm import draw_settings_grid
from fedroc.experiments.rocglm_simulation import (
    PAPER_THRESHOLD,
    SENSITIVITIES,
    auc_bin,
    bin_labels,
    overall_mae,
    settings_grid,
    simulate_paper_data,
)
from fedroc.federation import Federation, Site
from fedroc.methods.rocglm import PrivacyCautionWarning, distributed_rocglm, recommended_privacy
from fedroc.methods.rocglm._core import rocglm
from fedroc.metrics import delong
from fedroc.privacy import DisclosurePolicy, classic_gaussian_sigma

K_SITES = 5


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def federation(y: np.ndarray, s: np.ndarray, rng: np.random.Generator, seed: int) -> Federation:
    parts = np.array_split(rng.permutation(y.size), K_SITES)
    policy = DisclosurePolicy(min_count=1, epsilon_limit=math.inf, delta_limit=1.0)
    return Federation.from_sites(
        Site(f"site{k}", SiteData.from_arrays(y[i], s[i]), policy=policy, noise_seed=seed)
        for k, i in enumerate(parts)
    )


def table1(datasets, refs) -> pd.DataFrame:
    emp = np.array([r.auc for r in refs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FedrocWarning)  # separated data sets (AUC = 1)
        fits = [rocglm(y, s) for y, s in datasets]
    diff = emp - np.array([f.auc for f in fits])
    b = auc_bin(emp)
    rows = []
    for k, label in enumerate(bin_labels()):
        d = diff[b == k]
        if d.size == 0:
            rows.append({"bin": label, "count": 0})
            continue
        q = np.quantile(d, [0, 0.25, 0.5, 0.75, 1])
        rows.append({"bin": label, "min": q[0], "q1": q[1], "median": q[2], "mean": d.mean(),
                     "q3": q[3], "max": q[4], "sd": d.std(ddof=1) if d.size > 1 else np.nan,
                     "count": d.size})  # fmt: skip
    return pd.DataFrame(rows)


def recommended(datasets, refs, args) -> pd.DataFrame:
    rng = np.random.default_rng(args.seed + 1)
    rows = []
    for sens in SENSITIVITIES[:-1]:
        eps, delta = recommended_privacy(sens)
        t0 = time.perf_counter()
        for i, ((y, s), ref) in enumerate(zip(datasets, refs, strict=True)):
            fed = federation(y, s, rng, seed=args.seed * 1000 + i)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PrivacyCautionWarning)
                warnings.simplefilter("ignore", FedrocWarning)
                res = distributed_rocglm(fed, sensitivity=sens, privacy="paper", seed=i)
            paper = res.without_correction()
            lo, hi = ref.confidence_interval(method="logit")  # paper 1 eq. 3
            for variant, est in (("paper", paper), ("corrected", res)):
                rows.append(
                    {
                        "sensitivity": sens,
                        "epsilon": eps,
                        "delta": delta,
                        "variant": variant,
                        "n": y.size,
                        "auc_emp": ref.auc,
                        "auc": est.auc,
                        "ci_lo": est.ci[0],
                        "ci_hi": est.ci[1],
                        "delta_ci": abs(est.ci[0] - lo) + abs(est.ci[1] - hi),
                        "covers_emp": est.ci[0] <= ref.auc <= est.ci[1],
                    }
                )
        progress(f"  recommended, sensitivity {sens}: {time.perf_counter() - t0:.0f} s")
    return pd.DataFrame(rows)


def summarise_recommended(frame: pd.DataFrame) -> pd.DataFrame:
    inside = frame[(frame["auc_emp"] > 0.55) & (frame["auc_emp"] <= 0.95)]
    out = []
    for (sens, variant), f in inside.groupby(["sensitivity", "variant"], sort=False):
        err = (f["auc"] - f["auc_emp"]).to_numpy()
        big = f[f["n"] >= 500]
        out.append(
            {
                "sensitivity": sens,
                "epsilon": f["epsilon"].iloc[0],
                "delta": f["delta"].iloc[0],
                "estimate": variant,
                "data sets": len(f),
                "MAE AUC": np.mean(np.abs(err)),
                "mean AUC - emp": np.mean(err),
                "MAE AUC, n >= 500": np.mean(np.abs(big["auc"] - big["auc_emp"])),
                "mean CI error (paper)": f["delta_ci"].mean(),
                "covers emp AUC": f["covers_emp"].mean(),
            }
        )
    return pd.DataFrame(out)


def markdown(t1, rec, grid_summary, args, seconds) -> str:
    def table(frame: pd.DataFrame, fmt: str = "{:.4f}") -> list[str]:
        cols = list(frame.columns)
        lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
        for row in frame.itertuples(index=False):
            cells = [fmt.format(v) if isinstance(v, float) else str(v) for v in row]
            lines.append("| " + " | ".join(cells) + " |")
        return lines

    at_rec = grid_summary.reset_index()
    at_rec = at_rec[
        at_rec.apply(
            lambda r: (
                (r["epsilon"], r["delta"]) == recommended_privacy(r["sensitivity"])
                if r["sensitivity"] <= 0.07
                else False
            ),
            axis=1,
        )
    ]
    # The finding, from the numbers above (not written in advance).
    ok = at_rec[at_rec["MAE of the AUC"] <= PAPER_THRESHOLD]["sensitivity"].tolist()
    meets = "sensitivity " + ", ".join(f"{v:g}" for v in ok) if ok else "no setting"
    sds = ", ".join(
        f"{classic_gaussian_sigma(epsilon=e, delta=d, sensitivity=v):.3f}"
        for v, (e, d) in ((v, recommended_privacy(v)) for v in at_rec["sensitivity"])
    )
    lines = [
        "# Paper 1's simulation (section 5), reproduced",
        "",
        f"Command: `nice .venv/bin/python scripts/rocglm_simulation.py --reps {args.reps} "
        f"--grid-reps {args.grid_reps} --seed {args.seed}` ({seconds:.0f} s on a shared, loaded "
        "2-core machine). Data of section 5.2 as the reference code draws them, 5 sites.",
        "",
        "## Figure 4 does not reproduce (MAE <= 0.01 at the recommended settings)",
        "",
        "Paper 1 chose its recommended (epsilon, delta) per l2-sensitivity so that the mean "
        "absolute error of the distributed ROC-GLM AUC against the empirical AUC stays at or "
        "below 0.01 in every AUC bin (RQ1, Figure 4). Measured here, the MAE over all data "
        "sets at exactly those settings:",
        "",
        *table(at_rec),
        "",
        f"Meeting 0.01: {meets}. The error grows with the noise (sd {sds}) and is a bias, "
        "not scatter: the noisy negatives place every positive lower (column "
        "`mean AUC - emp` below). The authors' own "
        "simulation code (difuture-lmu/simulations-distr-auc) does worse, and its figure code "
        f"colours the cells with a 0.05 threshold, not the 0.01 of the text; `fedroc figures "
        f"--paper 1` draws the text's {PAPER_THRESHOLD}.",
        "",
        "## The recommended settings through the federation: the paper's and fedroc's estimate",
        "",
        "Empirical AUC in (0.55, 0.95]; `covers emp AUC` is the share of intervals that hold "
        "the pooled data's empirical AUC (the paper's target: the sample's AUC, not a "
        "population's; for the population AUC see `rocglm_coverage.md`).",
        "",
        *table(rec),
        "",
        "## Table 1: pooled ROC-GLM against the empirical AUC (no noise)",
        "",
        *table(t1),
        "",
        f"Grid: {args.grid_reps} data sets per setting (the paper: 10000); "
        "`rocglm_grid.csv` holds every cell, `paper1_figure4.png` and `paper1_figure5.png` "
        "draw them.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=600, help="data sets for Table 1 and the "
                        "recommended settings")  # fmt: skip
    parser.add_argument("--grid-reps", type=int, default=300, help="data sets per grid setting")
    parser.add_argument("--seed", type=int, default=2022)
    parser.add_argument("--out", type=Path, default=Path("scripts/results"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    datasets = [simulate_paper_data(rng) for _ in range(max(args.reps, args.grid_reps))]
    refs = [delong(y, s) for y, s in datasets]
    t1 = table1(datasets[: args.reps], refs[: args.reps])
    t1.to_csv(args.out / "rocglm_table1.csv", index=False)
    progress(f"table 1 done ({time.perf_counter() - start:.0f} s)")
    rec_rows = recommended(datasets[: args.reps], refs[: args.reps], args)
    rec_rows.to_csv(args.out / "rocglm_recommended.csv", index=False)
    rec = summarise_recommended(rec_rows)
    grid = settings_grid(datasets[: args.grid_reps], np.random.default_rng(args.seed + 2))
    grid.to_csv(args.out / "rocglm_grid.csv", index=False)
    draw_settings_grid(grid, args.out / "paper1_figure4.png", "mae_auc", "MAE of the AUC", "4")
    draw_settings_grid(grid, args.out / "paper1_figure5.png", "delta_ci", "CI error", "5")
    summary = overall_mae(grid).rename("MAE of the AUC")
    text = markdown(t1, rec, summary, args, time.perf_counter() - start)
    (args.out / "rocglm_simulation.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
