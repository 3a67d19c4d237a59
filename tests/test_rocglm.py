"""Distributed ROC-GLM (paper 1): pooled fit, distributed fit, DP release, CI, CLI.

References used below: statsmodels' probit GLM on the expanded n1 x n_T binary table,
scipy's quadrature, fedroc.metrics.delong (itself checked against scikit-learn), brute
force versions of the grouped table and the sensitivity heuristic kept in this file.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

from fedroc.cli import main
from fedroc.data import SiteData
from fedroc.exceptions import DisclosureError, FedrocWarning, InputError
from fedroc.federation import AuditLog, Federation, Site
from fedroc.methods import evaluate, pool_site_data
from fedroc.methods.rocglm import (
    PrivacyCautionWarning,
    binormal_auc,
    binormal_auc_integral,
    distributed_rocglm,
    fit_with_survivors,
    recommended_privacy,
    release_noisy_scores,
    rocglm,
    rocglm_from_scores,
    score_sensitivity,
)
from fedroc.methods.rocglm._core import (
    GroupedTable,
    fit_table,
    grid_cutoffs,
    grouped_from_cutoffs,
    grouped_from_placements,
    positive_thresholds,
    survivor,
    threshold_grid,
)
from fedroc.methods.rocglm._probit import fisher_scoring, probit_parts
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
def simulation_policy(min_count=5):
    return DisclosurePolicy(min_count=min_count, epsilon_limit=math.inf, delta_limit=1.0)


def federation_of(y, s, k=5, rng=None, min_count=5, audit=None, noise_seed=None):
    rng = rng or np.random.default_rng(0)
    parts = np.array_split(rng.permutation(y.size), k)
    sites = [
        Site(
            f"site{j}",
            SiteData.from_arrays(y[i], s[i]),
            policy=simulation_policy(min_count),
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
        brute = (pv[:, None] <= t[None, :]).sum(axis=0)
        np.testing.assert_array_equal(grouped_from_placements(pv, t), brute)
        # The cutoffs a site receives give the same counts as the survivor function itself.
        np.testing.assert_array_equal(
            grouped_from_cutoffs(np.sort(pos), grid_cutoffs(neg, t)), brute
        )


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


@pytest.mark.parametrize("scale", ["probability", "logit"])
def test_noise_off_distributed_equals_pooled(scale):
    rng = np.random.default_rng(7)
    y, s = flipped(rng, 1500, 0.5)
    if scale == "logit":  # the grid rule needs no [0, 1] scores
        s = np.log(s / (1 - s)) * 3.0
    fed, _ = federation_of(y, s)
    # The exact scores in place of the noisy ones: only a test can hand these over.
    out = fit_with_survivors(fed, s[~y], s[y])
    pooled = rocglm(y, s)
    ref = delong(y, s)
    np.testing.assert_allclose(out.gamma[0], pooled.params, rtol=0, atol=1e-10)
    assert out.deviance[0] == pytest.approx(pooled.deviance, rel=1e-12)
    assert out.iterations[0] == pooled.iterations
    assert out.variance == pytest.approx(ref.variance, rel=1e-10)
    assert out.auc_placement == pytest.approx(ref.auc, abs=1e-12)
    assert out.n_rows == 5 * 28


def test_noise_off_positives_rule_equals_fit_on_stacked_site_tables():
    rng = np.random.default_rng(8)
    y, s = flipped(rng, 600, 0.5)
    fed, parts = federation_of(y, s, k=3)
    out = fit_with_survivors(fed, s[~y], s[y], thresholds="positives")
    neg = np.sort(s[~y])
    tables = []
    for idx in parts.values():
        pos_k = s[idx][y[idx]]
        tables.append(
            GroupedTable.from_positives_rule(survivor(neg, pos_k), positive_thresholds(pos_k))
        )
    stacked = tables[0].stacked(tables[1]).stacked(tables[2])
    ref = fit_table(stacked, thresholds="positives")
    np.testing.assert_allclose(out.gamma[0], ref.params, atol=1e-10)
    # With one site the stacked table is the pooled one.
    one, _ = federation_of(y, s, k=1)
    single = fit_with_survivors(one, s[~y], s[y], thresholds="positives")
    np.testing.assert_allclose(
        single.gamma[0], rocglm(y, s, thresholds="positives").params, atol=1e-10
    )


def test_dp_release_is_audited_recorded_and_reproducible(tmp_path):
    rng = np.random.default_rng(9)
    y, s = flipped(rng, 1000, 0.5)
    fed, parts = federation_of(y, s, audit=tmp_path, noise_seed=11)
    res = distributed_rocglm(
        fed, epsilon=0.4, delta=0.2, sensitivity=0.02, dp_calibration="classic"
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
        epsilon=0.4,
        delta=0.2,
        sensitivity=0.02,
        dp_calibration="classic",
        seed=99,
    )
    assert again.params == res.params
    other = distributed_rocglm(
        federation_of(y, s, noise_seed=12)[0],
        epsilon=0.4,
        delta=0.2,
        sensitivity=0.02,
        dp_calibration="classic",
    )
    assert other.params != res.params
    analytic = distributed_rocglm(
        fed, epsilon=0.4, delta=0.2, sensitivity=0.02, dp_calibration="analytic"
    )
    assert analytic.noise_sd == pytest.approx(
        analytic_gaussian_sigma(epsilon=0.4, delta=0.2, sensitivity=0.02)
    )
    assert analytic.noise_sd < sigma


def test_noisy_fit_equals_fit_on_the_released_scores():
    """The DP run is the noise-free protocol applied to what the sites released."""
    rng = np.random.default_rng(10)
    y, s = flipped(rng, 800, 0.4)
    fed, _ = federation_of(y, s, noise_seed=3)
    res = distributed_rocglm(fed, sensitivity=0.01, privacy="paper")
    # The sites' seed draws the same noise again: these are the scores the analyst pooled.
    rel = release_noisy_scores(fed, epsilon=0.2, delta=0.1, sensitivity=0.01)
    pos, neg = s[y], s[~y]
    ref_t = threshold_grid(28)
    pv = survivor(rel.negative, pos)
    table = GroupedTable(ref_t, grouped_from_placements(pv, ref_t), np.full(28, float(pos.size)))
    np.testing.assert_allclose(res.params, fit_table(table).params, atol=1e-10)
    # DeLong placements against the noisy other class, ties 1/2, by direct comparison.
    v10 = (
        (rel.negative[None, :] < pos[:, None]) + 0.5 * (rel.negative[None, :] == pos[:, None])
    ).mean(1)
    v01 = (
        (rel.positive[None, :] > neg[:, None]) + 0.5 * (rel.positive[None, :] == neg[:, None])
    ).mean(1)
    var = v10.var(ddof=1) / pos.size + v01.var(ddof=1) / neg.size
    assert res.variance == pytest.approx(var, rel=1e-10)
    assert res.ci == pytest.approx(logit_ci(res.auc, math.sqrt(var)))


def test_accuracy_at_recommended_settings_mean_absolute_error():
    """Paper 1 RQ1 / RQ2 at sensitivity 0.01 and 5 sites (a few repetitions)."""
    rng = np.random.default_rng(12)
    err_auc, err_lo, err_hi = [], [], []
    for _rep in range(16):
        y, s = flipped(rng, int(rng.integers(800, 2000)), rng.uniform(0.2, 0.8))
        fed, _ = federation_of(y, s, rng=rng)
        res = distributed_rocglm(fed, sensitivity=0.01, privacy="paper")
        ref = delong(y, s)
        lo, hi = ref.confidence_interval()
        err_auc.append(abs(res.auc - ref.auc))
        err_lo.append(abs(res.ci[0] - lo))
        err_hi.append(abs(res.ci[1] - hi))
    assert np.mean(err_auc) <= 0.01
    assert np.mean(err_lo) <= 0.01 and np.mean(err_hi) <= 0.01


def test_simex_reduces_the_noise_bias():
    rng = np.random.default_rng(13)
    plain, corrected = [], []
    for rep in range(12):
        y, s = flipped(rng, 1500, rng.uniform(0.3, 0.7))
        fed, _ = federation_of(y, s, rng=rng)
        res = distributed_rocglm(
            fed, sensitivity=0.03, privacy="paper", seed=rep, simex=True, simex_replicates=10
        )
        truth = rocglm(y, s).auc  # the noise-free ROC-GLM: what SIMEX aims at
        plain.append(truth - res.without_simex().auc)
        corrected.append(truth - res.auc)
        assert res.simex is not None and res.simex.lambdas[0] == 0
    assert np.mean(plain) > 0.005  # the noise biases the AUC downward
    assert abs(np.mean(corrected)) < 0.4 * np.mean(plain)


def test_ci_level_and_one_sided_test_agree():
    rng = np.random.default_rng(14)
    y, s = flipped(rng, 900, 0.6)
    fed, _ = federation_of(y, s)
    res = distributed_rocglm(fed, sensitivity=0.01, seed=1, a0=0.6)
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


# --- bad input ----------------------------------------------------------------------------


def test_site_with_too_few_positives_refuses_naming_it():
    rng = np.random.default_rng(15)
    y, s = flipped(rng, 400, 0.5)
    small = SiteData.from_arrays(np.array([1, 1, 0, 0, 0, 0, 0, 0]), rng.random(8))
    sites = [Site("big", SiteData.from_arrays(y, s)), Site("tiny", small)]
    with pytest.raises(DisclosureError, match="'tiny'.*positive count is 2"):
        distributed_rocglm(Federation.from_sites(sites), sensitivity=0.01, seed=0)


def test_positives_rule_needs_unit_interval_scores_and_names_the_site():
    rng = np.random.default_rng(16)
    y, s = flipped(rng, 600, 0.5)
    fed, _ = federation_of(y, s * 10.0, k=2)
    with pytest.raises(Exception, match="site0.*must lie in \\[0, 1\\]"):
        distributed_rocglm(fed, sensitivity=0.01, seed=0, thresholds="positives")


def test_parameter_errors():
    rng = np.random.default_rng(17)
    fed, _ = federation_of(*flipped(rng, 300, 0.5), k=2)
    with pytest.raises(InputError, match="both epsilon and delta"):
        distributed_rocglm(fed, epsilon=0.3, sensitivity=0.01)
    with pytest.raises(InputError, match="simex needs thresholds='grid'"):
        distributed_rocglm(fed, sensitivity=0.01, simex=True, thresholds="positives")
    with pytest.raises(InputError, match="dp_calibration"):
        distributed_rocglm(fed, sensitivity=0.01, dp_calibration="laplace")
    with pytest.raises(InputError, match="thresholds must be one of"):
        distributed_rocglm(fed, sensitivity=0.01, thresholds="quantiles")


# --- evaluate, CLI, use case ------------------------------------------------------------


def test_evaluate_runner_json_keys_and_estimated_sensitivity():
    rng = np.random.default_rng(18)
    y, s = flipped(rng, 1000, 0.5)
    fed, _ = federation_of(y, s)
    res = evaluate(fed, "rocglm", seed=4)
    out = res.to_dict()
    for key in ("method", "sites", "auc", "auc_ci", "released", "rocglm_params", "epsilon"):
        assert key in out
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
    assert any("heuristic" in n for n in out["released"]["notes"])
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
    main([*args, "--method", "rocglm", "--sensitivity", "0.01", "--seed", "2", "--json"])
    res = json.loads(capsys.readouterr().out)
    assert res["method"] == "rocglm" and len(res["rocglm_params"]) == 2
    assert (res["epsilon"], res["delta"]) == (1.0, pytest.approx(1 / 3000))
    assert res["auc_ci"][0] < res["auc"] < res["auc_ci"][1]
    main([*args, "--method", "rocglm", "--epsilon", "0.5", "--delta", "0.001",
          "--sensitivity", "0.01", "--dp-calibration", "analytic", "--simex", "--a0", "0.6",
          "--report", str(tmp_path / "r.html"), "--json"])  # fmt: skip
    res = json.loads(capsys.readouterr().out)
    assert res["dp_calibration"] == "analytic" and "auc_without_simex" in res
    assert res["auc_test"]["a0"] == 0.6 and (tmp_path / "r.html").stat().st_size > 1000
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--method", "pooled", "--epsilon", "0.5"])
    assert exit_info.value.code == 2


def test_gbsg2_use_case_labels_and_pooled_comparison():
    pytest.importorskip("sksurv")
    from fedroc.methods.rocglm.gbsg2 import gbsg2_data, gbsg2_use_case

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
    quantities = [r[0] for r in case.rows()]
    assert quantities[0] == "AUC" and "Brier score" in quantities
