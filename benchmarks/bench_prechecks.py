"""The DP methods' pre-release checks: their cost in-process, end to end and alone.

Since 446ba58 a DP run asks every site ``fedroc.epsilon_left`` (what its limits leave, and
its floors) before anything is released: the ROC-GLM's noisy scores and the histogram's
local DP take one round more. Timed here, best of ``--repeats`` runs on fresh sites (the
default policy; each run on new sites, so no ledger fills), in-process:

1. ``distributed_rocglm`` (paper estimate, ``correction="none"``), K sites x N rows;
2. the histogram method under local DP (``dp_mode="local"``), K sites x N rows;
3. the extra round alone: ``fedroc.epsilon_left`` on the K sites ("n/a" on code without it);
4. secure Brier score plus secure calibration curve (10 bins), whose inputs now declare the
   site's class counts (held to the minimum count);
5. one secure sum of 2^14 counts over 10 sites, best of 40 on one federation (the check
   before a sum now also looks for another set's session in flight);
6. the label and cluster checks on 10^6 strings (missing values are now looked for as NaN
   and pandas' NA too, not only None).

Over a network the round costs one call's round trip (``bench_flower.py``, section 1).
Run: .venv/bin/python benchmarks/bench_prechecks.py [--sites 5] [--rows 200000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _timing import best_of

from fedroc._validation import check_labels
from fedroc.data import SiteData
from fedroc.federation import Federation, Site
from fedroc.methods import evaluate
from fedroc.methods.clustered._pooled import encode_clusters
from fedroc.methods.rocglm import distributed_rocglm
from fedroc.secagg import secure_brier, secure_calibration, secure_sum


def make_federation(n_sites: int, rows: int) -> Federation:
    sites = []
    for k in range(n_sites):
        rng = np.random.default_rng(k)
        y = rng.random(rows) < 0.4
        s = 1.0 / (1.0 + np.exp(-(rng.normal(size=rows) + 1.2 * y - 0.5)))
        sites.append(Site(f"site{k}", SiteData.from_arrays(y, s), noise_seed=1000 + k))
    return Federation.from_sites(sites)


def best(run, n_sites: int, rows: int, repeats: int) -> tuple[float, object]:
    """Least wall time of ``run(federation)`` over ``repeats`` fresh federations."""
    times, out = [], None
    for _ in range(repeats):
        fed = make_federation(n_sites, rows)
        start = time.perf_counter()
        out = run(fed)
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sites", type=int, default=5)
    parser.add_argument("--rows", type=int, default=200_000, help="rows per site")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    k, n, r = args.sites, args.rows, args.repeats
    print(f"{k} sites x {n:,} rows, in-process, best of {r} runs on fresh sites")

    t_glm, glm = best(
        lambda fed: distributed_rocglm(fed, sensitivity=0.01, seed=1, correction="none"), k, n, r
    )
    t_ldp, ldp = best(
        lambda fed: evaluate(
            fed, "histogram", dp_epsilon=1.0, dp_mode="local", seed=1, calibration_bins=None
        ),
        k,
        n,
        r,
    )
    t_cal, _ = best(lambda fed: (secure_brier(fed), secure_calibration(fed)), k, n, r)
    try:
        from fedroc.federation.basic import FN_EPSILON_LEFT
    except ImportError:  # the code before the pre-checks
        t_round = None
    else:
        fed = make_federation(k, n)
        times = []
        for _ in range(max(r, 20)):
            start = time.perf_counter()
            fed.call(FN_EPSILON_LEFT)
            times.append(time.perf_counter() - start)
        t_round = min(times)

    import bench_histogram  # noqa: F401  registers bench.histogram.vector, 2^14 counts per site

    tiny = [Site(f"s{j}", SiteData.from_arrays([1] * 5 + [0] * 5, [0.5] * 10)) for j in range(10)]
    fed = Federation.from_sites(tiny)
    t_sum = best_of(lambda: secure_sum(fed, "bench.histogram.vector"), 40)
    rng = np.random.default_rng(0)
    labels = np.where(rng.random(10**6) < 0.4, "case", "control").astype(object)
    ids = np.array([f"p{i}" for i in rng.integers(0, 10**4, 10**6)], dtype=object)
    t_lab = best_of(lambda: check_labels(labels, pos_label="case"), 5)
    t_ids = best_of(lambda: encode_clusters(ids, ids.size), 5)

    print(f"{'quantity':<44}{'value':>12}")
    print(f"{'ROC-GLM (paper estimate), total (s)':<44}{t_glm:>12.3f}")
    print(f"{'ROC-GLM rounds':<44}{glm.released.rounds:>12d}")  # type: ignore[attr-defined]
    print(f"{'histogram local DP, total (s)':<44}{t_ldp:>12.3f}")
    print(f"{'histogram local DP rounds':<44}{ldp.released.rounds:>12d}")  # type: ignore[attr-defined]
    print(f"{'secure Brier + calibration, total (s)':<44}{t_cal:>12.3f}")
    print(f"{'secure sum, 10 sites x 2^14, best of 40 (s)':<44}{t_sum:>12.4f}")
    print(f"{'check_labels, 10^6 strings (s)':<44}{t_lab:>12.3f}")
    print(f"{'encode_clusters, 10^6 string ids (s)':<44}{t_ids:>12.3f}")
    shown = "n/a" if t_round is None else f"{t_round * 1e3:.3f}"
    print(f"{'fedroc.epsilon_left round alone (ms)':<44}{shown:>12}")


if __name__ == "__main__":
    main()
