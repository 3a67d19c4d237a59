"""Two test sets one label apart, the subsets redrawn in each (scripts/sequester_neighbours.py).

``draw_subsets`` draws a subset's positives from the positives, so the table depends on the
labels; the answers' guarantee rests on the coupling argument of
:func:`fedroc.methods.sequester.engine.auc_sensitivity`, not on the subsets being held fixed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from fedroc.methods.sequester import Mechanism, Session, draw_subsets

PHI, N_POS_A, RHO, PREVALENCE = 40, 6, 10, 0.25


def _labels(world: str) -> np.ndarray:
    y = np.zeros(PHI, dtype=bool)
    y[:N_POS_A] = True
    y[0] = world == "A"  # image 0 positive in world A, negative in world B
    return y


def _katz_lower(x: int, y: int, n: int) -> float:
    """Lower end of Katz's 95% interval of (x / n) / (y / n)."""
    xf, yf = (x + 0.5, y + 0.5) if min(x, y) == 0 else (float(x), float(y))
    return xf / yf * math.exp(-1.96 * math.sqrt(1 / xf - 1 / n + 1 / yf - 1 / n))


def _sessions(
    world: str,
    n: int,
    mech: Mechanism,
    rng: np.random.Generator,
    *,
    subset_size: int,
    replace: bool,
) -> Iterator[Session]:
    """``n`` sessions of one answer on world's labels, each on a table drawn afresh."""
    y = _labels(world)
    for _ in range(n):
        table = draw_subsets(
            y,
            n_subsets=RHO,
            subset_size=subset_size,
            prevalence=PREVALENCE,
            replace=replace,
            seed=rng,
        )
        yield Session(y, table, mech, budget=1, rng=rng)


def test_answers_with_the_subsets_redrawn_per_world_stay_within_the_charged_epsilon():
    # 10 subsets of 20 without replacement (5 positives: image 0 is in 5 of 6 subsets in
    # world A); the probe puts image 0 at the bottom, the others in their true order, and
    # one Laplace answer of subset 1 is charged 0.4 / 0.4 = 1. The event "answer <= 0.44"
    # (chosen by the script's pilot) must be more likely in world A (the probe sees image
    # 0) and at most e^1 times as likely: measured 1.50 [1.45, 1.55] over 40000 sessions.
    n = 3000
    probe = np.where(_labels("A"), 1.0, 0.5)
    probe[0] = 0.0
    mech = Mechanism("laplace", noise_rate=0.4)
    rng = np.random.default_rng(20261207)
    hits: dict[str, int] = {}
    charged: set[float] = set()
    for world in ("A", "B"):
        count = 0
        for session in _sessions(world, n, mech, rng, subset_size=20, replace=False):
            count += session.query(probe, 1).value <= 0.44
            charged.add(round(mech.epsilon(1, session.sensitivity) or 0.0, 9))
        hits[world] = count
    assert [pytest.approx(1.0)] * len(charged) == sorted(charged)
    assert _katz_lower(hits["A"], hits["B"], n) > 1.0  # the event sees image 0's label
    assert hits["A"] / hits["B"] < math.exp(1.0)  # ... and no more than epsilon allows


@pytest.mark.xfail(
    strict=True,
    reason=(
        "with replacement the sensitivity, hence the plan's public epsilon, is the most copies "
        "of one image in a subset, whose distribution depends on the number of positives: "
        "published before any query, it tells one image's label far beyond e^epsilon "
        "(scripts/results/sequester_neighbours.md)"
    ),
)
def test_the_published_sensitivity_does_not_tell_one_label_beyond_epsilon():
    # 10 subsets of 200 with replacement (50 positives from 6 or 5); a developer who knows
    # every other label reads the plan's epsilon (2 B Delta / sigma: Delta) and guesses
    # "image 0 positive" when Delta <= 0.56. At noise_rate 2 one answer is charged at most
    # 0.5, so the guess may be right at most e^0.5 times as often in world A as in B.
    n = 300
    mech = Mechanism("laplace", noise_rate=2.0)
    rng = np.random.default_rng(5)
    guesses, eps_max = {}, 0.0
    for world in ("A", "B"):
        count = 0
        for session in _sessions(world, n, mech, rng, subset_size=200, replace=True):
            eps = mech.epsilon(1, session.sensitivity)
            assert eps is not None
            eps_max = max(eps_max, eps)
            count += session.sensitivity <= 0.56 + 1e-9
        guesses[world] = count
    assert eps_max <= 0.5
    assert _katz_lower(guesses["A"], guesses["B"], n) <= math.exp(eps_max)
