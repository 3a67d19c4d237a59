"""Attack review 14 (main 553c50b): the budget answers, the pre-checks, the newer paths.

Public calls only (``Federation.call`` of the registered site functions, the methods, the
command line). Each attack was run on 553c50b first; where it succeeded, the fix follows in
the same commit as its test, or the hole stays documented as a strict xfail. Where an attack
did not succeed (what held), the test asserts that it still fails.

Closed: H14-1 (``delta_left`` and the privacy status's delta limit, 1/n, told the row count
of a site under q rows: 20 of 20 -> 0 of 20); H14-2 (the partners' ``rocglm.scale`` answer
"every score inside [0, 0.9]" and a secure curve over [0, 1]: the victim's rows in [0.9, 1],
count and positives, 20 of 20 -> 0 of 20); H14-2 the other way (a site's answer "outside",
before its grid is bound, named the site of a pooled lone row: 20 of 20, a strict xfail until
branch lockgrid; 0 of 20 now that every answer binds the grid). Wording: the privacy status
called a refused local-DP tree's binding "released".

Tried and held (a line each; the first two have tests below):

- ``fedroc privacy status`` (text and ``--json``), ``fedroc.epsilon_left`` and
  ``fedroc.secagg.check``: the same answers on two data sets one row apart after the same
  secure, distributed-DP, local-DP and ROC-GLM runs (3 of 3 pairs).
- H13-2's middle against the sites' clear score sums: a lone withheld score in 0 of 20
  (secondary suppression mixes in a bin of at least q rows; 20 of 20 without it).
- A spend that depends on rows: a site charges a DP release only once it passes its checks
  and records it before the reply leaves; every refusal before the charge (class counts
  under q, a score outside the bound range, a leaf split by a clear cut, rows changed) is
  given to the analyst itself, through a secure sum too (the dropped site's reason), so
  ``epsilon_left`` adds nothing to what the replies say.
- The pre-checks as oracles: ``fedroc.epsilon_left`` and ``fedroc.secagg.check`` read no
  rows (the ledger's spend and bindings, the policy); the analyst's own checks (the
  histogram's and the ROC-GLM's budget and floor) run on those answers. ``rocglm.scale``
  (the ROC-GLM's range pre-check) did not hold: H14-2.
- ``calibration_count_noise_sd``: a function of the tree's shape, the bins and the noise
  variance (epsilon, noise, draws = sites or sites / threshold), no row.
- Flower: a site ClientApp reads only the message's function, arguments (checked by the
  function's schema; arrays loaded without pickle) and requester; its state is the run's
  context state, its policy and ledger its node config's; fedroc's executors run one task
  at a time, so two runs do not share a site's state.
- The sequestration service: ``/v1/budget`` and ``/v1/me`` show units, quotas and the plan's
  public settings (``max_copies`` is the cap, a function of the sizes); Thresholdout's spend
  is its sparse vector's crossings, which its answers show and its epsilon counts; a spent
  budget refuses every query before the AUC is compared (no free crossing bits); a subset
  always holds both classes, so no query fails on the labels.
"""

from __future__ import annotations

import numpy as np

import fedroc.apps.application  # noqa: F401  (registers every site function)
from fedroc.data import SiteData
from fedroc.exceptions import FedrocError
from fedroc.federation import Federation
from fedroc.federation.site import Site

TRIALS = 20


def _try(f, *args, **kwargs):
    """``f(*args, **kwargs)``, or None when a site refuses."""
    try:
        return f(*args, **kwargs)
    except FedrocError:
        return None


# -- H14-1. the delta a site's limit leaves is 1/n: its row count under q --------------------


def _small_site(seed: int, audit=None) -> tuple[Site, int]:
    """A site of 1 to q - 1 rows (q = 5), which refuses to say how many it holds."""
    rng = np.random.default_rng([1401, seed])
    n = int(rng.integers(1, 5))
    y, s = rng.random(n) < 0.5, rng.random(n)
    return Site("v", SiteData.from_arrays(y, s), audit=audit), n


def test_the_delta_a_site_has_left_does_not_give_its_row_count_under_q(capsys, tmp_path):
    """H14-1. A site of fewer than q rows refuses ``fedroc.info`` with a message that names
    no count ("the message names the count, not its value: that is a number of the rows").
    Without a configured ``delta_limit`` its lifetime delta is 1/n, and
    ``fedroc.epsilon_left`` (no rows read, no count declared) answered ``delta_left`` = 1/n,
    and ``fedroc privacy status`` showed the same limit (noted when the site starts): the
    analyst read n as round(1 / delta_left). On main 553c50b: n in 20 of 20 sites of 1 to 4
    rows, by either.

    Now a site under q rows has no delta to spend (every release with a delta, the ROC-GLM's
    noisy scores, declares its class counts and is refused there anyway): both say 0, the
    same for every n under q: 0 of 20."""
    from tests._cli import run_main

    found_left = found_status = 0
    for seed in range(TRIALS):
        audit = tmp_path / str(seed)
        site, n = _small_site(seed, audit / "v.jsonl")
        fed = Federation.from_sites([site])
        try:
            fed.call("fedroc.info")
            raise AssertionError("a site under q rows told its size")
        except FedrocError:
            pass
        left = float(fed.call("fedroc.epsilon_left")["v"]["delta_left"])
        found_left += left > 0 and round(1 / left) == n
        code, out, err = run_main(
            capsys, ["privacy", "status", "--audit-dir", str(audit), "--json"]
        )
        assert code == 0, err
        import json

        limit = json.loads(out)["sites"][0]["delta_limit"]
        found_status += bool(limit) and round(1 / limit) == n
    assert found_left == 0, f"n read from epsilon_left in {found_left} of {TRIALS}"
    assert found_status == 0, f"n read from the privacy status in {found_status} of {TRIALS}"


# -- held -------------------------------------------------------------------------------------


def _three_sites(seed: int, audit, flip: bool) -> list[Site]:
    """Sites a, b, c of 300 rows each (probabilities); with ``flip`` a's row 0 has the other
    label and another score (the neighbouring data set). Each site draws its DP noise from
    its own ``noise_seed``, the same in both worlds: with the production samplers the local
    DP run's noisy class counts decided at random whether the trees were asked for, so the
    two worlds' spending differed by the noise alone (a fresh clone's make test, once), not
    by the row."""
    rng = np.random.default_rng([1402, seed])
    sites = []
    for name in "abc":
        y = rng.random(300) < 0.4
        s = np.clip(rng.normal(0.45 + 0.2 * y, 0.15), 0.0, 1.0)
        if name == "a" and flip:
            y[0], s[0] = not y[0], float(rng.random())
        sites.append(
            Site(name, SiteData.from_arrays(y, s), audit=audit / f"{name}.jsonl",
                 noise_seed=seed)
        )  # fmt: skip
    return sites


def _status(capsys, audit) -> list[dict]:
    """``fedroc privacy status --json`` of a folder, less what differs by the clock and path."""
    import json

    from tests._cli import run_main

    code, out, err = run_main(capsys, ["privacy", "status", "--audit-dir", str(audit), "--json"])
    assert code == 0, err
    sites = json.loads(out)["sites"]
    for s in sites:
        s.pop("ledger"), s.pop("last_entry")
        # A secure session's id is random: keep the keys' form, not the id.
        for what in ("bindings", "binding_notes"):
            s[what] = sorted(
                (k.split(":")[0] if "secagg-" in k else k, str(v) if "secagg-" not in k else "")
                for k, v in s[what].items()
            )
    return sites


def test_held_the_privacy_status_and_the_budget_answers_are_the_same_on_neighbouring_rows(
    capsys, tmp_path
):
    """Held (review 14). What ``fedroc privacy status`` shows (text and ``--json``: spending,
    limits, bindings and their notes) and what ``fedroc.epsilon_left`` and
    ``fedroc.secagg.check`` answer, after the same public calls on two data sets that differ
    in one row of site a (its label and score): a secure histogram, a histogram under
    distributed DP, the ROC-GLM under DP with its secure table and the secure calibration
    curve; and, at other sites, a histogram under local DP (class counts, then the tree, after
    the pre-check of their limits and floors). Any value in them that is a function of the
    rows would differ between the two worlds in some trial; none did (3 of 3 pairs the same;
    with the rows' digest shown again in the status, as before H13-3, they differ)."""
    from fedroc.methods import evaluate
    from fedroc.secagg import check_secure_sum

    for seed in range(3):
        seen = []
        for flip in (False, True):
            audit = tmp_path / f"{seed}-{flip}"
            fed = Federation.from_sites(_three_sites(seed, audit, flip))
            evaluate(fed, method="histogram")
            evaluate(fed, method="histogram", dp_epsilon=1.0)
            evaluate(fed, method="rocglm", epsilon=1.0, delta=1e-4)
            left = fed.call("fedroc.epsilon_left")
            check = check_secure_sum(fed, "fedroc.histogram.class_counts", budget=True)
            # Local DP on other sites (a site sends exact binned counts one way only).
            local = tmp_path / f"{seed}-{flip}-local"
            fed = Federation.from_sites(_three_sites(seed, local, flip))
            evaluate(fed, method="histogram", dp_epsilon=1.0, dp_mode="local")
            left_local = fed.call("fedroc.epsilon_left")
            seen.append((_status(capsys, audit), left, check, _status(capsys, local), left_local))
        assert seen[0] == seen[1], f"seed {seed}: the two worlds' answers differ"


def test_held_the_secure_curve_and_the_sites_clear_score_sums_give_no_withheld_score():
    """Held (review 14): H13-2's middle, undone by subtraction. The secure calibration curve
    holds a withheld bin's rows at the bin's middle, every other row's score exactly; each
    site's clear sum of its scores (``fedroc.sum``) holds every score. So the sites' sums
    minus the curve's sum of predictions is the withheld rows' distance from their bins'
    middles: where one site withheld one bin of one row (a victim's lone score in [0.9, 1],
    the partners none there), the middle plus that difference would be the row's score. It
    is not: the victim withholds another bin with it (secondary suppression, the withheld
    rows of a site are none or at least q), whose rows' distances from their middle enter
    too. The lone score to 1e-6 in 0 of 20 (the guess is off by 0.057 on average); with
    the secondary suppression taken out of ``withheld_bins``, 20 of 20."""
    from fedroc.metrics import bin_edges
    from fedroc.secagg import secure_sum

    edges = bin_edges(10)  # on the site's grid of 4096 cells
    middle = (edges[9] + edges[10]) / 2.0
    found, errors = 0, []
    for seed in range(TRIALS):
        rng = np.random.default_rng([1403, seed])
        lone = float(rng.uniform(0.9, 1.0))
        s = np.r_[rng.uniform(0.0, 0.89, 119), lone]
        sites = [Site("v", SiteData.from_arrays(rng.random(120) < 0.4, s))]
        for name in ("p1", "p2"):
            sites.append(
                Site(name, SiteData.from_arrays(rng.random(200) < 0.4, rng.uniform(0, 0.89, 200)))
            )
        fed = Federation.from_sites(sites)
        pooled = secure_sum(fed, "fedroc.calibration", n_bins=10)
        assert int(np.asarray(pooled["count"])[9]) == 1  # the lone row, pooled alone
        total = sum(float(r["sum"]) for r in fed.call("fedroc.sum", column="score").values())
        guess = middle + total - float(np.sum(pooled["sum_predicted"]))
        found += abs(guess - lone) < 1e-6
        errors.append(abs(guess - lone))
    assert found == 0, f"the lone score read in {found} of {TRIALS}"
    assert np.mean(errors) > 0.01


def test_the_privacy_status_does_not_say_a_refused_local_tree_was_released(capsys, tmp_path):
    """Found in review 14 (no hole: wording). A site binds the leaves of a local-DP tree
    before it checks them against its clear cuts, so that a refused tree holds later cuts
    apart too (R43); ``fedroc privacy status`` described every such binding as "released a
    local-DP histogram tree of 16 leaves in the clear", beside 0 DP releases, for a tree the
    site had refused (a calibration edge at 0.1 splitting its leaf [0.0625, 0.125))."""
    from tests._cli import run_main

    rng = np.random.default_rng(1)
    site = Site(
        "v",
        SiteData.from_arrays(rng.random(300) < 0.4, rng.random(300)),
        audit=tmp_path / "v.jsonl",
    )
    fed = Federation.from_sites([site])
    fed.call("fedroc.calibration", n_bins=10)
    try:
        fed.call("fedroc.histogram.tree_local", branching=2, height=4, lo=0.0, hi=1.0, epsilon=1.0)
        raise AssertionError("the tree was released")
    except FedrocError as exc:
        assert "splits a leaf" in str(exc)
    code, out, err = run_main(capsys, ["privacy", "status", "--audit-dir", str(tmp_path)])
    assert code == 0, err
    assert "released a local-DP histogram tree" not in out
    assert "asked for a local-DP histogram tree of 16 leaves" in out


# -- H14-2. the partners' scale answers say where they hold no row -----------------------------


def _victim_and_partners_below(seed: int, k: int) -> tuple[Federation, np.ndarray, np.ndarray]:
    """A victim ``v`` of 120 rows, ``k`` (under q) of them in [0.9, 1], and two partners of 200
    rows whose scores all lie below 0.89 (a model that never says more than 0.89 there)."""
    rng = np.random.default_rng([1404, seed])
    y = rng.random(120) < 0.4
    y[:2] = [True, False]  # both classes among the rows at the top, when k >= 2
    s = np.r_[rng.uniform(0.9, 1.0, k), rng.uniform(0.0, 0.89, 120 - k)]
    sites = [Site("v", SiteData.from_arrays(y, s))]
    for name in ("p1", "p2"):
        sites.append(
            Site(name, SiteData.from_arrays(rng.random(200) < 0.4, rng.uniform(0, 0.89, 200)))
        )
    return Federation.from_sites(sites), y, s


def test_the_partners_scale_answers_do_not_isolate_a_sites_rows_in_a_secure_curve():
    """H14-2. ``rocglm.scale`` tells whether every score of a site lies in the analyst's
    ``score_range`` (the ROC-GLM's check of its public range before a release), a clear
    statement that the site holds no row outside it. It bound no way of exact counts and no
    grid: asked of the two partners over [0, 0.9] it said they hold no row above 0.9, and
    the secure calibration curve over the three sites then had, in its bin [0.9, 1], the
    victim's rows alone: their count (1 to 4, under q) and their positives, which the site
    withholds in the clear and which H13-2 kept out of the pooled ``withheld``. On main
    553c50b: the victim's count and positives in that bin in 20 of 20.

    Now a scale is answered only over a range that holds the site's one grid of exact counts,
    and a site with no grid yet binds the default grid over the range it answers about (as
    the ROC-GLM's setup binds it; whatever the answer, since the next test): the partners'
    answer over [0, 0.9] binds their grid to [0, 0.9] and they refuse the secure curve over
    [0, 1] (0 of 20); asked after the curve, the scale over [0, 0.9] is refused before the
    site reads its rows."""
    from fedroc.secagg import secure_sum

    found = refused = 0
    for seed in range(TRIALS):
        k = 1 + seed % 4
        fed, y, s = _victim_and_partners_below(seed, k)
        scale = np.array([0.0, 0.9])
        said = _try(fed.call, "rocglm.scale", sites=["p1", "p2"], score_range=scale)
        if said is None or not all(r["in_range"] for r in said.values()):
            continue
        pooled = _try(secure_sum, fed, "fedroc.calibration", n_bins=10)
        if pooled is None:
            refused += 1
            continue
        top = s >= 0.9
        count, positives = int(np.asarray(pooled["count"])[9]), float(pooled["sum_observed"][9])
        found += count == k and round(positives) == int(y[top].sum())
    assert found == 0, f"the victim's rows above 0.9 (count, positives) in {found} of {TRIALS}"
    assert refused == TRIALS  # the partners' grid is [0, 0.9]: no curve over [0, 1]
    # The other order: the curve first binds the grid [0, 1]; the scale [0, 0.9] is refused
    # before the site reads its rows, and [0, 1] (or wider) is still answered.
    fed, _, _ = _victim_and_partners_below(0, 1)
    secure_sum(fed, "fedroc.calibration", n_bins=10)
    assert _try(fed.call, "rocglm.scale", sites=["p1"], score_range=scale) is None
    wide = fed.call("rocglm.scale", sites=["p1"], score_range=np.array([-1.0, 2.0]))
    assert wide["p1"]["in_range"]


def test_a_sites_scale_answer_outside_does_not_name_the_site_of_a_pooled_lone_row():
    """H14-2 the other way. A victim holds one row above 0.999, its partners none (all below
    0.99). Asked first, before any grid is bound, ``rocglm.scale`` over [0, 0.999] answered
    ``in_range`` False at the victim and bound nothing (so that a mistyped range would not
    bind the site's grid). The secure exact tree over [0, 1] then had one pooled row in its
    leaves above 0.999, of one class: the victim's lone top row and its label, 20 of 20 on
    main 553c50b and on 0b40f80 (a strict xfail until then).

    Now every clear answer about where a site's scores lie binds its grid of exact counts
    over the range asked, whatever the answer: the victim's grid is [0, 0.999] and it
    refuses the tree over [0, 1] (0 of 20, 20 refused). A grid release over [0, 0.999] is
    refused too (its scores lie outside), which says no more than its answer did."""
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA
    from fedroc.secagg import secure_sum

    found = refused = 0
    for seed in range(TRIALS):
        rng = np.random.default_rng([1405, seed])
        y = rng.random(120) < 0.4
        s = np.r_[rng.uniform(0.9995, 1.0), rng.uniform(0.0, 0.99, 119)]
        sites = [Site("v", SiteData.from_arrays(y, s))]
        for name in ("p1", "p2"):
            sites.append(
                Site(name, SiteData.from_arrays(rng.random(200) < 0.4, rng.uniform(0, 0.99, 200)))
            )
        fed = Federation.from_sites(sites)
        said = fed.call("rocglm.scale", sites=["v"], score_range=np.array([0.0, 0.999]))
        if said["v"]["in_range"]:
            continue
        tree = _try(secure_sum, fed, INPUT_NAME, mode=MODE_SA, branching=2, height=12, lo=0.0,
                    hi=1.0)  # fmt: skip
        if tree is None:
            refused += 1
            continue
        top = slice(int(np.ceil(0.999 * 4096)), 4096)
        pos, neg = int(np.sum(tree["pos"][top])), int(np.sum(tree["neg"][top]))
        found += pos + neg == 1 and bool(pos) == bool(y[0])
    assert found == 0, f"the victim's lone top row's class in {found} of {TRIALS}"
    assert refused == TRIALS  # the victim's grid is [0, 0.999]: no tree over [0, 1]
