"""What H13-2 costs: a secure calibration curve's mean predictions in bins a site withheld.

Since H13-2 (``tests/test_attacks_review13.py``) a site puts the rows of a calibration bin
it withholds (under q rows, or the secondary bin) in the secure sum of predictions at the
bin's middle, and sends a flag, not their count (which was its own count under q wherever
the other sites withheld nothing). Before, the flagged bin's mean prediction was over the
other sites' rows (exact for them, none where no other site had a row there). Both are
compared with the mean prediction of every row of the bin (the pooled curve,
``fedroc.metrics.calibration_curve``, the independent reference); the counts and observed
fractions are the pooled ones either way.

``make_multisite`` hospitals (the README's data), three sites of the given sizes, q = 5,
10 bins. "Before" is recomputed by hand from each site's bins and ``withheld_bins``.

Usage::

    python scripts/secure_calibration_imputation.py --reps 100
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import git_commit, write_result

from fedroc.datasets import make_multisite
from fedroc.federation import Federation
from fedroc.federation.basic import withheld_bins
from fedroc.metrics import bin_edges, calibration_curve
from fedroc.secagg.statistics import secure_calibration

BINS = 10
SETTINGS = [(50, 120, 400), (100, 100, 100), (200, 300, 400)]


def measure(sizes: tuple[int, ...], reps: int, seed: int) -> dict[str, float]:
    edges = bin_edges(BINS)
    now, before = [], []
    flagged = bins = lost = 0
    for rep in range(reps):
        frames = make_multisite(sizes=sizes, seed=seed + rep)
        curve = secure_calibration(Federation.from_frames(frames), n_bins=BINS).curve
        kept_sum, kept_n = np.zeros(BINS), np.zeros(BINS)
        ys, ps = [], []
        for f in frames.values():
            y, p = np.asarray(f["label"], bool), np.asarray(f["score"], np.float64)
            ys.append(y)
            ps.append(p)
            k = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, BINS - 1)
            count = np.bincount(k, minlength=BINS)
            withheld = withheld_bins(count, 5)
            kept_sum += np.where(withheld, 0.0, np.bincount(k, weights=p, minlength=BINS))
            kept_n += np.where(withheld, 0, count)
        truth = calibration_curve(np.concatenate(ys), np.concatenate(ps), n_bins=BINS)
        bins += int(np.count_nonzero(truth.count))
        for b in np.flatnonzero(curve.suppressed & (curve.count > 0)):
            flagged += 1
            now.append(abs(curve.mean_predicted[b] - truth.mean_predicted[b]))
            if kept_n[b]:
                before.append(abs(kept_sum[b] / kept_n[b] - truth.mean_predicted[b]))
            else:
                lost += 1
    return {
        "flagged": flagged,
        "bins": bins,
        "now_mean": float(np.mean(now)) if now else 0.0,
        "now_max": float(np.max(now)) if now else 0.0,
        "before_mean": float(np.mean(before)) if before else 0.0,
        "before_max": float(np.max(before)) if before else 0.0,
        "lost": lost,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    lines = [
        "# Secure calibration: withheld bins at the bin's middle (H13-2)",
        "",
        f"Command: `python scripts/secure_calibration_imputation.py --reps {args.reps}` "
        f"(seed {args.seed}, commit {git_commit()}).",
        "",
        "`make_multisite` hospitals, 3 sites, q = 5, 10 bins. Over the non-empty bins some "
        "site withheld (`flagged`, of all non-empty bins): the absolute difference of the "
        "curve's mean prediction to that of every row of the bin (pooled curve), now (the "
        "withheld rows at the middle) and before (over the other sites' rows; `no mean "
        "before`: flagged bins with no other site's row, whose mean was withheld).",
        "",
        "| site sizes | flagged / bins | now mean abs d | now max | before mean abs d "
        "| before max | no mean before |",
        "|---|---|---|---|---|---|---|",
    ]
    for sizes in SETTINGS:
        r = measure(sizes, args.reps, args.seed)
        lines.append(
            f"| {', '.join(map(str, sizes))} | {r['flagged']} / {r['bins']} | "
            f"{r['now_mean']:.4f} | {r['now_max']:.4f} | {r['before_mean']:.4f} | "
            f"{r['before_max']:.4f} | {r['lost']} |"
        )
    write_result(args.out / "secure_calibration_imputation.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
