"""Attack review 13 (main 446ba58): what two methods give together, the newer paths.

Public calls only (``Federation.call`` of the registered site functions, ``secure_sum``, the
methods, the sequestration service's store and HTTP app). Each attack was run on 446ba58
first; where it succeeded, the fix follows in the same commit as its test, or the hole stays
documented as a strict xfail. Where an attack did not succeed (what held), the test asserts
that it still fails.
"""

from __future__ import annotations

import numpy as np

import fedroc.apps.application  # noqa: F401  (registers every site function)
from fedroc.data import SiteData
from fedroc.exceptions import FedrocError
from fedroc.federation import Federation
from fedroc.federation.site import Site

TRIALS = 20


# -- H13-1. a secure class total minus the partners' clear class counts ----------------------


def _federation_with_a_small_class(
    seed: int, n_pos: int
) -> tuple[Federation, np.ndarray, np.ndarray]:
    """A victim ``v`` of 120 rows with ``n_pos`` positives (under q = 5) and two partners of
    200 rows each with both classes well above q; the victim's labels and scores."""
    rng = np.random.default_rng([1313, seed])
    y = np.zeros(120, dtype=bool)
    y[rng.choice(120, n_pos, replace=False)] = True
    s = rng.random(120)
    sites = [Site("v", SiteData.from_arrays(y, s))]
    for name in ("p1", "p2"):
        sites.append(Site(name, SiteData.from_arrays(rng.random(200) < 0.4, rng.random(200))))
    return Federation.from_sites(sites), y, s


def _try(f, *args, **kwargs):
    """``f(*args, **kwargs)``, or None when a site refuses."""
    try:
        return f(*args, **kwargs)
    except FedrocError:
        return None


def test_a_secure_class_total_minus_the_partners_clear_counts_gives_no_class_count_under_q():
    """H13-1. A site refuses its class counts when a class holds fewer than q rows (and, since
    R12-3, any clear sum that gives them), and its secure exact tree declares them too; but
    the secure calibration curve and the secure Brier sum declared only its rows. Their
    totals are class aggregates: the curve's observed counts add up to the pooled positives,
    and its partners publish their own class counts (``fedroc.class_counts``, both classes
    above q there), so the pooled total minus theirs is the victim's positive count; the
    secure Brier sum minus the partners' clear Brier sums is its sum of squared errors,
    n_pos - 2 sum_pos(p) + sum(p^2), and with its sum of squares (``fedroc.centered_ss``,
    all rows) the positives' score sum: a lone positive's exact score. On main 446ba58, a
    victim of 120 rows with 1 to 4 positives (q = 5) beside two partners of 200 rows: the
    positive count in 20 of 20, the positives' score sum to 1e-6 in 20 of 20.

    Now a secure calibration and a secure Brier sum declare the site's class counts, as the
    secure exact tree does: the victim refuses to join them, 0 of 20."""
    from fedroc.secagg import secure_sum

    counted = scored = 0
    for seed in range(TRIALS):
        n_pos = 1 + seed % 4
        fed, y, s = _federation_with_a_small_class(seed, n_pos)
        assert _try(fed.call, "fedroc.class_counts", sites=["v"]) is None  # below q
        partners = fed.call("fedroc.class_counts", sites=["p1", "p2"])
        known_pos = partners["p1"]["n_pos"] + partners["p2"]["n_pos"]
        brier = fed.call("fedroc.brier", sites=["p1", "p2"])
        curve = _try(secure_sum, fed, "fedroc.calibration", n_bins=10)
        guess = None
        if curve is not None:
            guess = round(float(np.sum(curve["sum_observed"])) - known_pos)
            counted += guess == n_pos
        total = _try(secure_sum, fed, "fedroc.brier")
        if total is not None and guess is not None:
            sse = float(total["sse"]) - brier["p1"]["sse"] - brier["p2"]["sse"]
            ss = fed.call("fedroc.centered_ss", sites=["v"], column="score", mean=0.0)["v"]["ss"]
            scored += abs((guess + ss - sse) / 2.0 - s[y].sum()) < 1e-6
    assert counted == 0, f"a positive count under q read in {counted} of {TRIALS}"
    assert scored == 0, f"the positives' score sum read in {scored} of {TRIALS}"


# -- H13-2. the secure curve's withheld counts are the one withholding site's -----------------


def test_the_secure_calibration_curve_gives_no_sites_count_in_a_bin_under_q():
    """H13-2. Since R21 a site leaves out of the secure curve's sum of predictions the scores
    of the bins it would withhold in the clear (under q rows, and the secondary bin), and
    sent their rows apart (``withheld``), so that the analyst could take each bin's mean
    prediction over the other rows. Partners large enough to withhold nothing put 0 there:
    the pooled ``withheld`` was the victim's own count in each bin under q. A victim of 120
    rows with 1 to 4 of them in [0.9, 1] beside two partners of 200 uniform scores, 10 bins,
    on main 446ba58: the victim's count in that bin in 20 of 20 (and the secondary bin's).

    Now a site sends, for a withheld bin, its rows at the bin's middle in the sum of
    predictions and a flag (the clear curve's ``suppressed``) in ``withheld``: no count of
    the bin leaves it but within the pooled count: the flag is 1 for every count, right in 5
    of 20 only as the constant guess 1 is. The analyst's mean prediction
    of a flagged bin holds every row, the withheld ones at the middle."""
    from fedroc.metrics import bin_edges
    from fedroc.secagg import secure_sum
    from fedroc.secagg.statistics import secure_calibration

    counted = 0
    told: set[int] = set()
    for seed in range(TRIALS):
        rng = np.random.default_rng([1315, seed])
        k = 1 + seed % 4  # the victim's rows in [0.9, 1]
        y = rng.random(120) < 0.4
        s = np.r_[rng.uniform(0, 0.9, 120 - k), rng.uniform(0.9, 1.0, k)]
        sites = [Site("v", SiteData.from_arrays(y, s))]
        partners = {}
        for name in ("p1", "p2"):
            py, ps = rng.random(200) < 0.4, rng.random(200)
            partners[name] = ps
            sites.append(Site(name, SiteData.from_arrays(py, ps)))
        fed = Federation.from_sites(sites)
        pooled = secure_sum(fed, "fedroc.calibration", n_bins=10)
        told.add(int(np.asarray(pooled["withheld"])[9]))
        counted += int(np.asarray(pooled["withheld"])[9]) == k
        if seed == 0:
            # The analyst's curve: every row counted, the victim's bin-9 row at the middle.
            curve = secure_calibration(fed, n_bins=10).curve
            lo = bin_edges(10)[9]
            top = np.r_[partners["p1"][partners["p1"] >= lo], partners["p2"][partners["p2"] >= lo]]
            expected = (top.sum() + k * (lo + 1.0) / 2.0) / (top.size + k)
            assert curve.count[9] == top.size + k and curve.suppressed[9]
            assert abs(curve.mean_predicted[9] - expected) < 1e-9
            from rich.console import Console

            from fedroc.cli._common import calibration_table

            console = Console(width=200, record=True)
            console.print(calibration_table("Calibration", curve))
            assert "predicted at the bin's middle" in console.export_text()
    # One value whatever the count (1, 2, 3 or 4 rows): right only where the count is the
    # flag's 1, as a constant guess is (5 of 20).
    assert told == {1}, f"the pooled flag took the values {sorted(told)}"
    assert counted == TRIALS // 4, f"the victim's count in a bin under q read in {counted}"


# -- held -------------------------------------------------------------------------------------


def _sites_of_a_victim_with(seed: int, y: np.ndarray, s: np.ndarray, clusters=None) -> list[Site]:
    rng = np.random.default_rng([1317, seed])
    victim = Site("v", SiteData.from_arrays(y, s, clusters))
    partners = []
    for name in ("p1", "p2"):
        py, ps = rng.random(200) < 0.4, rng.random(200)
        pc = rng.integers(0, 40, 200) if clusters is not None else None
        partners.append(Site(name, SiteData.from_arrays(py, ps, pc)))
    return [victim, *partners]


def test_held_a_secure_clustered_summary_gives_no_class_count_under_q():
    """Held (review 13): H13-1 through the clustered method's secure round 1, whose
    all-rows histograms add up to the pooled positives. A site counts the clusters that hold
    both classes against q, and those are at most its smaller class: a victim of 1 to 4
    positives refuses round 1 (at the first stage, nothing bound), 0 of 20 read."""
    from fedroc.secagg import secure_sum

    counted = 0
    for seed in range(TRIALS):
        rng = np.random.default_rng([1314, seed])
        n_pos = 1 + seed % 4
        y = np.zeros(120, dtype=bool)
        y[rng.choice(120, n_pos, replace=False)] = True
        sites = _sites_of_a_victim_with(seed, y, rng.random(120), rng.integers(0, 30, 120))
        fed = Federation.from_sites(sites)
        partners = fed.call("fedroc.class_counts", sites=["p1", "p2"])
        known = partners["p1"]["n_pos"] + partners["p2"]["n_pos"]
        summary = _try(secure_sum, fed, "fedroc.clustered.summary", edges=[0.0, 0.5, 1.0])
        if summary is not None:
            counted += round(float(np.sum(summary["hist_pos_all"])) - known) == n_pos
    assert counted == 0, f"a positive count under q read in {counted} of {TRIALS}"


def test_held_a_refused_secure_sum_binds_the_rows_it_read():
    """Held (review 13): R10-3 through secure aggregation. A victim of q - 1 positives
    refuses the secure Brier sum and calibration curve (since H13-1, for its class count);
    one row is then added (same ledger and key) and the sum asked again: answered exactly
    when the row is positive would give its label. The refusal bound the rows it read, so
    the second sum is refused whatever the row: right in 10 of 20 (chance)."""
    from fedroc.secagg import secure_sum

    for function, args in (("fedroc.brier", {}), ("fedroc.calibration", {"n_bins": 10})):
        right = 0
        for seed in range(TRIALS):
            rng = np.random.default_rng([1316, seed])
            y = np.zeros(120, dtype=bool)
            y[rng.choice(120, 4, replace=False)] = True  # q - 1 positives
            s = rng.random(120)
            victim, *partners = _sites_of_a_victim_with(seed, y, s)
            fed = Federation.from_sites([victim, *partners])
            assert _try(secure_sum, fed, function, **args) is None
            added = bool(seed % 2)
            data = SiteData.from_arrays(np.r_[y, added], np.r_[s, rng.random()])
            again = Site("v", data, policy=victim.policy, ledger=victim.ledger,
                         identity=victim.identity)  # fmt: skip
            answered = _try(secure_sum, Federation.from_sites([again, *partners]), function,
                            **args) is not None  # fmt: skip
            right += answered == added
        assert right == TRIALS // 2, f"{function}: the added row's label in {right} of {TRIALS}"


def test_the_cost_study_of_h13_2_bounds_a_flagged_bins_mean_by_half_a_bin():
    """The small seeded version of ``scripts/secure_calibration_imputation.py``: a flagged
    bin's mean prediction is off the pooled one by less than half a bin (0.05 at 10 bins),
    and is given in bins where no other site held a row."""
    from tests._scripts import load_script

    study = load_script("secure_calibration_imputation.py", "secure_calibration_imputation")
    r = study.measure((100, 100, 100), 3, 20261207)
    assert r["flagged"] > 0 and 0.0 < r["now_max"] < 0.05


# -- H13-3. the privacy status shows a digest of the rows ------------------------------------


def test_the_privacy_status_shows_no_digest_of_the_rows(capsys, tmp_path):
    """H13-3. A site binds a digest of its rows in its ledger at its first exact release
    (the rows binding), a fixed function of the rows (``SiteData.projection_digests``, its
    salt a constant of the code). ``fedroc privacy status``, the view of a site's spending
    that an operator may show the analyst, printed its first 12 hex digits in the table and
    the whole digest under ``--json``. An analyst who knows every row but one label computes
    the digest of both candidates and finds the one shown: on main 446ba58 the label in 20
    of 20 sites (200 rows, after ``fedroc.sum``), from the table's 12 digits alone.

    Now neither output shows the rows' digests (the ledger file keeps them): 0 of 20."""
    from tests._cli import run_main
    from tests._ledger_attacks import label_read, summed_sites

    found = 0
    for y, s, audit in summed_sites(tmp_path, 1318, TRIALS):
        shown = ""
        for extra in ([], ["--json"]):
            code, out, err = run_main(
                capsys, ["privacy", "status", "--audit-dir", str(audit), *extra]
            )
            assert code == 0, err
            shown += out
        assert "holds its exact releases to one version of its rows" in shown
        found += label_read(y, s, shown, digits=12)
    assert found == 0, f"row 0's label read from the privacy status in {found} of {TRIALS}"


def test_the_privacy_status_shows_no_sites_scores_through_its_clear_clustered_cuts(
    capsys, tmp_path
):
    """H13-3 through another binding. A site that answers clustered histograms in the clear
    (``clear_histograms = true``) binds, before its checks, the inner edges of its first
    request with one edge kept per group of edges that hold no row between them
    (``clustered:clear-edges``, for its later checks against calibration bins and confusion
    thresholds). So the bound list is a function of its scores: the first edge above each
    group of scores. ``fedroc privacy status`` showed that list, in the table ('cut its
    scores in the clear at ...', 6 significant digits) and in full under ``--json``. An
    analyst who asks once over 4097 edges (the summary itself refused: bins under q) reads
    every score to 1/4096 from the status: on main 913f1c7, the scores of 200 of 200 rows
    (a score lies in [e - 1/4096, e) for a shown edge e, and every shown edge has one),
    20 of 20 sites.

    Now the status says the site cut its scores in the clear at clustered bin edges and
    that its ledger keeps them, and ``--json`` shows a placeholder: 0 of 20."""
    import json
    import re

    from tests._cli import run_main
    from tests._ledger_attacks import asked_sites, scores_read

    read = 0
    for s, audit in asked_sites(tmp_path, 1319, TRIALS):
        found = False
        for extra in ([], ["--json"]):
            code, out, err = run_main(
                capsys, ["privacy", "status", "--audit-dir", str(audit), *extra]
            )
            assert code == 0, err
            if extra:
                value = json.loads(out)["sites"][0]["bindings"].get("clustered:clear-edges")
                shown = value if isinstance(value, list) else []
            else:  # the table: 'cut its scores in the clear at 0.000244141, ...'
                line = next(x for x in out.splitlines() if "cut its scores in the clear" in x)
                found_at = re.findall(r"\d+\.\d+(?:e-\d+)?", line.split(" at ", 1)[-1])
                shown = [float(v) for v in found_at]
            found |= scores_read(s, shown)
        read += found
    assert read == 0, f"the sites' scores (to 1/4096) read from the privacy status in {read}"
