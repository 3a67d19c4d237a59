"""Distributed ROC-GLM (paper 1): pooled fit, distributed fit, DP release, CI, CLI.

References used below: statsmodels' probit GLM on the expanded n1 x n_T binary table,
scipy's quadrature, fedroc.metrics.delong (itself checked against scikit-learn), brute
force versions of the grouped table and the sensitivity heuristic kept in this file.
"""

from __future__ import annotations

import inspect
import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

from fedroc.cli import main
from fedroc.data import SiteData
from fedroc.exceptions import (
    DisclosureError,
    FedrocError,
    FedrocWarning,
    InputError,
    SiteError,
)
from fedroc.federation import AuditLog, Federation, Site
from fedroc.methods import evaluate, pool_site_data
from fedroc.methods.rocglm import (
    PrivacyCautionWarning,
    binormal_auc,
    binormal_auc_integral,
    distributed_rocglm,
    fit_release,
    recommended_privacy,
    release_noisy_scores,
    rocglm,
    rocglm_from_scores,
    score_sensitivity,
)
from fedroc.methods.rocglm._core import (
    GroupedTable,
    fit_table,
    grouped_from_placements,
    positive_thresholds,
    survivor,
    threshold_grid,
)
from fedroc.methods.rocglm._deconvolution import bagged, deconvolve
from fedroc.methods.rocglm._probit import fisher_scoring, probit_parts
from fedroc.methods.rocglm._site import OPT_IN_POSITIVES
from fedroc.metrics import delong, logit_ci
from fedroc.privacy import DisclosurePolicy, analytic_gaussian_sigma, classic_gaussian_sigma


def flipped(rng: np.random.Generator, n: int, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """Paper 1 section 5.2: uniform scores, label = score > 0.5, a fraction gamma re-drawn."""
    s = rng.random(n)
    y = s > 0.5
    idx = rng.choice(n, int(gamma * n), replace=False)
    y[idx] = rng.random(idx.size) < 0.5
    return y, s


# These tests measure the method's statistics at the paper's settings, whose delta (0.1 to
# 0.5) exceeds a site's default lifetime budget: the simulated sites lift their limits.
def simulation_policy(min_count=5, opt_in=()):
    return DisclosurePolicy(
        min_count=min_count, epsilon_limit=math.inf, delta_limit=1.0, opt_in=frozenset(opt_in)
    )


def federation_of(y, s, k=5, rng=None, min_count=5, audit=None, noise_seed=None, opt_in=()):
    rng = rng or np.random.default_rng(0)
    parts = np.array_split(rng.permutation(y.size), k)
    if noise_seed is None:
        # The sites' noise seeded from their configuration, as simulations do: the
        # statistical assertions (coverage, bias) must not turn with the machine's entropy.
        noise_seed = int(rng.integers(2**31))
    sites = [
        Site(
            f"site{j}",
            SiteData.from_arrays(y[i], s[i]),
            policy=simulation_policy(min_count, opt_in),
            audit=None if audit is None else audit / f"site{j}.jsonl",
            noise_seed=noise_seed,
        )
        for j, i in enumerate(parts)
    ]
    return Federation.from_sites(sites), {f"site{j}": i for j, i in enumerate(parts)}


# --- pooled ROC-GLM ---------------------------------------------------------------------


@pytest.mark.parametrize("rule", ["grid", "positives"])
def test_grouped_fit_equals_statsmodels_probit_on_expanded_table(rule):
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(1)
    y, s = flipped(rng, 300, 0.6)
    s = np.round(s, 2)  # ties in both classes
    fit = rocglm(y, s, thresholds=rule, n_thresholds=15)
    pos, neg = s[y], np.sort(s[~y])
    pv = survivor(neg, pos)
    t = threshold_grid(15) if rule == "grid" else positive_thresholds(pos)
    u = (pv[:, None] <= t[None, :]).astype(float).ravel()  # n1 x n_T, the paper's table
    x = np.column_stack([np.ones(u.size), np.tile(special.ndtri(t), pos.size)])
    ref = sm.GLM(u, x, family=sm.families.Binomial(link=sm.families.links.Probit())).fit(
        tol=1e-15, maxiter=200
    )
    # R glm's rule (relative deviance change < 1e-8) leaves ~1e-6 in the coefficients;
    # iterated further, the grouped fit meets statsmodels' to rounding (score ~1e-6).
    np.testing.assert_allclose(fit.params, ref.params, rtol=1e-5)
    tight = rocglm_from_scores(pos, neg, thresholds=rule, n_thresholds=15, tol=1e-15)
    np.testing.assert_allclose(tight.params, ref.params, rtol=1e-8)
    # The deviance of the expanded binary table (weights included): -2 log-likelihood.
    assert fit.deviance == pytest.approx(-2 * ref.llf, rel=1e-10)
    assert fit.converged and 1 <= fit.iterations <= 25


def test_grouped_counts_equal_brute_force_table_with_ties():
    rng = np.random.default_rng(2)
    for _ in range(20):
        n0, n1 = rng.integers(5, 80, 2)
        neg = np.sort(np.round(rng.normal(size=n0), 1))
        pos = np.round(rng.normal(0.5, 1, n1), 1)
        t = threshold_grid(int(rng.integers(2, 40)))
        pv = survivor(neg, pos)
        # Survivor with ties one half, by direct comparison.
        direct = ((neg[None, :] > pos[:, None]) + 0.5 * (neg[None, :] == pos[:, None])).mean(1)
        np.testing.assert_allclose(pv, direct, atol=1e-15)
        brute = (pv[:, None] <= t[None, :]).sum(axis=0)
        np.testing.assert_array_equal(grouped_from_placements(pv, t), brute)


def test_positives_rule_table_groups_repeated_thresholds():
    pos = np.array([0.2, 0.2, 0.5, 0.9, 0.0, 1.0])
    neg = np.sort(np.array([0.1, 0.3, 0.3, 0.6, 0.95]))
    pv = survivor(neg, pos)
    table = GroupedTable.from_positives_rule(pv, positive_thresholds(pos))
    t = np.array([0.2, 0.2, 0.5, 0.9])  # 0 and 1 dropped, repeats kept as weight
    brute = (pv[:, None] <= t[None, :]).sum(axis=0)
    np.testing.assert_array_equal(table.t, [0.2, 0.5, 0.9])
    np.testing.assert_array_equal(table.successes, [brute[0] * 2, brute[2], brute[3]])
    np.testing.assert_array_equal(table.trials, [12, 6, 6])


def test_binormal_auc_closed_form_equals_integral():
    for g1, g2 in [(0.0, 1.0), (0.8, 1.25), (1.5, 0.4), (-0.3, 2.5), (2.5, 0.05), (0.7, 0.0)]:
        assert binormal_auc(g1, g2) == pytest.approx(binormal_auc_integral(g1, g2), abs=1e-9)
    assert binormal_auc(0.0, 1.0) == 0.5


def test_rocglm_recovers_a_binormal_truth():
    rng = np.random.default_rng(3)
    n = 20000
    y = rng.random(n) < 0.4
    s = np.where(y, rng.normal(1.2, 1.5, n), rng.normal(0.0, 1.0, n))
    fit = rocglm(y, s, n_thresholds=60)
    # ROC(t) = Phi(a + b Phi^-1(t)) with a = 1.2 / 1.5, b = 1 / 1.5.
    assert fit.g1 == pytest.approx(0.8, abs=0.05)
    assert fit.g2 == pytest.approx(1 / 1.5, abs=0.04)
    assert fit.auc == pytest.approx(stats.norm.cdf(1.2 / math.sqrt(1 + 1.5**2)), abs=0.01)


def test_fisher_scoring_stops_by_r_glm_relative_deviance_rule():
    rng = np.random.default_rng(4)
    y, s = flipped(rng, 500, 0.5)
    t = threshold_grid(28)
    pv = survivor(np.sort(s[~y]), s[y])
    succ = grouped_from_placements(pv, t)
    trials = np.full(t.size, float(y.sum()))
    x = special.ndtri(t)
    devs = []

    def parts(gamma, which):
        p = probit_parts(x, succ, trials, gamma)
        devs.append(float(-2 * p.loglik[0]))
        return p

    trace = fisher_scoring(parts, 1, tol=1e-8)
    rel = [abs(b - a) / (abs(b) + 0.1) for a, b in itertools.pairwise(devs)]
    assert trace.converged[0]
    assert rel[-1] < 1e-8 and all(r >= 1e-8 for r in rel[:-1])
    assert trace.iterations[0] == len(rel) == trace.evaluations - 1
    capped = fisher_scoring(parts, 1, tol=1e-8, max_iter=1)
    assert not capped.converged[0] and capped.iterations[0] == 1


def test_separated_classes_warn_instead_of_pretending():
    pos = np.linspace(0.6, 1.0, 30)
    neg = np.linspace(0.0, 0.4, 30)
    with pytest.warns(FedrocWarning, match="did not converge"):
        fit = rocglm_from_scores(pos, neg)
    assert not fit.converged


def test_roc_curve_endpoints_and_plot():
    fit = rocglm(*flipped(np.random.default_rng(5), 400, 0.4)[::1])
    fpr, tpr = fit.roc_points()
    assert fpr[0] == 0 and tpr[0] == 0 and fpr[-1] == 1 and tpr[-1] == 1
    assert np.all(np.diff(tpr) >= 0)
    np.testing.assert_allclose(fit.roc(0.3), stats.norm.cdf(fit.g1 + fit.g2 * stats.norm.ppf(0.3)))


# --- privacy parameters and the sensitivity heuristic ----------------------------------


def test_recommended_privacy_follows_paper_table():
    assert recommended_privacy(0.005) == (0.2, 0.1)
    assert recommended_privacy(0.01) == (0.2, 0.1)
    assert recommended_privacy(0.0100001) == (0.3, 0.4)
    assert recommended_privacy(0.03) == (0.3, 0.4)
    assert recommended_privacy(0.04) == (0.5, 0.3)
    assert recommended_privacy(0.07) == (0.5, 0.5)
    with pytest.warns(PrivacyCautionWarning, match="above 0.07"):
        assert recommended_privacy(0.09) == (0.5, 0.5)
    with pytest.raises(InputError, match="sensitivity"):
        recommended_privacy(0.0)


def _sensitivity_brute(s, breaks):
    lo, hi = s.min(), s.max()
    cell = np.minimum(((s - lo) / (hi - lo) * breaks).astype(int), breaks - 1)
    dist = np.abs(cell[:, None] - cell[None, :])
    d = dist[dist > 0].min()
    diff = np.abs(s[:, None] - s[None, :])
    return diff[dist == d].max(), d


def test_score_sensitivity_equals_pairwise_brute_force():
    rng = np.random.default_rng(6)
    for _ in range(25):
        n = int(rng.integers(4, 200))
        s = np.round(rng.beta(2, 3, n), int(rng.integers(1, 4)))
        if s.min() == s.max():
            continue
        breaks = int(rng.integers(1, 60))
        cells = np.minimum(((s - s.min()) / np.ptp(s) * breaks).astype(int), breaks - 1)
        if np.unique(cells).size < 2:
            continue
        value, d = score_sensitivity(s, breaks)
        ref_value, ref_d = _sensitivity_brute(s, breaks)
        assert value == pytest.approx(ref_value) and d == ref_d


# --- distributed ROC-GLM ------------------------------------------------------------------


def _pooled_reference(rel, y, s, score_range=(0.0, 1.0), n_thresholds=28, bootstrap=20):
    """Everything the distributed run computes, from the same release and the pooled rows.

    The sites compute on their scores rounded to the midpoints of the default grid's 4096
    cells over the score range (the one grid of their exact secure counts: A1 in
    tests/test_attacks_review2.py), which is found here by a search of the edges."""
    lo, hi = score_range
    edges = lo + (hi - lo) * (np.arange(4097) / 4096)
    cell = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, 4095)
    s = (edges[cell] + edges[cell + 1]) / 2
    pos, neg = s[y], s[~y]
    t = threshold_grid(n_thresholds)
    v10 = 1.0 - survivor(rel.negative, pos)  # ties one half
    # The bagged deconvolution: its resamples are seeded by the noisy values alone.
    mix, _ = bagged(rel.negative, rel.noise_sd, score_range=score_range, replicates=bootstrap)
    v10d = mix.cdf(pos)
    v01 = (
        (rel.positive[None, :] > neg[:, None]) + 0.5 * (rel.positive[None, :] == neg[:, None])
    ).mean(1)

    def table(v):
        return GroupedTable(t, grouped_from_placements(1 - v, t), np.full(t.size, float(pos.size)))

    return {
        "paper_fit": fit_table(table(v10)),
        "deconvolved_fit": fit_table(table(v10d)),
        "paper_variance": v10.var(ddof=1) / pos.size + v01.var(ddof=1) / neg.size,
        "auc": v10d.mean(),
        "variance_positives": v10d.var(ddof=1) / pos.size,
        "auc_placement": v10.mean(),
        "mixture": mix,
    }


@pytest.mark.parametrize("scale", ["probability", "logit"])
def test_distributed_run_equals_pooled_computation_on_its_release(scale):
    """Every number of the run is the pooled computation on what the sites released."""
    rng = np.random.default_rng(7)
    y, s = flipped(rng, 1500, 0.5)
    score_range = (0.0, 1.0)
    if scale == "logit":  # another scale needs a sensitivity and a public range
        s = np.log(np.clip(s, 0.01, 0.99) / (1 - np.clip(s, 0.01, 0.99))) * 3.0
        score_range = (-14.0, 14.0)
    fed, _ = federation_of(y, s, noise_seed=5)
    res = distributed_rocglm(
        fed, epsilon=0.5, delta=1e-4, sensitivity=0.02 if scale == "probability" else 0.3,
        score_range=score_range, seed=1, bootstrap=20,
    )  # fmt: skip
    # The sites' own seed, from fresh ledgers, draws the same noise again: this is the
    # release the run used (its first).
    fresh, _ = federation_of(y, s, noise_seed=5)
    rel = release_noisy_scores(
        fresh, epsilon=0.5, delta=1e-4, sensitivity=res.sensitivity, calibration="analytic"
    )
    ref = _pooled_reference(rel, y, s, score_range)
    paper = res.without_correction()
    np.testing.assert_allclose(paper.params, ref["paper_fit"].params, atol=1e-10)
    assert paper.deviance == pytest.approx(ref["paper_fit"].deviance, rel=1e-12)
    assert paper.variance == pytest.approx(ref["paper_variance"], rel=1e-10)
    assert res.auc_placement == pytest.approx(ref["auc_placement"], abs=1e-12)
    np.testing.assert_allclose(res.params, ref["deconvolved_fit"].params, atol=1e-10)
    assert res.auc == pytest.approx(ref["auc"], abs=1e-12)
    assert res.variance_positives == pytest.approx(ref["variance_positives"], rel=1e-10)
    np.testing.assert_allclose(res.deconvolved.weights, ref["mixture"].weights, atol=1e-15)
    assert res.variance == pytest.approx(res.variance_positives + res.variance_negatives)
    assert res.ci == pytest.approx(logit_ci(res.auc, res.se))
    # One pooled table on the grid (the sites' tables are summed securely), not one per site.
    assert res.n_thresholds == 28 and res.correction == "deconvolution"


def test_sites_pool_only_releases_their_rosters_sign():
    """Every site signs its noisy release; a setup pools signed releases only (no padding,
    tests/test_attacks.py). Sites that nobody gave a roster (no keys) set up on their own
    release alone, and refuse another site's part by saying so."""
    from fedroc.federation.roster import SIGNATURE_BYTES
    from fedroc.federation.transport import InProcessTransport

    rng = np.random.default_rng(12)
    y, s = flipped(rng, 400, 0.5)
    fed, parts = federation_of(y, s, k=2, noise_seed=3)
    rel = release_noisy_scores(fed, epsilon=1.0, delta=1e-5, sensitivity=0.02)
    assert all(len(sig) == SIGNATURE_BYTES for _, _, sig in rel.parts.values())
    sites = [Site(n, SiteData.from_arrays(y[i], s[i])) for n, i in parts.items()]
    bare = Federation(InProcessTransport(sites))
    # The run asks first whether the sites would sum their tables: without a roster they
    # would not, and nothing is released.
    start = bare.mark()
    with pytest.raises(DisclosureError, match="it has no roster of sites to aggregate with"):
        distributed_rocglm(bare, epsilon=1.0, delta=1e-5, sensitivity=0.02, bootstrap=5)
    assert bare.released(start).kinds.get("noisy", 0) == 0
    # Their releases, set up all the same: a site without a roster verifies no other part.
    released = release_noisy_scores(bare, epsilon=1.0, delta=1e-5, sensitivity=0.02)
    with pytest.raises(DisclosureError, match="argument 'parts': it has no roster"):
        fit_release(bare, released, bootstrap=5)
    # One site alone: its grid table would leave it unsummed (its exact counts at the
    # grid's cutoffs), so the run is refused before anything is released.
    alone = Federation(InProcessTransport(sites[:1]))
    start = alone.mark()
    with pytest.raises(InputError, match="only through secure aggregation.*at least 2 sites"):
        distributed_rocglm(alone, epsilon=1.0, delta=1e-5, sensitivity=0.02, bootstrap=5)
    assert alone.released(start).kinds.get("noisy", 0) == 0


def test_two_sites_are_refused_the_grid_table_by_their_secagg_minimum():
    """The grid table leaves the sites only summed: two sites under the default policy
    (secagg_min_sites 3) refuse the secure sum by name, before their noisy release (asked
    first, by fedroc.secagg.check_secure_sum), and nothing per site is answered instead (no
    clear fallback); a policy that allows two runs."""
    from fedroc.privacy import DisclosurePolicy

    rng = np.random.default_rng(31)
    y, s = flipped(rng, 600, 0.5)
    fed, _ = federation_of(y, s, k=2, noise_seed=4)
    start = fed.mark()
    with pytest.raises(DisclosureError, match="rocglm.table.*secagg_min_sites"):
        distributed_rocglm(fed, epsilon=1.0, delta=1e-5, sensitivity=0.02, bootstrap=5)
    called = [c.function for c in fed.transcript[start:]]
    assert called == [], called  # refused before any release: nothing was spent
    policy = DisclosurePolicy(secagg_min_sites=2, delta_limit=1.0)
    parts = np.array_split(np.arange(y.size), 2)
    two = Federation.from_sites(
        Site(f"s{k}", SiteData.from_arrays(y[i], s[i]), policy=policy) for k, i in enumerate(parts)
    )
    res = distributed_rocglm(two, epsilon=1.0, delta=1e-5, sensitivity=0.02, bootstrap=5)
    assert res.n_pos == int(y.sum()) and res.n_thresholds == 28


def test_positives_rule_needs_the_sites_opt_in_and_equals_stacked_site_tables():
    rng = np.random.default_rng(8)
    y, s = flipped(rng, 600, 0.5)
    plain, _ = federation_of(y, s, k=3, noise_seed=2)
    with pytest.raises(DisclosureError, match="opt in"):
        distributed_rocglm(plain, sensitivity=0.01, thresholds="positives", bootstrap=5)
    fed, parts = federation_of(y, s, k=3, noise_seed=2, opt_in=[OPT_IN_POSITIVES])
    res = distributed_rocglm(
        fed, epsilon=0.5, delta=1e-4, sensitivity=0.01, thresholds="positives", bootstrap=5
    )
    # The same seed from fresh ledgers: the run's release (its first) again.
    fresh, _ = federation_of(y, s, k=3, noise_seed=2, opt_in=[OPT_IN_POSITIVES])
    rel = release_noisy_scores(
        fresh, epsilon=0.5, delta=1e-4, sensitivity=0.01, calibration="analytic"
    )
    tables = []
    for idx in parts.values():
        pos_k = s[idx][y[idx]]
        tables.append(
            GroupedTable.from_positives_rule(
                survivor(rel.negative, pos_k), positive_thresholds(pos_k)
            )
        )
    stacked = tables[0].stacked(tables[1]).stacked(tables[2])
    ref = fit_table(stacked, thresholds="positives")
    np.testing.assert_allclose(res.without_correction().params, ref.params, atol=1e-10)


def test_dp_release_is_audited_recorded_and_reproducible(tmp_path):
    rng = np.random.default_rng(9)
    y, s = flipped(rng, 1000, 0.5)
    fed, parts = federation_of(y, s, audit=tmp_path, noise_seed=11)
    res = distributed_rocglm(
        fed, epsilon=0.4, delta=0.2, sensitivity=0.02, dp_calibration="classic", bootstrap=5
    )
    sigma = classic_gaussian_sigma(epsilon=0.4, delta=0.2, sensitivity=0.02)
    assert res.noise_sd == pytest.approx(sigma)
    assert res.released.kinds["noisy"] == 5
    for name, idx in parts.items():
        assert res.released.epsilon[name] == pytest.approx(0.4)
        assert res.released.delta[name] == pytest.approx(0.2)
        [event] = res.released.dp[name]
        assert event["size"] == idx.size and event["noise_scale"] == pytest.approx(sigma)
        noisy = [
            e for e in AuditLog(tmp_path / f"{name}.jsonl").entries() if e.get("kind") == "noisy"
        ]
        assert len(noisy) == 1 and noisy[0]["dp"][0]["epsilon"] == 0.4
        released = np.concatenate([noisy[0]["released"][k] for k in ("negative", "positive")])
        assert released.size == idx.size
        # What left the site is not the scores themselves.
        assert not np.isin(released, s[idx]).any()
    # The sites' own seed reproduces their noise; the analyst's seed does not reach it.
    again = distributed_rocglm(
        federation_of(y, s, noise_seed=11)[0],
        epsilon=0.4, delta=0.2, sensitivity=0.02, dp_calibration="classic", seed=99, bootstrap=5,
    )  # fmt: skip
    assert again.params == res.params and again.auc == res.auc
    other = distributed_rocglm(
        federation_of(y, s, noise_seed=12)[0],
        epsilon=0.4, delta=0.2, sensitivity=0.02, dp_calibration="classic", bootstrap=5,
    )  # fmt: skip
    assert other.params != res.params
    analytic = distributed_rocglm(
        fed, epsilon=0.4, delta=0.2, sensitivity=0.02, dp_calibration="analytic", bootstrap=5
    )
    assert analytic.noise_sd == pytest.approx(
        analytic_gaussian_sigma(epsilon=0.4, delta=0.2, sensitivity=0.02)
    )
    assert analytic.noise_sd < sigma


def test_paper_accuracy_at_recommended_settings_mean_absolute_error():
    """Paper 1 RQ1 / RQ2 at sensitivity 0.01 and 5 sites (a few repetitions)."""
    rng = np.random.default_rng(12)
    err_auc, err_lo, err_hi = [], [], []
    for _rep in range(12):
        y, s = flipped(rng, int(rng.integers(800, 2000)), rng.uniform(0.2, 0.8))
        fed, _ = federation_of(y, s, rng=rng)
        res = distributed_rocglm(fed, sensitivity=0.01, privacy="paper", correction="none")
        ref = delong(y, s)
        lo, hi = ref.confidence_interval(method="logit")
        err_auc.append(abs(res.auc - ref.auc))
        err_lo.append(abs(res.ci[0] - lo))
        err_hi.append(abs(res.ci[1] - hi))
    # The paper reports MAE <= 0.01 here. Measured over 120 such data sets: 0.0070 (AUC),
    # 0.0062 and 0.0077 (CI bounds); a mean of 12 has an sd of 0.0011, so the bound sits
    # 3.5 sd above (a doubled error fails it).
    assert np.mean(err_auc) <= 0.0115
    assert np.mean(err_lo) <= 0.0115 and np.mean(err_hi) <= 0.0115


def test_deconvolution_removes_the_noise_bias_that_the_paper_keeps():
    """Binormal scores (true AUC 0.75) at paper 1's largest setting (noise sd 0.19)."""
    rng = np.random.default_rng(13)
    mu = math.sqrt(2) * stats.norm.ppf(0.75)
    plain, corrected, covered = [], [], []
    for rep in range(10):
        y = rng.random(10_000) < 0.3
        s = stats.norm.cdf(rng.normal(mu * y, 1.0))
        fed, _ = federation_of(y, s, rng=rng)
        res = distributed_rocglm(fed, sensitivity=0.07, privacy="paper", seed=rep, bootstrap=20)
        plain.append(res.without_correction().auc - 0.75)
        corrected.append(res.auc - 0.75)
        covered.append(res.ci[0] <= 0.75 <= res.ci[1])
    mcse = np.std(corrected, ddof=1) / math.sqrt(len(corrected))  # about 0.0025 here
    assert np.mean(plain) < -0.015  # the paper's estimate: biased towards 1/2 (-0.02)
    assert abs(np.mean(corrected)) < 3 * mcse < 0.01
    assert np.mean(covered) >= 8 / 10


def test_bagged_deconvolution_is_the_mean_refit_and_the_same_for_every_party():
    """Every site and the analyst bag over the same resamples: their generator is seeded by
    the noisy values and the settings alone (the order the values arrive in, and anything
    an analyst might send, do not enter), and the bagged weights are the refits' mean."""
    from fedroc.methods.rocglm import _deconvolution as dec

    rng = np.random.default_rng(31)
    noisy = stats.norm.cdf(rng.normal(size=3000)) + rng.normal(0.0, 0.15, 3000)
    dec._BAGGED.clear()
    mix, weights = bagged(noisy, 0.15, replicates=30)
    dec._BAGGED.clear()  # computed again, from the values in another order
    again, weights2 = bagged(rng.permutation(noisy), 0.15, replicates=30)
    np.testing.assert_array_equal(weights, weights2)
    np.testing.assert_allclose(mix.weights, again.weights, atol=1e-15)
    np.testing.assert_allclose(mix.weights, weights.mean(axis=0) / weights.mean(axis=0).sum())
    assert weights.shape == (30, mix.m) and not weights.flags.writeable
    # Other settings, other resamples: the bag is not one fixed draw.
    _, other = bagged(noisy, 0.15, replicates=31)
    assert not np.allclose(other[:30], weights)
    # A single fit is sparse, the bag is not: more bins carry mass.
    single = deconvolve(noisy, 0.15)
    assert np.count_nonzero(mix.weights > 1e-6) > np.count_nonzero(single.weights > 1e-6)
    with pytest.raises(InputError, match="replicates must be an integer in \\[2, 500\\]"):
        bagged(noisy, 0.15, replicates=501)


def test_ci_level_and_one_sided_test_agree():
    rng = np.random.default_rng(14)
    y, s = flipped(rng, 900, 0.6)
    fed, _ = federation_of(y, s)
    res = distributed_rocglm(fed, sensitivity=0.01, seed=1, a0=0.6, bootstrap=10)
    assert res.ci == pytest.approx(logit_ci(res.auc, res.se, 0.95))
    assert res.confidence_interval(0.9)[0] > res.ci[0]
    for a0 in (res.ci[0] - 0.01, res.ci[0] + 0.01):
        _, p = res.test_greater(a0)
        assert (p < 0.025) == (a0 < res.ci[0])
    assert "H0: AUC <= 0.6" in res.summary()
    fig = res.plot(pooled=SiteData.from_arrays(y, s))
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert any("ROC-GLM" in label for label in labels)
    assert any("pooled" in label for label in labels)
    fpr, tpr = res.roc_points()
    np.testing.assert_allclose(tpr, res.roc(fpr))


def test_ties_are_counted_one_half_throughout():
    """5-level ratings: the placement AUC is DeLong's (and scikit-learn's) exactly."""
    rng = np.random.default_rng(21)
    y = rng.random(3000) < 0.4
    s = np.floor(stats.norm.cdf(rng.normal(1.2 * y, 1.0)) * 5).clip(0, 4) / 4
    pv = survivor(np.sort(s[~y]), s[y])
    ref = delong(y, s)
    assert 1 - pv.mean() == pytest.approx(ref.auc, abs=1e-12)
    wins = np.mean(s[y][:, None] >= s[~y][None, :])  # the reference code's convention
    fit = rocglm(y, s)
    # The binormal fit follows the 1/2 area (its misfit on 5 levels is ~0.01), not the
    # ties-as-wins area, 0.1 higher.
    assert abs(fit.auc - ref.auc) < 0.02 < wins - ref.auc
    # Distributed: with the rating scale declared, the deconvolution puts the mass at the
    # levels and the placement AUC keeps the 1/2 convention: it covers the 1/2 AUC.
    fed, _ = federation_of(y, s, noise_seed=4)
    levels = [0.0, 0.25, 0.5, 0.75, 1.0]
    res = distributed_rocglm(
        fed, sensitivity=0.01, privacy="paper", seed=2, bootstrap=20, score_levels=levels
    )
    assert res.ci[0] <= ref.auc <= res.ci[1] < wins
    assert res.deconvolved.levels.tolist() == levels
    # The sites answered about these levels: they answer about no other set (H15-1), and
    # hold their exact counts to them. On a fresh federation the other set is answered.
    with pytest.raises(DisclosureError, match="one set of levels in its lifetime"):
        distributed_rocglm(fed, sensitivity=0.01, privacy="paper", score_levels=[0, 0.5, 1])
    fresh, _ = federation_of(y, s, noise_seed=4)
    with pytest.raises(InputError, match="not among the declared score_levels"):
        distributed_rocglm(fresh, sensitivity=0.01, privacy="paper", score_levels=[0, 0.5, 1])
    # Undeclared, the scale is refused before any budget is spent; the paper's estimate runs
    # (at sites not held to levels: held to them, their grid tables are on those levels only).
    start = fed.mark()
    with pytest.raises(InputError, match="at most 20 distinct scores .*pass score_levels="):
        distributed_rocglm(fed, sensitivity=0.01, privacy="paper")
    assert fed.released(start).kinds.get("noisy", 0) == 0
    fresh, _ = federation_of(y, s, noise_seed=4)
    assert distributed_rocglm(fresh, sensitivity=0.01, privacy="paper", correction="none").auc


# --- bad input ----------------------------------------------------------------------------


def test_paper_privacy_with_epsilon_and_delta_is_refused_before_any_release():
    """``privacy="paper"`` chooses (epsilon, delta) from paper 1's table; given with values
    of one's own, the values replaced the table's and the paper's classic calibration stayed,
    silently (the command line refused it; the Python call did not)."""
    rng = np.random.default_rng(17)
    y, s = flipped(rng, 600, 0.5)
    fed, _ = federation_of(y, s, k=3)
    start = fed.mark()
    with pytest.raises(InputError, match="privacy='paper' does not apply with epsilon and delta"):
        distributed_rocglm(fed, sensitivity=0.01, privacy="paper", epsilon=0.5, delta=1e-5)
    assert fed.released(start).kinds == {}
    # Each alone runs.
    assert distributed_rocglm(fed, sensitivity=0.01, epsilon=0.5, delta=1e-5).auc > 0.5


def test_site_with_too_few_positives_refuses_naming_it():
    rng = np.random.default_rng(15)
    y, s = flipped(rng, 400, 0.5)
    small = SiteData.from_arrays(np.array([1, 1, 0, 0, 0, 0, 0, 0]), rng.random(8))
    sites = [
        Site("big", SiteData.from_arrays(y[:200], s[:200])),
        Site("large", SiteData.from_arrays(y[200:], s[200:])),
        Site("tiny", small),
    ]
    with pytest.raises(DisclosureError, match="'tiny'.*positive count is below") as refused:
        distributed_rocglm(Federation.from_sites(sites), sensitivity=0.01, seed=0)
    # The refusal says what it means for this method and what to do about it.
    assert "one noisy score per row, split by class" in str(refused.value)
    assert refused.value.site == "tiny"


def test_positives_rule_needs_unit_interval_scores_and_names_the_site():
    rng = np.random.default_rng(16)
    y, s = flipped(rng, 600, 0.5)
    fed, _ = federation_of(y, s * 10.0, k=2, opt_in=[OPT_IN_POSITIVES])
    with pytest.raises(Exception, match="site0.*must lie in \\[0, 1\\]"):
        distributed_rocglm(
            fed, sensitivity=0.01, seed=0, thresholds="positives", score_range=(0, 10)
        )


def test_unbounded_scores_are_refused_with_what_to_pass():
    """Logits: the heuristic and the [0, 1] range do not apply; the message says why."""
    rng = np.random.default_rng(22)
    y, s = flipped(rng, 600, 0.5)
    logit = np.log(np.clip(s, 0.02, 0.98) / (1 - np.clip(s, 0.02, 0.98)))
    fed, _ = federation_of(y, logit, k=3)  # the grid table's secure sum needs 3 sites
    start = fed.mark()
    for kw in ({}, {"sensitivity": 0.5}):  # refused before any noisy release
        with pytest.raises(InputError, match="outside the score range \\[0, 1\\].*score_range="):
            distributed_rocglm(fed, seed=0, **kw)
    assert fed.released(start).kinds.get("noisy", 0) == 0
    # The paper's estimate needs no range, but the heuristic needs probabilities.
    with pytest.raises(SiteError, match="outside \\[0, 1\\].*Pass sensitivity=.*score_range="):
        distributed_rocglm(fed, seed=0, correction="none")
    # The range question over [0, 1] bound the sites' grid to [0, 1] (every answer about
    # where their scores lie binds it, H14-2 the other way): on this ledger their logits lie
    # outside it, and a run over a range that holds it is refused before any release,
    # saying so and how to proceed.
    with pytest.raises(InputError, match="outside the range of their one grid.*new ledger"):
        distributed_rocglm(fed, sensitivity=0.5, score_range=(-4, 4), seed=0, bootstrap=10)
    assert fed.released(start).kinds.get("noisy", 0) == 0
    fed, _ = federation_of(y, logit, k=3)  # new ledgers
    res = distributed_rocglm(
        fed, sensitivity=0.5, score_range=(-4, 4), seed=0, bootstrap=10
    )  # what the messages ask for
    assert res.score_range == (-4.0, 4.0)
    assert res.ci[0] < delong(y, logit).auc < res.ci[1]


def test_parameter_errors():
    rng = np.random.default_rng(17)
    fed, _ = federation_of(*flipped(rng, 300, 0.5), k=2)
    with pytest.raises(InputError, match="both epsilon and delta"):
        distributed_rocglm(fed, epsilon=0.3, sensitivity=0.01)
    with pytest.raises(InputError, match="correction must be one of"):
        distributed_rocglm(fed, sensitivity=0.01, correction="simex")
    with pytest.raises(InputError, match="n_thresholds must be an integer in \\[2, 64\\]"):
        distributed_rocglm(fed, sensitivity=0.01, n_thresholds=500)
    with pytest.raises(InputError, match="score_range must be two finite numbers"):
        distributed_rocglm(fed, sensitivity=0.01, score_range=(1, 0))
    with pytest.raises(InputError, match="bootstrap must be an integer"):
        distributed_rocglm(fed, sensitivity=0.01, bootstrap=1)
    with pytest.raises(InputError, match="dp_calibration"):
        distributed_rocglm(fed, sensitivity=0.01, dp_calibration="laplace")
    with pytest.raises(InputError, match="thresholds must be one of"):
        distributed_rocglm(fed, sensitivity=0.01, thresholds="quantiles")


@pytest.mark.parametrize(
    ("privacy", "message"),
    [
        ({"epsilon": -1.0, "delta": 1e-4}, "epsilon must be a positive number; got -1.0"),
        ({"epsilon": 0.0, "delta": 1e-4}, "epsilon must be a positive number; got 0.0"),
        ({"epsilon": float("nan"), "delta": 1e-4}, "epsilon must be a positive number; got nan"),
        ({"epsilon": 1.0, "delta": 0.0}, "delta must lie in \\(0, 1\\); got 0.0"),
        ({"epsilon": 1.0, "delta": 2.0}, "delta must lie in \\(0, 1\\); got 2.0"),
    ],
)
def test_out_of_range_privacy_is_refused_before_any_site_is_asked(privacy, message):
    """Before: the sites were asked for their scale and sensitivity (two rounds in their
    audit logs), then each refused the noisy scores naming the keyword ('argument 'epsilon'
    must be greater than 0.0'), once per site."""
    rng = np.random.default_rng(17)
    fed, _ = federation_of(*flipped(rng, 300, 0.5), k=3)
    with pytest.raises(InputError, match=message) as exc:
        distributed_rocglm(fed, **privacy)
    assert not isinstance(exc.value, SiteError)
    assert fed.transcript == []


@pytest.mark.parametrize("rule", ["grid", "positives"])
def test_a_run_one_sites_epsilon_limit_cannot_hold_is_refused_before_any_noisy_score(rule):
    """97b1203 refused a histogram run some site's limit cannot hold before its first
    release, so that the sites with enough do not spend for nothing; the ROC-GLM's one noisy
    release had no such check. Three sites, b's limit 0.5, the default epsilon 1: b refused
    its noisy scores after a and c had released theirs, measured on main 913f1c7: a and c
    charged epsilon 1.0 each, and the run gave nothing. Now the run asks the sites what
    their limits leave first (fedroc.epsilon_left) and is refused naming b and the epsilon
    that fits; nothing is charged. At that epsilon it runs."""
    rng = np.random.default_rng(19)
    y, s = flipped(rng, 900, 0.5)
    opt_in = frozenset([OPT_IN_POSITIVES]) if rule == "positives" else frozenset()
    sites = [
        Site(
            name,
            SiteData.from_arrays(y[i::3], s[i::3]),
            policy=DisclosurePolicy(epsilon_limit=limit, opt_in=opt_in),
        )
        for i, (name, limit) in enumerate((("a", 10.0), ("b", 0.5), ("c", 10.0)))
    ]
    fed = Federation.from_sites(sites)
    with pytest.raises(InputError) as exc:
        distributed_rocglm(fed, sensitivity=0.03, thresholds=rule, bootstrap=5)
    text = str(exc.value)
    assert "epsilon 1 (each site's charge for its noisy scores) is more than site 'b' has " in text
    assert "left of its epsilon limit (0.5)" in text, text
    assert "nothing was released; give epsilon 0.5 or less" in text, text
    assert [site.ledger.spent()[0] for site in sites] == [0, 0, 0]
    delta = 1.0 / (10 * 300)
    res = distributed_rocglm(
        fed, epsilon=0.5, delta=delta, sensitivity=0.03, thresholds=rule, bootstrap=5
    )
    assert res.epsilon == 0.5
    assert [site.ledger.spent()[0] for site in sites] == [0.5, 0.5, 0.5]


def test_a_spent_limit_is_said_to_leave_nothing_not_its_rounding():
    """Charges of 0.7, 0.2 and 0.1 against a limit of 1 sum to 0.9999999999999999: the
    ROC-GLM's refusal then said the site had 1.11e-16 left of its limit, the rounding that
    the histogram's check had cleared for itself (cf05693). The site now answers 0 for what
    only rounding leaves, for every caller (DisclosurePolicy.epsilon_left)."""
    rng = np.random.default_rng(23)
    y, s = flipped(rng, 900, 0.5)
    sites = [
        Site(
            name, SiteData.from_arrays(y[i::3], s[i::3]), policy=DisclosurePolicy(epsilon_limit=1.0)
        )
        for i, name in enumerate("abc")
    ]
    fed = Federation.from_sites(sites)
    delta = 1.0 / (10 * 300)
    for eps in (0.7, 0.2, 0.1):
        distributed_rocglm(fed, epsilon=eps, delta=delta / 3, sensitivity=0.03, bootstrap=5)
    assert 0 < 1.0 - sites[0].ledger.spent()[0] < 1e-15  # the rounding this is about
    assert all(r["epsilon_left"] == 0.0 for r in fed.call("fedroc.epsilon_left").values())
    with pytest.raises(InputError) as exc:
        distributed_rocglm(fed, epsilon=0.1, delta=delta / 3, sensitivity=0.03, bootstrap=5)
    text = str(exc.value)
    assert "have left of their epsilon limits" in text and "e-16" not in text, text
    assert "no epsilon fits" in text, text


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            {"rocglm_min_sensitivity": 0.1},
            "sensitivity 0.03 is below the floor of site 'b' (rocglm_min_sensitivity 0.1); "
            "nothing was released; give sensitivity 0.1 or more",
        ),
        (
            {"delta_limit": 1e-6},
            "delta 0.00025 (each site's charge for its noisy scores) is more than site 'b' "
            "has left of its delta limit (1e-06); nothing was released",
        ),
    ],
)
def test_a_release_one_sites_delta_or_sensitivity_floor_refuses_is_refused_first(setting, message):
    """The other two refusals of the noisy scores that came after the other sites had
    released theirs: a sensitivity below the site's floor (rocglm_min_sensitivity) and a
    delta over what its limit leaves. Measured on main 913f1c7 (three sites of 400 rows, b
    with the setting, sensitivity 0.03, the default epsilon 1 and delta 1/(10 n) =
    0.00025): b refused, a and c charged (1.0, 0.00025) each, for nothing. Now refused
    before any release (the sites' answer to fedroc.epsilon_left holds both), naming b;
    nothing charged."""
    rng = np.random.default_rng(20)
    y, s = flipped(rng, 1200, 0.5)
    sites = []
    for i, name in enumerate("abc"):
        policy = DisclosurePolicy(**(setting if name == "b" else {}))
        sites.append(Site(name, SiteData.from_arrays(y[i::3], s[i::3]), policy=policy))
    fed = Federation.from_sites(sites)
    with pytest.raises(InputError) as exc:
        distributed_rocglm(fed, sensitivity=0.03, bootstrap=5)
    assert message in str(exc.value), str(exc.value)
    assert [site.ledger.spent() for site in sites] == [(0, 0)] * 3


def test_the_paper_settings_delta_over_the_sites_limits_is_not_told_to_give_a_delta():
    """privacy="paper" takes no epsilon or delta (they are refused with it), yet the refusal
    of its delta (0.1 to 0.5, over every default delta limit) said "give delta 0.00333 or
    less", on the command line "give --delta ...", which --privacy paper then refuses (the
    docs audit, main 1874925). It now names the paper's setting and the way out."""
    rng = np.random.default_rng(21)
    y, s = flipped(rng, 1200, 0.5)
    sites = [Site(n, SiteData.from_arrays(y[i::3], s[i::3])) for i, n in enumerate("abc")]
    fed = Federation.from_sites(sites)  # default policies: delta limit 1/n
    with pytest.raises(InputError) as exc:
        distributed_rocglm(fed, privacy="paper", sensitivity=0.03, bootstrap=5)
    text = str(exc.value)
    assert text.startswith("privacy 'paper' releases at delta "), text
    assert "give delta" not in text and "leave the paper's setting out" in text, text
    assert [site.ledger.spent() for site in sites] == [(0, 0)] * 3


def test_the_paper_setting_with_epsilon_and_delta_is_refused_by_the_api_and_the_flower_job():
    """d3b49ae refused ``--privacy paper`` with ``--epsilon/--delta`` in the CLI only
    (``evaluate_cmd._check_ignored``). The Python API and the Flower job ``evaluate`` (a
    ServerApp's run config reaches the method through :func:`fedroc.methods.evaluate`, not
    the CLI's checks) still released at the values given with the paper's classic
    calibration, paper 1's (epsilon, delta) ignored without a word: measured on main
    913f1c7, the Flower job over 3 sites gave epsilon 0.5, dp_calibration 'classic', and
    charged each site 0.5. Now refused before any site is asked, in the API's spelling."""
    import fedroc.apps.application  # noqa: F401  (registers the Flower job 'evaluate')
    from fedroc.federation.flower.jobs import run_job

    rng = np.random.default_rng(18)
    fed, _ = federation_of(*flipped(rng, 300, 0.5), k=3)
    given = {"privacy": "paper", "epsilon": 0.5, "delta": 1e-5, "sensitivity": 0.03}
    message = "privacy='paper' does not apply with epsilon and delta"
    with pytest.raises(InputError, match=message) as exc:
        distributed_rocglm(fed, **given)
    assert "dp_calibration='classic'" in str(exc.value)
    with pytest.raises(InputError, match=message):
        run_job("evaluate", fed, {"method": "rocglm", "calibration_bins": None, "options": given})
    assert fed.transcript == []
    # The paper's mechanism at one's own values, as the message says, and 'default' with
    # values (what the values alone give) still run.
    mine = {"epsilon": 0.5, "delta": 1e-5, "sensitivity": 0.03, "bootstrap": 5}
    res = distributed_rocglm(fed, dp_calibration="classic", **mine)
    assert (res.epsilon, res.delta) == (0.5, 1e-5)
    assert distributed_rocglm(fed, privacy="default", **mine).epsilon == 0.5


# --- evaluate, CLI, use case ------------------------------------------------------------


def test_evaluate_runner_json_keys_and_estimated_sensitivity():
    rng = np.random.default_rng(18)
    y, s = flipped(rng, 1000, 0.5)
    fed, parts = federation_of(y, s)
    res = evaluate(fed, "rocglm", seed=4)
    out = res.to_dict()
    # The sites released their scores per class, so each site's class sizes are known
    # (the report's per-site table shows them).
    assert out["sites"] == [
        {"name": k, "n": i.size, "n_pos": int(y[i].sum())} for k, i in parts.items()
    ]
    for key in ("method", "sites", "auc", "auc_ci", "released", "rocglm_params", "epsilon"):
        assert key in out
    # Totals under the keys pooled (n, n_pos, n_neg) and histogram (n_pos, n_neg) use: the
    # sums of the class sizes the sites released (before: only per site).
    assert (out["n"], out["n_pos"], out["n_neg"]) == (y.size, int(y.sum()), int((1 - y).sum()))
    pooled = evaluate(fed, "pooled", pooled=SiteData.from_arrays(y, s)).to_dict()
    assert {k: pooled[k] for k in ("n", "n_pos", "n_neg")} == {
        k: out[k] for k in ("n", "n_pos", "n_neg")
    }
    assert out["delta"] is not None and out["brier"] == pytest.approx(np.mean((y - s) ** 2))
    assert out["calibration"] is not None
    assert out["sensitivity_source"].startswith("estimated")
    # The heuristic is the largest of the sites' values.
    assert out["sensitivity"] == max(
        score_sensitivity(SiteData.from_arrays(y[i], s[i]).score)[0]
        for i in np.array_split(np.random.default_rng(0).permutation(y.size), 5)
    )
    # fedroc's default setting: epsilon 1, delta 1/(10 n) of the largest site.
    assert (out["epsilon"], out["delta"]) == (1.0, pytest.approx(1 / (10 * 200)))
    assert out["dp_calibration"] == "analytic"
    # The heuristic is flagged in the result (and so in the CLI table and the report).
    assert out["sensitivity_is_heuristic"] is True
    assert "HEURISTIC, NOT A BOUND" in out["privacy_guarantee"]
    assert any("HEURISTIC SENSITIVITY" in n for n in out["released"]["notes"])
    assert out["correction"] == "deconvolution" and out["auc_uncorrected"] < out["auc"]
    paper = evaluate(fed, "rocglm", privacy="paper", calibration_bins=None)
    assert (paper.extra["epsilon"], paper.extra["delta"]) == recommended_privacy(out["sensitivity"])


def test_cli_evaluate_rocglm(tmp_path, capsys):
    rng = np.random.default_rng(19)
    args = ["evaluate"]
    for k in range(3):
        y, s = flipped(rng, 300, 0.5)
        path = tmp_path / f"s{k}.csv"
        pd.DataFrame({"label": y.astype(int), "score": s}).to_csv(path, index=False)
        args += ["--site", f"s{k}={path}"]
    main([*args, "--method", "rocglm", "--sensitivity", "0.01", "--json"])
    res = json.loads(capsys.readouterr().out)
    assert res["method"] == "rocglm" and len(res["rocglm_params"]) == 2
    assert (res["epsilon"], res["delta"]) == (1.0, pytest.approx(1 / 3000))
    assert res["auc_ci"][0] < res["auc"] < res["auc_ci"][1]
    assert res["sensitivity_is_heuristic"] is False and "(given)" in res["privacy_guarantee"]
    main([*args, "--method", "rocglm", "--epsilon", "0.5", "--delta", "0.001",
          "--dp-calibration", "analytic", "--correction", "none", "--a0", "0.6",
          "--report", str(tmp_path / "r.html"), "--json"])  # fmt: skip
    res = json.loads(capsys.readouterr().out)
    assert res["dp_calibration"] == "analytic" and res["correction"] == "none"
    assert "auc_uncorrected" not in res and res["sensitivity_is_heuristic"] is True
    assert "NOT A BOUND" in (tmp_path / "r.html").read_text()
    main([*args, "--method", "rocglm", "--sensitivity", "0.01"])
    table = capsys.readouterr().out
    assert "privacy guarantee" in table and "deconvolution" in table
    assert res["auc_test"]["a0"] == 0.6 and (tmp_path / "r.html").stat().st_size > 1000
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--method", "pooled", "--epsilon", "0.5"])
    assert exit_info.value.code == 2


def test_gbsg2_use_case_labels_and_pooled_comparison():
    pytest.importorskip("sksurv")
    from fedroc.experiments.gbsg2 import gbsg2_data, gbsg2_use_case

    data = gbsg2_data(seed=3)
    assert data.n_train == 412 and data.n_test == 274
    assert sum(d.n for d in data.sites.values()) + data.n_censored_dropped == 274
    assert len(data.sites) == 5
    case = gbsg2_use_case(seed=3)
    pooled = pool_site_data(data.sites)
    assert case.brier_distributed == pytest.approx(np.mean((pooled.label - pooled.score) ** 2))
    assert case.pooled.auc == pytest.approx(delong(pooled.label, pooled.score).auc)
    assert (case.distributed.epsilon, case.distributed.delta) == (0.3, 0.4)
    assert abs(case.distributed.auc - case.pooled.auc) < 0.05
    assert case.distributed.without_correction().correction == "none"
    quantities = [r[0] for r in case.rows()]
    assert quantities[0] == "AUC" and "Brier score" in quantities


def test_run_rocglm_takes_the_evaluate_options_of_distributed_rocglm_only():
    # run_rocglm forwards its options to distributed_rocglm; those evaluate sets itself and
    # the fit's internals are refused before anything is asked of the sites.
    from fedroc.methods.rocglm import run_rocglm

    options = inspect.signature(run_rocglm).parameters
    assert {"epsilon", "sensitivity", "score_levels", "bootstrap", "a0"} <= set(options)
    for name in ("confidence_level", "seed", "n_breaks", "tol", "max_iter", "federation"):
        assert name not in options
        with pytest.raises(TypeError, match=name):
            run_rocglm(None, **{name: 1})


# --- what every answer about where the scores lie costs (H14-2 the other way, H15-1) ------


def _ledger_grid(fed: Federation) -> list[object]:
    from fedroc.federation.basic import BIND_RANGE

    return [s.ledger.bindings.get(BIND_RANGE) for s in fed.transport._sites.values()]


def test_a_mistyped_rocglm_range_binds_the_grid_and_the_refusals_say_how_to_proceed():
    """Every clear answer about where a site's scores lie binds its grid of exact counts,
    whatever the answer (an answer "outside" that bound nothing named the site of a pooled
    lone row, H14-2 the other way). So a ROC-GLM over a mistyped range [0, 0.5] on
    probabilities, refused before any release, binds the sites' grid to [0, 0.5]: their
    scores lie outside it, and on these ledgers they take part in no exact counts on a
    grid. The refusals say so, name the bound range and how to proceed (the run over [0, 1],
    refused before any release; the secure calibration curve over [0, 1]); the same run on
    new ledgers answers."""
    from fedroc.secagg import secure_sum

    rng = np.random.default_rng(23)
    y, s = flipped(rng, 600, 0.5)
    fed, _ = federation_of(y, s, k=3)
    start = fed.mark()
    with pytest.raises(InputError, match="outside the score range \\[0, 0.5\\]"):
        distributed_rocglm(fed, sensitivity=0.01, score_range=(0.0, 0.5), seed=0)
    assert _ledger_grid(fed) == [[0.0, 0.5, None]] * 3
    with pytest.raises(
        InputError, match="outside the range of their one grid.*privacy status.*new ledger"
    ):
        distributed_rocglm(fed, sensitivity=0.01, score_range=(0.0, 1.0), seed=0)
    assert fed.released(start).kinds.get("noisy", 0) == 0
    with pytest.raises(
        DisclosureError, match="bound to \\[0, 0.5\\] by its first.*may not change.*new ledger"
    ):
        secure_sum(fed, "fedroc.calibration", n_bins=10)
    fresh, _ = federation_of(y, s, k=3)
    res = distributed_rocglm(fresh, sensitivity=0.01, score_range=(0.0, 1.0), seed=0, bootstrap=10)
    assert res.ci[0] < delong(y, s).auc < res.ci[1]


def test_the_rocglm_still_runs_over_a_range_that_holds_the_grid_a_range_answer_bound():
    """A range answered "inside" binds the grid over it as before: a second run over the
    same range, or a wider one that holds it, runs on that grid, and a narrower one is
    refused before any release, naming the bound range."""
    rng = np.random.default_rng(24)
    y, s = flipped(rng, 600, 0.5)
    fed, _ = federation_of(y, s, k=3)
    first = distributed_rocglm(fed, sensitivity=0.01, score_range=(-1.0, 2.0), seed=0, bootstrap=10)
    assert _ledger_grid(fed) == [[-1.0, 2.0, None]] * 3
    again = distributed_rocglm(fed, sensitivity=0.01, score_range=(-2.0, 3.0), seed=1, bootstrap=10)
    for res in (first, again):
        assert res.ci[0] < delong(y, s).auc < res.ci[1]
    start = fed.mark()
    with pytest.raises(
        DisclosureError, match="does not hold the range \\[-1, 2\\] of its one grid"
    ):
        distributed_rocglm(fed, sensitivity=0.01, score_range=(0.0, 1.0), seed=0)
    assert fed.released(start).kinds.get("noisy", 0) == 0
    # It says how to give one (the docs audit: "Give a range that holds it" named neither
    # the keyword nor the option a user of the default range had not typed).
    with pytest.raises(DisclosureError, match="score_range=, --score-range on the command line"):
        distributed_rocglm(fed, sensitivity=0.01, seed=0)


def test_the_rocglm_on_a_rating_scale_runs_again_and_holds_the_sites_to_its_levels():
    """The ROC-GLM with declared score levels binds the levels with the grid (H15-1): a second
    run on the same levels still runs; a histogram or a secure calibration curve at those
    sites is then refused (a cell of their grid holds no level), saying so, before any row
    is read or budget spent."""
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA
    from fedroc.secagg import secure_sum

    rng = np.random.default_rng(25)
    y = rng.random(1500) < 0.4
    s = np.floor(stats.norm.cdf(rng.normal(1.2 * y, 1.0)) * 5).clip(0, 4) / 4
    levels = [0.0, 0.25, 0.5, 0.75, 1.0]
    fed, _ = federation_of(y, s, k=3)
    ref = delong(y, s).auc
    for seed in (0, 1):
        res = distributed_rocglm(
            fed, sensitivity=0.01, score_levels=levels, seed=seed, bootstrap=10
        )
        assert res.ci[0] <= ref <= res.ci[1]
    start = fed.mark()
    words = "score levels \\[0, 0.25, 0.5, 0.75, 1\\] \\(5 levels\\).*4096 cells over \\[0, 1\\]"
    with pytest.raises(DisclosureError, match=words):
        secure_sum(fed, INPUT_NAME, mode=MODE_SA, branching=2, height=3, lo=0.0, hi=1.0)
    with pytest.raises(DisclosureError, match=words):
        secure_sum(fed, "fedroc.calibration", n_bins=4)
    with pytest.raises(DisclosureError, match=words):
        evaluate(fed, method="histogram", dp_epsilon=1.0)
    assert fed.released(start).kinds.get("noisy", 0) == 0
    # A ROC-GLM without those levels (its setup's grid tables would hold cells without a
    # level) is refused before its noisy release, not at the setup after it spent it.
    for other in ({"correction": "none"}, {"score_levels": [0.0, 0.5, 1.0]}):
        with pytest.raises(FedrocError, match="level"):
            distributed_rocglm(fed, sensitivity=0.01, seed=0, bootstrap=10, **other)
    assert fed.released(start).kinds.get("noisy", 0) == 0
