"""The small, seeded version of scripts/sequester_adaptive.py (its table:
scripts/results/sequester_adaptive.md, paper 2's adaptive developers).

The study had no test (its smallest run takes half a minute). Here its one-image probe on
60 images: the unprotected subset AUC gives every label away; the default answering rule
(Thresholdout, rounded, with limits) answers once and then refuses.
"""

from __future__ import annotations

import numpy as np
from _scripts import load_script


def test_the_probe_reads_the_labels_unless_the_default_rule_answers():
    study = load_script("sequester_adaptive.py", "fedroc_sequester_adaptive_script")
    _, y, table = study._world(100)
    n = study.subset_size(study.XI, study.PHI, study.RHO)  # the step as the study's main
    n_pos = round(study.PREV * n)
    modes = study._modes(study.answer_step(n_pos, n - n_pos))
    targets = np.r_[np.flatnonzero(y)[:20], np.flatnonzero(~y)[:40]]

    def session(label: str, seed: int):
        mech, units, limits = modes[label]
        return study.Session(y, table, mech, units, limits=limits, rng=np.random.default_rng(seed))

    open_probe = study.probe(session("unprotected (exact subset AUC)", 1), y, targets)
    assert open_probe["answered"] == 60 and open_probe["ba"] > 0.95
    default = study.probe(session("default: Thresholdout, rounded, limits", 1), y, targets)
    assert default["answered"] <= 2
    assert abs(default["ba"] - 0.5) < 0.1
