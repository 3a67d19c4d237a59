"""Where the histogram AUC's bias under distributed DP comes from (issue 13).

Each replicate draws a federation's pooled rows from a design of ``scripts/coverage.py``,
builds the exact hierarchical histograms and class counts, adds the noise the sites'
shares sum to (one discrete Laplace draw per node and per class count, epsilon / (h + 1)
each: the law of the released sums, sampled here with numpy since this is a simulation
of the analyst's view, not a site), and runs the method's own analyst steps: the decision
from the noisy class counts (``_counts_withheld``) and the estimate from the tree
(:func:`fedroc.methods.histogram.estimate`). Since the script holds the exact counts, it
splits each estimate's error into parts:

- ``binning``: the exact counts' binned AUC at the chosen level minus the sample's AUC;
- ``noise``: the estimate minus that binned AUC, measured with a control variate (the
  noise's first-order term, whose mean is exactly 0, is subtracted: its MCSE is then a
  tenth of the plain one), for the estimate (``corrected``), the plain ratio (``raw``) and
  the area under the noisy curves (``curve``: the paper's curves from leaf masses clipped
  at 0);
- ``selection``: the mean first-order noise term over the runs that were released (0 over
  all runs): what the release decision does to the released runs. It reads only the
  class counts, whose noise is independent of the tree's, so this is 0 up to its MCSE
  (the tree's own rules, ties and the interval's width, still read the tree).

Among the released runs: the bias (plain, and with the control variate), and the
coverage and width of the method's interval (Fieller's, unconditioned) and of the Wald
interval ``auc +- z se``. The rule table varies the threshold of the decision (in noise
SDs of a class total of the tree, after the counts' lower bound) and shows the share
released and the bias and coverage among the released runs.

Usage::

    python scripts/histogram_dp_bias.py [--reps 1000] [--cells rare:1500:"eps 1, Q 256"]
        [--out scripts/results]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import command_line, git_commit, write_result
from coverage import DESIGNS, Design

from fedroc.methods.histogram import COUNT_Z, MIN_TOTAL_SNR, _counts_withheld, estimate
from fedroc.methods.histogram._dp import dp_auc, dp_interval
from fedroc.methods.histogram._protocol import AggregatedTree, NoisyCounts, check_options
from fedroc.methods.histogram._site import count_leaves, levels_from_leaves
from fedroc.methods.histogram._tree import (
    consistent_tree,
    node_noise_variance,
    total_noise_sd,
)
from fedroc.metrics import roc_auc

SETTINGS = {"eps 1, Q 1024": (1.0, 1024), "eps 1, Q 256": (1.0, 256), "eps 0.1, Q 64": (0.1, 64)}
THRESHOLDS = (3.0, 4.0, 5.0, 6.0, 7.0)
Z95 = float(special.ndtri(0.975))


def _first_order(pos: np.ndarray, neg: np.ndarray, e: np.ndarray, f: np.ndarray) -> float:
    """The noise's first-order effect on the binned AUC (mean exactly 0)."""
    n_pos, n_neg = pos.sum(), neg.sum()
    v10 = (np.cumsum(neg) - 0.5 * neg) / n_neg
    v01 = (n_pos - np.cumsum(pos) + 0.5 * pos) / n_pos
    auc = pos @ v10 / n_pos
    return float(e @ (v10 - auc) / n_pos + f @ (v01 - auc) / n_neg)


def _binned_auc(pos: np.ndarray, neg: np.ndarray) -> float:
    v10 = (np.cumsum(neg) - 0.5 * neg) / neg.sum()
    return float(pos @ v10 / pos.sum())


def replicate(design: Design, n: int, eps: float, quantiles: int, rng: np.random.Generator):
    """One run: the decision, the method's result and the parts of its error."""
    opts = check_options(
        quantiles=quantiles,
        dp_epsilon=eps,
        dp_mode="distributed",
        dp_noise="discrete",
        branching=2,
        height=None,
        score_range=None,
        score_transform=None,
        post_processing=True,
        threshold=None,
        allow_dropouts=False,
        calibration_bins=None,
        oversampling=None,
        interpolation="pchip",
    )
    h = opts.height
    frames = design.simulate(n, rng)
    y = np.concatenate([f["label"].to_numpy() for f in frames.values()]).astype(bool)
    s = np.concatenate([f["score"].to_numpy() for f in frames.values()])
    pos, neg = count_leaves(y, s, 2**h, 0.0, 1.0)
    exact_p = levels_from_leaves(pos.astype(np.float64), 2)
    exact_n = levels_from_leaves(neg.astype(np.float64), 2)
    alpha = math.exp(-opts.eps_level)  # the class counts have the same budget

    def laplace(size: int) -> np.ndarray:
        return rng.geometric(1 - alpha, size) - rng.geometric(1 - alpha, size)

    noisy_p = [lv + laplace(lv.size) for lv in exact_p]
    noisy_n = [lv + laplace(lv.size) for lv in exact_n]
    sigma2 = node_noise_variance("discrete", opts.eps_level)
    n_pos, n_neg = float(exact_p[0].sum()), float(exact_n[0].sum())
    noisy_counts = (n_pos + float(laplace(1)[0]), n_neg + float(laplace(1)[0]))
    counts = NoisyCounts(noisy_counts, math.sqrt(sigma2), opts.count_epsilon, ["pooled"])
    tree = AggregatedTree(noisy_p, noisy_n, sigma2, 1.0, ["pooled"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = estimate(tree, opts)
    cons_p, cons_n = consistent_tree(noisy_p, 2), consistent_tree(noisy_n, 2)
    total_sd = total_noise_sd(2, h, sigma2, True)
    row = {
        "sample": roc_auc(y.astype(int), s),
        "n_pos": n_pos,
        "total_sd": total_sd,
        # The decision's statistic: the counts' lower bound in SDs of a tree total.
        "count_snr": (min(noisy_counts) - COUNT_Z * counts.sd) / total_sd,
        "decided": _counts_withheld(counts, opts) is None,
        "min_total": min(float(cons_p[0].sum()), float(cons_n[0].sum())),
        "tree_ok": math.isfinite(res.auc),  # the tree's own rules (ties, width)
    }
    row["released"] = row["decided"] and row["tree_ok"]
    if not row["min_total"] > 0:
        return row
    dp = dp_auc(
        cons_p, cons_n, branching=2, sigma2=sigma2, post_processing=True, confidence_level=0.95
    )
    assert dp is not None
    lv = dp.level - 1
    first = _first_order(
        exact_p[lv], exact_n[lv], cons_p[lv] - exact_p[lv], cons_n[lv] - exact_n[lv]
    )
    widen = dp.ties / 2.0
    se = math.sqrt(dp.noise_variance + dp.delong.variance)
    fieller = dp_interval(replace(dp.test, threshold=None), widen, 0.95)
    if row["tree_ok"]:  # the method's own numbers are these
        assert res.auc == dp.auc and res.confidence_interval() == fieller
    row.update(
        level=dp.level,
        binned=_binned_auc(exact_p[lv], exact_n[lv]),
        estimate=dp.auc,
        raw=dp.raw,
        curve=res.curve_auc,
        first_order=first,
        se=se,
        wald_lo=max(0.0, dp.auc - Z95 * se - widen),
        wald_hi=min(1.0, dp.auc + Z95 * se + widen),
        fieller_lo=np.nan if fieller is None else fieller[0],
        fieller_hi=np.nan if fieller is None else fieller[1],
    )
    return row


def summarize(runs: pd.DataFrame, truth: float) -> dict[str, float]:
    est = runs.dropna(subset=["estimate"])
    rel = est[est["released"]]
    k = len(est)
    cv = est["first_order"]
    out: dict[str, float] = {
        "runs": len(runs),
        "released": float(runs["released"].mean()),
        "decided (class counts)": float(runs["decided"].mean()),
        "withheld by the tree's rules after the decision": float(
            (runs["decided"] & ~runs["tree_ok"]).mean()
        ),
        "n_pos / total SD": float((runs["n_pos"] / runs["total_sd"]).mean()),
        "sampling": float((est["sample"] - truth).mean()),
        "binning": float((est["binned"] - est["sample"]).mean()),
    }
    for name in ("estimate", "raw", "curve"):
        d = est[name] - est["binned"] - cv
        out[f"noise: {name}"] = float(d.mean())
        out[f"noise: {name} MCSE"] = float(d.std(ddof=1) / math.sqrt(k))
    if len(rel):
        m = len(rel)
        out["released: bias"] = float((rel["estimate"] - truth).mean())
        out["released: bias MCSE"] = float(rel["estimate"].std(ddof=1) / math.sqrt(m))
        # The released runs' bias with the control variate, whose mean is exactly 0 unless
        # the release selects on the tree's noise (the selection row measures that).
        d = rel["estimate"] - rel["first_order"] - truth
        out["released: bias, control variate"] = float(d.mean())
        out["released: bias, control variate MCSE"] = float(d.std(ddof=1) / math.sqrt(m))
        out["released: selection"] = float(rel["first_order"].mean() - cv.mean())
        out["released: selection MCSE"] = float(rel["first_order"].std(ddof=1) / math.sqrt(m))
        for name in ("wald", "fieller"):
            lo, hi = rel[f"{name}_lo"], rel[f"{name}_hi"]
            out[f"{name}: coverage"] = float(((lo <= truth) & (truth <= hi)).mean())
            out[f"{name}: miss low/high"] = f"{(lo > truth).mean():.3f}/{(hi < truth).mean():.3f}"  # type: ignore[assignment]
            out[f"{name}: width"] = float((hi - lo).mean())
    return out


def rule_table(runs: pd.DataFrame, truth: float) -> list[dict[str, object]]:
    rows = []
    est = runs.dropna(subset=["estimate"])
    for k in THRESHOLDS:
        rel = est[(est["count_snr"] >= k) & est["tree_ok"]]
        lo, hi = rel["fieller_lo"], rel["fieller_hi"]
        cv = rel["estimate"] - rel["first_order"] - truth
        rows.append(
            {
                "threshold (SDs)": k,
                "released": len(rel) / len(runs),
                "bias": float((rel["estimate"] - truth).mean()) if len(rel) else math.nan,
                "bias (control variate)": float(cv.mean()) if len(rel) else math.nan,
                "bias (control variate) MCSE": float(cv.std(ddof=1) / math.sqrt(len(rel)))
                if len(rel) > 1
                else math.nan,
                "coverage (Fieller)": float(((lo <= truth) & (truth <= hi)).mean())
                if len(rel)
                else math.nan,
                "width (Fieller)": float((hi - lo).mean()) if len(rel) else math.nan,
                "largest error": float((rel["estimate"] - truth).abs().max())
                if len(rel)
                else math.nan,
            }
        )
    return rows


def _fmt(value: object, key: str = "") -> str:
    if not isinstance(value, float):
        return str(value)
    if math.isnan(value):
        return "-"
    signed = not any(
        w in key
        for w in ("MCSE", "width", "coverage", "released", "decided", "withheld", "SD", "error")
    )
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def to_markdown(
    cells: list[tuple[str, dict[str, float], list[dict[str, object]]]],
    command: str,
    seed: int,
    commit: str,
) -> str:
    lines = [
        "# Where the histogram AUC's bias under distributed DP comes from",
        "",
        f"Command: `{command}` (seed {seed}, commit {commit}). The design's AUC is the",
        "truth; parts of the error of the estimate (see the script's docstring): `sampling`",
        "(the sample's AUC), `binning` (the exact counts' binned AUC at the chosen level),",
        "`noise` (estimate minus that binned AUC, with the first-order noise term subtracted",
        "as a control variate: its mean is 0) for the method's estimate, the plain ratio and",
        "the area under the noisy (clipped) curves; `selection`: the mean first-order noise",
        "term of the released runs minus that of all runs. The decision reads the class",
        "counts released before the tree (their own noise); the tree's own rules (ties, the",
        "interval's width) still apply. Intervals of the released runs: Wald",
        "(`auc +- z se`) and Fieller's (the method's).",
        "",
    ]
    for cell, summary, rules in cells:
        lines += [f"## {cell}", "", "| quantity | value |", "|---|---|"]
        lines += [f"| {k} | {_fmt(v, k)} |" for k, v in summary.items()]
        keys = list(rules[0])
        lines += [
            "",
            "The decision's threshold: the smaller noisy class count, less "
            f"{COUNT_Z:g} of its noise",
            "SDs, in noise SDs of a class total of the tree (the method uses "
            f"{MIN_TOTAL_SNR:g}); runs the",
            "tree's own rules withhold are left out:",
            "",
            "| " + " | ".join(keys) + " |",
            "|" + "---|" * len(keys),
        ]
        lines += ["| " + " | ".join(_fmt(r[k], k) for k in keys) + " |" for r in rules]
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument(
        "--cells",
        nargs="+",
        default=["rare:500:eps 1, Q 1024", "rare:1000:eps 1, Q 1024", "rare:1500:eps 1, Q 1024"],
        help="design:n:setting, the setting one of " + ", ".join(SETTINGS),
    )
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--out", type=Path, default=Path("scripts/results"))
    parser.add_argument("--name", default="histogram_dp_bias")
    args = parser.parse_args(argv)
    command = command_line("histogram_dp_bias.py", argv)
    start = time.perf_counter()
    cells = []
    for cell in args.cells:
        design_name, n_text, setting = cell.split(":")
        design = DESIGNS[design_name]
        eps, quantiles = SETTINGS[setting]
        rng = np.random.default_rng([args.seed, int(n_text)])
        runs = pd.DataFrame(
            [replicate(design, int(n_text), eps, quantiles, rng) for _ in range(args.reps)]
        )
        cells.append((cell, summarize(runs, design.truth()), rule_table(runs, design.truth())))
        print(cell, file=sys.stderr, flush=True)
    text = to_markdown(cells, command, args.seed, git_commit())
    write_result(args.out / f"{args.name}.md", text)
    print(text)
    print(f"{time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
