"""Pieces of scripts/sequester_neighbours.py (its table: scripts/results/sequester_neighbours.md).

tests/test_sequester_neighbours.py tests the engine's claim itself; this checks the study's
own statistics: Katz's interval of the ratio against statsmodels, and the event it
chooses from a pilot.
"""

from __future__ import annotations

import numpy as np
import pytest
from _scripts import load_script
from statsmodels.stats.contingency_tables import Table2x2


@pytest.mark.parametrize(("x", "y", "n"), [(900, 300, 4000), (57, 20, 10000), (12, 0, 500)])
def test_katz_interval_matches_statsmodels(x, y, n):
    study = load_script("sequester_neighbours.py", "fedroc_sequester_neighbours_script")
    ratio, lo, hi = study.katz(x, y, n)
    if y == 0:  # the study adds 0.5 to both cells when one is empty
        x, y = x + 0.5, y + 0.5
    table = Table2x2(np.array([[x, n - x], [y, n - y]], dtype=float))
    assert ratio == pytest.approx(table.riskratio, rel=1e-12)
    assert (lo, hi) == pytest.approx(table.riskratio_confint(alpha=0.05), rel=1e-3)  # 1.96


def test_the_chosen_event_has_the_largest_pilot_ratio():
    study = load_script("sequester_neighbours.py", "fedroc_sequester_neighbours_script")
    rng = np.random.default_rng(4)
    a = np.clip(rng.normal(0.45, 0.1, 4000), 0, 1)  # world A answers lower
    b = np.clip(rng.normal(0.55, 0.1, 4000), 0, 1)
    num, side, t = study.choose(a, b, min_hits=40)
    assert (num, side) in {("A", "<="), ("B", ">=")}
    x, y = study.hits(a, b, (num, side, t))
    assert min(x, y) >= 40 and x / y > 5
    for other in study.GRID:  # brute force over the same grid
        for event in (("A", "<=", float(other)), ("B", ">=", float(other))):
            u, v = study.hits(a, b, event)
            if min(u, v) >= 40:
                assert u / v <= x / y + 1e-12
