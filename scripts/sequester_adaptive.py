"""Disingenuous use of a sequestered test set: adaptive developers against each answering rule.

Paper 2 (Tang et al.) guards against developers who re-query a sequestered test set to
learn from it. This study runs three adaptive developers and one honest one against the
ways of answering that issue 12 weighs (in-process :class:`fedroc.sequester.Session`; the
service answers the same way, and ``tests/test_sequester_attack.py`` runs the probe
through its REST API):

- unprotected: the exact subset AUC, no budget, no limits;
- h-Thresholdout_AUC (the paper's variant): exact within T of the whole-set AUC, else
  plus Lap(sigma) and one budget unit; alone, with answers rounded to the subset's
  precision, with per-developer quotas (100 submissions, 1000 queries), and with the
  refusal of submissions that order the images within 5 moved images of an earlier one;
- noise on every answer (``laplace``): Lap(sigma) on each answer, each spending a unit;
  also at a noise rate of 0.01 with 1000 units (answers worth having, many of them);
- Thresholdout (Dwork et al. 2015) against the developer's own reference AUC (0.5 for
  the attackers: they have no model);
- the service's default: Thresholdout, rounded, with the quotas and the refusal.

Attacks:

- probe: for each image j, predictions 1 on j and 0 elsewhere, one query of subset 1;
  guess "positive" above 0.5, "negative" below, the majority class (negative) otherwise.
  Balanced accuracy over all 1047 images (0.5: chance).
- masked probe (against the near-duplicate refusal): fresh random predictions plus 10 on
  j, guess by the answer's side of 0.5 (300 images).
- straddling probe (against Thresholdout's reference): the same one-image predictions
  with the reference set just past the threshold, 0.5 + T + 1/n_pos, where a positive's
  subset AUC lies inside the threshold and a negative's outside; guess "positive" when the
  answer is the reference (no crossing), else by the answer's side of 0.5 (300 images).
- boosting (Blum & Hardt's ladder): random predictions each round, aggregated with the
  sign of (answer - 0.5); AUC of the aggregate on subset 1 (at this load factor subset 1
  holds 98% of the images: what the developer learned about the test set).

The honest developer has a model of AUC about 0.81 and sends its validation AUC as the
reference; it queries the 100 subsets once each: answers received, mean |answer - exact
subset AUC|, and the share of answers that are its own reference.

Plan: the paper's clinical one (1047 images at prevalence 0.12, 100 subsets at load
factor 400: subsets of 4188 images, T = 0.02, noise rate 0.8, eq.-3 budget 2 units), the
service's default plan. Noise comes from seeded generators for reproducibility.

    python scripts/sequester_adaptive.py [--out scripts/results/sequester_adaptive.md]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _results import git_commit, write_result

from fedroc.exceptions import FedrocError
from fedroc.metrics import roc_auc
from fedroc.sequester import (
    Limits,
    Mechanism,
    Session,
    answer_step,
    draw_subsets,
    subset_auc,
    subset_aucs,
    subset_size,
    thresholdout_budget,
)

PHI, RHO, XI, PREV = 1047, 100, 400.0, 0.12
T, SIGMA = 0.02, 0.8
UNITS = int(thresholdout_budget(subset_size(XI, PHI, RHO), SIGMA))
QUOTAS = Limits(max_queries=1000, max_submissions=100, min_changed_images=0)
NEAR = Limits(max_queries=None, max_submissions=None, min_changed_images=5)
NONE = Limits(None, None, 0)


def _modes(step: float) -> dict[str, tuple[Mechanism, int, Limits]]:
    h = Mechanism("h-thresholdout", threshold=T, noise_rate=SIGMA)
    return {
        "unprotected (exact subset AUC)": (
            Mechanism("h-thresholdout", threshold=1e9, noise_rate=SIGMA), 10**9, NONE),
        "h-Thresholdout_AUC (paper)": (h, UNITS, NONE),
        "h-Thresholdout_AUC, rounded": (
            Mechanism("h-thresholdout", threshold=T, noise_rate=SIGMA, step=step), UNITS, NONE),
        "h-Thresholdout_AUC, quotas": (h, UNITS, QUOTAS),
        "h-Thresholdout_AUC, near-duplicates refused": (h, UNITS, NEAR),
        "noise on every answer (sigma 0.8)": (
            Mechanism("laplace", noise_rate=SIGMA), UNITS, NONE),
        "noise on every answer (sigma 0.01, 1000)": (
            Mechanism("laplace", noise_rate=0.01), 1000, NONE),
        "Thresholdout (Dwork)": (Mechanism("thresholdout", threshold=T, noise_rate=SIGMA),
                                 UNITS, NONE),
        "Thresholdout (Dwork), noise rate 0.124": (
            Mechanism("thresholdout", threshold=T, noise_rate=0.124), UNITS, NONE),
        "Thresholdout (Dwork), noise rate 0.01": (
            Mechanism("thresholdout", threshold=T, noise_rate=0.01), UNITS, NONE),
        "default: Thresholdout, rounded, limits": (
            Mechanism("thresholdout", threshold=T, noise_rate=SIGMA, step=step), UNITS,
            Limits()),
    }  # fmt: skip


def _world(seed: int):
    rng = np.random.default_rng(seed)
    y = np.zeros(PHI, dtype=bool)
    y[rng.choice(PHI, round(PREV * PHI), replace=False)] = True
    table = draw_subsets(y, n_subsets=RHO, subset_size=subset_size(XI, PHI, RHO), seed=rng)
    return rng, y, table


def _ask(sess: Session, scores: np.ndarray, subset: int, reference: float) -> float | None:
    try:
        return sess.query(scores, subset, reference=reference).value
    except FedrocError:  # budget, quota or near-duplicate: no answer
        return None


def balanced_accuracy(y: np.ndarray, guess: np.ndarray) -> float:
    return 0.5 * (float(guess[y].mean()) + float((~guess[~y]).mean()))


def probe(
    sess: Session,
    y: np.ndarray,
    targets: np.ndarray,
    mask: Callable | None = None,
    reference: float = 0.5,
) -> dict:
    guess = np.zeros(PHI, dtype=bool)
    answered = 0
    for j in targets:
        scores = np.zeros(PHI) if mask is None else mask()
        scores[j] = 1.0 if mask is None else 10.0
        a = _ask(sess, scores, 1, reference)
        if a is not None:
            answered += 1
            # An echoed reference (no crossing) is what a positive's straddled probe gives.
            guess[j] = a > 0.5 or (reference != 0.5 and a == reference)
    return {"ba": balanced_accuracy(y[targets], guess[targets]), "answered": answered}


def boosting(sess: Session, y: np.ndarray, table, rng, rounds: int) -> float:
    sub = table.members[0]
    w = np.zeros(PHI)
    for _ in range(rounds):
        r = rng.normal(size=PHI)
        a = _ask(sess, r, 1, 0.5)
        if a is None:
            if sess.budget < 1 or sess.limits.max_queries is not None:
                break
            continue
        w += np.sign(a - 0.5) * r
    return subset_auc(sub, y, w) if w.any() else 0.5


def honest(sess: Session, y: np.ndarray, table, rng) -> tuple[int, float, float]:
    s = rng.normal(size=PHI) + 1.24 * y  # AUC about 0.81, as the paper's model
    exact = subset_aucs(table, y, s)
    reference = roc_auc(y, s) + rng.normal(0, 0.01)  # its validation AUC, near the truth
    got, err, own = 0, 0.0, 0
    for k in range(1, RHO + 1):
        a = _ask(sess, s, k, reference)
        if a is None:
            break
        got += 1
        err += abs(a - exact[k - 1])
        own += int(a == reference)
    return got, err / max(got, 1), own / max(got, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="scripts/results/sequester_adaptive.md")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1000)
    args = ap.parse_args()
    t0 = time.time()
    n = subset_size(XI, PHI, RHO)
    n_pos = round(PREV * n)
    step = answer_step(n_pos, n - n_pos)
    rows = []
    for label, (mech, units, limits) in _modes(step).items():
        res: dict[str, list[float]] = {}
        for rep in range(args.reps):
            rng, y, table = _world(100 + rep)

            def session(seed: int) -> Session:
                return Session(y, table, mech, units, limits=limits,  # noqa: B023
                               rng=np.random.default_rng(seed))  # fmt: skip

            p = probe(session(rep + 1), y, np.arange(PHI))
            targets = rng.choice(PHI, 300, replace=False)
            m = probe(session(rep + 2), y, targets, lambda rng=rng: rng.normal(size=PHI))
            straddle = 0.5 + T + 1.0 / round(PREV * subset_size(XI, PHI, RHO))
            st = probe(session(rep + 5), y, targets, reference=straddle)
            fit = boosting(session(rep + 3), y, table, rng, args.rounds)
            got, err, own = honest(session(rep + 4), y, table, rng)
            for key, v in [("probe", p["ba"]), ("probe_answered", p["answered"]),
                           ("masked", m["ba"]), ("straddle", st["ba"]), ("fit", fit),
                           ("honest", got), ("honest_err", err), ("honest_own", own)]:  # fmt: skip
                res.setdefault(key, []).append(float(v))
        rows.append((label, {k: float(np.mean(v)) for k, v in res.items()}))
        print(f"{label:45s} probe BA {rows[-1][1]['probe']:.3f}", flush=True)
    head = (f"{PHI} images at prevalence {PREV}, {RHO} subsets of {n} images (load factor "
            f"{XI:g}), T = {T}, noise rate {SIGMA}, eq.-3 budget {UNITS} units, answer step "
            f"{step:g}; mean of {args.reps} test sets; {args.rounds} boosting rounds.")  # fmt: skip
    lines = [
        "# Adaptive developers against the answering rules (paper 2, issue 12)",
        "",
        f"`python scripts/sequester_adaptive.py` ({time.time() - t0:.0f} s, commit "
        f"{git_commit()}). " + head,
        "",
        "Probe: balanced accuracy of the labels guessed from one-image probes, all images "
        "(0.5 = chance). Masked: the same with fresh random predictions under the probe "
        "(300 images). Straddle: probes with the reference just past the threshold (300 "
        "images). Boosting: AUC of the aggregate on subset 1 (98% of the images). Honest: "
        "answers received of 100, mean |answer - exact subset AUC|, share that is its own "
        "reference.",
        "",
        "| answers | probe BA | probes answered | masked BA | straddle BA | boosting AUC | "
        "honest answers | honest error | own reference |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, r in rows:
        lines.append(
            f"| {label} | {r['probe']:.3f} | {r['probe_answered']:.0f} | {r['masked']:.3f} | "
            f"{r['straddle']:.3f} | {r['fit']:.3f} | {r['honest']:.0f} | "
            f"{r['honest_err']:.4f} | {r['honest_own']:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    write_result(Path(args.out), text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
