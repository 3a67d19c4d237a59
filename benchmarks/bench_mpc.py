"""MPC AUROC, AUPR and DeLong CI (issues 5 and 16, ppAURORA) over TLS, MPyC as the peer.

Start-up: a fresh cluster of three party processes (``LocalCluster``: TLS on 127.0.0.1) is
started and timed until all three are connected (``start-up``), and a first job of 3 x 1024
samples with ties runs on it: ``cold 3 x 1024`` is the analyst's time from starting the
processes to holding the opened result (owners' sharing included). The import time of a
party process is measured separately (``python -X importtime -c "import fedroc.mpc.party"``).

Then every row runs on one warm cluster; ``wall`` is the analyst's time from submitting the
job (with the owners' sealed, signed shares) to holding the opened result. ``share`` is the
owners' time to sort, split, seal and sign their lists (at the sites, in parallel in
reality; summed here). Rounds and megabytes sent are per party (proxy 0 / proxy 1 /
helper). Jobs open full precision (52 bits) so that ``|dAUC|``, ``|dPR|`` (against
``fedroc.metrics.roc_auc`` / ``pr_auc``) and ``|dSE|`` (against ``fedroc.metrics.delong``)
show the exactness (for two models, ``|dSE|`` is that of the AUC difference against
``fedroc.metrics.delong_paired``); the default precision (14 bits) costs the same.

Peer: the same exact AUROC (ties counted one half) in MPyC (``benchmarks/mpyc_auc.py``:
``np_sort`` of the pooled list, three local parties, MPyC's plain-TCP transport, no CI). MPyC's
sort costs n log^2 n comparisons in pure Python, so it runs only on the cases with ties and
at most ``--mpyc-max`` samples (default 3072, i.e. 3 x 1024; it takes minutes).

Paper (reference C++ code, delta = 1, LAN): 3 owners x 1024: 233 s without ties, 356 s with
ties; 8 x 1000 with delta = 101: 600 s. Targets (issue 16): party start-up under 1 s, 3 x
1024 end to end (cold) under 2 s, 10^5 samples under 60 s, 10^6 feasible.

Run (alone on the machine): .venv/bin/python benchmarks/bench_mpc.py [--quick] [--million]
[--issue-size] [--mpyc-max N] [--no-fidelity] [--cold K] [--only-start]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from fedroc.metrics import delong, delong_paired, pr_auc, roc_auc
from fedroc.mpc import JobTerms, LocalCluster, make_bundle, new_owner_key
from fedroc.mpc.cluster import free_ports
from fedroc.mpc.owner import owner_public_bytes
from fedroc.mpc.ring import float_key

HERE = Path(__file__).resolve().parent
OWNERS = [f"owner{i}" for i in range(8)]


def make_owners(rng, sizes, ties, compare=False):
    owners = []
    for n in sizes:
        y = rng.integers(0, 2, n)
        if ties:  # three decimals: many tied scores, across classes too
            s = np.round(np.clip(rng.beta(2, 5, n) + 0.25 * y, 0, 1), 3)
        else:
            s = rng.normal(size=n) + 0.8 * y
        if compare:  # a second, correlated model of the same rows
            s2 = np.round(np.clip(0.5 * s + 0.5 * rng.beta(2, 5, n) + 0.1 * y, 0, 1), 3)
            owners.append((y, s, s2))
        else:
            owners.append((y, s))
    return owners


def pooled(owners):
    y = np.concatenate([o[0] for o in owners])
    s = np.concatenate([o[1] for o in owners])
    return y, s


def run_case(cluster, keys, owners, sort="oblivious", delta=1, ci=True):
    names = OWNERS[: len(owners)]
    compare = len(owners[0]) == 3
    terms = JobTerms.create(
        names,
        cluster.proxy_key_bytes(),
        frac_bits=52,
        min_class_count=2,
        ci=ci,
        sort=sort,
        delta=delta,
        compare=compare,
    )
    start = time.perf_counter()
    bundles = [
        make_bundle(name, o[0], o[1], terms, keys[name], scores_b=o[2] if compare else None)
        for name, o in zip(names, owners, strict=True)
    ]
    share_seconds = time.perf_counter() - start
    result = cluster.run(bundles)
    y, s = pooled(owners)
    out = result.outputs
    if compare:
        s2 = np.concatenate([o[2] for o in owners])
        paired = delong_paired(y, s, s2)
        dse = abs(out.se_difference - paired.se_difference)
    else:
        dse = abs(out.se - delong(y, s).se) if ci else float("nan")
    row = {
        "wall": result.seconds,
        "share": share_seconds,
        "rounds": [st.rounds for st in result.stats],
        "mb": [st.bytes_sent / 1e6 for st in result.stats],
        "dauc": abs(out.auc - roc_auc(y, s)),
        "dpr": abs(out.pr_auc - pr_auc(y, s)),
        "dse": dse,
    }
    return row


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


def import_seconds(repeats=5):
    """Best of ``repeats``: import time of a party process (python -X importtime)."""
    best = float("inf")
    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import fedroc.mpc.party"],
            capture_output=True,
            text=True,
            check=True,
        )
        last = done.stderr.strip().splitlines()[-1]
        micro = int(re.split(r"\s*\|\s*", last)[1])
        best = min(best, micro / 1e6)
    modules = len(done.stderr.strip().splitlines()) - 1
    return best, modules


def cold_start(keys, owners):
    """Seconds from starting three party processes to ready, and to a first job's result."""
    registry = {name: owner_public_bytes(keys[name]) for name in OWNERS}
    start = time.perf_counter()
    with LocalCluster(owners=registry) as cluster:
        cluster.wait_ready()
        ready = time.perf_counter() - start
        row = run_case(cluster, keys, owners)
        total = time.perf_counter() - start
    return ready, total, row


def fmt_triple(values, spec):
    return "/".join(format(v, spec) for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="skip 10^5 and the paper's merge")
    parser.add_argument("--million", action="store_true", help="also 10^6 (4 x 250000)")
    parser.add_argument(
        "--issue-size", action="store_true", help="also 3 x 10^5 (3 x 100000), issue 16's size"
    )
    parser.add_argument("--mpyc-max", type=int, default=3072, help="largest n given to MPyC")
    parser.add_argument("--no-fidelity", action="store_true", help="skip the paper's merge")
    parser.add_argument("--cold", type=int, default=3, help="cold starts to time (best kept)")
    parser.add_argument("--only-start", action="store_true", help="time the start-up only")
    args = parser.parse_args()
    rng = np.random.default_rng(2024)
    keys = {name: new_owner_key() for name in OWNERS}

    seconds, modules = import_seconds()
    print(f"party process imports: {seconds:.3f} s ({modules} modules; python -X importtime)")
    cold = [cold_start(keys, make_owners(rng, [1024] * 3, True)) for _ in range(args.cold)]
    ready, total, row = min(cold, key=lambda c: c[1])
    print(
        f"cold start (best of {args.cold}): three parties connected in {ready:.2f} s; 3 x 1024 "
        f"with ties, from starting the processes to the opened result (AUC, AUPR, CI): "
        f"{total:.2f} s (job {row['wall']:.2f} s); all: " + ", ".join(f"{c[1]:.2f}" for c in cold)
    )

    if args.only_start:
        return
    cases = [
        ("3 x 1024, no ties", [1024] * 3, False, "oblivious", 1, True),
        ("3 x 1024, ties", [1024] * 3, True, "oblivious", 1, True),
        ("3 x 1024, ties, no CI", [1024] * 3, True, "oblivious", 1, False),
        ("3 x 1024, ties, two models (paired)", [1024] * 3, "compare", "oblivious", 1, True),
        ("8 x 1000, ties", [1000] * 8, True, "oblivious", 1, True),
        ("10^4 (4 x 2500), ties", [2500] * 4, True, "oblivious", 1, True),
    ]
    if not args.quick:
        cases.append(("10^5 (4 x 25000), ties", [25000] * 4, True, "oblivious", 1, True))
    if args.issue_size:
        cases.append(("3 x 10^5 (3 x 100000), ties", [100000] * 3, True, "oblivious", 1, True))
    if args.million:
        cases.append(("10^6 (4 x 250000), ties", [250000] * 4, True, "oblivious", 1, True))
    if not (args.quick or args.no_fidelity):
        cases += [
            ("3 x 1024, ties, paper merge d=1", [1024] * 3, True, "delta", 1, True),
            ("8 x 1000, ties, paper merge d=101", [1000] * 8, True, "delta", 101, True),
        ]
    data = {
        name: make_owners(rng, sizes, bool(ties), compare=ties == "compare")
        for name, sizes, ties, *_ in cases
    }

    registry = {name: owner_public_bytes(keys[name]) for name in OWNERS}
    with (
        LocalCluster(timeout=1800.0, owners=registry) as cluster,
        tempfile.TemporaryDirectory() as tmp,
    ):
        cluster.wait_ready()
        header = (
            f"{'case':<36} {'n':>7} {'wall [s]':>9} {'share [s]':>9} {'rounds P0/P1/H':>16} "
            f"{'MB sent P0/P1/H':>22} {'|dAUC|':>8} {'|dPR|':>8} {'|dSE|':>8} {'MPyC [s]':>9} "
            f"{'MPyC/ours':>9}"
        )
        print(header)
        print("-" * len(header))
        for name, sizes, ties, sort, delta, ci in cases:
            row = run_case(cluster, keys, data[name], sort, delta, ci)
            n = sum(sizes)
            peer = ""
            if sort == "oblivious" and ties is True and ci and n <= args.mpyc_max:
                mp = run_mpyc(data[name], Path(tmp))
                peer = f"{mp['wall']:>9.1f} {mp['wall'] / row['wall']:>9.0f}"
                row["peer_dauc"] = mp["dauc"]
            elif sort == "oblivious" and ties is True and ci:
                peer = f"{'(capped)':>9} {'':>9}"
            print(
                f"{name:<36} {n:>7} {row['wall']:>9.2f} {row['share']:>9.2f} "
                f"{fmt_triple(row['rounds'], 'd'):>16} {fmt_triple(row['mb'], '.1f'):>22} "
                f"{row['dauc']:>8.1e} {row['dpr']:>8.1e} {row['dse']:>8.1e} {peer}",
                flush=True,
            )
            if "peer_dauc" in row:
                print(f"{'':<36} MPyC |dAUC| = {row['peer_dauc']:.1e}")
    print(
        "MPyC/ours = MPyC wall time / ours on the same data (MPyC: pure-Python Batcher sort of "
        f"the pooled list, AUROC only, capped at n <= {args.mpyc_max}; no TLS)."
    )
    print(
        "Targets: start-up < 1 s per party, 3 x 1024 cold < 2 s, 10^5 < 60 s, 10^6 feasible. "
        "Paper: 233 s / 356 s (3 x 1024), 600 s (8 x 1000, d=101)."
    )


if __name__ == "__main__":
    main()
