"""The small, seeded version of scripts/histogram_experiment.py (paper 5's area errors).

The study had no test, and it stopped running when sites began to answer exact histograms
one way for their lifetime: it reused one federation for its secure, distributed-DP and
local-DP runs, and the local-DP tree was refused at every site.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from _scripts import load_script

from fedroc.data import SiteData


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    score = 1 / (1 + np.exp(-(rng.normal(size=n) + 1.2 * y)))
    return pd.DataFrame({"label": y.astype(int), "score": score})


def test_every_setting_of_the_sweep_runs_and_its_area_errors_are_small(monkeypatch):
    study = load_script("histogram_experiment.py", "fedroc_histogram_experiment_script")
    monkeypatch.setattr(study, "QS", [16])
    frame = _frame(3000, 7)
    pooled = SiteData.from_arrays(frame["label"], frame["score"])
    runs = study.sweep(frame, pooled, reps=1)
    assert len(runs) == 10  # every setting ran, none was refused
    assert runs["setting"].is_unique
    errors = runs.set_index("setting")
    assert np.isfinite(errors[["roc_ae", "pr_ae"]].to_numpy()).all()
    # Secure aggregation at Q = 16 traces the curve of 16 quantiles: a small area error.
    assert errors.loc["SA (fedroc default: 8Q)", "roc_ae"] < 0.02
    # The exact quantiles' baseline and the secure tree's default agree in order of size.
    assert errors.loc["EQ (exact quantiles)", "roc_ae"] < 0.02


def test_the_coverage_table_counts_withheld_intervals_apart_from_misses():
    study = load_script("histogram_experiment.py", "fedroc_histogram_experiment_script")
    lines = study.coverage(2)
    rows = [line for line in lines if line.startswith("| SA") or line.startswith("| DDP")]
    assert len(rows) == 3
    for row in rows:
        given = row.split("|")[2].strip()
        assert given.endswith("of 2"), row
    # Secure aggregation always gives its interval.
    assert rows[0].split("|")[2].strip() == "2 of 2"
