"""How much an opened AUROC tells about the class counts, by its precision (issue 16).

The MPC method opens the AUROC ``U2 / (2 P N)`` (``U2`` an integer: twice the pair count,
ties one half) rounded to ``2**-b``. The analyst knows ``n = P + N`` (the owners' list
lengths are public). A class count ``P`` is *consistent* with an opened value ``v`` if some
integer ``k`` in ``[0, 2 P N]`` has ``k / (2 P N)`` within half a unit of ``2**-b`` of ``v``.
At full precision the candidates are few (the rational pins ``{P, N}``); once
``2 P N >> 2**b`` every ``P`` with enough pairs is consistent.

For random pooled datasets (three owners, binormal scores with a random shift, rounded to
two decimals so that ties occur) this script counts the consistent ``P`` (between the
minimum class count 5 and ``n - 5``) at each precision: the share of cases pinned to
``{P, N}``, and the median and smallest number of candidates. It justifies the default of
14 bits (four decimals) and shows where a small federation would still be narrowed down.

Usage::

    python scripts/mpc_precision.py [--cases 200] [--seed 16] [--out scripts/results]
"""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import command_line, git_commit, write_result

from fedroc.metrics import roc_auc

BITS = (8, 10, 12, 14, 16, 20, 24, 32, 52)
SIZES = (60, 200, 1000, 3072)
MIN_COUNT = 5


def twice_pairs(y: np.ndarray, s: np.ndarray) -> int:
    """U2 = sum over positives of 2 #(negatives below) + #(negatives tied): exact."""
    neg = np.sort(s[y == 0])
    pos = s[y == 1]
    return int(np.searchsorted(neg, pos, "left").sum() + np.searchsorted(neg, pos, "right").sum())


def opened(u2: int, p: int, n: int, bits: int) -> Fraction:
    """The AUROC U2 / (2 P N) rounded half up to 2**-bits, as the MPC job opens it."""
    x = Fraction(u2, 2 * p * (n - p)) * 2**bits
    return Fraction((x + Fraction(1, 2)).__floor__(), 2**bits)


def consistent(v: Fraction, n: int, bits: int) -> list[int]:
    """Every P in [MIN_COUNT, n - MIN_COUNT] consistent with the opened value ``v``."""
    half = Fraction(1, 2 ** (bits + 1))
    p = np.arange(MIN_COUNT, n - MIN_COUNT + 1, dtype=object)
    out = []
    for count in p:
        den = 2 * count * (n - count)
        lo, hi = (v - half) * den, (v + half) * den
        if -((-lo.numerator) // lo.denominator) <= hi:  # ceil(lo) <= hi
            out.append(int(count))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--out", type=Path, default=Path("scripts/results"))
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = []
    for n in SIZES:
        pinned = {b: 0 for b in BITS}
        counts: dict[int, list[int]] = {b: [] for b in BITS}
        for _ in range(args.cases):
            y = rng.integers(0, 2, n)
            while not MIN_COUNT <= y.sum() <= n - MIN_COUNT:
                y = rng.integers(0, 2, n)
            s = np.round(rng.normal(size=n) + rng.uniform(0.2, 1.5) * y, 2)
            p_true = int(y.sum())
            u2 = twice_pairs(y, s)
            assert abs(u2 / (2 * p_true * (n - p_true)) - roc_auc(y, s)) < 1e-12
            for b in BITS:
                cands = consistent(opened(u2, p_true, n, b), n, b)
                assert p_true in cands
                pinned[b] += set(cands) <= {p_true, n - p_true}
                counts[b].append(len(cands))
        for b in BITS:
            rows.append(
                (
                    n,
                    b,
                    pinned[b] / args.cases,
                    int(np.median(counts[b])),
                    int(np.min(counts[b])),
                    n - 2 * MIN_COUNT + 1,
                )
            )
            print(rows[-1], flush=True)
    command = command_line("mpc_precision.py", None)
    lines = [
        "# What the opened AUROC tells about the class counts (scripts/mpc_precision.py)",
        "",
        f"Command: `{command.strip()}` (seed {args.seed}, commit {git_commit()}).",
        "",
        f"{args.cases} random pooled datasets per size (seed {args.seed}); candidates for P are",
        f"the class counts in [{MIN_COUNT}, n - {MIN_COUNT}] consistent with the AUROC rounded",
        "to 2^-b. 'pinned' = the candidates are only {P, N}.",
        "",
        "| n | bits b | pinned | median candidates | fewest candidates | possible P |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [f"| {n} | {b} | {p:.2f} | {med} | {low} | {tot} |" for n, b, p, med, low, tot in rows]
    write_result(args.out / "mpc_precision.md", "\n".join(lines) + "\n")
    print(f"written to {args.out / 'mpc_precision.md'}")


if __name__ == "__main__":
    main()
