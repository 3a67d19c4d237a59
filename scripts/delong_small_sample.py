"""Why the default DeLong logit interval undercovers with few rows of a class, and what
other intervals would do (the cells where scripts/coverage_audit.py found it low).

Pooled rows, the designs of coverage_audit.py (latent binormal, optionally rated on 5
levels), computed directly on :class:`fedroc.metrics.ScoreCounts` (the pooled method,
the histogram under secure aggregation and the MPC method all report this interval).
Candidates, each at 95%:

- ``logit``: fedroc's default, paper 1 eq. 3 (DeLong's SE on the logit scale, z quantile);
- ``logit-t``: the same with Student's t on min(n_pos, n_neg) - 1 degrees of freedom;
- ``wald``: pROC's default (AUC +- z SE, clipped);
- ``newcombe5``: Newcombe (2006) method 5, the score-type interval of Hanley-McNeil's
  variance with N* = (m + n) / 2 (a model variance that ignores ties);
- ``bootstrap``: fedroc's stratified percentile bootstrap (``bootstrap=`` of the pooled
  method; 500 samples, on the first 200 replicates);
- ``score``: :func:`fedroc.metrics.score_ci`, Newcombe's method 5 with the variance of the
  tied data (Hanley-McNeil's model with the rows' tie pattern; equal to ``newcombe5``
  without ties);
- ``auto``: fedroc's default since this script's second version
  (:func:`fedroc.metrics.small_sample_ci`): ``logit`` with 100 rows of each class or more,
  below that the union of ``logit`` and ``score``.

Designs 10-16 were added with ``score`` and ``auto``: 75 to 300 positives at a high AUC
(where the threshold of 100 matters), 5-level scores with 20 positives, and two larger
designs where ``logit`` covers; designs 17-20 give the positives' latent score an SD of 0.5
or 2 (the negatives' 1: an asymmetric ROC curve). Each design draws from its own seeded
generator, so the first nine rows are those of the first version.

For each: coverage (MCSE), mean width, and the share of misses with the truth below the
interval, which tells the mechanism (the positives' placement values are skewed at high
AUC, so a high estimate comes with a small SE).

Usage: python scripts/delong_small_sample.py [--reps 1000] [--seed 20261128]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Sequence

import numpy as np
from scipy import optimize, special, stats

from fedroc.metrics import ScoreCounts, roc_auc, score_ci

CELLS = [  # (levels, auc, prevalence, n[, SD of the positives' latent score])
    (None, 0.95, 0.05, 300),
    (None, 0.95, 0.05, 1000),
    (None, 0.8, 0.05, 300),
    (5, 0.95, 0.05, 1000),
    (5, 0.8, 0.05, 100),
    (5, 0.8, 0.05, 300),
    (None, 0.8, 0.2, 300),
    (None, 0.6, 0.5, 100),
    (5, 0.95, 0.5, 100),
    (None, 0.95, 0.05, 1500),
    (None, 0.95, 0.05, 2000),
    (None, 0.99, 0.1, 1000),
    (None, 0.99, 0.1, 3000),
    (5, 0.9, 0.1, 200),
    (None, 0.7, 0.3, 1000),
    (5, 0.8, 0.3, 1000),
    (None, 0.9, 0.05, 300, 0.5),
    (None, 0.95, 0.05, 1000, 0.5),
    (None, 0.9, 0.05, 300, 2.0),
    (None, 0.95, 0.05, 1000, 2.0),
]
Z = float(stats.norm.ppf(0.975))


def simulate(
    n: int,
    prevalence: float,
    auc: float,
    levels: int | None,
    rng: np.random.Generator,
    sd: float = 1.0,
):
    mu = math.sqrt(1.0 + sd * sd) * float(special.ndtri(auc))
    y = rng.random(n) < prevalence
    s = special.ndtr(rng.normal(mu * y, np.where(y, sd, 1.0)))
    if levels:
        s = np.floor(s * levels).clip(0, levels - 1) / (levels - 1)
    return y.astype(int), s


def truth(auc: float, levels: int | None) -> float:
    if not levels:
        return auc
    y, s = simulate(2_000_000, 0.5, auc, levels, np.random.default_rng(12345))
    return roc_auc(y, s)


def logit(a: float, se: float, q: float) -> tuple[float, float]:
    c, h = math.log(a / (1 - a)), q * se / (a * (1 - a))
    return float(special.expit(c - h)), float(special.expit(c + h))


def newcombe5(a: float, m: int, n: int) -> tuple[float, float]:
    ns = (m + n) / 2

    def f(t: float) -> float:
        v = t * (1 - t) / (m * n) * (1 + (ns - 1) * (1 - t) / (2 - t) + (ns - 1) * t / (1 + t))
        return (a - t) ** 2 - Z * Z * v

    lo = 0.0 if f(0.0) <= 0 else optimize.brentq(f, 0.0, a)
    hi = 1.0 if f(1.0) <= 0 else optimize.brentq(f, a, 1.0)
    return lo, hi


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20261128)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    names = ("logit", "logit-t", "wald", "newcombe5", "bootstrap", "score", "auto")
    print(
        "| rated | AUC | prevalence | n | positives' SD | AUC 0/1 (no logit CI) | "
        + " | ".join(f"{k}: coverage (MCSE), width, truth below" for k in names)
        + " |"
    )
    print("|---" * (6 + len(names)) + "|")
    start = time.perf_counter()
    for levels, auc, prev, n, *rest in CELLS:
        sd = rest[0] if rest else 1.0
        t = truth(auc, levels)
        key = [args.seed, n, round(auc * 100), round(prev * 100)]
        rng = np.random.default_rng(key if sd == 1.0 else [*key, round(sd * 100)])
        hit: dict[str, list[bool]] = {k: [] for k in names}
        width: dict[str, list[float]] = {k: [] for k in names}
        below: dict[str, int] = dict.fromkeys(names, 0)
        bound = 0
        for rep in range(args.reps):
            y, s = simulate(n, prev, auc, levels, rng, sd)
            p = int(y.sum())
            if p < 2 or n - p < 2:
                continue
            counts = ScoreCounts.from_scores(y, s)
            d = counts.delong()
            if not 0.0 < d.auc < 1.0:
                bound += 1
                continue
            q = float(stats.t.ppf(0.975, min(p, n - p) - 1))
            cis = {
                "logit": d.confidence_interval(method="logit"),
                "logit-t": logit(d.auc, d.se, q),
                "wald": d.confidence_interval(method="wald"),
                "newcombe5": newcombe5(d.auc, p, n - p),
                "score": score_ci(d.auc, p, n - p, ties=d.ties),
                "auto": d.ci,
            }
            if rep < 200:
                boot = counts.bootstrap_auc(500, seed=rep).confidence_interval()
                cis["bootstrap"] = (float(boot[0]), float(boot[1]))
            for k, (lo, hi) in cis.items():
                hit[k].append(lo <= t <= hi)
                width[k].append(hi - lo)
                below[k] += t < lo
        cells = []
        for k in names:
            c, r = float(np.mean(hit[k])), len(hit[k])
            misses = r - sum(hit[k])
            cells.append(
                f"{c:.3f} ({math.sqrt(c * (1 - c) / r):.3f}), {np.mean(width[k]):.3f}, "
                f"{below[k]}/{misses}"
            )
        print(
            f"| {'yes' if levels else 'no'} | {auc} | {prev} | {n} | {sd:g} | {bound} | "
            + " | ".join(cells)
            + " |",
            flush=True,
        )
    print(
        f"\n{args.reps} replicates a cell (bootstrap: the first 200), seed {args.seed}; "
        f"{time.perf_counter() - start:.0f} s",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
