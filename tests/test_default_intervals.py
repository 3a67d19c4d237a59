"""Default intervals of ``evaluate``: withheld with a reason where undefined, and the small
seeded version of scripts/coverage_audit.py."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from fedroc.data import Columns, SiteData
from fedroc.exceptions import InputError
from fedroc.federation import Federation
from fedroc.federation.federation import Released
from fedroc.methods import EvaluationResult, _small_class_caveat, evaluate, pool_site_data
from fedroc.metrics import delong, logit_ci
from fedroc.metrics._delong import SMALL_CLASS
from tests._cli import run_main
from tests._scripts import load_script


def _separated_frames() -> dict[str, pd.DataFrame]:
    """Three sites whose positives all score above their negatives: the AUC is 1."""
    rng = np.random.default_rng(5)
    frames = {}
    for k in range(3):
        neg, pos = rng.uniform(0.0, 0.5, 20), rng.uniform(0.6, 1.0, 6)
        frames[f"site{k}"] = pd.DataFrame(
            {"label": np.r_[np.zeros(20, int), np.ones(6, int)], "score": np.r_[neg, pos]}
        )
    return frames


@pytest.mark.parametrize("method", ["pooled", "histogram", "mpc"])
def test_an_undefined_interval_is_withheld_with_its_reason(method):
    # At AUC 1 DeLong's variance is 0 and the logit interval undefined: it used to come
    # back as (nan, nan), [null, null] in JSON, with no word of why.
    frames = _separated_frames()
    pooled = pool_site_data({k: SiteData.from_frame(v, Columns()) for k, v in frames.items()})
    res = evaluate(
        Federation.from_frames(frames), method, pooled=pooled if method == "pooled" else None
    )
    assert res.auc == 1.0
    assert res.auc_ci is None and res.to_dict()["auc_ci"] is None
    [why] = [c for c in res.extra["caveats"] if c.startswith("no interval")]
    assert "the AUC is 1" in why and "undefined" in why
    # The MPC job's AUC is opened rounded: its 1 may be a few pairs short of separation.
    assert ("as opened, rounded to 2^-" in why) == (method == "mpc")


def test_an_interval_that_exists_is_kept():
    frames = _separated_frames()
    frames["site0"].loc[0, "score"] = 0.99  # one negative above the positives: AUC < 1
    res = evaluate(Federation.from_frames(frames), "histogram")
    assert 0.9 < res.auc < 1.0
    assert res.auc_ci is not None and all(math.isfinite(v) for v in res.auc_ci)
    assert not any(c.startswith("no interval") for c in res.extra.get("caveats") or [])


def _rare_frames(prevalence: float, shift: float) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(7)
    frames = {}
    for k in range(3):
        y = rng.random(300) < prevalence
        s = 1 / (1 + np.exp(-(rng.normal(size=300) + shift * y - 1)))
        frames[f"s{k}"] = pd.DataFrame({"label": y.astype(int), "score": s})
    return frames


@pytest.mark.parametrize("method", ["pooled", "histogram"])
def test_a_small_class_gets_the_small_sample_interval_without_a_caveat(method):
    # The audit measured the logit interval at 0.81-0.91 with 5 to 50 rows of the smaller
    # class at a high AUC (scripts/results/coverage_audit_pooled.md); these methods now give
    # fedroc's default (small_sample_ci), which covers there
    # (scripts/results/delong_small_sample.md): wider than the logit interval below 100
    # rows of a class, the logit interval itself from 100 on, and no caveat either way.
    for prevalence, shift, small in ((0.03, 2.5, True), (0.3, 2.5, False)):
        frames = _rare_frames(prevalence, shift)
        pooled = pool_site_data({k: SiteData.from_frame(v, Columns()) for k, v in frames.items()})
        res = evaluate(
            Federation.from_frames(frames), method, pooled=pooled if method == "pooled" else None
        )
        assert (min(res.extra["n_pos"], res.extra["n_neg"]) < SMALL_CLASS) == small
        assert not [c for c in res.extra.get("caveats") or [] if "may be too narrow" in c]
        logit = logit_ci(res.auc, res.extra["auc_se"])
        # The histogram's leaves (1024 under secure aggregation) give the pooled interval.
        pooled_ci = delong(pooled.label, pooled.score).ci
        assert res.auc_ci == pytest.approx(pooled_ci, abs=1e-3 if method == "histogram" else 1e-15)
        if small:
            assert res.auc_ci[0] < logit[0] - 0.01 and res.auc_ci[1] >= logit[1]
        else:
            assert res.auc_ci == pytest.approx(logit, abs=1e-12)
    with pytest.raises(InputError, match="pooled must be a SiteData"):
        evaluate(Federation.from_frames(frames), "pooled", pooled=pd.concat(frames.values()))


def test_the_mpc_logit_interval_of_a_small_class_is_said_to_be_too_narrow():
    # The MPC method keeps the logit interval (the default needs the class counts and the
    # tie pattern, which the MPC job keeps secret), so it keeps the caveat where the audit
    # measured it low. Its class counts are secret (n_pos, n_neg null): the caveat went by
    # them and so was never said for a real MPC result. It now goes by what the job opened,
    # each class at least min_class_count rows: said wherever the smaller class may lie in
    # the audit's region (at most 50 rows at a high AUC, fewer than 10 otherwise).
    def mpc_result(auc: float, at_least: int) -> EvaluationResult:
        return EvaluationResult(
            method="mpc",
            sites=[],
            auc=auc,
            auc_ci=(auc - 0.05, min(1.0, auc + 0.05)),
            released=Released.pooled(1000),
            extra={"n_pos": None, "n_neg": None, "mpc": {"min_class_count": at_least}},
        )

    cases = [
        (0.95, 5, "50 rows or fewer"),
        (0.95, 50, "50 rows or fewer"),
        (0.95, 51, None),
        (0.6, 5, "9 rows or fewer"),
        (0.6, 10, None),
        (0.15, 20, "50 rows or fewer"),
    ]
    for auc, at_least, warned in cases:
        res = _small_class_caveat(mpc_result(auc, at_least))
        said = [c for c in res.extra.get("caveats") or [] if "may be too narrow" in c]
        assert bool(said) == bool(warned), (auc, at_least, said)
        if warned:
            assert f"if the smaller class has {warned}" in said[0]
            assert f"it opened that each has at least {at_least}" in said[0]
    pooled = replace(mpc_result(0.95, 5), method="pooled")
    assert "caveats" not in _small_class_caveat(pooled).extra


def test_a_real_mpc_run_on_a_rare_class_says_its_interval_may_be_too_narrow():
    # 3 sites, about 5% positives, AUC near 0.9: the pooled method gives the small-sample
    # interval (wider than the logit one); the MPC job gives the logit interval, and now
    # says that it may be too narrow (before: nothing, as its class counts are null).
    frames = _rare_frames(0.05, 2.5)
    fed = Federation.from_frames(frames)
    res = evaluate(fed, "mpc")
    assert res.extra["n_pos"] is None and res.auc >= 0.8
    said = [c for c in res.extra.get("caveats") or [] if "may be too narrow" in c]
    assert len(said) == 1 and "if the smaller class has 50 rows or fewer" in said[0]
    pooled = pool_site_data({k: SiteData.from_frame(v, Columns()) for k, v in frames.items()})
    assert min(pooled.n_pos, pooled.n_neg) <= 50  # the caveat's condition holds here
    assert res.auc_ci == pytest.approx(logit_ci(res.auc, res.extra["auc_se"]), abs=1e-6)


def test_the_command_line_prints_null_and_the_reason(capsys, tmp_path):
    args = ["evaluate", "--label", "label", "--score", "score", "--method", "histogram"]
    for name, frame in _separated_frames().items():
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
        args += ["--site", f"{name}={tmp_path / f'{name}.csv'}"]
    code, out, _ = run_main(capsys, [*args, "--json"])
    assert code == 0
    res = json.loads(out)
    assert res["auc"] == 1.0 and res["auc_ci"] is None
    assert any("the AUC is 1" in c for c in res["caveats"])


@pytest.fixture(scope="module")
def audit():
    return load_script("coverage_audit.py", "fedroc_coverage_audit_script")


def test_audit_pooled_cell_covers_an_easy_design_and_counts_withheld_runs(audit):
    easy = audit.GRID["p50-a80"]
    cell = audit._pooled_cell(easy, 300, audit.DEFAULTS["pooled"], 60, 1, "pooled", easy.auc)
    row = cell.row()
    # 60 replicates: a true coverage of 0.95 falls below 0.85 with probability < 1%.
    assert row["runs"] == 60 and row["failed"] == 0 and row["no_ci"] == 0
    assert row["coverage"] >= 0.85 and abs(row["bias"]) < 0.02
    # Five positives at AUC 0.95: some runs separate the classes and have no interval;
    # they are counted, with the reason, not hidden in the coverage.
    rare = audit.GRID["p05-a95"]
    cell = audit._pooled_cell(rare, 100, audit.DEFAULTS["pooled"], 60, 2, "pooled", rare.auc)
    row = cell.row()
    assert row["runs"] == 60 and row["failed"] == 0 and row["no_ci"] > 0
    assert any("AUC is 1" in k or "fewer than 2 rows" in k for k in cell.withheld), cell.withheld


def test_paired_delong_undercovers_with_15_positives_and_mover_covers():
    """The small seeded version of scripts/paired_small_sample.py (its table:
    scripts/results/paired_small_sample.md, 2000 replicates a cell). AUCs 0.95 and 0.90
    (correlation 0.6), 300 rows at prevalence 5% (about 15 positives), 250 replicates:
    paired DeLong's Wald interval of the difference (the default of compare=True before
    2026-12-07, ci_wald now) covers about 0.90, its misses with the truth above it; MOVER
    from the default single-AUC intervals (the default now) about 0.98. Seeded, the counts
    are fixed (MC SE about 0.02)."""
    from tests._scripts import load_script

    module = load_script("paired_small_sample.py", "fedroc_paired_small_sample_script")
    row = module.cell((0.95, 0.9, 0.6, 0.05), 300, 250, seed=7)
    assert row["wald"] < 0.935
    assert row["wald_above"] > 2 * row["wald_below"]
    assert row["mover-default"] > 0.95
    assert row["mover-default"] - row["wald"] >= 0.04


def test_a_point_interval_away_from_one_half_is_not_said_to_come_from_ties():
    """DeLong's variance is 0 strictly between AUC 0 and 1 only when every score ties, and
    then the AUC is 0.5. A point interval elsewhere comes from a variance rounded to 0 (the
    MPC job opens it to 2^-28); interval_caveat said 'every score ties ... the AUC is 0.5
    from ties alone' of an AUC of 0.9995 too."""
    from fedroc.methods import interval_caveat

    tied = interval_caveat(0.5, (0.5, 0.5))
    assert tied is not None and "every score ties" in tied
    rounded = interval_caveat(0.9995, (0.9995, 0.9995))
    assert rounded is not None and "ties" not in rounded
    assert "the point 0.9995" in rounded and "variance" in rounded
    assert interval_caveat(0.8, (0.7, 0.9)) is None
    # An MPC job opens the AUC rounded to 2^-bits: 0.99997 opens as 1, and the caveat said
    # every positive ranks above every negative (review of 12-07).
    nan = float("nan")
    plain = interval_caveat(1.0, (nan, nan))
    opened = interval_caveat(1.0, (nan, nan), precision_bits=14)
    assert plain is not None and "(every positive ranks above every negative)" in plain
    assert opened is not None and "as opened, rounded to 2^-14: every positive ranks" in opened
    assert "or all but a fraction of the pairs below that" in opened


def test_an_mpc_result_with_its_calibration_curve_goes_by_the_counts_the_curve_gives():
    """With --mpc-calibration the curve's counts give P and N (its help says so): the
    caveat said 'if the smaller class has 9 rows or fewer (the job keeps the class counts
    secret ...)' of 90 positives and 90 negatives the analyst could read off the curve."""
    from fedroc.metrics import CalibrationCurve

    def mpc_result(auc: float, count: list[int], positives: list[int]) -> EvaluationResult:
        k = np.asarray(count)
        frac = np.where(k > 0, np.asarray(positives) / np.maximum(k, 1), np.nan)
        curve = CalibrationCurve(
            edges=np.linspace(0, 1, k.size + 1), count=k, mean_predicted=np.full(k.size, 0.5),
            observed_fraction=frac, suppressed=np.zeros(k.size, dtype=bool),
        )  # fmt: skip
        return EvaluationResult(
            method="mpc", sites=[], auc=auc, auc_ci=(auc - 0.05, min(1.0, auc + 0.05)),
            released=Released.pooled(1000),
            extra={"n_pos": None, "n_neg": None, "mpc": {"min_class_count": 5},
                   "calibration": curve},
        )  # fmt: skip

    big = _small_class_caveat(mpc_result(0.7, [60, 60, 60], [10, 30, 50]))
    assert not [c for c in big.extra.get("caveats") or [] if "may be too narrow" in c]
    small = _small_class_caveat(mpc_result(0.7, [60, 60, 60], [1, 2, 3]))
    (said,) = [c for c in small.extra.get("caveats") or [] if "may be too narrow" in c]
    assert "with 6 rows in the smaller class" in said
    # A bin whose fraction is withheld leaves the counts unknown: the secret-count caveat.
    gap = mpc_result(0.7, [60, 60, 60], [10, 30, 50])
    cal = gap.extra["calibration"]
    frac = cal.observed_fraction.copy()
    frac[0] = np.nan
    gap = gap.with_extra(calibration=replace(cal, observed_fraction=frac))
    (said,) = [c for c in _small_class_caveat(gap).extra["caveats"] if "may be too narrow" in c]
    assert "keeps the class counts secret" in said


def test_the_score_interval_at_auc_1_holds_a_high_auc_and_can_miss_a_low_one():
    # The small seeded version of scripts/separated_score_ci.py: where the default interval
    # is withheld (sample AUC 1), the score interval holds a design AUC of 0.99 in every
    # such run, and misses 0.6 where an AUC of 1 is a rare fluke (3 against 12).
    study = load_script("separated_score_ci.py", "separated_score_ci")
    rng = np.random.default_rng(20261207)
    hits, held, low = study.cell(0.99, 10, 40, False, 300, rng)
    assert hits > 50 and held == hits and 0.8 < low < 0.99
    hits, held, low = study.cell(0.6, 3, 12, False, 3000, rng)
    assert hits > 0 and held == 0 and low > 0.6
