"""Merging and the secure AUCs against fedroc.metrics (itself tested against scikit-learn).

Exactness cases: heavy ties, all-equal scores, an owner with one class only, owners of very
different sizes, extreme floats; the paper's merge with delta must give the same numbers.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fedroc.exceptions import InputError
from fedroc.metrics import pr_auc, roc_auc
from fedroc.mpc import ring
from fedroc.mpc.auc import AucSpec, owner_records
from fedroc.mpc.local import random_shares, secure_auc_local
from fedroc.mpc.runtime import run_local
from fedroc.mpc.sort import bitonic_plan, delta_sort, oblivious_sort

SEED = b"fedroc-mpc-auc-tests"
TOL = 1e-12


def pooled(owners):
    y = np.concatenate([np.asarray(o[0]) for o in owners])
    s = np.concatenate([np.asarray(o[1], dtype=float) for o in owners])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return roc_auc(y, s), pr_auc(y, s)


def check(owners, **kwargs):
    result = secure_auc_local(owners, master_seed=SEED, **kwargs)
    auc, pr = pooled(owners)
    for name, ref in (("auc", auc), ("pr_auc", pr)):
        got = result.values[name]
        if np.isnan(ref):
            assert np.isnan(got), name
        else:
            assert abs(got - ref) <= TOL, (name, got, ref)
    return result


def owners_from(rng, sizes, levels=None, shift=0.7):
    out = []
    for n in sizes:
        y = rng.integers(0, 2, n)
        s = rng.normal(size=n) + shift * y
        if levels is not None:
            s = np.round(s * levels) / levels
        out.append((y, s))
    return out


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
    none_positive = [(np.zeros(4, int), [0.1, 0.2, 0.3, 0.3])]
    result = check(none_positive)
    assert np.isnan(result.values["auc"]) and np.isnan(result.values["pr_auc"])
    all_positive = [(np.ones(4, int), [0.1, 0.2, 0.3, 0.3])]
    result = check(all_positive)  # AUROC undefined; AUPR is 1 (precision 1 everywhere)
    assert np.isnan(result.values["auc"]) and result.values["pr_auc"] == 1.0


def test_single_sample_owners():
    check([([1], [0.3]), ([0], [0.3]), ([0], [0.1]), ([1], [0.9])])


@pytest.mark.parametrize("delta", [1, 3])
def test_paper_merge_with_delta_is_exact(delta, rng):
    check(owners_from(rng, [20, 11, 6], levels=2), sort="delta", delta=delta)


def test_spec_validation():
    with pytest.raises(InputError, match="delta"):
        AucSpec((3, 4), sort="delta", delta=2)
    with pytest.raises(InputError, match="sort"):
        AucSpec((3, 4), sort="quick")
    with pytest.raises(InputError, match="at least one sample"):
        AucSpec((3, 0))
    spec = AucSpec((10**5,))
    assert spec.prec_bits == 40  # 2**-40 ~ 9e-13 resolution of each precision


def test_owner_records_are_sorted_descending():
    rec = owner_records([1, 0, 1, 0], [0.2, -3.0, 7.5, 0.2])
    key = (rec[:, 0] << np.uint64(63)) | rec[:, 1]
    assert np.all(key[:-1] >= key[1:])
    assert np.array_equal(key, np.sort(ring.float_key([0.2, -3.0, 7.5, 0.2]))[::-1])
