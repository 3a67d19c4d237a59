"""Distributed ROC-GLM end to end: 5 sites x 10^6 scores each, in-process.

Target (issue 3): under 10 s on this machine, with the time split into site work and
analyst work. The peer in the same run is the pooled ROC-GLM plus DeLong CI on the
5 x 10^6 pooled scores (what one party holding all rows would compute, no privacy).

Site work = time inside the transport (each site's handling of a call plus the encoding
and decoding of its messages, Exchange.seconds); analyst work = the rest of the
wall-clock time (pooling and sorting the noisy scores, Fisher-scoring updates, and for the
corrected estimate the bootstrap of the deconvolution). Variants: the paper's estimate
(``correction="none"``) and the default (the sites deconvolve the noisy negatives; the
analyst resamples them 50 times). The sites' noise is site-seeded (numpy) unless
``--opendp``: OpenDP's exact sampler costs about 25 us per noisy value.
Run: .venv/bin/python benchmarks/bench_rocglm.py [--n-per-site N] [--sites K] [--opendp]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

from fedroc.data import SiteData
from fedroc.federation import Federation, InProcessTransport, Site
from fedroc.federation.roster import provide_identities
from fedroc.methods.rocglm import distributed_rocglm, rocglm
from fedroc.metrics import delong
from fedroc.privacy import DisclosurePolicy


class TimedTransport(InProcessTransport):
    """In-process transport that keeps each exchange's seconds by function."""

    def __init__(self, sites):
        super().__init__(sites)
        self.seconds: dict[str, float] = defaultdict(float)
        self.wall: dict[str, float] = defaultdict(float)

    def call(self, function, args_by_site, *, requester="analyst", timeout=None):
        start = time.perf_counter()
        out = super().call(function, args_by_site, requester=requester, timeout=timeout)
        self.wall[function] += time.perf_counter() - start
        for ex in out.values():
            self.seconds[function] += ex.seconds
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-per-site", type=int, default=10**6)
    parser.add_argument("--sites", type=int, default=5)
    parser.add_argument(
        "--opendp", action="store_true", help="OpenDP's sampler at the sites (slow at 10^6)"
    )
    args = parser.parse_args()
    least = DisclosurePolicy().secagg_min_sites  # the sites refuse a smaller secure sum
    if args.sites < least:
        parser.error(f"--sites {args.sites}: secure aggregation needs at least {least} sites")
    rng = np.random.default_rng(0)
    sites, ys, ss = [], [], []
    for k in range(args.sites):
        y = rng.random(args.n_per_site) < 0.4
        s = 1.0 / (1.0 + np.exp(-(rng.normal(size=args.n_per_site) + 1.2 * y - 0.5)))
        seed = None if args.opendp else 1000 + k
        sites.append(Site(f"site{k}", SiteData.from_arrays(y, s), noise_seed=seed))
        ys.append(y)
        ss.append(s)
    # Secure aggregation runs only among sites with a signing key and a roster; with its own
    # transport the benchmark gives them one, as Federation.from_sites does.
    provide_identities(sites)
    y_all, s_all = np.concatenate(ys), np.concatenate(ss)
    n = y_all.size
    print(f"{args.sites} sites x {args.n_per_site:,} scores = {n:,} rows")

    start = time.perf_counter()
    pooled_fit = rocglm(y_all, s_all)
    pooled_ci = delong(y_all, s_all).confidence_interval()
    t_pooled = time.perf_counter() - start

    rows = []
    for correction in ("none", "deconvolution"):
        transport = TimedTransport(sites)
        fed = Federation(transport)
        start = time.perf_counter()
        res = distributed_rocglm(fed, sensitivity=0.01, seed=1, correction=correction)
        total = time.perf_counter() - start
        site = sum(transport.seconds.values())
        inside = sum(transport.wall.values())
        rows.append((correction, res, total, site, total - inside, transport))

    print(f"\npooled ROC-GLM + DeLong CI (peer): {t_pooled:.2f} s, AUC {pooled_fit.auc:.4f}")
    print(
        f"\n{'variant':<18} {'total [s]':>10} {'site work [s]':>14} {'analyst [s]':>12} "
        f"{'rounds':>7} {'MB to sites':>12} {'MB from sites':>14} {'ratio':>7} {'AUC':>8}"
    )
    labels = {"none": "paper (none)", "deconvolution": "corrected"}
    for correction, res, total, site, analyst, _ in rows:
        rel = res.released
        print(
            f"{labels[correction]:<18} {total:>10.2f} {site:>14.2f} "
            f"{analyst:>12.2f} {rel.rounds:>7} {sum(rel.bytes_sent.values()) / 1e6:>12.1f} "
            f"{sum(rel.bytes_received.values()) / 1e6:>14.1f} {total / t_pooled:>7.2f} "
            f"{res.auc:>8.4f}"
        )
    print("ratio = distributed total / pooled peer; target: total < 10 s")
    for correction, res, *_, transport in rows:
        label = labels[correction]
        print(f"\nsite work by function ({label}), seconds over all sites:")
        for function, sec in transport.seconds.items():
            print(f"  {function:<22} {sec:>7.2f}")
        print(
            f"  AUC {res.auc:.4f} (pooled ROC-GLM {pooled_fit.auc:.4f}); "
            f"CI {res.ci[0]:.4f}-{res.ci[1]:.4f} vs pooled {pooled_ci[0]:.4f}-{pooled_ci[1]:.4f}"
        )


if __name__ == "__main__":
    main()
