"""Paper 5 under DP: noise propagation against dense matrices and Monte Carlo, statistics
that carry their noise, local DP, interpolations, baselines and figures."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fedroc.data import SiteData
from fedroc.exceptions import InputError
from fedroc.federation import Federation, Site
from fedroc.methods import evaluate, pool_site_data
from fedroc.methods.histogram import (
    LOCAL_NAME,
    approximate_curves,
    consistent_tree,
    consistent_tree_adjoint,
    count_leaves,
    leaf_index,
    level_noise_covariance,
    levels_from_leaves,
    linear_noise_variance,
    roc_area_error,
    survival_function,
)
from fedroc.methods.histogram._dp import (
    choose_level,
    dp_brier,
    dp_calibration,
    level_auc,
    pair_noise_trace,
    ratio_test,
)
from fedroc.methods.histogram._tree import node_noise_variance, total_noise_sd
from fedroc.methods.histogram.baselines import (
    dp_ecdf_curves,
    exact_quantile_curves,
    monotone_projection,
)
from fedroc.metrics import average_precision, brier_score, roc_auc, roc_curve
from fedroc.privacy import DisclosurePolicy


# -- the dense reference: consistency as a matrix ------------------------------------------
def _dense_consistency(b, h):
    """Columns: consistent_tree applied to each unit node (levels concatenated)."""
    sizes = [b**level for level in range(1, h + 1)]
    n = sum(sizes)
    cols = []
    for i in range(n):
        e = np.zeros(n)
        e[i] = 1.0
        cols.append(np.concatenate(consistent_tree(np.split(e, np.cumsum(sizes)[:-1]), b)))
    return np.array(cols).T, sizes


@pytest.mark.parametrize(("b", "h"), [(2, 5), (3, 3)])
def test_adjoint_is_the_transpose_of_consistency(b, h):
    m, sizes = _dense_consistency(b, h)
    rng = np.random.default_rng(0)
    g = rng.normal(size=(3, m.shape[0]))
    offsets = np.r_[0, np.cumsum(sizes)]
    grads = [g[:, offsets[j] : offsets[j + 1]] for j in range(h)]
    got = np.concatenate(consistent_tree_adjoint(grads, b), axis=1)
    np.testing.assert_allclose(got, g @ m, atol=1e-12)


@pytest.mark.parametrize(("b", "h", "level"), [(2, 6, 1), (2, 6, 3), (2, 6, 6), (3, 4, 2)])
def test_level_covariance_equals_the_dense_one(b, h, level):
    m, sizes = _dense_consistency(b, h)
    offsets = np.r_[0, np.cumsum(sizes)]
    rows = m[offsets[level - 1] : offsets[level]]  # the level's consistent counts
    np.testing.assert_allclose(level_noise_covariance(b, h, level), rows @ rows.T, atol=1e-12)
    assert np.array_equal(
        level_noise_covariance(b, h, level, post_processing=False), np.eye(b**level)
    )
    leaves = m[offsets[-2] :]
    w = np.random.default_rng(1).normal(size=(2, b**h))
    np.testing.assert_allclose(
        linear_noise_variance(w, b, h), ((w @ leaves) ** 2).sum(axis=1), rtol=1e-12
    )
    # tr(K C K' C): pairs in two bins count 1, in one bin 1/2.
    c = rows @ rows.T
    k = np.tril(np.ones_like(c), -1) + 0.5 * np.eye(c.shape[0])
    assert pair_noise_trace(b, h, level, True) == pytest.approx(np.trace(k @ c @ k.T @ c))


def _noisy(levels, eps_level, rng):
    p = 1.0 - math.exp(-eps_level)
    return consistent_tree(
        [
            lv + rng.negative_binomial(1, p, lv.size) - rng.negative_binomial(1, p, lv.size)
            for lv in levels
        ],
        2,
    )


@pytest.fixture(scope="module")
def rare_tree():
    """Issue 13's hard case: 1500 rows, prevalence 0.1, AUC 0.96, epsilon 1 over 12 levels."""
    from scipy import special

    rng = np.random.default_rng(5)
    y = rng.random(1500) < 0.1
    s = special.ndtr(rng.normal(2.48 * y, 1.0))
    pos, neg = count_leaves(y, s, 2**12, 0.0, 1.0)
    return y, s, levels_from_leaves(pos.astype(float), 2), levels_from_leaves(neg.astype(float), 2)


def test_level_auc_is_unbiased_and_its_variance_is_the_noise(rare_tree):
    # Monte Carlo over the noise, the data fixed: the corrected estimate is centred on the
    # binned AUC of the exact counts, and its SD is the one the delta method states.
    _, _, tp, tn = rare_tree
    eps_level, level = 1.0 / 12, 7
    sigma2 = node_noise_variance("discrete", eps_level)
    cov = level_noise_covariance(2, 12, level)
    truth = level_auc(tp[level - 1], tn[level - 1], cov, sigma2)
    rng = np.random.default_rng(6)
    draws = [
        level_auc(
            _noisy(tp, eps_level, rng)[level - 1],
            _noisy(tn, eps_level, rng)[level - 1],
            cov,
            sigma2,
        )
        for _ in range(1500)
    ]
    auc = np.array([d.auc for d in draws])
    raw = np.array([d.raw for d in draws])
    mcse = auc.std() / math.sqrt(auc.size)
    assert abs(auc.mean() - truth.raw) < 3 * mcse  # corrected: unbiased
    assert raw.mean() - truth.raw > 3 * mcse  # the plain ratio is biased upward here
    stated = math.sqrt(np.mean([d.noise_variance for d in draws]))
    assert stated == pytest.approx(auc.std(), rel=0.1)


def test_auc_interval_inverts_the_test_and_conditions_on_the_release_rule():
    # Monte Carlo over the noise, the data fixed (1000 rows, 108 positives: 6.4 noise SDs).
    # 1. Wald's ``auc +- z sd`` misses on one side only: the noise that lands on the
    #    positive total pulls the estimate towards chance and shrinks its plug-in SD.
    #    Fieller's interval (the variance taken at each candidate AUC) misses on both.
    # 2. Among the runs that clear a release rule on the noisy totals (7 SDs here), those
    #    whose noise raised the positive total are over-represented; the interval that
    #    conditions on the rule covers them, Fieller's does not.
    from scipy import special

    rng = np.random.default_rng(11)
    y = rng.random(1000) < 0.1
    s = special.ndtr(rng.normal(2.48 * y, 1.0))
    pos, neg = count_leaves(y, s, 2**12, 0.0, 1.0)
    tp = levels_from_leaves(pos.astype(float), 2)
    tn = levels_from_leaves(neg.astype(float), 2)
    eps_level = 1.0 / 12
    sigma2 = node_noise_variance("discrete", eps_level)
    sd = total_noise_sd(2, 12, sigma2, True)
    level = choose_level(2, 12, sigma2, tp[0].sum(), tn[0].sum(), True)
    cov = level_noise_covariance(2, 12, level)
    truth = level_auc(tp[level - 1], tn[level - 1], cov, 0.0).raw
    z = 1.959964
    wald, fieller, kept, selective = [], [], [], []
    for _ in range(800):
        p, q = _noisy(tp, eps_level, rng)[level - 1], _noisy(tn, eps_level, rng)[level - 1]
        est = level_auc(p, q, cov, sigma2)
        half = z * math.sqrt(est.noise_variance)
        wald.append((est.auc - half, est.auc + half))
        fieller.append(ratio_test(p, q, cov, sigma2, 0.0).fieller(0.95))
        if min(p.sum(), q.sum()) >= 7 * sd:
            kept.append(fieller[-1])
            selective.append(ratio_test(p, q, cov, sigma2, 0.0, threshold=7 * sd).interval(0.95))
    w, f = np.array(wald), np.array(fieller, dtype=float)
    assert np.mean(w[:, 0] > truth) < 0.005 and np.mean(w[:, 1] < truth) > 0.035
    assert 0.01 < np.mean(f[:, 0] > truth) < 0.04 and 0.01 < np.mean(f[:, 1] < truth) < 0.04
    clipped = np.clip(f, 0, 1), np.clip(w, 0, 1)  # as reported: and narrower
    assert np.mean(np.diff(clipped[0])) < np.mean(np.diff(clipped[1]))
    k, sel = np.array(kept, dtype=float), np.array(selective, dtype=float)
    assert 150 < len(k) < 250
    assert np.mean((k[:, 0] <= truth) & (truth <= k[:, 1])) < 0.935
    assert np.mean((sel[:, 0] <= truth) & (truth <= sel[:, 1])) > 0.955


def test_a_class_too_small_for_an_auc_stops_before_the_tree():
    # Issue 13: 5 x 100 rows, 51 positives, epsilon 1, Q 256. The rule that read the tree's
    # own positive total (noise raised it to 91, 6.4 noise SDs) released AUC 0.70 (pooled
    # 0.97). Now the class counts go first with noise of their own, at the budget of one
    # level: they cannot show the 6 tree SDs an AUC needs, so the tree stays at the sites
    # and each site spends epsilon 1 / (h + 1) only.
    parts = _rare_sites(seed=1, n=100)
    sites = [
        Site(k, v, policy=DisclosurePolicy(epsilon_limit=math.inf), noise_seed=55)
        for k, v in parts.items()
    ]
    res = evaluate(
        Federation.from_sites(sites),
        "histogram",
        quantiles=256,
        dp_epsilon=1.0,
        calibration_bins=None,
    )
    assert math.isnan(res.auc) and res.auc_ci is None
    reason = res.extra["ci_withheld"]
    assert "class counts released first" in reason and "tree was not released" in reason
    height = res.extra["height"]
    # Charged twice the share (a row moved, its counts public: H1).
    assert res.released.epsilon == {k: pytest.approx(2.0 / (height + 1)) for k in parts}
    for site in sites:  # the sites' own ledgers: one release, the counts
        [event] = site.ledger.events
        assert "class counts" in event.note and event.epsilon == pytest.approx(2 / (height + 1))
    # A released run spends the whole epsilon: the counts and the h levels, 1 / (h + 1) each,
    # each charged twice (a row moved, its counts public: H1).
    big = _rare_sites(seed=1, n=2000)
    fed = _federation(big, 3)
    res = evaluate(fed, "histogram", quantiles=256, dp_epsilon=1.0, calibration_bins=None)
    assert math.isfinite(res.auc) and res.auc_ci is not None
    assert res.released.epsilon == {k: pytest.approx(2.0) for k in big}
    events = res.released.dp["s0"]
    assert len(events) == height + 1 and "class counts" in events[0]["note"]
    assert [e["epsilon"] for e in events] == pytest.approx([2.0 / (height + 1)] * (height + 1))


def test_the_release_decision_selects_nothing_in_the_trees_noise():
    # The decision reads only the class counts released first. Over the noise, with the
    # data fixed at the rule (125 positives of 1200 rows: about half the runs released),
    # the AUC's first-order noise term has mean 0 among the runs the decision releases;
    # selecting on the tree's own positive total, as the old rule did, shifts it.
    from scipy import special

    from fedroc.methods.histogram import _counts_withheld
    from fedroc.methods.histogram._protocol import NoisyCounts, check_options

    rng = np.random.default_rng(21)
    y = np.arange(1200) < 125
    s = special.ndtr(rng.normal(2.48 * y, 1.0))
    opts = check_options(
        quantiles=256, dp_epsilon=1.0, dp_mode="distributed", dp_noise="discrete",
        branching=2, height=None, score_range=None, score_transform=None,
        post_processing=True, threshold=None, allow_dropouts=False, calibration_bins=None,
        oversampling=None, interpolation="pchip",
    )  # fmt: skip
    h = opts.height
    pos, neg = count_leaves(y, s, 2**h, 0.0, 1.0)
    tp = levels_from_leaves(pos.astype(float), 2)
    tn = levels_from_leaves(neg.astype(float), 2)
    sigma2 = node_noise_variance("discrete", opts.eps_level)
    sd = total_noise_sd(2, h, sigma2, True)
    level = 6
    p_, q_ = tp[level - 1], tn[level - 1]
    v10 = (np.cumsum(q_) - 0.5 * q_) / q_.sum()
    auc = p_ @ v10 / p_.sum()
    alpha = 1.0 - math.exp(-opts.eps_level)
    first, by_counts, by_tree = [], [], []
    for _ in range(3000):
        e = _noisy(tp, opts.eps_level, rng)  # the consistent noisy tree of the positives
        count = tp[0].sum() + rng.negative_binomial(1, alpha) - rng.negative_binomial(1, alpha)
        counts = NoisyCounts((count, float(tn[0].sum())), math.sqrt(sigma2), 0.1, ["pooled"])
        first.append(float((e[level - 1] - p_) @ (v10 - auc) / p_.sum()))
        by_counts.append(_counts_withheld(counts, opts) is None)
        by_tree.append(e[0].sum() >= 6 * sd + 2 * math.sqrt(sigma2))
    first_a, kept, old = np.array(first), np.array(by_counts), np.array(by_tree)
    assert 0.2 < kept.mean() < 0.8 and 0.2 < old.mean() < 0.8
    mcse = first_a.std() / math.sqrt(kept.sum())
    assert abs(first_a[kept].mean() - first_a.mean()) < 3 * mcse
    assert first_a[old].mean() - first_a.mean() < -5 * mcse  # pulled towards chance


def test_brier_and_calibration_carry_their_noise(rare_tree):
    y, s, tp, tn = rare_tree
    eps_level = 1.0 / 12
    sigma2 = node_noise_variance("discrete", eps_level)
    exact = dp_brier(tp[-1], tn[-1], branching=2, height=12, sigma2=0.0, post_processing=True)
    assert exact.value == pytest.approx(brier_score(y, s), abs=1e-6)
    assert exact.noise_sd == 0.0
    rng = np.random.default_rng(7)
    values, sds, covered = [], [], 0
    for _ in range(300):
        p, q = _noisy(tp, eps_level, rng)[-1], _noisy(tn, eps_level, rng)[-1]
        est = dp_brier(p, q, branching=2, height=12, sigma2=sigma2, post_processing=True)
        values.append(est.value)
        sds.append(est.noise_sd)
        covered += abs(est.value - exact.value) <= 1.96 * est.noise_sd
    values = np.array(values)
    assert abs(values.mean() - exact.value) < 3 * values.std() / math.sqrt(values.size)
    assert np.mean(sds) == pytest.approx(values.std(), rel=0.15)
    assert covered / 300 > 0.9
    cal = dp_calibration(
        _noisy(tp, eps_level, rng)[-1],
        _noisy(tn, eps_level, rng)[-1],
        10,
        branching=2,
        height=12,
        sigma2=sigma2,
        post_processing=True,
    )
    shown = ~cal.curve.suppressed
    assert shown.any() and cal.withheld  # sparse bins of 1500 rows cannot carry a fraction
    assert np.isnan(cal.curve.observed_fraction[~shown]).all()
    assert (cal.observed_sd[shown] > 0).all()


def _rare_sites(seed=0, n=300, sites=5):
    from scipy import special

    rng = np.random.default_rng(seed)
    parts = {}
    for k in range(sites):
        y = rng.random(n) < 0.1
        parts[f"s{k}"] = SiteData.from_arrays(y, special.ndtr(rng.normal(2.48 * y, 1.0)))
    return parts


def _federation(parts, noise_seed):
    policy = DisclosurePolicy(epsilon_limit=math.inf)
    return Federation.from_sites(
        [Site(k, v, policy=policy, noise_seed=noise_seed) for k, v in parts.items()]
    )


def test_dp_results_state_their_noise_instead_of_crashing():
    parts = _rare_sites()
    pooled = pool_site_data(parts)
    # Epsilon 0.1 over 8 levels: noise SD about 113 on every count, 150 positives.
    for seed in range(12):
        res = evaluate(_federation(parts, seed), "histogram", quantiles=64, dp_epsilon=0.1)
        text = " ".join(res.extra["caveats"])
        assert "DP noise" in text and "noise SD" in text
        assert "0 negative rows" not in text
        assert res.auc_ci is None and math.isnan(res.auc)
        assert "estimated number of" in text or "class total" in text
    # Epsilon 1 over 12 levels: an estimate, its interval and the Brier score's noise.
    res = evaluate(
        _federation(parts, 4), "histogram", quantiles=1024, dp_epsilon=1.0, pooled=pooled
    )
    low, high = res.auc_ci
    assert low <= roc_auc(pooled.label, pooled.score) <= high
    assert res.extra["auc_level"] >= 5 and res.extra["auc_noise_sd"] > 0
    assert abs(res.extra["brier"] - brier_score(pooled.label, pooled.score)) < (
        4 * res.extra["brier_noise_sd"]
    )
    assert res.extra["brier_ci"][0] < res.extra["brier"] < res.extra["brier_ci"][1]
    assert any("Brier" in c for c in res.extra["caveats"])


def test_a_class_total_drowned_by_noise_gives_a_result():
    parts = _rare_sites(n=200)
    res = evaluate(
        _federation(parts, 1), "histogram", quantiles=1024, dp_epsilon=0.02, calibration_bins=None
    )
    assert math.isnan(res.auc) and res.auc_ci is None
    assert any("estimated number of" in c or "class total" in c for c in res.extra["caveats"])
    assert res.released.epsilon  # the budget was spent, and the result says what it bought
    res.to_dict()
    # Nothing falls back to statistics in the clear: no Brier sums, no calibration bins.
    fed = _federation(parts, 1)
    res = evaluate(fed, "histogram", quantiles=1024, dp_epsilon=0.02)
    assert res.extra["brier"] is None and res.extra["calibration"] is None
    assert {c.function for c in fed.transcript} <= {
        c.function for c in fed.transcript if c.function.startswith("fedroc.secagg.")
    }
    with pytest.raises(InputError, match="dp_mode 'local' needs dp_epsilon"):
        evaluate(fed, "histogram", dp_mode="local")


def test_local_dp_noises_each_site_fully():
    parts = _rare_sites(n=400)
    fed = _federation(parts, 2)
    res = evaluate(fed, "histogram", quantiles=16, dp_epsilon=1.0, dp_mode="local")
    assert res.extra["mode"] == "local-dp"
    assert res.released.epsilon == {k: pytest.approx(2.0) for k in parts}  # charged 2x (H1)
    # epsilon / (h + 1) per level: the class counts released first take one share.
    sigma2 = node_noise_variance("discrete", 1.0 / (res.extra["height"] + 1))
    assert res.extra["noise_sd"] == pytest.approx(math.sqrt(5 * sigma2))
    sigma2 = node_noise_variance("discrete", 1.0 / res.extra["height"])  # asked directly
    # The attack a share count would allow: each site's own release must hold a full
    # draw, whatever the number of sites (no secure aggregation hides it).
    height = res.extra["height"]
    replies = fed.call(
        LOCAL_NAME,
        branching=2,
        height=height,
        lo=0.0,
        hi=1.0,
        transform=None,
        epsilon=1.0,
        noise="discrete",
    )
    for name, reply in replies.items():
        y, s = parts[name].label, parts[name].score
        pos, neg = count_leaves(y, s, 2**height, 0.0, 1.0)
        exact = np.concatenate(levels_from_leaves(pos, 2) + levels_from_leaves(neg, 2))
        noise = np.concatenate([reply["pos"], reply["neg"]]) - exact
        assert np.var(noise) == pytest.approx(sigma2, rel=0.35)
    assert {c.kinds[n] for c in fed.transcript if c.function == LOCAL_NAME for n in c.kinds} == {
        "noisy"
    }


# -- interpolations --------------------------------------------------------------------------
def test_interpolations_against_their_definitions():
    q = np.array([0.1, 0.3, 0.6, 0.9])
    fr = np.linspace(0, 1, 4)
    y = 1 - fr
    x = np.array([0.05, 0.1, 0.2, 0.3, 0.45, 0.9, 0.95])
    np.testing.assert_allclose(
        survival_function(q, fr, "linear")(x), np.r_[1, np.interp(x[1:-1], q, y), 0]
    )
    # midpoint: the mean of the previous and next points (steps), the points themselves on knots.
    expected = [1.0, 1.0, (y[0] + y[1]) / 2, y[1], (y[1] + y[2]) / 2, 0.0, 0.0]
    np.testing.assert_allclose(survival_function(q, fr, "midpoint")(x), expected)
    rng = np.random.default_rng(2)
    yy = rng.random(20000) < 0.3
    s = 1 / (1 + np.exp(-(rng.normal(size=yy.size) + 1.5 * yy)))
    fpr, tpr, _ = roc_curve(yy, s)
    for method in ("pchip", "linear", "midpoint"):
        errors = []
        for n_q in (8, 64, 512):
            fr = np.linspace(0, 1, n_q)
            c = approximate_curves(
                np.quantile(s[yy], fr), np.quantile(s[~yy], fr), fr, 1, 1, 0, 1, method
            )
            errors.append(roc_area_error(fpr, tpr, c.fpr, c.tpr))
        assert errors[0] > errors[1] > errors[2], method


def test_interpolation_option_end_to_end_and_error_metrics():
    parts = _rare_sites(n=2000, sites=3)
    pooled = pool_site_data(parts)
    fed = Federation.from_sites([Site(k, v) for k, v in parts.items()])
    res = {
        m: evaluate(fed, "histogram", pooled=pooled, quantiles=64, interpolation=m, oversampling=1)
        for m in ("pchip", "linear")
    }
    assert res["pchip"].auc != res["linear"].auc
    for r in res.values():
        d = r.details
        assert r.extra["auc_error"] == pytest.approx(
            abs(d.curve_auc - roc_auc(pooled.label, pooled.score))
        )
        ap = float(np.sum(np.diff(d.tpr) * d.precision[1:]))
        assert r.extra["average_precision"] == pytest.approx(ap)
        assert r.extra["ap_error"] == pytest.approx(
            abs(ap - average_precision(pooled.label, pooled.score))
        )


# -- baselines -----------------------------------------------------------------------------
def test_monotone_projections_against_independent_solvers():
    from scipy.optimize import linprog
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(3)
    x = np.cumsum(rng.normal(0.02, 0.08, 60)) + 0.1
    l2 = monotone_projection(x, norm=2)
    ref = IsotonicRegression(y_min=0, y_max=1).fit_transform(np.arange(x.size), x)
    np.testing.assert_allclose(l2, ref, atol=1e-10)
    l1 = monotone_projection(x, norm=1)
    assert np.all(np.diff(l1) >= -1e-12) and l1.min() >= 0 and l1.max() <= 1
    # The same l1 problem written another way: variables (f, t), t >= |f - x|.
    n = x.size
    c = np.r_[np.zeros(n), np.ones(n)]
    eye = np.eye(n)
    mono = np.hstack([np.eye(n - 1, n) - np.eye(n - 1, n, 1), np.zeros((n - 1, n))])
    a = np.vstack([np.hstack([eye, -eye]), np.hstack([-eye, -eye]), mono])
    b = np.r_[x, -x, np.zeros(n - 1)]
    best = linprog(c, A_ub=a, b_ub=b, bounds=[(0, 1)] * n + [(0, None)] * n, method="highs")
    assert np.abs(l1 - x).sum() == pytest.approx(best.fun, abs=1e-8)


def test_baselines_approach_the_empirical_curves():
    rng = np.random.default_rng(4)
    y = rng.random(20000) < 0.3
    s = 1 / (1 + np.exp(-(rng.normal(size=y.size) + 1.5 * y)))
    fpr, tpr, _ = roc_curve(y, s)
    eq = [
        roc_area_error(fpr, tpr, *(lambda c: (c.fpr, c.tpr))(exact_quantile_curves(y, s, q)))
        for q in (4, 32, 256)
    ]
    assert eq[0] > eq[1] > eq[2]
    fr = np.linspace(0, 1, 32)
    same = approximate_curves(
        np.quantile(s[y], fr), np.quantile(s[~y], fr), fr, y.sum(), (~y).sum(), 0, 1
    )
    np.testing.assert_allclose(exact_quantile_curves(y, s, 32).tpr, same.tpr)
    loose = dp_ecdf_curves(y, s, 64, 1e6, rng=0)
    assert roc_area_error(fpr, tpr, loose.fpr, loose.tpr) < 2e-3  # no noise: bins only
    noisy = [
        roc_area_error(fpr, tpr, *(lambda c: (c.fpr, c.tpr))(dp_ecdf_curves(y, s, 64, e, rng=1)))
        for e in (0.05, 100.0)
    ]
    assert noisy[0] > noisy[1]


def test_dp_ecdf_noise_has_the_binary_tree_variance():
    from fedroc.methods.histogram.baselines import _tree_noise

    rng = np.random.default_rng(5)
    draws = np.array([_tree_noise(16, 2.0, rng) for _ in range(4000)])
    levels = 5  # ceil(log2 16) + 1
    assert draws.var(axis=0).mean() == pytest.approx(levels * 2 * (levels / 2.0) ** 2, rel=0.08)


# -- figures --------------------------------------------------------------------------------
def test_paper5_figures_are_written(tmp_path):
    from fedroc.figures import make_figures

    made = make_figures(5, tmp_path, quick=True, seed=1)
    assert [f.figure for f, _ in made] == ["1", "2", "3", "4"]
    for figure, path in made:
        assert path.name == f"paper5_figure{figure.figure}.png" and path.stat().st_size > 5000


def test_cli_histogram_dp_mode_and_interpolation(tmp_path, capsys):
    import json

    from fedroc.cli import main

    parts = _rare_sites(n=800, sites=3)
    args = ["evaluate", "--method", "histogram", "--json", "--quantiles", "32"]
    for name, d in parts.items():
        path = tmp_path / f"{name}.csv"
        pd.DataFrame({"label": d.label.astype(int), "score": d.score}).to_csv(path, index=False)
        args += ["--site", f"{name}={path}"]
    main([*args, "--interpolation", "linear"])
    assert json.loads(capsys.readouterr().out)["interpolation"] == "linear"
    main([*args, "--dp-epsilon", "1", "--dp-mode", "local"])
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "local-dp" and out["caveats"]
    for bad in (["--dp-mode", "central", "--dp-epsilon", "1"], ["--interpolation", "cubic"]):
        with pytest.raises(SystemExit) as exc:
            main([*args, *bad])
        assert exc.value.code == 2
    assert leaf_index(np.array([1.0]), 4)[0] == 3


def test_cli_table_gives_each_dp_calibration_bin_its_noise_or_why_it_is_withheld(tmp_path, capsys):
    from fedroc.cli import main

    parts = _rare_sites(n=1500, sites=3)
    args = ["evaluate", "--method", "histogram", "--dp-epsilon", "1", "--quantiles", "256"]
    for name, d in parts.items():
        path = tmp_path / f"{name}.csv"
        pd.DataFrame({"label": d.label.astype(int), "score": d.score}).to_csv(path, index=False)
        args += ["--site", f"{name}={path}"]
    main(args)
    out = capsys.readouterr().out
    table = out[out.index("Calibration") :]
    rows = [line for line in table.splitlines() if line.startswith("│ [")]
    assert len(rows) == 10
    # Each bin states its noise SD or the reason it is withheld: under DP no bin is
    # withheld "at a site" (the counts are pooled, then noised).
    assert all("noise SD" in r or "within 3 noise SDs of 0" in r for r in rows), table
    assert "withheld at a site" not in table
    assert "Brier" in out and "Brier noise SD" in out


def test_the_refusal_after_a_local_dp_tree_names_the_local_tree():
    """Since R24 a local-DP tree binds a site to the clear way of exact binned counts, so
    ``evaluate(..., "rocglm")``, the exact histogram tree, the clustered method or a secure
    calibration after ``--dp-mode local`` is refused. The refusal says the site "released
    exact binned counts in the clear before": an analyst who released only DP-noised
    trees cannot tell why, or what still runs. It names the local-DP tree now."""
    from fedroc.exceptions import DisclosureError
    from fedroc.secagg import secure_calibration

    rng = np.random.default_rng(24)
    sites = [
        Site(f"s{k}", SiteData.from_arrays(rng.random(200) < 0.4, rng.random(200)))
        for k in range(3)
    ]
    fed = Federation.from_sites(sites)
    fed.call(LOCAL_NAME, epsilon=1.0, branching=2, height=4, lo=0.0, hi=1.0)
    with pytest.raises(DisclosureError) as exc:
        secure_calibration(fed, n_bins=10)
    assert "local" in str(exc.value)
