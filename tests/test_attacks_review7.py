"""Attack review 7: argument validation, the privacy ledger, the DP calibration of counts.

Each test plays the curious analyst with fedroc's public calls only (``Federation.call`` of
the registered site functions) and tries to learn more than a site's policy and ledger say
it releases. A test asserts that the attack fails and says what it recovered before the
fix; a hole left open is a strict xfail that says why.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedroc.data import SiteData
from fedroc.federation import Federation, Site


# -- H1. count noise calibrated to adding a row, while the site's counts are public -------------
def _leaf_site(name: str, target_leaf: int, seed: int) -> Site:
    """40 positives and 40 negatives; the target (row 0, positive) in leaf ``target_leaf`` of a
    two-leaf tree over [0, 1], every other row where the analyst knows it is (the adversary
    of differential privacy knows every row but one)."""
    y = np.r_[np.ones(40, bool), np.zeros(40, bool)]
    s = np.r_[np.full(20, 0.25), np.full(20, 0.75), np.full(20, 0.25), np.full(20, 0.75)]
    s[0] = 0.25 if target_leaf == 0 else 0.75
    return Site(name, SiteData.from_arrays(y, s), noise_seed=seed)


def _in_s(reply: dict) -> bool:
    """The event S: the noisy positive leaves exceed the others' counts (19 and 20) as if the
    target were in leaf 0 on both leaves: leaf 0 at least 20, leaf 1 at most 20."""
    pos = np.asarray(reply["pos"], dtype=np.float64)
    return bool(pos[0] >= 20 and pos[1] <= 20)


@pytest.mark.xfail(
    strict=True,
    reason=(
        "H1, open (design decision): the histogram's count releases (tree_local, "
        "class_counts_local, the distributed-DP tree and joint grid) calibrate their noise to "
        "sensitivity 1, a row added or removed; but every site releases its exact n, n_pos "
        "and n_neg (fedroc.info, fedroc.class_counts), so the neighbours that matter keep "
        "the counts and move one row: two cells per level change, and a release charged "
        "epsilon is 2 epsilon-DP (as ROC-GLM's Gaussian, calibrated to a score moved, "
        "already counts). Fix: noise of scale 2h/epsilon per level (sensitivity 2), or "
        "charge 2 epsilon; either changes every histogram DP figure"
    ),
)
def test_a_local_dp_tree_is_as_private_as_its_ledger_says_for_a_row_that_moves():
    """The analyst knows every row but the target's, a positive in leaf 0 or leaf 1 of a
    two-leaf tree, and asks ``tree_local`` at epsilon 1, which the ledger records as an
    epsilon-1 release. Under epsilon-DP, P(S | leaf 0) <= e^1 P(S | leaf 1) for every event
    S of the release. Measured (seeded sites, 400 releases per world, 10 per site): the ratio
    is about e^2 (exactly 1 / alpha^2, alpha = e^-epsilon, for the discrete Laplace)."""
    from fedroc.methods.histogram import LOCAL_NAME

    hits = {0: 0, 1: 0}
    charged = set()
    for leaf in (0, 1):
        for k in range(40):
            site = _leaf_site(f"s{leaf}-{k}", leaf, seed=7700 + 100 * leaf + k)
            fed = Federation.from_sites([site])
            for _ in range(10):
                reply = fed.call(LOCAL_NAME, branching=2, height=1, lo=0.0, hi=1.0, epsilon=1.0)[
                    site.name
                ]
                hits[leaf] += _in_s(reply)
            charged.add(round(site.ledger.spent()[0], 9))
    assert charged == {10.0}  # ten releases, each charged epsilon 1
    ratio = hits[0] / max(hits[1], 1)
    assert ratio <= math.e * 1.5, f"P(S|0)/P(S|1) = {hits[0]}/{hits[1]} = {ratio:.2f} > e"
