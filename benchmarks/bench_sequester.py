"""Load benchmark of the sequestration service: AUC queries per second over HTTP.

The paper's clinical plan (1047 images, 100 subsets, load factor 400: subsets of 4188
images) with the default mechanism (Thresholdout; each query sends the developer's
reference AUC) and a budget and quotas large enough not to stop the run.
``fedroc sequester serve`` runs in a subprocess on loopback (rate limit off: the operator
sets it); each client is a separate process with its own developer token that sends
queries in a loop for a fixed time. The peer is the engine alone (the same answer
in-process, no HTTP and no database): the ratio says what the service costs per query.
Target: more than 200 queries/s with SQLite.

    python benchmarks/bench_sequester.py [--seconds 5] [--clients 1,4,8]

PostgreSQL is measured too when FEDROC_TEST_POSTGRES_URL is set (a scratch database is
created and dropped).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np

from fedroc.metrics import roc_auc
from fedroc.sequester import Mechanism, Session, draw_subsets

ADMIN = "bench-admin-" + secrets.token_hex(8)
N_IMAGES, N_SUBSETS, LOAD_FACTOR, SIGMA = 1047, 100, 400.0, 0.8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(db: str, extra: list[str]) -> Iterator[str]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fedroc", "sequester", "serve", "--db", db, "--port", str(port),
         "--rate-limit", "0", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "FEDROC_SEQUESTER_ADMIN_TOKEN": ADMIN},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/v1/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("server did not start")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def dataset() -> tuple[list[str], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    y = rng.random(N_IMAGES) < 0.12
    s = rng.normal(size=N_IMAGES) + 1.24 * y  # AUC about 0.81, as the paper's model
    return [f"cxr-{i:05d}" for i in range(N_IMAGES)], y, s


def reference_auc() -> float:
    _, y, s = dataset()
    return roc_auc(y, s)  # an honest developer's own AUC (here: exactly the whole set's)


def setup(url: str, n_clients: int) -> tuple[list[str], list[int]]:
    """A test set, a plan with subsets of 4188 images, one developer and submission per client."""
    ids, y, s = dataset()
    h = {"Authorization": f"Bearer {ADMIN}"}
    with httpx.Client(base_url=url + "/v1", headers=h, timeout=60) as adm:
        tid = adm.post("/test-sets", json={"image_ids": ids, "labels": y.astype(int).tolist()})
        plan = adm.post(
            f"/test-sets/{tid.json()['test_set_id']}/plans",
            json={"n_subsets": N_SUBSETS, "load_factor": LOAD_FACTOR, "noise_rate": SIGMA,
                  "budget_units": 10**9, "max_queries": None, "max_submissions": None},
        ).json()  # fmt: skip
        assert plan["subset_size"] == 4188, plan
        tokens = [
            adm.post(f"/plans/{plan['plan_id']}/developers", json={"name": f"c{i}"}).json()["token"]
            for i in range(n_clients)
        ]
    subs = []
    for tok in tokens:
        with httpx.Client(base_url=url + "/v1", headers={"Authorization": f"Bearer {tok}"}) as c:
            r = c.post("/submissions", json={"image_ids": ids, "scores": s.tolist()})
            subs.append(r.json()["submission_id"])
    return tokens, subs


def client(args: tuple[str, str, int, float, mp.synchronize.Event]) -> tuple[int, list[float]]:
    url, token, sub_id, seconds, go = args
    ref = reference_auc()
    lat: list[float] = []
    with httpx.Client(
        base_url=url + "/v1", headers={"Authorization": f"Bearer {token}"}, timeout=60
    ) as c:
        c.get("/budget")  # connect before the clock starts
        go.wait()
        end = time.perf_counter() + seconds
        k = 0
        while (t0 := time.perf_counter()) < end:
            q = {"submission_id": sub_id, "subset_id": k % N_SUBSETS + 1, "reference_auc": ref}
            r = c.post("/queries", json=q)
            if r.status_code != 200:
                raise RuntimeError(r.text)
            lat.append(time.perf_counter() - t0)
            k += 1
    return len(lat), lat


def run_load(url: str, n_clients: int, seconds: float) -> tuple[float, float, float]:
    tokens, subs = setup(url, n_clients)
    ctx = mp.get_context("fork")
    go = ctx.Manager().Event()
    with ctx.Pool(n_clients) as pool:
        res = pool.map_async(
            client, [(url, t, s, seconds, go) for t, s in zip(tokens, subs, strict=True)]
        )
        time.sleep(0.5)
        go.set()
        out = res.get(timeout=seconds + 120)
    total = sum(n for n, _ in out)
    lat = np.concatenate([np.asarray(v) for _, v in out]) * 1000
    return total / seconds, float(np.median(lat)), float(np.percentile(lat, 95))


def engine_rate(seconds: float) -> float:
    ids, y, s = dataset()
    table = draw_subsets(y, n_subsets=N_SUBSETS, subset_size=4188, seed=1, image_ids=ids)
    sess = Session(y, table, Mechanism("thresholdout", 0.02, SIGMA), budget=10**9)
    sub = sess.submit(s)
    ref = reference_auc()
    n = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sess.query(sub, n % N_SUBSETS + 1, reference=ref)
        n += 1
    return n / seconds


@contextlib.contextmanager
def postgres_db() -> Iterator[str | None]:
    url = os.environ.get("FEDROC_TEST_POSTGRES_URL")
    if not url:
        yield None
        return
    import psycopg
    from sqlalchemy.engine import make_url

    base = make_url(url).set(drivername="postgresql")
    dsn = base.render_as_string(hide_password=False)
    name = "fedroc_bench_" + secrets.token_hex(4)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", default="1,4,8")
    args = ap.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    peer = engine_rate(min(args.seconds, 3.0))
    rows = []
    with tempfile.TemporaryDirectory() as tmp, postgres_db() as pg:
        backends = [
            ("sqlite (synchronous=FULL)", str(Path(tmp) / "full.db"), []),
            ("sqlite (synchronous=NORMAL)", str(Path(tmp) / "normal.db"),
             ["--sqlite-synchronous", "NORMAL"]),
        ]  # fmt: skip
        if pg is not None:
            backends.append(("postgresql", pg, []))
        for name, db, extra in backends:
            with serve(db, extra) as url:
                for n in clients:
                    qps, p50, p95 = run_load(url, n, args.seconds)
                    rows.append((name, n, qps, p50, p95))
    print(f"Sequestration service: Thresholdout queries on subsets of 4188 images "
          f"({args.seconds:g} s per row, {os.cpu_count()} cores)")  # fmt: skip
    print(f"peer: engine in-process (no HTTP, no database): {peer:,.0f} queries/s")
    print(f"{'backend':30s} {'clients':>7s} {'queries/s':>10s} {'p50 ms':>8s} {'p95 ms':>8s} "
          f"{'/target 200':>11s} {'/peer':>7s}")  # fmt: skip
    for name, n, qps, p50, p95 in rows:
        print(f"{name:30s} {n:7d} {qps:10.0f} {p50:8.2f} {p95:8.2f} {qps / 200:11.2f} "
              f"{qps / peer:7.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
