"""AUC plus DeLong CI on 10^7 scores against scikit-learn's roc_auc_score alone.

Target (issue 2): fedroc's AUC + DeLong variance + CI in at most 1.5x the time of
scikit-learn's AUC alone. Run: .venv/bin/python benchmarks/bench_metrics.py [--n N]
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import best_of
from sklearn.metrics import roc_auc_score

from fedroc.metrics import delong, roc_auc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10**7)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, args.n)
    cases = {
        "continuous scores": rng.normal(size=args.n) + 0.8 * y,
        "scores on 1000 levels (ties)": np.round(rng.random(args.n) + 0.3 * y, 3),
    }
    print(f"n = {args.n:,}; best of {args.repeat} runs")
    print(
        f"{'data':<30} {'sklearn AUC [s]':>16} {'fedroc AUC [s]':>15} "
        f"{'fedroc AUC+DeLong CI [s]':>25} {'ratio':>7} {'|dAUC|':>9}"
    )
    for name, s in cases.items():
        t_sk = best_of(lambda s=s: roc_auc_score(y, s), args.repeat)
        t_auc = best_of(lambda s=s: roc_auc(y, s), args.repeat)
        t_ci = best_of(lambda s=s: delong(y, s).confidence_interval(), args.repeat)
        diff = abs(delong(y, s).auc - roc_auc_score(y, s))
        print(
            f"{name:<30} {t_sk:>16.3f} {t_auc:>15.3f} {t_ci:>25.3f} "
            f"{t_ci / t_sk:>7.2f} {diff:>9.1e}"
        )
    print("ratio = fedroc AUC + DeLong CI / sklearn roc_auc_score (target <= 1.5)")


if __name__ == "__main__":
    main()
