"""Partial AUC and operating points under MPC against scikit-learn and the pooled counts."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from fedroc.exceptions import InputError
from fedroc.metrics import ScoreCounts
from fedroc.mpc.asks import Asks, key_to_float
from fedroc.mpc.auc import AucSpec
from fedroc.mpc.local import secure_auc_local
from fedroc.mpc.ring import float_key_parts
from tests._mpc_data import owners_from

SEED = b"fedroc-mpc-asks-tests"
TOL = 1e-12


def pooled(owners):
    return (
        np.concatenate([np.asarray(o[0]) for o in owners]),
        np.concatenate([np.asarray(o[1], dtype=float) for o in owners]),
    )


def run(owners, asks, **kwargs):
    return secure_auc_local(
        owners,
        master_seed=SEED,
        frac_bits=52,
        min_class_count=1,
        ci=False,
        asks=asks.encode(),
        **kwargs,
    ).outputs


def assert_points(out, y, s, asks):
    counts = ScoreCounts.from_scores(y, s)
    refs = [counts.at_specificity(v / 1e6) for v in asks.at_specificity]
    refs += [counts.at_sensitivity(v / 1e6) for v in asks.at_sensitivity]
    refs += [counts.youden()] if asks.youden else []
    assert len(out.operating_points) == len(refs)
    for got, ref in zip(out.operating_points, refs, strict=True):
        assert got["criterion"] == ref.criterion
        assert got["threshold"] == ref.threshold, (got, ref)
        for name in ("sensitivity", "specificity", "ppv", "npv"):
            want = getattr(ref, name)
            if math.isnan(want):
                assert math.isnan(got[name]), (name, got, ref)
            else:
                assert abs(got[name] - want) <= TOL, (name, got, ref)


@pytest.mark.parametrize(
    ("sizes", "levels"),
    [([40, 25, 31], None), ([30, 30], 3), ([12, 50, 7], 1), ([64], 8)],
)
def test_partial_auc_and_points_equal_the_pooled_ones(sizes, levels, rng):
    owners = owners_from(rng, sizes, levels, shift=0.8)
    y, s = pooled(owners)
    asks = Asks.from_floats(0.2, (0.9, 0.5, 0.0, 1.0), (0.8, 0.0, 1.0), youden=True)
    out = run(owners, asks)
    assert abs(out.partial_auc - roc_auc_score(y, s, max_fpr=0.2)) <= TOL
    assert_points(out, y, s, asks)


@pytest.mark.parametrize("max_fpr", [0.05, 0.1, 0.25, 0.3, 0.5, 0.999, 1.0])
def test_partial_auc_at_many_max_fpr_with_ties_at_the_cut(max_fpr, rng):
    # Ten score levels: the cut at max_fpr falls inside tie groups, where scikit-learn
    # interpolates along the group's diagonal. 80 rows: max_fpr N >= 1 even at 0.05 (a job
    # opens nothing when the partial area spans fewer negatives than its minimum count).
    owners = owners_from(rng, [40, 40], levels=2, shift=0.8)
    y, s = pooled(owners)
    out = run(owners, Asks.from_floats(max_fpr))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = roc_auc_score(y, s, max_fpr=max_fpr)
    assert abs(out.partial_auc - ref) <= TOL, (out.partial_auc, ref)


def test_targets_on_the_boundary_and_a_perfect_model():
    # Ten negatives: specificity 0.9 is met exactly by one false positive.
    y = np.array([0] * 10 + [1] * 10)
    s = np.r_[np.arange(10) / 10, np.arange(10) / 10 + 0.85]
    owners = [(y[::2], s[::2]), (y[1::2], s[1::2])]
    asks = Asks.from_floats(0.1, (0.9, 0.95), (0.9, 0.95), youden=True)
    out = run(owners, asks)
    assert abs(out.partial_auc - roc_auc_score(y, s, max_fpr=0.1)) <= TOL
    assert_points(out, y, s, asks)
    perfect = [(np.array([0, 0, 1, 1]), np.array([0.1, 0.2, 0.8, 0.9]))]
    out = run(perfect, Asks.from_floats(0.5, (1.0,), (1.0,), youden=True))
    assert out.partial_auc == 1.0
    assert_points(out, *pooled(perfect), Asks.from_floats(0.5, (1.0,), (1.0,), youden=True))


def test_nothing_is_opened_below_the_minimum_class_count(rng):
    owners = [(np.array([0, 0, 0, 1]), np.array([0.1, 0.2, 0.3, 0.4]))]
    out = secure_auc_local(
        owners, master_seed=SEED, min_class_count=2, ci=False, asks="pauc:200000 youden"
    ).outputs
    assert not out.released
    assert math.isnan(out.partial_auc)
    assert math.isnan(out.operating_points[0]["threshold"])
    assert math.isnan(out.operating_points[0]["sensitivity"])


def test_nothing_is_opened_when_the_partial_area_spans_fewer_negatives_than_the_minimum(rng):
    # Below 1 / N the partial area is max_fpr t / P: its opened value would give t / P, a
    # fraction whose denominator is the secret P (R23). The job's minimum class count m
    # bounds the negatives up to max_fpr too, compared under MPC with the class counts.
    owners = owners_from(rng, [30, 34], None, shift=0.8)
    y, s = pooled(owners)
    m, n_neg = 3, int((y == 0).sum())
    k = 10**4 * math.ceil(100 * m / n_neg)  # max_fpr N >= m just, on a 1/100 grid
    spans = secure_auc_local(
        owners, master_seed=SEED, min_class_count=m, ci=False, asks=f"pauc:{k}"
    ).outputs
    assert spans.released
    assert abs(spans.partial_auc - roc_auc_score(y, s, max_fpr=k / 10**6)) <= 2**-14
    short = secure_auc_local(
        owners, master_seed=SEED, min_class_count=m, ci=False, asks=f"pauc:{k - 10**4}"
    ).outputs
    # Only the partial AUC is withheld (its own flag); the AUROC still opens (U3).
    assert short.released and math.isnan(short.partial_auc)
    assert abs(short.auc - roc_auc_score(y, s)) <= 2**-14


def test_asks_text_is_canonical_and_bounded():
    asks = Asks.from_floats(0.2, (0.9,), (0.8, 0.95), youden=True)
    assert Asks.parse(asks.encode()) == asks
    for bad in ("youden pauc:1", "pauc:0", "spec:1000001", "pauc:200000  youden", "x:1", "sens:"):
        with pytest.raises(InputError):
            Asks.parse(bad)
    with pytest.raises(InputError, match="six decimals"):
        Asks.from_floats(0.1234567)
    with pytest.raises(InputError, match="--at-specificity"):
        Asks.from_floats(None, (1.5,))
    # 0.2 = 1/5 fits 10^4 rows; 0.123457 (denominator 10^6) does not.
    AucSpec((10_000,), ci=False, asks="pauc:200000")
    with pytest.raises(InputError, match="smaller denominator"):
        AucSpec((10_000,), ci=False, asks="pauc:123457")


def test_key_to_float_inverts_the_score_keys(rng):
    s = np.r_[rng.normal(size=50) * 1e3, 0.0, -0.0, 1e-300, -1e300, 5e-324]
    h, low = float_key_parts(s)
    back = np.array([key_to_float(a, b) for a, b in zip(h, low, strict=True)])
    assert np.array_equal(back, np.where(s == 0, 0.0, s))


def test_cli_mpc_partial_auc_and_points_json_table_and_report(capsys, tmp_path, rng):
    """End to end: the mpc method's asked values agree with the pooled method's to the opened
    precision (2**-14, rounded), thresholds exactly; the table and the report show them."""
    import pandas as pd

    from tests._cli import run_main

    args = ["evaluate", "--label", "y", "--score", "s"]
    # Operating points open rows' exact scores: the sites' policies opt in to them (a TOML
    # of sites; the pooled reference reads the same files as --site).
    toml, site_args = [], []
    for name, n in (("north", 90), ("south", 70)):
        y = rng.random(n) < 0.4
        s = 1 / (1 + np.exp(-(1.2 * y + rng.normal(size=n))))
        path = tmp_path / f"{name}.csv"
        pd.DataFrame({"y": y.astype(int), "s": s.round(2)}).to_csv(path, index=False)
        toml += [f"[sites.{name}]", f'path = "{path}"', f"[sites.{name}.policy]"]
        toml += ['opt_in = ["mpc.operating_points"]']
        site_args += ["--site", f"{name}={path}"]
    (tmp_path / "sites.toml").write_text("\n".join(toml) + "\n")
    mpc_args = [*args, "--sites", str(tmp_path / "sites.toml")]
    asks = ["--max-fpr", "0.2", "--at-specificity", "0.9", "--at-sensitivity", "0.8", "--youden"]
    report = tmp_path / "mpc.html"
    code, out, err = run_main(
        capsys, [*mpc_args, *asks, "--method", "mpc", "--json", "--report", str(report)]
    )
    assert code == 0, err
    mpc = json.loads(out)
    code, out, _ = run_main(capsys, [*args, *site_args, *asks, "--method", "pooled", "--json"])
    pooled = json.loads(out)
    half = 2.0**-15
    assert abs(mpc["partial_auc"] - pooled["partial_auc"]) <= half
    assert len(mpc["operating_points"]) == 3
    for got, want in zip(mpc["operating_points"], pooled["operating_points"], strict=True):
        assert got["criterion"] == want["criterion"]
        assert got["threshold"] == want["threshold"]
        for name in ("sensitivity", "specificity", "ppv", "npv"):
            assert abs(got[name] - want[name]) <= half, name
        assert got["tp"] is None and got["sensitivity_ci"] is None  # counts stay secret
    assert any("operating point" in note for note in mpc["released"]["notes"])
    html = report.read_text(encoding="utf-8")
    assert "Operating points" in html and "Partial AUC" in html
    code, out, _ = run_main(capsys, [*mpc_args, *asks, "--method", "mpc"])
    assert code == 0
    assert "partial AUC (FPR <= " in out and "specificity >= 0.9" in out
    assert "Youden's J (max)" in out


def test_asks_are_part_of_the_signed_terms():
    """An analyst cannot widen what a site agreed to: other asks are other terms, and a site
    that authorised a job id refuses the same id with other asks."""
    from fedroc.mpc.owner import JobTerms, authorise

    keys = (b"\x01" * 32, b"\x02" * 32)
    base = JobTerms.create(["a", "b"], keys, job="job-asks-0001", asks="pauc:200000")
    wider = JobTerms.create(["a", "b"], keys, job="job-asks-0001", asks="pauc:200000 youden")
    assert base.digest() != wider.digest()
    assert JobTerms.from_record(wider.to_record()) == wider
    state: dict = {}
    authorise(state, "a", base)
    with pytest.raises(InputError, match="other terms"):
        authorise(state, "a", wider)


def test_cli_mpc_adds_the_calibration_curve_only_when_asked(capsys, tmp_path, rng):
    """The MPC result keeps the class counts secret: no calibration curve (its counts give
    P and N) unless --mpc-calibration asks for it; the Brier score comes either way."""
    import pandas as pd

    from tests._cli import run_main

    args = ["evaluate", "--label", "y", "--score", "s", "--method", "mpc", "--json"]
    for name in ("north", "south", "east"):
        y = rng.random(60) < 0.4
        path = tmp_path / f"{name}.csv"
        pd.DataFrame({"y": y.astype(int), "s": rng.random(60)}).to_csv(path, index=False)
        args += ["--site", f"{name}={path}"]
    code, out, err = run_main(capsys, args)
    assert code == 0, err
    plain = json.loads(out)
    assert plain["calibration"] is None and plain["brier"] is not None
    code, out, err = run_main(capsys, [*args, "--mpc-calibration"])
    assert code == 0, err
    asked = json.loads(out)
    assert 0 < sum(asked["calibration"]["count"]) <= 180  # less a site's bins under q rows
    assert asked["brier"] == pytest.approx(plain["brier"])
    assert any("so the analyst knows them" in note for note in asked["released"]["notes"])
