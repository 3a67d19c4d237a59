"""A copy of a site's ledger file and every row but one label: the label (H13-3 again).

Since review 13 ``fedroc privacy status`` shows no digest of the rows, but the ledger file
keeps one (the rows binding, :func:`fedroc.federation.site.bind_rows`). The digest was a
fixed function of the rows (``SiteData.projection_digests``, its salt a constant of the
code): whoever holds a copy of the ledger file (a backup, a file handed over for an audit
of the spending) and every row but one label computes the digest of both candidates and
finds the one bound, as the status gave it before. The bound digest is now keyed by a
random salt of the ledger's own, kept beside it (``<site>.ledger.salt``, not in the ledger
file), so that the site still checks its rows and the ledger file alone tests no guess.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import fedroc.apps.application  # noqa: F401  (registers every site function)
from fedroc.data import SiteData
from fedroc.exceptions import DisclosureError, InputError
from fedroc.federation import Federation
from fedroc.federation.site import Site

TRIALS = 20


def _bound_values(ledger_text: str) -> list[str]:
    """Every value of a binding in a ledger file, as text."""
    values = []
    for line in ledger_text.splitlines():
        entry = json.loads(line)
        if entry.get("kind") == "binding":
            values.append(json.dumps(entry["value"]))
    return values


def test_a_copy_of_the_ledger_file_and_every_row_but_one_label_gives_no_label(tmp_path):
    """H13-3 through the file. On main 553c50b, a site of 200 rows after ``fedroc.sum``:
    the label of row 0 from the ledger file's rows binding in 20 of 20. Now 0 of 20 (the
    value bound matches neither candidate's digest)."""
    from tests._ledger_attacks import label_read, summed_sites

    found = 0
    for y, s, audit in summed_sites(tmp_path, 1330, TRIALS):
        copy = (audit / "north.ledger.jsonl").read_text()
        bound = " ".join(_bound_values(copy))
        assert "rows" in copy
        found += label_read(y, s, bound)
    assert found == 0, f"row 0's label read from a copy of the ledger file in {found} of {TRIALS}"


def _rows(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([1331, seed])
    return rng.random(100) < 0.4, rng.random(100)


def _refuses_rows_changed_at(y: np.ndarray, s: np.ndarray, audit, row: int) -> None:
    """The site on ``audit``'s ledger, restarted with row ``row``'s label flipped, refuses
    an exact release as of other rows."""
    changed = y.copy()
    changed[row] = not changed[row]
    other = Site("north", SiteData.from_arrays(changed, s), audit=audit)
    with pytest.raises(DisclosureError, match="its rows changed since its first exact release"):
        Federation.from_sites([other]).call("fedroc.sum")


def test_the_salted_rows_binding_still_holds_the_site_to_its_rows(tmp_path):
    """The site still refuses an exact release of other rows, restarted on the same
    ledger; the same rows (in another order) are answered."""
    y, s = _rows(0)
    audit = tmp_path / "north.jsonl"
    Federation.from_sites([Site("north", SiteData.from_arrays(y, s), audit=audit)]).call(
        "fedroc.sum"
    )
    order = np.random.default_rng(5).permutation(y.size)
    same = Site("north", SiteData.from_arrays(y[order], s[order]), audit=audit)
    Federation.from_sites([same]).call("fedroc.sum")
    _refuses_rows_changed_at(y, s, audit, 0)


def test_a_ledger_with_the_constant_salts_digest_still_holds(tmp_path):
    """A ledger written before the salt (its rows binding the constant-salt digest, as
    fedroc up to main 553c50b wrote it) is read as before: the same rows are answered, other
    rows refused."""
    y, s = _rows(1)
    data = SiteData.from_arrays(y, s)
    ledger = tmp_path / "north.ledger.jsonl"
    entry = {"kind": "binding", "key": "rows", "value": data.projection_digests[()]}
    ledger.write_text(json.dumps(entry) + "\n")
    audit = tmp_path / "north.jsonl"
    Federation.from_sites([Site("north", data, audit=audit)]).call("fedroc.sum")
    _refuses_rows_changed_at(y, s, audit, 3)
    assert '"value": "' + data.projection_digests[()] in ledger.read_text()


def test_a_salted_ledger_without_its_salt_file_is_refused_in_one_line(tmp_path):
    """The salt lost, the site cannot tell its rows from others: it does not start (an error
    that names the salt file, for its operator), nor does it answer as 'rows changed'."""
    y, s = _rows(2)
    audit = tmp_path / "north.jsonl"
    data = SiteData.from_arrays(y, s)
    Federation.from_sites([Site("north", data, audit=audit)]).call("fedroc.sum")
    salt = tmp_path / "north.ledger.salt"
    assert salt.exists() and salt.stat().st_mode & 0o777 == 0o600
    salt.unlink()
    with pytest.raises(InputError, match="north.ledger.salt") as exc:
        Site("north", data, audit=audit)
    assert "\n" not in str(exc.value)
    # gone while the site runs: a refusal naming it, not 'its rows changed'
    site = Site("north", data, ledger=tmp_path / "south.ledger.jsonl")
    Federation.from_sites([site]).call("fedroc.sum")
    (tmp_path / "south.ledger.salt").unlink()
    site.ledger._salt = None  # a new process of the site, reading its files
    with pytest.raises(DisclosureError, match="south.ledger.salt"):
        Federation.from_sites([site]).call("fedroc.sum")


def test_the_salt_is_written_on_a_file_system_without_hard_links(tmp_path, monkeypatch):
    """The salt was written whole, then hard-linked into place; a file system that refuses
    links (some network and FUSE mounts: EPERM) stopped the site at its first exact
    release. It is created in place there, mode 0600, and the site holds to its rows."""
    import os

    def no_links(src, dst, *args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    y, s = _rows(3)
    audit = tmp_path / "north.jsonl"
    Federation.from_sites([Site("north", SiteData.from_arrays(y, s), audit=audit)]).call(
        "fedroc.sum"
    )
    salt = tmp_path / "north.ledger.salt"
    assert salt.stat().st_mode & 0o777 == 0o600 and len(salt.read_text().strip()) == 64
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    _refuses_rows_changed_at(y, s, audit, 0)


def test_a_copy_of_the_ledger_file_gives_no_scores_through_the_clear_clustered_cuts(tmp_path):
    """H13-3's second binding, through the file (review 15's leftover). A site that answers
    clustered histograms in the clear binds the first of the analyst's edges above each group
    of its scores (``clustered:clear-edges``); since review 13 the status hides them, but the
    ledger file kept the list. One request over 4097 edges (refused: bins under q) and a copy
    of the ledger file gave every score to 1/4096: on main 2e18c5a, 20 of 20 sites of 200
    rows. The edges are now sealed in the ledger under its salt (AES-GCM), beside which the
    file is no key: 0 of 20."""
    from tests._ledger_attacks import asked_sites, scores_read

    read = 0
    for s, audit in asked_sites(tmp_path, 1332, TRIALS):
        shown: list[float] = []
        for line in (audit / "north.ledger.jsonl").read_text().splitlines():
            entry = json.loads(line)
            if entry.get("key") == "clustered:clear-edges" and isinstance(entry["value"], list):
                shown = [float(v) for v in entry["value"]]
        read += scores_read(s, shown)
    assert read == 0, f"the site's scores (to 1/4096) read from a ledger copy in {read}"


def test_sealed_bindings_open_under_their_own_salt_only_and_old_values_read_as_they_are(
    tmp_path,
):
    """What the site reads back: the sealed value itself; a value bound in the clear (a
    ledger written before sealing) as it is; under another ledger's salt file, a one-line
    error naming the ledger, not a wrong list of cuts."""
    from fedroc.privacy.ledger import SEALED, BudgetLedger

    path = tmp_path / "north.ledger.jsonl"
    ledger = BudgetLedger(path=path)
    edges = [0.25, 0.5, 0.75]
    sealed = ledger.seal("clustered:clear-edges", edges)
    assert sealed.startswith(SEALED) and "0.25" not in sealed
    ledger.bind("clustered:clear-edges", sealed)
    again = BudgetLedger(path=path)  # a restarted site reads its files
    assert again.unseal("clustered:clear-edges", again.bindings["clustered:clear-edges"]) == edges
    assert again.unseal("clustered:clear-edges", edges) == edges  # bound in the clear before
    with pytest.raises(InputError, match="does not open") as exc:  # sealed under another key
        again.unseal("histogram-tree:range", sealed)
    assert "\n" not in str(exc.value)
    other = BudgetLedger(path=tmp_path / "south.ledger.jsonl")
    other.rows_salt(create=True)  # south's salt drawn
    (tmp_path / "north.ledger.salt").write_text((tmp_path / "south.ledger.salt").read_text())
    with pytest.raises(InputError, match="north.ledger.jsonl"):
        BudgetLedger(path=path).unseal("clustered:clear-edges", sealed)
    (tmp_path / "north.ledger.salt").unlink()  # lost: the site does not start
    y, s = _rows(4)
    with pytest.raises(InputError, match="north.ledger.salt"):
        Site("north", SiteData.from_arrays(y, s), ledger=path)


def test_opening_a_sealed_value_without_its_salt_draws_none_and_names_the_file(tmp_path):
    """Opening a sealed value drew a new salt where the file was missing (the sealer
    created one), which then did not open it, and left a salt under which the ledger's
    keyed rows digests no longer matched: the site answered 'its rows changed' from then
    on. Opening now draws none and names the missing file; damaged text is refused the same
    way, not with a base64 traceback."""
    from fedroc.privacy.ledger import BudgetLedger

    path = tmp_path / "north.ledger.jsonl"
    sealed = BudgetLedger(path=path).seal("clustered:clear-edges", [0.5])
    salt = tmp_path / "north.ledger.salt"
    salt.unlink()
    with pytest.raises(InputError, match="north.ledger.salt") as exc:
        BudgetLedger(path=path).unseal("clustered:clear-edges", sealed)
    assert not salt.exists() and "\n" not in str(exc.value)
    BudgetLedger(path=path).rows_salt(create=True)
    with pytest.raises(InputError, match="does not open"):
        BudgetLedger(path=path).unseal("clustered:clear-edges", "sealed:not base64!")
    with pytest.raises(ValueError, match="SEALED_KEYS"):  # only keys checked at start
        BudgetLedger(path=path).seal("argument:fedroc.sum:x", 1)


def test_a_value_the_analyst_bound_that_reads_sealed_does_not_stop_the_site(tmp_path):
    """A site refuses to start where its ledger holds sealed values but no salt file. The
    check read every binding, those of the analyst's arguments included (bound as given), so
    an argument that read 'sealed:...' would have kept a site with no salt from starting.
    Now only the keys the site seals count (fedroc.privacy.keys.SEALED_KEYS)."""
    path = tmp_path / "north.ledger.jsonl"
    entry = {"kind": "binding", "key": "argument:fedroc.calibration:n_bins", "value": "sealed:x"}
    path.write_text(json.dumps(entry) + "\n")
    y, s = _rows(5)
    site = Site("north", SiteData.from_arrays(y, s), ledger=path)  # starts
    assert site.ledger.bindings["argument:fedroc.calibration:n_bins"] == "sealed:x"
