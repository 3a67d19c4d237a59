"""Engine of paper 2: hash table, subset sampling, h-Thresholdout_AUC and Thresholdout."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats
from sklearn.metrics import roc_auc_score

from fedroc.exceptions import InputError
from fedroc.methods.sequester import mechanism
from fedroc.methods.sequester.engine import (
    Session,
    auc_sensitivity,
    default_max_copies,
    draw_subsets,
    subset_auc,
    subset_aucs,
)
from fedroc.methods.sequester.mechanism import BudgetExhausted, Mechanism


@pytest.fixture
def data():
    rng = np.random.default_rng(7)
    y = rng.random(300) < 0.3
    s = np.round(rng.normal(size=300) + y, 1)  # rounded: ties on purpose
    return y, s


@pytest.mark.parametrize("replace", [True, False])
def test_subsets_have_the_prevalence_and_the_load_factor(data, replace):
    y, _ = data
    t = draw_subsets(y, n_subsets=40, subset_size=50, prevalence=0.2, replace=replace, seed=3)
    assert t.members.shape == (40, 50)
    assert t.load_factor == pytest.approx(50 * 40 / 300)
    assert (y[t.members].sum(axis=1) == 10).all()  # round(0.2 * 50) positives in every row
    # Without replacement, and with it at the default cap for 50 of 300 images (about 1/6
    # copy per image: at most 1), a subset holds each image once.
    assert t.max_copies == 1
    assert all(np.unique(row).size == row.size for row in t.members)
    if replace:
        t3 = draw_subsets(y, n_subsets=40, subset_size=50, prevalence=0.2, seed=3, max_copies=3)
        assert (y[t3.members].sum(axis=1) == 10).all()
        counts = [np.unique(row, return_counts=True)[1].max() for row in t3.members]
        assert 1 < max(counts) <= 3
    # The default prevalence is the set's.
    t2 = draw_subsets(y, n_subsets=5, subset_size=100, seed=3)
    assert (y[t2.members].sum(axis=1) == round(y.mean() * 100)).all()


def test_capped_draw_gives_each_image_a_hypergeometric_count():
    # Slots drawn as a uniform subset of c copies of each image: one image's count in a
    # class of M images is hypergeometric (c good of c M, k drawn), independently per row.
    y = np.zeros(12, dtype=bool)
    y[:4] = True  # 4 positives, 8 negatives; subsets of 8 at prevalence 1/2: k = 4 each
    t = draw_subsets(y, n_subsets=20000, subset_size=8, prevalence=0.5, seed=7, max_copies=3)
    assert t.max_copies == 3
    count0 = (t.members == 0).sum(axis=1)
    observed = np.bincount(count0, minlength=4)
    expected = stats.hypergeom(3 * 4, 3, 4).pmf(np.arange(4)) * t.n_subsets
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    # An uncapped draw's count is binomial(4, 1/4): P(4 copies) = 1/256, never under the cap.
    assert observed.size == 4 and observed.sum() == t.n_subsets


def test_sensitivity_follows_the_public_cap_not_the_draw():
    y = np.zeros(40, dtype=bool)
    y[:6] = True
    # P = 5 positives and Q = 15 negatives per subset of 20 at prevalence 0.25.
    for c, expected in ((1, 2 / 5), (2, 4 / 5), (3, 1.0), (0, 1.0)):
        replace = c != 1
        t = draw_subsets(y, n_subsets=10, subset_size=20, prevalence=0.25, replace=replace,
                         max_copies=c if replace else None, seed=c)  # fmt: skip
        assert auc_sensitivity(t, y) == pytest.approx(expected)
    # The default cap: at least 3/4 of an uncapped count's variance, 1 - e / c >= 3/4.
    for n, phi in ((4188, 1047), (20, 40), (50, 300), (200, 40), (7, 1000)):
        c = default_max_copies(n, phi)
        assert c >= 1 and (c == 1 or 1 - (n / phi) / c >= 0.75 - 1e-12)
        assert c == 1 or 1 - (n / phi) / (c - 1) < 0.75  # ... and no more than that needs
    # A table of unknown cap is read as held fixed: its largest number of copies.
    t = draw_subsets(y, n_subsets=10, subset_size=20, prevalence=0.25, max_copies=0, seed=4)
    hand = type(t)(t.image_ids, t.members)
    mult = max(np.unique(row, return_counts=True)[1].max() for row in t.members)
    assert auc_sensitivity(hand, y) == pytest.approx(min(1.0, 2 * mult / 5))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"replace": False, "max_copies": 2}, "max_copies 2 needs replace=True"),
        ({"max_copies": -1}, "max_copies must be a whole number >= 1"),
        ({"max_copies": True}, "max_copies must be a whole number"),
        ({"max_copies": 2.5}, "max_copies must be a whole number"),
        ({"max_copies": 1, "subset_size": 200}, "more than max_copies 1 copies"),
    ],
)
def test_bad_max_copies_are_refused(kwargs, match):
    y = np.zeros(40, dtype=bool)
    y[:6] = True
    args = {"n_subsets": 2, "subset_size": 20, "prevalence": 0.25, "seed": 1, **kwargs}
    with pytest.raises(InputError, match=match):
        draw_subsets(y, **args)


def test_hash_table_inverse_by_brute_force(data):
    y, _ = data
    ids = [f"img-{i}" for i in range(y.size)]
    t = draw_subsets(y, n_subsets=30, subset_size=40, seed=11, image_ids=ids)
    for i in [0, 5, 123, 299]:
        expected = sorted(k + 1 for k in range(30) for m in t.members[k] if m == i)
        assert t.subsets_of(ids[i]).tolist() == expected
    assert t.images_of(3) == [ids[m] for m in t.members[2]]
    assert sum(t.subsets_of(x).size for x in ids) == t.members.size
    with pytest.raises(InputError, match="subset_id"):
        t.images_of(31)
    with pytest.raises(InputError, match="nope"):
        t.subsets_of("nope")
    back = t.members_from_bytes(t.members_bytes())
    assert np.array_equal(back, t.members)


def test_seed_reproduces_and_differs(data):
    y, _ = data
    a = draw_subsets(y, n_subsets=10, subset_size=30, seed=5).members
    b = draw_subsets(y, n_subsets=10, subset_size=30, seed=5).members
    c = draw_subsets(y, n_subsets=10, subset_size=30, seed=6).members
    d = draw_subsets(y, n_subsets=10, subset_size=30, seed=None).members
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not np.array_equal(a, d)


def test_sampling_limits(data):
    y, _ = data
    n_pos = int(y.sum())
    with pytest.raises(InputError, match="with replacement"):
        draw_subsets(y, n_subsets=3, subset_size=n_pos * 3, prevalence=0.5, replace=False)
    draw_subsets(y, n_subsets=3, subset_size=n_pos * 3, prevalence=0.5, replace=True)
    with pytest.raises(InputError, match="both classes"):
        draw_subsets(np.zeros(10, bool), n_subsets=1, subset_size=5)
    with pytest.raises(InputError, match="subset_size"):
        draw_subsets(y, n_subsets=1, subset_size=1)


def test_subset_aucs_match_sklearn(data):
    y, s = data
    t = draw_subsets(y, n_subsets=25, subset_size=60, seed=2)
    fast = subset_aucs(t, y, s)
    for k in range(25):
        m = t.members[k]
        ref = roc_auc_score(y[m], s[m])
        assert fast[k] == pytest.approx(ref, abs=1e-12)
        assert subset_auc(m, y, s) == pytest.approx(ref, abs=1e-12)


def test_h_thresholdout_perturbs_only_over_threshold():
    rng = np.random.default_rng(1)
    mech = Mechanism("h-thresholdout", threshold=0.02, noise_rate=0.1)
    hold = rng.uniform(0.6, 0.9, 4000)
    ref = hold + rng.uniform(-0.05, 0.05, 4000)
    budget = 10**6
    over = np.abs(hold - ref) > 0.02
    for h, r, o in zip(hold, ref, over, strict=True):
        a = mech.answer(h, r, budget=budget, rng=rng)
        if o:
            assert a.spent == 1 and a.budget_after == budget - 1
            assert a.value == min(1.0, max(0.0, h + a.noise)) and a.noise != 0.0
        else:
            assert a.spent == 0 and a.budget_after == budget
            assert a.value == h and a.noise == 0.0
        budget = a.budget_after
    assert 10**6 - budget == over.sum()


def test_laplace_noise_distribution():
    rng = np.random.default_rng(2024)
    sigma = 0.124
    mech = Mechanism("h-thresholdout", threshold=0.0, noise_rate=sigma)
    noise = np.array(
        [mech.answer(0.8, 0.7, budget=10, rng=rng).noise for _ in range(3000)], dtype=float
    )
    assert stats.kstest(noise, stats.laplace(scale=sigma).cdf).pvalue > 0.01
    # The test can fail: a Gaussian of the same variance, or the wrong scale, is rejected.
    assert stats.kstest(noise, stats.norm(scale=sigma * np.sqrt(2)).cdf).pvalue < 0.01
    assert stats.kstest(noise, stats.laplace(scale=1.3 * sigma).cdf).pvalue < 0.01


def test_budget_accounting_and_stop(data):
    y, s = data
    t = draw_subsets(y, n_subsets=20, subset_size=40, seed=4)
    mech = Mechanism("h-thresholdout", threshold=0.01, noise_rate=0.05)
    sess = Session(y, t, mech, budget=5, rng=np.random.default_rng(0))
    whole = roc_auc_score(y, s)
    exact = subset_aucs(t, y, s)
    expected_spent = 0
    answered = 0
    with pytest.raises(BudgetExhausted):
        for k in range(1, 10_000):
            sid = (k - 1) % 20 + 1
            ans = sess.query(s, sid)
            answered += 1
            over = abs(exact[sid - 1] - whole) > 0.01
            expected_spent += int(over)
            assert ans.spent == int(over)
            assert ans.budget_after == 5 - expected_spent
            assert ans.holdout == pytest.approx(exact[sid - 1], abs=1e-12)
    assert expected_spent == 5 and sess.budget == 0
    assert len(sess.history) == answered
    # After the budget is spent, even an under-threshold subset is not answered.
    under = int(np.flatnonzero(np.abs(exact - whole) <= 0.01)[0]) + 1
    with pytest.raises(BudgetExhausted, match="spent"):
        sess.query(s, under)
    assert len(sess.history) == answered


def _p_over(gap, threshold, sigma):
    """P(gap > T + gamma + eta), gamma ~ Lap(2 sigma), eta ~ Lap(4 sigma), by integration."""
    d = gap - threshold
    g = stats.laplace(scale=2 * sigma)
    e = stats.laplace(scale=4 * sigma)
    val, _ = integrate.quad(lambda x: g.pdf(x) * e.cdf(d - x), -np.inf, np.inf, limit=200)
    return val


def test_dwork_thresholdout_decision_probability():
    sigma, threshold = 0.02, 0.02
    mech = Mechanism("thresholdout", threshold=threshold, noise_rate=sigma)
    rng = np.random.default_rng(99)
    for gap in [0.0, 0.03, 0.08]:
        n = 4000
        over = 0
        for _ in range(n):
            gamma = mech.initial_threshold_noise(rng)
            a = mech.answer(0.7 + gap, 0.7, budget=1, threshold_noise=gamma, rng=rng)
            if a.spent:
                over += 1
                assert a.value == pytest.approx(min(1.0, max(0.0, 0.7 + gap + a.noise)))
                assert a.threshold_noise != gamma  # gamma is redrawn
            else:
                assert a.value == 0.7 and a.threshold_noise == gamma  # the reference is answered
        p = _p_over(gap, threshold, sigma)
        assert abs(over / n - p) < 4 * np.sqrt(p * (1 - p) / n) + 1e-3


def test_dwork_session_needs_reference(data):
    y, s = data
    t = draw_subsets(y, n_subsets=3, subset_size=40, seed=4)
    sess = Session(y, t, Mechanism("thresholdout"), budget=3, rng=np.random.default_rng(0))
    with pytest.raises(InputError, match="reference"):
        sess.query(s, 1)
    assert sess.query(s, 1, reference=0.5).value is not None


def test_default_noise_comes_from_fedroc_privacy_unseeded(monkeypatch):
    # Every draw comes from fedroc.privacy.laplace_noise without a generator (its own
    # sampler and entropy) unless the caller (the custodian's code) passes one: nothing a
    # developer sends can seed it. Unseeded draws are pooled, each used once.
    calls = []
    real = mechanism.laplace_noise

    def spy(size, *, epsilon, sensitivity, rng=None):
        calls.append((size, epsilon, sensitivity, rng))
        return real(size, epsilon=epsilon, sensitivity=sensitivity, rng=rng)

    monkeypatch.setattr(mechanism, "laplace_noise", spy)
    monkeypatch.setattr(mechanism, "_POOL", mechanism._NoisePool())
    mech = Mechanism("laplace", noise_rate=0.1)
    answers = [mech.answer(0.5, 0.5, budget=5, sensitivity=0.02) for _ in range(50)]
    assert len({a.noise for a in answers}) == 50
    assert calls == [(mechanism._POOL_SIZE, pytest.approx(0.02 / 0.1), 0.02, None)]
    assert all(a.events[0].size == 1 and a.events[0].epsilon == pytest.approx(0.2)
               for a in answers)  # fmt: skip
    seeded = mech.answer(0.5, 0.5, budget=5, sensitivity=0.02, rng=np.random.default_rng(1))
    assert calls[-1][0] == 1 and calls[-1][3] is not None and seeded.spent == 1


def test_mechanism_rejects_bad_parameters():
    with pytest.raises(InputError, match="mechanism"):
        Mechanism("ladder")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="noise_rate"):
        Mechanism(noise_rate=0.0)
    with pytest.raises(InputError, match="threshold"):
        Mechanism(threshold=-0.1)


def test_auc_sensitivity_bounds_every_label_flip():
    # Brute force: flip each image's label, recompute every subset's AUC, take the largest
    # change; the bound 2 m / min(P, Q) must hold and be within a small factor of it.
    from fedroc.methods.sequester import auc_sensitivity

    rng = np.random.default_rng(8)
    y = rng.random(60) < 0.4
    s = rng.normal(size=60) + y
    t = draw_subsets(y, n_subsets=8, subset_size=30, seed=2)
    bound = auc_sensitivity(t, y)
    worst = 0.0
    for i in range(60):
        flipped = y.copy()
        flipped[i] = ~flipped[i]
        for row in t.members:
            if 0 < flipped[row].sum() < row.size:
                worst = max(worst, abs(subset_auc(row, flipped, s) - subset_auc(row, y, s)))
    assert worst <= bound <= 4 * worst
    mult = max(np.bincount(row).max() for row in t.members)
    smaller = min(min(y[row].sum(), (~y[row]).sum()) for row in t.members)
    assert bound == pytest.approx(min(1.0, 2 * mult / smaller))


def test_rank_distance_counts_moved_images():
    from fedroc.methods.sequester import rank_distance

    rng = np.random.default_rng(4)
    a = rng.normal(size=500)
    assert rank_distance(a, a) == 0.0
    assert rank_distance(a, 3 * a + 1) == 0.0  # the same order: the same AUCs
    top = a.copy()
    top[np.argmin(a)] = a.max() + 1  # bottom image lifted to the top
    assert rank_distance(a, top) == pytest.approx(2.0)
    e1, e2 = np.zeros(500), np.zeros(500)
    e1[3], e2[7] = 1, 1
    assert 0.9 < rank_distance(e1, e2) < 1.1  # two one-image probes
    assert rank_distance(a, rng.normal(size=500)) > 100  # two unrelated models


def test_limits_quotas_and_near_duplicates(data):
    from fedroc.methods.sequester import Limits, NearDuplicate, QuotaExceeded

    y, s = data
    t = draw_subsets(y, n_subsets=5, subset_size=40, seed=4)
    limits = Limits(max_queries=3, max_submissions=2, min_changed_images=5)
    sess = Session(y, t, Mechanism("laplace", noise_rate=0.05), budget=100, limits=limits,
                   rng=np.random.default_rng(1))  # fmt: skip
    first = sess.submit(s)
    with pytest.raises(NearDuplicate, match="submission 1"):
        sess.submit(s + 1e-3)  # same order
    other = np.random.default_rng(2).normal(size=s.size)
    sess.submit(other)
    with pytest.raises(QuotaExceeded, match="submission quota"):
        sess.submit(np.random.default_rng(3).normal(size=s.size))
    for k in (1, 2, 3):
        sess.query(first, k)
    with pytest.raises(QuotaExceeded, match="query quota"):
        sess.query(first, 4)
    assert len(sess.history) == 3 and sess.budget == 97
    with pytest.raises(InputError, match="max_queries"):
        Limits(max_queries=0)


def test_answer_step_and_release():
    from fedroc.methods.sequester import answer_step

    # The step never exceeds the null SE of the subset AUC and is 1, 2 or 5 x 10^k.
    for n_pos, n_neg in [(503, 3685), (13, 92), (5, 5), (2000, 2000)]:
        step = answer_step(n_pos, n_neg)
        se = np.sqrt((n_pos + n_neg + 1) / (12 * n_pos * n_neg))
        assert se / 5 < step <= se
        mantissa = step / 10 ** np.floor(np.log10(step))
        assert round(mantissa, 9) in (1, 2, 5)
    m = Mechanism("h-thresholdout", threshold=1.0, step=0.01)
    assert m.answer(0.8234, 0.8, budget=1).value == 0.82
    assert Mechanism(step=0.0).release(1.3) == 1.0 and Mechanism().release(-0.2) == 0.0


def test_laplace_mechanism_spends_a_unit_per_answer_with_its_event():
    mech = Mechanism("laplace", noise_rate=0.1)
    a = mech.answer(0.7, 0.0, budget=3, sensitivity=0.02, rng=np.random.default_rng(0))
    assert a.spent == 1 and a.budget_after == 2 and a.value == pytest.approx(0.7 + a.noise)
    (event,) = a.events
    assert event.mechanism == "laplace" and event.noise_scale == pytest.approx(0.1)
    assert event.epsilon == pytest.approx(0.02 / 0.1) and event.sensitivity == 0.02
    assert mech.epsilon(3, 0.02) == pytest.approx(3 * 0.2)
    # Dwork's rule: a crossing costs 2 Delta / sigma (sparse vector + the Laplace answer).
    dwork = Mechanism("thresholdout", threshold=0.0, noise_rate=0.001)
    a = dwork.answer(0.9, 0.1, budget=1, sensitivity=0.02, rng=np.random.default_rng(1))
    assert a.spent == 1 and sum(e.epsilon for e in a.events) == pytest.approx(2 * 0.02 / 0.001)
    assert dwork.epsilon(2, 0.02) == pytest.approx(2 * 2 * 0.02 / 0.001)
    assert Mechanism("h-thresholdout").epsilon(2, 0.02) is None  # not DP


def test_the_vectorised_capped_draw_is_a_uniform_subset_in_a_uniform_order():
    # Few slots among many copies are drawn by rejection (k draws, a row with a repeat
    # redrawn): each row must be a uniform ordered k-tuple of distinct slots, the law of
    # the per-row choice it replaces. m = 6 copies, k = 3 slots: 120 ordered tuples.
    from fedroc.methods.sequester.engine import _capped_draw, _distinct_rows

    rows = _distinct_rows(np.random.default_rng(11), 6, 60000, 3)
    assert (np.sort(rows, axis=1)[:, 1:] != np.sort(rows, axis=1)[:, :-1]).all()
    codes = rows[:, 0] * 36 + rows[:, 1] * 6 + rows[:, 2]
    counts = np.bincount(codes, minlength=216)
    seen = counts[counts > 0]
    assert seen.size == 120
    assert stats.chisquare(seen).pvalue > 1e-3
    # Permuting the copies, or one choice per row, gives the same law (three ways, one draw).
    for size, copies, k, rows in ((3, 2, 2, 30000), (3, 2, 5, 30000), (2100, 2, 200, 20000)):
        # k^2 <= 4 * 6: by rejection; 25 > 24: by permutation; 4200 copies: row by row.
        pool = np.arange(10, 10 * size + 10, 10, dtype=np.int32)
        t = _capped_draw(np.random.default_rng(k), pool, rows, k, copies)
        assert t.shape == (rows, k) and np.isin(t, pool).all()
        counts10 = (t == 10).sum(axis=1)
        expected = stats.hypergeom(size * copies, copies, k).pmf(np.arange(3)) * rows
        observed = np.bincount(counts10, minlength=3)
        assert observed[expected == 0].sum() == 0
        cells = expected > 0
        assert stats.chisquare(observed[cells], expected[cells]).pvalue > 1e-3
