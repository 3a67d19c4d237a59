"""Review 18: an adversarial reading of main 336947a (2026-12-07), where reviews 1-17 did not look.

The analyst is curious and uses fedroc's public calls only (``Federation.call`` of the
registered site functions, the secure sum, the MPC job's bundle request, the sequestration
service's HTTP API as a developer); what it sends (arguments, job terms, predictions) is
untrusted, and partner sites' operators may loosen their own settings when it asks them.
Each attack was run on 336947a first.

Closed: H18-1 (H16-2 in another order: partners A and B kept every default while they
summed a quantity with C over {A, B, C}, so C's check of their signed ``secagg_rebind``
passed; then their operators set ``secagg_rebind`` (and ``secagg_min_sites = 2``) and
they summed it over {A, B}: the difference was C's exact calibration counts and
positives per bin, 20 of 20 on 336947a -> 0 of 20: a site that signed that it does not
rebind stays bound on its ledger, whatever its policy says later).

Open: H18-2 (an MPC job's operating point, where the owners opt in to
``mpc.operating_points``, opens four proportions at 2^-14 that pin the pooled class counts
P and N, which docs/mpc.md said they narrow as the AUC does: 20 of 20 federations of
3 x 70 rows; strict xfail).

Tried and held (tests below unless said):

- H16-3 / H17 at a site of enough rows with a class under q (200 rows, 1 to 4 positives):
  every own check that runs before the policy's count (Brier, calibration, noisy scores,
  the secure calibration, Brier, exact tree and clustered summary) tells only whether a
  score lies outside the range, which ``fedroc.is_probability`` answers there anyway; the
  words do not depend on the count or on the class of the row outside. At such a site no
  clear cut (a confusion table, clear clustered edges) can be released, so the
  calibration's checks against released cuts never read its small class.
- Secure sums over two sets by other settings: ``secagg_min_sites`` lowered, a second
  input function (bound as the set of all inputs), the reverse order (partners of
  ``secagg_rebind`` that sum over {A, B} first and then clear it are held to {A, B}: a bound
  set stays).
- MPC: ``mpc_max_jobs`` raised after a job keeps the co-owner set bound in the ledger (H16-1
  is a binding, not a reading of the policy); one partial AUC per job (its withheld flag one
  bit of N per job); the DeLong variance at 2^-28 is two unknown sums of squares over P and
  N and does not pin P as the points do.
- Sequestration service (read, not broken): Thresholdout is Lyu et al.'s sparse vector with
  the threshold redrawn at each crossing, a query spends under a conditional UPDATE of the
  developer's row (budget, quota, token hash), answers past the budget are refused below
  the threshold too, the AUC's sensitivity follows from the public cap and prevalence, the
  noise pool is OpenDP's and used once, and a seeded server is a test setting, warned.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fedroc.apps.application  # noqa: F401  (registers every site function)
from fedroc.data import SiteData
from fedroc.exceptions import FedrocError
from fedroc.federation import Federation
from fedroc.federation.site import Site
from tests._refusals import refusal

TRIALS = 20


# -- H18-1. partners that rebind after the sum they joined C in --------------------------------


def _c_by_later_rebinding(seed: int, tmp: Path) -> tuple[bool, str]:
    """A and B sum C's quantity with it at their defaults, then set ``secagg_rebind``.

    Secure calibration over {A, B, C}, every site's ledger a file (so a restart keeps it);
    then A and B restart on their ledgers with ``secagg_rebind`` and ``secagg_min_sites = 2``
    and sum over {A, B}. Returns whether the difference is C's exact counts and positives
    per bin, and the second sum's refusal ("" when it ran).
    """
    from fedroc.privacy import DisclosurePolicy
    from fedroc.secagg import secure_sum

    rng = np.random.default_rng([1801, seed])
    rows = {n: (rng.random(k) < 0.3, rng.random(k)) for n, k in (("A", 80), ("B", 80), ("C", 40))}

    def site(name: str, policy: DisclosurePolicy | None = None) -> Site:
        return Site(name, SiteData.from_arrays(*rows[name]), policy=policy,
                    audit=tmp / f"{seed}-{name}.jsonl")  # fmt: skip

    fed = Federation.from_sites([site("A"), site("B"), site("C")])
    both = secure_sum(fed, "fedroc.calibration", n_bins=10).values
    later = DisclosurePolicy(secagg_rebind=True, secagg_min_sites=2)
    try:
        two = secure_sum(
            Federation.from_sites([site("A", later), site("B", later)]),
            "fedroc.calibration",
            n_bins=10,
        ).values
    except FedrocError as exc:
        return False, str(exc)
    y, s = rows["C"]
    idx = np.minimum((s * 10).astype(int), 9)
    exact = np.array_equal(both["count"] - two["count"], np.bincount(idx, minlength=10))
    exact &= np.allclose(
        both["sum_observed"] - two["sum_observed"], np.bincount(idx, weights=y, minlength=10)
    )
    return bool(exact), ""


def test_partners_that_set_secagg_rebind_after_a_sum_with_a_site_do_not_difference_it(tmp_path):
    """H18-1 (H16-2 in another order). C's check of its partners' signed ``secagg_rebind``
    looked at the session it joined: A and B kept the default then, and set it (with
    ``secagg_min_sites = 2``) when restarted for a second sum over {A, B}, which their
    ledgers then allowed. The two sums subtracted to C's exact calibration counts and
    positives per bin: 20 of 20 on 336947a. Now a site that signed in a session that it
    sums over one set stays bound on its ledger (``DisclosurePolicy.rebinds``): A and B
    refuse the second set, naming it: 0 of 20."""
    results = [_c_by_later_rebinding(seed, tmp_path) for seed in range(TRIALS)]
    exact = sum(e for e, _ in results)
    assert exact == 0, f"C's exact bins in {exact} of {TRIALS}"
    said = {words for _, words in results}
    assert len(said) == 1 and "signed to its partners that it sums over one set" in said.pop()


def test_a_site_that_signed_one_set_signs_it_again_after_its_operator_sets_rebind(tmp_path, capsys):
    """H18-1's statement is the ledger's: restarted with ``secagg_rebind``, a site that
    signed 'one set' in a session signs it again (a default partner accepts it, over the
    same set), and ``fedroc privacy status`` names the binding at the three sites; a fresh
    ledger with ``secagg_rebind`` signs that it rebinds (the default partner refuses it, as
    H16-2)."""
    from _cli import run_main

    from fedroc.privacy import DisclosurePolicy, keys
    from fedroc.secagg import secure_sum

    rng = np.random.default_rng(1802)
    rows = {n: (rng.random(60) < 0.3, rng.random(60)) for n in "ABC"}
    rebind = DisclosurePolicy(secagg_rebind=True)

    def site(name: str, policy: DisclosurePolicy | None = None, tag: str = "") -> Site:
        return Site(name, SiteData.from_arrays(*rows[name]), policy=policy,
                    audit=tmp_path / f"{tag}{name}.jsonl")  # fmt: skip

    secure_sum(Federation.from_sites([site(n) for n in "ABC"]), "fedroc.calibration", n_bins=10)
    a = site("A", rebind)
    assert keys.SECAGG_ONE_SET in a.ledger.bindings and not a.policy.rebinds(a.ledger)
    code, out, err = run_main(capsys, ["privacy", "status", "--audit-dir", str(tmp_path)])
    assert code == 0 and out.count("signed in a secure session that it sums each") == 3, err
    again = secure_sum(Federation.from_sites([a, site("B"), site("C")]), "fedroc.calibration",
                       n_bins=10)  # fmt: skip
    assert again.values["count"].sum() == 180
    fresh = [site("A", rebind, "new-"), site("B", None, "new-"), site("C", None, "new-")]
    with pytest.raises(FedrocError, match="secagg_rebind in their policies"):
        secure_sum(Federation.from_sites(fresh), "fedroc.calibration", n_bins=10)


# -- H18-2. one MPC operating point opens the class counts the job keeps secret ---------------


def _counts_fitting_a_point(n: int, point: dict, bits: int, m: int) -> list[int]:
    """Every P in [m, n - m] for which some TP, FP give the point's four opened proportions
    (sensitivity TP / P, specificity (N - FP) / N, PPV, NPV), each within one unit of 2^-bits.
    ``n`` is public (the owners' list lengths)."""
    unit = 2.0**-bits
    sens, spec, ppv, npv = (point[k] for k in ("sensitivity", "specificity", "ppv", "npv"))
    fits = []
    for p in range(m, n - m + 1):
        neg = n - p
        tps = [t for t in range(round(sens * p) - 1, round(sens * p) + 2) if 0 <= t <= p]
        fps = [f for f in range(round((1 - spec) * neg) - 1, round((1 - spec) * neg) + 2)
               if 0 <= f <= neg]  # fmt: skip
        for tp in (t for t in tps if abs(t / p - sens) <= unit):
            for fp in (f for f in fps if abs((neg - f) / neg - spec) <= unit):
                called, rest = tp + fp, n - tp - fp
                if called and abs(tp / called - ppv) > unit:
                    continue
                if rest and abs((neg - fp) / rest - npv) > unit:
                    continue
                fits.append(p)
        fits = sorted(set(fits))
    return fits


@pytest.mark.xfail(
    strict=True,
    reason="H18-2 open: an MPC job's operating point (opt_in mpc.operating_points) opens its "
    "sensitivity, specificity, PPV and NPV at 2^-14, four fractions of TP, FP, P and N with "
    "P + N public, which pin P and N at every federation measured (3 x 70 rows, 20 of 20). "
    "A fix needs the points' proportions withheld or coarsened to the order of 1/n (what the "
    "opt-in is for changes), not a small change",
)
def test_an_mpc_operating_point_does_not_pin_the_class_counts():
    """H18-2. docs/mpc.md says the analyst never learns P and N, and of the operating points
    that "the four proportions at 2^-14 narrow the class counts much as the AUC does" (the
    AUC leaves at least 131 candidates for P at 200 rows or more). But the four are four
    constraints on three unknowns (TP, FP, P; n public): one Youden point of a job over 3
    owners of 70 rows each, at the defaults (14 bits, minimum class count 5), leaves one
    candidate, the true P, at 20 of 20 federations on 336947a (the engine run in process on
    the owners' rows, as the cluster runs it)."""
    from fedroc.mpc.local import secure_auc_local

    pinned = 0
    for seed in range(TRIALS):
        rng = np.random.default_rng([1803, seed])
        owners = []
        for _ in range(3):
            y = rng.random(70) < rng.uniform(0.15, 0.5)
            owners.append((y.astype(int), np.round(rng.normal(y * 1.0, 1.0), 2)))
        seeded = b"review18-%d" % seed
        out = secure_auc_local(owners, frac_bits=14, min_class_count=5, ci=False,
                               asks="youden", master_seed=seeded).outputs  # fmt: skip
        (point,) = out.operating_points
        p = int(sum(o[0].sum() for o in owners))
        fits = _counts_fitting_a_point(210, point, 14, 5)
        assert p in fits, (p, fits)  # the helper is right: the truth always fits
        pinned += fits == [p]
    assert pinned == 0, f"P pinned at {pinned} of {TRIALS} federations"


# -- tried and held ----------------------------------------------------------------------------


def _class_under_q_refusals(positives: int, outside: str) -> list[str]:
    """The refusals at a site of 200 rows and 1 to 4 positives (q = 5), beside two partners
    of 100 rows, of the functions that declare its class counts, in the clear and summed:
    ``outside`` is "none", "positive" or "negative", the class of its one row at 1.5."""
    from fedroc.secagg import secure_sum

    rng = np.random.default_rng([1804, positives, len(outside)])
    y = np.zeros(200, dtype=bool)
    y[:positives] = True
    s = rng.random(200)
    if outside != "none":
        s[0 if outside == "positive" else 199] = 1.5

    def federation() -> Federation:
        partners = [
            Site(
                n,
                SiteData.from_arrays(
                    rng.random(100) < 0.4, rng.random(100), cluster=np.arange(100) // 2
                ),
            )
            for n in "AB"
        ]
        victim = Site("v", SiteData.from_arrays(y, s, cluster=np.arange(200) // 2))
        return Federation.from_sites([*partners, victim])

    said = [
        refusal(federation(), "fedroc.brier", sites=["v"]),
        refusal(federation(), "fedroc.calibration", sites=["v"], n_bins=10),
        refusal(
            federation(),
            "rocglm.noisy_scores",
            sites=["v"],
            epsilon=1.0,
            delta=1e-5,
            sensitivity=0.1,
        ),
    ]
    for function, args in (
        ("fedroc.calibration", {"n_bins": 10}),
        ("fedroc.brier", {}),
        ("fedroc.histogram.tree", {"branching": 2, "height": 3, "lo": 0.0, "hi": 1.0,
                                   "mode": "secure-aggregation"}),
        ("fedroc.clustered.summary", {"edges": np.linspace(0, 1, 5)}),
    ):  # fmt: skip
        try:
            secure_sum(federation(), function, **args)
            said.append("answered")
        except FedrocError as exc:
            said.append(str(exc))
    return said


def test_held_a_class_under_q_is_told_only_whether_a_score_lies_outside_the_range():
    """The H16-3 / H17 family at a site of enough rows with a class under q: its own checks
    (a score outside [0, 1] or outside the tree's range) run before the policy's count, but
    what they tell is whether any row lies outside, which ``fedroc.is_probability`` answers
    at such a site anyway. The refusals of 7 functions (Brier, calibration, noisy scores in
    the clear; calibration, Brier, the exact tree and the clustered summary summed) are the
    same for 1 to 4 positives, and the same whether the row outside is a positive or a
    negative."""
    for outside in ("none", "positive", "negative"):
        said = {tuple(_class_under_q_refusals(k, outside)) for k in range(1, 5)}
        if outside == "negative":
            said |= {tuple(_class_under_q_refusals(k, "positive")) for k in range(1, 5)}
        assert len(said) == 1, (outside, said)


def test_held_partners_that_rebound_first_and_then_clear_it_are_held_to_their_first_set(
    tmp_path,
):
    """The other order of H18-1: A and B of ``secagg_rebind`` sum over {A, B} first, then
    their operators clear the setting and they join C over {A, B, C}: their ledgers hold
    {A, B} (a bound set stays), so they refuse, and C's input is in no sum."""
    from fedroc.privacy import DisclosurePolicy
    from fedroc.secagg import secure_sum

    rng = np.random.default_rng(1805)
    rows = {n: (rng.random(60) < 0.3, rng.random(60)) for n in "ABC"}

    def site(name: str, policy: DisclosurePolicy | None = None) -> Site:
        return Site(name, SiteData.from_arrays(*rows[name]), policy=policy,
                    audit=tmp_path / f"{name}.jsonl")  # fmt: skip

    loose = DisclosurePolicy(secagg_rebind=True, secagg_min_sites=2)
    secure_sum(Federation.from_sites([site("A", loose), site("B", loose)]), "fedroc.calibration",
               n_bins=10)  # fmt: skip
    with pytest.raises(FedrocError, match=r"over the sites \['A', 'B'\] before"):
        secure_sum(Federation.from_sites([site(n) for n in "ABC"]), "fedroc.calibration",
                   n_bins=10)  # fmt: skip


def test_held_mpc_owners_that_raise_max_jobs_after_a_job_keep_its_co_owners(tmp_path):
    """H16-1's binding is the ledger's, as H18-1's now is: owners at the default of one job
    take a job over {A, B, C}; restarted with ``mpc_max_jobs = 3`` they refuse a job over
    {A, B} (C's rows by difference), and run one over {A, B, C} again."""
    from fedroc.methods.mpc import request_bundles
    from fedroc.mpc import JobTerms
    from fedroc.privacy import DisclosurePolicy

    rng = np.random.default_rng(1806)
    rows = {n: (rng.random(40) < 0.4, rng.random(40)) for n in "ABC"}

    def ask(owners: str, policy: DisclosurePolicy | None = None) -> str:
        sites = [Site(n, SiteData.from_arrays(*rows[n]), policy=policy,
                      audit=tmp_path / f"{n}.jsonl") for n in owners]  # fmt: skip
        terms = JobTerms.create(list(owners), (bytes(range(32)), bytes(range(1, 33))))
        try:
            request_bundles(Federation.from_sites(sites), terms)
        except FedrocError as exc:
            return str(exc)
        return "answered"

    assert ask("ABC") == "answered"
    more = DisclosurePolicy(mpc_max_jobs=3)
    assert "co-owners ['A', 'B', 'C']" in ask("AB", more)
    assert ask("ABC", more) == "answered"


def test_a_node_that_signed_one_set_tells_its_operator_that_secagg_rebind_does_not_apply(
    tmp_path, caplog
):
    """H18-1 at a Flower node: its operator who sets ``secagg-rebind`` on a ledger that
    signed 'one set' is told, when the node builds its site, that the ledger holds it to one
    set (the setting's own warning says it may rebind); a node on a fresh ledger is not."""
    import logging

    import pandas as pd

    from fedroc.federation.flower.site_config import SiteNodeConfig
    from fedroc.privacy import keys

    path = tmp_path / "a.csv"
    rng = np.random.default_rng(1807)
    pd.DataFrame({"label": (rng.random(40) < 0.3).astype(int), "score": rng.random(40)}).to_csv(
        path, index=False
    )

    def build(node_dir: str) -> Site:
        config = {"site": "a", "data": str(path), "node-dir": str(tmp_path / node_dir),
                  "secagg-rebind": True}  # fmt: skip
        return SiteNodeConfig.from_node_config(config).build()

    said = "secagg_rebind is set, but the site signed in a secure session"
    with caplog.at_level(logging.WARNING, logger="fedroc.flower"):
        build("fresh")
    assert said not in caplog.text
    site = build("signed")
    site.ledger.bind(keys.SECAGG_ONE_SET, True)  # as its share_keys binds it
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fedroc.flower"):
        build("signed")
    assert said in caplog.text, caplog.text


def test_a_node_bound_to_one_set_says_one_accurate_message_of_secagg_rebind(tmp_path, caplog):
    """The node of the test above logged the setting's generic warning ('sites that keep
    the default refuse secure sums with this site', false on a ledger bound to one set: it
    signs 'one set' again and they accept) and then the correction. Now one message, and
    the generic one stays for a node on a fresh ledger."""
    import logging

    import pandas as pd

    from fedroc.federation.flower.site_config import SiteNodeConfig
    from fedroc.privacy import keys

    path = tmp_path / "a.csv"
    rng = np.random.default_rng(1808)
    pd.DataFrame({"label": (rng.random(40) < 0.3).astype(int), "score": rng.random(40)}).to_csv(
        path, index=False
    )

    def said(node_dir: str) -> list[str]:
        config = {"site": "a", "data": str(path), "node-dir": str(tmp_path / node_dir),
                  "secagg-rebind": True}  # fmt: skip
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="fedroc.flower"):
            site = SiteNodeConfig.from_node_config(config).build()
        return [r.getMessage() for r in caplog.records if "secagg_rebind" in r.getMessage()], site

    fresh, _ = said("fresh")
    assert len(fresh) == 1 and "refuse secure sums with this site" in fresh[0], fresh
    _, site = said("signed")
    site.ledger.bind(keys.SECAGG_ONE_SET, True)  # as its share_keys binds it
    (bound,) = said("signed")[0]
    assert "refuse secure sums" not in bound and "its ledger holds it to that" in bound
    assert "the setting has no effect" in bound and "still sum with this site" in bound
