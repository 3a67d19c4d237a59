"""The counting core (ScoreCounts) and one contract over every curve and metric function.

As scikit-learn's test_ranking.py does, one parametrised contract runs over every curve /
metric function of fedroc.metrics: equal to a slow, obviously correct version (pairs,
masks; tests/_ranking_brute.py) on random data with ties and weights, equal to
scikit-learn where it has the function (to 1e-12), a warning and NaN with one class only,
integer weights equal to repeated rows, and counts that add up across any split of the
rows into sites (a hypothesis property).
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import _ranking_brute as brute
import numpy as np
import pytest
from conftest import tied_data
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm
from sklearn.calibration import calibration_curve as sk_calibration_curve
from statsmodels.stats.proportion import proportion_confint

from fedroc import metrics as fm
from fedroc.exceptions import InputError, UndefinedMetricWarning
from fedroc.metrics import ScoreCounts

Out = tuple[Any, ...]


def as_tuple(value: Any) -> Out:
    if isinstance(value, fm.DeLongResult):
        return (value.auc, value.variance)
    if isinstance(value, fm.OperatingPoint):
        return (value.threshold, value.sensitivity, value.specificity, value.ppv, value.npv)
    if isinstance(value, fm.CalibrationCurve):
        return (value.count, value.mean_predicted, value.observed_fraction)
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def assert_same(got: Out, want: Out, atol: float = 1e-12, rtol: float = 0.0) -> None:
    got, want = as_tuple(got), as_tuple(want)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g, dtype=float), np.asarray(w, dtype=float)
        assert g.shape == w.shape, (g, w)
        np.testing.assert_allclose(g, w, atol=atol, rtol=rtol, equal_nan=True)


def _pr_brute(y, s, w):
    prec, rec = brute.pr_points(y, s, w)
    keep = np.asarray(w if w is not None else np.ones(len(y))) != 0
    thr = np.array(sorted(set(s[keep].tolist())))
    return np.r_[prec[::-1], 1.0], np.r_[rec[::-1], 0.0], thr


def _op(y, s, w, rule, target=None):
    p = rule(y, s, target, w) if target is not None else rule(y, s, w)
    tp, fp, tn, fn = brute.table(y, s, p[0], w)
    ppv = tp / (tp + fp) if tp + fp > 0 else np.nan
    npv = tn / (tn + fn) if tn + fn > 0 else np.nan
    return (p[0], p[1], p[2], ppv, npv)


def _between_decimal_and_grid_edges(p: np.ndarray, n_bins: int) -> np.ndarray:
    """Which of ``p`` lie between an edge ``k / n_bins`` and fedroc's (on the 1/4096 grid)."""
    decimal, grid = np.linspace(0, 1, n_bins + 1), fm.bin_edges(n_bins)
    lo, hi = np.minimum(decimal, grid), np.maximum(decimal, grid)
    return ((p[:, None] >= lo - 1e-9) & (p[:, None] <= hi + 1e-9)).any(axis=1)


@dataclass(frozen=True)
class Contract:
    """One curve / metric function, its slow reference, and the same metric from counts."""

    name: str
    fast: Callable[[Any, Any, Any], Any]
    brute: Callable[[Any, Any, Any], Any]
    from_counts: Callable[[ScoreCounts], Any]
    sklearn: Callable[[Any, Any, Any], Any] | None = None
    weights: bool = True
    undefined: str = "either"  # which missing class makes it warn: either / positives / never
    nan: bool = True  # undefined gives NaN (the PR curve sets recall to 1, as scikit-learn)


MAX_FPRS = (0.05, 0.3, 1.0)
CONTRACTS = [
    Contract(
        "roc_curve",
        lambda y, s, w: fm.roc_curve(y, s, sample_weight=w, drop_intermediate=False),
        brute.roc_points,
        lambda c: c.roc(drop_intermediate=False),
        lambda y, s, w: skm.roc_curve(y, s, sample_weight=w, drop_intermediate=False),
    ),
    Contract(
        "roc_curve(drop_intermediate)",
        lambda y, s, w: fm.roc_curve(y, s, sample_weight=w),
        # The brute-force curve minus the points between two equal steps.
        lambda y, s, w: _drop_collinear(*brute.roc_points(y, s, w)),
        lambda c: c.roc(),
        lambda y, s, w: skm.roc_curve(y, s, sample_weight=w),
    ),
    Contract(
        "precision_recall_curve",
        lambda y, s, w: fm.precision_recall_curve(y, s, sample_weight=w),
        _pr_brute,
        lambda c: c.pr(),
        lambda y, s, w: skm.precision_recall_curve(y, s, sample_weight=w),
        undefined="positives",
        nan=False,
    ),
    Contract(
        "roc_auc",
        lambda y, s, w: fm.roc_auc(y, s, sample_weight=w),
        brute.auc,
        lambda c: c.auc(),
        lambda y, s, w: skm.roc_auc_score(y, s, sample_weight=w),
    ),
    *[
        Contract(
            f"partial_auc(max_fpr={f})",
            lambda y, s, w, f=f: fm.partial_auc(y, s, max_fpr=f, sample_weight=w),
            lambda y, s, w, f=f: brute.partial_auc(y, s, f, w),
            lambda c, f=f: c.auc(max_fpr=f),
            lambda y, s, w, f=f: skm.roc_auc_score(y, s, sample_weight=w, max_fpr=f),
        )
        for f in MAX_FPRS
    ],
    Contract(
        "average_precision",
        lambda y, s, w: fm.average_precision(y, s, sample_weight=w),
        brute.average_precision,
        lambda c: c.average_precision(),
        lambda y, s, w: skm.average_precision_score(y, s, sample_weight=w),
        undefined="positives",
    ),
    Contract(
        "pr_auc",
        lambda y, s, w: fm.pr_auc(y, s, sample_weight=w),
        brute.pr_auc,
        lambda c: c.pr_auc(),
        lambda y, s, w: skm.auc(*skm.precision_recall_curve(y, s, sample_weight=w)[1::-1]),
        undefined="positives",
    ),
    Contract(
        "delong",
        lambda y, s, w: fm.delong(y, s, sample_weight=w),
        brute.delong,
        lambda c: c.delong(),
    ),
    Contract(
        "clf_curve_counts",
        lambda y, s, w: fm.clf_curve_counts(np.asarray(y, bool), s),
        lambda y, s, w: _cum_counts_brute(y, s),
        lambda c: (c.fps, c.tps, c.thresholds),
        weights=False,
        undefined="never",
    ),
    Contract(
        "sensitivity_at_specificity",
        lambda y, s, w: fm.sensitivity_at_specificity(y, s, 0.7, sample_weight=w),
        lambda y, s, w: _op(y, s, w, brute.sensitivity_at_specificity, 0.7),
        lambda c: c.at_specificity(0.7),
    ),
    Contract(
        "specificity_at_sensitivity",
        lambda y, s, w: fm.specificity_at_sensitivity(y, s, 0.6, sample_weight=w),
        lambda y, s, w: _op(y, s, w, brute.specificity_at_sensitivity, 0.6),
        lambda c: c.at_sensitivity(0.6),
    ),
    Contract(
        "youden_threshold",
        lambda y, s, w: fm.youden_threshold(y, s, sample_weight=w),
        lambda y, s, w: _op(y, s, w, brute.youden),
        lambda c: c.youden(),
    ),
    Contract(
        "operating_point",
        lambda y, s, w: fm.operating_point(y, s, 0.1, sample_weight=w),
        lambda y, s, w: _op(y, s, w, lambda y, s, w: (0.1, *_rates(y, s, 0.1, w))),
        lambda c: c.operating_point(0.1),
        undefined="never",
    ),
]
IDS = [c.name for c in CONTRACTS]


def _rates(y, s, t, w):
    tp, fp, tn, fn = brute.table(y, s, t, w)
    return tp / (tp + fn), tn / (tn + fp)


def _cum_counts_brute(y, s):
    y = np.asarray(y, bool)
    thr = np.array(sorted(set(s.tolist()), reverse=True))
    return (
        np.array([np.sum((s >= t) & ~y) for t in thr]),
        np.array([np.sum((s >= t) & y) for t in thr]),
        thr,
    )


def _drop_collinear(fpr, tpr, thr):
    # scikit-learn's rule: keep the first and last threshold and every point whose step in
    # (fpr, tpr) differs from the next one; point 0 is the (0, 0) start added afterwards.
    keep = [0, 1]
    for i in range(2, len(fpr) - 1):
        dx0, dy0 = fpr[i] - fpr[i - 1], tpr[i] - tpr[i - 1]
        dx1, dy1 = fpr[i + 1] - fpr[i], tpr[i + 1] - tpr[i]
        if not (math.isclose(dx0, dx1, abs_tol=1e-12) and math.isclose(dy0, dy1, abs_tol=1e-12)):
            keep.append(i)
    keep = sorted({*keep, len(fpr) - 1})
    return fpr[keep], tpr[keep], thr[keep]


def weights_for(rng, n, kind):
    if kind is None:
        return None
    if kind == "integer":
        return rng.integers(0, 4, n).astype(float)  # zeros included
    return rng.exponential(size=n)


CASES = [(n, levels) for n in (2, 7, 40, 150) for levels in (1, 3, None)]


@pytest.mark.parametrize("contract", CONTRACTS, ids=IDS)
@pytest.mark.parametrize("weight_kind", [None, "integer", "continuous"])
def test_equals_brute_force_and_sklearn(contract, weight_kind):
    if weight_kind and not contract.weights:
        pytest.skip("no sample_weight")
    rng = np.random.default_rng(zlib.crc32(f"{contract.name}/{weight_kind}".encode()))
    checked = 0
    for n, levels in CASES:
        for _ in range(3):
            y, s = tied_data(rng, n, levels)
            w = weights_for(rng, n, weight_kind)
            if w is not None and (w[y == 1].sum() == 0 or w[y == 0].sum() == 0):
                continue
            with warnings.catch_warnings():
                # Fewer than 2 rows of a class: DeLong's variance is NaN with a warning.
                warnings.simplefilter("ignore", UndefinedMetricWarning)
                got = contract.fast(y, s, w)
                if isinstance(got, float | np.floating):
                    assert type(got) is float  # a Python float, as the functions promise
                assert_same(got, contract.brute(y, s, w), atol=1e-12, rtol=1e-10)
                if contract.sklearn is not None:
                    assert_same(got, contract.sklearn(y, s, w), atol=1e-12)
            checked += 1
    assert checked > 20


@pytest.mark.parametrize("contract", CONTRACTS, ids=IDS)
def test_one_class_warns_and_gives_nan(contract):
    if contract.undefined == "never":
        pytest.skip("defined with one class")
    s = np.array([0.3, 0.1, 0.3, 0.8])
    missing = [np.zeros(4, int)] + ([np.ones(4, int)] if contract.undefined == "either" else [])
    for y in missing:
        with pytest.warns(UndefinedMetricWarning):
            out = as_tuple(contract.fast(y, s, None))
        assert contract.nan == any(np.isnan(np.asarray(v, dtype=float)).any() for v in out), out
        if contract.sklearn is not None and contract.undefined == "either":
            with pytest.warns(skm._ranking.UndefinedMetricWarning):
                want = contract.sklearn(y, s, None)
            assert_same(out, want)


@pytest.mark.parametrize("contract", [c for c in CONTRACTS if c.weights], ids=lambda c: c.name)
def test_integer_weights_repeat_rows(contract):
    rng = np.random.default_rng(3)
    for _ in range(10):
        y, s = tied_data(rng, 30, 3)
        w = rng.integers(0, 4, 30)
        if w[y == 1].sum() < 2 or w[y == 0].sum() < 2:
            continue
        assert_same(
            contract.fast(y, s, w.astype(float)),
            contract.fast(np.repeat(y, w), np.repeat(s, w), None),
            atol=1e-12,
        )


@pytest.mark.filterwarnings("ignore::fedroc.exceptions.UndefinedMetricWarning")
@pytest.mark.parametrize("contract", CONTRACTS, ids=IDS)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_counts_add_across_any_split(contract, data):
    n = data.draw(st.integers(2, 30), label="n")
    y = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n), label="y"))
    s = np.array(data.draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), float) / 2
    w = np.array(data.draw(st.lists(st.integers(1, 3), min_size=n, max_size=n), label="w"), float)
    site = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n), label="site"))
    if not contract.weights:
        w = np.ones(n)
    shared = np.unique(s)  # every site counts at the same thresholds
    parts = [
        ScoreCounts.from_scores(
            y[site == k], s[site == k], thresholds=shared, sample_weight=w[site == k]
        )
        for k in np.unique(site)
    ]
    total = sum(parts)
    pooled = ScoreCounts.from_scores(y, s, thresholds=shared, sample_weight=w)
    np.testing.assert_array_equal(total.pos, pooled.pos)
    np.testing.assert_array_equal(total.neg, pooled.neg)
    np.testing.assert_array_equal(total.thresholds, pooled.thresholds)
    # The metric of the summed counts is the metric of the pooled rows.
    want = contract.fast(y, s, w if contract.weights else None)
    assert_same(contract.from_counts(total), want, atol=1e-12)


# -- the representation itself ---------------------------------------------------------------
def test_exact_counts_equal_sklearn_confusion_matrix_at_thresholds(rng):
    # scikit-learn's public form of _binary_clf_curve (1.8+).
    for levels in (1, 4, None):
        y, s = tied_data(rng, 500, levels)
        w = rng.exponential(size=500)
        for weight in (None, w):
            c = ScoreCounts.from_scores(y, s, sample_weight=weight)
            tns, fps, fns, tps, thr = skm.confusion_matrix_at_thresholds(y, s, sample_weight=weight)
            np.testing.assert_allclose(c.fps, fps, rtol=1e-12)
            np.testing.assert_allclose(c.tps, tps, rtol=1e-12)
            np.testing.assert_array_equal(c.thresholds, thr)
            op = c.operating_point(thr[len(thr) // 2])
            i = len(thr) // 2
            assert (op.tp, op.fp, op.tn, op.fn) == pytest.approx(
                (tps[i], fps[i], tns[i], fns[i]), rel=1e-12, abs=1e-12
            )


@pytest.mark.parametrize("levels", [2, 40, None])
def test_both_merge_paths_count_the_same(levels):
    # Heavy ties merge the classes' distinct values, few ties their rows: the counts agree
    # with the argsort path that weighted counts take (weights of 1).
    from fedroc.metrics import _counts

    rng = np.random.default_rng(levels or 0)
    y, s = tied_data(rng, 5000, levels)
    assert _counts._heavy_ties(np.sort(s[y == 0])) == (levels is not None)
    fast = ScoreCounts.from_scores(y, s)
    ref = ScoreCounts.from_scores(y, s, sample_weight=np.ones(s.size))
    np.testing.assert_array_equal(fast.thresholds, ref.thresholds)
    np.testing.assert_array_equal(fast.pos, ref.pos)
    np.testing.assert_array_equal(fast.neg, ref.neg)


def test_shared_thresholds_are_the_binning_rule(rng):
    s = np.r_[rng.random(200), 0.0, 1.0, 0.5, 0.25]
    y = rng.integers(0, 2, s.size)
    edges = fm.bin_edges(4)
    c = ScoreCounts.from_scores(y, s, thresholds=edges[:-1])
    bins = fm.bin_index(s, 4)
    # Level i (decreasing) is bin n_bins - 1 - i.
    np.testing.assert_array_equal(c.pos[::-1], np.bincount(bins[y == 1], minlength=4))
    np.testing.assert_array_equal(c.neg[::-1], np.bincount(bins[y == 0], minlength=4))
    np.testing.assert_allclose(c.score_sum[::-1], np.bincount(bins, weights=s, minlength=4))
    # Every level's rows lie in [threshold, previous threshold).
    lvl = c.level_of(s)
    assert (s >= c.thresholds[lvl]).all()
    assert ((lvl == 0) | (s < c.thresholds[np.maximum(lvl - 1, 0)])).all()


def test_binned_metrics_are_those_of_the_bin_index(rng):
    y, s = tied_data(rng, 400, None)
    s = np.clip(s, -3.9, 3.9)
    edges = np.linspace(-4, 4, 17)
    c = ScoreCounts.from_scores(y, s, thresholds=edges[:-1])
    b = np.minimum(np.searchsorted(edges, s, "right") - 1, 15).astype(float)
    assert c.auc() == pytest.approx(skm.roc_auc_score(y, b), abs=1e-12)
    assert c.average_precision() == pytest.approx(skm.average_precision_score(y, b), abs=1e-12)
    d = c.delong()
    assert (d.auc, d.variance) == pytest.approx(brute.delong(y, b), rel=1e-10)
    # from_bins is the same representation built from the released histograms.
    h = ScoreCounts.from_bins(c.pos[::-1], c.neg[::-1], edges=edges)
    assert h.auc() == c.auc() and h.delong().variance == pytest.approx(d.variance, rel=1e-12)


def test_placements_and_beaten_counts_equal_pairs(rng):
    for levels in (2, None):
        y, s = tied_data(rng, 120, levels)
        yb = y.astype(bool)
        c = ScoreCounts.from_scores(y, s)
        v10, v01 = c.placements_at(yb, s)
        k = brute.kernel(s[yb], s[~yb])
        np.testing.assert_allclose(v10, k.mean(axis=1), atol=1e-12)
        np.testing.assert_allclose(v01, k.mean(axis=0), atol=1e-12)
        g = rng.integers(0, 7, y.size)
        rank = np.unique(s, return_inverse=True)[1].reshape(-1)
        np.testing.assert_array_equal(fm.beaten_counts(yb, rank, g), brute.grouped_beats(y, s, g))
        np.testing.assert_array_equal(
            fm.beaten_counts(yb, s), brute.grouped_beats(y, s, np.zeros(y.size))
        )
    assert fm.beaten_counts(np.zeros(0, bool), np.zeros(0)).size == 0


def test_placement_of_any_value_equals_pairs(rng):
    y, s = tied_data(rng, 90, 4)
    yb = y.astype(bool)
    c = ScoreCounts.from_scores(y, s)
    x = np.r_[s[:30], rng.normal(size=30), s.min() - 1, s.max() + 1]  # counted or not
    v10, v01 = c.placement_of(x)
    np.testing.assert_allclose(v10, brute.kernel(x, s[~yb]).mean(axis=1), atol=1e-12)
    np.testing.assert_allclose(v01, 1 - brute.kernel(x, s[yb]).mean(axis=1), atol=1e-12)
    pos_below, pos_at, neg_below, neg_at = c.below_and_at(x)
    for got, cls, cmp in [
        (pos_below, s[yb], np.less),
        (pos_at, s[yb], np.equal),
        (neg_below, s[~yb], np.less),
        (neg_at, s[~yb], np.equal),
    ]:
        np.testing.assert_array_equal(got, cmp(cls[None, :], x[:, None]).sum(axis=1))


def test_mann_whitney_and_tied_pairs_by_hand():
    # Positives 0.9, 0.5; negatives 0.5, 0.1: 3 pairs won, one tie.
    c = ScoreCounts.from_scores([1, 1, 0, 0], [0.9, 0.5, 0.5, 0.1])
    assert c.mann_whitney() == 3.5
    assert c.tied_pairs() == 1.0
    assert c.auc() == 3.5 / 4


def test_validation_names_the_problem():
    with pytest.raises(InputError, match="same thresholds"):
        ScoreCounts.from_scores([0, 1], [0.1, 0.2], thresholds=[0, 0.5]) + ScoreCounts.from_scores(
            [0, 1], [0.1, 0.2], thresholds=[0, 0.4]
        )
    with pytest.raises(InputError, match=r"1 score\(s\) lie below the smallest threshold 0.2 "):
        ScoreCounts.from_scores([0, 1], [0.1, 0.3], thresholds=[0.2])
    with pytest.raises(InputError, match="distinct"):
        ScoreCounts.from_scores([0, 1], [0.1, 0.3], thresholds=[0.0, 0.0])
    with pytest.raises(InputError, match=r"sample_weight must be finite and non-negative.*-1.0"):
        fm.roc_auc([0, 1], [0.1, 0.3], sample_weight=[1, -1])
    with pytest.raises(InputError, match=r"sample_weight must be one-dimensional.*\(2\)"):
        fm.roc_auc([0, 1], [0.1, 0.3], sample_weight=[1, 1, 1])
    with pytest.raises(InputError, match="strictly decreasing"):
        ScoreCounts([0.1, 0.2], [1, 1], [1, 1])
    with pytest.raises(InputError, match="non-negative"):
        ScoreCounts([0.2, 0.1], [1, -1], [1, 1])
    with pytest.raises(InputError, match=r"max_fpr must lie in \(0, 1\]; got 0"):
        fm.partial_auc([0, 1], [0.1, 0.3], max_fpr=0)
    with pytest.raises(InputError, match="specificity must lie in"):
        fm.sensitivity_at_specificity([0, 1], [0.1, 0.3], 1.2)
    with pytest.raises(InputError, match="no score sums"):
        ScoreCounts.from_bins([1, 2], [2, 1], edges=[0, 0.5, 1]).calibration(2)
    with pytest.raises(InputError, match="whole"):
        ScoreCounts.from_scores([0, 1], [0.1, 0.3], sample_weight=[0.5, 1]).bootstrap_auc(10)


# -- partial AUC, weights ------------------------------------------------------------------------
def test_partial_auc_equals_sklearn_at_every_cut(rng):
    # max_fpr exactly on curve points, between them, and tiny: scikit-learn to 1e-12.
    y, s = tied_data(rng, 300, 5)
    fpr, _, _ = skm.roc_curve(y, s)
    for f in [*fpr[1:-1], *np.linspace(0.001, 1, 37)]:
        want = skm.roc_auc_score(y, s, max_fpr=f)
        assert fm.partial_auc(y, s, max_fpr=f) == pytest.approx(want, abs=1e-12)
        assert fm.roc_auc(y, s, max_fpr=f) == pytest.approx(want, abs=1e-12)
    assert fm.partial_auc(y, s, max_fpr=1) == fm.roc_auc(y, s)


def test_brier_weights_equal_sklearn(rng):
    y = rng.integers(0, 2, 300)
    p = rng.random(300)
    w = rng.exponential(size=300)
    assert fm.brier_score(y, p, sample_weight=w) == pytest.approx(
        skm.brier_score_loss(y, p, sample_weight=w), abs=1e-15
    )


def test_calibration_from_counts_adds_across_sites_and_equals_sklearn(rng):
    y = rng.integers(0, 2, 3000)
    p = rng.random(3000)
    p = p[np.abs(p * 10 - np.round(p * 10)) > 1e-9]  # sklearn puts edge values in the lower bin
    # fedroc's edges are k/10 rounded to the nearest 1/4096 (bin_edges, R31): sklearn's k/10
    # bin the scores between the two otherwise.
    p = p[~_between_decimal_and_grid_edges(p, 10)]
    y = y[: p.size]
    site = rng.integers(0, 3, p.size)
    edges = fm.bin_edges(10)[:-1]
    total = sum(
        ScoreCounts.from_scores(y[site == k], p[site == k], thresholds=edges) for k in range(3)
    )
    curve = total.calibration(10)
    assert_same(curve, brute.calibration(y, p, 10), atol=1e-12)
    assert_same(curve, fm.calibration_curve(y, p, n_bins=10), atol=1e-12)
    # Exact counts (one level per distinct probability) give the same curve.
    assert_same(ScoreCounts.from_scores(y, p).calibration(10), curve, atol=1e-12)
    prob_true, prob_pred = sk_calibration_curve(y, p, n_bins=10)
    np.testing.assert_allclose(curve.observed_fraction, prob_true, atol=1e-12)
    np.testing.assert_allclose(curve.mean_predicted, prob_pred, atol=1e-12)


# -- operating points and their intervals --------------------------------------------------------
@pytest.mark.parametrize("method", ["wilson", "clopper-pearson"])
def test_proportion_intervals_equal_statsmodels(method):
    sm = {"wilson": "wilson", "clopper-pearson": "beta"}[method]
    for k, n in [(0, 10), (1, 10), (5, 10), (10, 10), (37, 120), (0, 1), (1, 1)]:
        for level in (0.8, 0.95, 0.99):
            got = fm.proportion_ci(k, n, level, method)
            want = proportion_confint(k, n, alpha=1 - level, method=sm)
            assert got == pytest.approx(want, abs=1e-10)
    assert all(math.isnan(v) for v in fm.proportion_ci(0, 0))


def test_operating_point_intervals_use_the_right_counts(rng):
    y, s = tied_data(rng, 200, None)
    op = fm.sensitivity_at_specificity(y, s, 0.8)
    assert op.specificity >= 0.8
    tp, fp, tn, fn = brute.table(y, s, op.threshold)
    assert (op.tp, op.fp, op.tn, op.fn) == (tp, fp, tn, fn)
    for what, (k, n) in {
        "sensitivity": (tp, tp + fn),
        "specificity": (tn, tn + fp),
        "ppv": (tp, tp + fp),
        "npv": (tn, tn + fn),
    }.items():
        want = proportion_confint(k, n, alpha=0.1, method="wilson")
        assert op.confidence_interval(what, 0.9) == pytest.approx(want, abs=1e-10)
    d = op.to_dict()
    assert d["sensitivity"] == op.sensitivity and d["threshold"] == op.threshold
    assert "ppv" in op.summary()
    with pytest.raises(InputError, match="whole counts"):
        fm.operating_point(y, s, 0.0, sample_weight=np.full(y.size, 0.5)).confidence_interval()


def test_operating_point_rules_by_hand():
    y = [0, 0, 0, 0, 1, 1, 1, 1]
    s = [0.1, 0.2, 0.3, 0.6, 0.4, 0.5, 0.7, 0.9]
    # Cuts (sens, spec): 0.9 -> (1/4, 1), 0.7 -> (1/2, 1), 0.6 -> (1/2, 3/4),
    # 0.5 -> (3/4, 3/4), 0.4 -> (1, 3/4), 0.3 -> (1, 1/2), ...
    op = fm.sensitivity_at_specificity(y, s, 1.0)
    assert (op.threshold, op.sensitivity, op.specificity) == (0.7, 0.5, 1.0)
    op = fm.specificity_at_sensitivity(y, s, 0.75)
    assert (op.threshold, op.sensitivity, op.specificity) == (0.4, 1.0, 0.75)
    op = fm.youden_threshold(y, s)
    assert (op.threshold, op.youden_j) == (0.4, 0.75)
    # No constraint: the best sensitivity (1) at its best specificity, and vice versa.
    assert fm.sensitivity_at_specificity(y, s, 0.0).threshold == 0.4
    assert fm.specificity_at_sensitivity(y, s, 0.0).threshold == 0.7


# -- bootstrap ---------------------------------------------------------------------------------
def test_bootstrap_is_seeded_and_equals_a_row_bootstrap_in_distribution():
    rng = np.random.default_rng(5)
    y, s = tied_data(rng, 80, 6)
    a = fm.auc_ci(y, s, ci_method="bootstrap", n_bootstraps=4000, seed=11)
    b = fm.auc_ci(y, s, ci_method="bootstrap", n_bootstraps=4000, seed=11)
    np.testing.assert_array_equal(a.replicates, b.replicates)
    assert a.auc == fm.roc_auc(y, s)
    # The obvious bootstrap: resample rows of each class, recompute the AUC by pairs.
    pos, neg = s[y == 1], s[y == 0]
    g = np.random.default_rng(99)
    reps = np.array(
        [
            brute.auc(
                np.r_[np.ones(pos.size), np.zeros(neg.size)],
                np.r_[g.choice(pos, pos.size), g.choice(neg, neg.size)],
            )
            for _ in range(4000)
        ]
    )
    # Two independent Monte-Carlo estimates: mean and SD agree within 4 standard errors.
    # Two independent Monte-Carlo estimates of B = 4000 draws each: means differ by about
    # sd sqrt(2 / B), SDs by about sd / sqrt(B), 2.5% quantiles by about 0.003 here.
    sd = reps.std(ddof=1)
    assert a.replicates.mean() == pytest.approx(reps.mean(), abs=4 * sd * math.sqrt(2 / 4000))
    assert a.se == pytest.approx(sd, abs=5 * sd / math.sqrt(4000))
    lo, hi = a.confidence_interval()
    assert lo < a.auc < hi
    assert lo == pytest.approx(np.quantile(reps, 0.025), abs=0.015)
    assert hi == pytest.approx(np.quantile(reps, 0.975), abs=0.015)
    with pytest.raises(InputError, match="ci_method"):
        fm.auc_ci(y, s, ci_method="jackknife")


def test_bootstrap_draw_paths_agree():
    # Few levels (multinomial over levels) and many levels (row draws, then counts) are two
    # ways of one draw: on the same counts both give the same distribution.
    from fedroc.metrics import _counts

    counts = np.array([3.0, 0.0, 5.0, 1.0, 0.0, 7.0, 4.0])
    total = int(counts.sum())
    a = _counts._resample_levels(counts, total, 20000, np.random.default_rng(1))
    b = _counts._resample_rows(counts, total, 20000, np.random.default_rng(2))
    assert (a.sum(axis=1) == total).all() and (b.sum(axis=1) == total).all()
    p = counts / total
    se = np.sqrt(total * p * (1 - p) / 20000)  # of a mean count per level
    for draws in (a, b):
        assert np.all(np.abs(draws.mean(axis=0) - total * p) <= 5 * se + 1e-12)
        np.testing.assert_allclose(draws.var(axis=0), total * p * (1 - p), rtol=0.05, atol=1e-12)


def test_bootstrap_ci_of_a_chosen_threshold_equals_a_row_bootstrap():
    # The obvious version: resample rows of each class, choose the cut by the brute-force
    # rule, keep its sensitivity (specificity). Percentiles agree within Monte-Carlo error.
    rng = np.random.default_rng(21)
    y, s = tied_data(rng, 70, 5)
    c = ScoreCounts.from_scores(y, s)
    pos, neg = s[y == 1], s[y == 0]
    g = np.random.default_rng(5)
    sens, spec = [], []
    for _ in range(2000):
        yy = np.r_[np.ones(pos.size, int), np.zeros(neg.size, int)]
        ss = np.r_[g.choice(pos, pos.size), g.choice(neg, neg.size)]
        sens.append(brute.sensitivity_at_specificity(yy, ss, 0.8)[1])
        spec.append(brute.specificity_at_sensitivity(yy, ss, 0.7)[2])
    got_se = c.sensitivity_at_specificity_ci(0.8, n_bootstraps=4000, seed=3)
    got_sp = c.specificity_at_sensitivity_ci(0.7, n_bootstraps=4000, seed=4)
    # Values move on a grid of 1/n_pos (1/n_neg); allow two steps of Monte-Carlo slack.
    assert got_se == pytest.approx(np.quantile(sens, [0.025, 0.975]), abs=2 / pos.size)
    assert got_sp == pytest.approx(np.quantile(spec, [0.025, 0.975]), abs=2 / neg.size)
    point = c.at_specificity(0.8).sensitivity
    assert got_se[0] <= point <= got_se[1]
    assert c.sensitivity_at_specificity_ci(0.8, n_bootstraps=500, seed=3) == (
        c.sensitivity_at_specificity_ci(0.8, n_bootstraps=500, seed=3)
    )


# -- paired comparison -------------------------------------------------------------------------
def test_placement_sums_add_across_sites_to_the_paired_delong(rng):
    n = 400
    y = rng.integers(0, 2, n).astype(bool)
    a = np.round(rng.normal(size=n) + 0.9 * y, 1)
    b = np.round(a + rng.normal(scale=0.8, size=n), 1)
    site = rng.integers(0, 3, n)
    shared = np.unique(np.r_[a, b])
    # Round 1: counts at shared thresholds, summed. Round 2: each site's centred sums of its
    # rows' placement values against the pooled counts, summed.
    ca = sum(
        ScoreCounts.from_scores(y[site == k], a[site == k], thresholds=shared) for k in range(3)
    )
    cb = sum(
        ScoreCounts.from_scores(y[site == k], b[site == k], thresholds=shared) for k in range(3)
    )
    sums = sum(
        fm.PlacementSums.from_rows(y[site == k], [a[site == k], b[site == k]], [ca, cb])
        for k in range(3)
    )
    pooled = fm.delong_paired(y, a, b)
    np.testing.assert_allclose(sums.covariance(), pooled.covariance, rtol=1e-10)
    assert tuple(sums.auc) == pytest.approx((pooled.auc_a, pooled.auc_b), abs=1e-12)
    # The diagonal is each score's own DeLong variance.
    assert sums.covariance()[0, 0] == pytest.approx(fm.delong(y, a).variance, rel=1e-10)
