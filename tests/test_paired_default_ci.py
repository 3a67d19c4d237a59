"""The default interval of the paired AUC comparison: Wald from 100 rows of each class on,
MOVER from the two default single-AUC intervals below (the small seeded version of
scripts/paired_small_sample.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

from fedroc.exceptions import InputError
from fedroc.federation import Federation
from fedroc.methods import evaluate
from fedroc.methods.histogram import leaf_index
from fedroc.metrics import delong_paired, logit_ci, mover_ci, small_sample_ci
from fedroc.metrics._delong import SMALL_CLASS
from tests._cli import run_main


def _design(n_pos: int, n_neg: int, rng: np.random.Generator, auc_a=0.95, auc_b=0.9, rho=0.6):
    """The audit's continuous paired design: scores Phi(mu y + Z), corr(Z_a, Z_b) = rho."""
    y = np.r_[np.ones(n_pos, bool), np.zeros(n_neg, bool)]
    z = rng.multivariate_normal([0.0, 0.0], [[1.0, rho], [rho, 1.0]], size=y.size)
    mu_a, mu_b = (math.sqrt(2) * stats.norm.ppf(v) for v in (auc_a, auc_b))
    return y, special.ndtr(mu_a * y + z[:, 0]), special.ndtr(mu_b * y + z[:, 1])


def _wald(res, level=0.95):
    """The Wald interval as fedroc computed it before the default changed."""
    z = float(stats.norm.ppf(0.5 + level / 2))
    d, se = res.difference, res.se_difference
    return (d - z * se, d + z * se)


def test_default_covers_better_than_wald_with_15_positives():
    # scripts/paired_small_sample.py measured 0.897 (Wald) and 0.978 (MOVER default) at
    # 2000 replicates; 400 seeded ones here (about 3 s).
    rng = np.random.default_rng(20261207)
    truth = 0.05
    hit_wald = hit_default = above_wald = 0
    reps = 400
    for _ in range(reps):
        res = delong_paired(*_design(15, 285, rng))
        lo, hi = res.confidence_interval(method="wald")
        hit_wald += lo <= truth <= hi
        above_wald += truth > hi
        lo, hi = res.ci
        hit_default += lo <= truth <= hi
    assert hit_default / reps >= 0.94
    assert hit_wald / reps <= 0.93  # the miss the default was changed for
    assert hit_default - hit_wald >= 0.04 * reps
    assert above_wald >= 0.8 * (reps - hit_wald)  # Wald misses on one side: truth above


@pytest.mark.parametrize(("n_pos", "n_neg"), [(SMALL_CLASS, 400), (150, SMALL_CLASS), (300, 700)])
def test_default_is_the_wald_interval_bit_for_bit_from_100_rows_of_each_class(n_pos, n_neg):
    rng = np.random.default_rng(n_pos + n_neg)
    res = delong_paired(*_design(n_pos, n_neg, rng))
    assert res.ci == _wald(res)  # exact equality: the same floating-point expression
    assert res.confidence_interval() == res.confidence_interval(method="wald") == _wald(res)
    assert res.confidence_interval(0.9) == _wald(res, 0.9)
    assert res.confidence_interval(method="mover") != res.ci  # the other one exists


def test_below_100_rows_of_a_class_the_default_is_mover_of_the_default_intervals():
    rng = np.random.default_rng(7)
    y, a, b = _design(SMALL_CLASS - 1, 900, rng, auc_a=0.85, auc_b=0.8)
    b = np.round(b, 2)  # ties in one score: its single-AUC interval knows them
    res = delong_paired(y, a, b)
    c = res.covariance
    se_a, se_b = math.sqrt(c[0, 0]), math.sqrt(c[1, 1])
    r = c[0, 1] / (se_a * se_b)
    from fedroc.metrics import delong

    one_a, one_b = delong(y, a), delong(y, b)
    assert one_a.ci == small_sample_ci(res.auc_a, se_a, res.n_pos, res.n_neg, ties=one_a.ties)
    # Each score's own default interval, its tie pattern included, enters the MOVER.
    expected = mover_ci(res.auc_a, res.auc_b, one_a.ci, one_b.ci, r)
    assert res.ci == pytest.approx(expected, abs=1e-12)
    assert res.ci == res.confidence_interval(method="mover")
    assert res.ci != _wald(res)
    # The test is the Wald one at every size.
    assert res.p_value == pytest.approx(2 * stats.norm.sf(abs(res.difference / res.se_difference)))


def test_mover_with_wald_intervals_is_the_wald_interval_of_the_difference():
    # Independent identity: from symmetric intervals a +- z se_a, b +- z se_b, MOVER's
    # half-widths are z sqrt(var_a + var_b - 2 cov), the Wald interval of a - b.
    a, b, se_a, se_b, r, z = 0.83, 0.78, 0.031, 0.027, 0.55, 1.959963984540054
    lo, hi = mover_ci(a, b, (a - z * se_a, a + z * se_a), (b - z * se_b, b + z * se_b), r)
    half = z * math.sqrt(se_a**2 + se_b**2 - 2 * r * se_a * se_b)
    assert lo == pytest.approx(a - b - half, abs=1e-14)
    assert hi == pytest.approx(a - b + half, abs=1e-14)
    # Skewed intervals: the lower bound takes a's lower arm and b's upper arm, the upper
    # bound a's upper arm and b's lower arm.
    lo, hi = mover_ci(0.9, 0.8, (0.7, 0.95), (0.75, 0.82), 0.0)
    assert lo == pytest.approx(0.1 - math.hypot(0.2, 0.02), abs=1e-14)
    assert hi == pytest.approx(0.1 + math.hypot(0.05, 0.05), abs=1e-14)
    assert all(math.isnan(v) for v in mover_ci(1.0, 0.9, logit_ci(1.0, 0.0), (0.8, 0.95), 0.5))


def test_an_undefined_single_interval_falls_back_to_wald_and_bad_method_is_refused():
    rng = np.random.default_rng(3)
    y, a, b = _design(12, 100, rng)
    a = np.where(y, 2.0, a)  # a separates the classes: AUC 1, its logit interval undefined
    res = delong_paired(y, a, b)
    assert res.auc_a == 1.0
    assert all(math.isnan(v) for v in res.confidence_interval(method="mover"))
    assert res.ci == _wald(res)
    with pytest.raises(InputError, match="method must be"):
        res.confidence_interval(method="t")  # type: ignore[arg-type]


def test_cli_comparison_gives_the_default_and_the_wald_interval(capsys, tmp_path):
    rng = np.random.default_rng(11)
    y, a, b = _design(15, 285, rng)
    path = tmp_path / "d.csv"
    pd.DataFrame({"label": y.astype(int), "s": a, "t": b}).to_csv(path, index=False)
    args = ["metrics", str(path), "--label", "label", "--score", "s", "--compare-score", "t"]
    code, out, _ = run_main(capsys, [*args, "--json"])
    assert code == 0
    cmp = json.loads(out)["comparison"]
    ref = delong_paired(y, a, b)
    assert cmp["ci"] == pytest.approx(list(ref.ci), abs=1e-12)
    assert cmp["ci_wald"] == pytest.approx(list(_wald(ref)), abs=1e-12)
    assert cmp["ci"][1] - cmp["ci"][0] > cmp["ci_wald"][1] - cmp["ci_wald"][0]
    # B's AUC has the interval A's has: fedroc's default, the score interval joined in with
    # 15 positives (it was the logit interval alone).
    from fedroc.metrics import delong

    alone = json.loads(run_main(capsys, [*args[:4], "--score", "t", "--json"])[1])
    assert cmp["auc_b_ci"] == pytest.approx(alone["auc_ci"], abs=1e-12)
    assert cmp["auc_b_ci"] == pytest.approx(list(delong(y, b).ci), abs=1e-12)
    assert cmp["auc_b_ci"] != pytest.approx(alone["auc_ci_logit"], abs=1e-6)


def test_histogram_comparison_under_secure_aggregation_uses_each_scores_bin_ties():
    # Bin-discrete scores: the joint counts' margins are each score's tie pattern, so the
    # default interval equals the pooled rows' (whose ties come from their ScoreCounts).
    rng = np.random.default_rng(5)
    y = rng.random(800) < 0.1
    z = rng.normal(size=y.size)
    a = (leaf_index(special.expit(1.6 * y + z), 16) + 0.5) / 16
    b = (
        leaf_index(special.expit(1.0 * y + 0.6 * z + 0.8 * rng.normal(size=y.size)), 16) + 0.5
    ) / 16
    parts = np.array_split(np.arange(y.size), 4)
    frames = {
        f"site{k}": pd.DataFrame({"label": y[i].astype(int), "score": a[i], "score_b": b[i]})
        for k, i in enumerate(parts)
    }
    fed = Federation.from_frames(frames, score_b="score_b")
    res = evaluate(
        fed, "histogram", quantiles=16, compare=True, compare_bins=16, calibration_bins=None
    )
    cmp = res.extra["comparison"]
    ref = delong_paired(y, a, b)
    assert ref.n_pos < SMALL_CLASS
    assert cmp["ci"] == pytest.approx(list(ref.ci), abs=1e-10)
    assert cmp["ci_wald"] == pytest.approx(list(_wald(ref)), abs=1e-12)
    assert cmp["ci"] != pytest.approx(cmp["ci_wald"], abs=1e-6)
