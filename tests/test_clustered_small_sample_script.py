"""scripts/clustered_small_sample.py at fewer replicates than it compares with cluster_ci.

The study compared its vectorized intervals with the product's ``cluster_ci`` on the first
20 replicates of a cell, whatever ``--reps`` was: below 20 it died in an IndexError. The
coverage itself is tested in tests/test_clustered.py.
"""

from __future__ import annotations

from _scripts import load_script


def test_a_cell_of_fewer_replicates_than_the_checked_ones():
    study = load_script("clustered_small_sample.py", "fedroc_clustered_small_sample_script")
    reps = study.CHECKED // 4
    row = study.pooled_cell(0.85, 0.9, 10, reps, seed=7)  # checks its intervals = cluster_ci
    assert row["reps"] == reps
    for name in ("pop_t", "pop_logit", "pers_logit", "obu_t"):
        assert row[name] * reps == round(row[name] * reps)  # a share of the 5 replicates
        assert 0.0 <= row[name] <= 1.0
