"""ROC and precision-recall curves, AUC, average precision and PR-AUC (pooled reference).

One core routine, :func:`clf_curve_counts`, sorts the scores once and takes running counts of
true and false positives at each distinct score; the curve functions are thin layers on it
(the layout of scikit-learn's ``_ranking.py``). :func:`roc_auc` and the DeLong routines sort
each class once instead and count by binary search, which is what makes AUC plus its CI
cheaper than scikit-learn's AUC alone.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedroc._validation import BoolArray, FloatArray, check_binary
from fedroc.exceptions import UndefinedMetricWarning

__all__ = [
    "average_precision",
    "clf_curve_counts",
    "pr_auc",
    "precision_recall_curve",
    "roc_auc",
    "roc_curve",
]


def clf_curve_counts(
    y: BoolArray, s: FloatArray
) -> tuple[NDArray[np.int64], NDArray[np.int64], FloatArray]:
    """Cumulative (false positives, true positives) at each distinct threshold.

    Parameters
    ----------
    y : ndarray of bool, shape (n,)
        True for positives (already validated).
    s : ndarray of float64, shape (n,)
        Scores, higher means more likely positive.

    Returns
    -------
    fps, tps : ndarray of int64, shape (n_thresholds,)
        Number of negatives / positives with score >= ``thresholds[i]``.
    thresholds : ndarray of float64, shape (n_thresholds,)
        Distinct scores in decreasing order.
    """
    order = np.argsort(s)[::-1]
    s_sorted = s[order]
    last_of_group = np.r_[np.flatnonzero(np.diff(s_sorted)), s_sorted.size - 1]
    tps = np.cumsum(y[order], dtype=np.int64)[last_of_group]
    fps = (last_of_group + 1) - tps
    return fps, tps, s_sorted[last_of_group]


def _warn_one_class(y: BoolArray, what: str) -> bool:
    n_pos = int(np.count_nonzero(y))
    if n_pos == 0 or n_pos == y.size:
        only = "positive" if n_pos else "negative"
        warnings.warn(
            f"only {only} samples in y_true: {what} is undefined and returned as NaN",
            UndefinedMetricWarning,
            stacklevel=3,
        )
        return True
    return False


def roc_curve(
    y_true: ArrayLike,
    y_score: ArrayLike,
    *,
    pos_label: Any = None,
    drop_intermediate: bool = True,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Receiver operating characteristic curve.

    Returns
    -------
    fpr, tpr : ndarray of float64, shape (n_points,)
        False and true positive rates at score >= ``thresholds[i]``; the curve starts at
        (0, 0) and ends at (1, 1).
    thresholds : ndarray of float64, shape (n_points,)
        Decreasing; the first is ``inf`` (nothing predicted positive).

    Notes
    -----
    Same points as :func:`sklearn.metrics.roc_curve`, including which collinear points
    ``drop_intermediate`` removes. With one class only the undefined rate is NaN.

    Examples
    --------
    >>> fpr, tpr, thr = roc_curve([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    >>> fpr.tolist(), tpr.tolist()
    ([0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.5, 0.5, 1.0, 1.0])
    """
    y, s = check_binary(y_true, y_score, pos_label=pos_label)
    fps, tps, thresholds = clf_curve_counts(y, s)
    if drop_intermediate and fps.size > 2:
        keep = np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True]
        fps, tps, thresholds = fps[keep], tps[keep], thresholds[keep]
    fps = np.r_[0, fps]
    tps = np.r_[0, tps]
    thresholds = np.r_[np.inf, thresholds]
    _warn_one_class(y, "the ROC curve")
    with np.errstate(invalid="ignore", divide="ignore"):
        fpr = fps / fps[-1] if fps[-1] > 0 else np.full(fps.shape, np.nan)
        tpr = tps / tps[-1] if tps[-1] > 0 else np.full(tps.shape, np.nan)
    return fpr.astype(np.float64), tpr.astype(np.float64), thresholds


def _pr_points(y: BoolArray, s: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(precision, recall, thresholds) at each distinct threshold, decreasing thresholds."""
    fps, tps, thresholds = clf_curve_counts(y, s)
    precision = tps / (tps + fps)
    recall = tps / tps[-1] if tps[-1] > 0 else np.ones(tps.shape)
    return precision, recall, thresholds


def precision_recall_curve(
    y_true: ArrayLike, y_score: ArrayLike, *, pos_label: Any = None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Precision-recall pairs at each distinct threshold.

    Returns
    -------
    precision, recall : ndarray of float64, shape (n_thresholds + 1,)
        In order of increasing threshold; the last point is (recall 0, precision 1).
    thresholds : ndarray of float64, shape (n_thresholds,)
        Increasing distinct scores.

    Notes
    -----
    Identical to :func:`sklearn.metrics.precision_recall_curve` (``drop_intermediate=False``).
    Without positives, recall is 1 at every threshold (as scikit-learn) and a warning is given.
    """
    y, s = check_binary(y_true, y_score, pos_label=pos_label)
    if not y.any():
        warnings.warn(
            "no positive samples in y_true: recall is set to 1 for every threshold",
            UndefinedMetricWarning,
            stacklevel=2,
        )
    precision, recall, thresholds = _pr_points(y, s)
    return np.r_[precision[::-1], 1.0], np.r_[recall[::-1], 0.0], thresholds[::-1]


def roc_auc(y_true: ArrayLike, y_score: ArrayLike, *, pos_label: Any = None) -> float:
    """Area under the ROC curve: the Mann-Whitney statistic, ties counted 1/2.

    Equal to :func:`sklearn.metrics.roc_auc_score` for binary labels. NaN (with a warning)
    when only one class is present.

    Examples
    --------
    >>> roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    0.75
    """
    y, s = check_binary(y_true, y_score, pos_label=pos_label)
    if _warn_one_class(y, "the AUC"):
        return float("nan")
    pos = np.sort(s[y])
    neg = np.sort(s[~y])
    # Binary search of each (sorted) positive among the sorted negatives: negatives below
    # count 1, equal ones 1/2. left + right counts each tie once and each lower one twice.
    twice = np.searchsorted(neg, pos, "left").sum() + np.searchsorted(neg, pos, "right").sum()
    return float(twice) / (2.0 * pos.size * neg.size)


def average_precision(y_true: ArrayLike, y_score: ArrayLike, *, pos_label: Any = None) -> float:
    """Average precision, the step-wise sum ``sum_k (R_k - R_{k-1}) P_k``.

    Equal to :func:`sklearn.metrics.average_precision_score`; NaN without positives.
    """
    y, s = check_binary(y_true, y_score, pos_label=pos_label)
    if not y.any():
        _warn_one_class(y, "average precision")
        return float("nan")
    precision, recall, _ = _pr_points(y, s)
    recall = np.r_[0.0, recall]
    return float(max(0.0, np.sum(np.diff(recall) * precision)))


def pr_auc(y_true: ArrayLike, y_score: ArrayLike, *, pos_label: Any = None) -> float:
    """Area under the PR curve by trapezoids over the distinct-threshold points.

    The curve starts at (recall 0, precision 1). Equal to
    ``sklearn.metrics.auc(recall, precision)`` on scikit-learn's PR curve and to ppAURORA's
    tie-aware AUPR. NaN without positives.
    """
    y, s = check_binary(y_true, y_score, pos_label=pos_label)
    if not y.any():
        _warn_one_class(y, "the PR-AUC")
        return float("nan")
    precision, recall, _ = _pr_points(y, s)
    return float(np.trapezoid(np.r_[1.0, precision], np.r_[0.0, recall]))
