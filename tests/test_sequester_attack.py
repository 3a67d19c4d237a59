"""The one-image probe attack on the sequestration service, through its REST API.

A developer who wants the labels submits, for each image j, predictions that score j 1 and
every other image 0, and queries subset 1. If j is in the subset, its AUC is
``0.5 + c / (2 n_pos)`` when j is positive and ``0.5 - c / (2 n_neg)`` when it is negative
(c copies of j): an exact answer reads the label. Under the paper's h-Thresholdout_AUC the
subset AUC stays within T of the whole-set AUC, so the answer is exact and free; fedroc 0.1
answered every probe this way (all 1047 labels in 39 s). The attacker guesses "positive"
above 0.5, "negative" below, and the majority class (negative) without information.

The default plan must keep the attacker at chance: balanced accuracy <= 0.55 over the 1047
images of the test set. The paper's variant, by name and with the limits lifted, is shown
to fall to the same attack (it is documented as unsafe).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests._sequester_server import ADMIN, Server

pytestmark = pytest.mark.timeout(300)

N_IMAGES, PREVALENCE = 1047, 0.12
# The paper's clinical plan: 100 subsets at load factor 400 (4188 images), budget at 0.8.
DEFAULT_PLAN = {"n_subsets": 100, "load_factor": 400.0, "noise_rate": 0.8}
NO_LIMITS = {"max_queries": None, "max_submissions": None, "min_changed_images": 0}


def _test_set(seed: int = 0) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.zeros(N_IMAGES, dtype=bool)
    y[rng.choice(N_IMAGES, round(PREVALENCE * N_IMAGES), replace=False)] = True
    return [f"cxr-{i:05d}" for i in range(N_IMAGES)], y


def balanced_accuracy(y: np.ndarray, guess: np.ndarray) -> float:
    return 0.5 * (float(guess[y].mean()) + float((~guess[~y]).mean()))


def probe_attack(
    server: Server, plan: dict, targets: np.ndarray
) -> tuple[np.ndarray, dict, np.ndarray]:
    """Run the attack on ``targets``; returns the guessed labels of all images, counts and
    which images an answer spoke of."""
    ids, y = _test_set()
    with server.client(ADMIN) as adm:
        r = adm.post("/test-sets", json={"image_ids": ids, "labels": y.astype(int).tolist()})
        assert r.status_code == 201, r.text
        r = adm.post(f"/test-sets/{r.json()['test_set_id']}/plans", json=plan)
        assert r.status_code == 201, r.text
        pid = r.json()["plan_id"]
        token = adm.post(f"/plans/{pid}/developers", json={"name": "mallory"}).json()["token"]
    guess = np.zeros(N_IMAGES, dtype=bool)
    counts = {"answered": 0, "informative": 0, "refused": 0}
    spoken = np.zeros(N_IMAGES, dtype=bool)  # the images whose answer was other than 0.5
    with server.client(token) as dev:
        for j in targets:
            scores = np.zeros(N_IMAGES)
            scores[j] = 1.0
            r = dev.post("/submissions", json={"image_ids": ids, "scores": scores.tolist()})
            if r.status_code != 201:
                assert r.status_code in (403, 422), r.text  # quota or near-duplicate
                counts["refused"] += 1
                continue
            q = {"submission_id": r.json()["submission_id"], "subset_id": 1,
                 "reference_auc": 0.5}  # fmt: skip
            r = dev.post("/queries", json=q)
            if r.status_code != 200:
                assert r.status_code == 403, r.text  # budget or quota
                counts["refused"] += 1
                continue
            counts["answered"] += 1
            auc = r.json()["auc"]
            counts["informative"] += int(auc != 0.5)
            spoken[j] = auc != 0.5
            guess[j] = auc > 0.5
    return guess, counts, spoken


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attack")
    srv = Server(str(tmp / "attack.db"), tmp / "server.log")
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def test_default_plan_keeps_the_probe_attack_at_chance(server):
    _, y = _test_set()
    guess, counts, _ = probe_attack(server, DEFAULT_PLAN, np.arange(N_IMAGES))
    assert balanced_accuracy(y, guess) <= 0.55, counts


def test_thresholdout_alone_keeps_it_at_chance(server):
    # Without quotas or near-duplicate refusal: Dwork's rule answers the developer's own
    # reference (0.5) below its noisy threshold and spends the budget above it.
    _, y = _test_set()
    targets = np.random.default_rng(1).choice(N_IMAGES, 200, replace=False)
    guess, counts, _ = probe_attack(server, {**DEFAULT_PLAN, **NO_LIMITS}, targets)
    assert counts["answered"] + counts["refused"] == targets.size
    assert counts["informative"] <= 2 * 2  # at most the 2 budget units' noisy answers (x2)
    acc = np.mean(guess[targets] == y[targets])
    assert balanced_accuracy(y[targets], guess[targets]) <= 0.55, (acc, counts)


def test_the_papers_variant_falls_to_it(server):
    # The attack works: h-Thresholdout_AUC, unrounded and without limits, reads the labels.
    # An answer of exactly 0.5 means image j is not in subset 1 (each image misses the
    # 4188 draws with probability e^-4, about 2 of 100): it says nothing, and the guess
    # falls back to the majority class. The label of every other image is read, so the
    # balanced accuracy is taken over the images the answers spoke of. (Over all 100, two
    # of the 7 positives among 5 unspoken images once put it at 0.857 < 0.9.)
    _, y = _test_set()
    targets = np.random.default_rng(2).choice(N_IMAGES, 100, replace=False)
    plan = {**DEFAULT_PLAN, **NO_LIMITS, "mechanism": "h-thresholdout", "round_answers": False}
    guess, counts, spoken = probe_attack(server, plan, targets)
    assert counts["informative"] >= 90, counts  # e^-4 misses: 1.8 expected, 10 has p < 1e-4
    read = targets[spoken[targets]]
    assert balanced_accuracy(y[read], guess[read]) >= 0.9, counts
