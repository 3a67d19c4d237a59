"""Does the sequestered set's privacy hold when the subsets are redrawn with the label?

:func:`fedroc.methods.sequester.engine.draw_subsets` draws each subset's positives from the
test set's positives and its negatives from its negatives, so the table of subsets depends
on the labels: two test sets one image's label apart (the service's neighbours) give
different tables. :func:`~fedroc.methods.sequester.engine.auc_sensitivity` bounds a subset
AUC's change "subsets held fixed". This study measures whether the answers' privacy loss,
with the table redrawn in each world by the site's own randomness, stays within the
``e^epsilon`` the engine charges.

Worlds: 40 images, 6 positives with image 0 among them (world A) or image 0 negative
(world B, 5 positives); the subsets are drawn at the custodian's public prevalence 0.25,
10 subsets. Without replacement, subsets of 20 images (5 positives, 15 negatives): the
most positives that world B can fill, so that image 0 is in a subset as often as it can be
(5 of 6 subsets in world A); the charged sensitivity is 2 / 5. With replacement, subsets
of 200 images (50 positives), so that image 0 is held 8 times in a subset on average, at
most 20 (the default cap ``max_copies``, ``ceil(4 * 200 / 40)``): the charged sensitivity
``2 * 20 / 50`` stays below its cap of 1. With the table redrawn, every positive of a
world is as likely as any other to be in any subset: no image or subset is held more often
than another, and image 0 is as good a target as any. The developer knows every other
label and sends the probe that moves the AUC most for image 0: the other positives scored
1, the other negatives 0.5, image 0 scored 0 (world A: a positive at the bottom, a subset
AUC of 1 - m/5 for ``m`` copies; world B: a negative at the bottom, AUC 1). One query of
subset 1 with budget 1 unit; ``laplace`` (charged ``Delta / sigma``) or ``thresholdout``
with reference AUC 1 and T = 0.02 (charged ``2 Delta / sigma``). Answers unrounded
(rounding is post-processing, it can only lower the ratio). noise_rate sigma = 0.4.

Rows:

- redrawn (the service): each repetition draws a fresh table from the site's randomness
  in its world, a fresh session and its noise: the guarantee the service claims.
- held fixed (the engine's analysis): the table drawn in world A, world B's label flipped
  on the same table.
- seed known: one table seed for every repetition in both worlds, known to the developer
  (not the service's threat model: the seed is the custodian's secret); the developer
  computes both worlds' tables and picks the subset and the scores (greedy, each image 0,
  0.5 or 1) whose AUC moves most between them.

The event is ``answer <= t`` or ``answer >= t`` and the ratio ``P_A / P_B`` or
``P_B / P_A``, ``t`` on a grid of 0.02; it is chosen on a pilot of ``reps // 4``
repetitions per world (its own seed) and then counted on ``reps`` fresh ones, so the
reported ratio is not the maximum of many noisy ones. The 95% interval is Katz's log
interval for a ratio of two binomial proportions; "beyond" means its lower end exceeds
``e^eps`` at the smallest epsilon the engine charged in the row's repetitions.

The plan publishes the charged sensitivity (its ``epsilon``) before any query: the last
table gives how often each world charged each value, in the worlds above and at the
paper's clinical plan (1047 images, 126 or 125 positives, 100 subsets of 4188 at
prevalence 0.12, with replacement; ``--paper-reps`` tables per world). Its "uncapped"
rows draw as the paper does (``max_copies=0``) and charge what the engine charged before
the cap: the most copies of one image in a subset of the realised table, which depends on
the labels through the draw.

Usage::

    python scripts/sequester_neighbours.py [--reps 40000] [--seed 20261207]
        [--out scripts/results/sequester_neighbours.md]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import git_commit, write_result

from fedroc.methods.sequester import SubsetTable, auc_sensitivity, subset_auc
from fedroc.sequester import Mechanism, Session, draw_subsets

PHI, N_POS_A, RHO, PREVALENCE = 40, 6, 10, 0.25
#: Images per subset: without replacement the fewest positives world B can fill (5); with
#: replacement enough copies that the charged sensitivity stays below its cap of 1.
SUBSET = {False: 20, True: 200}
SIGMA, THRESHOLD, REFERENCE = 0.4, 0.02, 1.0
GRID = np.round(np.arange(0.0, 1.0001, 0.02), 10)
KNOWN_SEED = 12345


def labels(world: str) -> np.ndarray:
    """Image 0 positive in world A, negative in world B; images 1-5 positive."""
    y = np.zeros(PHI, dtype=bool)
    y[:N_POS_A] = True
    y[0] = world == "A"
    return y


def probe() -> np.ndarray:
    """Other positives 1, other negatives 0.5, image 0 at the bottom (0)."""
    y = labels("A")
    s = np.where(y, 1.0, 0.5)
    s[0] = 0.0
    return s


def seed_known_scores(replace: bool) -> tuple[np.ndarray, int]:
    """Scores and a subset that separate the two worlds' tables drawn from KNOWN_SEED.

    Greedy: each image's score in {0, 0.5, 1}, a few passes, the subset whose AUC moves
    most between the worlds.
    """
    ya, yb = labels("A"), labels("B")
    kw = dict(n_subsets=RHO, subset_size=SUBSET[replace], prevalence=PREVALENCE, replace=replace)
    ta = draw_subsets(ya, seed=KNOWN_SEED, **kw)  # type: ignore[arg-type]
    tb = draw_subsets(yb, seed=KNOWN_SEED, **kw)  # type: ignore[arg-type]
    best_s, best_k, best_gap = np.where(ya, 1.0, 0.0), 1, -1.0
    for k in range(1, RHO + 1):
        ra, rb = ta.row(k), tb.row(k)
        s = np.where(ya, 1.0, 0.0)

        def gap(v: np.ndarray, ra: np.ndarray = ra, rb: np.ndarray = rb) -> float:
            return subset_auc(ra, ya, v) - subset_auc(rb, yb, v)

        current = gap(s)
        for _ in range(3):
            for j in range(PHI):
                for value in (0.0, 0.5, 1.0):
                    trial = s.copy()
                    trial[j] = value
                    g = gap(trial)
                    if g > current + 1e-12:
                        s, current = trial, g
        if current > best_gap:
            best_s, best_k, best_gap = s, k, current
    return best_s, best_k


def run(
    world: str, row: str, mech: Mechanism, replace: bool, reps: int, rng: np.random.Generator
) -> tuple[np.ndarray, Counter[float]]:
    """Answers of ``reps`` sessions in ``world`` and how often each sensitivity was charged."""
    y = labels(world)
    scores, subset = seed_known_scores(replace) if row == "seed known" else (probe(), 1)
    answers = np.empty(reps)
    kw = dict(n_subsets=RHO, subset_size=SUBSET[replace], prevalence=PREVALENCE, replace=replace)
    charged: Counter[float] = Counter()
    for r in range(reps):
        if row == "seed known":
            table = draw_subsets(y, seed=KNOWN_SEED, **kw)  # type: ignore[arg-type]
        elif row == "held fixed":  # drawn in world A whatever the world
            table = draw_subsets(labels("A"), seed=rng, **kw)  # type: ignore[arg-type]
        else:
            table = draw_subsets(y, seed=rng, **kw)  # type: ignore[arg-type]
        session = Session(y, table, mech, budget=1, rng=rng)
        answers[r] = session.query(scores, subset, reference=REFERENCE).value
        charged[round(session.sensitivity, 6)] += 1
    return answers, charged


def hits(a: np.ndarray, b: np.ndarray, event: tuple[str, str, float]) -> tuple[int, int]:
    """Hits of ``event`` (numerator world, side, t) in the numerator's world, then the other's."""
    num, side, t = event
    x, y = (a, b) if num == "A" else (b, a)
    if side == "<=":
        return int((x <= t).sum()), int((y <= t).sum())
    return int((x >= t).sum()), int((y >= t).sum())


def katz(x: int, y: int, n: int) -> tuple[float, float, float]:
    """Ratio (x/n)/(y/n) and Katz's 95% log interval (0.5 added to empty cells)."""
    if x == 0 or y == 0:
        x, y = x + 0.5, y + 0.5  # type: ignore[assignment]
    ratio = x / y
    se = math.sqrt(1 / x - 1 / n + 1 / y - 1 / n)
    return ratio, ratio * math.exp(-1.96 * se), ratio * math.exp(1.96 * se)


def choose(pilot_a: np.ndarray, pilot_b: np.ndarray, min_hits: int) -> tuple[str, str, float]:
    """The event with the largest pilot ratio among those with ``min_hits`` hits each."""
    best, key = -1.0, ("A", "<=", 1.0)
    for num in ("A", "B"):
        for side in ("<=", ">="):
            for t in GRID:
                x, y = hits(pilot_a, pilot_b, (num, side, float(t)))
                if x >= min_hits and y >= min_hits and x / y > best:
                    best, key = x / y, (num, side, float(t))
    return key


def realised(table: SubsetTable) -> SubsetTable:
    """The table with its cap forgotten: charged as before the cap, by its realised copies."""
    return SubsetTable(table.image_ids, table.members)


def paper_plan(
    reps: int, rng: np.random.Generator, capped: bool
) -> tuple[Counter[float], Counter[float]]:
    """Sensitivity of ``reps`` paper-plan tables per world (126 or 125 positives of 1047)."""
    out = []
    for n_pos in (126, 125):
        y = np.zeros(1047, dtype=bool)
        y[:n_pos] = True
        c: Counter[float] = Counter()
        for _ in range(reps):
            table = draw_subsets(y, n_subsets=100, subset_size=4188, prevalence=0.12, seed=rng,
                                 max_copies=None if capped else 0)  # fmt: skip
            c[round(auc_sensitivity(table if capped else realised(table), y), 6)] += 1
        out.append(c)
    return out[0], out[1]


def uncapped_charges(reps: int, rng: np.random.Generator) -> tuple[Counter[float], Counter[float]]:
    """What ``reps`` uncapped tables per world were charged before the cap (realised copies)."""
    out = []
    for world in ("A", "B"):
        y = labels(world)
        c: Counter[float] = Counter()
        for _ in range(reps):
            table = draw_subsets(y, n_subsets=RHO, subset_size=SUBSET[True],
                                 prevalence=PREVALENCE, max_copies=0, seed=rng)  # fmt: skip
            c[round(auc_sensitivity(realised(table), y), 6)] += 1
        out.append(c)
    return out[0], out[1]


def largest_ratio(ca: Counter[float], cb: Counter[float], n: int) -> str:
    """The largest ratio of the worlds' frequencies of ``Delta <= v`` or ``Delta >= v``.

    Over the values ``v`` with at least 100 sessions in each world, either world on top;
    with Katz's 95% interval.
    """
    best: tuple[float, float, float, str] | None = None
    for v in sorted(set(ca) | set(cb)):
        for side in ("<=", ">="):
            keep = (lambda u: u <= v) if side == "<=" else (lambda u: u >= v)  # noqa: B023
            x = sum(k for u, k in ca.items() if keep(u))
            y = sum(k for u, k in cb.items() if keep(u))
            if min(x, y) < 100:
                continue
            num, r = ("A", katz(x, y, n)) if x >= y else ("B", katz(y, x, n))
            if best is None or r[0] > best[0]:
                best = (*r, f"P_{num}(Delta {side} {v:g})")
    if best is None:
        return "no event with >= 100 in each world"
    return f"{best[3]}: {best[0]:.3f} [{best[1]:.3f}, {best[2]:.3f}]"


def main(argv: list[str] | None = None) -> int:
    """Run the rows and write the Markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=40000, help="repetitions per world and row")
    ap.add_argument("--seed", type=int, default=20261207)
    ap.add_argument("--paper-reps", type=int, default=2000, help="paper-plan tables per world")
    ap.add_argument("--out", type=Path, default=Path("scripts/results/sequester_neighbours.md"))
    args = ap.parse_args(argv)
    t0 = time.time()
    ss = np.random.SeedSequence(args.seed)
    lines = []
    charged_lines = []
    cases: list[tuple[str, bool, str]] = [
        (row, replace, mech)
        for replace in (False, True)
        for row in ("redrawn", "held fixed", "seed known")
        for mech in ("laplace", "thresholdout")
    ]
    streams = ss.spawn(len(cases))
    for (row, replace, name), stream in zip(cases, streams, strict=True):
        pilot_ss, main_ss = stream.spawn(2)
        mech = Mechanism(name, threshold=THRESHOLD, noise_rate=SIGMA)  # type: ignore[arg-type]
        prng, mrng = np.random.default_rng(pilot_ss), np.random.default_rng(main_ss)
        pa, _ = run("A", row, mech, replace, args.reps // 4, prng)
        pb, _ = run("B", row, mech, replace, args.reps // 4, prng)
        event = choose(pa, pb, min_hits=max(10, args.reps // 400))
        a, ca = run("A", row, mech, replace, args.reps, mrng)
        b, cb = run("B", row, mech, replace, args.reps, mrng)
        x, y = hits(a, b, event)
        ratio, lo, hi = katz(x, y, args.reps)
        deltas = sorted(set(ca) | set(cb))
        per_unit = 2.0 if name == "thresholdout" else 1.0
        eps_min = per_unit * min(deltas) / SIGMA
        eps_max = per_unit * max(deltas) / SIGMA
        num, side, t = event
        other = "B" if num == "A" else "A"
        event_txt = f"P_{num}(ans {side} {t:.2f}) / P_{other}"
        verdict = "yes" if lo > math.exp(eps_min) else "no"
        eps_txt = f"{eps_min:.3g}" if eps_min == eps_max else f"{eps_min:.3g}-{eps_max:.3g}"
        lines.append(
            f"| {row} | {'with (capped)' if replace else 'without'} | {name} | {event_txt} | "
            f"{x} | {y} | "
            f"{ratio:.3f} | [{lo:.3f}, {hi:.3f}] | {eps_txt} | {math.exp(eps_min):.3f} | "
            f"{verdict} |"
        )
        if row == "redrawn":
            fa = ", ".join(f"{v:g}: {ca[v]}" for v in deltas)
            fb = ", ".join(f"{v:g}: {cb[v]}" for v in deltas)
            charged_lines.append(
                f"| {'with (capped)' if replace else 'without'} | {name} | {fa} | {fb} | "
                f"{largest_ratio(ca, cb, args.reps)} |"
            )
        print(lines[-1], flush=True)
    extra_ss = ss.spawn(3)
    ua, ub = uncapped_charges(args.reps, np.random.default_rng(extra_ss[0]))
    values = sorted(set(ua) | set(ub))
    charged_lines.append(
        f"| uncapped (before the cap) | any | {', '.join(f'{v:g}: {ua[v]}' for v in values)} | "
        f"{', '.join(f'{v:g}: {ub[v]}' for v in values)} | {largest_ratio(ua, ub, args.reps)} |"
    )
    for capped, stream in ((True, extra_ss[1]), (False, extra_ss[2])):
        pa, pb = paper_plan(args.paper_reps, np.random.default_rng(stream), capped)
        values = sorted(set(pa) | set(pb))
        charged_lines.append(
            f"| paper plan, {'capped' if capped else 'uncapped (before the cap)'} | any | "
            f"{', '.join(f'{v:g}: {pa[v]}' for v in values)} | "
            f"{', '.join(f'{v:g}: {pb[v]}' for v in values)} | "
            f"{largest_ratio(pa, pb, args.paper_reps)} |"
        )
    header = [
        "# Sequestered answers in two test sets one label apart, subsets redrawn",
        "",
        f"Command: `python scripts/sequester_neighbours.py --reps {args.reps} --seed "
        f"{args.seed} --paper-reps {args.paper_reps}`; commit {git_commit()}. {args.reps} "
        f"sessions per world and row (after a "
        f"pilot of {args.reps // 4} per world that chose the event); see the script's "
        f"docstring for the worlds, the probe and the rows. {PHI} images, image 0 positive "
        f"(A, {N_POS_A} positives) or negative (B), {RHO} subsets of {SUBSET[False]} images "
        f"without replacement or {SUBSET[True]} with (at most 20 copies of an image unless "
        f"'uncapped'), at prevalence {PREVALENCE}, noise_rate "
        f"{SIGMA}, one answer (1 unit), "
        f"thresholdout reference {REFERENCE}, T {THRESHOLD}.",
        "",
        "The interval is Katz's 95% interval of the ratio; e^eps is at the smallest epsilon "
        "the engine charged in the row (`Mechanism.epsilon(1, sensitivity)`); 'beyond' says "
        "whether the interval's lower end exceeds it.",
        "",
        "| row | replacement | mechanism | event | hits num. | hits den. | ratio | 95% CI | "
        "eps charged | e^eps | beyond |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *lines,
        "",
        "Sensitivity charged per session in the redrawn rows (value: sessions), world A "
        "then world B. The plan publishes it (through `epsilon`) before any query; the last "
        "column is the largest ratio of the two worlds' frequencies of `Delta <= v` or "
        "`Delta >= v` (events with >= 100 sessions in each world; the largest of several, "
        "not a pre-chosen event) and its Katz 95% interval:",
        "",
        "| replacement | mechanism | world A | world B | largest ratio [95% CI] |",
        "|---|---|---|---|---|",
        *charged_lines,
        "",
        f"{time.time() - t0:.0f} s.",
        "",
    ]
    write_result(args.out, "\n".join(header))
    print(f"wrote {args.out} in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
