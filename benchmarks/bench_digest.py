"""Benchmark: the rows' digest (SiteData.projection_digests) that binds a site's ledger.

Target: about 0.1 s per 10^7 rows of labels and scores. Also timed: with an int64
cluster column, and with cluster ids as text (numbers, "0000123", which are made int64
first; and names, "P123", hashed as text), on 10^6 rows (text is slow to hash).

Usage: python benchmarks/bench_digest.py [--rows 10000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fedroc.data import SiteData

TARGET_SECONDS = 0.1


def best_of(repeats: int, make: object) -> float:
    best = float("inf")
    for _ in range(repeats):
        data = make()  # type: ignore[operator]
        start = time.perf_counter()
        data.projection_digests  # noqa: B018 - a cached property: computed here
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n = args.rows
    rng = np.random.default_rng(0)
    label = rng.random(n) < 0.3
    score = rng.random(n)
    ids = rng.integers(0, max(n // 3, 1), n)
    m = max(n // 10, 1)
    cases = {
        "labels, scores": (n, lambda: SiteData(label.copy(), score.copy())),
        "+ cluster int64": (n, lambda: SiteData(label.copy(), score.copy(), ids)),
        "+ cluster text numbers": (
            m,
            lambda: SiteData(label[:m].copy(), score[:m].copy(), text_numbers),
        ),
        "+ cluster text names": (
            m,
            lambda: SiteData(label[:m].copy(), score[:m].copy(), text_names),
        ),
    }
    text_numbers = np.array([f"{v:07d}" for v in ids[:m]], dtype=object)
    text_names = np.array([f"P{v}" for v in ids[:m]], dtype=object)
    print(f"{'case':<26}{'rows':>12}{'seconds':>10}{'s per 10^7':>12}")
    for name, (rows, make) in cases.items():
        seconds = best_of(args.repeats, make)
        print(f"{name:<26}{rows:>12,d}{seconds:>10.3f}{seconds * 1e7 / rows:>12.3f}")
    print(f"target: labels and scores about {TARGET_SECONDS} s per 10^7 rows")


if __name__ == "__main__":
    main()
