"""Wall time of the `fedroc` command's help and usage errors, and the heavy modules each loads.

A help text or a mistyped option, method or path should be answered before numpy, pandas
and scipy are imported (they take seconds on a busy machine). Each case runs the installed
command in a fresh process; the table gives the median and the minimum over the runs.
Run: .venv/bin/python benchmarks/bench_cli_startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

HEAVY = ("numpy", "pandas", "scipy", "matplotlib", "sklearn", "pyarrow", "flwr")

CASES = [
    ["--help"],
    ["metrics", "--help"],
    ["evaluate", "--help"],
    ["clustered", "--help"],
    ["metrics", "--bogus"],
    ["metrics", "no-such.csv"],
    ["evaluate", "--method", "bogus"],
    ["evaluate", "--method", "pooled"],
    ["evaluate", "--method", "rocglm", "--site", "a=no-such.csv"],
]

# Runs the command line as the `fedroc` script does, then lists the heavy modules loaded.
PROBE = """
import sys
from fedroc.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({heavy!r}))
print(",".join(heavy) or "-", file=sys.__stderr__)
"""


def run(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "fedroc", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - start


def heavy_modules(args: list[str]) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stderr.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()
    print(f"python -m fedroc ARGS, {opts.runs} runs each (wall time of a fresh process)")
    print(f"{'ARGS':<56} {'median [s]':>10} {'min [s]':>8}  heavy modules loaded")
    for args in CASES:
        times = [run(args) for _ in range(opts.runs)]
        shown = " ".join(args)
        print(
            f"{shown:<56} {statistics.median(times):>10.2f} {min(times):>8.2f}  "
            f"{heavy_modules(args)}"
        )


if __name__ == "__main__":
    main()
