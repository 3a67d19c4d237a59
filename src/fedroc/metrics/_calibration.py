"""Brier score and calibration curve (pooled reference)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedroc._results import ResultMixin, format_table
from fedroc._validation import FloatArray, check_binary, check_probabilities
from fedroc.exceptions import InputError

__all__ = ["CalibrationCurve", "bin_edges", "bin_index", "brier_score", "calibration_curve"]


def brier_score(y_true: ArrayLike, y_prob: ArrayLike, *, pos_label: object = None) -> float:
    """Mean squared difference between the 0/1 label and the predicted probability.

    ``y_prob`` must lie in [0, 1] (paper 1, eq. 5).
    """
    y, p = check_binary(y_true, y_prob, pos_label=pos_label, name_score="y_prob")
    check_probabilities(p)
    return float(np.mean((y - p) ** 2))


def bin_edges(n_bins: int) -> FloatArray:
    """``n_bins + 1`` equidistant edges from 0 to 1."""
    if int(n_bins) != n_bins or n_bins < 1:
        raise InputError(f"n_bins must be a positive integer; got {n_bins!r}")
    return np.linspace(0.0, 1.0, int(n_bins) + 1)


def bin_index(y_prob: FloatArray, n_bins: int) -> NDArray[np.intp]:
    """Bin of each probability: ``[e_l, e_(l+1))`` for all but the last bin, ``[e_n, 1]``.

    Scores of exactly 0 fall in the first bin and of exactly 1 in the last (the reference
    code's right-closed first bin dropped 0). Sites and the pooled reference use this same
    function, so a score is in the same bin everywhere.
    """
    edges = bin_edges(n_bins)
    return np.minimum(np.searchsorted(edges, y_prob, side="right") - 1, int(n_bins) - 1)


@dataclass(frozen=True, repr=False)
class CalibrationCurve(ResultMixin):
    """Per-bin calibration summary.

    Attributes
    ----------
    edges : ndarray, shape (n_bins + 1,)
    count : ndarray of int, shape (n_bins,)
        Rows in each bin (for a distributed curve: only from the sites that released it).
    mean_predicted : ndarray, shape (n_bins,)
        Mean predicted probability per bin; NaN for an empty or suppressed bin.
    observed_fraction : ndarray, shape (n_bins,)
        Fraction of positives per bin; NaN for an empty or suppressed bin.
    suppressed : ndarray of bool, shape (n_bins,)
        True where at least one site withheld the bin (distributed curve only).
    """

    edges: FloatArray
    count: NDArray[np.int64]
    mean_predicted: FloatArray
    observed_fraction: FloatArray
    suppressed: NDArray[np.bool_]

    @classmethod
    def from_sums(
        cls,
        edges: FloatArray,
        count: ArrayLike,
        sum_predicted: ArrayLike,
        sum_observed: ArrayLike,
        suppressed: ArrayLike | None = None,
    ) -> CalibrationCurve:
        n = np.asarray(count, dtype=np.int64)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_predicted = np.where(n > 0, np.asarray(sum_predicted) / n, np.nan)
            observed = np.where(n > 0, np.asarray(sum_observed) / n, np.nan)
        sup = np.zeros(n.shape, bool) if suppressed is None else np.asarray(suppressed, bool)
        return cls(edges, n, mean_predicted, observed, sup)

    @property
    def n_bins(self) -> int:
        return int(self.count.size)

    def summary(self) -> str:
        rows = []
        for k in range(self.n_bins):
            lo, hi = self.edges[k], self.edges[k + 1]
            close = "]" if k == self.n_bins - 1 else ")"
            label = f"[{lo:.2f}, {hi:.2f}{close}"
            note = " (suppressed at >= 1 site)" if self.suppressed[k] else ""
            rows.append(
                (
                    label,
                    f"n={int(self.count[k]):>6}  predicted={self.mean_predicted[k]:.3f}  "
                    f"observed={self.observed_fraction[k]:.3f}{note}",
                )
            )
        return format_table(rows, title="Calibration curve")


def calibration_curve(
    y_true: ArrayLike, y_prob: ArrayLike, *, n_bins: int = 10, pos_label: object = None
) -> CalibrationCurve:
    """Calibration curve over ``n_bins`` equal-width bins on [0, 1].

    Per bin: count, mean predicted probability and observed fraction of positives (paper 1,
    section 4.1). Empty bins have NaN means.
    """
    y, p = check_binary(y_true, y_prob, pos_label=pos_label, name_score="y_prob")
    check_probabilities(p)
    idx = bin_index(p, n_bins)
    count = np.bincount(idx, minlength=n_bins)
    sum_pred = np.bincount(idx, weights=p, minlength=n_bins)
    sum_obs = np.bincount(idx, weights=y.astype(np.float64), minlength=n_bins)
    return CalibrationCurve.from_sums(bin_edges(n_bins), count, sum_pred, sum_obs)
