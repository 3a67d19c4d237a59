"""The small, seeded version of scripts/clustered_grid_rounding.py (its table:
scripts/results/clustered_grid_rounding.md, C1).

The study had no test. It swaps the sites' cell scores for the exact scores to show the
rule before C1; if the product stopped calling ``_site._cell_scores``, the swap would do
nothing and the study would report that nothing moved.
"""

from __future__ import annotations

from _scripts import load_script


def test_the_grid_run_matches_its_reference_and_the_old_rule_its_own(monkeypatch):
    study = load_script("clustered_grid_rounding.py", "fedroc_clustered_grid_rounding_script")
    monkeypatch.setattr(study, "SETTINGS", [(900, None)])
    (row,) = study.measure(reps=1, seed=20261207)
    # Now: clustered_auc on the cell indices floor(4096 s), up to fixed-point noise.
    assert row["check_max"] < 1e-9
    # Before (phi_i on the exact scores): clustered_auc on the exact scores.
    assert row["before_max"] < 1e-9
    # Continuous scores at 900 clusters move between the two rules (185 of 200 runs in
    # the table): the swap reached the sites.
    assert row["moved"] == "1/1"
    assert 1e-7 < row["pers_max"] < 0.01
