"""Comparing two models with the histogram method (issue 14.2): the joint histogram of two
scores through secure aggregation, against the paired DeLong of the pooled rows, and what
the sites refuse."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedroc.exceptions import DisclosureError, FedrocError, InputError
from fedroc.federation import Federation
from fedroc.methods import evaluate
from fedroc.methods.histogram import JOINT_NAME, leaf_index
from fedroc.methods.histogram._compare import binning_bound, count_joint, joint_comparison
from fedroc.metrics import PlacementSums, ScoreCounts, delong_paired
from fedroc.privacy import DisclosurePolicy
from fedroc.secagg import secure_sum


def _paired_rows(n: int, rng: np.random.Generator, bins: int | None = None):
    y = rng.random(n) < 0.35
    z = rng.normal(size=n)
    a = 1 / (1 + np.exp(-(1.3 * y + z)))
    b = 1 / (1 + np.exp(-(0.8 * y + 0.6 * z + 0.8 * rng.normal(size=n))))
    if bins is not None:  # one value per bin: the bin's centre
        a = (leaf_index(a, bins) + 0.5) / bins
        b = (leaf_index(b, bins) + 0.5) / bins
    return y, a, b


def _frames(y, a, b, n_sites=4):
    parts = np.array_split(np.arange(y.size), n_sites)
    return {
        f"site{k}": pd.DataFrame({"label": y[i].astype(int), "score": a[i], "score_b": b[i]})
        for k, i in enumerate(parts)
    }


def test_joint_placement_sums_equal_those_of_the_rows():
    """The grouped closed form equals PlacementSums.from_rows on the bin indices."""
    rng = np.random.default_rng(3)
    y = rng.random(500) < 0.4
    ia, ib = rng.integers(0, 9, 500), rng.integers(0, 9, 500)
    pos = np.zeros((9, 9))
    neg = np.zeros((9, 9))
    np.add.at(pos, (ia[y], ib[y]), 1)
    np.add.at(neg, (ia[~y], ib[~y]), 1)
    joint = PlacementSums.from_joint_counts(pos, neg)
    a, b = ia.astype(float), ib.astype(float)
    rows = PlacementSums.from_rows(
        y, [a, b], [ScoreCounts.from_scores(y, a), ScoreCounts.from_scores(y, b)]
    )
    np.testing.assert_allclose(joint.auc, rows.auc, rtol=0, atol=1e-13)
    np.testing.assert_allclose(joint.covariance(), rows.covariance(), rtol=1e-11, atol=0)


def test_federated_comparison_on_bin_discrete_scores_is_the_pooled_paired_delong():
    rng = np.random.default_rng(11)
    y, a, b = _paired_rows(1200, rng, bins=64)
    fed = Federation.from_frames(_frames(y, a, b), score_b="score_b")
    res = evaluate(fed, "histogram", quantiles=64, compare=True, calibration_bins=None)
    cmp = res.extra["comparison"]
    ref = delong_paired(y, a, b)
    assert cmp["auc_difference"] == pytest.approx(ref.difference, abs=1e-12)
    assert cmp["se"] == pytest.approx(ref.se_difference, abs=1e-12)
    assert cmp["ci"] == pytest.approx(list(ref.confidence_interval()), abs=1e-12)
    assert cmp["p_value"] == pytest.approx(ref.p_value, rel=1e-9)
    assert cmp["auc_b"] == pytest.approx(ref.auc_b, abs=1e-12)
    assert cmp["auc_a"] == pytest.approx(ref.auc_a, abs=1e-12)
    assert cmp["bins"] == 64 and "joint bin counts" in cmp["method"]
    assert any("64 x 64 joint counts" in note for note in res.released.notes)
    assert res.released.rounds == 8  # two sessions of secure aggregation, four stages each


def test_difference_on_continuous_scores_lies_within_the_binning_bound_which_is_reached():
    rng = np.random.default_rng(5)
    y, a, b = _paired_rows(3000, rng)
    pos, neg = count_joint(y, a, b, 32, 0.0, 1.0)
    binned = joint_comparison(pos, neg)
    bound = binning_bound(pos, neg)
    rows = delong_paired(y, a, b)
    assert 0 < bound < 0.05
    assert abs(rows.difference - binned.difference) <= bound + 1e-12
    # The bound is reached: inside every bin of a put the positives above the negatives,
    # inside every bin of b below them (values stay in their bins).
    ia, ib = leaf_index(a, 32), leaf_index(b, 32)
    a_up = (ia + np.where(y, 0.75, 0.25)) / 32
    b_down = (ib + np.where(y, 0.25, 0.75)) / 32
    assert np.array_equal(leaf_index(a_up, 32), ia) and np.array_equal(leaf_index(b_down, 32), ib)
    extreme = delong_paired(y, a_up, b_down)
    assert extreme.difference - binned.difference == pytest.approx(bound, abs=1e-12)


def test_compare_under_local_dp_is_refused_before_anything_leaves():
    rng = np.random.default_rng(2)
    fed = Federation.from_frames(_frames(*_paired_rows(400, rng)), score_b="score_b")
    start = fed.mark()
    with pytest.raises(InputError, match="under local DP"):
        evaluate(fed, "histogram", quantiles=64, compare=True, dp_epsilon=1.0, dp_mode="local")
    assert fed.released(start).rounds == 0
    with pytest.raises(InputError, match="compare_bins must be a level of the tree"):
        evaluate(fed, "histogram", quantiles=64, compare=True, compare_bins=100)


def test_a_site_binds_its_joint_grid_so_that_two_grids_cannot_be_subtracted():
    """Attack: pooled joint counts over 64 bins and then over 128 bins (or a shifted
    range) would place the pooled rows twice as finely; the sites refuse the second grid
    (with no binding, the second sum is returned and is finer)."""
    rng = np.random.default_rng(8)
    fed = Federation.from_frames(_frames(*_paired_rows(400, rng)), score_b="score_b")
    first = secure_sum(fed, JOINT_NAME, bins=64, lo=0.0, hi=1.0, transform=None)
    assert np.asarray(first["pos"]).sum() + np.asarray(first["neg"]).sum() == 400
    again = secure_sum(fed, JOINT_NAME, bins=64, lo=0.0, hi=1.0, transform=None)
    assert np.array_equal(again["pos"], first["pos"])  # a repeat tells nothing new
    for grid in ({"bins": 128, "lo": 0.0, "hi": 1.0}, {"bins": 64, "lo": -0.01, "hi": 0.99}):
        with pytest.raises(FedrocError, match="grid"):
            secure_sum(fed, JOINT_NAME, transform=None, **grid)
    with pytest.raises(FedrocError, match="give branching and height together"):
        secure_sum(fed, JOINT_NAME, bins=64, height=6, lo=0.0, hi=1.0, transform=None)


def test_the_sites_policy_bounds_the_joint_sum():
    rng = np.random.default_rng(9)
    frames = _frames(*_paired_rows(300, rng), n_sites=2)
    fed = Federation.from_frames(frames, score_b="score_b")
    with pytest.raises(FedrocError, match="secagg_min_sites"):
        evaluate(fed, "histogram", quantiles=64, compare=True)
    # A site below its minimum count of a class refuses.
    frames = _frames(*_paired_rows(300, rng), n_sites=3)
    fed = Federation.from_frames(frames, score_b="score_b", policy=DisclosurePolicy(min_count=1000))
    with pytest.raises(DisclosureError):
        evaluate(fed, "histogram", quantiles=64, compare=True)
    # Sites without a second score cannot compare.
    fed = Federation.from_frames(frames)
    with pytest.raises(FedrocError, match="holds one score column"):
        evaluate(fed, "histogram", quantiles=64, compare=True)
