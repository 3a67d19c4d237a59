"""Would the score interval serve where the default AUC interval is undefined (AUC 0 or 1)?

fedroc's default interval (:func:`fedroc.metrics.small_sample_ci`) is the logit interval of
paper 1 eq. 3, joined with the score interval (:func:`fedroc.metrics.score_ci`) below 100
rows of a class. At a sample AUC of 1 (every positive above every negative) DeLong's
variance is 0, the logit interval is undefined, and the default is withheld with a caveat
(``fedroc metrics`` quotes the score interval, which stays defined). This study measures,
for binormal data (equal SDs, the positives shifted to the design's AUC, optionally rated on
5 levels as scripts/delong_small_sample.py does), how often the sample AUC is 1, and how
often the score interval at AUC 1 holds the design's AUC: the coverage the default would
have on the runs it now withholds, if it fell back to the score interval there. It changes
nothing in fedroc; the decision is the lead's.

Usage::

    python scripts/separated_score_ci.py [--reps 4000] [--seed 20261207]
        [--out scripts/results/separated_score_ci.md]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_result

from fedroc.metrics import ScoreCounts, score_ci

AUCS = (0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.995)
SIZES = ((2, 3), (3, 12), (5, 5), (5, 20), (10, 40), (20, 80), (50, 200))


def _rated(x: np.ndarray, y: np.ndarray, shift: float, rng: np.random.Generator) -> tuple:
    """Cut the latent scores into 5 levels at quantiles of the mixture (ties, as rated data)."""
    mix = np.r_[rng.normal(shift, 1, 5000) * 0.5, rng.normal(0, 1, 5000)]
    cuts = np.quantile(mix, np.linspace(0, 1, 6)[1:-1])
    return np.searchsorted(cuts, x).astype(float), np.searchsorted(cuts, y).astype(float)


def cell(
    auc: float, p: int, q: int, rated: bool, reps: int, rng: np.random.Generator
) -> tuple[int, int, float]:
    """Runs with a sample AUC of 1, how many of their score intervals hold ``auc``, mean low."""
    shift = float(np.sqrt(2.0) * stats.norm.ppf(auc))
    hits = held = 0
    lows = []
    labels = np.r_[np.ones(p, bool), np.zeros(q, bool)]
    for _ in range(reps):
        x, y = rng.normal(shift, 1, p), rng.normal(0, 1, q)
        if rated:
            x, y = _rated(x, y, shift, rng)
        if x.min() <= y.max():
            continue
        hits += 1
        ties = ScoreCounts.from_scores(labels, np.r_[x, y]).delong().ties
        low, high = score_ci(1.0, p, q, ties=ties)
        lows.append(low)
        held += low <= auc <= high
    return hits, held, float(np.mean(lows)) if lows else float("nan")


def main(argv: list[str] | None = None) -> int:
    """Run the cells and write the Markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=4000, help="replicates per cell")
    ap.add_argument("--seed", type=int, default=20261207)
    ap.add_argument("--out", type=Path, default=Path("scripts/results/separated_score_ci.md"))
    args = ap.parse_args(argv)
    t0 = time.time()
    rng = np.random.default_rng(args.seed)
    lines = []
    for auc in AUCS:
        for p, q in SIZES:
            for rated in (False, True):
                hits, held, low = cell(auc, p, q, rated, args.reps, rng)
                share = hits / args.reps
                cov = f"{held / hits:.3f}" if hits else "-"
                miss = f"{(hits - held) / args.reps:.4f}"
                lines.append(
                    f"| {auc} | {p} | {q} | {'5 levels' if rated else 'continuous'} | "
                    f"{share:.4f} | {hits} | {cov} | {miss} | "
                    f"{'-' if not hits else f'{low:.3f}'} |"
                )
                print(lines[-1], flush=True)
    text = [
        "# The score interval where the default AUC interval is undefined (sample AUC 1)",
        "",
        f"Command: `python scripts/separated_score_ci.py --reps {args.reps} --seed "
        f"{args.seed}`. Binormal, equal SDs; 'AUC 1' is the share of {args.reps} replicates "
        "whose sample AUC is 1 (the default interval withheld); 'held' is the share of those "
        "whose 95% score interval holds the design's AUC; 'missed, of all' is the share of "
        "all replicates that a fallback to the score interval would add as misses; 'low' the "
        "mean lower end.",
        "",
        "| AUC | positives | negatives | scores | AUC 1 | runs | held | missed, of all | low |",
        "|---|---|---|---|---|---|---|---|---|",
        *lines,
        "",
        f"{time.time() - t0:.0f} s.",
        "",
    ]
    write_result(args.out, "\n".join(text))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
