"""Attack review 8: the rows binding and ``allow_exact = false`` (main 20cbb3a).

Public calls only (Federation.call, secure_sum, evaluate). Each attack was run on 20cbb3a
first and succeeded there; the fix follows in the same commit as its test, or the hole
stays documented as a strict xfail.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedroc.data import SiteData
from fedroc.exceptions import DisclosureError, FedrocError
from fedroc.federation import Federation
from fedroc.federation.site import Site
from fedroc.privacy import DisclosurePolicy


def _data(seed: int, n: int = 400, *, score_b: bool = False, cluster: bool = False) -> SiteData:
    rng = np.random.default_rng([8080, seed])
    y = rng.random(n) < 0.4
    s = np.clip(0.3 * y + 0.7 * rng.random(n), 0.0, 1.0)
    b = np.clip(s + 0.05 * rng.standard_normal(n), 0.0, 1.0) if score_b else None
    c = np.arange(n) // 2 if cluster else None
    return SiteData(y, s, cluster=c, score_b=b)


def _dp_only_sites(**columns: bool) -> list[Site]:
    policy = DisclosurePolicy(min_count=5, allow_exact=False)
    return [Site(f"s{k}", _data(k, **columns), policy=policy) for k in range(3)]


# -- (b) a refused exact request binds what the site's DP path needs ----------------------


def _dp_histogram_runs(sites: list[Site]) -> bool:
    from fedroc.methods import evaluate

    try:
        res = evaluate(Federation.from_sites(sites), "histogram", dp_epsilon=1.0, quantiles=64)
    except DisclosureError:
        return False
    return 0.5 < res.auc < 1.0


def test_a_refused_exact_joint_histogram_does_not_lock_out_the_dp_histogram():
    """At an ``allow_exact = false`` site the exact joint histogram (a comparison of two
    scores under plain secure aggregation) is refused, but on 20cbb3a only after it bound
    the site's score range, tree and joint grid: an analyst's one refused request over
    [0, 2] left the DP histogram over [0, 1], the one method such a site serves, refused
    for the site's lifetime ('its score range was bound', at 3 of 3 sites). The refusal now
    comes before anything is bound."""
    from fedroc.methods.histogram._compare import JOINT_NAME
    from fedroc.secagg import secure_sum

    sites = _dp_only_sites(score_b=True)
    with pytest.raises(DisclosureError, match="allow_exact = false"):
        secure_sum(Federation.from_sites(sites), JOINT_NAME, bins=4, lo=0.0, hi=2.0)
    assert not any(s.ledger.bindings for s in sites), [dict(s.ledger.bindings) for s in sites]
    assert _dp_histogram_runs(sites)


def test_a_refused_clustered_summary_does_not_lock_out_the_dp_histogram():
    """The same through the clustered method's secure summary (always exact): on 20cbb3a
    it bound the range of the analyst's edges, the site's tree and the secure edges before
    ``allow_exact = false`` refused it, and the DP histogram over [0, 1] was refused after
    a summary over edges on [0, 2]."""
    from fedroc.methods.clustered._site import FUNCTION_SUMMARY
    from fedroc.secagg import secure_sum

    sites = _dp_only_sites(cluster=True)
    edges = list(np.linspace(0.0, 2.0, 5))
    with pytest.raises(DisclosureError, match="allow_exact = false"):
        secure_sum(Federation.from_sites(sites), FUNCTION_SUMMARY, edges=edges)
    assert not any(s.ledger.bindings for s in sites), [dict(s.ledger.bindings) for s in sites]
    assert _dp_histogram_runs(sites)


# -- (a) a DP reply whose refusal is an exact fact about the rows -------------------------


def _at_the_minimum(seed: int, q: int = 5) -> SiteData:
    """A site with exactly q positives (a rare class at a small site)."""
    rng = np.random.default_rng([8081, seed])
    n = 200
    y = np.zeros(n, bool)
    y[rng.choice(n, q, replace=False)] = True
    return SiteData.from_arrays(y, np.clip(0.3 * y + 0.7 * rng.random(n), 0.0, 1.0))


def test_a_dp_input_refused_by_min_count_around_a_withdrawn_row_tells_its_label():
    """A8-1. The DP inputs of secure aggregation (the histogram's noisy class counts, its DP
    tree, the joint grid with epsilon) declared the site's exact class counts, so min_count
    refused them when a class held fewer than q rows: a refusal that is an exact fact about
    the rows, free of budget (at an ``allow_exact = false`` site too). Around one withdrawn
    row at a site of exactly q positives, "answered, then refused" gave the row's label in
    20 of 20 on fbbc328. A DP release now declares no exact counts (it is protected by its
    charge, as the local-DP releases are), so both are answered: 10 of 20, a constant
    guess."""
    from fedroc.methods.histogram._site import COUNT_NAME
    from fedroc.secagg import secure_sum

    policy = DisclosurePolicy(min_count=5, allow_exact=False)
    read = 0
    for seed in range(20):
        data = _at_the_minimum(seed)
        others = [Site(f"s{k}", _data(40 + k), policy=policy) for k in (0, 2)]
        target = Site("s1", data, policy=policy)
        fed = Federation.from_sites([others[0], target, others[1]])
        args = {"lo": 0.0, "hi": 1.0, "epsilon": 1.0}
        secure_sum(fed, COUNT_NAME, **args)  # answered before
        # A positive in half the trials: a constant guess reads 10 of 20.
        rows = np.flatnonzero(data.label if seed % 2 else ~data.label)
        i = int(rows[seed % rows.size])
        keep = np.arange(data.n) != i
        changed = Site(
            "s1",
            SiteData.from_arrays(data.label[keep], data.score[keep]),
            policy=policy,
            ledger=target.ledger,
            identity=target.identity,
        )
        fed = Federation.from_sites([others[0], changed, others[1]])
        try:
            secure_sum(fed, COUNT_NAME, **args)
            guess = False
        except FedrocError:
            guess = True  # refused: the withdrawn row was one of the q positives
        read += guess == bool(data.label[i])
    assert read <= 15, f"the withdrawn row's label read in {read} of 20"


# -- a refusal inside an exact function, before the rows binding refuses ------------------


def test_a_confusion_table_after_a_withdrawn_row_does_not_tell_whether_it_was_a_false_negative():
    """After one row is withdrawn (same ledger) every exact release is refused as 'rows
    changed', but on 20cbb3a ``rocglm.confusion`` read the new rows first and refused a
    table with a cell under q in its own words: asked again at a threshold where the first
    table had exactly q false negatives, the refusal named the small cell exactly when the
    withdrawn row was one of them (20 of 20). Refused before it reads the rows now."""
    from fedroc.methods.rocglm._site import FN_CONFUSION

    read = 0
    for seed in range(20):
        data = _data(60 + seed)
        site = Site("a", data, policy=DisclosurePolicy(min_count=5))
        positives = np.sort(data.score[data.label])
        threshold = float(positives[5])  # exactly 5 false negatives (continuous scores)
        before = Federation.from_sites([site]).call(FN_CONFUSION, threshold=threshold)["a"]
        assert before["fn"] == 5
        target = data.label & (data.score < threshold)
        fn_rows, others = np.flatnonzero(target), np.flatnonzero(~target)
        i = int(fn_rows[seed % fn_rows.size] if seed % 2 else others[seed % others.size])
        keep = np.arange(data.n) != i
        changed = Site(
            "a",
            SiteData.from_arrays(data.label[keep], data.score[keep]),
            policy=site.policy,
            ledger=site.ledger,
        )
        with pytest.raises(DisclosureError) as refused:
            Federation.from_sites([changed]).call(FN_CONFUSION, threshold=threshold)
        guess = "fewer than the minimum" in str(refused.value)
        read += guess == bool(target[i])
    assert read <= 15, f"whether the withdrawn row was a false negative read in {read} of 20"


def test_an_allow_exact_false_site_answers_no_exact_function_by_its_rows():
    """At an ``allow_exact = false`` site every exact function is refused, but on 20cbb3a
    ``fedroc.brier`` and ``rocglm.sensitivity`` read the rows first and said 'scores ...
    lie outside [0, 1]' when one did, and 'allow_exact = false' otherwise: a bit of the rows
    per function, free. Both now give the one refusal whatever the rows."""
    from fedroc.methods.rocglm._site import FN_SENSITIVITY

    policy = DisclosurePolicy(min_count=5, allow_exact=False)
    inside = _data(70)
    outside = SiteData.from_arrays(
        inside.label, np.where(np.arange(inside.n) == 0, 1.5, inside.score)
    )
    for function in ("fedroc.brier", FN_SENSITIVITY):
        messages = set()
        for data in (inside, outside):
            site = Site("a", data, policy=policy)
            with pytest.raises(FedrocError) as refused:
                Federation.from_sites([site]).call(function)
            messages.add(str(refused.value))
        assert len(messages) == 1, messages
        assert "allow_exact = false" in messages.pop()


# -- (c) what the digest covers --------------------------------------------------------------


def test_the_rows_digest_covers_the_positive_label_the_score_column_and_a_changed_second_score():
    """Checked, no hole: a release depends on the labels as read (the positive label), the
    score column named and, where loaded, the second score and the clusters. The same file
    read with another positive label or another score column, or with one row's second
    score changed, is other rows: refused after the first exact release, under one ledger."""
    import pandas as pd

    from fedroc.data import Columns
    from fedroc.privacy import BudgetLedger

    data = _data(80, score_b=True)
    frame = pd.DataFrame(
        {
            "y": np.where(data.label, "case", "control"),
            "s": data.score,
            "s2": data.score_b,
        }
    )
    policy = DisclosurePolicy(min_count=5)
    ledger = BudgetLedger()

    def call(frame: pd.DataFrame, columns: Columns, pos_label: str = "case") -> dict:
        site = Site.from_frame(
            "a", frame, columns, pos_label=pos_label, policy=policy, ledger=ledger
        )
        return Federation.from_sites([site]).call("fedroc.brier")["a"]

    first = call(frame, Columns(label="y", score="s", score_b="s2"))
    assert call(frame, Columns(label="y", score="s")) == first  # the same rows
    changed_b = frame.assign(s2=np.where(np.arange(len(frame)) == 0, 0.5, frame["s2"]))
    for args in (
        (frame, Columns(label="y", score="s"), "control"),  # the other positive label
        (frame, Columns(label="y", score="s2")),  # the other score column
        (changed_b, Columns(label="y", score="s", score_b="s2")),  # one second score moved
    ):
        with pytest.raises(DisclosureError, match="rows changed"):
            call(*args)


def test_a_site_with_a_class_under_q_joins_dp_histograms_and_is_charged():
    """The other side of A8-1: a site with fewer than q positives joins a DP histogram
    (its inputs are DP, charged twice epsilon per release), and still refuses the exact
    secure tree, whose counts min_count checks."""
    from fedroc.methods import evaluate

    policy = DisclosurePolicy(min_count=5)
    data = [_data(0), _at_the_minimum(0, q=3), _data(2)]
    sites = [Site(f"s{k}", d, policy=policy) for k, d in enumerate(data)]
    res = evaluate(Federation.from_sites(sites), "histogram", dp_epsilon=1.0, quantiles=64)
    assert 0.5 < res.auc < 1.0
    assert sites[1].ledger.spent()[0] == pytest.approx(2.0)
    fresh = [Site(f"s{k}", d, policy=policy) for k, d in enumerate(data)]
    with pytest.raises(DisclosureError, match="positive count is below the minimum"):
        evaluate(Federation.from_sites(fresh), "histogram", quantiles=64)
