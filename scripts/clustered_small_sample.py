"""Coverage of the clustered intervals with few clusters: logit, t, Wald and jackknife.

Paper 3's design (section 6.1 allocation with rho_MN = 0.4, 4-7 rows a cluster, mean 5.5,
binormal model (11)), on a grid of cluster counts I and of (population, personalized) AUCs.

- ``pooled``: :func:`fedroc.methods.clustered.clustered_auc`'s estimates and variances
  (Corollary 6 and Obuchowski's, from the product's per-cluster terms, vectorized over
  replicates), with the 95% intervals of :func:`fedroc.methods.clustered._result.cluster_ci`
  (``"wald"``, ``"t"`` on I - 1 df, ``"logit"``: t on the logit scale), and with the
  leave-one-cluster-out jackknife variance of the population AUC
  (:func:`~fedroc.methods.clustered._estimators.jackknife_population`, Quenouille-Tukey;
  for a ratio estimator the jackknife is the usual small-sample remedy, and in linear
  models it is the CR3 cluster-robust variance, MacKinnon, Nielsen & Webb 2023), with t
  on I - 1 df, raw or on the logit scale (``interval="jackknife"``, pooled only). The
  script's vectorized intervals are checked against ``cluster_ci`` on the first
  replicates of every cell.
- ``federated``: ``evaluate(fed, "clustered")`` with its defaults on the same design dealt
  to three sites (secure aggregation); its default interval's coverage, the pooled
  default's on the same replicates, and the largest difference between the two intervals'
  bounds (the federated population AUC is that of the scores binned to the sites' grid).
  Ten clusters over three sites is refused by the default policy (a site needs 5 clusters).

Usage::

    python scripts/clustered_small_sample.py --reps 10000 --fed-reps 500
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import special, stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import command_line, git_commit, write_result

from fedroc.exceptions import DisclosureError
from fedroc.federation import Federation
from fedroc.methods import evaluate
from fedroc.methods.clustered import clustered_auc
from fedroc.methods.clustered._core import cluster_terms
from fedroc.methods.clustered._estimators import (
    jackknife_population,
    joint_estimates,
    obuchowski,
)
from fedroc.methods.clustered._result import cluster_ci
from fedroc.methods.clustered.models import (
    binormal_parameters,
    sample_allocation,
    sample_binormal,
)
from fedroc.metrics import roc_auc
from fedroc.privacy import DisclosurePolicy

CLUSTERS = (10, 18, 30, 60, 120)
AUCS = ((0.6, 0.7), (0.7, 0.8), (0.85, 0.9), (0.95, 0.97))
FED_CLUSTERS = (18, 30, 60, 120)
FED_AUCS = ((0.7, 0.8), (0.85, 0.9))
RHO_MN = 0.4
LEVEL = 0.95
SITES = 3
CHECKED = 20  # replicates per cell whose vectorized intervals are compared with cluster_ci


def intervals(
    est: np.ndarray, se: np.ndarray, clusters: int, kind: str
) -> tuple[np.ndarray, np.ndarray]:
    """``cluster_ci`` vectorized over replicates (checked against it in :func:`pooled_cell`)."""
    if kind == "wald":
        q = float(stats.norm.ppf(0.5 + LEVEL / 2))
    else:
        q = float(stats.t.ppf(0.5 + LEVEL / 2, clusters - 1))
    lo, hi = np.maximum(0.0, est - q * se), np.minimum(1.0, est + q * se)
    if kind == "logit":
        inside = (est > 0) & (est < 1)
        with np.errstate(all="ignore"):
            centre = np.log(est / (1 - est))
            half = q * se / (est * (1 - est))
            lo = np.where(inside, special.expit(centre - half), lo)
            hi = np.where(inside, special.expit(centre + half), hi)
    return lo, hi


def _all_pairs_truth(delta: float, rho: float, seed: int) -> float:
    rng = np.random.default_rng([seed, 1])
    m, n = sample_allocation(200_000, RHO_MN, rng=rng)
    smp = sample_binormal(m, n, delta=delta, rho=rho, rng=rng)
    return float(roc_auc(smp.y_true, smp.y_score))


def _rate(hit: np.ndarray) -> tuple[float, float]:
    c = float(np.mean(hit))
    return c, math.sqrt(c * (1 - c) / hit.size)


def pooled_cell(t12: float, t11: float, clusters: int, reps: int, seed: int) -> dict[str, Any]:
    delta, rho = binormal_parameters(t12, t11)
    rng = np.random.default_rng([seed, clusters, round(1000 * t12), round(1000 * t11)])
    start = time.perf_counter()
    m, n = sample_allocation(clusters, RHO_MN, rng=rng, replicates=reps)
    smp = sample_binormal(m, n, delta=delta, rho=rho, rng=rng)
    terms = cluster_terms(
        smp.y_true, smp.y_score, smp.cluster, clusters * reps, group=smp.replicate
    )
    shape = (reps, clusters)
    mm, nn, w, r, c = (getattr(terms, k).reshape(shape) for k in ("m", "n", "within", "row", "col"))
    joint = joint_estimates(mm, nn, w, r, c)
    pop, pers = joint.population, joint.personalized
    se_pop = np.sqrt(joint.covariance[:, 0, 0])
    se_pers = np.sqrt(joint.covariance[:, 1, 1])
    se_jk = np.sqrt(jackknife_population(mm, nn, w, r, c))
    obu, obu_var = obuchowski(mm, nn, r, c)
    with np.errstate(invalid="ignore"):
        se_obu = np.sqrt(obu_var)
    t_obu = _all_pairs_truth(delta, rho, seed)
    row: dict[str, Any] = {"theta12": t12, "theta11": t11, "clusters": clusters, "reps": reps}
    row["bias"] = float(np.mean(pop) - t12)
    row["bias_mcse"] = float(np.std(pop) / math.sqrt(reps))
    row["var_ratio"] = float(np.mean(se_pop**2) / np.var(pop))
    row["var_ratio_jk"] = float(np.mean(se_jk**2) / np.var(pop))
    cases = {
        "pop_wald": (pop, se_pop, "wald", t12),
        "pop_t": (pop, se_pop, "t", t12),
        "pop_logit": (pop, se_pop, "logit", t12),
        "pop_jk_t": (pop, se_jk, "t", t12),
        "pop_jk_logit": (pop, se_jk, "logit", t12),
        "pers_t": (pers, se_pers, "t", t11),
        "pers_logit": (pers, se_pers, "logit", t11),
        "obu_t": (obu, se_obu, "t", t_obu),
        "obu_logit": (obu, se_obu, "logit", t_obu),
    }
    for name, (est, se, kind, truth) in cases.items():
        lo, hi = intervals(est, se, clusters, kind)
        for k in range(min(CHECKED, reps)):  # the vectorized intervals are the product's
            ref = cluster_ci(float(est[k]), float(se[k]), LEVEL, clusters, kind)
            if not np.allclose([lo[k], hi[k]], ref, rtol=0, atol=1e-12, equal_nan=True):
                raise AssertionError(f"{name}: {(lo[k], hi[k])} != cluster_ci {ref}")
        row[name], row[f"{name}_mcse"] = _rate((lo <= truth) & (truth <= hi))
        row[f"{name}_below"] = float(np.mean(truth < lo))
        row[f"{name}_width"] = float(np.mean(hi - lo))
    row["above_one"] = float(np.mean(pop >= 1))
    row["seconds"] = time.perf_counter() - start
    return row


def _frames(
    t12: float, t11: float, clusters: int, rng: np.random.Generator
) -> tuple[dict[str, pd.DataFrame], np.ndarray, np.ndarray, np.ndarray]:
    delta, rho = binormal_parameters(t12, t11)
    m, n = sample_allocation(clusters, RHO_MN, rng=rng)
    smp = sample_binormal(m, n, delta=delta, rho=rho, rng=rng)
    score = special.ndtr(smp.y_score)
    site_of = rng.permutation(clusters) % SITES
    frames = {}
    for k in range(SITES):
        rows = site_of[smp.cluster] == k
        frames[f"site{k}"] = pd.DataFrame(
            {
                "label": smp.y_true[rows].astype(int),
                "score": score[rows],
                "cluster": smp.cluster[rows],
            }
        )
    return frames, smp.y_true, score, smp.cluster


def federated_cell(t12: float, t11: float, clusters: int, reps: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng([seed, 2, clusters, round(1000 * t12), round(1000 * t11)])
    policy = DisclosurePolicy(epsilon_limit=math.inf, delta_limit=1.0)
    hits = {"fed": [], "fed_t": [], "pooled": []}
    refused = failed = 0
    max_diff = 0.0
    kind = ""
    start = time.perf_counter()
    for rep in range(reps):
        frames, y, s, cl = _frames(t12, t11, clusters, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fed = Federation.from_frames(frames, policy=policy, cluster="cluster")
                res = evaluate(fed, "clustered", seed=rep)
            except DisclosureError:
                refused += 1
                continue
            except Exception:  # counted, never hidden
                failed += 1
                continue
            ref = clustered_auc(y, s, cl)
        kind = str(res.extra["interval"])
        lo, hi = res.auc_ci
        hits["fed"].append(lo <= t12 <= hi)
        t_lo, t_hi = cluster_ci(
            res.auc, res.extra["population_se"], LEVEL, res.extra["n_clusters"], "t"
        )
        hits["fed_t"].append(t_lo <= t12 <= t_hi)
        p_lo, p_hi = ref.population_ci
        hits["pooled"].append(p_lo <= t12 <= p_hi)
        max_diff = max(max_diff, abs(lo - p_lo), abs(hi - p_hi))
    row: dict[str, Any] = {
        "theta12": t12,
        "theta11": t11,
        "clusters": clusters,
        "reps": reps,
        "runs": len(hits["fed"]),
        "refused": refused,
        "failed": failed,
        "interval": kind,
        "max_diff": max_diff,
        "seconds": time.perf_counter() - start,
    }
    for name, h in hits.items():
        if h:
            row[name], row[f"{name}_mcse"] = _rate(np.asarray(h))
        else:
            row[name] = row[f"{name}_mcse"] = math.nan
    return row


def _cov(r: dict[str, Any], key: str) -> str:
    c, se = r[key], r[f"{key}_mcse"]
    if not math.isfinite(c):
        return "-"
    flag = " <<" if c < LEVEL - 3 * se else ""
    return f"{c:.3f} ({se:.3f}){flag}"


def to_markdown(pooled: list[dict], federated: list[dict], header: list[str]) -> str:
    lines = [
        *header,
        "",
        "## Pooled: population AUC (theta12, eq. 5 x I/(I-1), Corollary 6's Sigma11)",
        "",
        "Coverage of the nominal 95% interval (MCSE); '<<' marks more than 3 MCSE below 0.95.",
        "`logit` is fedroc's default since this table (t on I - 1 df on the logit scale);",
        "`t` the default before; `jk` the leave-one-cluster-out jackknife SE (`jk, logit`:",
        '`interval="jackknife"`, pooled only).',
        "'var ratio' is the mean estimated variance over the Monte-Carlo variance of the",
        "estimate; 'below' the share of replicates whose interval lies above the truth;",
        "widths are mean widths.",
        "",
        "| theta12 / theta11 | clusters | bias | var ratio (Cor. 6, jk) | wald | t | logit | "
        "jk, t | jk, logit | below: t, logit | width: t, logit, jk logit |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in pooled:
        lines.append(
            f"| {r['theta12']} / {r['theta11']} | {r['clusters']} | {r['bias']:+.4f} | "
            f"{r['var_ratio']:.2f}, {r['var_ratio_jk']:.2f} | {_cov(r, 'pop_wald')} | "
            f"{_cov(r, 'pop_t')} | {_cov(r, 'pop_logit')} | {_cov(r, 'pop_jk_t')} | "
            f"{_cov(r, 'pop_jk_logit')} | {r['pop_t_below']:.3f}, {r['pop_logit_below']:.3f} | "
            f"{r['pop_t_width']:.4f}, {r['pop_logit_width']:.4f}, {r['pop_jk_logit_width']:.4f} |"
        )
    lines += [
        "",
        "## Pooled: personalized AUC (theta11, Sigma22) and Obuchowski's AUC (his variance)",
        "",
        "The truth of Obuchowski's AUC is the all-pairs AUC of the model (one sample of 200,000",
        "clusters). The jackknife variance of the personalized AUC, a mean over clusters, is",
        "Sigma22 / I itself.",
        "",
        "| theta12 / theta11 | clusters | personalized t | personalized logit | "
        "Obuchowski t | Obuchowski logit | width pers.: t, logit |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in pooled:
        lines.append(
            f"| {r['theta12']} / {r['theta11']} | {r['clusters']} | {_cov(r, 'pers_t')} | "
            f"{_cov(r, 'pers_logit')} | {_cov(r, 'obu_t')} | {_cov(r, 'obu_logit')} | "
            f"{r['pers_t_width']:.4f}, {r['pers_logit_width']:.4f} |"
        )
    lines += [
        "",
        '## Federated: `evaluate(fed, "clustered")`, defaults, three sites',
        "",
        "Population AUC. 'federated' is the default interval of the federated result (its",
        "kind in 'interval'), 'federated, t' the t interval from its SE, 'pooled' the pooled",
        "default on the same replicates; 'max diff' the largest difference between the",
        "federated and pooled default bounds (binning to the sites' grid).",
        "",
        "| theta12 / theta11 | clusters | runs | refused | failed | interval | federated | "
        "federated, t | pooled | max diff | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in federated:
        lines.append(
            f"| {r['theta12']} / {r['theta11']} | {r['clusters']} | {r['runs']} | "
            f"{r['refused']} | {r['failed']} | {r['interval']} | {_cov(r, 'fed')} | "
            f"{_cov(r, 'fed_t')} | {_cov(r, 'pooled')} | {r['max_diff']:.1e} | "
            f"{r['seconds']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10000, help="pooled replicates a cell")
    parser.add_argument("--fed-reps", type=int, default=500, help="federated replicates a cell")
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--out", type=Path, default=Path("scripts/results"))
    args = parser.parse_args(argv)
    command = command_line("clustered_small_sample.py", argv)
    commit = git_commit()
    start = time.perf_counter()
    pooled = []
    for t12, t11 in AUCS:
        for clusters in CLUSTERS:
            pooled.append(pooled_cell(t12, t11, clusters, args.reps, args.seed))
            r = pooled[-1]
            print(
                f"pooled {t12}/{t11} I={clusters}: t {r['pop_t']:.3f} logit {r['pop_logit']:.3f}"
                f" jk-logit {r['pop_jk_logit']:.3f} ({r['seconds']:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    federated = []
    for t12, t11 in FED_AUCS if args.fed_reps else ():
        for clusters in FED_CLUSTERS:
            federated.append(federated_cell(t12, t11, clusters, args.fed_reps, args.seed))
            r = federated[-1]
            print(
                f"federated {t12}/{t11} I={clusters}: {r['fed']:.3f} pooled {r['pooled']:.3f} "
                f"diff {r['max_diff']:.1e} ({r['seconds']:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    seconds = time.perf_counter() - start
    header = [
        "# Clustered intervals with few clusters: logit, t, Wald, jackknife",
        "",
        f"Command: `{command}` (seed {args.seed}; commit {commit}; {seconds:.0f} s, nice 10 on",
        "the shared 2-core machine). Paper 3's allocation (rho_MN 0.4, 4-7 rows a cluster,",
        "mean 5.5), binormal model (11); pooled cells vectorized over replicates.",
    ]
    text = to_markdown(pooled, federated, header)
    write_result(args.out / "clustered_small_sample.md", text)
    pd.DataFrame(pooled).to_csv(args.out / "clustered_small_sample_pooled.csv", index=False)
    if federated:
        pd.DataFrame(federated).to_csv(
            args.out / "clustered_small_sample_federated.csv", index=False
        )
    print(text)


if __name__ == "__main__":
    main()
