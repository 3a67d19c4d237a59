"""Coverage of the clustered confidence ellipse (paper 3, eq. 14) and small-sample variants.

scripts/results/clustered_coverage.md (Table 1, 60 clusters) has the 95% ellipse of
(population, personalized) AUC at 0.897-0.924 in the settings with personalized AUC 0.9
or 0.8 above a population AUC of 0.8 or 0.7 (the paper's own Table 1: 0.90-0.93). The
ellipse is fedroc's as paper 3 prints it: Corollary 6's covariance and the chi-squared(2)
quantile (:meth:`ClusteredAUCResult.ellipse_contains`). Variants measured here (none is in
fedroc):

- ``F``: Hotelling's quantile ``2 (I - 1) / (I - 2) F(2, I - 2)`` in place of chi-squared(2)
  (the two-dimensional analogue of t on I - 1 df);
- ``logit``: the ellipse of (logit theta12^, logit theta11^) with the delta-method
  covariance, chi-squared(2) or ``F`` (as the logit-scale intervals, fedroc's default
  since 2026-12-07);
- ``logit, F, jk``: the same with the population AUC's variance from the
  leave-one-cluster-out jackknife.

Paper 3's binormal model (11), section 6.1 allocation; vectorized over replicates.

Usage::

    python scripts/clustered_ellipse.py --reps 10000
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import command_line, git_commit, write_result

from fedroc.methods.clustered._core import cluster_terms
from fedroc.methods.clustered._estimators import (
    ellipse_statistic,
    jackknife_population,
    joint_estimates,
)
from fedroc.methods.clustered.models import (
    binormal_parameters,
    sample_allocation,
    sample_binormal,
)

SETTINGS = ((0.8, 0.9, 0.1), (0.8, 0.9, 0.0), (0.7, 0.8, 0.1), (0.7, 0.7, 0.4))
CLUSTERS = (30, 60, 120)
KINDS = ("chi2", "F", "logit", "logit, F", "logit, F, jk")
LEVEL = 0.95


def cell(t12: float, t11: float, rho_mn: float, clusters: int, reps: int, seed: int) -> dict:
    delta, rho = binormal_parameters(t12, t11)
    rng = np.random.default_rng([seed, clusters, round(1000 * t12), round(1000 * t11)])
    m, n = sample_allocation(clusters, rho_mn, rng=rng, replicates=reps)
    smp = sample_binormal(m, n, delta=delta, rho=rho, rng=rng)
    terms = cluster_terms(
        smp.y_true, smp.y_score, smp.cluster, clusters * reps, group=smp.replicate
    )
    args = [getattr(terms, k).reshape(reps, clusters) for k in ("m", "n", "within", "row", "col")]
    joint = joint_estimates(*args)
    est = np.stack([joint.population, joint.personalized], -1)
    cov = joint.covariance
    truth = np.array([t12, t11])
    chi2 = float(stats.chi2.ppf(LEVEL, 2))
    f_q = 2 * (clusters - 1) / (clusters - 2) * float(stats.f.ppf(LEVEL, 2, clusters - 2))
    with np.errstate(all="ignore"):
        slope = 1.0 / (est * (1.0 - est))  # d logit(p) / dp
        logit = np.log(est / (1.0 - est))
        cov_logit = cov * slope[:, :, None] * slope[:, None, :]
        cov_jk = cov.copy()
        cov_jk[:, 0, 0] = jackknife_population(*args)
        cov_jk_logit = cov_jk * slope[:, :, None] * slope[:, None, :]
        t_logit = np.log(truth / (1.0 - truth))
        stat = {
            "chi2": (ellipse_statistic(est, cov, truth), chi2),
            "F": (ellipse_statistic(est, cov, truth), f_q),
            "logit": (ellipse_statistic(logit, cov_logit, t_logit), chi2),
            "logit, F": (ellipse_statistic(logit, cov_logit, t_logit), f_q),
            "logit, F, jk": (ellipse_statistic(logit, cov_jk_logit, t_logit), f_q),
        }
    row: dict[str, Any] = {
        "theta12": t12,
        "theta11": t11,
        "rho_mn": rho_mn,
        "clusters": clusters,
        "reps": reps,
    }
    for kind, (s, q) in stat.items():
        c = float(np.mean(s < q))  # NaN statistics (an estimate at 0 or 1) count as misses
        row[kind] = c
        row[f"{kind}_mcse"] = math.sqrt(c * (1 - c) / reps)
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--out", type=Path, default=Path("scripts/results"))
    args = parser.parse_args(argv)
    command = command_line("clustered_ellipse.py", argv)
    commit = git_commit()
    start = time.perf_counter()
    rows = [
        cell(t12, t11, rho_mn, clusters, args.reps, args.seed)
        for t12, t11, rho_mn in SETTINGS
        for clusters in CLUSTERS
    ]
    seconds = time.perf_counter() - start
    lines = [
        "# The clustered confidence ellipse (eq. 14) with few clusters, and variants",
        "",
        f"Command: `{command}` (seed {args.seed}; commit {commit}; {seconds:.0f} s, nice 10 on",
        "the shared 2-core machine). Coverage of the true (population, personalized) AUC by",
        "the nominal 95% region (MCSE); '<<' marks more than 3 MCSE below 0.95. `chi2` is",
        "fedroc's ellipse (the paper's); the others are not in fedroc (see the script).",
        "",
        "| theta12 / theta11 | rho_MN | clusters | " + " | ".join(KINDS) + " |",
        "|---|---|---|" + "---|" * len(KINDS),
    ]
    for r in rows:
        cells = []
        for k in KINDS:
            c, se = r[k], r[f"{k}_mcse"]
            cells.append(f"{c:.3f} ({se:.3f})" + (" <<" if c < LEVEL - 3 * se else ""))
        lines.append(
            f"| {r['theta12']} / {r['theta11']} | {r['rho_mn']} | {r['clusters']} | "
            + " | ".join(cells)
            + " |"
        )
    text = "\n".join(lines) + "\n"
    write_result(args.out / "clustered_ellipse.md", text)
    print(text)


if __name__ == "__main__":
    main()
