"""The small version of scripts/histogram_dp_neighbours.py (its table:
scripts/results/histogram_dp_neighbours.md, H1).

The study had no test. A row moved between two public counts changes two cells, so the
ledger charges 2 epsilon per release; the study reads that charge from the site's ledger.
"""

from __future__ import annotations

import pytest
from _scripts import load_script


@pytest.mark.parametrize("release", ["tree", "class counts"])
def test_each_release_is_charged_twice_its_epsilon(release):
    study = load_script("histogram_dp_neighbours.py", "fedroc_histogram_dp_neighbours_script")
    h0, h1, charged = study.measure(release, 0.5, 3)
    assert charged == pytest.approx(1.0)
    assert 0 <= h0 <= 3 and 0 <= h1 <= 3


def test_the_event_reads_the_cells_of_world_0():
    study = load_script("histogram_dp_neighbours.py", "fedroc_histogram_dp_neighbours_script")
    others = study.OTHERS
    # The exact counts of world 0 (the target in leaf 0) are in S, those of world 1 not.
    assert study._in_s({"pos": [others + 1, others]}, "tree")
    assert not study._in_s({"pos": [others, others + 1]}, "tree")
    assert study._in_s({"counts": [2 * others + 1, 2 * others]}, "class counts")
    assert not study._in_s({"counts": [2 * others, 2 * others + 1]}, "class counts")
