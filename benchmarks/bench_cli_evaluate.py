"""Wall time of ``fedroc evaluate --method rocglm --json`` on three CSV sites, fresh processes.

The analyst's whole command (imports, reading the files, the method, Brier score and
calibration through secure aggregation, the JSON), as ``bench_flower.py`` section 3 runs it
in-process; the sites are ``make_multisite`` rows (300, 340 and 380, seed 5) written to a
temporary folder. Prints the least and the median wall time over ``--runs``.
Run: .venv/bin/python benchmarks/bench_cli_evaluate.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fedroc.datasets import make_multisite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "fedroc", "evaluate", "--method", "rocglm", "--json"]
        for name, frame in make_multisite([300, 340, 380], seed=5).items():
            path = Path(tmp) / f"{name}.csv"
            frame.to_csv(path, index=False)
            cmd += ["--site", f"{name}={path}"]
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            times.append(time.perf_counter() - start)
            if proc.returncode != 0:
                raise SystemExit(f"fedroc evaluate failed ({proc.returncode}):\n{proc.stderr}")
    print(f"fedroc evaluate --method rocglm --json, 3 CSV sites, {args.runs} runs")
    print(f"min {min(times):.3f} s  median {statistics.median(times):.3f} s")


if __name__ == "__main__":
    main()
