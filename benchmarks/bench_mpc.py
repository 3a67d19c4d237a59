"""MPC AUROC/AUPR (issue 5, ppAURORA) with three local processes over TLS, MPyC as the peer.

Every row runs on one cluster of three party processes (``LocalCluster``: TLS on
127.0.0.1), started once; ``wall`` is the analyst's time from submitting the job (with the
owners' sealed shares) to holding the opened result. ``share`` is the owners' time to sort,
split and seal their lists (at the sites, in parallel in reality; summed here). Rounds and
megabytes sent are per party (proxy 0 / proxy 1 / helper). ``|dAUC|`` and ``|dPR|`` are the
differences from ``fedroc.metrics.roc_auc`` / ``pr_auc`` on the pooled data.

Peer: the same exact AUROC (ties counted one half) in MPyC (``benchmarks/mpyc_auc.py``:
``np_sort`` of the pooled list, three local parties, MPyC's plain-TCP transport). MPyC's
sort costs n log^2 n comparisons in pure Python, so it runs only on the cases with ties and
at most ``--mpyc-max`` samples (default 3072, i.e. 3 x 1024; 1000 samples take about a
minute); its cost does not depend on ties.

Paper (reference C++ code, delta = 1, LAN): 3 owners x 1024: 233 s without ties, 356 s with
ties; 8 x 1000 with delta = 101: 600 s. Targets (issue 5): 3 x 1024 with ties under 5 s and
10^5 samples under 120 s, exact and fully oblivious.

Run: .venv/bin/python benchmarks/bench_mpc.py [--quick] [--mpyc-max N] [--no-fidelity]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from fedroc.metrics import pr_auc, roc_auc
from fedroc.mpc import AucSpec, LocalCluster, make_bundle
from fedroc.mpc.cluster import free_ports
from fedroc.mpc.ring import float_key

HERE = Path(__file__).resolve().parent


def make_owners(rng, sizes, ties):
    owners = []
    for n in sizes:
        y = rng.integers(0, 2, n)
        if ties:  # three decimals: many tied scores, across classes too
            s = np.round(np.clip(rng.beta(2, 5, n) + 0.25 * y, 0, 1), 3)
        else:
            s = rng.normal(size=n) + 0.8 * y
        owners.append((y, s))
    return owners


def pooled(owners):
    y = np.concatenate([o[0] for o in owners])
    s = np.concatenate([o[1] for o in owners])
    return y, s


def run_case(cluster, owners, sort="oblivious", delta=1):
    keys = cluster.proxy_keys()
    start = time.perf_counter()
    bundles = [make_bundle(f"owner{i}", y, s, keys, "bench") for i, (y, s) in enumerate(owners)]
    share_seconds = time.perf_counter() - start
    spec = AucSpec(tuple(b.n for b in bundles), sort=sort, delta=delta)
    result = cluster.run(spec, bundles)
    y, s = pooled(owners)
    return {
        "wall": result.seconds,
        "share": share_seconds,
        "rounds": [st.rounds for st in result.stats],
        "mb": [st.bytes_sent / 1e6 for st in result.stats],
        "dauc": abs(result.values["auc"] - roc_auc(y, s)),
        "dpr": abs(result.values["pr_auc"] - pr_auc(y, s)),
    }


def run_mpyc(owners, workdir: Path):
    y, s = pooled(owners)
    path = workdir / "mpyc_input.npz"
    key = (float_key(s) - np.uint64(1 << 63)).view(np.int64)
    np.savez(path, key=key, y=y)
    port = free_ports(1)[0]
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(HERE / "mpyc_auc.py"), "-M3", "-B", str(port), str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - start
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"wall": wall, "dauc": abs(out["auc"] - roc_auc(y, s))}


def fmt_triple(values, spec):
    return "/".join(format(v, spec) for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="skip 10^5 and the paper's merge")
    parser.add_argument("--mpyc-max", type=int, default=3072, help="largest n given to MPyC")
    parser.add_argument("--no-fidelity", action="store_true", help="skip the paper's merge")
    args = parser.parse_args()
    rng = np.random.default_rng(2024)
    cases = [
        ("3 x 1024, no ties", [1024] * 3, False, "oblivious", 1),
        ("3 x 1024, ties", [1024] * 3, True, "oblivious", 1),
        ("8 x 1000, ties", [1000] * 8, True, "oblivious", 1),
        ("10^4 (4 x 2500), ties", [2500] * 4, True, "oblivious", 1),
    ]
    if not args.quick:
        cases.append(("10^5 (4 x 25000), ties", [25000] * 4, True, "oblivious", 1))
    if not (args.quick or args.no_fidelity):
        cases += [
            ("3 x 1024, ties, paper merge d=1", [1024] * 3, True, "delta", 1),
            ("8 x 1000, ties, paper merge d=101", [1000] * 8, True, "delta", 101),
        ]
    data = {name: make_owners(rng, sizes, ties) for name, sizes, ties, _, _ in cases}

    start = time.perf_counter()
    with LocalCluster(timeout=600.0) as cluster, tempfile.TemporaryDirectory() as tmp:
        warm = run_case(cluster, make_owners(rng, [10, 10], True))
        startup = time.perf_counter() - start
        print(
            f"cluster: three local processes over TLS, up and first tiny job in {startup:.2f} s "
            f"(job alone {warm['wall']:.2f} s)"
        )
        header = (
            f"{'case':<36} {'n':>7} {'wall [s]':>9} {'share [s]':>9} {'rounds P0/P1/H':>16} "
            f"{'MB sent P0/P1/H':>20} {'|dAUC|':>8} {'|dPR|':>8} {'MPyC [s]':>9} {'MPyC/ours':>9}"
        )
        print(header)
        print("-" * len(header))
        for name, sizes, ties, sort, delta in cases:
            owners = data[name]
            row = run_case(cluster, owners, sort, delta)
            n = sum(sizes)
            peer = ""
            if sort == "oblivious" and ties and n <= args.mpyc_max:
                mp = run_mpyc(owners, Path(tmp))
                peer = f"{mp['wall']:>9.1f} {mp['wall'] / row['wall']:>9.0f}"
                row["peer_dauc"] = mp["dauc"]
            elif sort == "oblivious" and ties:
                peer = f"{'(capped)':>9} {'':>9}"
            print(
                f"{name:<36} {n:>7} {row['wall']:>9.2f} {row['share']:>9.2f} "
                f"{fmt_triple(row['rounds'], 'd'):>16} {fmt_triple(row['mb'], '.1f'):>20} "
                f"{row['dauc']:>8.1e} {row['dpr']:>8.1e} {peer}",
                flush=True,
            )
            if "peer_dauc" in row:
                print(f"{'':<36} MPyC |dAUC| = {row['peer_dauc']:.1e}")
    print(
        "MPyC/ours = MPyC wall time / ours on the same data (MPyC: pure-Python Batcher sort of the "
        f"pooled list, capped at n <= {args.mpyc_max}; no TLS)."
    )
    print(
        "Targets: 3 x 1024 with ties < 5 s; 10^5 < 120 s. "
        "Paper: 233 s / 356 s (3 x 1024), 600 s (8 x 1000, d=101)."
    )


if __name__ == "__main__":
    main()
