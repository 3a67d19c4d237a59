"""Does a refused plan tell a label? The noisy prevalence and the draw's feasibility.

Without a prevalence from the custodian, the service counts the positives with discrete
Laplace noise (``prevalence_epsilon``, 1 for a set below 142 images), stores the count
once per test set and draws the subsets at it. The draw then checks the count against the
*true* class sizes: ``round(prevalence N)`` positives must fit in the set's positives
(without replacement) or in ``max_copies`` copies of them. The published plan (its
prevalence, or the custodian's next plan after a refusal: the message says to give a
prevalence) is so a function of the noisy count *and* the true count: a count just above
what world B's positives can serve is published in world A and refused in world B.

The outcome "plan created at count X" has probability ``pmf_W(X)`` if the draw fits in
world W, 0 otherwise; each X is run through the service (its noise replaced by X, one test
set per X since the count is kept per set) and the probabilities are exact. The guarantee
the plan states, ``prevalence_epsilon``, would bound every ratio of the two worlds by
``e^epsilon``; the hockey-stick divergence ``delta = sum_X max(0, P_A(X) - e^eps P_B(X))``
(and the same for "refused") is the mass beyond it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from fastapi.testclient import TestClient

import fedroc.sequester.service as service
from fedroc.sequester.service import create_app
from tests._sequester_server import ADMIN

PHI, N_POS_A = 40, 4


def _pmf(center: int, eps: float) -> np.ndarray:
    """Law of the stored count: discrete Laplace around ``center``, clipped to [1, n - 1]."""
    z = np.arange(-4 * PHI, 4 * PHI + 1)
    w = np.exp(-eps * np.abs(z))
    w /= w.sum()
    out = np.zeros(PHI + 1)
    np.add.at(out, np.clip(center + z, 1, PHI - 1), w)
    return out


def _outcomes(tmp_path, monkeypatch, world: str, plan: dict) -> np.ndarray:
    """For each count X, whether the service creates the plan (True) or refuses it."""
    real = service.noisy_prevalence
    app = create_app(str(tmp_path / f"{world}.db"), ADMIN, rate_limit=0)
    adm = TestClient(app, headers={"Authorization": f"Bearer {ADMIN}"})
    ids = [f"img-{i}" for i in range(PHI)]
    y = [int(world == "A")] + [1] * (N_POS_A - 1) + [0] * (PHI - N_POS_A)
    made = np.zeros(PHI + 1, dtype=bool)
    for x in range(1, PHI):
        monkeypatch.setattr(
            service,
            "noisy_prevalence",
            lambda labels, *, epsilon, rng=None, x=x: (x / PHI, real(labels, epsilon=epsilon)[1]),
        )
        tid = adm.post("/v1/test-sets", json={"image_ids": ids, "labels": y}).json()
        r = adm.post(f"/v1/test-sets/{tid['test_set_id']}/plans", json=plan)
        assert r.status_code in (201, 422), r.text
        made[x] = r.status_code == 201
        if made[x]:
            assert r.json()["prevalence"] == pytest.approx(x / PHI)
    return made


def _delta(made_a, made_b, eps: float) -> float:
    pa, pb = _pmf(N_POS_A, eps), _pmf(N_POS_A - 1, eps)
    out_a = np.append(pa * made_a, (pa * ~made_a).sum())  # each X created, or refused
    out_b = np.append(pb * made_b, (pb * ~made_b).sum())
    e = math.exp(eps)
    return float(
        max(np.maximum(out_a - e * out_b, 0).sum(), np.maximum(out_b - e * out_a, 0).sum())
    )


PLANS = {
    # 20 of 40 images without replacement: 5 positives per subset at a count of 9 or 10
    # (round(X / 2)); world B has 3 positives, world A 4.
    "without replacement": {"replace": False},
    # Capped at 1 copy: the same draw with replacement's name.
    "max_copies 1": {"max_copies": 1},
    # The default cap, 2 copies (ceil(4 * 20 / 40)): 7 positives from 2 * 3 copies fail.
    "default cap": {},
}


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="the draw checks the noisy prevalence against the true class sizes: a count "
    "one world's positives cannot serve is refused there and published in the other "
    "(delta 0.035 without replacement on 40 images, 3e-5 at the default cap; below 1e-20 "
    "at the paper's plan); no pure-DP fix without changing what the draw does when the "
    "true class is too small",
)
@pytest.mark.parametrize("name", list(PLANS))
def test_a_plan_at_the_noisy_prevalence_tells_no_label_beyond_its_epsilon(
    tmp_path, monkeypatch, name
):
    plan = {"n_subsets": 3, "subset_size": 20, "noise_rate": 0.8, "budget_units": 1,
            "mechanism": "laplace", **PLANS[name]}  # fmt: skip
    made_a = _outcomes(tmp_path, monkeypatch, "A", plan)
    made_b = _outcomes(tmp_path, monkeypatch, "B", plan)
    eps = 1.0  # prevalence_epsilon(40)
    delta = _delta(made_a, made_b, eps)
    refused_only_in_b = np.flatnonzero(made_a & ~made_b).tolist()
    assert delta == 0.0, f"delta {delta:.3g}; counts refused in B only: {refused_only_in_b}"
