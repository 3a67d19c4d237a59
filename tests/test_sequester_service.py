"""The sequestration service through real HTTP on loopback (uvicorn in a subprocess).

SQLite always; PostgreSQL too when FEDROC_TEST_POSTGRES_URL names a server on which the
tests may create databases (``.ci/run`` starts one when it can).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from tests._sequester_server import ADMIN, Server, database

pytestmark = pytest.mark.timeout(120)


BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(scope="module", params=BACKENDS)
def server(request, tmp_path_factory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp(f"seq-{request.param}")
    with database(request.param, tmp) as db:
        srv = Server(db, tmp / "server.log")
        srv.start()
        try:
            yield srv
        finally:
            srv.stop()


def _dataset(n: int = 400, seed: int = 0) -> tuple[list[str], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = rng.normal(size=n) + 1.0 * y
    return [f"img-{seed}-{i}" for i in range(n)], y, s


def _setup(srv: Server, *, n: int = 400, seed: int = 0, **plan: Any) -> dict[str, Any]:
    ids, y, s = _dataset(n, seed)
    with srv.client(ADMIN) as adm:
        r = adm.post("/test-sets", json={"image_ids": ids, "labels": y.astype(int).tolist()})
        assert r.status_code == 201, r.text
        tid = r.json()["test_set_id"]
        # The paper's variant, unrounded: these tests check its numbers exactly.
        body = {"n_subsets": 20, "load_factor": 2.0, "noise_rate": 0.1,
                "mechanism": "h-thresholdout", "round_answers": False, **plan}  # fmt: skip
        r = adm.post(f"/test-sets/{tid}/plans", json=body)
        assert r.status_code == 201, r.text
        p = r.json()
    return {"ids": ids, "y": y, "s": s, "plan": p, "test_set_id": tid}


def _developer(srv: Server, plan_id: int, name: str) -> str:
    with srv.client(ADMIN) as adm:
        r = adm.post(f"/plans/{plan_id}/developers", json={"name": name})
        assert r.status_code == 201, r.text
        return str(r.json()["token"])


def _submit(c: httpx.Client, ids: list[str], s: np.ndarray) -> int:
    r = c.post("/submissions", json={"image_ids": ids, "scores": s.tolist()})
    assert r.status_code == 201, r.text
    return int(r.json()["submission_id"])


def test_openapi_and_health(server):
    r = httpx.get(server.url + "/openapi.json", timeout=10)
    assert r.status_code == 200
    paths = r.json()["paths"]
    assert "/v1/queries" in paths and "/v1/submissions" in paths
    assert "/v1/test-sets/{test_set_id}/plans" in paths


def test_answers_are_exact_subset_aucs_under_threshold(server):
    # T = 1: never over the threshold, so every answer is the exact AUC of the subset
    # that the custodian's hash table says the query ran on.
    st = _setup(server, threshold=1.0, budget_units=1, seed=1)
    tok = _developer(server, st["plan"]["plan_id"], "exact")
    with server.client(tok) as dev, server.client(ADMIN) as adm:
        sid = _submit(dev, st["ids"], st["s"])
        index = {x: i for i, x in enumerate(st["ids"])}
        for k in (1, 7, 20):
            ans = dev.post("/queries", json={"submission_id": sid, "subset_id": k}).json()
            members = [index[x] for x in adm.get(f"/plans/{st['plan']['plan_id']}/subsets/{k}")
                       .json()["image_ids"]]  # fmt: skip
            assert ans["auc"] == pytest.approx(
                roc_auc_score(st["y"][members], st["s"][members]), abs=1e-12
            )
            assert ans["budget_remaining"] == 1
        # The inverse table agrees with the forward one.
        img = st["ids"][0]
        subs = adm.get(f"/plans/{st['plan']['plan_id']}/images/{img}").json()["subset_ids"]
        for k in set(subs):
            imgs = adm.get(f"/plans/{st['plan']['plan_id']}/subsets/{k}").json()["image_ids"]
            assert imgs.count(img) == subs.count(k)


def test_token_isolation(server):
    st = _setup(server, threshold=0.0, budget_units=3, seed=2)
    pid = st["plan"]["plan_id"]
    ta, tb = _developer(server, pid, "alice"), _developer(server, pid, "bob")
    with server.client(ta) as a, server.client(tb) as b:
        sa = _submit(a, st["ids"], st["s"])
        assert a.post("/queries", json={"submission_id": sa, "subset_id": 1}).status_code == 200
        # Bob cannot use, see or spend on Alice's submission.
        r = b.post("/queries", json={"submission_id": sa, "subset_id": 1})
        assert r.status_code == 404
        assert b.get("/submissions").json() == []
        assert b.get("/queries").json() == []
        assert b.get("/budget").json()["budget_remaining"] == 3
        assert a.get("/budget").json()["budget_remaining"] == 2
        assert len(a.get("/queries").json()) == 1
        me = a.get("/me").json()
        assert me["name"] == "alice" and "seed" not in json.dumps(me)
        # Developers cannot use the custodian's endpoints, and the reverse.
        assert a.get(f"/plans/{pid}").status_code == 403
        assert a.get(f"/plans/{pid}/subsets/1").status_code == 403
        assert a.post(f"/plans/{pid}/developers", json={"name": "x"}).status_code == 403
    with server.client(ADMIN) as adm:
        assert adm.get("/budget").status_code == 403
        assert adm.get(f"/plans/{pid}").json()["seed"]
    with server.client("not-a-token") as bad:
        assert bad.get("/budget").status_code == 401
        assert bad.post("/test-sets", json={"image_ids": [], "labels": []}).status_code == 401
    assert httpx.get(server.url + "/v1/budget", timeout=10).status_code == 401


def test_bad_input_is_4xx_and_spends_nothing(server):
    st = _setup(server, threshold=0.0, budget_units=2, seed=3)
    pid = st["plan"]["plan_id"]
    tok = _developer(server, pid, "carol")
    ids, s = st["ids"], st["s"]
    with server.client(tok) as dev:
        bad_bodies = {
            "unknown": {"image_ids": [*ids[:-1], "ghost"], "scores": s.tolist()},
            "missing": {"image_ids": ids[:-3], "scores": s[:-3].tolist()},
            "null score": {"image_ids": ids, "scores": [None, *s[1:].tolist()]},
            "length": {"image_ids": ids, "scores": s[:-1].tolist()},
            "duplicate": {"image_ids": [ids[0], *ids[:-1]], "scores": s.tolist()},
        }
        words = {"unknown": "ghost", "missing": "missing", "null score": "finite",
                 "length": "entries", "duplicate": "more than once"}  # fmt: skip
        for what, body in bad_bodies.items():
            r = dev.post("/submissions", json=body)
            assert r.status_code == 422, (what, r.text)
            assert words[what] in r.json()["detail"], (what, r.text)
        # NaN as a JSON token (what numpy users send by accident).
        payload = json.dumps({"image_ids": ids, "scores": [float("nan"), *s[1:].tolist()]})
        r = dev.post("/submissions", content=payload, headers={"content-type": "application/json"})
        assert r.status_code == 422 and "nan" in r.json()["detail"]
        assert dev.get("/submissions").json() == []
        sid = _submit(dev, ids, s)
        for body, code in [
            ({"submission_id": sid, "subset_id": 0}, 422),
            ({"submission_id": sid, "subset_id": 21}, 422),
            ({"submission_id": sid + 999, "subset_id": 1}, 404),
            ({"submission_id": sid}, 422),
        ]:
            r = dev.post("/queries", json=body)
            assert r.status_code == code, (body, r.text)
        assert dev.get("/budget").json() == {"budget_total": 2, "budget_remaining": 2,
                                             "n_queries": 0, "quota": {
                                                 "n_queries": 0, "max_queries": 1000,
                                                 "n_submissions": 1, "max_submissions": 100,
                                             }}  # fmt: skip
        assert dev.get("/queries").json() == []
    with server.client(ADMIN) as adm:
        n_pos = int(st["y"].sum())
        r = adm.post(f"/test-sets/{st['test_set_id']}/plans",
                     json={"n_subsets": 5, "subset_size": 4 * n_pos, "noise_rate": 0.1,
                           "prevalence": 0.5, "replace": False, "budget_units": 1})  # fmt: skip
        assert r.status_code == 422 and "with replacement" in r.json()["detail"]
        r = adm.post("/test-sets", json={"image_ids": ["a", "b"], "labels": [0, 2]})
        assert r.status_code == 422 and "0 or 1" in r.json()["detail"]
        r = adm.post(f"/test-sets/{st['test_set_id']}/plans",
                     json={"n_subsets": 5, "noise_rate": 0.1})  # fmt: skip
        assert r.status_code == 422 and "exactly one" in r.json()["detail"]
        assert adm.get("/plans/999999").status_code == 404


def test_dwork_thresholdout_needs_the_developers_reference(server):
    # sigma tiny: the noisy threshold is T to within a few 1e-3, so the decisions are known.
    st = _setup(server, threshold=0.1, noise_rate=0.001, budget_units=5,
                mechanism="thresholdout", seed=6)  # fmt: skip
    pid = st["plan"]["plan_id"]
    tok = _developer(server, pid, "frank")
    with server.client(ADMIN) as adm:
        index = {x: i for i, x in enumerate(st["ids"])}
        m = [index[x] for x in adm.get(f"/plans/{pid}/subsets/1").json()["image_ids"]]
    exact = roc_auc_score(st["y"][m], st["s"][m])
    with server.client(tok) as dev:
        assert dev.get("/me").json()["plan"]["mechanism"] == "thresholdout"
        sid = _submit(dev, st["ids"], st["s"])
        r = dev.post("/queries", json={"submission_id": sid, "subset_id": 1})
        assert r.status_code == 422 and "reference_auc" in r.json()["detail"]
        assert dev.get("/budget").json()["n_queries"] == 0
        # Within the threshold: the developer's own reference comes back, nothing is spent.
        q = {"submission_id": sid, "subset_id": 1}
        a = dev.post("/queries", json={**q, "reference_auc": exact - 0.05}).json()
        assert a["auc"] == exact - 0.05 and a["budget_remaining"] == 5
        # Far from it: the subset AUC plus Lap(0.001) noise, one unit spent.
        a = dev.post("/queries", json={**q, "reference_auc": exact - 0.5}).json()
        assert a["auc"] == pytest.approx(exact, abs=0.02) and a["auc"] != exact
        assert a["budget_remaining"] == 4


def test_budget_is_spent_then_service_stops(server):
    st = _setup(server, threshold=0.0, budget_units=2, seed=4)
    tok = _developer(server, st["plan"]["plan_id"], "dave")
    with server.client(tok) as dev:
        sid = _submit(dev, st["ids"], st["s"])
        remaining = [
            dev.post("/queries", json={"submission_id": sid, "subset_id": k}).json()[
                "budget_remaining"
            ]
            for k in (1, 2)
        ]
        assert remaining == [1, 0]
        for k in (3, 1):
            r = dev.post("/queries", json={"submission_id": sid, "subset_id": k})
            assert r.status_code == 403 and "budget spent" in r.json()["detail"]
        assert len(dev.get("/queries").json()) == 2
    with server.client(ADMIN) as adm:
        dev_id = next(d["id"] for d in adm.get("/developers").json() if d["name"] == "dave")
        audit = adm.get(f"/developers/{dev_id}/audit").json()
        assert [q["spent"] for q in audit] == [1, 1]
        for q in audit:  # over T = 0 every answer is the exact AUC plus recorded noise,
            # clipped to [0, 1] (an AUC outside it would tell the developer it was noise)
            assert q["answer"] == pytest.approx(min(1.0, max(0.0, q["holdout"] + q["noise"])))


@pytest.mark.parametrize("units", [1, 3])
def test_concurrent_queries_race_for_the_last_units(server, units):
    st = _setup(server, threshold=0.0, budget_units=units, seed=5 + units)
    tok = _developer(server, st["plan"]["plan_id"], f"racer{units}")
    with server.client(tok) as dev:
        sid = _submit(dev, st["ids"], st["s"])
    n_threads = 16
    barrier = threading.Barrier(n_threads)
    codes: list[int] = []
    lock = threading.Lock()

    def fire(k: int) -> None:
        with server.client(tok) as c:
            barrier.wait(timeout=30)
            r = c.post("/queries", json={"submission_id": sid, "subset_id": k % 20 + 1})
            with lock:
                codes.append(r.status_code)

    threads = [threading.Thread(target=fire, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(codes) == [200] * units + [403] * (n_threads - units)
    with server.client(tok) as dev:
        hist = dev.get("/queries").json()
        assert len(hist) == units
        assert sorted(h["budget_remaining"] for h in hist) == list(range(units))
        assert dev.get("/budget").json()["budget_remaining"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_restart_after_kill9_keeps_state(backend, tmp_path):
    with database(backend, tmp_path) as db:
        srv = Server(db, tmp_path / "server.log")
        srv.start()
        try:
            st = _setup(srv, threshold=0.0, budget_units=50, seed=9)
            tok = _developer(srv, st["plan"]["plan_id"], "erin")
            answers = []
            with srv.client(tok) as dev:
                sid = _submit(dev, st["ids"], st["s"])
                for k in range(1, 11):
                    answers.append(
                        dev.post("/queries", json={"submission_id": sid, "subset_id": k}).json()
                    )
            srv.kill9()  # right after the last answer arrived
            srv.start()
            with srv.client(tok) as dev:
                hist = dev.get("/queries").json()
                assert [(h["query_id"], h["auc"], h["budget_remaining"]) for h in hist] == [
                    (a["query_id"], a["auc"], a["budget_remaining"]) for a in answers
                ]
                budget = dev.get("/budget").json()
                assert budget.pop("quota")["n_queries"] == 10
                assert budget == {"budget_total": 50, "budget_remaining": 40,
                                  "n_queries": 10}  # fmt: skip
                # The token, the plan and the submission survived: querying goes on.
                r = dev.post("/queries", json={"submission_id": sid, "subset_id": 11})
                assert r.status_code == 200 and r.json()["budget_remaining"] == 39
        finally:
            srv.stop()
