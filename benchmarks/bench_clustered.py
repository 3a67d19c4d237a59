"""Benchmark: clustered AUCs (paper 3) on 10^6 observations in 10^4 clusters.

Target: point estimates (population, personalized, Obuchowski) and Sigma^ in under 5 s.
Peers in the same run: fedroc's pooled DeLong AUC and variance on the same rows (the cost of
an unclustered analysis) and the O(N^2) kernel-matrix reference of the tests (timed on a
subsample, extrapolated as N^2). Also the federated computation over four in-process
sites, with secure aggregation (default) and with plain sums.

Usage: python benchmarks/bench_clustered.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from _timing import best_of

from fedroc.clustered import clustered_auc
from fedroc.federation import Federation
from fedroc.methods.clustered import federated_clustered_auc
from fedroc.metrics import delong
from fedroc.privacy import DisclosurePolicy

TARGET_SECONDS = 5.0


def data(n_rows: int, n_clusters: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    cluster = rng.integers(0, n_clusters, n_rows)
    effect = rng.normal(0, 1, n_clusters)
    label = rng.random(n_rows) < 0.4
    score = 1 / (1 + np.exp(-(effect[cluster] + 1.2 * label + rng.normal(0, 1, n_rows))))
    return label, np.round(score, 4), cluster  # rounding adds ties


def brute_force_seconds(label, score, cluster, n_sub: int) -> float:
    """Time the kernel-matrix reference (all control-case pairs) on n_sub rows."""
    y, s, c = label[:n_sub], score[:n_sub], cluster[:n_sub]
    start = time.perf_counter()
    neg = np.flatnonzero(~y)[np.argsort(c[~y], kind="stable")]
    pos = np.flatnonzero(y)[np.argsort(c[y], kind="stable")]
    x, v = s[neg], s[pos]
    k = (x[:, None] < v[None, :]) + 0.5 * (x[:, None] == v[None, :])
    # Block sums: psi[i, j] for every pair of clusters present in both classes.
    starts_neg = np.flatnonzero(np.r_[True, np.diff(c[neg]) != 0])
    starts_pos = np.flatnonzero(np.r_[True, np.diff(c[pos]) != 0])
    _ = np.add.reduceat(np.add.reduceat(k, starts_neg, axis=0), starts_pos, axis=1)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for n_rows, n_clusters in [(10**4, 10**2), (10**5, 10**3), (10**6, 10**4)]:
        label, score, cluster = data(n_rows, n_clusters)
        t_clu = best_of(lambda: clustered_auc(label, score, cluster), args.repeats)  # noqa: B023
        t_del = best_of(lambda: delong(label, score), args.repeats)  # noqa: B023
        sub = min(n_rows, 5000)
        t_sub = brute_force_seconds(label, score, cluster, sub)
        t_brute = t_sub * (n_rows / sub) ** 2
        rows.append((n_rows, n_clusters, t_clu, t_del, t_brute, sub == n_rows))

    label, score, cluster = data(10**6, 10**4, seed=1)
    sites = np.arange(10**4) % 4  # whole clusters per site
    frames = {
        f"site{k}": pd.DataFrame(
            {
                "y": label[sites[cluster] == k].astype(int),
                "p": score[sites[cluster] == k],
                "pid": cluster[sites[cluster] == k],
            }
        )
        for k in range(4)
    }
    # The sites let their histograms out in the clear too (the plain row of the table). The
    # tails of 1000 bins hold fewer than the default 5 positives even at 250,000 rows per
    # site, so these benchmark sites allow any cell count: the row times the plain path, and
    # a real site would refuse it (as the default policy does).
    policy = DisclosurePolicy(clear_histograms=True, min_count=1)
    # A site answers exact histograms one way for its lifetime (secure or clear): each way
    # gets sites of its own.
    with Federation.from_frames(frames, label="y", score="p", cluster="pid", policy=policy) as fed:
        t_fed = best_of(lambda: federated_clustered_auc(fed, n_bins=1000), 1)
        res = federated_clustered_auc(fed, n_bins=1000)
    with Federation.from_frames(frames, label="y", score="p", cluster="pid", policy=policy) as fed:
        t_plain = best_of(lambda: federated_clustered_auc(fed, n_bins=1000, secure=False), 1)
    pooled = clustered_auc(label, score, cluster)

    print(f"Clustered AUCs: point estimates + Sigma^ (best of {args.repeats} runs)")
    print(
        f"{'rows':>9} {'clusters':>9} {'clustered_auc s':>16} {'delong s':>9} "
        f"{'ratio':>6} {'brute force s':>14}"
    )
    for n_rows, n_clusters, t_clu, t_del, t_brute, exact in rows:
        brute = f"{t_brute:.3f}" if exact else f"~{t_brute:.3g} (extrap.)"
        print(
            f"{n_rows:>9} {n_clusters:>9} {t_clu:>16.3f} {t_del:>9.3f} "
            f"{t_clu / t_del:>6.1f} {brute:>14}"
        )
    t_main = rows[-1][2]
    status = "met" if t_main < TARGET_SECONDS else "MISSED"
    print(f"\n10^6 rows / 10^4 clusters: {t_main:.2f} s, target < {TARGET_SECONDS:.0f} s: {status}")
    print(f"speed-up over the O(N^2) reference at 10^6 rows: ~{rows[-1][4] / t_main:,.0f}x")
    print(
        f"federated, 4 in-process sites, 1000 bins: secure aggregation {t_fed:.2f} s "
        f"({res.released.rounds} rounds), plain sums {t_plain:.2f} s (2 rounds); "
        f"|population AUC - pooled| = {abs(res.population_auc - pooled.population_auc):.2e} "
        f"(bound {res.population_binning_bound:.2e}); bytes from sites "
        f"{sum(res.released.bytes_received.values())}"
    )


if __name__ == "__main__":
    main()
