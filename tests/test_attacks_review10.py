"""Attack review 10 (main 7b49c8a): what a DP release refuses, before its noise and its
charge, after the site's rows changed.

Public calls only (Federation.call, secure_sum). Each attack was run on 7b49c8a first and
succeeded there; the fix follows in the same commit as its test, or the hole stays
documented as a strict xfail.
"""

from __future__ import annotations

import numpy as np

from fedroc.data import SiteData
from fedroc.exceptions import FedrocError
from fedroc.federation import Federation
from fedroc.federation.site import Site
from fedroc.privacy import DisclosurePolicy
from fedroc.secagg import secure_sum

TRIALS = 20


def _rows(seed: int, top: float, n: int = 300) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels and two scores, every score in [0, top]."""
    rng = np.random.default_rng([1010, seed])
    y = rng.random(n) < 0.4
    return y, top * rng.random(n), top * rng.random(n)


def _added(data: SiteData, seed: int, top: float, above: bool) -> SiteData:
    """``data`` and one new row, its (first) score above ``top`` when ``above``."""
    rng = np.random.default_rng([1011, seed])
    score = top + 0.05 * (1 + rng.random()) if above else top * rng.random()
    label = bool(rng.random() < 0.4)
    score_b = None if data.score_b is None else np.r_[data.score_b, top * rng.random()]
    return SiteData.from_arrays(np.r_[data.label, label], np.r_[data.score, score], score_b=score_b)


def _changed(site: Site, data: SiteData) -> Site:
    """The same site (policy, ledger, signing key) on other rows."""
    return Site(site.name, data, policy=site.policy, ledger=site.ledger, identity=site.identity)


# -- R10-1. the range check's first read, after an exact release bound other rows ----------


def test_a_dp_histogram_first_asked_after_a_change_does_not_tell_the_new_row_is_out_of_range():
    """R10-1. ``scores_in_range`` answers its refusal on "the rows it first read", bound at
    the first DP histogram (R9-2). But an exact release before it may already have said that
    every score of the old rows lay in the range: ``fedroc.is_probability`` (exact, it binds
    the rows) answered True. After a row was added, the first DP histogram over [0, 1] read
    the new rows for the first time and was refused exactly when the new row's score lay
    above 1 (class counts in the clear at epsilon 1e-6, nothing charged). On 7b49c8a: 20 of
    20. The check now answers only on rows that no binding of the site's ledger (its exact
    releases' rows, its range checks' rows) says were others; other rows are clipped."""
    from fedroc.methods.histogram._site import COUNT_LOCAL_NAME

    args = {"lo": 0.0, "hi": 1.0, "epsilon": 1e-6}
    read = answered = 0
    for seed in range(TRIALS):
        y, s, _ = _rows(seed, 1.0)
        site = Site("a", SiteData.from_arrays(y, s), policy=DisclosurePolicy(min_count=5))
        assert Federation.from_sites([site]).call("fedroc.is_probability")["a"]["ok"]
        above = bool(seed % 2)
        changed = _changed(site, _added(site._data, seed, 1.0, above))
        spent = changed.ledger.spent()
        try:
            Federation.from_sites([changed]).call(COUNT_LOCAL_NAME, **args)
            guess = False
            answered += 1
        except FedrocError:
            guess = True
            assert changed.ledger.spent() == spent  # the bit was free
        read += guess == above
    assert read <= 15, f"whether the added row's score is above 1 read in {read} of 20"
    assert answered == TRIALS  # clipped, not refused for another reason


# -- R10-2. the range check of the joint grid reads its own projection's rows --------------


def _three_sites(seed: int, top: float) -> list[Site]:
    policy = DisclosurePolicy(min_count=5)
    sites = []
    for k, name in enumerate("abc"):
        y, s, b = _rows(100 * seed + k, top)
        sites.append(Site(name, SiteData.from_arrays(y, s, score_b=b), policy=policy))
    Federation.from_sites(sites)  # their signing keys and roster
    return sites


def test_a_dp_joint_grid_first_asked_after_a_change_does_not_tell_the_new_row_is_out_of_range():
    """R10-2. The joint grid (two models compared under distributed DP) checks both scores
    against the range under its own key ("histogram.range_rows+score_b"), not the 1-D
    histograms' one. Class counts over [0, 0.9] at epsilon 1e-6 released at the site before
    (every score inside), a row added, then the first DP joint grid over the same range:
    refused exactly when the new row's first score lay above 0.9, before any noise was
    charged. On 7b49c8a: 20 of 20. The check now reads only rows no binding says were
    others (the 1-D check's rows here)."""
    from fedroc.methods.histogram._compare import JOINT_NAME
    from fedroc.methods.histogram._site import COUNT_LOCAL_NAME

    read = answered = 0
    for seed in range(TRIALS):
        sites = _three_sites(seed, 0.9)
        Federation.from_sites(sites[:1]).call(COUNT_LOCAL_NAME, lo=0.0, hi=0.9, epsilon=1e-6)
        above = bool(seed % 2)
        sites[0] = _changed(sites[0], _added(sites[0]._data, seed, 0.9, above))
        spent = sites[0].ledger.spent()
        try:
            secure_sum(
                Federation.from_sites(sites), JOINT_NAME, bins=2, lo=0.0, hi=0.9, epsilon=1e-6
            )
            guess = False
            answered += 1
        except FedrocError:
            guess = True
            assert sites[0].ledger.spent() == spent
        read += guess == above
    assert read <= 15, f"whether the added row's score is above 0.9 read in {read} of 20"
    assert answered == TRIALS  # clipped, not refused for another reason


def test_a_dp_histogram_after_a_joint_grid_and_a_change_does_not_tell_the_new_row_is_out():
    """R10-2 the other way: the joint grid's check read the old rows (both scores inside
    [0, 0.9]) under its own key, and bound no key of the 1-D check; after a row was added
    the first DP class counts read the new rows under the 1-D key and were refused exactly
    when the new row lay above 0.9. On 7b49c8a: 20 of 20."""
    from fedroc.methods.histogram._compare import JOINT_NAME
    from fedroc.methods.histogram._site import COUNT_LOCAL_NAME

    read = answered = 0
    for seed in range(TRIALS):
        sites = _three_sites(seed, 0.9)
        secure_sum(Federation.from_sites(sites), JOINT_NAME, bins=2, lo=0.0, hi=0.9, epsilon=1e-6)
        above = bool(seed % 2)
        changed = _changed(sites[0], _added(sites[0]._data, seed, 0.9, above))
        spent = changed.ledger.spent()
        try:
            Federation.from_sites([changed]).call(COUNT_LOCAL_NAME, lo=0.0, hi=0.9, epsilon=1e-6)
            guess = False
            answered += 1
        except FedrocError:
            guess = True
            assert changed.ledger.spent() == spent
        read += guess == above
    assert read <= 15, f"whether the added row's score is above 0.9 read in {read} of 20"
    assert answered == TRIALS  # clipped, not refused for another reason


def test_the_range_check_still_refuses_rows_an_exact_release_read_before():
    """The refusal a user needs stays where the rows did not change: an exact release of the
    same rows before the first DP histogram leaves the check answered on them (refused,
    each time asked); after one row changed, the same request is clipped and answered."""
    from fedroc.methods.histogram._site import COUNT_LOCAL_NAME

    y, s, _ = _rows(7, 1.0)
    site = Site("a", SiteData.from_arrays(y, s), policy=DisclosurePolicy(min_count=5))
    fed = Federation.from_sites([site])
    fed.call("fedroc.class_counts")  # binds the rows
    for _ in range(2):
        try:
            fed.call(COUNT_LOCAL_NAME, lo=0.0, hi=0.5, epsilon=1e-6)
            raise AssertionError("scores above 0.5 were not refused")
        except FedrocError as exc:
            assert "outside the public score range" in str(exc)
    changed = _changed(site, _added(site._data, 7, 1.0, False))
    reply = Federation.from_sites([changed]).call(COUNT_LOCAL_NAME, lo=0.0, hi=0.5, epsilon=1e-6)
    assert np.asarray(reply["a"]["counts"]).shape == (2,)


# -- R10-3. a refused exact release bound its cuts, not the rows it read -------------------


def _q_minus_one_positives_below(seed: int, cut: float, q: int = 5, n: int = 300) -> SiteData:
    """Scores in [0, 1]; exactly q - 1 positives below ``cut``, many rows of each class
    everywhere else (so that only that part of the leaf [0, 0.5) is small)."""
    rng = np.random.default_rng([1013, seed])
    y = rng.random(n) < 0.5
    s = cut + (1.0 - cut) * rng.random(n)
    low = np.flatnonzero(y)[: q - 1]
    s[low] = cut * rng.random(low.size)
    neg = np.flatnonzero(~y)[: 3 * q]
    s[neg] = cut * rng.random(neg.size)  # negatives below the cut: that class is not small
    return SiteData.from_arrays(y, s)


def _added_below(data: SiteData, seed: int, cut: float, positive: bool) -> SiteData:
    """``data`` and one new row below ``cut``: a positive when ``positive``, else a negative."""
    rng = np.random.default_rng([1014, seed])
    return SiteData.from_arrays(np.r_[data.label, positive], np.r_[data.score, cut * rng.random()])


def test_a_local_dp_tree_after_a_refused_calibration_and_a_change_does_not_tell_the_new_label():
    """R10-3. R9-1 refuses a local-DP tree after a change of rows while the site has clear
    cuts: it asks ``rows_changed``, which reads the rows binding of the first exact release.
    But a clear calibration refused by its own check binds its bins (a clear cut, bound
    before the rows are read) and not the rows. A local tree of 2 leaves released, then a
    calibration at 4 bins refused because its edge 0.25 splits the leaf [0, 0.5) into a part
    of q - 1 positives (R43); one row added below 0.25; the same local tree asked again read
    the new rows against that edge, before its noise: answered exactly when the new row was
    a positive. On 7b49c8a: 20 of 20."""
    from fedroc.methods.histogram._site import LOCAL_NAME

    tree = {"branching": 2, "height": 1, "lo": 0.0, "hi": 1.0, "epsilon": 0.5}
    read = 0
    for seed in range(TRIALS):
        data = _q_minus_one_positives_below(seed, 0.25)
        site = Site("a", data, policy=DisclosurePolicy(min_count=5))
        fed = Federation.from_sites([site])
        fed.call(LOCAL_NAME, **tree)
        try:
            fed.call("fedroc.calibration", n_bins=4)
            raise AssertionError("the calibration was not refused")
        except FedrocError as exc:
            assert "splits a leaf" in str(exc)
        positive = bool(seed % 2)
        changed = _changed(site, _added_below(data, seed, 0.25, positive))
        try:
            Federation.from_sites([changed]).call(LOCAL_NAME, **tree)
            guess = True  # answered: the edge's part now holds q positives
        except FedrocError:
            guess = False
        read += guess == positive
    assert read <= 15, f"whether the added row is a positive read in {read} of 20"


def test_an_exact_table_refused_before_a_change_and_asked_after_does_not_tell_the_new_label():
    """R10-3 on the exact path: a confusion table refused for a cell under q bound no rows,
    so after one row was added the same table ran on the new rows (its rows check passed:
    nothing bound) and was answered exactly when the new row was a false negative (q - 1 of
    them before). On 7b49c8a: 20 of 20."""
    from fedroc.methods.rocglm._site import FN_CONFUSION

    read = 0
    for seed in range(TRIALS):
        data = _q_minus_one_positives_below(seed, 0.25)
        site = Site("a", data, policy=DisclosurePolicy(min_count=5))
        try:
            Federation.from_sites([site]).call(FN_CONFUSION, threshold=0.25)
            raise AssertionError("the table was not refused")
        except FedrocError as exc:
            assert "fewer than the minimum" in str(exc)
        positive = bool(seed % 2)
        changed = _changed(site, _added_below(data, seed, 0.25, positive))
        try:
            Federation.from_sites([changed]).call(FN_CONFUSION, threshold=0.25)
            guess = True
        except FedrocError:
            guess = False
        read += guess == positive
    assert read <= 15, f"whether the added row is a false negative read in {read} of 20"
