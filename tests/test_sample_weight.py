"""--sample-weight on the command line: the pooled method against scikit-learn; every other
method refuses it in one line naming the option and the method."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn import metrics as skm

from tests._cli import run_main


@pytest.fixture(scope="module")
def weighted_sites(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("weighted")
    rng = np.random.default_rng(21)
    paths = {}
    for name, n in (("north", 120), ("south", 90)):
        y = rng.random(n) < 0.4
        s = 1 / (1 + np.exp(-(1.1 * y + rng.normal(size=n))))
        w = rng.uniform(0.2, 3.0, n)
        w[rng.random(n) < 0.05] = 0.0  # scikit-learn accepts zero weights
        df = pd.DataFrame({"y": y.astype(int), "s": s.round(2), "t": s.round(1), "w": w})
        df["wy"] = df["y"]  # weights equal to the labels, in a column of their own
        paths[name] = tmp / f"{name}.csv"
        df.to_csv(paths[name], index=False)
    return paths


def _args(paths: dict[str, Path]) -> list[str]:
    args = ["evaluate", "--label", "y", "--score", "s", "--sample-weight", "w"]
    return args + [a for name, p in paths.items() for a in ("--site", f"{name}={p}")]


def test_pooled_weighted_metrics_match_scikit_learn(capsys, weighted_sites):
    asks = ["--max-fpr", "0.25", "--at-specificity", "0.8", "--youden"]
    args = [*_args(weighted_sites), "--method", "pooled", *asks, "--json"]
    code, out, err = run_main(capsys, args)
    assert code == 0, err
    res = json.loads(out)
    df = pd.concat([pd.read_csv(p) for p in weighted_sites.values()], ignore_index=True)
    y, s, w = df["y"].to_numpy(), df["s"].to_numpy(), df["w"].to_numpy()
    assert res["auc"] == pytest.approx(skm.roc_auc_score(y, s, sample_weight=w), abs=1e-12)
    assert res["auc"] != pytest.approx(skm.roc_auc_score(y, s), abs=1e-6)  # weights matter
    assert res["partial_auc"] == pytest.approx(
        skm.roc_auc_score(y, s, sample_weight=w, max_fpr=0.25), abs=1e-12
    )
    assert res["average_precision"] == pytest.approx(
        skm.average_precision_score(y, s, sample_weight=w), abs=1e-12
    )
    assert res["brier"] == pytest.approx(skm.brier_score_loss(y, s, sample_weight=w), abs=1e-12)
    assert res["auc_ci"] is None and res["calibration"] is None and res["caveats"]
    # The point at specificity >= 0.8: the weighted cut of scikit-learn's weighted curve.
    fpr, tpr, thr = skm.roc_curve(y, s, sample_weight=w, drop_intermediate=False)
    spec_pt, youden_pt = res["operating_points"]
    ok = 1 - fpr >= 0.8
    assert spec_pt["sensitivity"] == pytest.approx(tpr[ok].max(), abs=1e-12)
    assert youden_pt["threshold"] == pytest.approx(thr[np.argmax(tpr - fpr)])
    assert spec_pt["sensitivity_ci"] is None and spec_pt["selection_ci"] is None
    code, out, _ = run_main(capsys, [*_args(weighted_sites), "--method", "pooled"])
    assert code == 0 and "weighted" in out


@pytest.mark.parametrize("method", ["histogram", "mpc", "rocglm"])
def test_methods_without_weights_refuse_in_one_line(capsys, weighted_sites, method):
    args = [*_args(weighted_sites), "--method", method]
    code, _, err = run_main(capsys, args)
    assert code == 2 and "Traceback" not in err
    assert f"--sample-weight does not apply to --method {method}" in err
    code, out, _ = run_main(capsys, [*args, "--json"])
    assert code == 2
    assert f"--sample-weight does not apply to --method {method}" in json.loads(out)["error"]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--compare-score", "t"], "--compare-score does not take --sample-weight"),
        (["--sample-weight", "nope"], "weight column 'nope' not found"),
        # Weights equal to the label: the negatives weigh nothing.
        (["--sample-weight", "wy"], "both classes need a positive total weight"),
        # the label column itself as the weights: one column in two roles
        (["--sample-weight", "y"], "the label and weight columns of site 'north'"),
    ],
)
def test_weight_errors_name_the_option_or_column(capsys, weighted_sites, extra, needle):
    code, _, err = run_main(capsys, [*_args(weighted_sites), "--method", "pooled", *extra])
    assert code == 2 and needle in err and "Traceback" not in err


def test_negative_weights_are_refused_naming_the_site(capsys, tmp_path):
    path = tmp_path / "bad.csv"
    pd.DataFrame({"y": [0, 1, 0, 1], "s": [0.1, 0.9, 0.2, 0.8], "w": [1, -1, 1, 1]}).to_csv(
        path, index=False
    )
    args = ["evaluate", "--label", "y", "--score", "s", "--sample-weight", "w"]
    code, _, err = run_main(capsys, [*args, "--site", f"bad={path}", "--method", "pooled"])
    assert code == 2 and "non-negative" in err and "'bad'" in err and "Traceback" not in err


def test_pooled_bootstrap_ci_is_the_seeded_stratified_bootstrap(capsys, weighted_sites):
    """evaluate --method pooled --bootstrap N --seed S: the pooled rows' stratified bootstrap
    (the function checked against pROC in test_proc_reference), the same draws for one seed."""
    from fedroc.metrics import ScoreCounts

    args = [a for a in _args(weighted_sites) if a not in ("--sample-weight", "w")]
    args += ["--method", "pooled", "--bootstrap", "400", "--seed", "7", "--json"]
    code, out, err = run_main(capsys, args)
    assert code == 0, err
    res = json.loads(out)
    df = pd.concat([pd.read_csv(p) for p in weighted_sites.values()], ignore_index=True)
    counts = ScoreCounts.from_scores(df["y"].to_numpy(), df["s"].to_numpy())
    ref = counts.bootstrap_auc(400, seed=7).confidence_interval()
    assert res["auc_ci_bootstrap"] == pytest.approx(list(ref), abs=1e-15)
    assert res["bootstrap"] == {"samples": 400, "seed": 7}
    lo, hi = res["auc_ci_bootstrap"]
    assert lo < res["auc"] < hi
    for extra, needle in (
        (["--method", "mpc"], "--bootstrap do not apply to --method mpc"),
        (["--method", "pooled", "--sample-weight", "w"], "--bootstrap does not take"),
    ):
        code, _, err = run_main(capsys, [*args[:-1], *extra])
        assert code == 2 and needle in err, err
