"""The curious analyst: attacks through fedroc's public calls only.

Each test plays an analyst who uses nothing but ``Federation.call`` / ``call_each``,
``secure_sum`` and the methods, and tries to learn what a site protects. Each attack
succeeded on fedroc 0.1 (measured in the issue "Privacy that holds against a curious
analyst"); the assertions state the measure under which it now fails.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from fedroc.data import SiteData
from fedroc.exceptions import DisclosureError
from fedroc.federation import Federation, Site
from fedroc.federation.schema import ArgumentRefused
from fedroc.methods.clustered import FUNCTION_MOMENTS, FUNCTION_SUMMARY, federated_clustered_auc
from fedroc.methods.histogram import INPUT_NAME, MODE_DDP, leaf_index, levels_from_leaves
from fedroc.methods.rocglm._site import FN_NOISY
from fedroc.privacy import DisclosurePolicy, analytic_gaussian_sigma, discrete_laplace_variance
from fedroc.secagg import secure_sum


def _sites(n_sites: int = 3, n: int = 300, seed: int = 0, **kwargs) -> list[Site]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n_sites):
        y = rng.random(n) < 0.4
        s = np.clip(rng.normal(0.35 + 0.3 * y, 0.15), 0.0, 1.0)
        out.append(Site(f"s{k}", SiteData.from_arrays(y, s), **kwargs))
    return out


# -- 1. the analyst's seed no longer fixes the sites' noise --------------------------------
def _old_noise(seed: int, site: str, stream: str, size: int, sigma: float) -> np.ndarray:
    """fedroc 0.1's SiteContext.rng: the noise an analyst regenerated from its own seed."""
    digest = hashlib.sha256(f"{site}\x00{stream}".encode()).digest()
    words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
    rng = np.random.default_rng(np.random.SeedSequence([seed, *words]))
    return rng.normal(0.0, sigma, size)


def test_a_seed_sent_to_a_site_is_refused_and_cannot_regenerate_its_noise():
    [site] = _sites(1)
    fed = Federation.from_sites([site])
    args = {"epsilon": 1.0, "delta": 1e-4, "sensitivity": 0.01, "calibration": "analytic"}
    # The old attack sent seed=1 and regenerated the noise; the site now refuses the key.
    with pytest.raises(
        DisclosureError, match="'s0' refuses 'rocglm.noisy_scores': argument 'seed'"
    ):
        fed.call(FN_NOISY, seed=1, **args)
    released = fed.call(FN_NOISY, **args)["s0"]
    data = site._data
    sigma = analytic_gaussian_sigma(epsilon=1.0, delta=1e-4, sensitivity=0.01)
    # Measure: on fedroc 0.1 the noise regenerated from the analyst's seed reproduced the
    # release exactly (and so revealed every score); now no seed the analyst tries does.
    for seed in range(20):
        guess_noise = _old_noise(seed, "s0", "rocglm.noise", data.n, sigma)
        guess = np.sort((data.score + guess_noise)[~data.label])
        # Had the noise been the analyst's, one seed would match the release exactly.
        assert not np.allclose(guess, released["negative"])
    # Two identical requests get independent noise: nothing the analyst sends fixes it.
    again = fed.call(FN_NOISY, **args)["s0"]
    assert not np.allclose(again["negative"], released["negative"])


# -- 2. the number of noise shares is the site's, not the analyst's -------------------------
def _tree_args(epsilon: float) -> dict:
    return {
        "branching": 2,
        "height": 3,
        "lo": 0.0,
        "hi": 1.0,
        "mode": MODE_DDP,
        "epsilon": epsilon,
        "noise": "discrete",
    }


def test_n_shares_from_the_analyst_is_refused_and_the_noise_stays_whole():
    sites = _sites(3, policy=DisclosurePolicy(epsilon_limit=math.inf))
    fed = Federation.from_sites(sites)
    with pytest.raises(DisclosureError, match="argument 'n_shares' is not an argument"):
        secure_sum(fed, INPUT_NAME, n_shares=10**6, **_tree_args(3.0))
    exact = np.zeros(2 + 4 + 8)
    for site in sites:
        d = site._data
        leaves = np.bincount(leaf_index(d.score[~d.label], 8), minlength=8)
        exact += np.concatenate(levels_from_leaves(leaves, 2))
    # Whatever threshold the analyst picks, the sum it can unmask holds >= 1 full draw.
    variance = discrete_laplace_variance(epsilon=1.0)  # epsilon 3 over 3 levels
    for threshold in (2, 3):
        noise = []
        for _ in range(40):
            total = secure_sum(fed, INPUT_NAME, threshold=threshold, **_tree_args(3.0))
            noise.append(np.asarray(total["neg"], np.float64) - exact)
        measured = np.var(np.concatenate(noise))
        # With n_shares = 10^6 the old code left a variance of about 1e-5 of this.
        assert measured > 0.7 * variance * (3 / threshold), (threshold, measured, variance)


# -- 3. secure aggregation over chosen subsets ------------------------------------------------
def test_sums_over_different_sets_of_sites_are_refused():
    policy = DisclosurePolicy(secagg_min_sites=2)
    sites = _sites(3, policy=policy)
    fed = Federation.from_sites(sites)
    ab = secure_sum(fed, "fedroc.class_counts", sites=["s0", "s1"])
    # {b, c} and {a, c} would give a's counts as (ab + ac - bc) / 2.
    with pytest.raises(DisclosureError, match="will not over a different set"):
        secure_sum(fed, "fedroc.class_counts", sites=["s1", "s2"])
    with pytest.raises(DisclosureError, match="will not over a different set"):
        secure_sum(fed, "fedroc.class_counts", sites=["s0", "s2"])
    # The same set again adds nothing and is allowed.
    again = secure_sum(fed, "fedroc.class_counts", sites=["s0", "s1"])
    assert again["n_pos"] == ab["n_pos"]
    # A superset is refused too: it would subtract to the newcomer's input.
    with pytest.raises(DisclosureError, match="will not over a different set"):
        secure_sum(fed, "fedroc.class_counts")


def test_default_policy_needs_three_sites_and_binds_across_restarts(tmp_path):
    two = Federation.from_sites(_sites(2))
    with pytest.raises(DisclosureError, match="needs at least 3"):
        secure_sum(two, "fedroc.class_counts")
    sites = [Site(s.name, s._data, audit=tmp_path / f"{s.name}.jsonl") for s in _sites(4, seed=3)]
    fed = Federation.from_sites(sites)
    secure_sum(fed, "fedroc.class_counts", sites=["s0", "s1", "s2"])
    # A restarted site (new process, same audit directory) remembers its partners.
    reborn = [Site(s.name, s._data, audit=tmp_path / f"{s.name}.jsonl") for s in sites]
    with pytest.raises(DisclosureError, match="will not over a different set"):
        secure_sum(Federation.from_sites(reborn), "fedroc.class_counts", sites=["s1", "s2", "s3"])


# -- 4. averaging repeated releases ----------------------------------------------------------
def test_repeated_releases_stop_at_the_default_budget_and_averaging_fails(tmp_path):
    [site] = _sites(1, n=400, seed=5)
    site = Site("s0", site._data, audit=tmp_path / "s0.jsonl")
    fed = Federation.from_sites([site])
    sigma_args = {"epsilon": 1.0, "delta": 1e-4, "sensitivity": 0.01, "calibration": "analytic"}
    releases = []
    with pytest.raises(DisclosureError, match=r"budget is epsilon 10, it has spent 10"):
        for _ in range(50):
            releases.append(fed.call(FN_NOISY, **sigma_args)["s0"]["negative"])
    assert len(releases) == 10  # the default lifetime budget: 10 releases at epsilon 1
    # A restart does not reset it: the ledger lies beside the audit log.
    restarted = Federation.from_sites([Site("s0", site._data, audit=tmp_path / "s0.jsonl")])
    with pytest.raises(DisclosureError, match="has spent 10"):
        restarted.call(FN_NOISY, **sigma_args)
    # Measure: the average of every release the site allowed is still off by about
    # sigma / sqrt(10); 2000 releases (fedroc 0.1) brought it to sigma / 45.
    sigma = analytic_gaussian_sigma(epsilon=1.0, delta=1e-4, sensitivity=0.01)
    d = site._data
    truth = np.sort(d.score[~d.label])
    rmse = np.sqrt(np.mean((np.mean(releases, axis=0) - truth) ** 2))
    assert rmse > 0.5 * sigma / math.sqrt(10)


# -- 5. bins chosen to difference suppressed calibration cells --------------------------------
def test_calibration_bins_cannot_change_between_releases():
    [site] = _sites(1, n=200, seed=7)
    fed = Federation.from_sites([site])
    fed.call("fedroc.calibration", n_bins=10)
    fed.call("fedroc.calibration", n_bins=10)  # the same partition again: nothing new
    # Bins of 10 and 11 overlap in slivers that a subtraction would isolate.
    with pytest.raises(DisclosureError, match="argument 'n_bins' was 10 .*got 11"):
        fed.call("fedroc.calibration", n_bins=11)


# -- 6. malformed and out-of-range arguments ------------------------------------------------
@pytest.mark.parametrize(
    ("function", "args", "argument"),
    [
        (FN_NOISY, {"epsilon": -1.0, "delta": 0.1, "sensitivity": 0.01}, "epsilon"),
        (FN_NOISY, {"epsilon": float("nan"), "delta": 0.1, "sensitivity": 0.01}, "epsilon"),
        (FN_NOISY, {"epsilon": 1.0, "delta": 1.5, "sensitivity": 0.01}, "delta"),
        ("fedroc.calibration", {"n_bins": 10**6}, "n_bins"),
        ("fedroc.sum", {"column": "secret_column"}, "column"),
        ("rocglm.fisher", {"session": "x", "gamma": np.zeros((5000, 2)), "fits": [0]}, "gamma"),
    ],
)
def test_arguments_outside_the_schema_are_refused_and_logged(function, args, argument):
    [site] = _sites(1)
    with pytest.raises(ArgumentRefused) as exc:
        site.handle(function, args)
    assert exc.value.argument == argument and exc.value.site == "s0"
    last = site.audit.entries()[-1]
    assert last["outcome"] == "refused" and f"argument {argument!r}" in last["reason"]


# -- 7. per-site histograms of the clustered method over crafted bin edges ---------------------
def _clustered_sites(n_sites: int = 3, seed: int = 11, **kwargs) -> list[Site]:
    """Sites holding 30 clusters of 4 to 7 rows each, scores in (0, 1)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n_sites):
        sizes = rng.integers(4, 8, 30)
        cluster = np.repeat(np.arange(30), sizes)
        y = rng.random(cluster.size) < 0.4
        s = 1.0 / (1.0 + np.exp(-(rng.normal(0, 1, 30)[cluster] + y + rng.normal(0, 1, y.size))))
        out.append(Site(f"s{k}", SiteData.from_arrays(y, s, cluster), **kwargs))
    return out


def _scores_from_histogram(hist: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The analyst's reconstruction: every counted row at its bin's lower edge."""
    return np.repeat(edges[:-1], np.asarray(hist, dtype=np.int64))


MILLION_EDGES = np.linspace(0.0, 1.0, 1_000_001)


def test_clustered_histograms_over_crafted_edges_recover_a_sites_scores_when_unprotected():
    # The attack itself, against a site whose operator turned every protection off
    # (histograms in the clear, no minimum count): one call places each of its scores to
    # 1e-6, with its label. This is what any site answered by default in fedroc 0.1.
    [site] = _clustered_sites(1, policy=DisclosurePolicy(min_count=1, clear_histograms=True))
    reply = Federation.from_sites([site]).call(FUNCTION_SUMMARY, edges=MILLION_EDGES)["s0"]
    d = site._data
    recovered = _scores_from_histogram(reply["hist_pos_all"], MILLION_EDGES)
    np.testing.assert_allclose(recovered, np.sort(d.score[d.label]), atol=1.01e-6)


def _moments_args(site: Site, edges: np.ndarray) -> dict:
    """A well-formed round-2 request for one site alone (its pooled histograms its own)."""
    first = Federation.from_sites([site]).call(FUNCTION_SUMMARY, edges=edges)[site.name]
    return {
        "edges": edges,
        "hist_pos_used": first["hist_pos_used"],
        "hist_neg_used": first["hist_neg_used"],
        "hist_pos_all": first["hist_pos_all"],
        "hist_neg_all": first["hist_neg_all"],
        "n_clusters": first["clusters_used"],
        "big_m": first["neg_used"],
        "big_n": first["pos_used"],
        "total_used": 100.0,
        "population": 0.7,
        "personalized": 0.7,
        "obuchowski": 0.7,
        "big_m_all": first["neg_all"],
        "big_n_all": first["pos_all"],
    }


def test_clustered_histograms_stay_inside_secure_aggregation_by_default():
    sites = _clustered_sites(3)
    fed = Federation.from_sites(sites)
    [helper] = _clustered_sites(1, policy=DisclosurePolicy(min_count=1, clear_histograms=True))
    moments = _moments_args(helper, np.linspace(0, 1, 11))
    # fedroc 0.1 answered both calls: each site's scores to 1e-6 (test above).
    for function, args in (
        (FUNCTION_SUMMARY, {"edges": MILLION_EDGES}),
        (FUNCTION_MOMENTS, moments),
    ):
        with pytest.raises(DisclosureError, match=f"refuses '{function}' in the clear"):
            fed.call(function, **args)
        with pytest.raises(DisclosureError, match="clear_histograms = true"):
            sites[1].handle(function, args)
    assert all(e["outcome"] == "refused" for s in sites for e in s.audit.entries())
    # The method itself runs, through secure aggregation: the analyst sees sums only.
    result = federated_clustered_auc(fed, n_bins=100)
    assert result.n_clusters_total == 90 and result.n_clusters >= 80
    assert any("secure aggregation" in note for note in result.released.notes)


def test_clear_histograms_need_q_rows_per_bin_and_one_partition_bound_before_any_answer():
    policy = DisclosurePolicy(clear_histograms=True)  # q = 5
    [site] = _clustered_sites(1, policy=policy)
    # Fine edges: bins of one row are refused, by the minimum count per bin and class.
    with pytest.raises(DisclosureError, match="bin count is 1, below the minimum of 5"):
        site.handle(FUNCTION_SUMMARY, {"edges": MILLION_EDGES})
    # The refused request bound the site's partition: a coarse one is refused too, so that
    # refusals cannot steer a search (bisecting [0, t, 1] for the t where a bin drops
    # below q would locate the q-th smallest score). Every answer is the same refusal.
    reasons = set()
    for t in (0.05, 0.3, 0.5, 0.95):
        with pytest.raises(ArgumentRefused, match="bin edges were bound") as exc:
            site.handle(FUNCTION_SUMMARY, {"edges": np.array([0.0, t, 1.0])})
        assert exc.value.argument == "bin edges"
        reasons.add(str(exc.value))
    assert len(reasons) == 1

    # A fresh site answers its first partition if every non-empty bin holds >= q rows of
    # each class, and that partition only (two partitions subtract to slivers).
    [fresh] = _clustered_sites(1, seed=12, policy=policy)
    edges = np.linspace(0.0, 1.0, 3)
    reply = fresh.handle(FUNCTION_SUMMARY, {"edges": edges})
    for key in ("hist_pos_used", "hist_neg_used", "hist_pos_all", "hist_neg_all"):
        counts = np.asarray(reply[key])
        assert ((counts == 0) | (counts >= 5)).all(), key
    again = fresh.handle(FUNCTION_SUMMARY, {"edges": edges})  # the same partition: no news
    np.testing.assert_array_equal(again["hist_pos_all"], reply["hist_pos_all"])
    with pytest.raises(ArgumentRefused, match="bin edges were bound"):
        fresh.handle(FUNCTION_SUMMARY, {"edges": np.linspace(0.0, 1.0, 4)})


def test_clear_round_two_accepts_one_request_and_only_pooled_histograms_that_hold_the_site():
    policy = DisclosurePolicy(clear_histograms=True, min_count=1)
    [site] = _clustered_sites(1, policy=policy)
    args = _moments_args(site, np.linspace(0.0, 1.0, 11))
    # A crafted pooled histogram (a single case placed in one bin, fewer rows than the
    # site's own) would turn the per-cluster sums into threshold counts: refused.
    crafted = dict(args, hist_pos_used=np.eye(10)[3], big_n=1.0)
    with pytest.raises(ArgumentRefused, match="fewer rows in a bin than this site alone"):
        site.handle(FUNCTION_MOMENTS, crafted)
    site.handle(FUNCTION_MOMENTS, args)
    site.handle(FUNCTION_MOMENTS, args)  # the same analysis again
    # A second, different request (the site's own histogram plus one crafted case) could
    # be differenced against the first: refused in the clear.
    shifted = dict(args, hist_pos_used=np.asarray(args["hist_pos_used"]) + np.eye(10)[3])
    shifted["big_n"] = float(np.sum(shifted["hist_pos_used"]))
    with pytest.raises(ArgumentRefused, match="round-2 arguments were bound"):
        site.handle(FUNCTION_MOMENTS, shifted)
