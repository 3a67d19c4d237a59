"""The small, seeded version of scripts/histogram_dp_bias.py (its table:
scripts/results/histogram_dp_bias.md, issue 13).

The study had no test. It replays the distributed-DP histogram's analyst steps on noise
it draws itself and splits the error into parts; it asserts inside that the method's own
estimate and interval are the ones it recomputes, so a change of the method shows here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _scripts import load_script
from sklearn.metrics import roc_auc_score


def test_a_released_run_splits_its_error_into_parts():
    study = load_script("histogram_dp_bias.py", "fedroc_histogram_dp_bias_script")
    design = study.DESIGNS["binormal"]
    rng = np.random.default_rng(13)
    rows = [study.replicate(design, 5000, 1.0, 256, rng) for _ in range(2)]
    for row in rows:
        assert row["released"] and row["decided"]
        assert 0.6 < row["sample"] < 0.9  # the design's AUC is 0.75
        # The exact counts' binned AUC is near the sample's; the noise moves it by
        # less than a few of its standard errors.
        assert abs(row["binned"] - row["sample"]) < 0.02
        assert abs(row["estimate"] - row["binned"]) < 4 * row["se"]
        assert row["fieller_lo"] <= row["estimate"] <= row["fieller_hi"]
        assert math.isfinite(row["first_order"])


def test_the_sample_auc_is_sklearns():
    study = load_script("histogram_dp_bias.py", "fedroc_histogram_dp_bias_script")
    design = study.DESIGNS["rare"]
    frames = design.simulate(1500, np.random.default_rng(4))
    row = study.replicate(design, 1500, 1.0, 256, np.random.default_rng(4))
    y = np.concatenate([f["label"].to_numpy() for f in frames.values()])
    s = np.concatenate([f["score"].to_numpy() for f in frames.values()])
    assert row["sample"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert row["n_pos"] == y.sum()
