"""Disingenuous use of a sequestered test set: an adaptive developer against the answers.

Paper 2 (Tang et al.) guards against developers who re-query a sequestered test set to
learn from it. This study runs two adaptive developers against three ways of answering
(the engine of :mod:`fedroc.sequester`, in-process; the service answers the same way):

- unprotected: the exact subset AUC, no budget;
- h-Thresholdout_AUC (paper Figure 2): exact when within T of the whole-set AUC, else
  plus Lap(sigma) and one budget unit;
- Thresholdout (Dwork et al. 2015) with the developer's own reference AUC (0.5: the
  developer has no model).

Attack A (boosting, Blum & Hardt's "ladder" attack): the developer has no model (labels
are independent of anything they know). Each round they submit random scores, query
subset 1, and add the scores to an aggregate with the sign of (answer - 0.5). The
aggregate's AUC on subset 1 rises with exact answers: it has learned subset 1's labels,
while on images outside subset 1 it stays at 0.5. Under both Thresholdout rules the
noisy answers carry little and the service stops when the budget is spent.

Attack B (probe): to learn the label of image i, submit score 1 for i and 0 for every
other image and query subset 1. If i is in the subset the AUC moves by about
1/(2 n_class) -- below T at this subset size -- so the h-variant answers it exactly and
spends nothing; Dwork's rule answers the developer's own reference instead.

    python scripts/sequester_adaptive.py [--out out/sequester_adaptive.png] [--reps 5]

The eq.-3 budget at these subset sizes is below one unit (the service would answer no
over-threshold query at all); a budget of 20 units is set by the custodian here so that
the mechanisms are visible. Noise is drawn from seeded generators for reproducibility.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from fedroc.metrics import roc_auc
from fedroc.sequester import (
    BudgetExhausted,
    Mechanism,
    Session,
    draw_subsets,
    subset_auc,
    subset_size,
    thresholdout_budget,
)

PHI, RHO, XI, PREV = 1047, 100, 10.0, 0.3
T, SIGMA, BUDGET = 0.02, 0.124, 20
MODES = {
    "unprotected (exact subset AUC)": ("h-thresholdout", math.inf),
    "h-Thresholdout_AUC (paper)": ("h-thresholdout", T),
    "Thresholdout (Dwork), reference 0.5": ("thresholdout", T),
}


def _mechanism(name: str, threshold: float) -> tuple[Mechanism, int]:
    if math.isinf(threshold):  # never over the threshold: the exact value, unlimited
        return Mechanism(name, threshold=1e9, noise_rate=SIGMA), 10**9  # type: ignore[arg-type]
    return Mechanism(name, threshold=threshold, noise_rate=SIGMA), BUDGET  # type: ignore[arg-type]


def boosting_attack(seed: int, rounds: int) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
    """Aggregate AUC on subset 1 and outside it after each answered round, per mode."""
    rng = np.random.default_rng(seed)
    y = rng.random(PHI) < PREV
    table = draw_subsets(y, n_subsets=RHO, subset_size=subset_size(XI, PHI, RHO), seed=rng)
    sub = table.members[0]
    outside = np.setdiff1d(np.arange(PHI), sub)
    probes = rng.normal(size=(rounds, PHI))
    out = {}
    for label, (name, thr) in MODES.items():
        mech, budget = _mechanism(name, thr)
        sess = Session(y, table, mech, budget, rng=np.random.default_rng(seed + 1))
        w = np.zeros(PHI)
        fit, gen = [], []
        answered = 0
        for r in probes:
            try:
                a = sess.query(r, 1, reference=0.5)
            except BudgetExhausted:
                break
            answered += 1
            w += np.sign(a.value - 0.5) * r
            fit.append(subset_auc(sub, y, w) if w.any() else 0.5)
            gen.append(roc_auc(y[outside], w[outside]) if w.any() else 0.5)
        out[label] = (np.asarray(fit), np.asarray(gen), answered)
    return out


def probe_attack(seed: int, n_probe: int) -> dict[str, tuple[float, int, int]]:
    """Accuracy of labels guessed for subset-1 images, queries answered, budget spent."""
    rng = np.random.default_rng(seed)
    y = rng.random(PHI) < PREV
    table = draw_subsets(y, n_subsets=RHO, subset_size=subset_size(XI, PHI, RHO), seed=rng)
    members = np.unique(table.members[0])
    targets = rng.choice(members, size=min(n_probe, members.size), replace=False)
    out = {}
    for label, (name, thr) in MODES.items():
        mech, budget = _mechanism(name, thr)
        sess = Session(y, table, mech, budget, rng=np.random.default_rng(seed + 2))
        correct = 0.0
        answered = 0
        for i in targets:
            scores = np.zeros(PHI)
            scores[i] = 1.0
            try:
                a = sess.query(scores, 1, reference=0.5)
            except BudgetExhausted:
                correct += 0.5  # no answer: the developer can only guess
                continue
            answered += 1
            if a.value == 0.5:
                correct += 0.5
            else:
                correct += float((a.value > 0.5) == y[i])
        out[label] = (correct / targets.size, answered, budget - sess.budget)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/sequester_adaptive.png")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=1500)
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = subset_size(XI, PHI, RHO)
    b3 = thresholdout_budget(n, SIGMA)
    print(f"{PHI} images, {RHO} subsets of {n} (load factor {XI:g}), T = {T}, sigma = {SIGMA}; "
          f"eq.-3 budget {b3:.2g} -> custodian sets {BUDGET} units")  # fmt: skip
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(11, 4.4))
    colors = dict(zip(MODES, ["tab:red", "tab:blue", "tab:green"], strict=True))
    print("\nAttack A (boosting on subset 1): AUC of the aggregate at the end")
    print(f"{'answers':40s} {'answered':>8s} {'AUC subset 1':>12s} {'AUC outside':>11s}")
    runs = [boosting_attack(1000 + k, args.rounds) for k in range(args.reps)]
    for label in MODES:
        fits = [r[label][0] for r in runs]
        gens = [r[label][1] for r in runs]
        m = min(len(f) for f in fits)
        fit = np.mean([f[:m] for f in fits], axis=0)
        gen = np.mean([g[:m] for g in gens], axis=0)
        x = np.arange(1, m + 1)
        ax_a.plot(x, fit, color=colors[label], lw=1.6, label=f"{label}: subset 1")
        ax_a.plot(x, gen, color=colors[label], lw=1.0, ls=":")
        if m < args.rounds:
            ax_a.plot(x[-1], fit[-1], "x", color=colors[label], ms=9)
        print(f"{label:40s} {m:8d} {fit[-1]:12.3f} {gen[-1]:11.3f}")
    ax_a.axhline(0.5, color="grey", lw=0.8)
    ax_a.set(xscale="log", xlabel="answered queries", ylabel="AUC of the developer's aggregate",
             title="A: re-querying to learn subset 1's labels\n(solid: subset 1; dotted: other "
                   "images; x: service stopped)")  # fmt: skip
    ax_a.legend(fontsize=7, loc="upper left")

    print("\nAttack B (one-image probes on subset 1)")
    print(f"{'answers':40s} {'label accuracy':>14s} {'answered':>8s} {'units spent':>11s}")
    probes = [probe_attack(2000 + k, 100) for k in range(args.reps)]
    accs = []
    for label in MODES:
        acc = float(np.mean([p[label][0] for p in probes]))
        ans = float(np.mean([p[label][1] for p in probes]))
        spent = float(np.mean([p[label][2] for p in probes]))
        accs.append(acc)
        print(f"{label:40s} {acc:14.3f} {ans:8.1f} {spent:11.1f}")
    ax_b.bar(range(3), accs, color=[colors[m] for m in MODES])
    ax_b.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax_b.set_xticks(range(3), ["unprotected", "h-Thresholdout", "Thresholdout\n(Dwork)"])
    ax_b.set(ylim=(0, 1.05), ylabel="labels of subset-1 images guessed right",
             title="B: one-image probes (100 images, budget 20)")  # fmt: skip
    fig.suptitle(f"{PHI} images, {RHO} subsets of {n}; T = {T}, sigma = {SIGMA}", fontsize=9)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
