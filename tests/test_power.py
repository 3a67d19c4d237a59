"""Hanley-McNeil SE, Obuchowski's variance, sample size and power."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedroc import metrics as fm
from fedroc.exceptions import InputError


def test_hanley_mcneil_published_ct_example():
    # Hanley & McNeil (1982), Table 1: ratings 1..5 of 58 normal and 51 abnormal CT images.
    normals = [33, 6, 6, 11, 2]
    abnormals = [3, 2, 2, 11, 33]
    ratings = np.arange(1, 6)
    s = np.r_[np.repeat(ratings, normals), np.repeat(ratings, abnormals)]
    y = np.r_[np.zeros(sum(normals), int), np.ones(sum(abnormals), int)]
    auc = fm.roc_auc(y, s)
    assert round(auc, 3) == 0.893  # published A
    se = fm.hanley_mcneil_se(auc, n_pos=51, n_neg=58)
    assert round(se, 3) == 0.032  # published SE


def test_obuchowski_variance_formula():
    theta, kappa = 0.8, 2.0
    a = 1.414 * stats.norm.ppf(theta)
    expected = 0.0099 * math.exp(-a * a / 2) * ((5 * a * a + 8) + (a * a + 8) / kappa)
    assert fm.obuchowski_variance(theta, kappa) == pytest.approx(expected, rel=1e-14)
    # At theta = 0.5 it is the null variance 0.0792 (1 + 1/kappa).
    assert fm.obuchowski_variance(0.5, kappa) == pytest.approx(0.0792 * 1.5, rel=1e-12)


def test_matches_proc_power_roc_test():
    # Reference values from pROC's own test suite (tests/testthat/test-power.roc.test.R),
    # computed by R's power.roc.test with Obuchowski's variance, two-sided.
    assert fm.auc_power(0.73, 41, kappa=72 / 41) == pytest.approx(0.9897453, abs=1e-6)
    # power.roc.test(r.s100b, power = 0.9, kappa = 1): s100b's AUC in aSAH is 0.7313686.
    auc_s100b = 0.731368563685637
    plan = fm.auc_sample_size(auc_s100b, power=0.9, kappa=1.0)
    assert plan.n_cases_exact == pytest.approx(29.5697422, abs=1e-5)
    plan = fm.auc_sample_size(auc_s100b, power=0.95, kappa=1.7)
    assert plan.n_cases_exact == pytest.approx(29.29764, abs=1e-5)
    assert plan.n_cases_exact * 1.7 == pytest.approx(49.806, abs=1e-3)


KAPPAS = [0.25, 0.5, 1, 2, 4]
THETAS = [0.6, 0.7, 0.8, 0.9, 0.95]
# Obuchowski (2004), Table 4 (one-sided alpha 0.05, power 0.9), as corrected in pROC's
# tests: at least 10 per cell, the complement adapted to kappa.
TABLE4_CONTROLS = [
    [84, 20, 10, 10, 10],
    [101, 25, 10, 10, 10],
    [135, 33, 14, 10, 10],
    [203, 50, 21, 20, 20],
    [340, 84, 40, 40, 40],
]
TABLE4_CASES = [
    [334, 80, 40, 40, 40],
    [202, 49, 20, 20, 20],
    [135, 33, 14, 10, 10],
    [102, 25, 11, 10, 10],
    [85, 21, 10, 10, 10],
]


@pytest.mark.parametrize("i", range(5))
@pytest.mark.parametrize("j", range(5))
def test_obuchowski_2004_table4(i, j):
    kappa, theta = KAPPAS[i], THETAS[j]
    plan = fm.auc_sample_size(theta, power=0.9, alpha=0.05, kappa=kappa, alternative="one-sided")
    cases = math.ceil(plan.n_cases_exact)
    controls = math.ceil(plan.n_cases_exact * kappa)
    shown_controls = max(10, (10 if cases < 10 else 0) * kappa, controls)
    shown_cases = max(10, (10 if controls < 10 else 0) / kappa, cases)
    assert shown_controls == TABLE4_CONTROLS[i][j]
    assert shown_cases == TABLE4_CASES[i][j]


def test_sample_size_and_power_are_inverse():
    for theta in (0.6, 0.7, 0.85):
        for kappa in (0.5, 1, 3):
            plan = fm.auc_sample_size(theta, power=0.9, alpha=0.05, kappa=kappa)
            assert fm.auc_power(theta, plan.n_cases, kappa=kappa) >= 0.9
            assert fm.auc_power(theta, plan.n_cases - 1, kappa=kappa) < 0.9
            assert plan.n_controls == math.ceil(plan.n_cases * kappa - 1e-9)
    one = fm.auc_sample_size(0.7, alternative="one-sided")
    two = fm.auc_sample_size(0.7, alternative="two-sided")
    assert one.n_cases < two.n_cases


def test_power_by_hand():
    theta, n, kappa = 0.75, 40, 1.0
    v0, va = 0.0792 * 2, fm.obuchowski_variance(theta, kappa)
    zb = (math.sqrt(n) * 0.25 - stats.norm.isf(0.025) * math.sqrt(v0)) / math.sqrt(va)
    assert fm.auc_power(theta, n) == pytest.approx(stats.norm.cdf(zb), rel=1e-12)


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda: fm.auc_sample_size(1.2), r"auc must lie in \(0, 1\); got 1.2"),
        (lambda: fm.auc_sample_size(0.5), "must differ from 0.5"),
        (lambda: fm.auc_sample_size(0.7, power=1.5), "power must lie"),
        (lambda: fm.auc_power(0.7, 0), "n_cases must be >= 1"),
        (lambda: fm.obuchowski_variance(0.7, kappa=0), "kappa"),
        (lambda: fm.hanley_mcneil_se(0.7, 0, 3), "n_pos and n_neg"),
        (lambda: fm.auc_sample_size(0.7, alternative="less"), "alternative"),
    ],
)
def test_bad_parameters(call, pattern):
    with pytest.raises(InputError, match=pattern):
        call()
