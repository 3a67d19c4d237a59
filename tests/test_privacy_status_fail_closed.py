"""`fedroc privacy status` shows a binding's value only where fedroc.privacy.keys marks it safe.

It hid the values that depend on the rows by a deny list (the rows' digests, the clear
clustered cuts): a key added later whose value depends on the rows would have been shown
as ``key = value``. Now the keys are marked one by one, and the value of a key not marked
safe to show (a key unknown to this version too) is a placeholder in the table and in
--json.
"""

from __future__ import annotations

import json

import pytest

from fedroc.privacy import keys
from tests._cli import run_main

SECRET = 48151623.42


def _key_names() -> list[str]:
    """The names of the ledger keys (the strings) that fedroc.privacy.keys defines."""
    return [n for n in keys.__all__ if isinstance(getattr(keys, n), str) and n != "VALUE_NOT_SHOWN"]


def test_every_ledger_key_is_marked_shown_or_kept():
    """A key added to fedroc.privacy.keys without a mark fails here, not in an operator's
    status (where it would be hidden, fail-closed, but unsaid)."""
    names = _key_names()
    assert "ROWS" in names and "CLEAR_EDGES" in names and "PARTNERS" in names
    marks = {n: (getattr(keys, n) in keys.SHOWN, getattr(keys, n) in keys.KEPT) for n in names}
    unmarked = [n for n, (shown, kept) in marks.items() if shown == kept]
    assert not unmarked, f"marked neither or both shown and kept: {unmarked}"
    # the values that depend on the rows are kept, whatever their key's suffix
    for key in (keys.ROWS, keys.ROWS + "+cluster", keys.RANGE_ROWS + "+score_b", keys.CLEAR_EDGES):
        assert not keys.value_shown(key), key
    for key in (keys.PARTNERS + "*", keys.HISTOGRAM_TREE, keys.ARGUMENT + "f:n_bins"):
        assert keys.value_shown(key), key


def test_the_mpc_owners_job_key_is_the_one_marked():
    """The MPC engine keeps its key without importing the privacy layer; the mark holds it."""
    from fedroc.mpc.owner import JOB_BINDING

    assert JOB_BINDING == keys.MPC_JOB and keys.value_shown(JOB_BINDING + "job-1")


def _status_of_ledger(capsys, tmp_path, entries: list[dict]) -> tuple[str, str]:
    """Write ``entries`` as site a's ledger; return ``privacy status``'s table and --json."""
    text = "".join(json.dumps(e) + "\n" for e in entries)
    (tmp_path / "a.ledger.jsonl").write_text(text)
    shown = []
    for extra in ([], ["--json"]):
        code, out, err = run_main(
            capsys, ["privacy", "status", "--audit-dir", str(tmp_path), *extra]
        )
        assert code == 0, err
        shown.append(out)
    return shown[0], shown[1]


@pytest.mark.parametrize("key", ["made-up:row-total", "rowsx", "histogram-tree:rangex"])
def test_a_key_unknown_to_this_version_shows_no_value(capsys, tmp_path, key):
    """A ledger with a key this version does not know: its value is not shown, in the table
    or in --json; a placeholder of the key is (an operator sees that something is bound),
    not its name, which may be built from a value (the test below)."""
    entries = [
        {"kind": "binding", "key": key, "value": SECRET},
        {"kind": "binding", "key": keys.PARTNERS + "*", "value": ["a", "b", "c"]},
    ]
    out, raw = _status_of_ledger(capsys, tmp_path, entries)
    for shown in (out, raw):
        assert "48151623" not in shown and "4.815" not in shown
    site = json.loads(raw)["sites"][0]
    shown_key = keys.key_not_shown(1)
    assert site["bindings"][shown_key] == keys.VALUE_NOT_SHOWN
    assert keys.VALUE_NOT_SHOWN in site["binding_notes"][shown_key]
    assert f"a: {shown_key} = {keys.VALUE_NOT_SHOWN}" in " ".join(out.split())
    # a key marked safe keeps its value and its sentence
    assert site["bindings"][keys.PARTNERS + "*"] == ["a", "b", "c"]
    assert "a: secure sums only with a, b, c" in " ".join(out.split())


def test_a_key_unknown_to_this_version_shows_no_name(capsys, tmp_path):
    """Attack: a key is a string the binding code builds, from a value as often as not
    (``rocglm.confusion-threshold:`` + the threshold); a key this version does not know (a
    newer version's, a site module's own function) may be built from a function of the
    rows. The status hid its value and showed its name: a site's total in the name came out
    in the table and in --json (on the old code, checked). Now each unknown key is a
    numbered placeholder, in both; the keys this version marks keep their names."""
    entries = [
        {"kind": "binding", "key": f"site-module:row-total:{SECRET}", "value": 1},
        {"kind": "binding", "key": f"rows-max={SECRET / 7}", "value": True},
        {"kind": "binding", "key": keys.PARTNERS + "*", "value": ["a", "b", "c"]},
        {"kind": "binding", "key": keys.CONFUSION_THRESHOLD + "0.25", "value": 0.25},
    ]
    out, raw = _status_of_ledger(capsys, tmp_path, entries)
    for shown in (out, raw):
        assert "48151623" not in shown and "6878803" not in shown, shown
    site = json.loads(raw)["sites"][0]
    names = [keys.key_not_shown(1), keys.key_not_shown(2)]
    assert list(site["bindings"]) == [
        *names,
        keys.PARTNERS + "*",
        keys.CONFUSION_THRESHOLD + "0.25",
    ]
    assert list(site["binding_notes"]) == list(site["bindings"])
    assert all(site["bindings"][n] == keys.VALUE_NOT_SHOWN for n in names)
    assert site["bindings"][keys.CONFUSION_THRESHOLD + "0.25"] == 0.25
