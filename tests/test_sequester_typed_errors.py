"""The sequestration engine's refusals are typed (class, parameter, value), and the service
phrases its HTTP answers from those fields, never from the engine's wording.

Before: the service rewrote the engine's text (``str(exc).replace("replace=True", ...)``),
decided whether to add its note on the noisy prevalence by looking for ``" at prevalence "``
in it, deleted a clause from a planner warning by its text, and repeated the engine's
"needs the developer's reference AUC" in its own words in the database layer. A rewording
in the engine would have changed or broken the API's answers without any test noticing.
"""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from fedroc.exceptions import InputError
from fedroc.methods.sequester import (
    ClassesTooSmall,
    Mechanism,
    NeedsReplacement,
    ParameterError,
    ReferenceRequired,
    Session,
    draw_subsets,
    planner,
)
from fedroc.sequester.service import create_app
from tests._sequester_server import ADMIN

pytestmark = pytest.mark.timeout(120)

N = 300


def _labels() -> np.ndarray:
    y = np.zeros(40, dtype=bool)
    y[:6] = True
    return y


def test_engine_refusals_carry_their_parameter_and_value():
    y = _labels()
    args = {"n_subsets": 2, "subset_size": 20, "prevalence": 0.25, "seed": 1}
    with pytest.raises(NeedsReplacement) as e:
        draw_subsets(y, **{**args, "replace": False, "max_copies": 2})
    assert (e.value.parameter, e.value.value) == ("max_copies", 2)
    assert isinstance(e.value, InputError)

    # 5 positives per subset of 20 at 0.25; without replacement the set has 6: 30 needs 8.
    with pytest.raises(ClassesTooSmall) as e:
        draw_subsets(y, **{**args, "subset_size": 30, "replace": False})
    err = e.value
    assert (err.parameter, err.value) == ("subset_size", 30)
    assert (err.needed, err.available, err.max_copies) == ((8, 22), (6, 34), None)
    assert err.prevalence == 0.25
    # With replacement and one copy each, the copies are what is short.
    with pytest.raises(ClassesTooSmall) as e:
        draw_subsets(y, **{**args, "subset_size": 200, "max_copies": 1})
    assert (e.value.value, e.value.needed, e.value.max_copies) == (200, (50, 150), 1)

    table = draw_subsets(y, **args)
    for bad in (0, 3, "1"):
        with pytest.raises(ParameterError) as e:
            table.row(bad)  # type: ignore[arg-type]
        assert (e.value.parameter, e.value.value) == ("subset_id", bad)


def test_a_missing_reference_is_one_typed_error_for_the_session_and_the_service():
    y = _labels()
    table = draw_subsets(y, n_subsets=2, subset_size=20, prevalence=0.25, seed=1)
    with pytest.raises(ReferenceRequired) as e:
        Mechanism("thresholdout").comparison(None, 0.7)
    assert (e.value.parameter, e.value.value, e.value.mechanism) == (
        "reference",
        None,
        "thresholdout",
    )
    assert Mechanism("thresholdout").comparison(0.61, 0.7) == 0.61
    assert Mechanism("laplace").comparison(None, 0.7) == 0.7
    session = Session(y, table, Mechanism("thresholdout"), budget=2, rng=np.random.default_rng(0))
    with pytest.raises(ReferenceRequired):
        session.query(np.arange(40.0), 1)
    assert session.history == []


@pytest.fixture
def app(tmp_path):
    return create_app(str(tmp_path / "seq.db"), ADMIN, rate_limit=0)


def _client(app, token: str) -> TestClient:
    return TestClient(app, headers={"Authorization": f"Bearer {token}"})


def _reworded(monkeypatch) -> None:
    # What the engine says may change; what the API says must not.
    for cls in (NeedsReplacement, ClassesTooSmall, ReferenceRequired):
        monkeypatch.setattr(cls, "__str__", lambda self: "REWORDED")


def test_the_service_answers_from_the_errors_fields_not_their_text(app, monkeypatch):
    _reworded(monkeypatch)
    rng = np.random.default_rng(3)
    y = (rng.random(N) < 0.3).astype(int)
    ids = [f"img-{i:04d}" for i in range(N)]
    adm = _client(app, ADMIN)
    tid = adm.post("/v1/test-sets", json={"image_ids": ids, "labels": y.tolist()}).json()[
        "test_set_id"
    ]
    base = {"n_subsets": 10, "noise_rate": 0.05, "budget_units": 2}

    r = adm.post(
        f"/v1/test-sets/{tid}/plans",
        json={**base, "subset_size": 100, "replace": False, "max_copies": 3},
    )
    assert r.status_code == 422
    assert r.json()["detail"] == (
        'max_copies 3 needs "replace": true (got false): without replacement a subset holds '
        "each image once"
    )

    # A class too small at the set's noisy prevalence: the note comes whatever the wording.
    r = adm.post(f"/v1/test-sets/{tid}/plans", json={**base, "subset_size": 600, "replace": False})
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert detail.startswith("REWORDED (the prevalence "), detail
    assert detail.endswith("give prevalence to draw at a set one)"), detail

    plan = adm.post(
        f"/v1/test-sets/{tid}/plans", json={**base, "subset_size": 100, "prevalence": 0.3}
    ).json()
    token = adm.post(f"/v1/plans/{plan['plan_id']}/developers", json={"name": "a"}).json()["token"]
    dev = _client(app, token)
    sid = dev.post(
        "/v1/submissions", json={"image_ids": ids, "scores": rng.normal(size=N).tolist()}
    ).json()["submission_id"]
    r = dev.post("/v1/queries", json={"submission_id": sid, "subset_id": 1})
    assert r.status_code == 422
    assert r.json()["detail"] == (
        "reference_auc is required by the thresholdout mechanism: send the AUC of this model "
        "on your own (training or validation) data"
    )
    assert dev.get("/v1/queries").json() == []


@pytest.mark.parametrize(("mechanism", "kept"), [("thresholdout", True), ("laplace", True),
                                                 ("h-thresholdout", False)])  # fmt: skip
def test_the_planner_phrases_its_budget_note_for_the_mechanism(mechanism, kept):
    """The service used to delete "(the mechanism's own guarantee still does)" from this
    note by its text for h-thresholdout, which has no guarantee of its own."""
    with pytest.warns(planner.PlanWarning):
        p = planner.plan(300, 10, noise_rate=0.05, subset_size=100, budget_units=2,
                         mechanism=mechanism)  # fmt: skip
    note = next(w for w in p.warnings if w.startswith("budget_units 2 is above"))
    assert ("own guarantee still does" in note) is kept, note
