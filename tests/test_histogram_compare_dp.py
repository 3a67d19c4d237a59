"""The histogram method's comparison of two models under distributed DP: noisy joint counts,
the noise's delta-method variance, the budget that stops averaging."""

from __future__ import annotations

import numpy as np
import pytest

from fedroc.exceptions import DisclosureError, FedrocError
from fedroc.federation import Federation
from fedroc.methods import evaluate
from fedroc.methods.histogram import JOINT_NAME
from fedroc.methods.histogram._compare import (
    count_joint,
    joint_comparison,
    noise_variance_of_difference,
)
from fedroc.privacy import DisclosurePolicy
from fedroc.secagg import secure_sum
from tests.test_histogram_compare import _frames, _paired_rows


def test_noise_variance_of_the_difference_matches_simulated_noise():
    """The delta-method variance against the empirical variance of the difference over
    4000 draws of independent noise on every cell (it would be off by the missing terms if
    a class or a score were left out of the gradient)."""
    y, a, b = _paired_rows(3000, np.random.default_rng(31))
    pos, neg = count_joint(y, a, b, 16, 0.0, 1.0)
    sigma2 = 1.84  # discrete Laplace at epsilon 1
    sim = np.random.default_rng(32)
    diffs = []
    for _ in range(4000):
        noise = sim.laplace(scale=np.sqrt(sigma2 / 2), size=(2, 16, 16))
        diffs.append(joint_comparison(pos + noise[0], neg + noise[1]).difference)
    empirical = float(np.var(diffs, ddof=1))
    predicted = noise_variance_of_difference(pos, neg, sigma2)
    assert predicted == pytest.approx(empirical, rel=0.08)
    # Unbiased to first order: the mean difference is the exact binned one.
    exact = joint_comparison(pos, neg).difference
    assert abs(np.mean(diffs) - exact) < 4 * np.sqrt(empirical / 4000) + 1e-4


def test_dp_comparison_spends_its_own_epsilon_and_covers_the_exact_difference():
    rng = np.random.default_rng(33)
    y, a, b = _paired_rows(2400, rng)
    policy = DisclosurePolicy(epsilon_limit=100.0)
    # The sites' own noise seed (a simulation's): the noise is most of the interval's width
    # (noise SE 0.014 of 0.017), so with fresh entropy the interval missed the exact
    # difference about one run in 40.
    fed = Federation.from_frames(_frames(y, a, b), score_b="score_b", policy=policy, noise_seed=35)
    start = fed.mark()
    res = evaluate(fed, "histogram", quantiles=64, compare=True, dp_epsilon=1.0)
    cmp = res.extra["comparison"]
    assert cmp["bins"] == 16 and "distributed DP" in cmp["method"]
    assert cmp["noise_se"] > 0 and cmp["se"] > cmp["noise_se"]
    lo, hi = cmp["ci"]
    exact = joint_comparison(*count_joint(y, a, b, 16, 0.0, 1.0)).difference
    assert lo < exact < hi
    # Each site spent epsilon 1 on its tree and epsilon 1 on its joint histogram, each
    # charged twice (a row moved, its counts public: H1).
    spent = fed.released(start).epsilon
    assert set(spent) == set(fed.site_names)
    assert all(v == pytest.approx(4.0) for v in spent.values())
    # The notes give the paper's epsilons (1/9 + 8/9 + 1 here); they say that the ledgers
    # charged twice them, not that a site spent them (review: 'each site spends it').
    notes = res.released.notes
    assert not any("each site spends it" in n for n in notes)
    assert any("ledger charges twice every epsilon above" in n for n in notes)


def test_the_budget_stops_averaging_repeated_noisy_joint_histograms():
    """Attack: the mean of k noisy releases of the same joint counts has 1/k of the noise
    variance; with no ledger the analyst could ask without end. The sites charge every
    release and refuse once their budget is spent."""
    rng = np.random.default_rng(34)
    policy = DisclosurePolicy(epsilon_limit=3.0)
    fed = Federation.from_frames(_frames(*_paired_rows(400, rng)), score_b="score_b", policy=policy)
    # Each release at 0.5 is charged 1 (a row moved, H1): three fit in the budget of 3.
    grid = {"bins": 16, "lo": 0.0, "hi": 1.0, "transform": None, "epsilon": 0.5}
    first = secure_sum(fed, JOINT_NAME, threshold=4, **grid)
    second = secure_sum(fed, JOINT_NAME, threshold=4, **grid)
    assert not np.array_equal(first["pos"], second["pos"])  # fresh noise each time
    secure_sum(fed, JOINT_NAME, threshold=4, **grid)
    with pytest.raises((DisclosureError, FedrocError), match="budget"):
        secure_sum(fed, JOINT_NAME, threshold=4, **grid)
