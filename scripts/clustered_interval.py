"""Coverage of the clustered intervals, t on I - 1 df against normal (Wald), by clusters.

The design of ``scripts/coverage_audit.py``'s clustered cells (paper 3's allocation of
section 6.1, binormal model (11), population AUC 0.7, personalized 0.8, rho_MN 0.4, about
5.5 rows a cluster), pooled (``clustered_auc``: the federated method gives the same
estimates up to binning). For each number of clusters I, the share of replicates whose 95%
interval holds the truth, for the population AUC (theta12), the personalized AUC (theta11)
and Obuchowski's AUC (whose truth, the all-pairs AUC, is estimated from one large sample).

Usage::

    python scripts/clustered_interval.py --reps 2000
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_result

from fedroc.methods.clustered import clustered_auc
from fedroc.methods.clustered.models import binormal_parameters, sample_allocation, sample_binormal
from fedroc.metrics import roc_auc

AUC, PERSONALIZED, RHO_MN = 0.7, 0.8, 0.4
CLUSTERS = (10, 18, 36, 55, 100)


def _sample(n_clusters: int, rng: np.random.Generator) -> tuple:
    delta, rho = binormal_parameters(AUC, PERSONALIZED)
    m, n = sample_allocation(n_clusters, RHO_MN, rng=rng)
    smp = sample_binormal(m, n, delta=delta, rho=rho, rng=rng)
    return smp.y_true, special.ndtr(smp.y_score), smp.cluster


def _all_pairs_truth(rng: np.random.Generator) -> float:
    y, s, _ = _sample(200_000, rng)
    return float(roc_auc(y, s))


def measure(reps: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    truths = {"population": AUC, "personalized": PERSONALIZED, "obuchowski": _all_pairs_truth(rng)}
    rows = []
    for n_clusters in CLUSTERS:
        hits = {(w, k): 0 for w in truths for k in ("t", "wald")}
        runs = 0
        start = time.perf_counter()
        for _ in range(reps):
            y, s, c = _sample(n_clusters, rng)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    r = clustered_auc(y, s, c)
                except Exception:
                    continue
            runs += 1
            for kind in ("t", "wald"):
                res = replace(r, interval=kind)
                for which, truth in truths.items():
                    lo, hi = res.confidence_interval(which)
                    hits[(which, kind)] += bool(lo <= truth <= hi)
        for which in truths:
            row = {"clusters": n_clusters, "estimate": which, "runs": runs}
            for kind in ("t", "wald"):
                c = hits[(which, kind)] / runs
                row[kind] = c
                row[f"{kind}_mcse"] = math.sqrt(c * (1 - c) / runs)
            rows.append(row)
        took = time.perf_counter() - start
        print(f"I={n_clusters}: {runs} runs in {took:.1f} s", file=sys.stderr)
    return rows


def to_markdown(rows: list[dict], command: str) -> str:
    lines = [
        "# Clustered intervals: t on I - 1 df against normal (Wald)",
        "",
        f"Command: `{command}`",
        "",
        "Pooled `clustered_auc` (the federated method's estimates are the same up to binning),",
        f"population AUC {AUC}, personalized {PERSONALIZED}, rho_MN {RHO_MN}, paper 3's allocation",
        "(about 5.5 rows a cluster). Coverage of the nominal 95% interval (MC SE).",
        "",
        "| clusters | estimate | runs | t on I - 1 df | normal (Wald) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['clusters']} | {r['estimate']} | {r['runs']} | {r['t']:.3f} ({r['t_mcse']:.3f}) "
            f"| {r['wald']:.3f} ({r['wald_mcse']:.3f}) |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20261128)
    parser.add_argument("--out", type=Path, default=Path("scripts/results"))
    args = parser.parse_args(argv)
    rows = measure(args.reps, args.seed)
    command = f"python scripts/clustered_interval.py --reps {args.reps} --seed {args.seed}"
    text = to_markdown(rows, command)
    write_result(args.out / "clustered_interval.md", text)
    print(text)


if __name__ == "__main__":
    main()
