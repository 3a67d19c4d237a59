"""DeLong variance, intervals and tests against brute-force pairwise versions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import tied_data
from scipy import stats

from fedroc import metrics as fm
from fedroc.exceptions import InputError


def psi(x_pos, x_neg):
    """Kernel of the Mann-Whitney statistic: 1 if pos > neg, 1/2 on ties."""
    return (x_pos[:, None] > x_neg[None, :]) + 0.5 * (x_pos[:, None] == x_neg[None, :])


def brute_delong(y, s):
    """DeLong et al. (1988) with the explicit n_pos x n_neg kernel matrix."""
    y = np.asarray(y, bool)
    k = psi(s[y], s[~y])
    v10 = k.mean(axis=1)
    v01 = k.mean(axis=0)
    m, n = k.shape
    auc = k.mean()
    s10 = np.sum((v10 - auc) ** 2) / (m - 1)
    s01 = np.sum((v01 - auc) ** 2) / (n - 1)
    return auc, s10 / m + s01 / n, v10, v01


@pytest.mark.parametrize("levels", [1, 4, None])
@pytest.mark.parametrize("n", [5, 40, 333])
def test_fast_delong_equals_brute_force(n, levels):
    rng = np.random.default_rng(n + (levels or 99))
    for _ in range(4):
        y, s = tied_data(rng, n, levels)
        if min(y.sum(), (1 - y).sum()) < 2:
            continue
        auc, var, v10, v01 = brute_delong(y, s)
        res = fm.delong(y, s)
        assert res.auc == pytest.approx(auc, abs=1e-12)
        assert res.variance == pytest.approx(var, rel=1e-10, abs=1e-15)
        pv = fm.placement_values(y, s)
        np.testing.assert_allclose(pv.v10, v10, atol=1e-12)  # input order of positives
        np.testing.assert_allclose(pv.v01, 1 - (1 - v01), atol=1e-12)


def test_delong_from_counts_equals_delong_on_binned_scores(rng):
    y, s = tied_data(rng, 500, None)
    bins = np.clip(np.floor((s + 3) * 4), 0, 23).astype(int)
    pos_counts = np.bincount(bins[y == 1], minlength=24)
    neg_counts = np.bincount(bins[y == 0], minlength=24)
    a = fm.delong_from_counts(pos_counts, neg_counts)
    b = fm.delong(y, bins.astype(float))
    assert a.auc == pytest.approx(b.auc, abs=1e-12)
    assert a.variance == pytest.approx(b.variance, rel=1e-10)
    with pytest.raises(InputError, match="non-negative"):
        fm.delong_from_counts([1, -1], [1, 1])


def test_intervals_and_one_sided_test(rng):
    y, s = tied_data(rng, 300, None)
    res = fm.delong(y, s, confidence_level=0.9)
    z = stats.norm.ppf(0.95)
    logit = math.log(res.auc / (1 - res.auc))
    half = z * res.se / (res.auc * (1 - res.auc))
    lo, hi = res.confidence_interval()
    assert lo == pytest.approx(1 / (1 + math.exp(-(logit - half))), abs=1e-12)
    assert hi == pytest.approx(1 / (1 + math.exp(-(logit + half))), abs=1e-12)
    wlo, whi = res.confidence_interval(0.9, method="wald")
    assert (wlo, whi) == pytest.approx((res.auc - z * res.se, res.auc + z * res.se))
    # Rejecting H0: AUC <= a0 at alpha means logit(a0) lies below the two-sided
    # (1 - 2 alpha) logit interval; check the equivalence at its lower end.
    alpha = 0.05
    lo90, _ = res.confidence_interval(1 - 2 * alpha)
    _, p_below = res.test_greater(lo90 - 1e-6)
    _, p_above = res.test_greater(lo90 + 1e-6)
    assert p_below < alpha < p_above


def test_wald_interval_is_clipped():
    res = fm.DeLongResult(auc=0.99, variance=0.01**2 * 9, n_pos=10, n_neg=10)
    assert res.confidence_interval(method="wald")[1] == 1.0
    lo, hi = fm.DeLongResult(auc=1.0, variance=0.0, n_pos=5, n_neg=5).confidence_interval()
    assert math.isnan(lo) and math.isnan(hi)  # logit undefined at AUC = 1


def test_paired_comparison_equals_brute_force(rng):
    n = 250
    y = rng.integers(0, 2, n)
    a = rng.normal(size=n) + 0.8 * y
    b = np.round(a + rng.normal(scale=0.7, size=n), 1)  # correlated, tied
    _, _, v10a, v01a = brute_delong(y, a)
    _, _, v10b, v01b = brute_delong(y, b)
    m, k = y.sum(), n - y.sum()
    cov = np.cov(np.vstack([v10a, v10b])) / m + np.cov(np.vstack([v01a, v01b])) / k
    res = fm.delong_paired(y, a, b)
    np.testing.assert_allclose(res.covariance, cov, rtol=1e-10)
    se = math.sqrt(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    assert res.z == pytest.approx((v10a.mean() - v10b.mean()) / se)
    assert res.p_value == pytest.approx(2 * stats.norm.sf(abs(res.z)))
    # Same score twice: no difference, zero variance of the difference.
    same = fm.delong_paired(y, a, a)
    assert same.difference == 0 and same.se_difference == pytest.approx(0, abs=1e-12)


def test_delong_variance_matches_monte_carlo():
    # The DeLong variance estimates the sampling variance of the AUC: compare its mean
    # over replicates with the empirical variance of the AUCs (seeded, binormal data).
    rng = np.random.default_rng(7)
    aucs, variances = [], []
    y = np.r_[np.ones(60, int), np.zeros(90, int)]
    for _ in range(600):
        s = rng.normal(size=150) + 1.0 * y
        r = fm.delong(y, s)
        aucs.append(r.auc)
        variances.append(r.variance)
    assert np.mean(variances) == pytest.approx(np.var(aucs, ddof=1), rel=0.15)
