"""Histogram ROC/PR curves (paper 5): the pieces against brute force, the method end to end."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import integrate

from fedroc.cli import main
from fedroc.data import SiteData
from fedroc.exceptions import DisclosureError, InputError, SiteError
from fedroc.federation import Federation, Site, SiteContext
from fedroc.federation.site import aggregate_input
from fedroc.methods import evaluate, pool_site_data
from fedroc.methods.histogram import (
    INPUT_NAME,
    approximate_curves,
    consistent_tree,
    leaf_index,
    levels_from_leaves,
    pr_area_error,
    roc_area_error,
    survival_function,
    tree_height,
    tree_leaf_masses,
    tree_quantiles,
)
from fedroc.metrics import (
    bin_index,
    brier_score,
    calibration_curve,
    delong,
    logit_ci,
    pr_auc,
    roc_auc,
    roc_curve,
)
from fedroc.privacy import DisclosurePolicy
from fedroc.secagg.protocol import FUNCTIONS, STAGE_ADVERTISE_KEYS, STAGE_MASKED_INPUT


def synthetic_sites(n_sites=5, n=3000, seed=0):
    """Binormal scores mapped to (0, 1), rounded to 1e-4 so that ties occur."""
    rng = np.random.default_rng(seed)
    parts = {}
    for k in range(n_sites):
        y = rng.random(n) < 0.3
        z = rng.normal(size=n) + 1.2 * y
        s = np.round(1 / (1 + np.exp(-z)), 4)
        parts[f"site{k}"] = SiteData.from_arrays(y, s)
    return parts


def federation_of(parts, policy=None, noise_seed=None):
    return Federation.from_sites(
        [Site(n, d, policy=policy, noise_seed=noise_seed) for n, d in parts.items()]
    )


# -- tree geometry -------------------------------------------------------------------------
def test_tree_height_follows_the_reference_rule():
    assert tree_height(1024, 2) == 12  # ceil(log2 1024) + 2
    assert tree_height(4, 2) == 4
    assert tree_height(1000, 2) == 12
    assert tree_height(10, 3) == 5  # ceil(log3 10) = 3
    with pytest.raises(InputError, match="quantiles"):
        tree_height(1, 2)


@pytest.mark.parametrize(("n_leaves", "lo", "hi"), [(4096, 0.0, 1.0), (243, -3.0, 7.5)])
def test_leaf_index_equals_binary_search_on_the_edges(n_leaves, lo, hi):
    rng = np.random.default_rng(1)
    # The on-grid edges (R44), which linspace's are only for a power of 2 leaves.
    edges = lo + (hi - lo) * (np.arange(n_leaves + 1) / n_leaves)
    s = np.r_[rng.uniform(lo, hi, 20000), edges, np.nextafter(edges, -np.inf)[1:]]
    s = np.clip(s, lo, hi)
    expected = np.minimum(np.searchsorted(edges, s, side="right") - 1, n_leaves - 1)
    np.testing.assert_array_equal(leaf_index(s, n_leaves, lo, hi), expected)
    if (lo, hi) == (0.0, 1.0):
        np.testing.assert_array_equal(leaf_index(s, n_leaves), bin_index(s, n_leaves))


@pytest.mark.parametrize(
    ("branching", "height", "lo", "hi"), [(10, 3, 0.0, 1.0), (3, 5, -3.0, 7.5)]
)
def test_a_levels_bins_are_unions_of_its_leaves_on_every_edge(branching, height, lo, hi):
    """R44: a coarser level (the joint grid's bins) and on-grid edges cut where the leaves
    do, to the bit, also on the edges themselves (linspace's 0.30000000000000004 was not
    the 100 leaves' 0.3)."""
    from fedroc.metrics import on_grid

    n = branching**height
    edges = lo + (hi - lo) * (np.arange(n + 1) / n)
    s = np.r_[edges, np.nextafter(edges, -np.inf)[1:], np.nextafter(edges, np.inf)[:-1]]
    s = np.clip(s, lo, hi)
    leaves = leaf_index(s, n, lo, hi)
    for level in range(1, height):
        bins = branching**level
        np.testing.assert_array_equal(leaf_index(s, bins, lo, hi), leaves // (n // bins))
    inner = edges[1:-1]
    assert on_grid(inner, lo, hi, n)
    # An edge on the grid is a leaf boundary: the scores on it open a leaf.
    np.testing.assert_array_equal(leaf_index(inner, n, lo, hi), np.arange(1, n))


def test_levels_from_leaves_sum_siblings():
    leaves = np.arange(27)
    levels = levels_from_leaves(leaves, 3)
    assert [lv.size for lv in levels] == [3, 9, 27]
    np.testing.assert_array_equal(levels[0], [36, 117, 198])
    np.testing.assert_array_equal(levels[1], leaves.reshape(9, 3).sum(axis=1))


# -- consistency ---------------------------------------------------------------------------
def _aggregation_matrix(b, h):
    rows = []
    for level in range(1, h + 1):
        width = b ** (h - level)
        rows.append(np.kron(np.eye(b**level), np.ones(width)))
    return np.vstack(rows)


@pytest.mark.parametrize(("b", "h"), [(2, 5), (3, 3), (4, 2)])
def test_consistency_equals_least_squares_over_the_released_levels(b, h):
    # Hay et al.'s two passes are the least-squares fit of leaf counts to the noisy levels
    # (the root is not released): compare with a dense solver.
    rng = np.random.default_rng(b * 10 + h)
    a = _aggregation_matrix(b, h)
    y = rng.normal(scale=5, size=a.shape[0]) + a @ rng.poisson(20, b**h)
    sizes = np.cumsum([0] + [b**level for level in range(1, h + 1)])
    levels = [y[sizes[j] : sizes[j + 1]] for j in range(h)]
    out = consistent_tree(levels, b)
    ols = np.linalg.lstsq(a, y, rcond=None)[0]
    np.testing.assert_allclose(out[-1], ols, atol=1e-9)
    for parent, child in itertools.pairwise(out):
        np.testing.assert_allclose(parent, child.reshape(-1, b).sum(axis=1), atol=1e-9)
    exact = levels_from_leaves(rng.poisson(20, b**h).astype(float), b)
    for got, want in zip(consistent_tree(exact, b), exact, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-9)


def test_leaf_masses_are_nonnegative_and_keep_the_top_total():
    leaves = np.array([5.0, 0, 3, 2, 0, 0, 7, 1])
    np.testing.assert_allclose(tree_leaf_masses(levels_from_leaves(leaves, 2), 2), leaves)
    noisy = [np.array([9.0, 10.0]), np.array([6.0, -1.0, 4.0, 7.0]), np.arange(8) - 2.0]
    mass = tree_leaf_masses(noisy, 2)
    assert (mass >= 0).all()
    assert mass.sum() == pytest.approx(19.0)
    # The left half keeps 9 split by its clipped children (6 and 0): all on the first.
    assert mass[:4].sum() == pytest.approx(9.0) and mass[2:4].sum() == 0


# -- quantiles and survival functions ------------------------------------------------------
def test_tree_quantiles_are_within_a_leaf_of_the_empirical_ones():
    rng = np.random.default_rng(3)
    s = rng.beta(2, 5, 20000)
    h = 10
    leaves = np.bincount(leaf_index(s, 2**h), minlength=2**h).astype(float)
    fractions = np.linspace(0, 1, 257)
    q = tree_quantiles(levels_from_leaves(leaves, 2), 2, fractions)
    width = 2.0**-h
    inner = slice(1, -1)
    assert np.abs(q[inner] - np.quantile(s, fractions[inner])).max() <= width
    assert np.all(np.diff(q) >= 0)
    assert q[0] == math.floor(s.min() / width) * width  # lower edge of the first leaf
    assert q[-1] == (math.floor(s.max() / width) + 1) * width


def test_survival_function_passes_through_the_quantiles():
    q = np.array([0.1, 0.2, 0.2, 0.5, 0.9])
    fr = np.linspace(0, 1, 5)
    surv = survival_function(q, fr)
    np.testing.assert_allclose(surv([0.1, 0.5, 0.9]), [1.0, 0.25, 0.0], atol=1e-12)
    assert surv([0.2])[0] == pytest.approx(0.625)  # the two values at 0.2 are averaged
    grid = np.linspace(-1, 2, 1001)
    values = surv(grid)
    assert np.all(np.diff(values) <= 1e-12) and values[0] == 1 and values[-1] == 0
    single = survival_function(np.full(3, 0.4), np.linspace(0, 1, 3))
    np.testing.assert_array_equal(single([0.3, 0.5]), [1.0, 0.0])


# -- area errors ---------------------------------------------------------------------------
def test_roc_area_error_handles_vertical_segments_exactly():
    diagonal = (np.array([0.0, 1.0]), np.array([0.0, 1.0]))
    perfect = (np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 1.0]))
    assert roc_area_error(*perfect, *diagonal) == pytest.approx(0.5)
    assert roc_area_error(*perfect, *perfect) == 0.0
    half = (np.array([0.0, 1.0]), np.array([0.5, 0.5]))
    assert roc_area_error(*diagonal, *half) == pytest.approx(0.25)  # curves cross at 0.5
    step = (np.array([0.0, 0.5, 0.5, 1.0]), np.array([0.0, 0.0, 1.0, 1.0]))
    assert roc_area_error(*step, *half) == pytest.approx(0.5)


def test_roc_area_error_matches_brute_force_on_random_curves():
    rng = np.random.default_rng(5)
    y = rng.random(400) < 0.4
    s = rng.normal(size=400) + y
    fpr, tpr, _ = roc_curve(y, np.round(s, 1))
    f2 = np.r_[0, np.sort(rng.random(30)), 1]
    t2 = np.r_[0, np.sort(rng.random(30)), 1]
    grid = (np.arange(400000) + 0.5) / 400000
    brute = np.mean(np.abs(np.interp(grid, fpr, tpr) - np.interp(grid, f2, t2)))
    assert roc_area_error(fpr, tpr, f2, t2) == pytest.approx(brute, abs=2e-5)


def test_pr_area_error_follows_definition_1():
    # Two ROC polylines; P(t) = t n+ / (t n+ + F(T^-1(t)) n-), integrated by quad.
    f1, t1 = np.array([0.0, 0.1, 0.4, 1.0]), np.array([0.0, 0.5, 0.9, 1.0])
    f2, t2 = np.array([0.0, 0.2, 1.0]), np.array([0.0, 0.6, 1.0])

    def precision(t, f, tp, n_pos, n_neg):
        x = np.interp(t, tp, f)
        return t * n_pos / (t * n_pos + x * n_neg)

    expected, _ = integrate.quad(
        lambda t: abs(precision(t, f1, t1, 30, 70) - precision(t, f2, t2, 35, 65)),
        0,
        1,
        points=[0.5, 0.6, 0.9],
        limit=200,
    )
    got = pr_area_error(f1, t1, 30, 70, f2, t2, 35, 65)
    assert got == pytest.approx(expected, abs=1e-6)
    assert pr_area_error(f1, t1, 30, 70, f1, t1, 30, 70) == 0.0


def test_curves_from_exact_quantiles_approach_the_empirical_curves():
    rng = np.random.default_rng(8)
    y = rng.random(20000) < 0.3
    s = 1 / (1 + np.exp(-(rng.normal(size=y.size) + 1.5 * y)))
    fpr, tpr, _ = roc_curve(y, s)
    errors = []
    for q in (4, 32, 256):
        fr = np.linspace(0, 1, q)
        c = approximate_curves(np.quantile(s[y], fr), np.quantile(s[~y], fr), fr, 1, 1, 0, 1)
        assert np.all(np.diff(c.fpr) >= 0) and np.all(np.diff(c.tpr) >= 0)
        errors.append(roc_area_error(fpr, tpr, c.fpr, c.tpr))
    assert errors[0] > errors[1] > errors[2]
    assert abs(c.auc - roc_auc(y, s)) < 1e-3


# -- the site input ------------------------------------------------------------------------
def _ctx(name, data, state=None, *, noise_seed=None, noise_shares=1):
    return SiteContext(
        name,
        data,
        DisclosurePolicy(),
        state or {},
        "analyst",
        noise_seed=noise_seed,
        sites=(name,),
        noise_shares=noise_shares,
    )


def _tree_input(ctx, args):
    return aggregate_input(ctx, INPUT_NAME, args)


def test_each_site_draws_its_own_noise_and_a_seed_reproduces_it():
    data = SiteData.from_arrays(np.r_[np.ones(50), np.zeros(50)], np.linspace(0, 1, 100))
    args = dict(
        branching=2, height=4, lo=0.0, hi=1.0, mode="distributed-dp", epsilon=1.0,
        noise="discrete",
    )  # fmt: skip
    a = _tree_input(_ctx("north", data, noise_seed=11, noise_shares=3), args)
    b = _tree_input(_ctx("south", data, noise_seed=11, noise_shares=3), args)
    again = _tree_input(_ctx("north", data, noise_seed=11, noise_shares=3), args)
    assert not np.array_equal(a.values["pos"], b.values["pos"])  # not the reference's flaw
    np.testing.assert_array_equal(a.values["pos"], again.values["pos"])
    # epsilon 1 over the levels, charged twice (a row moved, its counts public: H1)
    assert len(a.dp) == 4 and sum(e.epsilon for e in a.dp) == pytest.approx(2.0)
    assert a.values["pos"].size == 2 + 4 + 8 + 16


def test_noise_shares_of_all_sites_sum_to_discrete_laplace():
    data = SiteData.from_arrays(np.r_[np.ones(5), np.zeros(5)], np.full(10, 0.5))
    args = dict(
        branching=2, height=10, lo=0.0, hi=1.0, mode="distributed-dp", epsilon=10.0,
        noise="discrete",
    )  # fmt: skip
    neg_leaves = np.bincount(leaf_index(data.score[~data.label], 1024), minlength=1024)
    exact = np.concatenate(levels_from_leaves(neg_leaves, 2))
    total = sum(
        _tree_input(_ctx(f"s{k}", data, noise_seed=3, noise_shares=4), args).values["neg"]
        for k in range(4)
    )
    noise = total - 4 * exact  # each of the four sites holds the same five negatives
    alpha = math.exp(-1.0)  # epsilon / height per level
    assert np.var(noise) == pytest.approx(2 * alpha / (1 - alpha) ** 2, rel=0.1)
    assert abs(np.mean(noise)) < 0.05


# -- the method end to end -----------------------------------------------------------------
@pytest.fixture(scope="module")
def synthetic():
    parts = synthetic_sites()
    return parts, pool_site_data(parts)


def test_secure_aggregation_matches_the_pooled_curves(synthetic):
    parts, pooled = synthetic
    fed = federation_of(parts)
    res = evaluate(fed, "histogram", pooled=pooled, quantiles=1024)
    d = res.details
    assert res.extra["roc_area_error"] < 5e-4
    assert res.extra["pr_area_error"] < 1e-3
    assert abs(res.auc - roc_auc(pooled.label, pooled.score)) < 1e-3
    assert abs(res.extra["pr_auc"] - pr_auc(pooled.label, pooled.score)) < 2e-3
    assert d.n_pos == pooled.n_pos and d.n_neg == pooled.n_neg  # exact under SA
    # The CI: DeLong on the leaf counts, which are the pooled scores binned by leaf.
    ref = delong(pooled.label, pooled.score)
    assert d.delong.auc == pytest.approx(ref.auc, abs=2e-4)
    assert d.se == pytest.approx(ref.se, rel=0.01)
    assert res.auc_ci == pytest.approx(logit_ci(res.auc, d.se))
    # Brier and calibration from the leaves: within a leaf width of the pooled values.
    assert res.extra["brier"] == pytest.approx(brier_score(pooled.label, pooled.score), abs=1e-4)
    pooled_cal = calibration_curve(pooled.label, pooled.score)
    assert np.abs(res.extra["calibration"].count - pooled_cal.count).max() <= 20
    np.testing.assert_allclose(
        res.extra["calibration"].observed_fraction, pooled_cal.observed_fraction, atol=0.01
    )
    fpr, tpr = d.roc_points()
    assert (fpr[0], tpr[0], fpr[-1], tpr[-1]) == (0, 0, 1, 1)
    assert res.released.rounds == 4 and res.released.epsilon == {}
    assert all(s["n"] is None for s in res.sites)
    json.dumps(res.to_dict())


def test_the_error_falls_with_q_as_in_the_paper(synthetic):
    parts, pooled = synthetic
    errors = [  # a federation per Q: each site binds the tree of its first request
        evaluate(
            federation_of(parts), "histogram", pooled=pooled, quantiles=q, oversampling=1
        ).extra["roc_area_error"]
        for q in (4, 16, 64)
    ]
    assert errors[0] > errors[1] > errors[2]


def test_flchain_gradient_boosting_at_q_1024():
    pytest.importorskip("sksurv")
    from fedroc.datasets import flchain_scores

    frame = flchain_scores(folds=2, max_iter=60)  # the smaller variant of the script's check
    part = np.random.default_rng(0).permutation(len(frame)) % 10
    fed = Federation.from_frames({f"site{k}": frame[part == k] for k in range(10)})
    pooled = SiteData.from_arrays(frame.label, frame.score)
    res = evaluate(fed, "histogram", pooled=pooled, quantiles=1024)
    assert res.extra["roc_area_error"] < 5e-4
    assert res.extra["pr_area_error"] < 1e-3
    assert abs(res.auc - roc_auc(pooled.label, pooled.score)) < 1e-3


def test_distributed_dp_spends_epsilon_and_widens_the_interval(synthetic):
    parts, pooled = synthetic
    fed = federation_of(parts, noise_seed=4)
    res = evaluate(fed, "histogram", pooled=pooled, seed=4, quantiles=64, dp_epsilon=1.0)
    d = res.details
    assert res.extra["epsilon"] == 1.0 and res.extra["mode"] == "distributed-dp"
    assert res.released.epsilon == {name: pytest.approx(2.0) for name in parts}  # 2x: H1
    assert len(res.released.dp["site0"]) == d.height + 1  # the class counts, then h levels
    assert d.noise_variance > 0 and d.se > d.delong.se
    assert abs(d.n_pos - pooled.n_pos) < 100 and abs(d.n_neg - pooled.n_neg) < 100
    assert abs(res.auc - roc_auc(pooled.label, pooled.score)) < 0.02
    low, high = res.auc_ci
    assert low < res.auc < high
    again = evaluate(
        federation_of(parts, noise_seed=4),
        "histogram",
        pooled=pooled,
        seed=4,
        quantiles=64,
        dp_epsilon=1.0,
    )
    assert again.auc == res.auc  # the sites' own seed reproduces their noise
    unseeded = evaluate(federation_of(parts), "histogram", seed=4, quantiles=64, dp_epsilon=1.0)
    assert unseeded.auc != res.auc  # the analyst's seed does not reach the sites' noise
    cont = evaluate(
        fed,
        "histogram",
        seed=4,
        quantiles=64,
        dp_epsilon=1.0,
        dp_noise="continuous",
    )
    assert abs(cont.auc - roc_auc(pooled.label, pooled.score)) < 0.02


def test_dropouts_leave_the_survivors_curves(synthetic):
    from test_secagg import FlakyTransport, drop_from  # the same dropout simulation

    parts, _ = synthetic
    inner = Federation.from_sites([Site(n, d) for n, d in parts.items()]).transport
    fed = Federation(FlakyTransport(inner, {"site2": drop_from(STAGE_MASKED_INPUT)}))
    res = evaluate(fed, "histogram", quantiles=256, allow_dropouts=True, threshold=3)
    survivors = pool_site_data({k: v for k, v in parts.items() if k != "site2"})
    assert [s["name"] for s in res.sites] == ["site0", "site1", "site3", "site4"]
    assert res.extra["dropped"] == ["site2"]
    assert res.details.n_pos == survivors.n_pos
    assert abs(res.auc - roc_auc(survivors.label, survivors.score)) < 1e-3
    # The survivors are now bound to their set: a sum over all five would subtract from
    # it to site2's histogram, so they refuse it.
    with pytest.raises(DisclosureError, match="will not over a different set"):
        evaluate(fed, "histogram", quantiles=256)
    inner = Federation.from_sites([Site(n, d) for n, d in parts.items()]).transport
    fresh = Federation(FlakyTransport(inner, {"site2": drop_from(STAGE_MASKED_INPUT)}))
    with pytest.raises(SiteError, match="site2"):
        evaluate(fresh, "histogram", quantiles=256)
    assert FUNCTIONS[STAGE_MASKED_INPUT] in {c.function for c in fed.transcript}


def test_privacy_spent_is_reported_when_a_site_drops_at_the_first_stage(synthetic):
    from test_secagg import FlakyTransport, drop_from

    parts, _ = synthetic
    inner = Federation.from_sites([Site(n, d) for n, d in parts.items()]).transport
    transport = FlakyTransport(inner, {"site2": drop_from(STAGE_ADVERTISE_KEYS)})
    res = evaluate(
        Federation(transport),
        "histogram",
        quantiles=16,
        dp_epsilon=0.5,
        allow_dropouts=True,
        threshold=3,
        seed=1,
    )
    # The whole first call failed, so the survivors' budget comes from their repeated
    # answers; each site spent epsilon once in the analyst's record.
    survivors = ["site0", "site1", "site3", "site4"]
    assert res.released.epsilon == {name: pytest.approx(1.0) for name in survivors}  # 2x: H1
    assert [s["name"] for s in res.sites] == survivors


def test_a_site_gone_from_the_start_drops_out_of_a_dp_run_with_dropouts(synthetic):
    # A site that is down answers no call, the budget pre-check (fedroc.secagg.check) either.
    # With allow_dropouts the run goes on with the survivors, as it did before the check
    # (on b9c3982; on 4c10e81 the check's SiteError ended the run before anything was sent).
    from test_secagg import FlakyTransport, drop_from

    from fedroc.secagg.protocol import FN_CHECK

    parts, _ = synthetic
    inner = Federation.from_sites([Site(n, d) for n, d in parts.items()]).transport
    gone = drop_from(STAGE_ADVERTISE_KEYS) | {FN_CHECK}
    fed = Federation(FlakyTransport(inner, {"site2": gone}))
    res = evaluate(fed, "histogram", quantiles=16, dp_epsilon=0.5, allow_dropouts=True,
                   threshold=3, seed=1)  # fmt: skip
    survivors = ["site0", "site1", "site3", "site4"]
    assert [s["name"] for s in res.sites] == survivors
    assert res.released.epsilon == {name: pytest.approx(1.0) for name in survivors}
    # Without allow_dropouts a site that is gone is still an error naming it.
    inner = Federation.from_sites([Site(n, d) for n, d in parts.items()]).transport
    fresh = Federation(FlakyTransport(inner, {"site2": gone}))
    with pytest.raises(SiteError, match="site2"):
        evaluate(fresh, "histogram", quantiles=16, dp_epsilon=0.5, threshold=3)
    assert not fresh.released().dp  # refused by the check, before any release


def test_unbounded_scores_by_range_or_transform():
    rng = np.random.default_rng(9)
    parts = {}
    for k in range(3):
        y = rng.random(2000) < 0.4
        parts[f"s{k}"] = SiteData.from_arrays(y, rng.normal(size=2000) * 2 + 1.5 * y)
    pooled = pool_site_data(parts)
    truth = roc_auc(pooled.label, pooled.score)
    lo, hi = float(pooled.score.min()) - 1, float(pooled.score.max()) + 1
    # A federation per range: each site binds the range of its first histogram.
    ranged = evaluate(federation_of(parts), "histogram", pooled=pooled, score_range=(lo, hi))
    mapped = evaluate(federation_of(parts), "histogram", pooled=pooled, score_transform="logistic")
    for res in (ranged, mapped):
        assert abs(res.auc - truth) < 2e-3
        assert res.extra["roc_area_error"] < 2e-3
        assert res.extra.get("brier") is None  # not probabilities: evaluate() decided
    with pytest.raises(SiteError, match="outside the public score range"):
        evaluate(federation_of(parts), "histogram")


def test_bad_options_and_small_sites_are_refused(synthetic):
    parts, _ = synthetic
    fed = federation_of(parts)
    for options, message in [
        ({"quantiles": 1}, "quantiles"),
        ({"dp_epsilon": -1.0}, "dp_epsilon"),
        ({"dp_epsilon": 1.0, "dp_noise": "gaussian"}, "dp_noise"),
        ({"score_range": (0, 1), "score_transform": "logistic"}, "not both"),
        ({"score_transform": "probit"}, "score_transform"),
        ({"score_range": (1, 0)}, "score_range"),
        ({"quantiles": 2**21}, "leaves"),
    ]:
        with pytest.raises(InputError, match=message):
            evaluate(fed, "histogram", **options)
    tiny = {"a": parts["site0"], "b": SiteData.from_arrays([1, 1, 0, 0, 0, 0], [0.1] * 6)}
    with pytest.raises(DisclosureError, match="'b'"):
        evaluate(federation_of(tiny), "histogram")


def test_a_small_class_refusal_says_what_it_means_for_the_method(synthetic):
    # The policy's words are generic; the method adds what the refusal means for it.
    parts, _ = synthetic
    tiny = {**parts, "b": SiteData.from_arrays([1, 1, 0, 0, 0, 0], [0.1] * 6)}
    with pytest.raises(DisclosureError, match="'b'.*positive count is below") as refused:
        evaluate(federation_of(tiny), "histogram")
    assert "counts each class at every site" in str(refused.value)
    assert str(refused.value).endswith("; no DP budget was spent")
    assert refused.value.site == "b"


def test_cli_evaluate_histogram(tmp_path, capsys):
    parts = synthetic_sites(n_sites=3, n=800, seed=2)
    args = ["evaluate", "--method", "histogram", "--json"]
    for name, d in parts.items():
        path = tmp_path / f"{name}.csv"
        pd.DataFrame({"label": d.label.astype(int), "score": d.score}).to_csv(path, index=False)
        args += ["--site", f"{name}={path}"]
    main([*args, "--quantiles", "256", "--report", str(tmp_path / "r.html")])
    out = json.loads(capsys.readouterr().out)
    for key in ("method", "sites", "auc", "auc_ci", "released", "pr_auc", "quantiles", "epsilon"):
        assert key in out
    assert out["quantiles"] == 256 and out["epsilon"] is None and out["method"] == "histogram"
    assert (tmp_path / "r.html").read_text().count("<img") >= 1
    main([*args, "--dp-epsilon", "1", "--quantiles", "64", "--seed", "1"])
    out = json.loads(capsys.readouterr().out)
    # Asked for epsilon 1; each site is charged 2 (a row moved, its counts public: H1).
    assert out["epsilon"] == 1.0 and out["released"]["epsilon"]["site0"] == pytest.approx(2.0)
    with pytest.raises(SystemExit) as exc:
        main([*args, "--score-range", "zero,one"])
    assert exc.value.code == 2


@pytest.mark.parametrize("transform", [None, "logistic"])
def test_apart_from_local_trees_is_the_brute_force_rule(transform):
    """A cut is refused exactly when it splits a leaf's rows into a part under q of a class.

    Brute force: each leaf's rows (leaf by ``==`` on the edges, not ``leaf_index``), split
    at each cut (``score < c`` below), both parts nonempty, a class under q in a part.
    """
    from fedroc.federation.basic import BIND_RANGE, apart_from_local_trees
    from fedroc.methods.histogram import TRANSFORMS

    rng = np.random.default_rng(20261128)
    lo, hi = (0.0, 1.0) if transform is None else (0.25, 0.75)
    answers = set()
    for _ in range(60):
        n = int(rng.integers(5, 80))
        s = np.round(rng.random(n), 2) if transform is None else rng.normal(0, 0.8, n)
        y = rng.random(n) < 0.5
        ctx = SiteContext("a", SiteData.from_arrays(y, s), DisclosurePolicy(min_count=2),
                          {}, "analyst")  # fmt: skip
        ctx.ledger.bind(BIND_RANGE, [lo, hi, transform])
        n_leaves = int(rng.choice([4, 8, 16]))
        cut = float(rng.choice(s)) if rng.random() < 0.5 else float(rng.random())
        if transform is not None:
            cut = float(rng.normal(0, 0.8))
        t = s if transform is None else np.clip(TRANSFORMS[transform](s), lo, hi)
        edges = np.linspace(lo, hi, n_leaves + 1)
        expected = True
        for k in range(n_leaves):
            last = k == n_leaves - 1
            inside = (t >= edges[k]) & ((t <= edges[k + 1]) if last else (t < edges[k + 1]))
            below, above = inside & (s < cut), inside & (s >= cut)
            if below.any() and above.any():
                for part in (below, above):
                    if min((part & y).sum(), (part & ~y).sum()) < 2:
                        expected = False
        got = apart_from_local_trees(ctx, np.array([cut]), [n_leaves])
        assert got == expected
        answers.add(got)
    assert answers == {True, False}  # both outcomes were exercised
