"""Run benchmarks against two fedroc trees, alternating, and compare their figures.

Each round runs every selected benchmark once on each tree (old then new, new then old on
the next round, so that a change of machine load mid-round falls on both alike), with
``PYTHONPATH=<tree>/src`` and this interpreter. The benchmark scripts are this tree's (the
same script times both codes). Each benchmark's printed figures are read with the
patterns below; the table gives the least value over the rounds (best of N) per tree and
the ratio new/old, with "yes" when the new is at most 10 % slower (the open issue's
"within 10 %, same-run ratios"), and the ratio of the two trees' medians over the rounds
beside it (on a machine shared with other jobs, the least value of one tree can be a lucky
quiet moment; the median ratio says whether a gap is typical of the rounds).

Run, from a checkout with a second worktree of the old code:

    git worktree add --detach ../old OLD_COMMIT
    .venv/bin/python benchmarks/compare_trees.py --old ../old --new . --rounds 5
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NUM = r"([0-9]+(?:\.[0-9]+)?)"

# benchmark name -> (script, quick arguments, {figure: regex, or (regex, group number)})
Spec = str | tuple[str, int]
BENCHMARKS: dict[str, tuple[str, list[str], dict[str, Spec]]] = {
    "rocglm": (
        "bench_rocglm.py",
        ["--n-per-site", "200000"],
        {
            "rocglm paper (none), total s": rf"^paper \(none\)\s+{NUM}",
            "rocglm corrected, total s": rf"^corrected\s+{NUM}",
            "rocglm pooled peer s": rf"^pooled ROC-GLM \+ DeLong CI \(peer\): {NUM}",
        },
    ),
    "histogram": (
        "bench_histogram.py",
        ["--rows", "1000000"],
        {
            "histogram secagg round (10 x 2^14) s": rf"^secure aggregation, in-process.*?{NUM}$",
            "histogram end to end (10 x 10^6) s": rf"^end to end, in-process \(s\)\s+{NUM}",
            "histogram site work, slowest site s": rf"^site work, slowest site \(s\)\s+{NUM}",
            "histogram analyst work s": rf"^analyst work \(s\)\s+{NUM}",
        },
    ),
    "metrics": (
        "bench_metrics.py",
        ["--n", "1000000"],
        {
            "metrics AUC+DeLong CI, continuous s": (
                rf"^continuous scores\s+{NUM}\s+{NUM}\s+{NUM}",
                3,
            ),
            "metrics AUC+DeLong CI, ties s": (
                rf"^scores on 1000 levels \(ties\)\s+{NUM}\s+{NUM}\s+{NUM}",
                3,
            ),
        },
    ),
    "clustered": (
        "bench_clustered.py",
        ["--repeats", "1"],
        {
            "clustered_auc 10^6 rows s": rf"^\s+1000000\s+10000\s+{NUM}",
            "clustered federated, secure s": rf"secure aggregation {NUM} s",
            "clustered federated, plain s": rf"plain sums {NUM} s",
        },
    ),
    "prechecks": (
        "bench_prechecks.py",
        ["--repeats", "3"],
        {
            "prechecks ROC-GLM paper, 5 x 2e5, total s": (
                rf"^ROC-GLM \(paper estimate\), total \(s\)\s+{NUM}"
            ),
            "prechecks histogram local DP, 5 x 2e5, total s": (
                rf"^histogram local DP, total \(s\)\s+{NUM}"
            ),
            "prechecks secure Brier + calibration, 5 x 2e5, s": (
                rf"^secure Brier \+ calibration, total \(s\)\s+{NUM}"
            ),
            "prechecks secure sum 10 x 2^14, best of 40, s": rf"^secure sum, 10 sites.*?{NUM}$",
            "prechecks check_labels 10^6 strings s": rf"^check_labels, 10\^6 strings.*?{NUM}$",
            "prechecks encode_clusters 10^6 strings s": rf"^encode_clusters, 10\^6.*?{NUM}$",
        },
    ),
    "cli_evaluate": (
        "bench_cli_evaluate.py",
        ["--runs", "1"],  # one command per run: old and new alternate at each command
        {"cli evaluate --method rocglm, 3 CSV sites (min) s": rf"^min {NUM} s"},
    ),
    "cli_startup": (
        "bench_cli_startup.py",
        ["--runs", "3"],
        {
            "cli --help (min) s": (rf"^--help\s+{NUM}\s+{NUM}", 2),
            "cli evaluate --method pooled (min) s": (
                rf"^evaluate --method pooled\s+{NUM}\s+{NUM}",
                2,
            ),
            "cli evaluate rocglm no-such.csv (min) s": (
                rf"^evaluate --method rocglm --site a=no-such.csv\s+{NUM}\s+{NUM}",
                2,
            ),
        },
    ),
}


def _pattern(spec: Spec) -> tuple[re.Pattern[str], int]:
    if isinstance(spec, tuple):
        return re.compile(spec[0], re.MULTILINE), spec[1]
    return re.compile(spec, re.MULTILINE), 1


def run_once(tree: Path, name: str) -> tuple[dict[str, float], str, float]:
    """Run one benchmark on one tree; return its figures, its output and its wall time."""
    script, quick, figures = BENCHMARKS[name]
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(HERE / script), *quick],
        capture_output=True,
        text=True,
        env=env,
        cwd=HERE,
        check=False,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{script} on {tree} failed ({proc.returncode}):\n{proc.stderr}")
    out: dict[str, float] = {}
    for figure, spec in figures.items():
        pattern, group = _pattern(spec)
        match = pattern.search(proc.stdout)
        if match is None:
            raise SystemExit(f"{script} on {tree}: no figure {figure!r} in:\n{proc.stdout}")
        out[figure] = float(match.group(group))
    return out, proc.stdout, wall


def fedroc_file(tree: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    return subprocess.run(
        [sys.executable, "-c", "import fedroc; print(fedroc.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.strip()


def commit_of(tree: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="worktree of the old code")
    parser.add_argument("--new", type=Path, required=True, help="worktree of the new code")
    parser.add_argument("--rounds", type=int, default=5, help="runs per tree (best of N)")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), default=list(BENCHMARKS))
    parser.add_argument("--log", type=Path, help="append every run's output to this file")
    args = parser.parse_args()
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    for label, tree in trees.items():
        where = fedroc_file(tree)
        if not where.startswith(str(tree)):
            raise SystemExit(f"--{label} {tree}: fedroc is imported from {where}")
        print(f"{label}: {commit_of(tree)} ({where})", flush=True)

    values: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for r in range(args.rounds):
        order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
        for name in args.only:
            for label in order:
                figures, stdout, wall = run_once(trees[label], name)
                print(f"round {r + 1} {name:<12} {label}: {wall:6.1f} s wall", flush=True)
                if args.log:
                    with args.log.open("a") as log:
                        log.write(f"\n### round {r + 1} {name} {label}\n{stdout}")
                for figure, value in figures.items():
                    values[label].setdefault(figure, []).append(value)

    old_c, new_c = commit_of(trees["old"]), commit_of(trees["new"])
    print(f"\nbest of {args.rounds} alternated runs per tree (and the ratio of the medians)")
    print(f"| benchmark | old ({old_c}) | new ({new_c}) | new/old | within 10%? | median new/old |")
    print("|---|---:|---:|---:|---|---:|")
    for figure in values["old"]:
        old, new = min(values["old"][figure]), min(values["new"][figure])
        ratio = new / old if old > 0 else float("nan")
        med_old = statistics.median(values["old"][figure])
        med_new = statistics.median(values["new"][figure])
        med = med_new / med_old if med_old > 0 else float("nan")
        ok = "yes" if ratio <= 1.10 else "NO"
        print(f"| {figure} | {old:.3f} | {new:.3f} | {ratio:.2f} | {ok} | {med:.2f} |")


if __name__ == "__main__":
    main()
