"""Pooled ranking metrics against scikit-learn and hand-worked examples."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from conftest import tied_data
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn import metrics as skm

from fedroc import metrics as fm
from fedroc.exceptions import InputError, UndefinedMetricWarning

CASES = [(n, levels) for n in (2, 3, 10, 57, 400) for levels in (1, 3, 7, None)]


@pytest.mark.parametrize(("n", "levels"), CASES)
def test_curves_and_areas_equal_sklearn(n, levels):
    rng = np.random.default_rng(n * 31 + (levels or 0))
    for _ in range(5):
        y, s = tied_data(rng, n, levels)
        assert fm.roc_auc(y, s) == pytest.approx(skm.roc_auc_score(y, s), abs=1e-12)
        for drop in (True, False):
            got = fm.roc_curve(y, s, drop_intermediate=drop)
            want = skm.roc_curve(y, s, drop_intermediate=drop)
            for g, w in zip(got, want, strict=True):
                np.testing.assert_allclose(g, w, rtol=0, atol=1e-12)
        p, r, t = fm.precision_recall_curve(y, s)
        sp, sr, st_ = skm.precision_recall_curve(y, s)
        np.testing.assert_allclose(p, sp, atol=1e-12)
        np.testing.assert_allclose(r, sr, atol=1e-12)
        np.testing.assert_allclose(t, st_, atol=0)
        assert fm.average_precision(y, s) == pytest.approx(
            skm.average_precision_score(y, s), abs=1e-12
        )
        assert fm.pr_auc(y, s) == pytest.approx(skm.auc(sr, sp), abs=1e-12)


def test_pr_auc_tie_aware_by_hand():
    # Scores 0.9 (pos), 0.5 (pos, neg tied), 0.1 (neg). Distinct-threshold points
    # (recall, precision): (0, 1) -> (1/2, 1) -> (1, 2/3) -> (1, 1/2).
    y = [1, 1, 0, 0]
    s = [0.9, 0.5, 0.5, 0.1]
    expected = 0.5 * 1.0 + 0.5 * (1.0 + 2 / 3) / 2
    assert fm.pr_auc(y, s) == pytest.approx(expected, abs=1e-15)
    # AP: steps at recall 1/2 (precision 1) and recall 1 (precision 2/3).
    assert fm.average_precision(y, s) == pytest.approx(0.5 + 0.5 * 2 / 3, abs=1e-15)


def test_roc_auc_mann_whitney_by_hand():
    # Pairs (pos, neg): 0.8>0.1, 0.8>0.4, 0.35>0.1, 0.35<0.4, and a tie counts one half.
    assert fm.roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == 0.75
    assert fm.roc_auc([0, 1], [0.5, 0.5]) == 0.5


def test_pos_label_and_label_types():
    y = np.array(["benign", "malignant", "malignant", "benign", "malignant"])
    s = np.array([0.2, 0.9, 0.4, 0.5, 0.7])
    yb = (y == "malignant").astype(int)
    assert fm.roc_auc(y, s, pos_label="malignant") == fm.roc_auc(yb, s)
    assert fm.roc_auc(yb * 2 - 1, s) == fm.roc_auc(yb, s)  # {-1, 1}
    assert fm.roc_auc(yb.astype(bool), s) == fm.roc_auc(yb, s)
    with pytest.raises(InputError, match="pos_label"):
        fm.roc_auc(y, s)
    with pytest.raises(InputError, match="pos_label='x' is not one of"):
        fm.roc_auc(y, s, pos_label="x")


@pytest.mark.parametrize(
    ("y", "s", "pattern"),
    [
        (
            [0, 1, 1],
            [0.1, np.nan, 0.3],
            r"y_score contains 1 NaN or infinite value\(s\); first at index 1",
        ),
        ([0, 1, 1], [0.1, np.inf, 0.3], r"index 1: inf"),
        ([0, 1, 2], [0.1, 0.2, 0.3], r"must be binary; found 3 distinct values: \[0, 1, 2\]"),
        ([0, 1, 1], [0.1, 0.2], r"y_true has 3 elements but y_score has 2"),
        ([], [], r"empty"),
        ([0, 1], ["a", "b"], r"y_score must be numeric"),
        ([0.0, np.nan], [0.1, 0.2], r"y_true contains NaN"),
        ([[0, 1], [1, 0]], [[0.1, 0.2], [0.3, 0.4]], r"one-dimensional"),
    ],
)
def test_bad_input_is_named(y, s, pattern):
    with pytest.raises(InputError, match=pattern):
        fm.roc_auc(y, s)


def test_one_class_warns_and_gives_nan():
    with pytest.warns(UndefinedMetricWarning, match="only negative samples"):
        assert np.isnan(fm.roc_auc([0, 0, 0], [0.1, 0.2, 0.3]))
    with pytest.warns(UndefinedMetricWarning):
        assert np.isnan(fm.average_precision([0, 0], [0.1, 0.2]))
    with pytest.warns(UndefinedMetricWarning):
        res = fm.delong([1, 1, 1], [0.1, 0.2, 0.3])
    assert np.isnan(res.auc) and np.isnan(res.se)


labels = arrays(np.int8, st.integers(2, 60), elements=st.integers(0, 1)).filter(
    lambda a: 0 < a.sum() < a.size
)


@pytest.mark.filterwarnings("ignore::fedroc.exceptions.UndefinedMetricWarning")
@settings(max_examples=150, deadline=None)
@given(data=st.data(), y=labels)
def test_monotone_transform_invariance_and_symmetry(data, y):
    s = data.draw(
        arrays(np.float64, y.size, elements=st.integers(-5, 5).map(float))
    )  # integer grid: many ties
    auc = fm.roc_auc(y, s)
    # A strictly increasing transform keeps the order and the ties.
    for transform in (np.exp, lambda v: 3 * v + 7, lambda v: v**3 + v):
        assert fm.roc_auc(y, transform(s)) == pytest.approx(auc, abs=1e-12)
        assert fm.delong(y, transform(s)).variance == pytest.approx(
            fm.delong(y, s).variance, abs=1e-12, nan_ok=True
        )
    # Swapping the classes mirrors the AUC.
    assert fm.roc_auc(1 - y, s) == pytest.approx(1.0 - auc, abs=1e-12)
    # Reversing the score mirrors it too.
    assert fm.roc_auc(y, -s) == pytest.approx(1.0 - auc, abs=1e-12)


@pytest.mark.parametrize(
    "metric",
    [
        fm.roc_curve,
        fm.precision_recall_curve,
        fm.roc_auc,
        fm.partial_auc,
        fm.average_precision,
        fm.pr_auc,
        fm.delong,
        fm.operating_point,
        fm.sensitivity_at_specificity,
        fm.specificity_at_sensitivity,
        fm.youden_threshold,
    ],
)
def test_score_metrics_document_the_parameters_of_their_signature(metric):
    # score_counts_metric writes y_true, y_score, pos_label, sample_weight once for all of
    # them: each signature starts and ends with them, and its docstring documents exactly
    # the parameters of its signature, in order.
    names = list(inspect.signature(metric).parameters)
    assert names[:2] == ["y_true", "y_score"] and names[-2:] == ["pos_label", "sample_weight"]
    doc = metric.__doc__
    section = doc.split("Parameters\n----------\n", 1)[1].split("\n\n", 1)[0]
    documented = [line.split(" : ")[0] for line in section.splitlines() if " : " in line]
    assert documented == names
    y, s = [0, 1, 1, 0], [0.2, 0.7, 0.4, 0.5]
    own = {"max_fpr": 0.5, "threshold": 0.5, "specificity": 0.5, "sensitivity": 0.5}
    args = {name: own[name] for name in names[2:-2] if name in own}
    # A weight of 2 counts a row twice: the weights reach the counts.
    weighted = metric(y_true=y, y_score=s, sample_weight=[1, 2, 1, 1], **args)
    assert repr(weighted) == repr(metric([*y, 1], [*s, 0.7], **args))
    assert repr(weighted) != repr(metric(y, s, **args))
    with pytest.raises(TypeError, match="sample_weights"):
        metric(y, s, sample_weights=[1, 1, 1, 1], **args)
