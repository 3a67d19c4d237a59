"""A site's exact releases come from one version of its rows per ledger (bind_rows).

Exact releases of two versions of a site's rows subtract to the rows that changed. The
attacks below were written first and succeeded on main 7738ce2, where only the clustered
summary bound its first release: the rest of the site's exact functions answered again
after its rows changed, the same function or another one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedroc.data import Columns, SiteData
from fedroc.exceptions import DisclosureError
from fedroc.federation import Federation
from fedroc.federation.site import Site
from fedroc.privacy import BudgetLedger, DisclosurePolicy


def _data(seed: int, n: int = 300) -> SiteData:
    rng = np.random.default_rng([7071, seed])
    y = rng.random(n) < 0.4
    return SiteData.from_arrays(y, np.clip(0.3 * y + 0.7 * rng.random(n), 0.0, 1.0))


def _without_row(data: SiteData, i: int) -> SiteData:
    """The same table without row ``i`` (one patient withdrew)."""
    keep = np.arange(data.n) != i
    return SiteData.from_arrays(data.label[keep], data.score[keep])


def _reloaded(site: Site, data: SiteData) -> Site:
    """The site's node restarted on ``data``, its ledger and key kept."""
    return Site(site.name, data, policy=site.policy, ledger=site.ledger, identity=site.identity)


def _call(site: Site, function: str, **args: object) -> dict:
    return Federation.from_sites([site]).call(function, **args)[site.name]


def _labels_read_around_a_withdrawal(function: str, positives, **args: object) -> tuple[int, int]:
    """Over 20 sites: ``class_counts`` before one row's withdrawal and ``function(**args)``
    at the site reloaded without it (same ledger) after; return how often the withdrawn
    row's label is read from ``positives(after)`` and how often the second call is refused
    because the rows changed."""
    read = refused = 0
    for seed in range(20):
        data = _data(seed)
        site = Site("a", data, policy=DisclosurePolicy(min_count=5))
        before = _call(site, "fedroc.class_counts")
        i = seed % data.n
        try:
            after = _call(_reloaded(site, _without_row(data, i)), function, **args)
        except DisclosureError as e:
            assert f"site 'a' refuses {function!r}: its rows changed" in str(e)
            refused += 1
            continue
        read += (before["n_pos"] - positives(after) == 1) == bool(data.label[i])
    return read, refused


def test_class_counts_and_a_sum_of_labels_around_a_withdrawn_row_do_not_tell_its_label():
    """Another function after the change: ``class_counts`` before, the sum of the label
    column after, subtract to the withdrawn row's label (on 7738ce2: 20 of 20 labels
    read). Binding one function's first release would not stop this; binding the rows
    does."""
    read, refused = _labels_read_around_a_withdrawal(
        "fedroc.sum", lambda after: after["sum"], column="label"
    )
    assert read == 0, f"the withdrawn row's label read in {read} of 20"
    assert refused == 20


def _secure_federation(seed: int) -> list[Site]:
    return [Site(f"s{k}", _data(10 * seed + k, n=400)) for k in range(3)]


def test_two_secure_calibrations_around_a_withdrawn_row_do_not_give_its_bin_and_label():
    """Through secure aggregation: the other sites' inputs cancel between two sums, so
    two secure calibrations around one row withdrawn at s1 subtract to that row's bin,
    label and exact probability (on 7738ce2: 6 of 6 read)."""
    from fedroc.secagg import secure_sum

    read = refused = 0
    for seed in range(6):
        sites = _secure_federation(seed)
        before = secure_sum(Federation.from_sites(sites), "fedroc.calibration", n_bins=8)
        data = sites[1]._data
        i = (7 * seed) % data.n
        sites[1] = _reloaded(sites[1], _without_row(data, i))
        try:
            after = secure_sum(Federation.from_sites(sites), "fedroc.calibration", n_bins=8)
        except DisclosureError as e:
            assert "site 's1' refuses" in str(e) and "rows changed" in str(e)
            refused += 1
            continue
        diff = np.asarray(before["sum_predicted"]) - np.asarray(after["sum_predicted"])
        read += bool(np.isclose(diff.sum(), data.score[i], rtol=0, atol=1e-9))
    assert read == 0, f"the withdrawn row's probability read in {read} of 6"
    assert refused == 6


def test_the_same_rows_in_another_order_release_the_same_again():
    """A table exported again in another order is the same table: answered, the same."""
    data = _data(1)
    site = Site("a", data, policy=DisclosurePolicy(min_count=5))
    before = _call(site, "fedroc.calibration", n_bins=5)
    p = np.random.default_rng(3).permutation(data.n)
    shuffled = SiteData.from_arrays(data.label[p], data.score[p])
    after = _call(_reloaded(site, shuffled), "fedroc.calibration", n_bins=5)
    assert np.array_equal(before["count"], after["count"])
    np.testing.assert_allclose(after["sum_predicted"], before["sum_predicted"], rtol=1e-12)


def test_a_ledger_on_disk_holds_the_rows_across_a_restart(tmp_path):
    path = tmp_path / "a.ledger.jsonl"
    data = _data(2)
    policy = DisclosurePolicy(min_count=5)
    _call(Site("a", data, policy=policy, ledger=path), "fedroc.brier")
    changed = Site("a", _without_row(data, 0), policy=policy, ledger=path)
    with pytest.raises(DisclosureError, match="rows changed"):
        _call(changed, "fedroc.brier")
    # The same rows after the restart: answered.
    assert _call(Site("a", data, policy=policy, ledger=path), "fedroc.brier")["n"] == data.n
    # A new ledger, the operator's choice, answers from the new rows.
    fresh = Site("a", _without_row(data, 0), policy=policy, ledger=tmp_path / "new.jsonl")
    assert _call(fresh, "fedroc.brier")["n"] == data.n - 1


def test_dp_releases_still_compose_after_the_rows_changed():
    """A noisy release is not bound: its ledger composes it with the earlier ones."""
    from fedroc.methods.histogram._site import COUNT_LOCAL_NAME

    data = _data(3)
    ledger = BudgetLedger()
    site = Site("a", data, policy=DisclosurePolicy(min_count=5), ledger=ledger)
    _call(site, "fedroc.class_counts")
    changed = _reloaded(site, _without_row(data, 0))
    with pytest.raises(DisclosureError, match="rows changed"):
        _call(changed, "fedroc.class_counts")
    spent = ledger.spent()[0]
    noisy = _call(changed, COUNT_LOCAL_NAME, lo=0.0, hi=1.0, epsilon=0.5)
    assert "counts" in noisy
    assert ledger.spent()[0] == pytest.approx(spent + 1.0)  # 0.5, charged twice (H1)


def test_a_refused_release_leaves_nothing_and_the_binding_in_place():
    """A refusal spends nothing and does not move the binding to the new rows: the old
    rows are still answered after it."""
    data = _data(4)
    site = Site("a", data, policy=DisclosurePolicy(min_count=5))
    first = _call(site, "fedroc.brier")
    changed = _reloaded(site, _without_row(data, 5))
    for _ in range(2):
        with pytest.raises(DisclosureError, match="rows changed"):
            _call(changed, "fedroc.brier")
    assert _call(_reloaded(site, data), "fedroc.brier") == first
    # Its number of rows is public: still answered from the new rows.
    assert _call(changed, "fedroc.info")["n"] == data.n - 1


def test_noisy_scores_after_a_withdrawn_row_do_not_tell_its_label():
    """ROC-GLM's noisy scores are a DP release, but split by class their lengths are the
    site's exact class counts: ``class_counts`` before a row is withdrawn and the noisy
    scores after it subtract to the withdrawn row's label (found in review: 20 of 20 read
    on the first version of bind_rows, which let every DP reply through)."""
    from fedroc.methods.rocglm._site import FN_NOISY

    read, refused = _labels_read_around_a_withdrawal(
        FN_NOISY, lambda after: len(after["positive"]), epsilon=1.0, delta=1e-5, sensitivity=0.05
    )
    assert read == 0, f"the withdrawn row's label read in {read} of 20"
    assert refused == 20


def _with(data: SiteData, **columns: object) -> SiteData:
    """The same rows with more of the table's columns loaded (a cluster, a second score)."""
    return SiteData(data.label, data.score, **columns)  # type: ignore[arg-type]


def test_the_same_rows_with_another_column_loaded_are_the_same_rows():
    """A run that names the table's cluster column or second score after one that did not
    reads the same rows: answered. Found in review: ``fedroc evaluate --method histogram``
    and then ``--method clustered --cluster patient`` (or ``--compare-score``) on the same
    files and audit directory was refused at every site as 'its rows changed'."""
    data = _data(5)
    cluster = np.arange(data.n) // 2
    score_b = np.clip(data.score + 0.05, 0.0, 1.0)
    site = Site("a", data, policy=DisclosurePolicy(min_count=5))
    first = _call(site, "fedroc.class_counts")
    both = {"cluster": cluster, "score_b": score_b}
    for extra in ({"cluster": cluster}, {"score_b": score_b}, both):
        assert _call(_reloaded(site, _with(data, **extra)), "fedroc.class_counts") == first
    # And back: the plain table after the richer ones.
    assert _call(_reloaded(site, data), "fedroc.class_counts") == first


def test_a_changed_cluster_column_is_a_change_of_rows():
    """Loaded with its cluster column, a table whose rows kept their labels and scores but
    not their clusters (a row moved to another patient) changed: what depends on the
    clusters would subtract to it. Refused, with or without another column loaded."""
    data = _data(6)
    cluster = np.arange(data.n) // 2
    moved = cluster.copy()
    moved[0] = data.n  # row 0 is another patient's now
    score_b = np.clip(data.score + 0.05, 0.0, 1.0)
    site = Site("a", _with(data, cluster=cluster), policy=DisclosurePolicy(min_count=5))
    _call(site, "fedroc.class_counts")
    for extra in ({"cluster": moved}, {"cluster": moved, "score_b": score_b}):
        with pytest.raises(DisclosureError, match="rows changed"):
            _call(_reloaded(site, _with(data, **extra)), "fedroc.class_counts")
    # A change of the label or score is refused whatever columns are loaded.
    with pytest.raises(DisclosureError, match="rows changed"):
        _call(_reloaded(site, _without_row(data, 3)), "fedroc.class_counts")


def test_a_site_that_allows_no_exact_release_serves_the_dp_histogram_alone():
    """``allow_exact = false``: every release that would bind the rows is refused, naming
    the setting, while the site's size and its DP releases are served: the histogram
    method under distributed DP runs, under plain secure aggregation it is refused."""
    from fedroc.methods import evaluate

    policy = DisclosurePolicy(min_count=5, allow_exact=False)
    sites = [Site(f"s{k}", _data(20 + k, n=600), policy=policy) for k in range(3)]
    fed = Federation.from_sites(sites)
    for function, args in (("fedroc.class_counts", {}), ("fedroc.calibration", {"n_bins": 5})):
        with pytest.raises(DisclosureError, match="allow_exact = false"):
            fed.call(function, **args)
    assert fed.call("fedroc.info")["s0"]["n"] == 600
    # Nothing exact was bound by the refusals: the rows binding is untouched.
    assert not any(key.startswith("rows") for s in sites for key in s.ledger.bindings)
    res = evaluate(fed, "histogram", dp_epsilon=1.0, quantiles=64)
    assert 0.5 < res.auc < 1.0 and res.extra["mode"] == "distributed-dp"
    # The DP histograms' range check read the rows: it binds them as an exact release does
    # (R11-1, tests/test_attacks_review11.py); the refused exact run below adds nothing.
    bound = [{k: v for k, v in s.ledger.bindings.items() if k.startswith("rows")} for s in sites]
    assert all(b.get("rows") for b in bound)
    with pytest.raises(DisclosureError, match="allow_exact = false"):
        evaluate(Federation.from_sites(sites), "histogram")
    assert bound == [
        {k: v for k, v in s.ledger.bindings.items() if k.startswith("rows")} for s in sites
    ]


# -- the same table read or represented differently ---------------------------------------
def _table(seed: int, n: int = 240) -> pd.DataFrame:
    """A site's table: labels (yes/no), scores, a second score, weights and patient ids."""
    rng = np.random.default_rng([7072, seed])
    y = rng.random(n) < 0.4
    return pd.DataFrame(
        {
            "y": np.where(y, "yes", "no"),
            "p": np.round(np.clip(0.3 * y + 0.7 * rng.random(n), 0.0, 1.0), 6),
            "p2": np.round(rng.random(n), 6),
            "w": rng.integers(1, 4, n),
            "patient": rng.integers(-20, 60, n),
        }
    )


_ALL = Columns("y", "p", cluster="patient", score_b="p2", weight="w")


def _site_on(tmp_path, name: str, frame: pd.DataFrame, columns=_ALL, pos_label="yes") -> Site:
    """A site reading ``frame`` written as file ``name``, on the ledger in tmp_path."""
    path = tmp_path / name
    if name.endswith(".csv"):
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    policy = DisclosurePolicy(min_count=5)
    return Site.from_file(
        "a", path, columns, pos_label=pos_label, policy=policy, ledger=tmp_path / "l.jsonl"
    )


# Patient ids as a CSV reader, a Parquet file or a data frame may hold them: "01" in a
# text column is 1 in a CSV read by pandas.
_ID_FORMS = {
    "int32": lambda c: c.astype(np.int32),
    "int16": lambda c: c.astype(np.int16),
    "float": lambda c: c.astype(np.float64),
    "nullable Int64": lambda c: c.astype("Int64"),
    "text": lambda c: c.astype(str),
    "text, zero-padded": lambda c: c.map(lambda v: f"{v:03d}"),
    "object ints": lambda c: c.astype(object),
    "text, not numbers": lambda c: "P" + c.astype(str),
    "categorical": lambda c: c.astype("category"),
}


@pytest.mark.parametrize("form", [f for f in _ID_FORMS if f != "text, not numbers"])
def test_patient_ids_as_text_or_other_integers_are_the_same_rows(tmp_path, form):
    """The same table, its patient ids read as int64 from a CSV and as int32, float, text
    ("7", "007") from a Parquet file or a data frame: the same rows. Found in review: their
    digests differed (pandas' hash of an id depends on its type), so the Parquet copy of
    a CSV, or a frame read with dtype=str, was refused at every site as 'rows changed'."""
    frame = _table(1)
    first = _call(_site_on(tmp_path, "a.csv", frame), "fedroc.class_counts")
    other = frame.assign(patient=_ID_FORMS[form](frame["patient"]))
    site = _site_on(tmp_path, "a.parquet", other)
    assert (
        site._data.projection_digests == _site_on(tmp_path, "b.csv", frame)._data.projection_digests
    )
    assert _call(site, "fedroc.class_counts") == first
    # A data frame in the Python API, the same.
    data = SiteData.from_frame(other, _ALL, pos_label="yes")
    assert _call(_reloaded(site, data), "fedroc.class_counts") == first
    # And arrays: a list of texts is a numpy array of unicode.
    as_list = SiteData.from_arrays(data.label, data.score, list(map(str, frame["patient"])))
    assert as_list.digest == SiteData.from_arrays(data.label, data.score, frame["patient"]).digest


@pytest.mark.parametrize("form", list(_ID_FORMS))
def test_a_changed_patient_id_is_refused_in_every_representation(tmp_path, form):
    """One row moved to another patient, or one patient's id changed, in any of those
    representations: refused (the ids' canonical form keeps every distinct value)."""
    frame = _table(2)
    first = frame.assign(patient=_ID_FORMS[form](frame["patient"]))
    _call(_site_on(tmp_path, "a.parquet", first), "fedroc.class_counts")
    ids = frame["patient"].to_numpy()
    moved = ids.copy()
    moved[0] = ids[1] if ids[1] != ids[0] else ids[2]  # row 0: another patient's now
    renamed = np.where(ids == ids[0], 999, ids)  # patient ids[0] is 999 now
    for changed in (moved, renamed):
        other = frame.assign(patient=_ID_FORMS[form](pd.Series(changed)))
        for name in ("b.parquet", "b.csv"):
            with pytest.raises(DisclosureError, match="rows changed"):
                _call(_site_on(tmp_path, name, other), "fedroc.class_counts")
    # The unchanged table, answered after the refusals.
    assert _call(_site_on(tmp_path, "c.parquet", first), "fedroc.class_counts")


def test_two_texts_of_one_number_stay_two_patients(tmp_path):
    """ "7" and "007" in one text column are two patients; read from a CSV they are one
    (7). The canonical ids of the text table would merge them: it keeps its texts, and the
    CSV's table, whose clusters differ, is refused after it."""
    frame = _table(3)
    text = frame["patient"].map(lambda v: f"{v:03d}")
    text.iloc[:3] = ["7", "007", "07"]
    other = frame.assign(patient=text)
    _call(_site_on(tmp_path, "a.parquet", other), "fedroc.class_counts")
    frame.loc[:2, "patient"] = 7
    assert frame["patient"].nunique() < other["patient"].nunique()
    with pytest.raises(DisclosureError, match="rows changed"):
        _call(_site_on(tmp_path, "b.csv", frame), "fedroc.class_counts")


def test_the_positive_class_flipped_is_other_rows(tmp_path):
    """A two-valued label column read with the other value as positive (pos_label "no"
    after "yes") negates every label: each release of it is a function of the same rows,
    but several site functions are not symmetric in the classes (ROC-GLM's "positives"
    threshold rule discloses the positive class's scores where its policy opts in, its
    Fisher replies check the positives' count only), so one ledger over both readings
    would release what neither reading does (with that opt-in, every score of the site).
    Kept refused (as tests/test_attacks_review8.py asserts), through files too; the same
    labels as booleans are the same rows."""
    frame = _table(4)
    first = _call(_site_on(tmp_path, "a.csv", frame), "fedroc.class_counts")
    with pytest.raises(DisclosureError, match="rows changed"):
        _call(_site_on(tmp_path, "a.parquet", frame, pos_label="no"), "fedroc.class_counts")
    booleans = frame.assign(y=frame["y"] == "yes")
    assert (
        _call(_site_on(tmp_path, "b.parquet", booleans, pos_label=None), "fedroc.class_counts")
        == first
    )


def test_the_score_and_the_second_score_swapped_are_other_rows(tmp_path):
    """Both score columns loaded both times, their roles swapped: refused. Functions of one
    score (a confusion table, a calibration) asked of each column would subtract to the
    rows where the two columns differ, which the paired releases of the first reading
    never gave (two models' scores often differ in few rows)."""
    frame = _table(6)
    _call(_site_on(tmp_path, "a.csv", frame), "fedroc.class_counts")
    swapped = Columns("y", "p2", cluster="patient", score_b="p", weight="w")
    with pytest.raises(DisclosureError, match="rows changed"):
        _call(_site_on(tmp_path, "a.csv", frame, swapped), "fedroc.class_counts")


# The digests fedroc main fbbc328 bound (before the ids' canonical form) for the table
# of _old_table: its ids as text numbers ("007") and as int32, printed by that commit.
_BOUND_BY_FBBC328 = {
    "text": "803ab2661b9924922ead12d79c83afdd45b11dc6142e8d7383b0ce43dac2e634",
    "int32": "828d13bf30acc28122f5cd342a1607696c50c5c751e38d6ec6a5b1746a2f208b",
}


def _old_table() -> tuple[SiteData, SiteData]:
    rng = np.random.default_rng([7073, 0])
    n = 50
    y = rng.random(n) < 0.4
    s = np.round(rng.random(n), 6)
    text = np.array([f"{v:03d}" for v in rng.integers(0, 20, n)], dtype=object)
    return SiteData(y, s, text), SiteData(y, s, rng.integers(-9, 9, n).astype(np.int32))


def test_a_ledger_bound_before_the_canonical_ids_still_answers_the_same_reading():
    """A ledger bound by fbbc328 holds the digest of the ids as they were read (pandas'
    hash of "007", of an int32): the same reading after the upgrade is answered, not
    refused as 'rows changed' because the digest's form changed; a changed id is still
    refused under it."""
    for form, data in zip(_BOUND_BY_FBBC328, _old_table(), strict=True):
        ledger = BudgetLedger()
        ledger.bind("rows", data.projection_digests[()])
        ledger.bind("rows+cluster", _BOUND_BY_FBBC328[form])
        site = Site("a", data, policy=DisclosurePolicy(min_count=5), ledger=ledger)
        assert _call(site, "fedroc.class_counts")["n_pos"] == data.n_pos, form
        ids = np.asarray(data.cluster).copy()
        ids[0] = ids[1] if ids[1] != ids[0] else ids[2]
        moved = SiteData(data.label, data.score, ids)
        with pytest.raises(DisclosureError, match="rows changed"):
            _call(_reloaded(site, moved), "fedroc.class_counts")


_READINGS = [
    Columns("y", "p"),
    Columns("y", "p", weight="w"),
    Columns("y", "p", cluster="patient"),
    Columns("y", "p", score_b="p2", weight="w"),
    _ALL,
]


@pytest.mark.parametrize("order", ["fewer columns first", "more columns first"])
def test_readings_with_other_columns_in_either_order_are_the_same_rows(tmp_path, order):
    """One file read with and without its weights, clusters and second score, in either
    order, from CSV and Parquet (text ids in the Parquet copy): answered each time; its
    weights changed in one row, refused where they are loaded."""
    frame = _table(7)
    text_ids = frame.assign(patient=frame["patient"].map(lambda v: f"{v:03d}"))
    readings = _READINGS if order == "fewer columns first" else _READINGS[::-1]
    first = None
    for k, columns in enumerate(readings):
        name, table = ("a.csv", frame) if k % 2 else ("a.parquet", text_ids)
        got = _call(_site_on(tmp_path, name, table, columns), "fedroc.class_counts")
        first = first or got
        assert got == first, (k, columns)
    heavier = frame.assign(w=np.where(np.arange(len(frame)) == 0, frame["w"] + 1, frame["w"]))
    for columns in _READINGS:
        if columns.weight is not None:
            with pytest.raises(DisclosureError, match="rows changed"):
                _call(_site_on(tmp_path, "b.csv", heavier, columns), "fedroc.class_counts")
