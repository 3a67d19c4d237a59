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


def test_a_site_that_signed_one_set_signs_it_again_after_its_operator_sets_rebind(tmp_path):
    """H18-1's statement is the ledger's: restarted with ``secagg_rebind``, a site that
    signed 'one set' in a session signs it again (a default partner accepts it, over the
    same set), and its status shows the binding; a fresh ledger with ``secagg_rebind``
    signs that it rebinds (the default partner refuses it, as H16-2)."""
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
