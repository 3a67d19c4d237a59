"""How private the histogram's count releases are when a site's counts are public (H1).

The histogram method's count releases (``fedroc.histogram.tree_local``,
``fedroc.histogram.class_counts_local``, and the same noise in the distributed-DP tree and
joint grid) calibrate their noise to sensitivity 1: a row *added or removed* changes one
count per level by 1. But a site releases its exact ``n``, ``n_pos`` and ``n_neg`` to any
analyst (``fedroc.info``, ``fedroc.class_counts``, served by the default policy), so the
neighbours an analyst must not tell apart are datasets of the same counts where one row
*moved*: its score from leaf 0 to leaf 1 (the tree), or its label (the class counts). Two
cells change by 1 each, and a release at epsilon has a privacy loss of up to 2 epsilon. On
c030b25 the ledger charged epsilon (H1); it now charges 2 epsilon, which the table shows
beside the measured ratio.

The analyst of differential privacy knows every row but the target's. For each epsilon the
script asks ``reps`` releases of one site in each of the two worlds (the target in leaf 0
or leaf 1; the target positive or negative), through fedroc's public calls on sites that
draw their noise as in production (OpenDP, no seed), and counts the event ``S``: both
released cells on the side of world 0 (cell 0 at least the others' count plus one, cell 1
at most the others' count). epsilon-DP requires ``P(S | world 0) <= e^epsilon P(S | world
1)``; the discrete Laplace of scale ``1/epsilon`` gives exactly ``e^(2 epsilon)``.

Usage::

    python scripts/histogram_dp_neighbours.py [--reps 2000] [--out scripts/results]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import git_commit, write_result

from fedroc.data import SiteData
from fedroc.federation import Federation, Site
from fedroc.methods.histogram import COUNT_LOCAL_NAME, LOCAL_NAME
from fedroc.privacy import DisclosurePolicy

OTHERS = 20  # rows of each (class, leaf) besides the target


def _site(name: str, world: int, release: str) -> Site:
    """40 positives and 40 negatives at 0.25 and 0.75 (20 each) plus the target, moved."""
    y = np.r_[np.ones(2 * OTHERS, bool), np.zeros(2 * OTHERS, bool)]
    s = np.tile(np.r_[np.full(OTHERS, 0.25), np.full(OTHERS, 0.75)], 2)
    if release == "tree":  # the target, a positive, in leaf 0 or leaf 1
        y, s = np.r_[True, y], np.r_[0.25 if world == 0 else 0.75, s]
    else:  # the target positive or negative
        y, s = np.r_[world == 0, y], np.r_[0.25, s]
    policy = DisclosurePolicy(epsilon_limit=math.inf)  # one site asked many times
    return Site(name, SiteData.from_arrays(y, s), policy=policy)


def _in_s(reply: dict, release: str) -> bool:
    if release == "tree":
        cells = np.asarray(reply["pos"], dtype=np.float64)  # leaves 0 and 1 of the positives
        base = (OTHERS, OTHERS)
    else:
        cells = np.asarray(reply["counts"], dtype=np.float64)  # (positives, negatives)
        base = (2 * OTHERS, 2 * OTHERS)
    return bool(cells[0] >= base[0] + 1 and cells[1] <= base[1])


def measure(release: str, epsilon: float, reps: int) -> tuple[int, int, float]:
    """Hits of S in each world over ``reps`` releases, and what the ledger charged one."""
    hits, charged = [], 0.0
    for world in (0, 1):
        site = _site(f"{release}-{world}", world, release)
        fed = Federation.from_sites([site])
        if release == "tree":
            function, args = LOCAL_NAME, dict(branching=2, height=1, lo=0.0, hi=1.0)
        else:
            function, args = COUNT_LOCAL_NAME, dict(lo=0.0, hi=1.0)
        hits.append(
            sum(
                _in_s(fed.call(function, epsilon=epsilon, **args)[site.name], release)
                for _ in range(reps)
            )
        )
        charged = max(charged, site.ledger.spent()[0] / reps)
    return hits[0], hits[1], charged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=Path("out"))
    args = parser.parse_args(argv)
    started = time.time()
    lines = [
        "# Privacy of the histogram's count releases when a site's counts are public (H1)",
        "",
        f"Command: `python scripts/histogram_dp_neighbours.py --reps {args.reps}`; commit "
        f"{git_commit()}; noise from OpenDP (no seed). P(S|0) / P(S|1) over {args.reps} "
        "releases per world (see the script's docstring); epsilon-DP allows e^epsilon, and "
        "a release the ledger charged c may give a ratio up to e^c (within sampling error).",
        "",
        "| release | epsilon asked | charged (ledger) | hits world 0 | hits world 1 | ratio | "
        "e^epsilon | e^charged |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for release in ("tree", "class counts"):
        for epsilon in (0.5, 1.0, 2.0):
            h0, h1, charged = measure(release, epsilon, args.reps)
            ratio = h0 / h1 if h1 else math.inf
            lines.append(
                f"| {release} | {epsilon:g} | {charged:g} | {h0} | {h1} | {ratio:.2f} | "
                f"{math.exp(epsilon):.2f} | {math.exp(charged):.2f} |"
            )
            print(lines[-1], flush=True)
    lines += ["", f"{time.time() - started:.0f} s."]
    write_result(args.out / "histogram_dp_neighbours.md", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
