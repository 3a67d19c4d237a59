"""Benchmark of the histogram method and of secure aggregation (issue 4).

1. 10 sites x 10^7 scores, secure aggregation, Q = 1024: site work per site (its leaf
   counts plus its part of the four secure-aggregation stages, serialisation included),
   analyst work (the rest), bytes each site sends; peer: numpy.histogram of the same
   10^7 scores into the 4096 leaves (the least a site could do).
2. One secure-aggregation round of 10 sites x 2^14 counts in-process; peer: the same
   vectors summed in the clear through the same federation.

Targets: site work under 1 s per 10^7 scores; the secure-aggregation round under 2 s.

    .venv/bin/python benchmarks/bench_histogram.py [--sites 10] [--rows 10000000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedroc.data import SiteData
from fedroc.federation import Federation, Reply, Site, SiteContext, site_function
from fedroc.federation.records import Record
from fedroc.federation.roster import provide_identities
from fedroc.federation.transport import Exchange, InProcessTransport
from fedroc.methods import evaluate
from fedroc.methods.histogram import site_leaves, tree_height
from fedroc.privacy import DisclosurePolicy
from fedroc.secagg import secure_sum

VECTOR_SIZE = 2**14


class TimedTransport(InProcessTransport):
    """In-process transport that adds up each site's seconds (handling plus encoding)."""

    def __init__(self, sites: list[Site]) -> None:
        super().__init__(sites)
        self.site_seconds: dict[str, float] = {s.name: 0.0 for s in sites}

    def call(
        self,
        function: str,
        args_by_site: Mapping[str, Record],
        *,
        requester: str = "analyst",
        timeout: float | None = None,
    ) -> dict[str, Exchange]:
        out = super().call(function, args_by_site, requester=requester, timeout=timeout)
        for name, exchange in out.items():
            self.site_seconds[name] += exchange.seconds
        return out


@site_function("bench.histogram.vector", schema={}, release="both")
def _vector(ctx: SiteContext, args: dict[str, Any]) -> Reply:
    rng = np.random.default_rng(len(ctx.site))
    return Reply({"x": rng.integers(0, 1000, VECTOR_SIZE)}, counts={"rows": ctx.data.n})


def make_sites(n_sites: int, rows: int) -> list[Site]:
    sites = []
    for k in range(n_sites):
        rng = np.random.default_rng(k)
        y = rng.random(rows) < 0.3
        score = rng.beta(2.0 + 2.0 * y, 5.0)
        sites.append(Site(f"site{k}", SiteData.from_arrays(y, score)))
    return sites


def bench_method(n_sites: int, rows: int) -> None:
    sites = make_sites(n_sites, rows)
    # Secure aggregation runs only among sites with a signing key and a roster; with its own
    # transport the benchmark gives them one, as Federation.from_sites does.
    provide_identities(sites)
    transport = TimedTransport(sites)
    federation = Federation(transport)
    start = time.perf_counter()
    result = evaluate(federation, "histogram", quantiles=1024, calibration_bins=None)
    total = time.perf_counter() - start
    site_seconds = transport.site_seconds
    analyst = total - sum(site_seconds.values())
    n_leaves = 2 ** tree_height(1024, 2)
    data = sites[0]._data
    start = time.perf_counter()
    site_leaves(data, n_leaves=n_leaves, lo=0.0, hi=1.0, transform=None, site="site0")
    counting = time.perf_counter() - start
    start = time.perf_counter()
    for cls in (data.label, ~data.label):
        np.histogram(data.score[cls], bins=n_leaves, range=(0.0, 1.0))
    peer = time.perf_counter() - start
    per_site = max(site_seconds.values())
    sent = result.released.bytes_received
    print(f"\n1. histogram method, secure aggregation, Q = 1024: {n_sites} sites x {rows:.0e} rows")
    print(f"{'quantity':<48}{'value':>14}")
    print(f"{'site work, slowest site (s)':<48}{per_site:>14.3f}")
    print(f"{'site work per 10^7 scores (s), target < 1':<48}{per_site * 1e7 / rows:>14.3f}")
    print(f"{'  of which leaf counting (s)':<48}{counting:>14.3f}")
    print(f"{'peer: numpy.histogram of both classes (s)':<48}{peer:>14.3f}")
    print(f"{'ratio leaf counting / numpy.histogram':<48}{counting / peer:>14.2f}")
    print(f"{'analyst work (s)':<48}{analyst:>14.3f}")
    print(f"{'end to end, in-process (s)':<48}{total:>14.3f}")
    print(f"{'bytes sent per site (max)':<48}{max(sent.values()):>14,d}")
    print(f"{'AUC':<48}{result.auc:>14.6f}")


def bench_secagg(n_sites: int) -> None:
    sites = [
        Site(f"site{k}", SiteData.from_arrays([1] * 5 + [0] * 5, [0.5] * 10))
        for k in range(n_sites)
    ]
    federation = Federation.from_sites(sites)
    timings, clear = [], []
    for _ in range(3):
        start = time.perf_counter()
        result = secure_sum(federation, "bench.histogram.vector")
        timings.append(time.perf_counter() - start)
        start = time.perf_counter()
        replies = federation.call("bench.histogram.vector")
        plain = sum(r["x"] for r in replies.values())
        clear.append(time.perf_counter() - start)
    assert np.array_equal(result["x"], plain)
    best, best_clear = min(timings), min(clear)
    print(f"\n2. one secure-aggregation round, {n_sites} sites x 2^14 counts (best of 3)")
    print(f"{'quantity':<48}{'value':>14}")
    print(f"{'secure aggregation, in-process (s), target < 2':<48}{best:>14.3f}")
    print(f"{'peer: the same sum in the clear (s)':<48}{best_clear:>14.3f}")
    print(f"{'ratio secure / clear':<48}{best / best_clear:>14.1f}")
    print(f"{'bytes sent per site':<48}{max(result.released.bytes_received.values()):>14,d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=10)
    parser.add_argument("--rows", type=int, default=10_000_000, help="scores per site")
    args = parser.parse_args()
    least = DisclosurePolicy().secagg_min_sites  # the sites refuse a smaller secure sum
    if args.sites < least:
        parser.error(f"--sites {args.sites}: secure aggregation needs at least {least} sites")
    bench_secagg(args.sites)
    bench_method(args.sites, args.rows)


if __name__ == "__main__":
    main()
