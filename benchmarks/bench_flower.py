"""Latency of fedroc over Flower on loopback, against the in-process transport.

1. Round trip of one site-function call (``fedroc.info`` on every site) over a real
   SuperLink and 3 or 10 SuperNodes (TLS), with fedroc's tuned SuperNodes and, for 3 sites,
   stock ``flower-supernode`` processes; the in-process transport as the peer.
2. End to end: a multi-round method (ROC-GLM when it is registered, else distributed
   variance + Brier + calibration, the ``moments`` job) as one Flower run, wall clock from
   ``flwr run`` to the result and time inside the ServerApp, against in-process.
3. The command line, as an analyst runs it: ``fedroc flower run --method rocglm`` on a
   3-site TLS deployment (node authentication on) against ``fedroc evaluate --method
   rocglm`` on the same files, alternating, wall clock of each command; the ratio of the
   medians is the figure of merit (target: 3). Where a Flower job's time goes: the phases
   of the last job (from the clock the ServerApp reports) and the CPU seconds each process
   of the deployment spent on it, which a loaded machine does not distort as much as the
   wall clock.

Run: ``.venv/bin/python benchmarks/bench_flower.py [--calls 20] [--quick] [--cli-runs 3]``.
Every process it starts is stopped at the end; ports are free ones on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fedroc.datasets import make_multisite
from fedroc.federation import Federation
from fedroc.federation.flower.deploy import LocalDeployment
from fedroc.federation.flower.jobs import run_job
from fedroc.federation.flower.site_config import SiteNodeConfig
from fedroc.methods import evaluate, get_method, method_names


def _sites(root: Path, n: int) -> dict[str, Path]:
    paths = {}
    for name, frame in make_multisite([300 + 40 * (k % 5) for k in range(n)], seed=5).items():
        paths[name] = root / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def _inprocess_call(paths: dict[str, Path], calls: int) -> float:
    fed = Federation.from_files(paths)
    fed.call("fedroc.info")
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fed.call("fedroc.info")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _method_job() -> tuple[str, dict[str, Any], str]:
    if "rocglm" in method_names():
        options = dict(get_method("rocglm").demo_options)
        return "evaluate", {"method": "rocglm", "seed": 1, "options": options}, "ROC-GLM"
    return "moments", {"calibration_bins": 10}, "variance+Brier+calibration"


def _inprocess_method(paths: dict[str, Path], job: str, options: dict[str, Any]) -> float:
    fed = Federation.from_files(paths)
    start = time.perf_counter()
    if job == "evaluate":
        evaluate(fed, options["method"], seed=options["seed"], **options["options"])
    else:
        run_job(job, fed, options)
    return time.perf_counter() - start


def _cpu_seconds(pids: list[int]) -> dict[int, tuple[float, str]]:
    """User+system CPU of each process and of its reaped children (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline") as fh:
                cmd = fh.read().split("\0")
        except OSError:
            continue
        module = cmd[cmd.index("-m") + 1] if "-m" in cmd else Path(cmd[0]).name
        out[pid] = (sum(int(x) for x in fields[11:15]) / tick, module.rsplit(".", 1)[-1])
    return out


def _run(cmd: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:  # the command's own message: --json puts it on stdout
        said = (proc.stdout.strip() or proc.stderr.strip()).splitlines()[-3:]
        raise SystemExit(f"{' '.join(cmd[1:3])} exited {proc.returncode}: {' '.join(said)}")
    return time.perf_counter() - start


# The options of both commands. No --seed: the CLI refuses it for rocglm (exit 2), whose
# one resampling is seeded by the released values (fedroc.cli._method_options).
CLI_METHOD = ["--method", "rocglm", "--json"]


def cli_commands(paths: dict[str, Path], deployment: Path) -> tuple[list[str], list[str]]:
    """The analyst's two commands on the same files: in-process, and over the deployment."""
    fedroc = str(Path(sys.executable).with_name("fedroc"))
    local = [fedroc, "evaluate", *CLI_METHOD]
    for name, path in paths.items():
        local += ["--site", f"{name}={path}"]
    remote = [fedroc, "flower", "run", "--deployment", str(deployment), *CLI_METHOD]
    return local, remote


def cli_ratio(root: Path, runs: int) -> None:
    """`fedroc flower run` against `fedroc evaluate`, the same method and files."""
    paths = _sites(root, 3)
    configs = [SiteNodeConfig(site=s, data=p) for s, p in paths.items()]
    print("starting SuperLink + 3 tuned SuperNodes (TLS, node auth) ...", file=sys.stderr)
    with LocalDeployment(configs, root / "deployment") as dep:
        local, remote = cli_commands(paths, dep.directory)
        _run(remote)  # warm-up: page cache, the SuperLink's first run
        flower_times, local_times = [], []
        for _ in range(runs):
            local_times.append(_run(local))
            flower_times.append(_run(remote))
        before = _cpu_seconds(dep.processes())
        payload = dep.submit(
            "evaluate",
            {"method": "rocglm", "seed": 1, "options": dict(get_method("rocglm").demo_options)},
        )
        after = _cpu_seconds(dep.processes())
    flower, inproc = statistics.median(flower_times), statistics.median(local_times)
    print("\nCommand line, ROC-GLM on 3 sites (same files; medians of alternating runs)")
    print(f"{'command':>44} {'runs':>4} {'median s':>9} {'min s':>7}")
    print(f"{'fedroc evaluate (in-process)':>44} {runs:>4} {inproc:>9.2f} {min(local_times):>7.2f}")
    print(
        f"{'fedroc flower run (TLS, node auth)':>44} {runs:>4} {flower:>9.2f} "
        f"{min(flower_times):>7.2f}"
    )
    print(f"ratio flower / in-process: {flower / inproc:.2f} (target 3)")
    clock = payload["clock"]
    t0 = clock["submitted"]
    phases = [
        ("flwr run: CLI start, bundle, start-run", "started"),
        ("ServerApp task picked up and forked", "serverapp_main"),
        ("discovery (hello to every site)", "discovered"),
        ("the method's rounds", "job_done"),
        ("result line reaches the analyst", "result"),
    ]
    print("\nWhere the last job's time went (seconds since `flwr run` was started)")
    previous = 0.0
    for label, key in phases:
        if clock.get(key):
            at = clock[key] - t0
            print(f"{label:>44} {at - previous:7.2f}  (at {at:6.2f})")
            previous = at
    calls = payload["seconds"]["calls"]
    print(f"{'rounds':>44} {len(calls):7d}  median {statistics.median(calls):.3f} s per call")
    print("\nCPU seconds spent on that job, by process")
    totals: dict[str, float] = {}
    for pid, (cpu, name) in after.items():
        totals[name] = totals.get(name, 0.0) + cpu - before.get(pid, (0.0, name))[0]
    for name, cpu in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"{name:>44} {cpu:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="3 tuned SuperNodes only")
    parser.add_argument("--cli-runs", type=int, default=3, help="runs of each command")
    parser.add_argument("--cli-only", action="store_true", help="only the command-line ratio")
    args = parser.parse_args()
    if args.cli_only or "rocglm" in method_names():
        with tempfile.TemporaryDirectory(prefix="fedroc-bench-") as tmp:
            cli_ratio(Path(tmp), args.cli_runs)
        if args.cli_only:
            return
    setups = [(3, True), (10, True), (3, False)] if not args.quick else [(3, True)]
    job, job_options, job_label = _method_job()
    latency_rows = []
    method_rows = []
    with tempfile.TemporaryDirectory(prefix="fedroc-bench-") as tmp:
        for n, tuned in setups:
            root = Path(tmp) / f"{n}-{'tuned' if tuned else 'stock'}"
            root.mkdir()
            paths = _sites(root, n)
            configs = [SiteNodeConfig(site=s, data=p) for s, p in paths.items()]
            calls = args.calls if tuned else max(3, args.calls // 4)
            local = _inprocess_call(paths, calls)
            print(
                f"starting SuperLink + {n} {'tuned' if tuned else 'stock'} SuperNodes ...",
                file=sys.stderr,
            )
            with LocalDeployment(configs, root / "deployment", tuned=tuned) as dep:
                start = time.perf_counter()
                script = {"calls": [{"function": "fedroc.info", "repeat": calls + 1}]}
                payload = dep.submit("calls", script, timeout=120)
                wall = time.perf_counter() - start
                times = payload["seconds"]["calls"][1:]  # the first call warms the sites up
                latency_rows.append(
                    (
                        n,
                        "tuned" if tuned else "stock",
                        calls,
                        statistics.median(times),
                        _p90(times),
                        local,
                        statistics.median(times) / local,
                        wall,
                    )
                )
                if tuned:
                    start = time.perf_counter()
                    result = dep.submit(job, job_options, timeout=120)
                    wall = time.perf_counter() - start
                    inproc = _inprocess_method(paths, job, job_options)
                    rounds = (
                        result["result"]["released"]["rounds"]
                        if "released" in result["result"]
                        else len(result["seconds"]["calls"])
                    )
                    method_rows.append(
                        (n, job_label, rounds, wall, result["seconds"]["job"], inproc)
                    )
    print("\nRound trip of one site-function call (fedroc.info on every site), loopback, TLS")
    head = ("sites", "SuperNode", "calls", "median s", "p90 s", "in-process s", "ratio", "run s")
    print("{:>5} {:>9} {:>5} {:>9} {:>8} {:>12} {:>8} {:>7}".format(*head))
    for n, kind, calls, med, p90, local, ratio, wall in latency_rows:
        print(
            f"{n:>5} {kind:>9} {calls:>5} {med:>9.3f} {p90:>8.3f} {local:>12.6f} "
            f"{ratio:>8.0f} {wall:>7.1f}"
        )
    print("\nEnd to end, one Flower run (wall: flwr run to result; job: inside the ServerApp)")
    head2 = ("sites", "computation", "rounds", "wall s", "job s", "in-process s", "wall/inproc")
    print("{:>5} {:>28} {:>6} {:>7} {:>7} {:>12} {:>11}".format(*head2))
    for n, label, rounds, wall, inside, inproc in method_rows:
        print(
            f"{n:>5} {label:>28} {rounds:>6} {wall:>7.2f} {inside:>7.2f} {inproc:>12.4f} "
            f"{wall / inproc:>11.0f}"
        )


if __name__ == "__main__":
    main()
