"""Review 16: an adversarial reading of main 0b40f80 (2026-12-07), where reviews 1-15 did not look.

The analyst is curious and uses fedroc's public calls only (``Federation.call`` of the
registered site functions, the methods, the MPC engine as a cluster runs it); what it sends
a site (job terms, co-owners, arguments) is untrusted. Each attack was run on 0b40f80 first.

Closed: H16-1 (a site's MPC owners' ``mpc_max_jobs`` above 1 let two jobs run over two sets
of co-owners, {A, B, C} then {A, B}: the first AUPR above the second told that C, at its
default of one job, held a positive among its rows, with certainty: told for 7 of 20
sites of one positive among 5 rows, never wrongly for 20 sites of none -> 0 of 20: every
job a site authorises is over the co-owners of its first); H16-3 (``rocglm.sensitivity``
read the rows before the policy's count: at a site under q rows its refusal said "needs at
least two scores" at one row and another thing at 2 to 4, a count under q told for 20 of
20 sites -> 0 of 20: the site refuses under q rows first, in the policy's words; so do the
Brier score and the calibration curve, whose "scores lie outside [0, 1]" told it of a site
of 1 to 4 rows, 10 of 10 -> 0 of 10, and the clustered summary, whose "outside the shared
score range" did through a secure sum, 10 of 10 -> 0 of 10).

Closed since (the next session): H16-2 (the same shape through secure aggregation, where
the partners' own settings allow it: A and B of ``secagg_rebind`` and
``secagg_min_sites = 2`` summed over {A, B, C} and {A, B}, and the difference was C's
input, C at every default: its exact calibration counts and positives per bin, 5-8 bins
under q per site, 20 of 20 -> 0 of 20: each member signs whether its policy rebinds, and a
site bound to one set refuses a session with a member that may rebind).

Tried and held (the first and the third have tests below):

- The DP mechanisms' noise against closed forms: the analytic Gaussian's sigma gives
  delta within 1e-9 relative of the target by an independent formula (scipy.stats.norm),
  and the classic calibration's event records the exact delta above epsilon 1; t shares of
  continuous Laplace noise sum to Laplace(b) (KS, 3 and 5 shares) and t shares of discrete
  noise to the discrete Laplace law (chi-square, 3 and 5 shares).
- Thresholdout's sparse vector: threshold noise Lap(2 sigma), query noise Lap(4 sigma), a
  crossing charged Delta / sigma plus the answer's Delta / sigma: Lyu, Su & Li (2017),
  Alg. 1 with c = 1 (epsilon_1 = Delta / 2 sigma, epsilon_2 = 2 Delta / 4 sigma).
- An MPC owner of ``max_jobs = 2`` runs a second job over the same co-owners (a re-run)
  after the fix; a co-owner set is bound by the job the site authorised, not by a refused
  one.
- Secure aggregation under dropouts the analyst chooses: with the majority threshold the
  split view needs 2t <= n answers (tests/test_secagg_attacks.py plays it at n = 5); the
  noise of a DP input is split into t shares, t the session's threshold, never the number
  of survivors; a session id reused in a second Flower run (fresh state) gets fresh keys
  and masks, and a clustered round-1 session id is bound in the ledger (signed once).
- Continuous Laplace shares under secure aggregation: each site's noisy input is rounded
  to the ring's 2^-frac_bits before it is masked, and a whole count plus a rounded share is
  the count plus the rounded share: the sum's low bits depend on the noise alone (no
  Mironov-type leak), and discrete shares are integers.
- Exact inputs over two sets: a site binds its partners for every quantity (``*``) at its
  first unmasking; a "both" function whose partners release it in the clear either
  declares class counts the site holds to q in both ways (``fedroc.brier``,
  ``fedroc.class_counts``) or holds the site to one way of exact binned counts
  (calibration, trees, the clustered summary and moments).
- The sequestration service: the noisy prevalence is counted once per test set; a
  developer's noise is the server's (a pool of OpenDP draws, each used once); a crossing
  charges the sparse vector and the answer; the rounding step depends on the public
  prevalence and subset size; ``max_copies`` 0 charges sensitivity 1.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import fedroc.apps.application  # noqa: F401  (registers every site function)
from fedroc.data import SiteData
from fedroc.exceptions import FedrocError
from fedroc.federation import Federation
from fedroc.federation.site import Site

TRIALS = 20


# -- H16-1. MPC jobs over two sets of co-owners ------------------------------------------------


def _owners(seed: int, positives: int) -> tuple[list[Site], dict[str, tuple]]:
    """A and B (60 rows, ``mpc_max_jobs = 2``), and C: 5 rows holding ``positives`` positives."""
    from fedroc.privacy import DisclosurePolicy

    rng = np.random.default_rng([1601, seed])
    rows = {}
    for name in "AB":
        y = rng.random(60) < 0.3
        rows[name] = (y, np.round(rng.normal(y * 1.0, 1.0), 6))
    y = np.zeros(5, dtype=bool)
    y[:positives] = True
    rows["C"] = (y, np.round(rng.normal(y * 1.0, 1.0), 6))
    two_jobs = DisclosurePolicy(mpc_max_jobs=2)
    sites = [
        Site(name, SiteData.from_arrays(*rows[name]), policy=two_jobs if name != "C" else None)
        for name in "ABC"
    ]
    return sites, rows


def _job(sites: list[Site], rows: dict[str, tuple], owners: str, seed: bytes):
    """The job over ``owners`` as the sites authorise it, and what its cluster opens.

    The sites' bundles are asked through their site function (their policies decide); the
    outputs are the MPC engine's on the owners' rows, as the cluster computes them from the
    bundles. None when a site refuses.
    """
    from fedroc.methods.mpc import request_bundles
    from fedroc.mpc import JobTerms
    from fedroc.mpc.local import secure_auc_local

    terms = JobTerms.create(list(owners), (bytes(range(32)), bytes(range(1, 33))))
    fed = Federation.from_sites([s for s in sites if s.name in owners])
    try:
        request_bundles(fed, terms)
    except FedrocError:
        return None
    return secure_auc_local([rows[o] for o in owners], ci=False, master_seed=seed).outputs


def _told_a_positive(seed: int, positives: int) -> bool | None:
    """The analyst's claim "C holds a positive": the AUPR of the jobs over {A, B, C} and
    {A, B}. Rows of negatives never raise an average precision, so a first AUPR above the
    second is a positive of C's for certain. None when a job is refused."""
    sites, rows = _owners(seed, positives)
    with_c = _job(sites, rows, "ABC", b"with-%d" % seed)
    without = _job(sites, rows, "AB", b"without-%d" % seed)
    if with_c is None or without is None:
        return None
    assert with_c.released and without.released
    return with_c.pr_auc > without.pr_auc


def test_two_mpc_jobs_over_two_sets_of_co_owners_do_not_tell_a_sites_positives():
    """H16-1. C (5 rows, one job, the default) authorises the job over {A, B, C}; A and B,
    whose operators allow two jobs, also the one over {A, B}. The jobs' AUPRs subtract to
    C's rows: on 0b40f80 the first above the second told that C held a positive (a class
    count under q, which C releases in no other way) for 7 of 20 sites of one positive,
    and never for sites of none (0 of 20). Now each site binds the co-owners of its first
    job and refuses a job over another set: 0 of 20."""
    told = [_told_a_positive(seed, positives=1) for seed in range(TRIALS)]
    wrong = [_told_a_positive(seed, positives=0) for seed in range(TRIALS)]
    assert not any(wrong)  # the claim is never wrong (checked on 0b40f80: 0 of 20)
    assert sum(bool(t) for t in told) == 0, f"told C's positive in {sum(map(bool, told))} of 20"
    assert told == [None] * TRIALS  # refused: the second set of co-owners


def test_held_an_owner_of_two_jobs_reruns_a_job_over_the_same_co_owners(tmp_path):
    """What ``mpc_max_jobs`` above 1 is for, a second job over the same co-owners, still
    runs; a job over another set is refused, also after the site restarts on its ledger."""
    from fedroc.methods.mpc import request_bundles
    from fedroc.mpc import JobTerms
    from fedroc.privacy import DisclosurePolicy

    _, rows = _owners(0, positives=1)
    policy = DisclosurePolicy(mpc_max_jobs=3)

    def site(name: str) -> Site:
        return Site(name, SiteData.from_arrays(*rows[name]), policy=policy,
                    audit=tmp_path / f"{name}.jsonl")  # fmt: skip

    def ask(owners: str) -> FedrocError | None:
        terms = JobTerms.create(list(owners), (bytes(range(32)), bytes(range(1, 33))))
        try:
            request_bundles(Federation.from_sites([site(o) for o in owners]), terms)
        except FedrocError as exc:
            return exc
        return None

    assert ask("ABC") is None
    assert ask("ABC") is None  # a re-run over the same co-owners (restarted sites)
    refused = ask("AB")
    assert refused is not None and "co-owners ['A', 'B', 'C']" in str(refused), refused


def test_the_privacy_status_names_the_co_owners_an_mpc_job_binds(tmp_path, capsys):
    """The operator reads in ``fedroc privacy status`` which set of co-owners its site's
    MPC jobs are bound to (the analyst's choice in the job's terms, no row)."""
    from _cli import run_main

    from fedroc.methods.mpc import request_bundles
    from fedroc.mpc import JobTerms

    _, rows = _owners(1, positives=1)
    sites = [Site(n, SiteData.from_arrays(*rows[n]), audit=tmp_path / f"{n}.jsonl") for n in "ABC"]
    terms = JobTerms.create(["C", "A", "B"], (bytes(range(32)), bytes(range(1, 33))))
    request_bundles(Federation.from_sites(sites), terms)
    code, out, err = run_main(capsys, ["privacy", "status", "--audit-dir", str(tmp_path)])
    assert code == 0, err
    assert out.count(f"authorised MPC job {terms.job} over co-owners A, B, C") == 3, out


# -- the DP mechanisms against closed forms ----------------------------------------------------


@pytest.mark.parametrize(("epsilon", "delta"), [(0.5, 1e-6), (1.0, 1e-5), (4.0, 1e-3)])
def test_held_the_analytic_gaussian_sigma_meets_its_delta_by_an_independent_formula(epsilon, delta):
    """Balle & Wang (2018), Theorem 8, written with scipy.stats.norm: delta(sigma) =
    Phi(D/2s - e s/D) - e^e Phi(-D/2s - e s/D). The sigma fedroc calibrates meets the
    target (within 1e-9 relative) and a sigma 1e-6 smaller does not."""
    from fedroc.privacy.mechanisms import analytic_gaussian_sigma

    def exact(sigma: float, sens: float) -> float:
        a, b = sens / (2 * sigma), epsilon * sigma / sens
        return stats.norm.cdf(a - b) - np.exp(epsilon) * stats.norm.cdf(-a - b)

    for sens in (0.01, 1.0, 3.0):
        sigma = analytic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sens)
        assert exact(sigma, sens) <= delta * (1 + 1e-9)
        assert exact(sigma * (1 - 1e-6), sens) > delta


def test_held_the_classic_gaussian_event_records_its_true_delta_above_epsilon_1():
    """The classic calibration is proven for epsilon < 1; at epsilon 10 its noise is not
    (10, 1e-5)-DP (its exact delta is 2.3e-5), and the event records that delta."""
    from fedroc.privacy.mechanisms import analytic_gaussian_delta, gaussian_mechanism

    _, event = gaussian_mechanism(
        np.zeros(3), epsilon=10.0, delta=1e-5, sensitivity=1.0, rng=np.random.default_rng(0)
    )
    assert event.delta > 2e-5
    assert event.delta == pytest.approx(
        analytic_gaussian_delta(event.noise_scale, epsilon=10.0, sensitivity=1.0)
    )


@pytest.mark.parametrize("n_shares", [3, 5])
def test_held_laplace_shares_sum_to_the_declared_law(n_shares):
    """t shares of continuous noise sum to Laplace(sensitivity / epsilon) (KS test), and t
    shares of discrete noise to the discrete Laplace law P(k) ~ alpha^|k|, alpha =
    exp(-epsilon / sensitivity) (chi-square on -6..6 and the tails)."""
    from fedroc.privacy.mechanisms import laplace_shares

    rng = np.random.default_rng([1602, n_shares])
    draws = 20_000
    eps = 0.7
    cont = sum(
        laplace_shares(draws, noise="continuous", n_shares=n_shares, epsilon=eps, rng=rng)[0]
        for _ in range(n_shares)
    )
    assert stats.kstest(cont, stats.laplace(scale=1 / eps).cdf).pvalue > 1e-3
    disc = sum(
        laplace_shares(draws, noise="discrete", n_shares=n_shares, epsilon=eps, rng=rng)[0]
        for _ in range(n_shares)
    )
    alpha = np.exp(-eps)
    ks = np.arange(-6, 7)
    pmf = (1 - alpha) / (1 + alpha) * alpha ** np.abs(ks)
    observed = np.array([np.sum(disc == k) for k in ks] + [np.sum(np.abs(disc) > 6)])
    expected = np.append(pmf, 1 - pmf.sum()) * draws
    assert stats.chisquare(observed, expected).pvalue > 1e-3


# -- H16-2. secure sums over two sets, allowed by the partners' policies -----------------------


def _calibration_of_c_by_difference(seed: int) -> tuple[bool, int]:
    """Secure calibration sums over {A, B, C} and {A, B}, where A and B allow a second set
    (``secagg_rebind``) of two sites (``secagg_min_sites = 2``) and C keeps the defaults.
    Returns whether the difference is C's exact counts and positives per bin, and how many
    of C's bins hold 1 to q - 1 rows."""
    from fedroc.privacy import DisclosurePolicy
    from fedroc.secagg import secure_sum

    rng = np.random.default_rng([1603, seed])
    weak = DisclosurePolicy(secagg_rebind=True, secagg_min_sites=2)
    rows = {n: (rng.random(k) < 0.3, rng.random(k)) for n, k in (("A", 80), ("B", 80), ("C", 40))}
    sites = [
        Site(n, SiteData.from_arrays(*rows[n]), policy=weak if n != "C" else None) for n in "ABC"
    ]
    fed = Federation.from_sites(sites)
    try:
        both = secure_sum(fed, "fedroc.calibration", n_bins=10).values
        two = secure_sum(fed, "fedroc.calibration", sites=["A", "B"], n_bins=10).values
    except FedrocError:
        return False, 0
    y, s = rows["C"]
    idx = np.minimum((s * 10).astype(int), 9)
    count = np.bincount(idx, minlength=10)
    positives = np.bincount(idx, weights=y, minlength=10)
    exact = np.array_equal(both["count"] - two["count"], count) and np.allclose(
        both["sum_observed"] - two["sum_observed"], positives
    )
    return exact, int(np.sum((count > 0) & (count < 5)))


def test_a_sites_input_is_not_the_difference_of_sums_its_partners_allow():
    """H16-2. C keeps every default and joins one secure sum, over three sites; A and B
    loosen their own settings (``secagg_rebind``, ``secagg_min_sites = 2``, each warned of
    in their operator's log as exposing "the inputs of the sites in one set and not the
    other") and also sum over {A, B}. The two sums subtract to C's input: its exact counts
    and positives in every calibration bin, bins of 1 to q - 1 rows included, which C
    releases in no other way. Measured on 0b40f80: 20 of 20 (C's bins under q: 5-8 per
    site). Now each member signs whether its policy rebinds, and C refuses a session with a
    member that does, before any share or masked input leaves it: 0 of 20."""
    results = [_calibration_of_c_by_difference(seed) for seed in range(TRIALS)]
    exact = sum(e for e, _ in results)
    assert exact == 0, f"C's exact bins in {exact} of {TRIALS} ({[k for _, k in results]})"


def _rebinding_partners(policy_of_c=None) -> tuple[Federation, Site]:
    """A and B of ``secagg_rebind`` (and ``secagg_min_sites = 2``), C of ``policy_of_c``;
    the federation and C."""
    from fedroc.privacy import DisclosurePolicy

    rng = np.random.default_rng(1605)
    weak = DisclosurePolicy(secagg_rebind=True, secagg_min_sites=2)
    sites = [
        Site(n, SiteData.from_arrays(rng.random(60) < 0.3, rng.random(60)), policy=p)
        for n, p in (("A", weak), ("B", weak), ("C", policy_of_c))
    ]
    return Federation.from_sites(sites), sites[2]


def test_a_site_bound_to_one_set_names_the_members_that_rebind():
    """H16-2's refusal: C names A and B and their setting; it sent no masked input, and its
    ledger bound no partners (the sum it refused does not hold it to {A, B, C})."""
    from fedroc.secagg import secure_sum

    fed, c = _rebinding_partners()
    with pytest.raises(FedrocError) as refused:
        secure_sum(fed, "fedroc.calibration", n_bins=10)
    said = str(refused.value)
    assert "site 'C' refuses" in said and "['A', 'B']" in said and "secagg_rebind" in said
    assert said.rstrip(")").endswith("sum without those members, or without this site"), said
    assert not [k for k in c.ledger.bindings if "secagg" in k], c.ledger.bindings


def test_sites_that_all_rebind_still_sum_together():
    """The check is C's: sites that all set ``secagg_rebind`` accepted the risk for their
    own inputs and sum over {A, B, C} and then {A, B}, as before."""
    from fedroc.privacy import DisclosurePolicy
    from fedroc.secagg import secure_sum

    fed, _ = _rebinding_partners(DisclosurePolicy(secagg_rebind=True, secagg_min_sites=2))
    both = secure_sum(fed, "fedroc.calibration", n_bins=10)
    two = secure_sum(fed, "fedroc.calibration", sites=["A", "B"], n_bins=10)
    assert both.values["count"].sum() == 180 and two.values["count"].sum() == 120


def test_the_server_cannot_hide_that_a_member_rebinds():
    """The flag is in each member's signed advertisement: a server that relays A and B as
    bound to one set breaks their signatures, and C shares nothing (its keys' check fails
    before the rebind check could pass it)."""
    from fedroc.secagg.protocol import SecAggServer

    class Server(SecAggServer):
        def share_keys(self) -> list[str]:
            self.state.rebinds = dict.fromkeys(self.state.u1, False)
            return super().share_keys()

    fed, _ = _rebinding_partners()
    server = Server(fed, "fedroc.calibration", {"n_bins": 10})
    with pytest.raises(FedrocError) as refused:
        server.run()
    said = str(refused.value)
    assert "do not carry their signature" in said and "'A'" in said and "'B'" in said, said
    # A site of the last version (v2, no flag) fails the same check: the refusal names the
    # protocol, so a mixed deployment's operators can tell.
    assert "'fedroc-secagg/v3 advertisement'" in said


def test_sites_that_do_not_know_the_rebind_flag_still_sum_where_no_member_rebinds(monkeypatch):
    """An analyst of this version relayed ``rebinds`` (all zeros) to sites that all keep the
    default, and a site of the last version, whose share_keys takes no such argument,
    refused every secure sum ("argument 'rebinds' is not an argument of this function"):
    upgrading the analyst before the nodes stopped the deployment. Relayed only where a
    member rebinds (absent reads as all bound, each member's signature checks it), such
    sites sum as before; sites that rebind are still refused by the signatures
    (``test_the_server_cannot_hide_that_a_member_rebinds``)."""
    from fedroc.federation.site import site_function_schema
    from fedroc.secagg import protocol, secure_sum

    # A share_keys of the last version: the same arguments without the flag.
    share_keys = site_function_schema(protocol.FUNCTIONS[protocol.STAGE_SHARE_KEYS])
    monkeypatch.delitem(share_keys, protocol.KEY_REBINDS)
    rng = np.random.default_rng(1606)
    sites = [Site(n, SiteData.from_arrays(rng.random(60) < 0.3, rng.random(60))) for n in "ABC"]
    summed = secure_sum(Federation.from_sites(sites), "fedroc.calibration", n_bins=10)
    assert summed.values["count"].sum() == 180


# -- H16-3. the sensitivity heuristic's refusals at a site under q rows ------------------------


def _sensitivity_refusals(n_breaks: int | None) -> dict[int, set[str]]:
    """``rocglm.sensitivity``'s refusal at 20 sites of 1 to 4 rows (q = 5), by row count."""
    said: dict[int, set[str]] = {}
    for seed in range(TRIALS):
        n = 1 + seed % 4
        rng = np.random.default_rng([1604, seed])
        y, s = rng.random(n) < 0.5, rng.random(n)
        if seed % 8 == 7:
            s[:] = 0.25  # equal scores too
        fed = Federation.from_sites([Site("v", SiteData.from_arrays(y, s))])
        args = {} if n_breaks is None else {"n_breaks": n_breaks}
        with pytest.raises(FedrocError) as refused:
            fed.call("rocglm.sensitivity", **args)
        said.setdefault(n, set()).add(str(refused.value))
    return said


@pytest.mark.parametrize("n_breaks", [None, 4])
def test_the_sensitivity_heuristic_does_not_tell_a_row_count_under_q(n_breaks):
    """H16-3. A site of fewer than q rows refuses with the policy's words, which name no
    count (H14-1). ``rocglm.sensitivity`` read the rows first: "needs at least two scores"
    at one row, "found one occupied cell" at 2 to 4 (default breaks), "not all equal" for
    equal scores, and the policy's refusal at 2 to 4 rows with n_breaks 4: a site of one
    row told from the others in 20 of 20 sites on 0b40f80. Now every site under q reads
    the same refusal (0 of 20)."""
    said = _sensitivity_refusals(n_breaks)
    words = set().union(*said.values())
    assert len(words) == 1, {n: sorted(w) for n, w in said.items()}
    assert "below the minimum of 5" in next(iter(words))


def _probability_refusals(function: str, args: dict) -> tuple[int, set[str], set[str]]:
    """``function``'s refusal at 20 sites of 1 to 4 rows, half with a score above 1."""
    from tests._refusals import lone_small_site

    inside: set[str] = set()
    outside: set[str] = set()
    told = 0
    for seed in range(TRIALS):
        fed, wider = lone_small_site(1605, seed)
        with pytest.raises(FedrocError) as refused:
            fed.call(function, **args)
        said = str(refused.value)
        (outside if wider else inside).add(said)
        told += wider and "outside [0, 1]" in said
    return told, inside, outside


@pytest.mark.parametrize(
    ("function", "args"), [("fedroc.brier", {}), ("fedroc.calibration", {"n_bins": 10})]
)
def test_a_site_under_q_rows_does_not_say_whether_its_scores_are_probabilities(function, args):
    """As H16-3: the Brier score and the calibration curve read the scores before the
    policy's count, and a site of 1 to 4 rows (q = 5) said "scores lie outside [0, 1]"
    when one of its rows was, the policy's refusal otherwise: told for 10 of the 10 sites
    with a row above 1 on 0b40f80 (a site of one row: whether its score lies in [0, 1]).
    Now a site under q refuses in the policy's words first, whatever its scores: 0 of 10."""
    told, inside, outside = _probability_refusals(function, args)
    assert told == 0, f"told {told} of {TRIALS // 2}"
    assert inside == outside and len(inside) == 1, (inside, outside)


def test_a_site_under_q_rows_does_not_say_whether_its_scores_lie_in_the_clustered_edges():
    """As H16-3, through secure aggregation (a refusal's reason reaches the analyst): the
    clustered summary binned the scores before the policy's count, and a site of 1 to 4
    rows beside two of 60 said "scores lie outside the shared score range" when one of
    its rows did: 10 of 10 sites with a row above 1 on 0b40f80. Now 0 of 10."""
    from tests._refusals import small_site_secure_refusals

    told, said = small_site_secure_refusals(
        "fedroc.clustered.summary", {"edges": np.linspace(0, 1, 5)}, 1606, TRIALS
    )
    assert told == 0 and said[True] == said[False] and len(said[False]) == 1, said
