"""The two baselines paper 5 compares its histograms with, on pooled rows.

Both need the pooled rows, so they are references for experiments, not federated
releases:

- :func:`exact_quantile_curves` (the reference code's ``--privacy EQ``): the Q quantiles of
  each class computed exactly from the pooled scores, then the same interpolation and
  curves as the method. It isolates the error of interpolating Q quantiles from the
  error of estimating them from a tree.
- :func:`dp_ecdf_curves` (the reference code's ``dpecdf``, after Barczewski, Mawass &
  Ramon 2025, "Differentially private empirical cumulative distribution functions"): the
  counts above ``n_points`` equally spaced thresholds, each noised by one Laplace draw
  per level of a binary tree over the thresholds (budget epsilon / L per level, L =
  ceil(log2 n_points) + 1), normalised by the largest noisy count, projected onto
  non-decreasing curves in [0, 1] (least squares, ``norm=2``, or least absolute
  deviations, ``norm=1``) and interpolated linearly between thresholds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.optimize import isotonic_regression, linprog
from scipy.sparse import csr_matrix, hstack, vstack

from fedroc._validation import FloatArray
from fedroc.exceptions import InputError

from ._curves import GRID_STEPS, Curves, approximate_curves
from ._site import check_int

__all__ = ["dp_ecdf_curves", "exact_quantile_curves", "monotone_projection"]


def _classes(label: Any, score: Any) -> tuple[FloatArray, FloatArray]:
    y = np.asarray(label, dtype=bool)
    s = np.asarray(score, dtype=np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise InputError(f"label and score must be 1-d of equal length; got {y.shape}, {s.shape}")
    if y.all() or not y.any():
        raise InputError("both classes are needed for a ROC curve")
    return s[y], s[~y]


def exact_quantile_curves(
    label: Any, score: Any, quantiles: int, *, interpolation: str = "pchip"
) -> Curves:
    """Curves through the exact class quantiles at ``linspace(0, 1, quantiles)``."""
    q = check_int(quantiles, "quantiles", 2)
    pos, neg = _classes(label, score)
    fractions = np.linspace(0.0, 1.0, q)
    lo = min(0.0, float(min(pos.min(), neg.min())))
    hi = max(1.0, float(max(pos.max(), neg.max())))
    return approximate_curves(
        np.quantile(pos, fractions),
        np.quantile(neg, fractions),
        fractions,
        pos.size,
        neg.size,
        lo,
        hi,
        interpolation,
    )


def monotone_projection(x: FloatArray, *, norm: int = 2) -> FloatArray:
    """Project ``x`` on the non-decreasing curves in [0, 1], in the l1 or l2 norm.

    l2: isotonic regression (pool adjacent violators) clipped to [0, 1], which solves the
    bounded problem. l1: the linear programme of the reference code (``z = v - u``,
    minimise ``sum(v + u)`` subject to ``x + z`` non-decreasing and in [0, 1]), by HiGHS.
    """
    x = np.asarray(x, dtype=np.float64)
    if norm == 2:
        fit = isotonic_regression(x, increasing=True).x
        return np.clip(fit, 0.0, 1.0)
    if norm != 1:
        raise InputError(f"norm must be 1 or 2; got {norm!r}")
    n = x.size
    diff = csr_matrix(np.eye(n - 1, n) - np.eye(n - 1, n, 1))  # z_i - z_(i+1)
    # z_i - z_(i+1) <= x_(i+1) - x_i ; -z_0 <= x_0 ; z_(n-1) <= 1 - x_(n-1)
    a_z = vstack(
        [
            diff,
            csr_matrix(([-1.0], ([0], [0])), (1, n)),
            csr_matrix(([1.0], ([0], [n - 1])), (1, n)),
        ]
    )
    b = np.r_[x[1:] - x[:-1], x[0], 1.0 - x[-1]]
    a = hstack([a_z, -a_z]).tocsr()  # z = v - u
    res = linprog(np.ones(2 * n), A_ub=a, b_ub=b, bounds=(0, None), method="highs")
    if not res.success:  # pragma: no cover - the problem is always feasible
        raise InputError(f"the l1 projection failed: {res.message}")
    z = res.x[:n] - res.x[n:]
    return np.maximum.accumulate(np.clip(x + z, 0.0, 1.0))


def _tree_noise(n: int, epsilon: float, rng: np.random.Generator) -> FloatArray:
    """One Laplace(L / epsilon) draw per (level, block) added to every prefix it covers."""
    levels = math.ceil(math.log2(n)) + 1 if n > 1 else 1
    i = np.arange(n)
    noise = np.zeros(n)
    for level in range(levels):
        eta = rng.laplace(0.0, levels / epsilon, size=(n >> level) + 1)
        noise += eta[i >> level]
    return noise


def dp_ecdf_curves(
    label: Any,
    score: Any,
    n_points: int,
    epsilon: float,
    *,
    norm: int = 1,
    rng: np.random.Generator | int | None = None,
) -> Curves:
    """Compute the DP-ECDF baseline's ROC and PR curves (scores in [0, 1]).

    ``rng`` drives the simulated noise: this is a baseline run on pooled rows for
    comparisons (as in the paper's experiments), not a release of a site.
    """
    m = check_int(n_points, "n_points", 2)
    if not (isinstance(epsilon, (int, float)) and epsilon > 0 and math.isfinite(epsilon)):
        raise InputError(f"epsilon must be a positive number; got {epsilon!r}")
    pos, neg = _classes(label, score)
    if min(pos.min(), neg.min()) < 0 or max(pos.max(), neg.max()) > 1:
        raise InputError("the DP-ECDF baseline needs scores in [0, 1]")
    gen = np.random.default_rng(rng)
    bins = np.linspace(0.0, 1.0, m + 1)
    tp = np.cumsum(np.histogram(pos, bins)[0][::-1]).astype(np.float64)
    fp = np.cumsum(np.histogram(neg, bins)[0][::-1]).astype(np.float64)
    tp_noisy = tp + _tree_noise(m, epsilon, gen)
    fp_noisy = fp + _tree_noise(m, epsilon, gen)
    n_pos, n_neg = float(tp_noisy.max()), float(fp_noisy.max())
    if not (n_pos > 0 and n_neg > 0):
        raise InputError(
            f"after the DP-ECDF noise the class totals are {n_pos:.1f} and {n_neg:.1f}: no "
            "curve can be drawn"
        )
    tpr = monotone_projection(np.r_[0.0, tp_noisy] / n_pos, norm=norm)
    fpr = monotone_projection(np.r_[0.0, fp_noisy] / n_neg, norm=norm)
    # Rates at thresholds 1, 1 - 1/m, ..., 0, linear in between (the reference's interp1d).
    thresholds = np.linspace(1.0, 0.0, m + 1)
    steps = np.linspace(0.0, 1.0, GRID_STEPS + 1)[:-1]
    grid = np.r_[(thresholds[:-1, None] + np.diff(thresholds)[:, None] * steps).ravel(), 0.0]
    t = np.interp(grid[::-1], thresholds[::-1], tpr[::-1])[::-1]
    f = np.interp(grid[::-1], thresholds[::-1], fpr[::-1])[::-1]
    return Curves.from_rates(grid, t, f, n_pos, n_neg)
