"""Paired DeLong's interval of an AUC difference with few positives, and alternatives.

The coverage audit (scripts/results/coverage_audit_paired.md) found the default interval
of ``evaluate(..., compare=True)``, the Wald interval of paired DeLong
(:func:`fedroc.metrics.delong_paired`), at 0.902 (MCSE 0.009) for AUCs 0.95 and 0.90 with
15 positives in 300 rows. This study measures it beside three alternatives on the audit's
continuous paired designs (latent ``X = mu y + Z``, ``(Z_a, Z_b)`` bivariate normal with
correlation 0.6 in each class, scores ``Phi(X)``; each AUC is ``Phi(mu / sqrt 2)``):

- ``wald``: ``d +- z se`` (fedroc's default before this study,
  ``confidence_interval(method="wald")``);
- ``t``: ``d +- t se`` with ``n_pos - 1`` degrees of freedom;
- ``mover-logit`` and ``mover-default``: MOVER (method of variance estimates recovery;
  Zou & Donner 2008, for correlated AUCs Zou & Yue 2013): from each AUC's own interval
  ``(l, u)`` and DeLong's correlation r of the two AUCs,
  ``L = d - sqrt((a - l_a)^2 + (u_b - b)^2 - 2 r (a - l_a)(u_b - b))`` and
  ``U = d + sqrt((u_a - a)^2 + (b - l_b)^2 - 2 r (u_a - a)(b - l_b))``, with the logit
  interval (paper 1 eq. 3) or with fedroc's default single-AUC interval
  (:func:`fedroc.metrics.small_sample_ci`: the logit interval joined with the score
  interval below 100 rows of a class);
- ``default``: fedroc's default now, ``delong_paired(...).ci``: ``wald`` with at least 100
  rows of each class, below it the product's own MOVER from the two default single-AUC
  intervals (the ``mover-default`` column computed by the product, Wald where an AUC is 0
  or 1).

Usage::

    python scripts/paired_small_sample.py --reps 2000
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import special, stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import command_line, git_commit, write_result

from fedroc.metrics import delong_paired, logit_ci, small_sample_ci

DESIGNS = (  # (AUC a, AUC b, correlation, prevalence)
    (0.95, 0.9, 0.6, 0.05),
    (0.8, 0.75, 0.6, 0.05),
    (0.8, 0.75, 0.6, 0.3),
)
SIZES = (300, 1000)
KINDS = ("wald", "t", "mover-logit", "mover-default", "default")
LEVEL = 0.95


def mover(
    a: float, b: float, ci_a: tuple[float, float], ci_b: tuple[float, float], r: float
) -> tuple[float, float]:
    """MOVER interval of ``a - b`` from the two intervals and the correlation r."""
    (la, ua), (lb, ub) = ci_a, ci_b
    d = a - b
    low = (a - la) ** 2 + (ub - b) ** 2 - 2 * r * (a - la) * (ub - b)
    high = (ua - a) ** 2 + (b - lb) ** 2 - 2 * r * (ua - a) * (b - lb)
    return d - math.sqrt(max(0.0, low)), d + math.sqrt(max(0.0, high))


def intervals(y: np.ndarray, a: np.ndarray, b: np.ndarray) -> dict[str, tuple[float, float]]:
    res = delong_paired(y, a, b, confidence_level=LEVEL)
    d, se = res.difference, res.se_difference
    out = {"wald": res.confidence_interval(method="wald"), "default": res.ci}
    q = float(stats.t.ppf(0.5 + LEVEL / 2, res.n_pos - 1))
    out["t"] = (d - q * se, d + q * se)
    c = res.covariance
    se_a, se_b = math.sqrt(c[0, 0]), math.sqrt(c[1, 1])
    if 0 < res.auc_a < 1 and 0 < res.auc_b < 1 and se_a > 0 and se_b > 0:
        r = float(c[0, 1] / (se_a * se_b))
        out["mover-logit"] = mover(
            res.auc_a,
            res.auc_b,
            logit_ci(res.auc_a, se_a, LEVEL),
            logit_ci(res.auc_b, se_b, LEVEL),
            r,
        )
        p, n = res.n_pos, res.n_neg
        out["mover-default"] = mover(
            res.auc_a,
            res.auc_b,
            small_sample_ci(res.auc_a, se_a, p, n, LEVEL),
            small_sample_ci(res.auc_b, se_b, p, n, LEVEL),
            r,
        )
    return out


def cell(design: tuple[float, ...], n: int, reps: int, seed: int) -> dict[str, Any]:
    auc_a, auc_b, rho, prevalence = design
    mu_a, mu_b = (math.sqrt(2) * stats.norm.ppf(v) for v in (auc_a, auc_b))
    truth = auc_a - auc_b
    rng = np.random.default_rng([seed, n, round(1000 * auc_a), round(1000 * prevalence)])
    hit: dict[str, list[bool]] = {k: [] for k in KINDS}
    below = dict.fromkeys(KINDS, 0)
    width: dict[str, list[float]] = {k: [] for k in KINDS}
    skipped = 0
    start = time.perf_counter()
    for _ in range(reps):
        y = rng.random(n) < prevalence
        z = rng.multivariate_normal([0.0, 0.0], [[1.0, rho], [rho, 1.0]], size=n)
        a = special.ndtr(mu_a * y + z[:, 0])
        b = special.ndtr(mu_b * y + z[:, 1])
        if min(y.sum(), n - y.sum()) < 2:
            skipped += 1
            continue
        for kind, (lo, hi) in intervals(y, a, b).items():
            hit[kind].append(lo <= truth <= hi)
            below[kind] += truth < lo
            width[kind].append(hi - lo)
    row: dict[str, Any] = {
        "auc_a": auc_a,
        "auc_b": auc_b,
        "prevalence": prevalence,
        "n": n,
        "skipped": skipped,
        "seconds": time.perf_counter() - start,
    }
    for kind in KINDS:
        h = np.asarray(hit[kind], dtype=float)
        c = float(h.mean()) if h.size else math.nan
        row[kind] = c
        row[f"{kind}_runs"] = int(h.size)
        row[f"{kind}_mcse"] = math.sqrt(c * (1 - c) / h.size) if h.size else math.nan
        row[f"{kind}_below"] = below[kind]
        row[f"{kind}_above"] = int(h.size - h.sum()) - below[kind]
        row[f"{kind}_width"] = float(np.mean(width[kind])) if width[kind] else math.nan
    return row


def to_markdown(rows: list[dict[str, Any]], header: list[str]) -> str:
    lines = [
        *header,
        "",
        "Each entry: coverage of the true difference by the nominal 95% interval (MCSE),",
        "mean width, misses with the truth below / above the interval; '<<' marks more than",
        "3 MCSE below 0.95. MOVER needs both AUCs inside (0, 1): runs in its 'runs'.",
        "",
        "| AUC a / b | prevalence | n | "
        + " | ".join(KINDS)
        + " | MOVER runs | default / wald width |",
        "|---|---|---|" + "---|" * len(KINDS) + "---|---|",
    ]
    for r in rows:
        cells = []
        for k in KINDS:
            c, se = r[k], r[f"{k}_mcse"]
            flag = " <<" if c < LEVEL - 3 * se else ""
            cells.append(
                f"{c:.3f} ({se:.3f}){flag}, {r[f'{k}_width']:.4f}, "
                f"{r[f'{k}_below']}/{r[f'{k}_above']}"
            )
        lines.append(
            f"| {r['auc_a']} / {r['auc_b']} | {r['prevalence']} | {r['n']} | "
            + " | ".join(cells)
            + f" | {r['mover-default_runs']} | {r['default_width'] / r['wald_width']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--out", type=Path, default=Path("scripts/results"))
    args = parser.parse_args(argv)
    command = command_line("paired_small_sample.py", argv)
    commit = git_commit()
    start = time.perf_counter()
    rows = []
    for design in DESIGNS:
        for n in SIZES:
            rows.append(cell(design, n, args.reps, args.seed))
            r = rows[-1]
            print(
                f"{design} n={n}: " + ", ".join(f"{k} {r[k]:.3f}" for k in KINDS),
                file=sys.stderr,
                flush=True,
            )
    seconds = time.perf_counter() - start
    header = [
        "# Paired DeLong with few positives: Wald, t, MOVER and default intervals of an AUC "
        "difference",
        "",
        f"Command: `{command}` (seed {args.seed}; commit {commit}; {seconds:.0f} s, nice 10 on",
        "the shared 2-core machine). Continuous paired designs of coverage_audit.py (correlation",
        "0.6), pooled rows; `default` is fedroc's default (`delong_paired(...).ci`,",
        "`compare=True`): `wald` from 100 rows of each class on, MOVER from the two default",
        "single-AUC intervals below.",
    ]
    text = to_markdown(rows, header)
    write_result(args.out / "paired_small_sample.md", text)
    print(text)


if __name__ == "__main__":
    main()
