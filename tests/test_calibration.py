"""Brier score and calibration curve against scikit-learn and the bin definition."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.calibration import calibration_curve as sk_calibration_curve
from sklearn.metrics import brier_score_loss

from fedroc import metrics as fm
from fedroc.exceptions import InputError


def _between_decimal_and_grid_edges(p: np.ndarray, n_bins: int) -> np.ndarray:
    """Which of ``p`` lie between an edge ``k / n_bins`` and fedroc's (on the 1/4096 grid)."""
    decimal, grid = np.linspace(0, 1, n_bins + 1), fm.bin_edges(n_bins)
    lo, hi = np.minimum(decimal, grid), np.maximum(decimal, grid)
    return ((p[:, None] >= lo - 1e-9) & (p[:, None] <= hi + 1e-9)).any(axis=1)


def test_brier_equals_sklearn(rng):
    y = rng.integers(0, 2, 500)
    p = rng.random(500)
    assert fm.brier_score(y, p) == pytest.approx(brier_score_loss(y, p), abs=1e-15)
    with pytest.raises(InputError, match=r"y_prob must lie in \[0, 1\].*index 1: 1.5"):
        fm.brier_score([0, 1], [0.2, 1.5])


def test_calibration_equals_sklearn_off_the_edges(rng):
    y = rng.integers(0, 2, 2000)
    p = rng.random(2000)
    p = p[np.abs(p * 10 - np.round(p * 10)) > 1e-9]  # sklearn puts edge values in the lower bin
    # fedroc's edges are k/10 rounded to the nearest 1/4096 (bin_edges, R31): sklearn's k/10
    # bin the scores between the two otherwise.
    p = p[~_between_decimal_and_grid_edges(p, 10)]
    y = y[: p.size]
    curve = fm.calibration_curve(y, p, n_bins=10)
    prob_true, prob_pred = sk_calibration_curve(y, p, n_bins=10, strategy="uniform")
    nonempty = curve.count > 0
    np.testing.assert_allclose(curve.observed_fraction[nonempty], prob_true, atol=1e-12)
    np.testing.assert_allclose(curve.mean_predicted[nonempty], prob_pred, atol=1e-12)


def test_bins_include_zero_and_one_and_are_left_closed():
    p = np.array([0.0, 0.1, 0.2, 0.25, 0.999, 1.0])
    y = np.array([0, 1, 0, 1, 1, 1])
    curve = fm.calibration_curve(y, p, n_bins=5)
    # Edges 0, .2, .4, .6, .8, 1: [0, .2) holds 0.0 and 0.1; .2 opens the second bin;
    # the last bin is closed and holds 1.0.
    np.testing.assert_array_equal(curve.count, [2, 2, 0, 0, 2])
    assert curve.count.sum() == p.size
    assert np.isnan(curve.mean_predicted[2]) and np.isnan(curve.observed_fraction[3])
    np.testing.assert_allclose(curve.mean_predicted[[0, 1, 4]], [0.05, 0.225, 0.9995])
    np.testing.assert_allclose(curve.observed_fraction[[0, 1, 4]], [0.5, 0.5, 1.0])
    # Every score sits in the bin whose edges bracket it, for many bin counts.
    q = np.linspace(0, 1, 1001)
    for n_bins in (1, 3, 7, 10, 64):
        idx = fm.bin_index(q, n_bins)
        edges = fm.bin_edges(n_bins)
        assert np.all(edges[idx] <= q)
        assert np.all((q < edges[idx + 1]) | (idx == n_bins - 1))
    with pytest.raises(InputError, match="n_bins"):
        fm.bin_edges(0)
