"""Beyond the AUC on the command line (issue 14.2, 14.3): comparing two models, operating
points, partial AUC; checked against scikit-learn and brute force, and refused by name
where a method cannot give them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn import metrics as skm

from fedroc.metrics import delong_paired
from tests._cli import run_main


@pytest.fixture(scope="module")
def paired_sites(tmp_path_factory) -> dict[str, Path]:
    """Three sites with two correlated models' scores (ties included: rounded)."""
    tmp = tmp_path_factory.mktemp("paired")
    rng = np.random.default_rng(14)
    paths = {}
    for name, n in (("north", 160), ("south", 110), ("east", 200)):
        y = rng.random(n) < 0.35
        z = rng.normal(size=n)
        a = 1 / (1 + np.exp(-(1.3 * y + z)))
        b = 1 / (1 + np.exp(-(0.9 * y + 0.7 * z + 0.7 * rng.normal(size=n))))
        df = pd.DataFrame({"y": y.astype(int), "m1": a.round(2), "m2": b.round(2)})
        paths[name] = tmp / f"{name}.csv"
        df.to_csv(paths[name], index=False)
    return paths


def _pooled(paths: dict[str, Path]) -> pd.DataFrame:
    return pd.concat([pd.read_csv(p) for p in paths.values()], ignore_index=True)


def _site_args(paths: dict[str, Path]) -> list[str]:
    return [a for name, p in paths.items() for a in ("--site", f"{name}={p}")]


def _brute_paired(y: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Difference of AUCs and its DeLong SE by explicit pairwise kernels (slow, obvious)."""

    def v(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = (s[y][:, None] > s[~y][None, :]) + 0.5 * (s[y][:, None] == s[~y][None, :])
        return k.mean(axis=1), k.mean(axis=0)

    (a10, a01), (b10, b01) = v(a), v(b)
    d10, d01 = a10 - b10, a01 - b01
    var = d10.var(ddof=1) / d10.size + d01.var(ddof=1) / d01.size
    return float(a10.mean() - b10.mean()), float(np.sqrt(var))


def test_evaluate_pooled_compare_matches_brute_force_paired_delong(capsys, paired_sites):
    args = ["evaluate", *_site_args(paired_sites), "--label", "y", "--score", "m1"]
    code, out, _ = run_main(
        capsys, [*args, "--method", "pooled", "--compare-score", "m2", "--json"]
    )
    assert code == 0
    res = json.loads(out)
    df = _pooled(paired_sites)
    y = df["y"].to_numpy() == 1
    diff, se = _brute_paired(y, df["m1"].to_numpy(), df["m2"].to_numpy())
    cmp = res["comparison"]
    assert set(cmp) >= {"auc_difference", "ci", "p_value", "method"}
    assert cmp["auc_difference"] == pytest.approx(diff, abs=1e-12)
    assert cmp["se"] == pytest.approx(se, rel=1e-9)
    assert cmp["ci"] == pytest.approx(
        [diff - 1.959963984540054 * se, diff + 1.959963984540054 * se]
    )
    ref = delong_paired(y, df["m1"], df["m2"])
    assert cmp["p_value"] == pytest.approx(ref.p_value, rel=1e-9)
    assert cmp["auc_b"] == pytest.approx(skm.roc_auc_score(y, df["m2"]), abs=1e-12)
    assert res["auc"] - cmp["auc_b"] == pytest.approx(cmp["auc_difference"], abs=1e-12)
    # The table shows the comparison too.
    code, out, _ = run_main(capsys, [*args, "--method", "pooled", "--compare-score", "m2"])
    assert code == 0 and "Comparison of two models" in out and f"{diff:.4f}" in out


def test_metrics_partial_auc_and_operating_points_match_sklearn(capsys, paired_sites):
    path = paired_sites["east"]
    df = pd.read_csv(path)
    y, s = df["y"].to_numpy(), df["m1"].to_numpy()
    asks = ["--max-fpr", "0.2", "--at-specificity", "0.9", "--at-sensitivity", "0.8"]
    asks += ["--youden", "--seed", "1", "--bootstrap", "300", "--json"]
    code, out, _ = run_main(capsys, ["metrics", str(path), "--label", "y", "--score", "m1", *asks])
    assert code == 0
    res = json.loads(out)
    assert res["partial_auc"] == pytest.approx(skm.roc_auc_score(y, s, max_fpr=0.2), abs=1e-12)
    fpr, tpr, thr = skm.roc_curve(y, s, drop_intermediate=False)
    spec_pt, sens_pt, youden_pt = res["operating_points"]
    ok = 1 - fpr >= 0.9  # brute force over scikit-learn's cuts
    assert spec_pt["sensitivity"] == pytest.approx(tpr[ok].max())
    assert spec_pt["specificity"] >= 0.9
    ok = tpr >= 0.8
    assert sens_pt["specificity"] == pytest.approx((1 - fpr[ok]).max())
    j = tpr - fpr
    assert youden_pt["threshold"] == pytest.approx(thr[np.argmax(j)])
    pred = s >= youden_pt["threshold"]
    assert youden_pt["ppv"] == pytest.approx(y[pred].mean())
    assert youden_pt["npv"] == pytest.approx(1 - y[~pred].mean())
    for p in (spec_pt, sens_pt, youden_pt):
        lo, hi = p["sensitivity_ci"]
        assert lo <= p["sensitivity"] <= hi
    lo, hi = spec_pt["selection_ci"]
    assert lo < spec_pt["sensitivity"] < hi
    lo, hi = res["auc_ci_bootstrap"]
    assert lo < res["auc"] < hi


@pytest.mark.parametrize(("seed", "label"), [([], "unseeded"), (["--seed", "4"], "seed 4")])
def test_metrics_bootstrap_row_says_whether_it_was_seeded(capsys, paired_sites, seed, label):
    """Without --seed the row read '(20 samples, seed None)', as if a value were missing."""
    args = ["metrics", str(paired_sites["east"]), "--label", "y", "--score", "m1"]
    code, out, _ = run_main(capsys, [*args, "--bootstrap", "20", *seed])
    assert code == 0 and f"bootstrap (20 samples, {label})" in out
    assert "None" not in out


def test_evaluate_pooled_operating_points_are_those_of_the_pooled_rows(capsys, paired_sites):
    args = ["evaluate", *_site_args(paired_sites), "--label", "y", "--score", "m1"]
    code, out, _ = run_main(
        capsys,
        [*args, "--method", "pooled", "--max-fpr", "0.1", "--at-specificity", "0.95", "--json"],
    )
    assert code == 0
    res = json.loads(out)
    df = _pooled(paired_sites)
    y, s = df["y"].to_numpy(), df["m1"].to_numpy()
    assert res["partial_auc"] == pytest.approx(skm.roc_auc_score(y, s, max_fpr=0.1), abs=1e-12)
    fpr, tpr, _ = skm.roc_curve(y, s, drop_intermediate=False)
    (pt,) = res["operating_points"]
    assert pt["sensitivity"] == pytest.approx(tpr[1 - fpr >= 0.95].max())
    assert pt["criterion"] == "specificity >= 0.95"


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--method", "rocglm", "--max-fpr", "0.2"], "--method rocglm cannot give --max-fpr"),
        (["--method", "rocglm", "--youden"], "--method rocglm cannot give --youden"),
        (["--method", "pooled", "--max-fpr", "0"], "--max-fpr must lie in (0, 1]"),
        (["--method", "pooled", "--at-specificity", "1.5"], "--at-specificity must lie in"),
        (["--method", "pooled", "--compare-score", "nope"], "second score column 'nope'"),
    ],
)
def test_refusals_are_one_line_naming_the_option(capsys, paired_sites, extra, needle):
    args = ["evaluate", *_site_args(paired_sites), "--label", "y", "--score", "m1", *extra]
    code, out, err = run_main(capsys, args)
    assert code == 2
    assert needle in err and "Traceback" not in err
    code, out, _ = run_main(capsys, [*args, "--json"])
    assert code == 2 and needle in json.loads(out)["error"]


def test_histogram_partial_auc_within_its_bound_and_exact_operating_points(capsys, paired_sites):
    args = ["evaluate", *_site_args(paired_sites), "--label", "y", "--score", "m1"]
    args += ["--method", "histogram", "--quantiles", "64", "--max-fpr", "0.3"]
    code, out, _ = run_main(capsys, [*args, "--at-sensitivity", "0.7", "--youden", "--json"])
    assert code == 0
    res = json.loads(out)
    df = _pooled(paired_sites)
    y, s = df["y"].to_numpy(), df["m1"].to_numpy()
    truth = skm.roc_auc_score(y, s, max_fpr=0.3)
    bound = res["partial_auc_error_bound"]
    assert 0 < bound < 0.05
    assert abs(res["partial_auc"] - truth) <= bound + 1e-12
    sens_pt, youden_pt = res["operating_points"]
    for p in (sens_pt, youden_pt):
        # Exact at the leaf edge it chose: the 2x2 table of the pooled rows.
        pred = s >= p["threshold"]
        assert p["tp"] == np.sum(pred & (y == 1)) and p["fp"] == np.sum(pred & (y == 0))
        assert p["sensitivity_ci"] is not None and "bin edges" in p["approximation"]
    assert sens_pt["sensitivity"] >= 0.7
    # Any cut at a scikit-learn threshold with sensitivity >= 0.7 is at best slightly more
    # specific (the histogram's cuts are restricted to the leaf edges).
    fpr, tpr, _ = skm.roc_curve(y, s, drop_intermediate=False)
    assert sens_pt["specificity"] <= (1 - fpr[tpr >= 0.7]).max() + 1e-12


def test_histogram_partial_auc_bound_is_tight_at_the_rectangles():
    """partial_auc_bounds: for rows inside one bin, the extreme orders reach the bounds."""
    from fedroc.methods.asks import partial_auc_bounds
    from fedroc.metrics import ScoreCounts

    # Bin 0 (low) holds 2 negatives; bin 1 holds 2 positives and 2 negatives.
    counts = ScoreCounts.from_bins([0, 2], [2, 2], edges=[0.0, 0.5, 1.0])
    low, high = partial_auc_bounds(counts, 0.5)
    y = np.array([1, 1, 0, 0, 0, 0])
    worst = np.array([0.6, 0.6, 0.9, 0.9, 0.1, 0.1])  # negatives above the positives in bin 1
    best = np.array([0.9, 0.9, 0.6, 0.6, 0.1, 0.1])
    assert low == pytest.approx(skm.roc_auc_score(y, worst, max_fpr=0.5))
    assert high == pytest.approx(skm.roc_auc_score(y, best, max_fpr=0.5))


def test_mpc_compare_score_is_paired_delong_under_mpc(capsys, paired_sites):
    """--compare-score reaches the mpc method (its paired DeLong under MPC) and agrees with
    the pooled comparison to the opened values' precision."""
    args = ["evaluate", *_site_args(paired_sites), "--label", "y", "--score", "m1"]
    args += ["--compare-score", "m2", "--json"]
    code, out, err = run_main(capsys, [*args, "--method", "mpc"])
    assert code == 0, err
    mpc = json.loads(out)["comparison"]
    code, out, _ = run_main(capsys, [*args, "--method", "pooled"])
    pooled = json.loads(out)["comparison"]
    assert mpc["method"] == "paired DeLong under MPC"
    assert mpc["auc_difference"] == pytest.approx(pooled["auc_difference"], abs=1e-3)
    assert mpc["p_value"] == pytest.approx(pooled["p_value"], abs=1e-2)
    assert mpc["ci"] == pytest.approx(pooled["ci"], abs=2e-3)


def test_histogram_compare_score_is_paired_delong_of_the_binned_rows(capsys, paired_sites):
    """--compare-score with --method histogram: the paired DeLong of the pooled rows with
    both scores rounded to the joint grid (64 bins), and the rows' own difference within
    its binning bound."""
    from fedroc.methods.histogram import leaf_index

    args = ["evaluate", *_site_args(paired_sites), "--label", "y", "--score", "m1"]
    args += ["--method", "histogram", "--quantiles", "64", "--compare-score", "m2"]
    code, out, err = run_main(capsys, [*args, "--json"])
    assert code == 0, err
    cmp = json.loads(out)["comparison"]
    df = _pooled(paired_sites)
    y = df["y"].to_numpy() == 1
    a, b = df["m1"].to_numpy(), df["m2"].to_numpy()
    binned = delong_paired(y, leaf_index(a, 64), leaf_index(b, 64))
    assert cmp["bins"] == 64
    assert cmp["auc_difference"] == pytest.approx(binned.difference, abs=1e-12)
    assert cmp["se"] == pytest.approx(binned.se_difference, abs=1e-12)
    assert cmp["p_value"] == pytest.approx(binned.p_value, rel=1e-9)
    assert cmp["auc_b"] == pytest.approx(binned.auc_b, abs=1e-12)
    rows = delong_paired(y, a, b)
    assert abs(rows.difference - cmp["auc_difference"]) <= cmp["binning_bound"] < 0.05
    code, out, _ = run_main(capsys, args)
    assert code == 0 and "Comparison of two models" in out
    # Under distributed DP the comparison comes from noisy joint counts (the noise in its
    # interval); under local DP it is refused in one line.
    code, out, err = run_main(capsys, [*args, "--dp-epsilon", "1", "--json"])
    assert code == 0, err
    cmp = json.loads(out)["comparison"]
    assert "distributed DP" in cmp["method"] and cmp["bins"] == 16
    args += ["--dp-epsilon", "1", "--dp-mode", "local"]
    code, out, err = run_main(capsys, args)
    assert code == 2 and "under local DP" in err and "Traceback" not in err
