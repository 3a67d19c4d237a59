"""Federated clustered AUCs (clusters inside sites) against the pooled computation."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

from fedroc.cli import main
from fedroc.clustered import clustered_auc
from fedroc.clustered.models import sample_allocation, sample_binormal
from fedroc.data import Columns
from fedroc.exceptions import DisclosureError, InputError, SiteError
from fedroc.federation import Federation, Site
from fedroc.methods import evaluate
from fedroc.methods.clustered import (
    FUNCTION_MOMENTS,
    FUNCTION_SUMMARY,
    ClusteredAUCWarning,
    bin_scores,
    federated_clustered_auc,
    plain_sum,
    score_bin_edges,
)
from fedroc.metrics import bin_index
from fedroc.privacy import DisclosurePolicy
from tests._clustered_brute import brute_force


def _frames(rng, n_sites=3, clusters=(12, 9, 15), levels=None, one_class=True):
    frames = {}
    for k in range(n_sites):
        m, n = sample_allocation(clusters[k], 0.4, rng=rng)
        smp = sample_binormal(m, n, delta=0.9, rho=0.5, rng=rng)
        score = 1.0 / (1.0 + np.exp(-smp.y_score))  # probabilities
        if levels is not None:
            score = np.round(score * levels) / levels
        label = smp.y_true.copy()
        cluster = np.array([f"c{j}" for j in smp.cluster])
        if one_class:  # make the site's first cluster all controls
            label[smp.cluster == 0] = False
        frames[f"site{k}"] = pd.DataFrame({"y": label.astype(int), "p": score, "pid": cluster})
    return frames


# Sites of these accuracy tests let their histograms out in the clear, bin by bin (a site
# refuses by default: tests/test_attacks.py); min_count 1 so that fine bins pass.
CLEAR = DisclosurePolicy(min_count=1, clear_histograms=True)


def _federation(frames, **kwargs):
    return Federation.from_frames(frames, label="y", score="p", cluster="pid", **kwargs)


def _clear(frames, **kwargs):
    return _federation(frames, policy=CLEAR, **kwargs)


def _pooled(frames):
    y = np.concatenate([f["y"].to_numpy() for f in frames.values()]).astype(bool)
    s = np.concatenate([f["p"].to_numpy() for f in frames.values()])
    # Cluster ids are local to a site.
    c = np.concatenate([(name + ":" + f["pid"]).to_numpy() for name, f in frames.items()])
    return y, s, c


def test_discrete_scores_give_the_pooled_result_exactly():
    # Scores on a grid coarser than the bins: every distinct score has its own bin, so the
    # binned between-cluster pairs are the exact ones.
    frames = _frames(np.random.default_rng(0), levels=20)
    with _clear(frames) as fed:
        res = federated_clustered_auc(fed, n_bins=1000, secure=False)
    y, s, c = _pooled(frames)
    ref = clustered_auc(y, s, c)
    est = res.estimate
    assert est.population_auc == pytest.approx(ref.population_auc, rel=1e-12)
    assert est.personalized_auc == pytest.approx(ref.personalized_auc, rel=1e-12)
    assert est.obuchowski_auc == pytest.approx(ref.obuchowski_auc, rel=1e-12)
    assert est.obuchowski_se == pytest.approx(ref.obuchowski_se, rel=1e-9)
    np.testing.assert_allclose(est.covariance, ref.covariance, rtol=1e-9)
    assert est.equality_p == pytest.approx(ref.equality_p, rel=1e-8)
    assert est.n_clusters == ref.n_clusters and est.n_excluded == ref.n_excluded == 3
    assert est.excluded_clusters is None
    # Result reads through to the estimate and says what was released.
    assert res.population_auc == est.population_auc
    assert res.released.rounds == 2
    assert res.released.functions == [FUNCTION_SUMMARY, FUNCTION_MOMENTS]
    assert sum(res.released.bytes_received.values()) > 0
    assert {"population_auc", "released", "population_binning_bound"} <= set(res.to_dict())
    assert "binning bound" in res.summary()


@pytest.mark.parametrize("pair_correction", [False, True])
def test_continuous_scores_equal_binned_reference_and_respect_the_bound(pair_correction):
    frames = _frames(np.random.default_rng(1), one_class=False)
    n_bins = 50
    with _clear(frames) as fed:
        res = federated_clustered_auc(
            fed, n_bins=n_bins, pair_correction=pair_correction, secure=False
        )
    y, s, c = _pooled(frames)
    # The federated estimates are the brute-force formulas with the between-cluster terms
    # on the bin indices and the within-cluster AUCs on the raw scores.
    binned = bin_index(s, n_bins).astype(float)
    ref = brute_force(y, s, c, s_population=binned, pair_correction=pair_correction)
    est = res.estimate
    assert est.population_auc == pytest.approx(ref["population"], rel=1e-12)
    assert est.personalized_auc == pytest.approx(ref["personalized"], rel=1e-12)
    assert est.obuchowski_auc == pytest.approx(ref["obuchowski"], rel=1e-12)
    assert est.obuchowski_se**2 == pytest.approx(ref["obuchowski_var"], rel=1e-9)
    np.testing.assert_allclose(est.covariance, ref["covariance"], rtol=1e-9)
    # Against the exact pooled values: within the stated binning bounds, which are not void.
    exact = clustered_auc(y, s, c, pair_correction=pair_correction)
    err_pop = abs(est.population_auc - exact.population_auc)
    assert err_pop <= res.population_binning_bound
    assert abs(est.obuchowski_auc - exact.obuchowski_auc) <= res.obuchowski_binning_bound
    assert 0 < res.population_binning_bound < 0.05
    assert est.personalized_auc == pytest.approx(exact.personalized_auc, rel=1e-12)


def test_fine_bins_approach_the_exact_result():
    frames = _frames(np.random.default_rng(2), one_class=False)
    y, s, c = _pooled(frames)
    exact = clustered_auc(y, s, c)
    with _clear(frames) as fed:
        res = federated_clustered_auc(fed, n_bins=100_000, secure=False)
    assert abs(res.population_auc - exact.population_auc) <= res.population_binning_bound
    assert res.population_binning_bound < 1e-3
    np.testing.assert_allclose(res.covariance, exact.covariance, rtol=0.02)


def _pairs_in_one_cell(frames, cells=4096):
    """Put, in the first two two-class clusters of each site, the first positive just above
    the first negative inside the negative's cell of the ``cells``-cell grid over [0, 1]."""
    for frame in frames.values():
        done = 0
        for _, rows in frame.groupby("pid"):
            if done == 2 or rows["y"].nunique() < 2:
                continue
            neg, pos = rows.index[rows["y"] == 0][0], rows.index[rows["y"] == 1][0]
            cell = min(np.floor(frame.at[neg, "p"] * cells), cells - 1)
            frame.at[neg, "p"], frame.at[pos, "p"] = (cell + 0.1) / cells, (cell + 0.9) / cells
            done += 1
    return frames


@pytest.mark.parametrize("secure", [False, True])
def test_within_cluster_aucs_are_those_of_the_sites_grid_cells(secure):
    """The personalized AUC and Sigma22 are computed on the scores rounded to the site's
    grid (4096 cells over [0, 1] at 1000 bins; C1 in tests/test_attacks_review3.py): a
    positive and a negative of one cluster in one cell count 1/2. Checked against the
    pooled analysis on the cell indices, and apart from the exact scores' (six pairs
    ordered inside a cell here)."""
    frames = _pairs_in_one_cell(_frames(np.random.default_rng(21), one_class=False))
    with _clear(frames) as fed:
        est = federated_clustered_auc(fed, secure=secure).estimate
    y, s, c = _pooled(frames)
    cells = clustered_auc(y, np.floor(s * 4096), c)
    exact = clustered_auc(y, s, c)
    assert est.personalized_auc == pytest.approx(cells.personalized_auc, abs=1e-8)
    assert est.covariance[1, 1] == pytest.approx(cells.covariance[1, 1], rel=1e-6)
    assert abs(est.personalized_auc - exact.personalized_auc) > 1e-3


def test_sites_release_only_sums_and_bin_counts():
    frames = _frames(np.random.default_rng(3))
    n_bins = 40
    sites = [
        Site.from_frame(name, frame, Columns("y", "p", "pid"), policy=CLEAR)
        for name, frame in frames.items()
    ]
    with Federation.from_sites(sites) as fed:
        federated_clustered_auc(fed, n_bins=n_bins, secure=False)
    for site in sites:
        entries = [e for e in site.audit.entries() if e["outcome"] == "released"]
        assert [e["function"] for e in entries] == [FUNCTION_SUMMARY, FUNCTION_MOMENTS]
        n_clusters = len(np.unique(frames[site.name]["pid"]))
        for entry in entries:
            assert entry["counts"]["clusters"] >= 5
            for key, value in entry["released"].items():
                size = np.asarray(value).size
                # Arrays are bin histograms; everything else is one number: no per-cluster
                # or per-row vector leaves the site.
                assert size in (1, n_bins), key
                assert size != n_clusters or n_clusters == n_bins


def test_policy_refuses_a_site_with_fewer_than_q_clusters():
    frames = _frames(np.random.default_rng(4), clusters=(12, 4, 15), one_class=False)
    with _federation(frames) as fed, pytest.raises(DisclosureError, match="site1") as exc:
        federated_clustered_auc(fed)
    # It names the count, not its value (a number of the site's rows).
    assert "clusters count is below the minimum of 5" in str(exc.value)
    assert "4" not in str(exc.value).replace("site1", "")
    with _federation(frames, policy=DisclosurePolicy(min_count=3)) as fed:
        assert federated_clustered_auc(fed).n_clusters == 31


def test_site_errors_name_the_site_and_the_problem():
    frames = _frames(np.random.default_rng(5), one_class=False)
    with _federation(frames) as fed, pytest.raises(SiteError, match="outside the shared score"):
        federated_clustered_auc(fed, score_range=(0.2, 1.0))
    no_cluster = Federation.from_frames(frames, label="y", score="p")
    with no_cluster as fed, pytest.raises(SiteError, match="has no cluster column.*--cluster COL"):
        federated_clustered_auc(fed)
    with pytest.raises(InputError, match="n_bins must be a positive integer"):
        score_bin_edges(0)


def test_too_few_clusters_overall():
    frames = {
        "a": pd.DataFrame(
            {"y": [0, 1] + [1] * 10, "p": np.linspace(0, 1, 12), "pid": ["x", "x"] + ["z"] * 10}
        )
    }
    with (
        _federation(frames, policy=CLEAR) as fed,
        pytest.raises(InputError, match="at least 2 clusters with both classes; the sites hold 1"),
    ):
        federated_clustered_auc(fed, secure=False)


def test_the_jackknife_interval_is_refused_naming_the_option():
    """interval='jackknife' needs leave-one-cluster-out sums the sites do not release."""
    frames = {
        "a": pd.DataFrame(
            {"y": [0, 1, 0, 1], "p": [0.1, 0.6, 0.3, 0.8], "pid": ["x"] * 2 + ["z"] * 2}
        )
    }
    with (
        _federation(frames, policy=CLEAR) as fed,
        pytest.raises(InputError, match=r"interval='jackknife' \(--cluster-interval jackknife\)"),
    ):
        federated_clustered_auc(fed, secure=False, interval="jackknife")


def test_aggregation_hook_is_the_only_path_from_the_sites():
    frames = _frames(np.random.default_rng(6))
    calls = []

    def recording_sum(federation, function, args):
        calls.append(function)
        return plain_sum(federation, function, args)

    with _clear(frames) as fed:
        res = federated_clustered_auc(fed, aggregate=recording_sum)
        plain = federated_clustered_auc(fed, secure=False)
    assert calls == [FUNCTION_SUMMARY, FUNCTION_MOMENTS]
    assert res.population_auc == plain.population_auc
    np.testing.assert_array_equal(res.covariance, plain.covariance)


def test_bin_rule_matches_the_calibration_bins():
    s = np.r_[0.0, 0.1, 0.25, 0.5, 0.999, 1.0, np.random.default_rng(7).random(500)]
    np.testing.assert_array_equal(bin_scores(s, score_bin_edges(10)), bin_index(s, 10))
    with pytest.raises(InputError, match="outside the shared score range"):
        bin_scores(np.array([1.5]), score_bin_edges(10))


def test_secure_aggregation_default_matches_plain_sums_and_hides_the_sites():
    frames = _frames(np.random.default_rng(8))
    sites, plain_sites = (
        [
            Site.from_frame(name, frame, Columns("y", "p", "pid"), policy=CLEAR)
            for name, frame in frames.items()
        ]
        for _ in range(2)
    )
    with Federation.from_sites(sites) as fed:
        secure = federated_clustered_auc(fed, n_bins=200)
        # Sites that summed their histograms securely answer none in the clear: the secure
        # totals minus clear histograms would be the rows one site withheld or holds alone.
        with pytest.raises(DisclosureError, match="exact binned counts through secure"):
            federated_clustered_auc(fed, n_bins=200, secure=False)
    with Federation.from_sites(plain_sites) as fed:  # the same rows at sites of their own
        plain = federated_clustered_auc(fed, n_bins=200, secure=False)
    est, ref = secure.estimate, plain.estimate
    # Counts are summed exactly; floats travel in fixed point (2^-32).
    assert est.population_auc == pytest.approx(ref.population_auc, abs=1e-12)
    assert est.personalized_auc == pytest.approx(ref.personalized_auc, abs=1e-8)
    np.testing.assert_allclose(est.covariance, ref.covariance, rtol=1e-6, atol=1e-12)
    assert est.obuchowski_se == pytest.approx(ref.obuchowski_se, rel=1e-6)
    assert any("secure aggregation" in n for n in secure.released.notes)
    # Under secure aggregation the sites never run the clustered site functions in the
    # clear: their audit logs show only the secure-aggregation stages for that run.
    for site in sites:
        functions = [e["function"] for e in site.audit.entries() if e["outcome"] == "released"]
        assert FUNCTION_SUMMARY not in functions
        assert all(f.startswith("fedroc.secagg.") for f in functions)
        assert len(functions) == 8  # two sessions of four stages


def test_secure_aggregation_needs_two_sites_and_applies_the_policy():
    frames = _frames(np.random.default_rng(9), n_sites=1)
    with _federation(frames) as fed, pytest.raises(InputError, match="at least 2 sites"):
        federated_clustered_auc(fed)
    frames = _frames(np.random.default_rng(4), clusters=(12, 4, 15), one_class=False)
    with _federation(frames) as fed, pytest.raises(DisclosureError, match="site1"):
        federated_clustered_auc(fed)


def test_a_site_of_one_class_is_refused_saying_which_clusters_it_lacks():
    """It read only "the clusters count is below the minimum of 5 rows per released
    aggregate" (evaluate --method clustered with a site holding no positive)."""
    frames = _frames(np.random.default_rng(9))
    frames["site1"] = frames["site1"].assign(y=0)
    with _federation(frames) as fed, pytest.raises(DisclosureError) as info:
        federated_clustered_auc(fed)
    assert info.value.site == "site1"
    assert "the clusters count is below the minimum of 5" in str(info.value)
    assert "the clusters that hold both classes" in str(info.value)
    assert "leave it out" in str(info.value)


# -- estimators, caveats and the evaluate method ----------------------------------------------
@pytest.mark.parametrize(("estimator", "sigma11"), [("between", "corollary6"), ("eq5", "authors")])
def test_estimator_choices_match_the_pooled_computation(estimator, sigma11):
    frames = _frames(np.random.default_rng(10), levels=20)
    with _clear(frames) as fed:
        res = federated_clustered_auc(
            fed, n_bins=1000, secure=False, population_estimator=estimator, sigma11=sigma11
        )
    y, s, c = _pooled(frames)
    ref = clustered_auc(y, s, c, population_estimator=estimator, sigma11=sigma11)
    est = res.estimate
    assert est.population_auc == pytest.approx(ref.population_auc, rel=1e-12)
    assert est.population_between == pytest.approx(ref.population_between, rel=1e-12)
    np.testing.assert_allclose(est.covariance, ref.covariance, rtol=1e-9)
    assert (est.population_estimator, est.sigma11) == (estimator, sigma11)
    # DeLong's SE of the all-pairs AUC from the pooled histograms: exact on these scores.
    assert est.delong_se == pytest.approx(ref.delong_se, rel=1e-9)


def test_federated_result_carries_the_few_cluster_caveat():
    frames = _frames(np.random.default_rng(11), clusters=(3, 3, 3), one_class=False)
    with _clear(frames) as fed, pytest.warns(ClusteredAUCWarning, match="only 9 clusters"):
        res = federated_clustered_auc(fed, n_bins=50, secure=False)
    assert any("only 9 clusters" in m for m in res.estimate.caveats)
    assert "CAVEAT" in res.summary()


def test_plain_sums_are_refused_by_a_default_site():
    frames = _frames(np.random.default_rng(12))
    with _federation(frames) as fed, pytest.raises(DisclosureError, match="clear_histograms"):
        federated_clustered_auc(fed, secure=False)


def test_a_clear_bin_below_min_count_is_refused_with_what_to_change():
    # Clear sites at the default min_count (5) and fine bins: some bin holds 1 to 4 rows of
    # a class, which a site does not release. The refusal says so and what to ask instead.
    frames = _frames(np.random.default_rng(12))
    policy = DisclosurePolicy(clear_histograms=True)
    with (
        _federation(frames, policy=policy) as fed,
        pytest.raises(DisclosureError, match=r"bin count is below the minimum") as err,
    ):
        federated_clustered_auc(fed, n_bins=400, secure=False)
    assert "its 400 bins" in str(err.value)
    assert "fewer bins (n_bins, --cluster-bins)" in str(err.value)
    assert "secure aggregation" in str(err.value)
    assert err.value.site is not None


def test_clear_calibration_cut_near_the_clustered_edges_is_refused_with_what_to_change():
    # Clear sites at min_count 5: the clustered histograms at 2 bins pass; calibration at
    # 10 bins would be cut by their edge 0.5 beside a withheld bin, which a site refuses.
    # The refusal says which bins pass, and those do.
    rng = np.random.default_rng(1)
    frames = {}
    for k in range(2):
        y = rng.random(300) < 0.4
        p = 1.0 / (1.0 + np.exp(-(rng.normal(size=300) + 1.2 * y)))
        pid = [f"c{j}" for j in np.repeat(np.arange(60), 5)]
        frames[f"site{k}"] = pd.DataFrame({"y": y.astype(int), "p": p, "pid": pid})
    policy = DisclosurePolicy(clear_histograms=True)
    with _federation(frames, policy=policy) as fed:
        with pytest.raises(DisclosureError, match="cut too close to a bin edge") as err:
            evaluate(fed, "clustered", n_bins=2, secure=False, calibration_bins=10)
        assert "--bins equal to the clustered method's --cluster-bins" in str(err.value)
    with _federation(frames, policy=policy) as fed:
        res = evaluate(fed, "clustered", n_bins=2, secure=False, calibration_bins=2)
    assert len(res.to_dict()["calibration"]["count"]) == 2


def test_evaluate_method_clustered_gives_the_common_result():
    frames = _frames(np.random.default_rng(13))
    with _federation(frames) as fed:
        res = evaluate(fed, "clustered", n_bins=500, calibration_bins=None)
        direct = federated_clustered_auc(fed, n_bins=500)
    assert res.method == "clustered"
    assert res.auc == pytest.approx(direct.population_auc, abs=1e-12)
    assert res.auc_ci == pytest.approx(direct.population_ci, abs=1e-12)
    d = res.to_dict()
    for key in (
        "personalized_auc",
        "personalized_ci",
        "equality_z",
        "equality_p",
        "obuchowski_auc",
        "n_clusters",
        "caveats",
        "delong_se",
    ):
        assert key in d, key
    assert d["personalized_auc"] == pytest.approx(direct.personalized_auc, abs=1e-8)
    assert [s["name"] for s in d["sites"]] == ["site0", "site1", "site2"]
    assert d["released"]["rounds"] >= 2
    # The class counts of the clusters used, as `fedroc clustered` gives them for pooled rows.
    y, score, cluster = _pooled(frames)
    pooled = clustered_auc(y, score, cluster)
    assert (d["n_pos"], d["n_neg"]) == (pooled.n_pos, pooled.n_neg)
    assert d["obuchowski_binning_bound"] == direct.obuchowski_binning_bound
    json.dumps(d, allow_nan=False)


def test_cli_evaluate_method_clustered(tmp_path, capsys):
    frames = _frames(np.random.default_rng(14))
    args = ["evaluate", "--label", "y", "--score", "p"]
    for name, frame in frames.items():
        path = tmp_path / f"{name}.csv"
        frame.to_csv(path, index=False)
        args += ["--site", f"{name}={path}"]
    main([*args, "--method", "clustered", "--cluster", "pid", "--cluster-bins", "200", "--json"])
    out = json.loads(capsys.readouterr().out)
    y, s, c = _pooled(frames)
    ref = clustered_auc(y, s, c)
    assert out["method"] == "clustered"
    assert abs(out["auc"] - ref.population_auc) <= out["population_binning_bound"] + 1e-9
    assert out["personalized_auc"] == pytest.approx(ref.personalized_auc, abs=1e-8)
    assert out["n_clusters"] == ref.n_clusters and out["n_bins"] == 200
    assert out["brier"] is not None  # the common extras of evaluate still come
    with pytest.raises(SystemExit) as exc:
        main([*args, "--method", "clustered"])
    assert exc.value.code == 2
    assert "--method clustered needs --cluster" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main([*args, "--method", "clustered", "--cluster", "pid", "--quantiles", "8"])
    assert exc.value.code == 2
    assert "--quantiles do not apply to --method clustered" in capsys.readouterr().err
    # The clustered options, named as given (--cluster-bins was "--n-bins" here before).
    with pytest.raises(SystemExit) as exc:
        main([*args, "--method", "histogram", "--cluster-bins", "5", "--cluster-interval", "wald"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--cluster-bins, --cluster-interval do not apply to --method histogram" in err
    # t on I - 1 df on the logit scale by default; on the AUC scale (t) and the paper's
    # normal quantile (wald) by name.
    for flag in ((), ("--cluster-interval", "t"), ("--cluster-interval", "wald")):
        main([*args, "--method", "clustered", "--cluster", "pid", *flag, "--json"])
        out = json.loads(capsys.readouterr().out)
        kind = flag[1] if flag else "logit"
        assert out["interval"] == kind
        df = out["n_clusters"] - 1
        q = stats.norm.ppf(0.975) if kind == "wald" else stats.t.ppf(0.975, df)
        auc, se = out["auc"], out["population_se"]
        if kind == "logit":
            half = q * se / (auc * (1 - auc))
            logit = np.log(auc / (1 - auc))
            expected = [special.expit(logit - half), special.expit(logit + half)]
        else:
            expected = [auc - q * se, auc + q * se]
        assert out["auc_ci"] == pytest.approx(expected)


def test_cli_scores_outside_the_range_are_refused_naming_the_option(tmp_path, capsys):
    """Scores off [0, 1] (logits) were refused with "pass a score_range that covers every
    site's scores": the API's keyword, which `fedroc evaluate` does not take. The line names
    --score-range, as the histogram's does, and that option gives the run."""
    frames = _frames(np.random.default_rng(16))
    args = ["evaluate", "--label", "y", "--score", "p", "--method", "clustered"]
    for name, frame in frames.items():
        path = tmp_path / f"{name}.csv"
        frame.assign(p=special.logit(frame["p"].clip(0.01, 0.99))).to_csv(path, index=False)
        args += ["--site", f"{name}={path}"]
    with pytest.raises(SystemExit) as exc:
        main([*args, "--cluster", "pid"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert "outside the shared score range [0, 1]" in err and "--score-range LO,HI" in err
    main([*args, "--cluster", "pid", "--score-range=-5,5", "--json"])
    assert json.loads(capsys.readouterr().out)["method"] == "clustered"


def test_fine_secure_bins_are_answered_and_too_many_are_refused_naming_cluster_bins(
    tmp_path, capsys
):
    """The edges and four pooled histograms travel in the secure aggregation's arguments.
    At 64 KiB (main 746ab4e) --cluster-bins 2500 failed in the second sum, "argument
    'input_args' must have at most 65536 characters", naming no option, after the first sum
    had bound the 2500-bin edges at every site for its lifetime. Now the limit is 1 MiB and
    bins that could overflow it are refused before any site is asked, naming the option."""
    frames = _frames(np.random.default_rng(15))
    args = ["evaluate", "--label", "y", "--score", "p", "--method", "clustered"]
    for name, frame in frames.items():
        path = tmp_path / f"{name}.csv"
        frame.to_csv(path, index=False)
        args += ["--site", f"{name}={path}"]
    with pytest.raises(SystemExit) as exc:
        main([*args, "--cluster", "pid", "--cluster-bins", "20000"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --cluster-bins 20000 needs up to") and "use at most" in err
    # Nothing was bound: the same sites answer 2500 bins (fixed point: floats to 2^-32).
    main([*args, "--cluster", "pid", "--cluster-bins", "2500", "--json"])
    out = json.loads(capsys.readouterr().out)
    y, s, c = _pooled(frames)
    assert out["n_bins"] == 2500
    assert abs(out["auc"] - clustered_auc(y, s, c).population_auc) <= (
        out["population_binning_bound"] + 1e-9
    )


def test_cli_evaluate_clustered_plain_gives_the_library_clear_run(tmp_path, capsys):
    """``fedroc evaluate --method clustered --plain`` over sites whose policy sets
    ``clear_histograms``: since each site signs its round-1 release and checks the relayed
    releases in round 2 (C2 in the clear), the CLI's run gives the library's clear run
    exactly, and the pooled reference to its binning bound. A site that does not allow
    the clear refuses, exit code 2 with its name."""
    frames = _frames(np.random.default_rng(16), n_sites=2)
    toml = ['[columns]\nlabel = "y"\nscore = "p"\ncluster = "pid"\n']
    toml.append("[policy]\nmin_count = 1\nclear_histograms = true\n")
    for name, frame in frames.items():
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
        toml.append(f'[sites.{name}]\npath = "{name}.csv"\n')
    (tmp_path / "fed.toml").write_text("\n".join(toml))
    args = ["evaluate", "--sites", str(tmp_path / "fed.toml"), "--method", "clustered"]
    # The calibration curve evaluate adds is cut at the clustered edges: a clear site
    # refuses calibration edges near its clustered edges that are not among them (R7).
    main([*args, "--cluster-bins", "8", "--bins", "8", "--plain", "--json"])
    out = json.loads(capsys.readouterr().out)
    with _clear(frames) as fed:
        lib = federated_clustered_auc(fed, n_bins=8, secure=False).estimate
    assert out["auc"] == lib.population_auc
    assert out["personalized_auc"] == lib.personalized_auc
    np.testing.assert_array_equal(out["covariance"], lib.covariance)
    y, s, c = _pooled(frames)
    ref = clustered_auc(y, s, c)
    assert abs(out["auc"] - ref.population_auc) <= out["population_binning_bound"] + 1e-12
    assert out["n_clusters"] == ref.n_clusters
    (tmp_path / "fed.toml").write_text("\n".join(toml).replace("clear_histograms = true", ""))
    with pytest.raises(SystemExit) as exc:
        main([*args, "--cluster-bins", "8", "--bins", "8", "--plain", "--json"])
    assert exc.value.code == 2
    error = json.loads(capsys.readouterr().out)  # with --json the error is the one object
    assert (
        error["site"] == "site0"
        and "refuses 'fedroc.clustered.summary' in the clear" in (error["error"])
    )
