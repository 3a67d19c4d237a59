"""Brier score and calibration curve (pooled reference).

One binning rule (:func:`fedroc.metrics.bin_index_edges`: ``[e_l, e_(l+1))``, the last bin
closed) and one set of bin sums (:meth:`ScoreCounts.calibration_sums`: rows, summed
probabilities and positives per bin, which add up across sites).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedroc._docs import fill_doc
from fedroc._results import ResultMixin, format_table
from fedroc._validation import FloatArray, check_binary, check_probabilities
from fedroc.metrics._counts import (
    ScoreCounts,
    bin_edges,
    bin_index_edges,
    check_sample_weight,
)

__all__ = [
    "CalibrationCurve",
    "bin_edges",
    "bin_index",
    "brier_score",
    "calibration_curve",
    "calibration_sums",
]


@fill_doc
def brier_score(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    pos_label: object = None,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Mean squared difference between the 0/1 label and the predicted probability.

    ``y_prob`` must lie in [0, 1] (paper 1, eq. 5). With ``sample_weight``, the weighted
    mean (:func:`sklearn.metrics.brier_score_loss`).

    Parameters
    ----------
    {y_true}
    {y_prob}
    {pos_label}
    {sample_weight}

    Returns
    -------
    float
        The (weighted) mean of ``(y - p) ** 2``, in [0, 1]; 0 is perfect.

    Raises
    ------
    InputError
        Labels that are not binary, probabilities outside [0, 1], NaN or infinite values,
        or inputs of different lengths.

    Examples
    --------
    >>> brier_score([0, 1, 1], [0.1, 0.8, 0.6])
    0.07
    """
    y, p = check_binary(y_true, y_prob, pos_label=pos_label, name_score="y_prob")
    check_probabilities(p)
    w = check_sample_weight(sample_weight, y.size)
    return float(np.average((y - p) ** 2, weights=w))


def bin_index(y_prob: FloatArray, n_bins: int) -> NDArray[np.intp]:
    """Bin of each probability: ``[e_l, e_(l+1))`` for all but the last bin, ``[e_n, 1]``.

    Scores of exactly 0 fall in the first bin and of exactly 1 in the last (the reference
    code's right-closed first bin dropped 0). Sites and the pooled reference use this same
    rule (:func:`bin_index_edges`), so a score is in the same bin everywhere.

    Parameters
    ----------
    y_prob : ndarray of float, shape (n_samples,)
        Probabilities in [0, 1] (not checked here).
    n_bins : int
        Number of equal-width bins on [0, 1] (edges on the 1/4096 grid: :func:`bin_edges`).

    Returns
    -------
    ndarray of intp, shape (n_samples,)
        Bin of each probability, from 0 to ``n_bins - 1``.

    Examples
    --------
    >>> bin_index(np.array([0.0, 0.1, 0.5, 1.0]), 2).tolist()
    [0, 0, 1, 1]
    """
    return bin_index_edges(y_prob, bin_edges(n_bins))


@fill_doc
def calibration_sums(
    y_true: ArrayLike, y_prob: ArrayLike, *, n_bins: int = 10, pos_label: object = None
) -> tuple[NDArray[np.int64], FloatArray, FloatArray]:
    """Per bin: rows, sum of the predicted probabilities, positives.

    What a site releases for a distributed calibration curve; the sums add up across
    sites and :meth:`CalibrationCurve.from_sums` turns them into the curve.

    Parameters
    ----------
    {y_true, y_prob, n_bins, pos_label}

    Returns
    -------
    count : ndarray of int64, shape (n_bins,)
        Rows in each bin.
    sum_predicted : ndarray of float64, shape (n_bins,)
        Sum of the predicted probabilities of each bin's rows.
    sum_observed : ndarray of float64, shape (n_bins,)
        Positives in each bin.

    Examples
    --------
    >>> [a.tolist() for a in calibration_sums([0, 1, 1], [0.1, 0.8, 0.6], n_bins=2)]
    [[1, 2], [0.1, 1.4], [0.0, 2.0]]
    """
    y, p = check_binary(y_true, y_prob, pos_label=pos_label, name_score="y_prob")
    check_probabilities(p)
    edges = bin_edges(n_bins)
    return ScoreCounts.from_scores(y, p, thresholds=edges[:-1]).calibration_sums(n_bins)


@dataclass(frozen=True, repr=False)
class CalibrationCurve(ResultMixin):
    """Per-bin calibration summary.

    Attributes
    ----------
    edges : ndarray, shape (n_bins + 1,)
        Bin edges, from 0 to 1; bin ``k`` is ``[edges[k], edges[k + 1])``, the last closed.
    count : ndarray of int, shape (n_bins,)
        Rows in each bin (for a clear distributed curve: only from the sites that released
        it; a secure one counts every row).
    mean_predicted : ndarray, shape (n_bins,)
        Mean predicted probability per bin; NaN for an empty bin and for a bin withheld
        outright (a clear distributed curve's where no site released it, a DP curve's
        noisy one). A secure curve's flagged bin: the mean over every row, those of the
        sites that withheld it at the bin's middle (:func:`fedroc.secagg.secure_calibration`).
    observed_fraction : ndarray, shape (n_bins,)
        Fraction of positives per bin; NaN for an empty bin, and as ``mean_predicted`` for
        a suppressed one (a secure curve's is over every row).
    suppressed : ndarray of bool, shape (n_bins,)
        True where at least one site withheld the bin (distributed curve only).
    predicted_count : ndarray of int, shape (n_bins,), optional
        Rows the mean predictions are over; None: ``count`` (a secure curve gives
        ``count``: every row's prediction is in its sums).
    """

    edges: FloatArray
    count: NDArray[np.int64]
    mean_predicted: FloatArray
    observed_fraction: FloatArray
    suppressed: NDArray[np.bool_]
    predicted_count: NDArray[np.int64] | None = None

    @classmethod
    def from_sums(
        cls,
        edges: FloatArray,
        count: ArrayLike,
        sum_predicted: ArrayLike,
        sum_observed: ArrayLike,
        suppressed: ArrayLike | None = None,
        *,
        predicted_count: ArrayLike | None = None,
    ) -> CalibrationCurve:
        """Build the curve from per-bin sums (pooled, or added up across sites).

        Parameters
        ----------
        edges : ndarray of shape (n_bins + 1,)
            Bin edges on [0, 1].
        count : array-like of int, shape (n_bins,)
            Rows in each bin.
        sum_predicted : array-like of shape (n_bins,)
            Sum of the predicted probabilities of each bin's rows.
        sum_observed : array-like of shape (n_bins,)
            Positives in each bin.
        suppressed : array-like of bool, shape (n_bins,), optional
            Bins withheld by at least one site; None: no bin was withheld.
        predicted_count : array-like of int, shape (n_bins,), optional
            Rows whose predictions ``sum_predicted`` holds, where fewer than ``count``.

        Returns
        -------
        CalibrationCurve
            Means are NaN where a bin has no rows.
        """
        n = np.asarray(count, dtype=np.int64)
        m = n if predicted_count is None else np.asarray(predicted_count, dtype=np.int64)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_predicted = np.where(m > 0, np.asarray(sum_predicted) / m, np.nan)
            observed = np.where(n > 0, np.asarray(sum_observed) / n, np.nan)
        sup = np.zeros(n.shape, bool) if suppressed is None else np.asarray(suppressed, bool)
        return cls(edges, n, mean_predicted, observed, sup, None if predicted_count is None else m)

    @property
    def n_bins(self) -> int:
        """Number of bins."""
        return int(self.count.size)

    @property
    def withheld(self) -> NDArray[np.bool_]:
        """Bins of which some site kept rows back: ``suppressed``, less a secure curve's empty ones.

        A site flags every bin under its minimum count, an empty one too; a secure curve
        counts every row, so its flagged bin of ``count`` 0 holds no row at any site, and
        nothing was kept back there. A clear curve's count leaves the withheld rows out, so
        its flags stand.
        """
        if self.predicted_count is None:
            return self.suppressed
        return self.suppressed & (self.count > 0)

    def summary(self) -> str:
        """Format one line per bin: rows, mean predicted probability, observed fraction."""
        rows = []
        for k in range(self.n_bins):
            lo, hi = self.edges[k], self.edges[k + 1]
            close = "]" if k == self.n_bins - 1 else ")"
            label = f"[{lo:.2f}, {hi:.2f}{close}"
            note = " (suppressed at >= 1 site)" if self.withheld[k] else ""
            rows.append(
                (
                    label,
                    f"n={int(self.count[k]):>6}  predicted={self.mean_predicted[k]:.3f}  "
                    f"observed={self.observed_fraction[k]:.3f}{note}",
                )
            )
        return format_table(rows, title="Calibration curve")


@fill_doc
def calibration_curve(
    y_true: ArrayLike, y_prob: ArrayLike, *, n_bins: int = 10, pos_label: object = None
) -> CalibrationCurve:
    """Calibration curve over ``n_bins`` equal-width bins on [0, 1].

    Per bin: count, mean predicted probability and observed fraction of positives (paper 1,
    section 4.1). Empty bins have NaN means.

    Parameters
    ----------
    {y_true}
    {y_prob}
    {n_bins}
    {pos_label}

    Returns
    -------
    CalibrationCurve
        Edges, rows, mean predicted probability and observed fraction of each bin (none
        suppressed: the pooled curve).

    Examples
    --------
    >>> c = calibration_curve([0, 1, 1, 0], [0.1, 0.8, 0.6, 0.3], n_bins=2)
    >>> c.count.tolist(), c.mean_predicted.tolist(), c.observed_fraction.tolist()
    ([2, 2], [0.2, 0.7], [0.0, 1.0])
    """
    sums = calibration_sums(y_true, y_prob, n_bins=n_bins, pos_label=pos_label)
    return CalibrationCurve.from_sums(bin_edges(n_bins), *sums)
