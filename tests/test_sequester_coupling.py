"""The capped draw's coupling, checked exactly on a tiny world (scripts/sequester_coupling.py).

The sensitivity ``2 c / min(P, Q)`` the service charges rests on a coupling of the two
worlds' subsets (``auc_sensitivity``'s docstring); a linear program over the enumerated laws
says whether one exists, and a chi-square test that ``draw_subsets`` samples those laws.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests._scripts import load_script


@pytest.fixture(scope="module")
def coupling():
    return load_script("sequester_coupling.py", "sequester_coupling")


def test_a_coupling_keeps_every_subset_auc_within_the_charged_sensitivity(coupling):
    # 7 images, image 0 positive among 4 (A) or negative (B); subsets of 5 + 5, cap 2:
    # charged 2 * 2 / 5 = 0.8 < 1, so the check is not the trivial Delta = 1.
    w = coupling.World(n_images=7, n_pos_a=4, n_pos=5, n_neg=5, copies=2)
    r = coupling.check(w)
    assert r["charged"] == pytest.approx(0.8)
    assert r["slot_mass"] < 1e-9  # positives and negatives each within c slots
    assert r["auc_mass"] < 1e-9  # every AUC at every weak ordering within Delta
    assert r["w_inf"] <= r["charged"] + 1e-12
    # One Laplace answer's exact privacy loss, worst ordering and output: within the charge
    # (0.34 of it here), and not nothing (the answer sees image 0).
    assert 0.1 < r["loss"] <= 1.0
    two_points = coupling.laplace_loss(
        {1: 1.0}, {2: 1.0}, np.array([[0.5]]), np.array([[0.7]]), 0.4
    )
    assert two_points == pytest.approx(0.2 / 0.4)
    # The program can say no: one slot fewer than the cap, or a Delta below W-inf, is
    # refused (copies of image 0 must move between the classes).
    law_a = coupling.row_law(w.labels("A"), 5, 5, 2)
    law_b = coupling.row_law(w.labels("B"), 5, 5, 2)
    too_tight = np.array([[coupling.slots_apart(a[0], b[0]) > 1 for b in law_b] for a in law_a])
    assert coupling.least_bad_mass(law_a, law_b, too_tight) > 0.01


@pytest.mark.parametrize("world", ["A", "B"])
def test_draw_subsets_samples_the_enumerated_law(coupling, world):
    w = coupling.World(n_images=7, n_pos_a=4, n_pos=5, n_neg=5, copies=2)
    p, cells = coupling.sampler_pvalue(w, world, 20000, seed=7 if world == "A" else 8)
    assert cells == 48
    assert p > 1e-3
