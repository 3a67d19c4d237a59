"""Operating the sequestration service: refusal before reading, malformed numbers, limits,
custodian actions and their audit, TLS, token from a file, file modes, migrations, docs.

Most tests run the app in-process (Starlette's TestClient); what needs a real server
(sockets, TLS, the process's command line and memory) runs ``fedroc sequester serve``.
"""

from __future__ import annotations

import atexit
import csv
import io
import json
import math
import os
import shutil
import socket
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from fedroc.cli import main
from fedroc.sequester.db import Store, hash_token
from fedroc.sequester.service import create_app
from tests._sequester_server import ADMIN, SERVER_ENV, Server

pytestmark = pytest.mark.timeout(180)

N = 300


def _data(n: int = N, seed: int = 0) -> tuple[list[str], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = rng.normal(size=n) + 1.0 * y
    return [f"img-{i}" for i in range(n)], y, s


def _client(app, token: str) -> TestClient:
    return TestClient(app, headers={"Authorization": f"Bearer {token}"})


def _setup(app, **plan) -> dict:
    ids, y, s = _data()
    adm = _client(app, ADMIN)
    tid = adm.post(
        "/v1/test-sets", json={"image_ids": ids, "labels": y.astype(int).tolist()}
    ).json()["test_set_id"]
    body = {"n_subsets": 20, "subset_size": 100, "noise_rate": 0.8, "budget_units": 50, **plan}
    r = adm.post(f"/v1/test-sets/{tid}/plans", json=body)
    assert r.status_code == 201, r.text
    pid = r.json()["plan_id"]
    r = adm.post(f"/v1/plans/{pid}/developers", json={"name": "dev"}).json()
    return {"ids": ids, "y": y, "s": s, "tid": tid, "pid": pid, "token": r["token"],
            "dev_id": r["developer_id"], "plan": body}  # fmt: skip


@pytest.fixture
def app(tmp_path):
    return create_app(str(tmp_path / "seq.db"), ADMIN, rate_limit=0)


# --------------------------------------------------------------------------- inputs


def test_malformed_numbers_are_422_naming_the_field(app):
    st = _setup(app, mechanism="laplace")
    dev = _client(app, st["token"])
    sid = dev.post("/v1/submissions", json={"image_ids": st["ids"], "scores": st["s"].tolist()})
    assert sid.status_code == 201
    cases = [  # (path, raw JSON, field named in the message)
        ("/v1/queries", '{"submission_id": 9223372036854775808, "subset_id": 1}', "submission_id"),
        ("/v1/queries", '{"submission_id": 18446744073709551616, "subset_id": 1}',
         "submission_id"),
        ("/v1/queries", '{"submission_id": NaN, "subset_id": 1}', "submission_id"),
        ("/v1/queries", '{"submission_id": 1, "subset_id": Infinity}', "subset_id"),
        ("/v1/queries", '{"submission_id": 1, "subset_id": 1, "reference_auc": NaN}',
         "reference_auc"),
        ("/v1/queries", '{"submission_id": 1, "subset_id": 1, "seed": 42}', "seed"),
    ]  # fmt: skip
    for path, raw, field in cases:
        r = dev.post(path, content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 422, (raw, r.text)
        assert field in r.json()["detail"], (raw, r.text)
    adm = _client(app, ADMIN)
    plan_cases = [
        ({"threshold": float("nan")}, "threshold"),
        ({"noise_rate": 1e308}, "noise_rate"),
        ({"noise_rate": float("inf")}, "noise_rate"),
        ({"load_factor": 1e300, "subset_size": None}, "load_factor"),
        ({"n_subsets": 2**64}, "n_subsets"),
        ({"budget_units": 0}, "budget_units"),
        ({"subset_size": 2**40}, "subset_size"),
        ({"n_subsets": 1_000_000, "subset_size": 1000}, "n_subsets"),
    ]
    for change, field in plan_cases:
        body = {**st["plan"], **change}
        raw = json.dumps(body)  # NaN and Infinity as JSON tokens, as numpy users send them
        r = adm.post(f"/v1/test-sets/{st['tid']}/plans", content=raw,
                     headers={"content-type": "application/json"})  # fmt: skip
        assert r.status_code == 422, (change, r.text)
        assert field in r.json()["detail"], (change, r.text)
    for path in ("/v1/plans/18446744073709551616", "/v1/developers/-1/audit"):
        r = adm.get(path)
        assert r.status_code == 422 and "_id" in r.json()["detail"], r.text
    assert dev.get("/v1/budget").json()["n_queries"] == 0  # nothing spent on errors


def test_zero_budget_plan_is_refused_naming_what_to_change(app):
    adm = _client(app, ADMIN)
    ids, y, _ = _data()
    tid = adm.post("/v1/test-sets", json={"image_ids": ids, "labels": y.astype(int).tolist()})
    r = adm.post(f"/v1/test-sets/{tid.json()['test_set_id']}/plans",
                 json={"n_subsets": 20, "load_factor": 2.0, "noise_rate": 0.124})  # fmt: skip
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert "0 perturbed answers" in detail and "load_factor" in detail and "noise_rate" in detail


def test_default_plan_is_thresholdout_rounded_limited_and_warned(app):
    ids, y, _ = _data(1047, 1)
    adm = _client(app, ADMIN)
    tid = adm.post("/v1/test-sets", json={"image_ids": ids, "labels": y.astype(int).tolist()})
    r = adm.post(f"/v1/test-sets/{tid.json()['test_set_id']}/plans",
                 json={"load_factor": 400, "noise_rate": 0.8})  # fmt: skip
    assert r.status_code == 201, r.text
    p = r.json()
    assert p["mechanism"] == "thresholdout" and p["subset_size"] == 4188
    assert p["budget_units"] == 2 and p["max_queries"] == 1000 and p["max_submissions"] == 100
    assert 0 < p["answer_step"] <= 0.01
    assert p["warnings"] and "carry little" in p["warnings"][0]
    full = adm.get(f"/v1/plans/{p['plan_id']}").json()
    # The guarantee covers the answers and the prevalence the subsets were drawn at (a count
    # of positives with discrete Laplace noise, sd about 0.01 of 1047 images).
    answers = 2 * 2 * full["sensitivity"] / 0.8
    assert p["prevalence_epsilon"] == pytest.approx(math.sqrt(2) / (0.01 * 1047))
    assert p["epsilon_guarantee"] == pytest.approx(answers + p["prevalence_epsilon"])
    warned = [w for w in p["warnings"] if "noisy prevalence costs epsilon 0.135" in w]
    assert len(warned) == (p["prevalence_epsilon"] > answers)  # the answers' part varies


def test_a_custodians_prevalence_spends_nothing_and_comes_alone(app):
    ids, y, _ = _data()
    adm = _client(app, ADMIN)
    tid = adm.post("/v1/test-sets", json={"image_ids": ids, "labels": y.astype(int).tolist()})
    url = f"/v1/test-sets/{tid.json()['test_set_id']}/plans"
    body = {"n_subsets": 20, "subset_size": 100, "noise_rate": 0.8, "budget_units": 5,
            "mechanism": "laplace", "replace": False}  # fmt: skip
    given = adm.post(url, json={**body, "prevalence": 0.25}).json()
    assert given["prevalence"] == 0.25 and given["prevalence_epsilon"] is None
    full = adm.get(f"/v1/plans/{given['plan_id']}").json()
    assert given["epsilon_guarantee"] == pytest.approx(5 * full["sensitivity"] / 0.8)
    own = adm.post(url, json={**body, "prevalence_epsilon": 0.3}).json()
    assert own["prevalence_epsilon"] == 0.3
    full = adm.get(f"/v1/plans/{own['plan_id']}").json()
    answers = 5 * full["sensitivity"] / 0.8  # 2 / min(P, N) per unit: about 0.4
    assert own["epsilon_guarantee"] == pytest.approx(answers + 0.3)
    assert not any("noisy prevalence" in w for w in own["warnings"])
    # The set's count is made once (R40): a later plan reuses it, and refuses another epsilon.
    again = adm.post(url, json=body).json()
    assert (again["prevalence"], again["prevalence_epsilon"]) == (own["prevalence"], 0.3)
    r = adm.post(url, json={**body, "prevalence_epsilon": 5.0})
    assert r.status_code == 422, r.text
    assert "counted with noise at prevalence_epsilon 0.3 by its first plan" in r.json()["detail"]
    other = adm.post("/v1/test-sets", json={"image_ids": ids, "labels": y.astype(int).tolist()})
    other_url = f"/v1/test-sets/{other.json()['test_set_id']}/plans"
    dear = adm.post(other_url, json={**body, "prevalence_epsilon": 5.0}).json()
    assert "the noisy prevalence costs epsilon 5, more than the answers'" in dear["warnings"][-1]
    # The custodian's audit records what was spent on each test set: its noisy count, once
    # (discrete Laplace at prevalence_epsilon, with the count: R40c); plans spend nothing.
    actions = adm.get("/v1/audit/actions").json()
    assert all(a["details"]["events"] == [] for a in actions if a["action"] == "create-plan")
    spent = {
        a["target"]: a["details"]["events"] for a in actions if a["action"] == "count-prevalence"
    }
    assert len(spent) == 2
    for tid_, eps in ((tid.json()["test_set_id"], 0.3), (other.json()["test_set_id"], 5.0)):
        (event,) = spent[f"test-set/{tid_}"]
        assert event["mechanism"] == "discrete-laplace" and event["epsilon"] == eps
        assert event["sensitivity"] == 1 and event["delta"] == 0
    r = adm.post(url, json={**body, "prevalence": 0.25, "prevalence_epsilon": 0.3})
    assert r.status_code == 422, r.text
    assert "give prevalence or prevalence_epsilon, not both" in r.json()["detail"]


def test_a_plan_drawn_with_replacement_publishes_an_epsilon_no_label_moves(app):
    # Two test sets one label apart (image 0 positive or negative), at the custodian's
    # prevalence, plans of 10 subsets of 200 from 40 images drawn with replacement under
    # 30 seeds each. Uncapped, the epsilon the developer sees followed the most copies of
    # one image in a subset, which depends on the number of positives (6 or 5): the two
    # worlds' epsilons barely overlapped. Capped (default 20 copies), it is one number,
    # 2 * 20 / 50 per unit, in every plan of both worlds.
    adm = _client(app, ADMIN)
    ids = [f"img-{i}" for i in range(40)]
    seen: dict[str, set[float]] = {}
    for world, first in (("A", 1), ("B", 0)):
        y = [first] + [1] * 5 + [0] * 34
        tid = adm.post("/v1/test-sets", json={"image_ids": ids, "labels": y}).json()
        url = f"/v1/test-sets/{tid['test_set_id']}/plans"
        seen[world] = set()
        for seed in range(30):
            body = {"n_subsets": 10, "subset_size": 200, "noise_rate": 0.8, "budget_units": 1,
                    "mechanism": "laplace", "prevalence": 0.25, "seed": f"s{seed}"}  # fmt: skip
            r = adm.post(url, json=body)
            assert r.status_code == 201, r.text
            assert r.json()["max_copies"] == 20
            seen[world].add(round(r.json()["epsilon_guarantee"], 12))
    assert seen["A"] == seen["B"] == {round(2 * 20 / 50 / 0.8, 12)}
    # The paper's uncapped draw is still there on request, charged as it must be: 1 / sigma.
    body = {**body, "max_copies": 0}
    r = adm.post(url, json=body)
    assert r.status_code == 201 and r.json()["epsilon_guarantee"] == pytest.approx(1 / 0.8)
    r = adm.post(url, json={**body, "replace": False, "max_copies": 3, "subset_size": 20})
    assert r.status_code == 422 and 'max_copies 3 needs "replace": true' in r.json()["detail"]


@pytest.mark.parametrize("mechanism", ["thresholdout", "laplace"])
@pytest.mark.parametrize("max_copies", [None, 1, 2, 0])
def test_the_planner_tells_the_epsilon_the_service_charges(app, mechanism, max_copies):
    # The planner's DP epsilon (from the public cap and the subset's class sizes) is the
    # epsilon_guarantee the service reports for the plan it draws (from the drawn table).
    from fedroc.methods.sequester import planner

    ids, y, _ = _data()
    adm = _client(app, ADMIN)
    tid = adm.post("/v1/test-sets", json={"image_ids": ids, "labels": y.astype(int).tolist()})
    body = {"n_subsets": 20, "subset_size": 200, "noise_rate": 0.8, "budget_units": 3,
            "mechanism": mechanism, "prevalence": 0.3}  # fmt: skip
    if max_copies is not None:
        body["max_copies"] = max_copies
    r = adm.post(f"/v1/test-sets/{tid.json()['test_set_id']}/plans", json=body)
    assert r.status_code == 201, r.text
    p = planner.plan(N, 20, noise_rate=0.8, subset_size=200, auc=0.75, prevalence=0.3,
                     budget_units=3, max_copies=max_copies)  # fmt: skip
    assert p.max_copies == r.json()["max_copies"] == (max_copies if max_copies is not None else 3)
    planned = p.epsilon_thresholdout if mechanism == "thresholdout" else p.epsilon_laplace
    assert planned == pytest.approx(r.json()["epsilon_guarantee"], rel=1e-12)


def test_a_draw_the_noisy_prevalence_cannot_serve_says_so(app, monkeypatch):
    # Without replacement a subset as large as the set needs every positive; a noisy count
    # above the set's asks for more than it has (U4: the message said only "draw with
    # replacement or ask for smaller subsets").
    import fedroc.sequester.service as service

    ids, y, _ = _data()
    real = service.noisy_prevalence
    monkeypatch.setattr(  # its count 3 above the set's, with the real count's DP event
        service,
        "noisy_prevalence",
        lambda labels, *, epsilon, rng: (
            (y.sum() + 3) / N,
            real(labels, epsilon=epsilon, rng=rng)[1],
        ),
    )
    adm = _client(app, ADMIN)
    tid = adm.post("/v1/test-sets", json={"image_ids": ids, "labels": y.astype(int).tolist()})
    body = {"n_subsets": 5, "subset_size": N, "noise_rate": 0.8, "replace": False,
            "budget_units": 5}  # fmt: skip
    r = adm.post(f"/v1/test-sets/{tid.json()['test_set_id']}/plans", json=body)
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert (
        "draw with replacement" in detail and "counted with noise at prevalence_epsilon" in detail
    )
    assert "give prevalence to draw at a set one" in detail


def test_answers_are_clipped_to_the_unit_interval(app):
    st = _setup(app, mechanism="laplace", noise_rate=5.0, round_answers=False)
    dev = _client(app, st["token"])
    sid = dev.post("/v1/submissions", json={"image_ids": st["ids"], "scores": st["s"].tolist()})
    aucs = [
        dev.post(
            "/v1/queries",
            json={"submission_id": sid.json()["submission_id"], "subset_id": k % 20 + 1},
        ).json()["auc"]
        for k in range(30)
    ]
    assert all(0.0 <= a <= 1.0 for a in aucs)
    assert sum(a in (0.0, 1.0) for a in aucs) >= 10  # Lap(5) crosses the bounds often


def test_noise_is_the_servers_own(tmp_path):
    # Seeded only by the operator (tests): two servers with the same seed agree; without a
    # seed two identical sessions differ. A developer has no way to send one (extra="forbid").
    def answers(path, seed):
        app = create_app(str(path), ADMIN, rate_limit=0, noise_seed=seed)
        st = _setup(app, mechanism="laplace", noise_rate=0.02, round_answers=False, seed="x")
        dev = _client(app, st["token"])
        sid = dev.post("/v1/submissions", json={"image_ids": st["ids"], "scores": st["s"].tolist()})
        q = {"submission_id": sid.json()["submission_id"], "subset_id": 1}
        return [dev.post("/v1/queries", json=q).json()["auc"] for _ in range(5)]

    a, b = answers(tmp_path / "a.db", 7), answers(tmp_path / "b.db", 7)
    c, d = answers(tmp_path / "c.db", None), answers(tmp_path / "d.db", None)
    assert a == b and c != d and len(set(c)) == 5


# --------------------------------------------------------------------------- limits


def test_quotas_near_duplicates_and_top_ups(app):
    st = _setup(app, mechanism="laplace", max_submissions=2, max_queries=3, min_changed_images=5)
    dev, adm = _client(app, st["token"]), _client(app, ADMIN)
    ids, s = st["ids"], st["s"]

    def submit(scores):
        return dev.post("/v1/submissions", json={"image_ids": ids, "scores": list(scores)})

    first = submit(s)
    assert first.status_code == 201
    sid = first.json()["submission_id"]
    for near in (s, 2 * s + 1, np.where(np.arange(N) == 0, s.max() + 1, s)):
        r = submit(near)  # the same order, an affine copy, one image moved to the top
        assert r.status_code == 422 and f"submission {sid}" in r.json()["detail"], r.text
    other = np.random.default_rng(5).normal(size=N)
    assert submit(other).status_code == 201
    r = submit(np.random.default_rng(6).normal(size=N))
    assert r.status_code == 403 and "submission quota" in r.json()["detail"]
    q = {"submission_id": sid, "subset_id": 1}
    assert [dev.post("/v1/queries", json=q).status_code for _ in range(4)] == [200] * 3 + [403]
    assert "query quota" in dev.post("/v1/queries", json=q).json()["detail"]
    me = dev.get("/v1/me").json()
    assert me["quota"] == {"n_queries": 3, "max_queries": 3, "n_submissions": 2,
                           "max_submissions": 2}  # fmt: skip
    r = adm.post(f"/v1/developers/{st['dev_id']}/top-up",
                 json={"queries": 2, "submissions": 1, "budget_units": 10})  # fmt: skip
    assert r.status_code == 200 and r.json()["max_queries"] == 5
    assert [dev.post("/v1/queries", json=q).status_code for _ in range(3)] == [200, 200, 403]
    assert dev.get("/v1/budget").json()["budget_total"] == 60
    assert submit(np.random.default_rng(7).normal(size=N)).status_code == 201
    # The developer's guarantee counts every unit they were given: the plan's is for its 50
    # (Laplace: epsilon linear in the units), theirs for 60, in /v1/me and the custodian's list.
    me = dev.get("/v1/me").json()
    plan_eps, prevalence_eps = me["plan"]["epsilon_guarantee"], me["plan"]["prevalence_epsilon"]
    answers = (plan_eps - (prevalence_eps or 0.0)) * 60 / 50
    assert me["epsilon_guarantee"] == pytest.approx(answers + (prevalence_eps or 0.0))
    listed = [d for d in adm.get("/v1/developers").json() if d["id"] == st["dev_id"]]
    assert listed[0]["epsilon_guarantee"] == pytest.approx(me["epsilon_guarantee"])


def test_top_up_stays_within_32_bit_counters(app):
    st = _setup(app, mechanism="laplace")
    adm = _client(app, ADMIN)
    url = f"/v1/developers/{st['dev_id']}/top-up"
    assert adm.post(url, json={"budget_units": 10**9}).status_code == 200
    assert adm.post(url, json={"budget_units": 10**9}).status_code == 200
    r = adm.post(url, json={"budget_units": 10**9})
    assert r.status_code == 422 and "budget_units" in r.json()["detail"]
    assert _client(app, st["token"]).get("/v1/budget").json()["budget_total"] == 50 + 2 * 10**9


def test_revoke_and_rotate(app):
    st = _setup(app, mechanism="laplace")
    dev, adm = _client(app, st["token"]), _client(app, ADMIN)
    assert dev.get("/v1/budget").status_code == 200
    assert adm.post(f"/v1/developers/{st['dev_id']}/revoke").status_code == 200
    r = dev.get("/v1/budget")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    new = adm.post(f"/v1/developers/{st['dev_id']}/rotate").json()["token"]
    assert dev.get("/v1/budget").status_code == 401  # the old token stays dead
    assert _client(app, new).get("/v1/me").json()["developer_id"] == st["dev_id"]
    again = adm.post(f"/v1/developers/{st['dev_id']}/rotate").json()["token"]
    assert _client(app, new).get("/v1/me").status_code == 401
    assert _client(app, again).get("/v1/me").status_code == 200
    assert adm.post("/v1/developers/999/revoke").status_code == 404


def test_listings_actions_and_csv_export(app):
    st = _setup(app, mechanism="laplace", round_answers=False)
    dev, adm = _client(app, st["token"]), _client(app, ADMIN)
    sid = dev.post("/v1/submissions", json={"image_ids": st["ids"], "scores": st["s"].tolist()})
    for k in (1, 2, 3):
        dev.post("/v1/queries", json={"submission_id": sid.json()["submission_id"], "subset_id": k})
    adm.post(f"/v1/developers/{st['dev_id']}/top-up", json={"budget_units": 1})
    new_token = adm.post(f"/v1/developers/{st['dev_id']}/rotate").json()["token"]
    adm.post(f"/v1/developers/{st['dev_id']}/revoke")
    assert [t["test_set_id"] for t in adm.get("/v1/test-sets").json()] == [st["tid"]]
    plans = adm.get("/v1/plans", params={"test_set_id": st["tid"]}).json()
    assert [p["plan_id"] for p in plans] == [st["pid"]] and "seed" not in plans[0]
    assert adm.get("/v1/plans", params={"test_set_id": st["tid"] + 1}).json() == []
    devs = adm.get("/v1/developers").json()
    assert devs[0]["active"] is False and devs[0]["n_queries"] == 3
    actions = adm.get("/v1/audit/actions").json()
    assert [a["action"] for a in actions] == [
        "create-test-set", "count-prevalence", "create-plan", "create-developer", "top-up",
        "rotate-token", "revoke-developer",
    ]  # fmt: skip
    assert actions[4]["details"]["budget_units"] == 1
    text = adm.get("/v1/audit/actions.csv").text
    assert st["token"] not in text and new_token not in text and ADMIN not in text
    assert hash_token(new_token) not in text
    r = adm.get("/v1/audit/queries.csv", params={"developer_id": st["dev_id"]})
    assert r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    audit = adm.get(f"/v1/developers/{st['dev_id']}/audit").json()
    assert [int(x["query_id"]) for x in rows] == [a["id"] for a in audit]
    for row, a in zip(rows, audit, strict=True):
        assert float(row["holdout"]) == pytest.approx(a["holdout"])
        assert float(row["answer"]) == pytest.approx(a["answer"])
        assert float(row["epsilon"]) == pytest.approx(sum(e["epsilon"] for e in a["events"]))
        assert row["developer"] == "dev" and a["events"][0]["mechanism"] == "laplace"
    # Developers see none of it.
    assert _client(app, st["token"]).get("/v1/audit/actions").status_code == 401


# --------------------------------------------------------------------------- fuzzing


def _fuzz_schema():
    # Built at collection (schemathesis parametrizes from a schema object): an app on a
    # throw-away database with one test set, plan, developer and submission, so that
    # generated ids and bodies reach the handlers.
    tmp = Path(tempfile.mkdtemp(prefix="fedroc-fuzz-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    app = create_app(str(tmp / "fuzz.db"), ADMIN, rate_limit=0)
    st = _setup(app, mechanism="laplace")
    dev = _client(app, st["token"])
    dev.post("/v1/submissions", json={"image_ids": st["ids"], "scores": st["s"].tolist()})
    return schemathesis.openapi.from_asgi("/openapi.json", app), st["token"]


FUZZ_SCHEMA, FUZZ_DEV_TOKEN = _fuzz_schema()
# More examples for a deeper search: FEDROC_FUZZ_EXAMPLES=200 pytest -k fuzz
FUZZ_EXAMPLES = int(os.environ.get("FEDROC_FUZZ_EXAMPLES", "12"))
DEV_PATHS = ("/v1/me", "/v1/submissions", "/v1/queries", "/v1/budget")


# One test per operation, named by it. (Schemathesis's own `schema.parametrize()` gives all
# of its tests one node id, and pytest-xdist, which `make test` uses, then ran only one.)
FUZZ_OPERATIONS = [result.ok() for result in FUZZ_SCHEMA.get_all_operations()]


@pytest.mark.parametrize("operation", FUZZ_OPERATIONS, ids=lambda op: op.label)
def test_fuzz_from_the_openapi_schema_finds_no_500(operation):
    # Each operation with the token of its role (so that requests reach the handlers) and
    # a bounded number of examples, valid and invalid (schemathesis's default modes); the
    # only check is that no answer is a server error.
    token = FUZZ_DEV_TOKEN if operation.path.startswith(DEV_PATHS) else ADMIN
    cases = hst.one_of(
        operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
        operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
    )

    @given(case=cases)
    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    def check(case):
        case.call_and_validate(
            headers={"Authorization": f"Bearer {token}"}, checks=[not_a_server_error]
        )

    check()


# --------------------------------------------------------------------------- docs, migrations


def test_docs_work_offline(app):
    c = TestClient(app)
    page = c.get("/docs")
    assert page.status_code == 200
    assert "cdn." not in page.text and 'src="http' not in page.text
    assets = [a for a in page.text.split('"') if a.startswith("/static-offline-docs/")]
    assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets)
    for a in assets:
        r = c.get(a)
        assert r.status_code == 200 and len(r.content) > 1000, a
    assert c.get("/openapi.json").json()["components"]["securitySchemes"]


# The schema of fedroc 0.1, as its db.py created it (metadata.create_all, no Alembic).
def _old_schema():
    from sqlalchemy import (
        Boolean,
        Column,
        Float,
        ForeignKey,
        Integer,
        LargeBinary,
        MetaData,
        String,
        Table,
        Text,
    )  # fmt: skip

    md = MetaData()
    Table("test_sets", md, Column("id", Integer, primary_key=True, autoincrement=True),
          Column("name", String(200), nullable=False), Column("n_images", Integer, nullable=False),
          Column("n_pos", Integer, nullable=False), Column("image_ids", Text, nullable=False),
          Column("labels", LargeBinary, nullable=False),
          Column("created_at", Float, nullable=False))  # fmt: skip
    Table("plans", md, Column("id", Integer, primary_key=True, autoincrement=True),
          Column("test_set_id", Integer, ForeignKey("test_sets.id"), nullable=False),
          *[Column(c, String(40), nullable=False) for c in ("mechanism",)],
          *[Column(c, Integer, nullable=False) for c in ("n_subsets", "subset_size")],
          *[Column(c, Float, nullable=False) for c in ("load_factor", "noise_rate", "threshold",
                                                       "budget")],
          Column("budget_units", Integer, nullable=False), Column("epsilon", Float, nullable=False),
          Column("prevalence", Float, nullable=False), Column("replace", Boolean, nullable=False),
          Column("seed", Text, nullable=False), Column("members", LargeBinary, nullable=False),
          Column("created_at", Float, nullable=False))  # fmt: skip
    Table("developers", md, Column("id", Integer, primary_key=True, autoincrement=True),
          Column("plan_id", Integer, ForeignKey("plans.id"), nullable=False),
          Column("name", String(200), nullable=False),
          Column("token_hash", String(64), nullable=False, unique=True, index=True),
          Column("budget_total", Integer, nullable=False),
          Column("budget_remaining", Integer, nullable=False),
          Column("n_queries", Integer, nullable=False, default=0),
          Column("threshold_noise", Float, nullable=False, default=0.0),
          Column("created_at", Float, nullable=False))  # fmt: skip
    Table("submissions", md, Column("id", Integer, primary_key=True, autoincrement=True),
          Column("developer_id", Integer, ForeignKey("developers.id"), nullable=False,
                 index=True),
          Column("name", String(200), nullable=False),
          Column("scores", LargeBinary, nullable=False),
          Column("whole_auc", Float, nullable=False),
          Column("created_at", Float, nullable=False))  # fmt: skip
    Table("queries", md, Column("id", Integer, primary_key=True, autoincrement=True),
          Column("developer_id", Integer, ForeignKey("developers.id"), nullable=False,
                 index=True),
          Column("submission_id", Integer, ForeignKey("submissions.id"), nullable=False),
          Column("subset_id", Integer, nullable=False), Column("answer", Float, nullable=False),
          Column("spent", Integer, nullable=False), Column("budget_after", Integer, nullable=False),
          Column("holdout", Float, nullable=False), Column("reference", Float, nullable=False),
          Column("noise", Float, nullable=False),
          Column("created_at", Float, nullable=False))  # fmt: skip
    return md


def _old_database(url: str) -> tuple[str, np.ndarray, np.ndarray, list[str]]:
    """A database as fedroc 0.1 left it: one test set, plan, developer, submission, query."""
    from sqlalchemy import create_engine, insert

    from fedroc.methods.sequester import draw_subsets, subset_auc

    md = _old_schema()
    ids, y, s = _data()
    table = draw_subsets(y, n_subsets=10, subset_size=100, seed=3, image_ids=ids)
    token = "fsq_old-token-" + "x" * 20
    eng = create_engine(url)
    md.create_all(eng)
    t = md.tables
    with eng.begin() as c:
        c.execute(insert(t["test_sets"]).values(
            name="old", n_images=N, n_pos=int(y.sum()), image_ids=json.dumps(ids),
            labels=y.astype(np.uint8).tobytes(), created_at=1.0))  # fmt: skip
        c.execute(insert(t["plans"]).values(
            test_set_id=1, mechanism="h-thresholdout", n_subsets=10, subset_size=100,
            load_factor=table.load_factor, noise_rate=0.1, threshold=1.0, budget=0.5,
            budget_units=5, epsilon=0.001, prevalence=float(y.mean()), replace=True, seed="s",
            members=table.members_bytes(), created_at=1.0))  # fmt: skip
        c.execute(insert(t["developers"]).values(
            plan_id=1, name="old-dev", token_hash=hash_token(token), budget_total=5,
            budget_remaining=5, n_queries=1, threshold_noise=0.0, created_at=1.0))  # fmt: skip
        c.execute(insert(t["submissions"]).values(
            developer_id=1, name="m", scores=s.astype("<f8").tobytes(),
            whole_auc=0.7, created_at=1.0))  # fmt: skip
        exact = subset_auc(table.members[0], y, s)
        c.execute(insert(t["queries"]).values(
            developer_id=1, submission_id=1, subset_id=1, answer=exact, spent=0,
            budget_after=5, holdout=exact, reference=0.7, noise=0.0, created_at=1.0))  # fmt: skip
    eng.dispose()
    return token, y, s, [str(i) for i in table.members[1].tolist()]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_migrations_upgrade_a_database_of_fedroc_0_1(backend, tmp_path):
    from sklearn.metrics import roc_auc_score

    from tests._sequester_server import database

    with database(backend, tmp_path) as db:
        url = db if "://" in db else f"sqlite:///{db}"
        token, y, s, _ = _old_database(url.replace("postgresql://", "postgresql+psycopg://"))
        store = Store(db)
        assert store.revision == "0005"
        assert store.counts()["queries"] == 1
        plan = store.plan(1)
        assert plan.mechanism.name == "h-thresholdout" and plan.mechanism.step == 0.0
        assert plan.limits.max_queries is None and 0 < plan.sensitivity <= 1
        assert plan.prevalence_epsilon is None  # its prevalence was stored before 0003
        assert plan.table.max_copies is None and plan.public()["max_copies"] is None  # 0005
        assert store.developers()[0]["n_submissions"] == 1  # counted by the migration
        store.close()
        # The upgraded database serves: the old token works, the history is there, and the
        # old plan answers as it did (h-variant, T = 1: the exact subset AUC).
        app = create_app(db, ADMIN, rate_limit=0)
        dev = _client(app, token)
        assert len(dev.get("/v1/queries").json()) == 1
        r = dev.post("/v1/queries", json={"submission_id": 1, "subset_id": 2})
        assert r.status_code == 200, r.text
        members = plan.table.members[1]
        assert r.json()["auc"] == pytest.approx(roc_auc_score(y[members], s[members]))
        assert r.json()["budget_remaining"] == 5
        # Opening it again is a no-op.
        assert Store(db).revision == "0005"
        app.state.store.close()


def test_sqlite_file_modes(tmp_path):
    store = Store(str(tmp_path / "new.db"))
    store.counts()
    for name in ("new.db", "new.db-wal", "new.db-shm"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
    store.close()
    loose = tmp_path / "loose.db"
    loose.touch(mode=0o644)
    os.chmod(loose, 0o644)
    with pytest.warns(UserWarning, match="readable by others"):
        Store(str(loose)).close()
    assert stat.S_IMODE(loose.stat().st_mode) == 0o600


def test_serve_without_the_service_extra(monkeypatch, capsys):
    for mod in [m for m in sys.modules if m.startswith("fedroc.sequester.service")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "fastapi", None)  # import fastapi -> ImportError
    with pytest.raises(SystemExit) as exc:
        main(["sequester", "serve", "--db", "never.db"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "'service' extra" in err and "fedroc[service]" in err and "Traceback" not in err
    assert not Path("never.db").exists()


def test_serve_refuses_bad_operator_options(capsys, tmp_path):
    cases = [
        (["--admin-token-file", str(tmp_path / "missing")], "--admin-token-file"),
        (["--tls-cert", str(tmp_path / "c.pem")], "--tls-key"),
        (["--admin-token", "x" * 20], "--admin-token"),  # gone: ps would show it
    ]
    for args, word in cases:
        with pytest.raises(SystemExit) as exc:
            main(["sequester", "serve", "--db", str(tmp_path / "x.db"), *args])
        assert exc.value.code == 2
        assert word in capsys.readouterr().err


def test_serve_warns_when_a_leftover_environment_variable_seeds_the_noise(
    capsys, tmp_path, monkeypatch
):
    """``FEDROC_SEQUESTER_NOISE_SEED`` (the hidden ``--noise-seed``, for tests) seeded every
    answer's noise without a word: a variable left in a production environment made the
    noise removable by whoever knows it. The server now says so when it starts."""
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)
    monkeypatch.setenv("FEDROC_SEQUESTER_NOISE_SEED", "7")
    token = tmp_path / "admin.token"
    token.write_text("t" * 40)
    token.chmod(0o600)
    main(["sequester", "serve", "--db", str(tmp_path / "x.db"), "--admin-token-file", str(token)])
    err = capsys.readouterr().err
    assert "noise is seeded (7" in err and "FEDROC_SEQUESTER_NOISE_SEED" in err
    monkeypatch.delenv("FEDROC_SEQUESTER_NOISE_SEED")
    main(["sequester", "serve", "--db", str(tmp_path / "y.db"), "--admin-token-file", str(token)])
    assert "seeded" not in capsys.readouterr().err


# --------------------------------------------------------------------------- real server


def _raw_request(port: int, head: str, timeout: float = 10.0) -> tuple[int, float]:
    """Send only the request head; return the status and how long the answer took."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.encode())
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split(b" ")[1]), time.monotonic() - t0


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def strict_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("strict")
    token_file = tmp / "admin-token"
    token_file.write_text(ADMIN + "\n")
    token_file.chmod(0o600)
    env = {k: v for k, v in SERVER_ENV.items() if k != "FEDROC_SEQUESTER_ADMIN_TOKEN"}
    srv = Server(
        str(tmp / "strict.db"),
        tmp / "server.log",
        args=(
            "--admin-token-file",
            str(token_file),
            "--max-body-mb",
            "1",
            "--rate-limit",
            "5",
            "--rate-burst",
            "5",
        ),
        env=env,
    )
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def test_refuses_before_reading_the_body(strict_server):
    srv = strict_server
    port = int(srv.url.rsplit(":", 1)[1])
    with srv.client(ADMIN) as adm:
        ids, y, _ = _data()
        tid = adm.post("/test-sets", json={"image_ids": ids, "labels": y.astype(int).tolist()})
        pid = adm.post(f"/test-sets/{tid.json()['test_set_id']}/plans",
                       json={"n_subsets": 5, "subset_size": 50, "noise_rate": 0.8,
                             "budget_units": 1}).json()["plan_id"]  # fmt: skip
        token = adm.post(f"/plans/{pid}/developers", json={"name": "d"}).json()["token"]
    big = 90 * 2**20
    head = ("POST /v1/submissions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {big}\r\n{{auth}}\r\n")  # fmt: skip
    # No body is sent at all: an answer proves the server did not wait for it.
    status, took = _raw_request(port, head.format(auth=""))
    assert status == 401 and took < 5
    status, _ = _raw_request(port, head.format(auth="Authorization: Bearer nope\r\n"))
    assert status == 401
    status, took = _raw_request(port, head.format(auth=f"Authorization: Bearer {token}\r\n"))
    assert status == 413 and took < 5
    # A chunked body (no declared length) is read only up to the limit.
    import httpx

    def chunks():
        for _ in range(64):
            yield b"x" * 65536

    r = httpx.post(srv.url + "/v1/submissions", content=chunks(), timeout=30,
                   headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert r.status_code == 413 and "too large" in r.json()["detail"]
    # Four clients streaming 90 MB each without a token leave the server's memory as it was.
    assert srv.proc is not None
    before = _rss_kb(srv.proc.pid)

    def flood():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(head.format(auth="").encode())
                for _ in range(big // 2**20):
                    sock.sendall(b"x" * 2**20)
        except OSError:
            pass  # the server answered 401 and closed the connection

    threads = [threading.Thread(target=flood) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert _rss_kb(srv.proc.pid) - before < 30_000  # kB
    with srv.client(token) as dev:
        assert dev.get("/budget").status_code == 200  # and it still serves


def test_rate_limit_per_developer(strict_server):
    srv = strict_server
    with srv.client(ADMIN) as adm:
        ids, y, _ = _data()
        tid = adm.post("/test-sets", json={"image_ids": ids, "labels": y.astype(int).tolist()})
        pid = adm.post(f"/test-sets/{tid.json()['test_set_id']}/plans",
                       json={"n_subsets": 5, "subset_size": 50, "noise_rate": 0.8,
                             "budget_units": 1}).json()["plan_id"]  # fmt: skip
        tokens = [adm.post(f"/plans/{pid}/developers", json={"name": f"r{i}"}).json()["token"]
                  for i in range(2)]  # fmt: skip
        assert all(adm.get("/developers").status_code == 200 for _ in range(15))
    time.sleep(1.2)
    with srv.client(tokens[0]) as a, srv.client(tokens[1]) as b:
        codes = [a.get("/budget") for _ in range(15)]
        limited = [r for r in codes if r.status_code == 429]
        assert 5 <= len(limited) <= 10 and int(limited[0].headers["retry-after"]) >= 1
        assert "rate limit" in limited[0].json()["detail"]
        assert b.get("/budget").status_code == 200  # one developer's bucket is not another's
        time.sleep(1.2)
        assert a.get("/budget").status_code == 200


def test_admin_token_from_a_file_stays_off_the_command_line(strict_server):
    assert strict_server.proc is not None
    cmdline = Path(f"/proc/{strict_server.proc.pid}/cmdline").read_bytes()
    assert ADMIN.encode() not in cmdline and b"--admin-token-file" in cmdline
    with strict_server.client(ADMIN) as adm:
        assert adm.get("/test-sets").status_code == 200


def test_tls(tmp_path):
    from fedroc import _tls

    ca, ca_key = _tls.new_ca("fedroc test CA", days=1)
    cert, key = _tls.issue_certificate(ca, ca_key, "sequester", hosts=["127.0.0.1"], days=1)
    _tls.write_certificate(tmp_path / "ca.pem", ca)
    _tls.write_certificate(tmp_path / "cert.pem", cert)
    _tls.write_private_key(tmp_path / "key.pem", key)
    srv = Server(str(tmp_path / "tls.db"), tmp_path / "server.log", scheme="https",
                 verify=str(tmp_path / "ca.pem"),
                 args=("--tls-cert", str(tmp_path / "cert.pem"),
                       "--tls-key", str(tmp_path / "key.pem")))  # fmt: skip
    srv.start()
    try:
        with srv.client(ADMIN) as adm:
            assert adm.get("/test-sets").json() == []
        import httpx

        plain = srv.url.replace("https://", "http://")
        with pytest.raises(httpx.HTTPError):
            httpx.get(plain + "/v1/health", timeout=5)
    finally:
        srv.stop()


def test_migration_0004_moves_a_counted_prevalence_onto_its_test_set(tmp_path):
    """A database of 0003 whose second plan on a set counted the prevalence (the first gave
    the custodian's): 0004 puts that count on the test set's row, which later plans reuse,
    and the set without a counted plan stays uncounted."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, text

    from fedroc.sequester.db import MIGRATIONS

    db = tmp_path / "v3.db"
    eng = create_engine(f"sqlite:///{db}")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with eng.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0003")
        for k in (1, 2):
            conn.execute(text(
                "INSERT INTO test_sets (name, n_images, n_pos, image_ids, labels, created_at) "
                f"VALUES ('s{k}', 2, 1, '[\"a\", \"b\"]', X'0001', 1.0)"))  # fmt: skip
        for tid, prevalence, eps in (
            (1, 0.5, None),
            (1, 0.31, 0.7),
            (1, 0.29, 0.7),
            (2, 0.5, None),
        ):
            conn.execute(text(
                "INSERT INTO plans (test_set_id, mechanism, n_subsets, subset_size, load_factor,"
                " noise_rate, threshold, budget, budget_units, epsilon, prevalence, replace,"
                " seed, members, created_at, prevalence_epsilon) VALUES (:t, 'laplace', 1, 2,"
                " 1.0, 0.1, 1.0, 0.5, 5, 0.1, :p, 0, 's', X'00', 1.0, :e)"
            ), {"t": tid, "p": prevalence, "e": eps})  # fmt: skip
    eng.dispose()
    store = Store(str(db))
    assert store.revision == "0005"
    assert store.counted_prevalence(1) == (0.31, 0.7)  # the first plan that counted it
    assert store.counted_prevalence(2) is None
    assert store.count_prevalence(1, 0.4, 1.0) == (0.31, 0.7, False)  # kept, not replaced
    assert store.count_prevalence(2, 0.4, 1.0) == (0.4, 1.0, True)
    store.close()


def test_migration_0004_downgrades_a_used_sqlite_database_and_upgrades_it_back(app):
    """0004's downgrade dropped its two columns in batch mode, which on SQLite copies
    test_sets and drops the original: with foreign keys on (every connection of the Store)
    and a plan on a set, "DROP TABLE test_sets" failed, FOREIGN KEY constraint failed
    (review of 1b074ca). SQLite since 3.35 drops a column in place."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import inspect, text

    from fedroc.sequester.db import MIGRATIONS

    st = _setup(app, prevalence_epsilon=0.5)
    store = app.state.store
    counted = store.counted_prevalence(st["tid"])
    assert counted is not None and counted[1] == 0.5
    before = store.counts()
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0003")
    with store.engine.connect() as conn:
        columns = {c["name"] for c in inspect(conn).get_columns("test_sets")}
        assert "counted_prevalence" not in columns and "prevalence_epsilon" not in columns
        assert conn.execute(text("PRAGMA foreign_key_check")).all() == []
    assert store.counts() == before
    path = str(store.engine.url.database)
    store.close()
    again = Store(path)  # upgrades back: the count backfilled from the plan that made it
    assert again.revision == "0005" and again.counts() == before
    assert again.counted_prevalence(st["tid"]) == counted
    # And down to 0001: 0003 and 0002 dropped their columns by batch copies too (the data
    # of their columns goes, as a downgrade's does; the rows stay).
    with again.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0001")
    with again.engine.connect() as conn:
        assert "prevalence_epsilon" not in {c["name"] for c in inspect(conn).get_columns("plans")}
        assert "admin_actions" not in inspect(conn).get_table_names()
        assert conn.execute(text("PRAGMA foreign_key_check")).all() == []
        assert conn.execute(text("SELECT COUNT(*) FROM plans")).scalar() == before["plans"]
    again.close()
