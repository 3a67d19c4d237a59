"""Paper 1's simulation (section 5) at a reduced number of repetitions.

Data (section 5.2, as the reference simulation code generates it): n uniform on
{100, ..., 2500}; scores uniform on [0, 1]; label = 1(score > 0.5); the labels of a random
fraction gamma ~ U[0, 1] of the rows are re-drawn from Bernoulli(0.5), repeated until the
positive fraction lies in [0.1, 0.9]. The paper's text says gamma ~ U[0.5, 1], but then
the AUC (about 1 - gamma / 2) could not cover [0.5, 1] as its Figure 3 and Table 1 show;
the reference code draws gamma from U[0, 1], and so does this script. Each data set is
split at random over K = 5 sites (disclosure policy q = 1 so that small simulated sites
are not refused; the paper's simulation has no q either).

Outputs (under --out, default out/rocglm):

- table1.csv / printed: AUC - AUC_ROC-GLM of the pooled, noise-free ROC-GLM by bins of
  the empirical AUC of width 0.025 (paper Table 1).
- recommended.csv / printed: the distributed ROC-GLM through the federation at paper 1's
  recommended (epsilon, delta) for l2-sensitivity 0.01, 0.03, 0.05, 0.07, with and
  without SIMEX: mean absolute error (MAE) of the AUC against the empirical AUC and of
  each CI endpoint against the pooled logit DeLong CI, by AUC bin, and the check of the
  issue (MAE <= 0.01 for empirical AUC in [0.55, 0.95] and n >= 500).
- grid.csv, figure4.png: the epsilon x delta x sensitivity grid of Figure 4, MAE of the
  AUC per AUC bin (blue <= 0.01, red > 0.01, grey = no data set in the bin).

Every distributed fit runs the real protocol (site functions, in-process transport). The
same data sets are used for every grid setting (common random numbers); the noise is
drawn afresh per setting. Run: .venv/bin/python scripts/rocglm_simulation.py [--help]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from fedroc.data import SiteData
from fedroc.exceptions import FedrocWarning
from fedroc.federation import Federation, Site
from fedroc.methods.rocglm import (
    PrivacyCautionWarning,
    distributed_rocglm,
    recommended_privacy,
    rocglm,
)
from fedroc.metrics import delong
from fedroc.privacy import DisclosurePolicy

EPSILONS = (0.1, 0.2, 0.3, 0.4, 0.5)
DELTAS = (0.1, 0.2, 0.3, 0.4, 0.5)
SENSITIVITIES = (0.01, 0.03, 0.05, 0.07, 0.09)
BIN_EDGES = np.round(np.arange(0.5, 1.0 + 1e-9, 0.025), 3)
K_SITES = 5


def simulate(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = int(rng.integers(100, 2501))
    score = rng.random(n)
    truth = score > 0.5
    while True:
        gamma = rng.random()
        idx = rng.choice(n, int(gamma * n), replace=False)
        y = truth.copy()
        y[idx] = rng.random(idx.size) < 0.5
        if 0.1 <= y.mean() <= 0.9:
            return y, score


def federation(y: np.ndarray, s: np.ndarray, rng: np.random.Generator) -> Federation:
    parts = np.array_split(rng.permutation(y.size), K_SITES)
    policy = DisclosurePolicy(min_count=1)
    return Federation.from_sites(
        Site(f"site{k}", SiteData.from_arrays(y[i], s[i]), policy=policy)
        for k, i in enumerate(parts)
    )


def auc_bin(auc: np.ndarray) -> np.ndarray:
    """Index of the (a, a + 0.025] bin; -1 outside (0.5, 1]."""
    idx = np.searchsorted(BIN_EDGES, auc, side="left") - 1
    return np.where((auc > 0.5) & (auc <= 1.0), idx, -1)


def bin_labels() -> list[str]:
    return [f"({a:.3f}, {b:.3f}]" for a, b in itertools.pairwise(BIN_EDGES)]


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_one(data, fed, **options) -> dict[str, float]:
    with warnings.catch_warnings():
        # Above 0.07 the paper's caution applies by design; separated classes (AUC near 1)
        # do not converge, which the result's `converged` flag records.
        warnings.simplefilter("ignore", PrivacyCautionWarning)
        warnings.simplefilter("ignore", FedrocWarning)
        res = distributed_rocglm(fed, **options)
    out = {"auc": res.auc, "ci_lo": res.ci[0], "ci_hi": res.ci[1], "converged": res.converged}
    if res.simex is not None:
        naive = res.without_simex()
        out |= {"auc_plain": naive.auc, "ci_lo_plain": naive.ci[0], "ci_hi_plain": naive.ci[1]}
    return out


def table1(datasets, refs) -> pd.DataFrame:
    emp = np.array([r.auc for r in refs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FedrocWarning)  # separated data sets (AUC = 1)
        fits = [rocglm(y, s) for y, s in datasets]
    progress(f"  pooled fits not converged: {sum(not f.converged for f in fits)}")
    diff = emp - np.array([f.auc for f in fits])
    b = auc_bin(emp)
    rows = []
    for k, label in enumerate(bin_labels()):
        d = diff[b == k]
        if d.size == 0:
            rows.append({"bin": label, "count": 0})
            continue
        q = np.quantile(d, [0, 0.25, 0.5, 0.75, 1])
        rows.append(
            {
                "bin": label,
                "min": q[0],
                "q1": q[1],
                "median": q[2],
                "mean": d.mean(),
                "q3": q[3],
                "max": q[4],
                "sd": d.std(ddof=1) if d.size > 1 else np.nan,
                "count": d.size,
            }
        )
    return pd.DataFrame(rows)


def recommended(datasets, refs, args) -> pd.DataFrame:
    rows = []
    rng = np.random.default_rng(args.seed + 1)
    emp = np.array([r.auc for r in refs])
    ci = np.array([r.confidence_interval() for r in refs])
    sizes = np.array([y.size for y, _ in datasets])
    for sens in SENSITIVITIES[:-1]:
        eps, delta = recommended_privacy(sens)
        t0 = time.perf_counter()
        res = []
        for i, data in enumerate(datasets):
            fed = federation(*data, rng)
            res.append(
                run_one(
                    data,
                    fed,
                    sensitivity=sens,
                    seed=args.seed * 1000 + i,
                    simex=True,
                    simex_replicates=args.simex_replicates,
                )
            )
        progress(f"  recommended settings, sensitivity {sens}: {time.perf_counter() - t0:.0f} s")
        frame = pd.DataFrame(res)
        for variant, suffix in (("ROC-GLM", "_plain"), ("ROC-GLM + SIMEX", "")):
            err_auc = np.abs(frame["auc" + suffix].to_numpy() - emp)
            err_lo = np.abs(frame["ci_lo" + suffix].to_numpy() - ci[:, 0])
            err_hi = np.abs(frame["ci_hi" + suffix].to_numpy() - ci[:, 1])
            b = auc_bin(emp)
            for k, label in enumerate(bin_labels()):
                sel = (b == k) & (sizes >= 500)
                rows.append(
                    {
                        "sensitivity": sens,
                        "epsilon": eps,
                        "delta": delta,
                        "variant": variant,
                        "bin": label,
                        "count (n >= 500)": int(sel.sum()),
                        "mae_auc": err_auc[sel].mean() if sel.any() else np.nan,
                        "bias_auc": (emp - frame["auc" + suffix].to_numpy())[sel].mean()
                        if sel.any()
                        else np.nan,
                        "mae_ci_lower": err_lo[sel].mean() if sel.any() else np.nan,
                        "mae_ci_upper": err_hi[sel].mean() if sel.any() else np.nan,
                        "delta_ci (paper)": (err_lo + err_hi)[sel].mean() if sel.any() else np.nan,
                    }
                )
    return pd.DataFrame(rows)


def grid(datasets, refs, args) -> pd.DataFrame:
    emp = np.array([r.auc for r in refs])
    b = auc_bin(emp)
    rows = []
    rng = np.random.default_rng(args.seed + 2)
    feds = [federation(*d, rng) for d in datasets]
    setting = 0
    for sens in SENSITIVITIES:
        t0 = time.perf_counter()
        for eps in EPSILONS:
            for delta in DELTAS:
                setting += 1
                aucs = np.array(
                    [
                        run_one(
                            d,
                            fed,
                            sensitivity=sens,
                            epsilon=eps,
                            delta=delta,
                            seed=setting * 100_000 + i,
                        )["auc"]
                        for i, (d, fed) in enumerate(zip(datasets, feds, strict=True))
                    ]
                )
                err = np.abs(aucs - emp)
                for k, label in enumerate(bin_labels()):
                    sel = b == k
                    rows.append(
                        {
                            "sensitivity": sens,
                            "epsilon": eps,
                            "delta": delta,
                            "bin": label,
                            "count": int(sel.sum()),
                            "mae_auc": err[sel].mean() if sel.any() else np.nan,
                        }
                    )
        progress(f"  grid, sensitivity {sens}: {time.perf_counter() - t0:.0f} s")
    return pd.DataFrame(rows)


def figure4(frame: pd.DataFrame, path: Path) -> None:
    """One panel per sensitivity, one cell per (epsilon, delta), one strip per AUC bin."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    colors = {"ok": "#3b6fb6", "bad": "#d0463b", "none": "#e4e4e4"}
    nb = len(BIN_EDGES) - 1
    fig, axes = plt.subplots(1, len(SENSITIVITIES), figsize=(4.0 * len(SENSITIVITIES), 4.6))
    for ax, sens in zip(axes, SENSITIVITIES, strict=True):
        sub = frame[frame["sensitivity"] == sens]
        for i, delta in enumerate(DELTAS):
            for j, eps in enumerate(EPSILONS):
                cell = sub[(sub["epsilon"] == eps) & (sub["delta"] == delta)]
                mae = cell["mae_auc"].to_numpy()
                width = 0.9 / nb
                for k in range(nb):
                    key = "none" if np.isnan(mae[k]) else ("bad" if mae[k] > 0.01 else "ok")
                    ax.add_patch(
                        Rectangle((j + 0.05 + k * width, i + 0.05), width, 0.9, color=colors[key])
                    )
                overall = np.average(np.nan_to_num(mae), weights=cell["count"].to_numpy())
                ax.text(j + 0.5, i + 0.5, f"{overall:.3f}", ha="center", va="center",
                        fontsize=7, color="white")  # fmt: skip
        ax.set_xlim(0, len(EPSILONS))
        ax.set_ylim(0, len(DELTAS))
        ax.set_xticks(np.arange(len(EPSILONS)) + 0.5, [f"{e:g}" for e in EPSILONS])
        ax.set_yticks(np.arange(len(DELTAS)) + 0.5, [f"{d:g}" for d in DELTAS])
        ax.set_xlabel("epsilon")
        ax.set_ylabel("delta")
        ax.set_title(f"l2-sensitivity {sens:g}")
    handles = [
        Patch(color=colors["ok"], label="MAE <= 0.01"),
        Patch(color=colors["bad"], label="MAE > 0.01"),
        Patch(color=colors["none"], label="no data set in the bin"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=9)
    fig.suptitle(
        "Distributed ROC-GLM, 5 sites: MAE of the AUC against the empirical AUC per bin "
        "(strips: AUC bins 0.5 -> 1; number: MAE over all data sets)"
    )
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=600, help="data sets for Table 1 and the "
                        "recommended settings")  # fmt: skip
    parser.add_argument("--grid-reps", type=int, default=150, help="data sets per grid setting")
    parser.add_argument("--simex-replicates", type=int, default=10)
    parser.add_argument("--seed", type=int, default=2022)
    parser.add_argument("--out", type=Path, default=Path("out/rocglm"))
    parser.add_argument("--skip-grid", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    datasets = [simulate(rng) for _ in range(args.reps)]
    refs = [delong(y, s) for y, s in datasets]
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 20)

    t1 = table1(datasets, refs)
    t1.to_csv(args.out / "table1.csv", index=False)
    print(f"Table 1: AUC_emp - AUC_ROC-GLM (pooled, no noise), {args.reps} data sets")
    print(t1.to_string(index=False, float_format=lambda v: f"{v:+.4f}"))
    progress(f"table 1 done ({time.perf_counter() - start:.0f} s)")

    rec = recommended(datasets, refs, args)
    rec.to_csv(args.out / "recommended.csv", index=False)
    inside = rec[
        rec["bin"].isin(bin_labels()[2:18])  # empirical AUC in (0.55, 0.95]
    ]
    print("\nDistributed ROC-GLM at paper 1's recommended settings, n >= 500: MAE of the AUC")
    wide = rec.pivot_table(
        index="bin", columns=["sensitivity", "variant"], values="mae_auc", sort=False
    )
    print(wide.to_string(float_format=lambda v: f"{v:.4f}"))
    print("\n... and the larger of the two CI endpoints' MAE")
    rec["mae_ci"] = rec[["mae_ci_lower", "mae_ci_upper"]].max(axis=1)
    wide = rec.pivot_table(
        index="bin", columns=["sensitivity", "variant"], values="mae_ci", sort=False
    )
    print(wide.to_string(float_format=lambda v: f"{v:.4f}"))
    summary = inside.groupby(["sensitivity", "variant"]).agg(
        worst_mae_auc=("mae_auc", "max"),
        worst_mae_ci_lower=("mae_ci_lower", "max"),
        worst_mae_ci_upper=("mae_ci_upper", "max"),
        bins_over_001=("mae_auc", lambda v: int((v > 0.01).sum())),
        data_sets=("count (n >= 500)", "sum"),
    )
    print("\nCheck: empirical AUC in (0.55, 0.95], n >= 500 (target: every MAE <= 0.01)")
    print(summary.to_string(float_format=lambda v: f"{v:.4f}"))
    summary.to_csv(args.out / "recommended_check.csv")

    if not args.skip_grid:
        sub = datasets[: args.grid_reps]
        g = grid(sub, refs[: args.grid_reps], args)
        g.to_csv(args.out / "grid.csv", index=False)
        figure4(g, args.out / "figure4.png")
        per_setting = g.groupby(["sensitivity", "epsilon", "delta"]).apply(
            lambda f: pd.Series(
                {
                    "mae_auc": np.average(f["mae_auc"].fillna(0), weights=f["count"]),
                    "bins_over_001": int((f["mae_auc"] > 0.01).sum()),
                    "bins_with_data": int((f["count"] > 0).sum()),
                }
            ),
            include_groups=False,
        )
        per_setting.to_csv(args.out / "grid_summary.csv")
        print(f"\nFigure 4 grid ({args.grid_reps} data sets per setting): MAE of the AUC")
        wide = per_setting["mae_auc"].unstack("epsilon")
        print(wide.to_string(float_format=lambda v: f"{v:.4f}"))
        print("\nbins with MAE > 0.01 (of bins with data):")
        print(per_setting["bins_over_001"].unstack("epsilon").to_string())
        print(f"figure: {args.out / 'figure4.png'}")
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
