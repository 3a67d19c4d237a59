"""Is the capped draw's sensitivity ``2 c / min(P, Q)`` valid with the subsets redrawn?

:func:`fedroc.methods.sequester.engine.auc_sensitivity` argues by a coupling: two test sets
one image's label apart (image 0 positive in world A, negative in world B; the subsets'
class sizes ``P`` and ``Q`` set by the public prevalence) draw their tables from
distributions that can be coupled so that a subset's positives differ in at most ``c``
slots and its negatives in at most ``c``; every subset AUC, whatever the scores (ties
counted 1/2), then moves by at most ``c / P + c / Q <= 2 c / min(P, Q)``.

This script checks the claim exactly on tiny worlds, with no sampling:

1. the law of one subset in each world, enumerated: each class's slots are a uniform
   ``k``-subset of ``c`` copies of each of its images, so the counts are multivariate
   hypergeometric, ``prod C(c, k_j) / C(c M, k)``; the two classes are independent, and so
   are the subsets (a product of couplings couples the tables);
2. a linear program over the joint laws of (subset in A, subset in B) with the two
   marginals: the least mass any coupling must put on pairs whose positives differ in more
   than ``c`` slots or whose negatives differ in more than ``c`` (0: the coupling exists);
3. the same program with the AUC's own bound: the least mass on pairs whose AUC, at the
   score vector that moves it most among all orderings of the images with ties, moves by
   more than ``Delta`` - and the smallest ``Delta`` that admits a coupling (the W-infinity
   distance of the two laws in that worst-case AUC), beside the charged one;
4. that :func:`~fedroc.methods.sequester.engine.draw_subsets` samples the enumerated law
   (chi-square test of 40000 drawn subsets against it);
5. the privacy loss of one Laplace answer (noise rate 0.4) on a subset drawn anew in each
   world, exactly (mixtures of Laplace densities), at the worst weak ordering, against the
   charged ``Delta / 0.4``.

Usage: ``python scripts/sequester_coupling.py [--draws 40000] [--seed 20261207]``; writes
``scripts/results/sequester_coupling.md``.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize, stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import git_commit

from fedroc.methods.sequester import draw_subsets

RESULTS = Path(__file__).parent / "results" / "sequester_coupling.md"

Row = tuple[tuple[int, ...], tuple[int, ...]]  # (positive counts, negative counts) per image


def class_law(pool: list[int], n_images: int, k: int, copies: int) -> dict[tuple[int, ...], float]:
    """Law of one class's counts: a uniform ``k``-subset of ``copies`` copies of ``pool``."""
    total = math.comb(copies * len(pool), k)
    law: dict[tuple[int, ...], float] = {}
    for counts in itertools.product(range(copies + 1), repeat=len(pool)):
        if sum(counts) != k:
            continue
        full = [0] * n_images
        for img, c in zip(pool, counts, strict=True):
            full[img] = c
        law[tuple(full)] = math.prod(math.comb(copies, c) for c in counts) / total
    return law


def row_law(labels: np.ndarray, n_pos: int, n_neg: int, copies: int) -> dict[Row, float]:
    """Law of one subset of ``n_pos`` positives and ``n_neg`` negatives, capped at ``copies``."""
    n = labels.size
    pos = class_law(np.flatnonzero(labels).tolist(), n, n_pos, copies)
    neg = class_law(np.flatnonzero(~labels).tolist(), n, n_neg, copies)
    return {(a, b): pa * pb for a, pa in pos.items() for b, pb in neg.items()}


def slots_apart(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """Slots in which two multisets of the same size differ."""
    return sum(a) - sum(min(x, y) for x, y in zip(a, b, strict=True))


def orderings(n: int) -> np.ndarray:
    """Every weak ordering of ``n`` images as integer scores (ties allowed), one per row."""
    grid = np.array(list(itertools.product(range(n), repeat=n)), dtype=np.int8)
    # One representative per weak ordering: the scores used are 0..k-1 without gaps.
    top = grid.max(axis=1)
    used = np.zeros_like(top)
    for v in range(n):
        used += (grid == v).any(axis=1)
    return grid[used == top + 1].astype(float)


def aucs(rows: list[Row], scores: np.ndarray) -> np.ndarray:
    """AUC of each subset (given by its counts) at each score vector, ties counted 1/2."""
    pc = np.array([r[0] for r in rows], dtype=float)
    nc = np.array([r[1] for r in rows], dtype=float)
    diff = scores[:, :, None] - scores[:, None, :]
    wins = (diff > 0) + 0.5 * (diff == 0)
    out = np.einsum("ri,kij,rj->kr", pc, wins, nc, optimize=True)
    return out / (pc.sum(axis=1) * nc.sum(axis=1))


def least_bad_mass(law_a: dict[Row, float], law_b: dict[Row, float], bad: np.ndarray) -> float:
    """Least mass a coupling of the two laws puts on the pairs flagged ``bad``."""
    na, nb = len(law_a), len(law_b)
    a_eq = np.zeros((na + nb, na * nb))
    for i in range(na):
        a_eq[i, i * nb : (i + 1) * nb] = 1.0
    for j in range(nb):
        a_eq[na + j, j::nb] = 1.0
    b_eq = np.concatenate([list(law_a.values()), list(law_b.values())])
    res = optimize.linprog(
        bad.astype(float).ravel(), A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs"
    )
    assert res.status == 0, res.message
    return float(res.fun)


@dataclass
class World:
    """Image 0 positive (A) or negative (B); the other labels fixed."""

    n_images: int
    n_pos_a: int  # positives of world A, image 0 among them
    n_pos: int  # subset positives (public prevalence)
    n_neg: int
    copies: int

    def labels(self, world: str) -> np.ndarray:
        y = np.zeros(self.n_images, dtype=bool)
        y[: self.n_pos_a] = True
        y[0] = world == "A"
        return y


def check(w: World) -> dict[str, object]:
    """The four checks of the module docstring on world ``w`` (without the sampler's)."""
    law_a = row_law(w.labels("A"), w.n_pos, w.n_neg, w.copies)
    law_b = row_law(w.labels("B"), w.n_pos, w.n_neg, w.copies)
    rows_a, rows_b = list(law_a), list(law_b)
    slots = np.array(
        [
            [max(slots_apart(a[0], b[0]) - w.copies, slots_apart(a[1], b[1]) - w.copies, 0) > 0
             for b in rows_b]
            for a in rows_a
        ]
    )  # fmt: skip
    charged = min(1.0, 2.0 * w.copies / min(w.n_pos, w.n_neg))
    # Worst-case AUC move of each pair over every weak ordering of the images.
    scores = orderings(w.n_images)
    auc_a, auc_b = aucs(rows_a, scores), aucs(rows_b, scores)
    moves = np.array([np.abs(auc_b - auc_a[:, [i]]).max(axis=0) for i in range(len(rows_a))])
    # Smallest Delta admitting a coupling: bisect over the distinct moves.
    levels = np.unique(np.round(moves, 12))
    lo, hi = 0, len(levels) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if least_bad_mass(law_a, law_b, moves > levels[mid] + 1e-12) < 1e-12:
            hi = mid
        else:
            lo = mid + 1
    sigma = 0.4
    return {
        "loss": laplace_loss(law_a, law_b, auc_a, auc_b, sigma) / (charged / sigma),
        "rows": (len(rows_a), len(rows_b)),
        "slot_mass": least_bad_mass(law_a, law_b, slots),
        "auc_mass": least_bad_mass(law_a, law_b, moves > charged + 1e-12),
        "w_inf": float(levels[lo]),
        "sum_bound": w.copies / w.n_pos + w.copies / w.n_neg,
        "charged": charged,
    }


def laplace_loss(law_a: dict[Row, float], law_b: dict[Row, float], auc_a, auc_b, sigma: float):
    """Largest log ratio of one Laplace answer's densities in the two worlds, any ordering.

    The answer ``AUC + Lap(sigma)`` of a subset drawn anew in each world has a mixture of
    Laplace densities; their log ratio is piecewise linear between the components' centres,
    so its largest value is at a centre or in a tail.
    """
    pa, pb = np.array(list(law_a.values())), np.array(list(law_b.values()))
    worst = 0.0
    for k in range(auc_a.shape[0]):
        a, b = auc_a[k], auc_b[k]
        xs = np.concatenate([a, b])
        fa = (pa * np.exp(-np.abs(xs[:, None] - a[None, :]) / sigma)).sum(axis=1)
        fb = (pb * np.exp(-np.abs(xs[:, None] - b[None, :]) / sigma)).sum(axis=1)
        tails = [
            np.log(pa @ np.exp(a / sigma)) - np.log(pb @ np.exp(b / sigma)),  # x -> +inf
            np.log(pa @ np.exp(-a / sigma)) - np.log(pb @ np.exp(-b / sigma)),  # x -> -inf
        ]
        worst = max(worst, float(np.abs(np.log(fa / fb)).max()), *map(abs, tails))
    return worst


def sampler_pvalue(w: World, world: str, draws: int, seed: int) -> tuple[float, int]:
    """Chi-square p-value of ``draws`` subsets from :func:`draw_subsets` against the law."""
    y = w.labels(world)
    law = row_law(y, w.n_pos, w.n_neg, w.copies)
    table = draw_subsets(
        y,
        n_subsets=draws,
        subset_size=w.n_pos + w.n_neg,
        prevalence=w.n_pos / (w.n_pos + w.n_neg),
        max_copies=w.copies,
        seed=seed,
    )
    seen: Counter[Row] = Counter()
    for members in table.members:
        counts = np.bincount(members, minlength=w.n_images)
        pos = tuple(int(c) if y[i] else 0 for i, c in enumerate(counts))
        neg = tuple(int(c) if not y[i] else 0 for i, c in enumerate(counts))
        seen[(pos, neg)] += 1
    assert set(seen) <= set(law), "the sampler drew a subset outside the enumerated law"
    keys = list(law)
    observed = np.array([seen[k] for k in keys], dtype=float)
    expected = np.array([law[k] for k in keys]) * draws
    return float(stats.chisquare(observed, expected).pvalue), len(keys)


WORLDS = (
    World(n_images=5, n_pos_a=3, n_pos=2, n_neg=2, copies=2),
    World(n_images=6, n_pos_a=3, n_pos=3, n_neg=2, copies=2),
    World(n_images=7, n_pos_a=4, n_pos=3, n_neg=3, copies=1),
    World(n_images=7, n_pos_a=4, n_pos=5, n_neg=5, copies=2),
    World(n_images=7, n_pos_a=4, n_pos=5, n_neg=6, copies=2),
    World(n_images=7, n_pos_a=3, n_pos=4, n_neg=7, copies=2),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=40000)
    parser.add_argument("--seed", type=int, default=20261207)
    args = parser.parse_args()
    commit = git_commit()
    lines = [
        "# Capped draw: does a coupling of the two worlds' subsets exist? (exact)",
        "",
        f"Command: `python scripts/sequester_coupling.py --draws {args.draws} --seed "
        f"{args.seed}`; commit {commit}. Image 0 positive in world A, negative in world B; "
        "P and Q the subset's positives and negatives (public prevalence), c the cap. "
        "'slot mass': least mass any coupling of one subset's two laws puts on pairs whose "
        "positives or negatives differ in more than c slots (0: the coupling of "
        "auc_sensitivity's docstring exists). 'AUC mass': the same for pairs whose AUC moves "
        "by more than the charged Delta at the worst weak ordering of the images (ties "
        "counted 1/2). 'W-inf': the smallest Delta any coupling achieves (bisection of the "
        "LP). 'p (A)', 'p (B)': chi-square p-values of draw_subsets' subsets against the "
        f"enumerated law ({args.draws} subsets each). 'loss / eps': the largest privacy "
        "loss of one Laplace answer (noise rate 0.4) of a subset drawn anew in each world, "
        "at the worst weak ordering and output (exact: the densities are mixtures of "
        "Laplace), over the epsilon charged, Delta / 0.4: at most 1 if the charge holds.",
        "",
        "| images | positives A | P | Q | c | subsets A / B | slot mass | AUC mass | W-inf "
        "| c/P + c/Q | charged Delta | loss / eps | p (A) | p (B) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k, w in enumerate(WORLDS):
        r = check(w)
        pa, _ = sampler_pvalue(w, "A", args.draws, args.seed + 2 * k)
        pb, _ = sampler_pvalue(w, "B", args.draws, args.seed + 2 * k + 1)
        na, nb = r["rows"]  # type: ignore[misc]
        lines.append(
            f"| {w.n_images} | {w.n_pos_a} | {w.n_pos} | {w.n_neg} | {w.copies} | {na} / {nb} "
            f"| {r['slot_mass']:.2g} | {r['auc_mass']:.2g} | {r['w_inf']:.4g} "
            f"| {r['sum_bound']:.4g} | {r['charged']:.4g} | {r['loss']:.3f} | {pa:.3f} "
            f"| {pb:.3f} |"
        )
        print(lines[-1], flush=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
