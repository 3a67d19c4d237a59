"""Slow, obviously correct versions of every ranking metric (pairs, masks, loops).

Each one follows the textbook definition with explicit loops or an n_pos x n_neg kernel
matrix, so that the fast code in fedroc.metrics can be compared with it on random data
with ties and weights. Nothing here is fast; keep the inputs small.
"""

from __future__ import annotations

import numpy as np


def weights_or_ones(y, w):
    return np.ones(len(y)) if w is None else np.asarray(w, dtype=float)


def kernel(s_pos, s_neg):
    """psi(pos, neg) = 1 if pos > neg, 1/2 on ties: the Mann-Whitney kernel."""
    return (s_pos[:, None] > s_neg[None, :]) + 0.5 * (s_pos[:, None] == s_neg[None, :])


def auc(y, s, w=None):
    y = np.asarray(y, bool)
    w = weights_or_ones(y, w)
    k = kernel(s[y], s[~y])
    return float(w[y] @ k @ w[~y] / (w[y].sum() * w[~y].sum()))


def roc_points(y, s, w=None):
    """(fpr, tpr, threshold) at every distinct score of a row with non-zero weight."""
    y = np.asarray(y, bool)
    w = weights_or_ones(y, w)
    out = [(0.0, 0.0, np.inf)]
    for t in sorted(set(s[w != 0].tolist()), reverse=True):
        hit = s >= t
        out.append((w[hit & ~y].sum() / w[~y].sum(), w[hit & y].sum() / w[y].sum(), t))
    return [np.array(v) for v in zip(*out, strict=True)]


def pr_points(y, s, w=None):
    """(precision, recall) at every distinct score, decreasing threshold."""
    y = np.asarray(y, bool)
    w = weights_or_ones(y, w)
    prec, rec = [], []
    for t in sorted(set(s[w != 0].tolist()), reverse=True):
        hit = s >= t
        prec.append(w[hit & y].sum() / w[hit].sum())
        rec.append(w[hit & y].sum() / w[y].sum())
    return np.array(prec), np.array(rec)


def average_precision(y, s, w=None):
    prec, rec = pr_points(y, s, w)
    total, last = 0.0, 0.0
    for p, r in zip(prec, rec, strict=True):
        total += (r - last) * p
        last = r
    return total


def pr_auc(y, s, w=None):
    prec, rec = pr_points(y, s, w)
    x, h = [0.0, *rec], [1.0, *prec]
    return sum((x[i + 1] - x[i]) * (h[i + 1] + h[i]) / 2 for i in range(len(x) - 1))


def partial_auc(y, s, max_fpr, w=None):
    """McClish-standardised area of the ROC polyline over [0, max_fpr], segment by segment."""
    fpr, tpr, _ = roc_points(y, s, w)
    area = 0.0
    for i in range(len(fpr) - 1):
        x0, x1, y0, y1 = fpr[i], fpr[i + 1], tpr[i], tpr[i + 1]
        if x0 >= max_fpr:
            break
        if x1 > max_fpr:  # cut the segment at max_fpr
            y1 = y0 + (y1 - y0) * (max_fpr - x0) / (x1 - x0)
            x1 = max_fpr
        area += (x1 - x0) * (y0 + y1) / 2
    lo, hi = max_fpr**2 / 2, max_fpr
    return 0.5 * (1 + (area - lo) / (hi - lo))


def delong(y, s, w=None):
    """AUC and DeLong's variance from the kernel matrix, weights as frequency weights."""
    y = np.asarray(y, bool)
    w = weights_or_ones(y, w)
    k = kernel(s[y], s[~y])
    wp, wn = w[y], w[~y]
    m, n = wp.sum(), wn.sum()
    a = wp @ k @ wn / (m * n)
    v10 = k @ wn / n
    v01 = wp @ k / m
    if m < 2 or n < 2:  # a sample variance needs two rows
        return float(a), float("nan")
    s10 = wp @ (v10 - a) ** 2 / (m - 1)
    s01 = wn @ (v01 - a) ** 2 / (n - 1)
    return float(a), float(s10 / m + s01 / n)


def table(y, s, t, w=None):
    """(tp, fp, tn, fn) when predicting positive for score >= t."""
    y = np.asarray(y, bool)
    w = weights_or_ones(y, w)
    hit = s >= t
    return (w[hit & y].sum(), w[hit & ~y].sum(), w[~hit & ~y].sum(), w[~hit & y].sum())


def operating_points(y, s, w=None):
    """Every cut (threshold, sensitivity, specificity), from inf down to the lowest score."""
    y = np.asarray(y, bool)
    out = []
    for t in [np.inf, *sorted(set(s.tolist()), reverse=True)]:
        tp, fp, tn, fn = table(y, s, t, w)
        out.append((t, tp / (tp + fn), tn / (tn + fp)))
    return out


def sensitivity_at_specificity(y, s, target, w=None):
    ok = [p for p in operating_points(y, s, w) if p[2] >= target]
    return max(ok, key=lambda p: (p[1], p[2]))  # best sensitivity, then specificity


def specificity_at_sensitivity(y, s, target, w=None):
    ok = [p for p in operating_points(y, s, w) if p[1] >= target]
    return max(ok, key=lambda p: (p[2], p[1]))


def youden(y, s, w=None):
    pts = operating_points(y, s, w)
    # Compare J * n_pos * n_neg = tp n_neg - fp n_pos: exact for whole counts, so that
    # equal J are equal and the highest threshold among them wins.
    y = np.asarray(y, bool)
    ww = weights_or_ones(y, w)
    n_pos, n_neg = ww[y].sum(), ww[~y].sum()
    key = [p[1] * n_pos * n_neg - (1 - p[2]) * n_neg * n_pos for p in pts]
    key = [round(k, 9) for k in key]
    return pts[int(np.argmax(key))]


def calibration(y, p, n_bins):
    """(count, mean predicted, observed fraction) per bin [e_l, e_l+1), last bin closed."""
    edges = np.linspace(0, 1, n_bins + 1)
    out = []
    for b in range(n_bins):
        upper = p <= edges[b + 1] if b == n_bins - 1 else p < edges[b + 1]
        mask = (p >= edges[b]) & upper
        out.append(
            (
                mask.sum(),
                p[mask].mean() if mask.any() else np.nan,
                y[mask].mean() if mask.any() else np.nan,
            )
        )
    return [np.array(v, dtype=float) for v in zip(*out, strict=True)]


def grouped_beats(y, s, g):
    """For each row, the other-class rows of its group it beats (ties 1/2), by pairs."""
    y = np.asarray(y, bool)
    out = np.zeros(len(y))
    for i in range(len(y)):
        same = (g == g[i]) & (y != y[i])
        if y[i]:
            out[i] = np.sum(s[same] < s[i]) + 0.5 * np.sum(s[same] == s[i])
        else:
            out[i] = np.sum(s[same] > s[i]) + 0.5 * np.sum(s[same] == s[i])
    return out


def drawn_area(line):
    """Area under a matplotlib line as it is drawn (a step style expanded to its corners)."""
    from matplotlib.cbook import STEP_LOOKUP_MAP

    x, y = STEP_LOOKUP_MAP[line.get_drawstyle()](line.get_xdata(), line.get_ydata())
    return float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2))
