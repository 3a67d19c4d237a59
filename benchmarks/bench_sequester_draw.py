"""Plan-creation cost: time to draw a sequestered set's subsets (``draw_subsets``).

The capped draw with replacement (the service's default, ``max_copies`` copies of each
image) against the paper's uncapped draw (``max_copies=0``, one vectorised ``choice``) and
the draw without replacement (one permutation of each class per subset), at the paper's
plan (1047 images, 100 subsets of 4188 at prevalence 0.12) and at plans near the service's
``MAX_TABLE_ENTRIES`` (50 million entries). "capped, row loop" is the draw of commit
7b14dfd (one ``Generator.choice`` per subset and class), run in the same process by
swapping the engine's helper back in, alternating with the current one (best of each); the
ratio is its time over the current capped draw's.
Without replacement, the current draw (the capped draw with one copy) against commit
7b14dfd's, whose permutations hold ``n_subsets * n_images`` entries: a plan where that
exceeds ``--max-permuted`` (default 2e8, 0.8 GB) is not run with it.

    python benchmarks/bench_sequester_draw.py [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from _timing import best_of

import fedroc.methods.sequester.engine as engine
from fedroc.methods.sequester import draw_subsets

PLANS = (  # (name, images, subsets, subset size)
    ("paper", 1047, 100, 4188),
    ("paper subsets, 50M", 1047, 11_938, 4188),
    ("small subsets, 50M", 1047, 1_000_000, 50),
    ("large set, 50M", 100_000, 100_000, 500),
    ("large subsets, 50M", 100_000, 1000, 50_000),
)


def _row_loop(
    rng: np.random.Generator, pool: np.ndarray, rho: int, k: int, copies: int
) -> np.ndarray:
    """The capped draw of commit 7b14dfd: one ``Generator.choice`` per row."""
    slots = np.empty((rho, k), dtype=np.int64)
    for r in range(rho):
        slots[r] = rng.choice(copies * pool.size, size=k, replace=False)
    return pool[slots // copies]


def _old_without(y: np.ndarray, rho: int, n: int) -> np.ndarray:
    """The draw without replacement of commit 7b14dfd: each row permutes its whole class."""
    rng = np.random.default_rng(1)
    pos = np.flatnonzero(y).astype(np.int32)
    neg = np.flatnonzero(~y).astype(np.int32)
    n_pos = min(max(round(0.12 * n), 1), n - 1)
    take_pos = rng.permuted(np.broadcast_to(pos, (rho, pos.size)), axis=1)[:, :n_pos]
    take_neg = rng.permuted(np.broadcast_to(neg, (rho, neg.size)), axis=1)[:, : n - n_pos]
    return np.ascontiguousarray(np.concatenate([take_pos, take_neg], axis=1), dtype=np.int32)


def _labels(n_images: int) -> np.ndarray:
    y = np.zeros(n_images, dtype=bool)
    rng = np.random.default_rng(0)
    y[rng.choice(n_images, round(0.12 * n_images), replace=False)] = True
    return y


def _time_draw(y: np.ndarray, rho: int, n: int, repeats: int, **kw: object) -> float:
    def draw() -> object:
        return draw_subsets(y, n_subsets=rho, subset_size=n, prevalence=0.12, seed=1, **kw)  # type: ignore[arg-type]

    return best_of(draw, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    parser.add_argument("--quick", action="store_true", help="plans 10 times smaller")
    parser.add_argument("--max-permuted", type=float, default=2e8)
    args = parser.parse_args()
    current = engine._capped_draw
    print("| plan | images | subsets x size | entries | draw | max_copies | seconds | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name, phi, rho, n in PLANS:
        if args.quick and rho >= 1000:
            rho //= 10
        y = _labels(phi)
        c = engine.default_max_copies(n, phi)
        rows: list[tuple[str, object, float | None]] = []

        def run(**kw: object) -> float:
            return _time_draw(y, rho, n, args.repeats, **kw)  # noqa: B023

        # The two capped draws alternate, best of each (the machine's load varies).
        new = old = math.inf
        for _ in range(args.repeats):
            new = min(new, _time_draw(y, rho, n, 1))
            engine._capped_draw = _row_loop  # type: ignore[assignment]
            try:
                old = min(old, _time_draw(y, rho, n, 1))
            finally:
                engine._capped_draw = current
        rows.append(("capped (current)", c, new))
        rows.append(("capped, row loop (7b14dfd)", c, old))
        rows.append(("uncapped (max_copies=0)", 0, run(max_copies=0)))
        if n > phi:
            rows.append(("without replacement", 1, None))  # subsets larger than the set
        else:
            new_w = run(replace=False)
            rows.append(("without replacement (current)", 1, new_w))
            if rho * phi > args.max_permuted:
                what = f"whole-class permutation (7b14dfd): not run, {rho * phi:.2g} entries"
                rows.append((what, 1, None))
            else:
                old_w = best_of(lambda: _old_without(y, rho, n), args.repeats)  # noqa: B023
                rows.append(("whole-class permutation (7b14dfd)", 1, old_w))
        for draw, copies, secs in rows:
            shown = "-" if secs is None else f"{secs:.3f}"
            ratio = ""
            if draw == "capped (current)":
                ratio = f"{old / new:.1f}"
            elif draw == "without replacement (current)" and rows[-1][2] is not None:
                ratio = f"{rows[-1][2] / new_w:.1f}"
            print(
                f"| {name} | {phi} | {rho} x {n} | {rho * n:.3g} | {draw} | {copies} | "
                f"{shown} | {ratio} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
