"""ROC and precision-recall curves, AUC, partial AUC, average precision and PR-AUC.

Pooled reference implementations, each a thin layer on :class:`~fedroc.metrics.ScoreCounts`
(the layout of scikit-learn's ``_ranking.py``, whose ``_binary_clf_curve`` is the model):
validate the input, count the classes at each distinct score, ask the counts.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from fedroc._validation import BoolArray, FloatArray
from fedroc.metrics._counts import ScoreCounts
from fedroc.metrics._scored import score_counts_metric

__all__ = [
    "average_precision",
    "clf_curve_counts",
    "partial_auc",
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
        True for positives.
    s : ndarray of float64, shape (n,)
        Scores, higher means more likely positive.

    Returns
    -------
    fps, tps : ndarray of int64, shape (n_thresholds,)
        Number of negatives / positives with score >= ``thresholds[i]``.
    thresholds : ndarray of float64, shape (n_thresholds,)
        Distinct scores in decreasing order.

    Examples
    --------
    >>> fps, tps, thr = clf_curve_counts(np.array([False, True, True]), np.array([.2, .2, .9]))
    >>> fps.tolist(), tps.tolist(), thr.tolist()
    ([0, 1], [1, 2], [0.9, 0.2])
    """
    c = ScoreCounts.from_scores(y, s)
    return c.fps.astype(np.int64), c.tps.astype(np.int64), c.thresholds


@score_counts_metric
def roc_curve(
    counts: ScoreCounts, *, drop_intermediate: bool = True
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Receiver operating characteristic curve.

    Parameters
    ----------
    drop_intermediate : bool, default True
        Drop points collinear with their neighbours (same points as scikit-learn drops).

    Returns
    -------
    fpr, tpr : ndarray of float64, shape (n_points,)
        False and true positive rates at score >= ``thresholds[i]``; the curve starts at
        (0, 0) and ends at (1, 1). With one class only the undefined rate is NaN.
    thresholds : ndarray of float64, shape (n_points,)
        Decreasing; the first is ``inf`` (nothing predicted positive).

    Notes
    -----
    Same points as :func:`sklearn.metrics.roc_curve`.

    Examples
    --------
    >>> fpr, tpr, thr = roc_curve([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    >>> fpr.tolist(), tpr.tolist()
    ([0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.5, 0.5, 1.0, 1.0])
    """
    return counts.roc(drop_intermediate=drop_intermediate)


@score_counts_metric
def precision_recall_curve(counts: ScoreCounts) -> tuple[FloatArray, FloatArray, FloatArray]:
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

    Examples
    --------
    >>> p, r, t = precision_recall_curve([0, 1, 1], [0.2, 0.2, 0.9])
    >>> p.tolist(), r.tolist(), t.tolist()
    ([0.6666666666666666, 1.0, 1.0], [1.0, 0.5, 0.0], [0.2, 0.9])
    """
    return counts.pr()


@score_counts_metric
def roc_auc(counts: ScoreCounts, *, max_fpr: float | None = None) -> float:
    """Compute the area under the ROC curve: the Mann-Whitney statistic, ties counted 1/2.

    Equal to :func:`sklearn.metrics.roc_auc_score` for binary labels (with its
    ``sample_weight`` and ``max_fpr``; see :func:`partial_auc`).

    Parameters
    ----------
    max_fpr : float in (0, 1], optional
        Return the McClish-standardised partial AUC up to this false positive rate instead.

    Returns
    -------
    float
        The probability that a random positive scores above a random negative (ties 1/2),
        or with ``max_fpr`` the standardised partial AUC; NaN (with a warning) when only
        one class is present. With ``sample_weight``, the weighted share of correctly
        ordered pairs.

    Examples
    --------
    >>> roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    0.75
    >>> roc_auc(["no", "no", "yes", "yes"], [0.1, 0.4, 0.35, 0.8], pos_label="yes")
    0.75
    """
    return counts.auc(max_fpr=max_fpr)


@score_counts_metric
def partial_auc(counts: ScoreCounts, *, max_fpr: float) -> float:
    """McClish-standardised partial AUC over false positive rates [0, ``max_fpr``].

    The area under the ROC curve up to ``max_fpr`` (the curve cut there by linear
    interpolation), mapped to ``0.5 * (1 + (A - A_min) / (A_max - A_min))`` with
    ``A_min = max_fpr**2 / 2`` (the chance diagonal) and ``A_max = max_fpr`` (McClish 1989).
    So 0.5 is chance and 1 perfect, whatever ``max_fpr``. This is
    ``sklearn.metrics.roc_auc_score(y_true, y_score, max_fpr=max_fpr)``.

    Parameters
    ----------
    max_fpr : float in (0, 1]
        1 gives the full AUC.

    Returns
    -------
    float
        NaN (with a warning) when only one class is present.

    Examples
    --------
    >>> round(partial_auc([0, 0, 1, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.2, 0.9], max_fpr=0.5), 4)
    0.8519
    """
    return counts.auc(max_fpr=max_fpr)


@score_counts_metric
def average_precision(counts: ScoreCounts) -> float:
    """Compute average precision, the step-wise sum ``sum_k (R_k - R_{k-1}) P_k``.

    Equal to :func:`sklearn.metrics.average_precision_score`.

    Returns
    -------
    float
        Precision at each distinct threshold weighted by the recall gained there; NaN (with a
        warning) without positives.

    Examples
    --------
    >>> average_precision([1, 1, 0, 0], [0.9, 0.5, 0.5, 0.1])
    0.8333333333333333
    """
    return counts.average_precision()


@score_counts_metric
def pr_auc(counts: ScoreCounts) -> float:
    """Compute the area under the PR curve by trapezoids over the distinct-threshold points.

    The curve starts at (recall 0, precision 1). Equal to
    ``sklearn.metrics.auc(recall, precision)`` on scikit-learn's PR curve and to ppAURORA's
    tie-aware AUPR.

    Returns
    -------
    float
        NaN (with a warning) without positives.

    Examples
    --------
    >>> pr_auc([1, 1, 0, 0], [0.9, 0.5, 0.5, 0.1])
    0.9166666666666666
    """
    return counts.pr_auc()
