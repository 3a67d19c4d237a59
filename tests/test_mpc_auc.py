"""Merging, the secure AUCs and DeLong's variance against fedroc.metrics (itself tested
against scikit-learn and pROC).

Exactness cases (full precision, ``frac_bits=52``): heavy ties, all-equal scores, an owner
with one class only, owners of very different sizes, extreme floats; the paper's merge with
delta must give the same numbers. The variance is compared with :func:`fedroc.metrics.delong`
(ties counted one half) to 1e-12, and the logit CI to 1e-9. At the default precision the
opened values must be the exact ones rounded to ``2**-14``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fedroc.exceptions import InputError
from fedroc.metrics import delong, delong_paired, logit_ci, pr_auc, roc_auc
from fedroc.mpc import ring
from fedroc.mpc.auc import AucSpec, owner_records
from fedroc.mpc.local import random_shares, secure_auc_local
from fedroc.mpc.runtime import run_local
from fedroc.mpc.sort import bitonic_plan, delta_sort, oblivious_sort
from tests._mpc_data import owners_from

SEED = b"fedroc-mpc-auc-tests"
TOL = 1e-12


def pooled(owners):
    y = np.concatenate([np.asarray(o[0]) for o in owners])
    s = np.concatenate([np.asarray(o[1], dtype=float) for o in owners])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return roc_auc(y, s), pr_auc(y, s)


def check(owners, *, min_class_count=1, ci=False, **kwargs):
    """Full precision against fedroc.metrics; with ci, DeLong's variance too."""
    result = secure_auc_local(
        owners,
        master_seed=SEED,
        frac_bits=52,
        min_class_count=min_class_count,
        ci=ci,
        **kwargs,
    )
    auc, pr = pooled(owners)
    out = result.outputs
    for name, ref, got in (("auc", auc, out.auc), ("pr_auc", pr, out.pr_auc)):
        if np.isnan(ref):
            assert np.isnan(got), name
        else:
            assert abs(got - ref) <= TOL, (name, got, ref)
    if ci:
        y = np.concatenate([np.asarray(o[0]) for o in owners])
        s = np.concatenate([np.asarray(o[1], dtype=float) for o in owners])
        ref = delong(y, s)
        assert abs(out.variance - ref.variance) <= TOL * max(1.0, ref.variance), (
            out.variance,
            ref.variance,
        )
        ref_ci = np.array(ref.confidence_interval(method="logit"))  # MPC keeps the logit CI
        got_ci = np.array(logit_ci(out.auc, out.se))
        assert np.array_equal(np.isnan(got_ci), np.isnan(ref_ci))  # NaN at AUC 0 or 1
        assert np.nanmax(np.abs(got_ci - ref_ci), initial=0.0) <= 1e-9
    return result


# -- merging -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sizes", [[1], [1, 1], [2, 3], [5, 64], [1, 100], [7, 7, 7], [3, 1, 4, 1, 5, 9, 2, 6], [16, 16]]
)
def test_bitonic_plan_sorts_any_lists(sizes, rng):
    keys = np.concatenate([np.sort(rng.integers(0, 5, n))[::-1] for n in sizes]).astype(float)
    plan = bitonic_plan(sizes)
    x = keys.copy()
    for hi, lo in plan.layers:  # plain compare-exchange: the larger into hi
        big, small = np.maximum(x[hi], x[lo]), np.minimum(x[hi], x[lo])
        x[hi], x[lo] = big, small
    merged = x[plan.order]
    assert np.array_equal(merged, np.sort(keys)[::-1])
    assert sorted(plan.order.tolist()) == list(range(sum(sizes)))
    # Comparisons with padding are skipped: never more than a full network on 2**k slots.
    assert plan.comparisons <= sum(sizes) * max(1, int(np.ceil(np.log2(sum(sizes))))) ** 2


def test_bitonic_plan_on_random_owner_sizes(rng):
    for _ in range(40):
        sizes = rng.integers(1, 40, rng.integers(1, 9)).tolist()
        keys = np.concatenate([np.sort(rng.integers(0, 9, n))[::-1] for n in sizes])
        plan = bitonic_plan(sizes)
        x = keys.copy()
        for hi, lo in plan.layers:
            x[hi], x[lo] = np.maximum(x[hi], x[lo]), np.minimum(x[hi], x[lo])
        assert np.array_equal(x[plan.order], np.sort(keys)[::-1]), sizes


@pytest.mark.parametrize("mode", ["oblivious", "delta1", "delta3"])
def test_secure_merge_sorts_records(mode, rng):
    sizes = [9, 4, 13]
    lists = [owner_records(rng.integers(0, 2, n), np.round(rng.normal(size=n), 1)) for n in sizes]
    rec = np.concatenate(lists)
    shares = random_shares(rec)

    def program(i):
        def prog(p):
            r = shares[i] if i < 2 else np.zeros_like(rec)
            if mode == "oblivious":
                return oblivious_sort(p, r, bitonic_plan(sizes))
            return delta_sort(p, r, sizes, int(mode[-1]))

        return prog

    run = run_local([program(0), program(1), program(2)], master_seed=SEED)
    out = run.results[0] + run.results[1]
    key = (out[:, 0] << np.uint64(63)) | out[:, 1]
    assert np.all(key[:-1] >= key[1:])
    # Same multiset of (key, label) records.
    as_rows = lambda a: sorted(map(tuple, a.tolist()))  # noqa: E731
    assert as_rows(out) == as_rows(rec)


# -- AUCs ----------------------------------------------------------------------------------


def test_continuous_scores_and_the_no_tie_formula(rng):
    owners = owners_from(rng, [30, 45, 12])
    result = check(owners, noties=True)
    # Without ties the paper's Algorithm 5 (off-by-one fixed) is the AUROC.
    assert abs(result.values["auc_noties"] - result.values["auc"]) <= TOL


def test_heavy_ties(rng):
    owners = owners_from(rng, [40, 40, 40], levels=1)  # a handful of distinct scores
    result = check(owners, noties=True)
    # The no-tie formula depends on the order within ties: it lies between the AUCs that
    # count tied pairs as 0 and as 1.
    y = np.concatenate([o[0] for o in owners]).astype(bool)
    s = np.concatenate([o[1] for o in owners])
    pos, neg = s[y], s[~y]
    greater = (pos[:, None] > neg[None, :]).mean()
    at_least = (pos[:, None] >= neg[None, :]).mean()
    assert greater - TOL <= result.values["auc_noties"] <= at_least + TOL
    assert greater < at_least  # the data do have tied pairs


def test_all_scores_equal(rng):
    owners = [(rng.integers(0, 2, n), np.full(n, 0.25)) for n in (10, 17)]
    result = check(owners)
    assert result.values["auc"] == 0.5


def test_owner_with_one_class_and_very_different_sizes(rng):
    big = owners_from(rng, [300], levels=10)[0]
    owners = [big, (np.ones(3, int), np.array([0.1, 0.5, 0.5])), (np.zeros(1, int), [2.0])]
    check(owners)


def test_extreme_and_negative_floats(rng):
    s = np.array([-1e300, -5e-324, -0.0, 0.0, 5e-324, 1e-300, 1.0, 1e300, 1e300, -2.0])
    y = np.array([0, 1, 0, 1, 0, 1, 0, 1, 0, 1])
    check([(y[:4], s[:4]), (y[4:], s[4:])])


def test_one_class_overall_gives_nan():
    # Nothing is opened unless both classes reach the minimum count (here 1), not even the
    # AUPR of an all-positive list (which would be 1).
    for labels in (np.zeros(4, int), np.ones(4, int)):
        result = secure_auc_local(
            [(labels, [0.1, 0.2, 0.3, 0.3])], frac_bits=52, min_class_count=1, ci=False
        )
        assert not result.outputs.released
        assert np.isnan(result.values["auc"]) and np.isnan(result.values["pr_auc"])


def test_single_sample_owners():
    check([([1], [0.3]), ([0], [0.3]), ([0], [0.1]), ([1], [0.9])])


@pytest.mark.parametrize("delta", [1, 3])
def test_paper_merge_with_delta_is_exact(delta, rng):
    check(owners_from(rng, [20, 11, 6], levels=2), sort="delta", delta=delta)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sort": "delta", "delta": 2}, "delta must be a positive odd"),
        ({"sort": "quick"}, "sort must be"),
        ({"frac_bits": 80}, r"frac_bits .* \[1, 52\]; got 80"),
        ({"frac_bits": 0}, "frac_bits"),
        ({"frac_bits": True}, "frac_bits"),
        ({"frac_bits": 14.0}, "frac_bits"),
        ({"min_class_count": 0}, "min_class_count"),
        ({"min_class_count": 1}, "needs min_class_count >= 2"),
        ({"ci": "yes"}, "ci must be true or false"),
        ({"noties": 1}, "noties must be true or false"),
        ({"sort": "delta", "delta": 9}, "exceeds the number of samples"),
        ({"compare": True, "ci": False}, "compare requires ci"),
    ],
)
def test_every_job_parameter_is_validated(kwargs, message):
    with pytest.raises(InputError, match=message):
        AucSpec((3, 4), **kwargs)


def test_spec_validation():
    with pytest.raises(InputError, match="at least one sample"):
        AucSpec((3, 0))
    with pytest.raises(InputError, match="at most"):
        AucSpec((2**20, 1))  # the CI's integers need n <= 2**20
    AucSpec((2**20, 1), ci=False)
    spec = AucSpec((10**5,))
    assert spec.prec_bits == 40  # 2**-40 ~ 9e-13 resolution of each precision
    assert spec.frac_bits == 14 and spec.var_frac_bits == 28 and spec.min_class_count == 5
    with pytest.raises(InputError, match="exactly the keys"):
        AucSpec.from_record({**spec.to_record(), "extra": 1})
    assert AucSpec.from_record(spec.to_record()) == spec


# -- DeLong's variance, precision, minimum class count -------------------------------------


@pytest.mark.parametrize("levels", [None, 1, 4])
def test_delong_variance_is_exact_with_ties(levels, rng):
    check(owners_from(rng, [40, 55, 31], levels=levels), min_class_count=2, ci=True)


def test_delong_variance_edge_cases(rng):
    # Two positives; all scores tied; a perfect separation (placement variance 0).
    check([(np.r_[1, 1, np.zeros(60, int)], rng.normal(size=62))], min_class_count=2, ci=True)
    check([([1, 0, 1, 0], [0.5] * 4)], min_class_count=2, ci=True)
    y = np.r_[np.ones(20, int), np.zeros(25, int)]
    check([(y, np.r_[np.arange(20) + 100.0, np.arange(25)])], min_class_count=2, ci=True)


def test_opened_values_are_the_exact_ones_rounded(rng):
    owners = owners_from(rng, [70, 64, 90], levels=3)
    result = secure_auc_local(owners, master_seed=SEED)  # defaults: 14 bits, m = 5, CI
    out = result.outputs
    auc, pr = pooled(owners)
    y = np.concatenate([o[0] for o in owners])
    s = np.concatenate([o[1] for o in owners])
    var = delong(y, s).variance
    for got, ref, bits in ((out.auc, auc, 14), (out.pr_auc, pr, 14), (out.variance, var, 28)):
        assert got * 2**bits == round(ref * 2**bits), (got, ref, bits)
    assert out.auc != auc  # the rounding did happen


def test_minimum_class_count_is_checked_before_opening(rng):
    y = np.r_[np.ones(4, int), np.zeros(40, int)]
    s = rng.normal(size=44)
    withheld = secure_auc_local([(y[:20], s[:20]), (y[20:], s[20:])], min_class_count=5)
    assert not withheld.outputs.released
    assert np.isnan(withheld.outputs.auc) and np.isnan(withheld.outputs.variance)
    shown = secure_auc_local([(y[:20], s[:20]), (y[20:], s[20:])], min_class_count=4)
    assert shown.outputs.released and abs(shown.outputs.auc - roc_auc(y, s)) <= 2**-15


def test_owner_records_are_sorted_descending():
    rec = owner_records([1, 0, 1, 0], [0.2, -3.0, 7.5, 0.2])
    key = (rec[:, 0] << np.uint64(63)) | rec[:, 1]
    assert np.all(key[:-1] >= key[1:])
    assert np.array_equal(key, np.sort(ring.float_key([0.2, -3.0, 7.5, 0.2]))[::-1])


# -- two models on the same rows (paired DeLong) ---------------------------------------------


@pytest.mark.parametrize("levels", [None, 2])
def test_paired_comparison_is_exact(levels, rng):
    owners = []
    for n in (45, 30, 52):
        y = rng.integers(0, 2, n)
        a = rng.normal(size=n) + y
        b = 0.6 * a + 0.8 * rng.normal(size=n) + 0.3 * y  # correlated models
        if levels:
            a, b = np.round(a * levels) / levels, np.round(b * levels) / levels
        owners.append((y, a, b))
    out = secure_auc_local(
        owners, master_seed=SEED, frac_bits=52, min_class_count=2, compare=True
    ).outputs
    y = np.concatenate([o[0] for o in owners])
    a = np.concatenate([o[1] for o in owners])
    b = np.concatenate([o[2] for o in owners])
    ref = delong_paired(y, a, b)
    cov = ref.covariance
    assert abs(out.auc - ref.auc_a) <= TOL and abs(out.auc_b - ref.auc_b) <= TOL
    assert abs(out.pr_auc - pr_auc(y, a)) <= TOL and abs(out.pr_auc_b - pr_auc(y, b)) <= TOL
    assert abs(out.variance - cov[0, 0]) <= TOL and abs(out.variance_b - cov[1, 1]) <= TOL
    assert abs(out.variance_difference - (cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])) <= TOL
    assert abs(out.se_difference - ref.se_difference) <= 1e-9


def test_paired_comparison_at_the_default_precision_and_below_the_minimum(rng):
    y = rng.integers(0, 2, 80)
    a, b = rng.normal(size=80) + y, rng.normal(size=80) + 0.5 * y
    out = secure_auc_local([(y[:40], a[:40], b[:40]), (y[40:], a[40:], b[40:])], compare=True)
    ref = delong_paired(y, a, b)
    var_d = ref.se_difference**2
    assert out.outputs.auc_b * 2**14 == round(ref.auc_b * 2**14)
    assert out.outputs.variance_difference * 2**28 == round(var_d * 2**28)
    few = secure_auc_local([(np.r_[1, 1, np.zeros(20, int)], a[:22], b[:22])], compare=True)
    assert not few.outputs.released and np.isnan(few.outputs.variance_difference)
