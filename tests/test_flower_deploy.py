"""fedroc on a real Flower deployment: a SuperLink and 3 SuperNodes as processes on
loopback, with TLS from a CA generated for the test.

The deployment starts once for the module (fedroc's tuned SuperNodes; the stock
``flower-supernode`` path is exercised by ``test_flower_up_cli_insecure_stock``) and every
process is stopped at the end. The sites load ``_flower_plugin`` (test site functions and
the multi-round test method) through their node config.
"""

from __future__ import annotations

import io
import json
import math
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr")

import _flower_plugin  # noqa: F401

from fedroc.cli import main
from fedroc.datasets import make_multisite
from fedroc.exceptions import DisclosureError, FedrocError, SiteError
from fedroc.federation import Federation, basic
from fedroc.federation.flower.apps import parse_marked
from fedroc.federation.flower.deploy import (
    FlowerConnection,
    LocalDeployment,
    submit_job,
)
from fedroc.federation.flower.jobs import run_job
from fedroc.federation.flower.site_config import SiteNodeConfig
from fedroc.methods import evaluate, get_method, method_names

TESTS = str(Path(__file__).resolve().parent)
PLUGIN_ENV = {"PYTHONPATH": os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")])}
SIZES = (260, 180, 330)
SLOW_SCRIPT = {"calls": [{"function": "flowertest.slow", "args": {"seconds": 0.3}, "repeat": 40}]}


def _write_sites(root: Path) -> dict[str, Path]:
    paths = {}
    for name, frame in make_multisite(SIZES, seed=21).items():
        paths[name] = root / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("flower-deploy")
    paths = _write_sites(root)
    configs = [
        SiteNodeConfig(
            site=name,
            data=path,
            audit=root / "audit" / f"{name}.jsonl",
            site_modules=("_flower_plugin",),
            noise_seed=SEED,  # the sites' own seed: their noise equals the in-process run's
        )
        for name, path in paths.items()
    ]
    dep = LocalDeployment(configs, root / "deployment", env=PLUGIN_ENV)
    try:
        dep.start(timeout=90)
        yield dep, paths, root
    finally:
        dep.stop()


def _close(a: Any, b: Any, path: str = "") -> None:
    """Equal JSON trees, numbers to 1e-12 (relative)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), path
        for key in a:
            _close(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and not isinstance(a, bool):
        assert isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15), (
            path,
            a,
            b,
        )
    else:
        assert a == b, (path, a, b)


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def test_superlink_speaks_tls_with_the_generated_ca(deployment) -> None:
    dep, _, _ = deployment
    conn = dep.connection
    assert not conn.insecure and conn.root_certificates is not None
    context = ssl.create_default_context(cafile=str(conn.root_certificates))
    host, port = conn.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            assert tls.version() in {"TLSv1.2", "TLSv1.3"}
    with pytest.raises(ssl.SSLError), socket.create_connection((host, int(port)), timeout=5) as raw:
        ssl.create_default_context().wrap_socket(raw, server_hostname=host)  # unknown CA


def test_moments_and_brier_equal_in_process(deployment) -> None:
    dep, paths, root = deployment
    payload = dep.submit("moments", timeout=30)
    assert payload["sites"] == list(paths)
    got = payload["result"]
    local = Federation.from_files(paths)
    moments = basic.distributed_variance(local)
    brier, _ = basic.distributed_brier(local)
    assert got["n"] == sum(SIZES) == moments.n
    assert math.isclose(got["mean"], moments.mean, rel_tol=1e-12)
    assert math.isclose(got["variance"], moments.variance, rel_tol=1e-12)
    assert math.isclose(got["brier"], brier, rel_tol=1e-12)
    # What was released is reported identically (same bytes, rounds, kinds).
    reference = run_job("moments", Federation.from_files(paths), {})
    _close(got["released"], _json(reference["released"]))
    # Each site's audit log holds the releases, attributed to the Flower run.
    for name in paths:
        lines = (root / "audit" / f"{name}.jsonl").read_text().splitlines()
        mine = [json.loads(x) for x in lines if f"Flower run {payload['run_id']}" in x]
        assert [e["function"] for e in mine] == [
            "fedroc.sum",
            "fedroc.centered_ss",
            "fedroc.is_probability",
            "fedroc.brier",
        ]
        assert all(e["outcome"] == "released" for e in mine)


# Methods of the papers run here once they are registered (they arrive from other branches);
# flowertest.rounds (multi-round, site state, seeded DP noise) runs always. One Flower run
# (job "batch") computes all of them, to spare a run's start-up per method.
PARITY = [m for m in ("rocglm", "histogram") if m in method_names()] + ["flowertest.rounds"]
SEED = 13


@pytest.fixture(scope="module")
def parity_run(deployment) -> dict[str, Any]:
    dep, _, _ = deployment
    jobs = [
        {
            "job": "evaluate",
            "options": {
                "method": m,
                "seed": SEED,
                "options": dict(get_method(m).demo_options),
            },
        }
        for m in PARITY
    ]
    payload = dep.submit("batch", {"jobs": jobs}, modules=["_flower_plugin"], timeout=60)
    return dict(zip(PARITY, payload["result"]["results"], strict=True))


@pytest.mark.parametrize("method", PARITY)
def test_method_equals_in_process_with_the_same_seed(deployment, parity_run, method) -> None:
    _, paths, _ = deployment
    options = dict(get_method(method).demo_options)
    local = Federation.from_files(paths, noise_seed=SEED)
    want = evaluate(local, method, seed=SEED, **options).to_dict()
    _close(parity_run[method], _json(want))


def test_refusal_comes_back_as_disclosure_error_naming_the_site(deployment) -> None:
    dep, _, root = deployment
    with pytest.raises(DisclosureError, match="below the minimum") as exc:
        dep.submit("calls", {"calls": [{"function": "flowertest.tiny"}]}, timeout=30)
    assert exc.value.site == "site1" and exc.value.function == "flowertest.tiny"
    last = json.loads((root / "audit" / "site1.jsonl").read_text().splitlines()[-1])
    assert last["outcome"] == "refused" and last["function"] == "flowertest.tiny"


def test_cli_runs_a_job_on_the_deployment(deployment, capsys) -> None:
    dep, _, _ = deployment
    main(["flower", "run", "--deployment", str(dep.directory), "--job", "sites", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["sites"] == [{"name": n, "n": s} for n, s in zip(dep.sites, SIZES, strict=True)]
    assert set(out["flower"]["nodes"]) == set(dep.sites)


def test_run_timeout_stops_the_run(deployment) -> None:
    dep, _, _ = deployment
    start = time.monotonic()
    with pytest.raises(FedrocError, match="did not finish within 8 s; it was stopped"):
        dep.submit("calls", SLOW_SCRIPT, timeout=30, run_timeout=8)
    assert time.monotonic() - start < 8 + 10
    # The sites were stopped mid-call; they answer the next run at once.
    start = time.monotonic()
    payload = dep.submit("sites", timeout=10, discovery_timeout=15)
    assert [s["name"] for s in payload["result"]["sites"]] == list(dep.sites)
    assert payload["seconds"]["discovery"] < 10


def test_killed_supernode_stops_the_analyst_naming_it_then_a_new_run_works(deployment) -> None:
    dep, paths, root = deployment
    audit = root / "audit" / "site2.jsonl"
    killed: dict[str, float] = {}

    def slow_calls() -> int:
        text = audit.read_text() if audit.exists() else ""
        return text.count('"function": "flowertest.slow"')

    before = slow_calls()  # earlier tests may have called it too

    def kill_when_running() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if slow_calls() >= before + 2:  # mid-protocol: this run's calls have begun
                dep.kill_site("site2")
                killed["at"] = time.monotonic()
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_when_running)
    watcher.start()
    log = io.StringIO()
    timeout = 4.0
    try:
        with pytest.raises(SiteError, match=r"site 'site2' .*did not answer") as exc:
            dep.submit(
                "calls",
                SLOW_SCRIPT,
                timeout=timeout,
                log=log,
            )
        ended = time.monotonic()
    finally:
        watcher.join()
    assert exc.value.site == "site2"
    assert "at" in killed and not dep.is_alive("site2")
    assert ended - killed["at"] < timeout + 15  # the call's timeout plus the run's teardown
    assert parse_marked(log.getvalue())[0] == "error"  # no result was reported
    # The site comes back (a new SuperNode, a new node id) and the next run is complete.
    dep.restart_site("site2")
    payload = dep.submit("moments", timeout=30)
    assert payload["result"]["n"] == sum(SIZES)
    assert math.isclose(
        payload["result"]["mean"], basic.distributed_mean(Federation.from_files(paths))[0]
    )


def test_flower_up_cli_insecure_stock(tmp_path: Path) -> None:
    """`fedroc flower up` (insecure, stock flower-supernode) and `fedroc flower run`."""
    paths = _write_sites(tmp_path)
    work = tmp_path / "up"
    cmd = [sys.executable, "-m", "fedroc", "flower", "up", "--insecure", "--stock"]
    cmd += ["--dir", str(work), "--duration", "150", "--json"]
    for name in ("site1", "site2"):
        cmd += ["--data", f"{name}={paths[name]}"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        text = ""
        while True:  # one JSON object (indented) once the deployment is up
            line = proc.stdout.readline()
            assert line, "fedroc flower up exited before printing the connection"
            text += line
            if line.startswith("}"):
                break
        info = json.loads(text)
        assert info["insecure"] is True and info["sites"] == ["site1", "site2"]
        conn = FlowerConnection.from_file(work)
        assert conn.address == info["address"]
        payload = submit_job(conn, "sites", timeout=60)
        assert payload["result"]["sites"] == [
            {"name": "site1", "n": SIZES[0]},
            {"name": "site2", "n": SIZES[1]},
        ]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert proc.returncode == 0
    # Every process of the deployment is gone: the SuperLink's port is closed and no
    # SuperNode (their command lines name their node config under `work`) is left.
    host, port = info["address"].rsplit(":", 1)
    with pytest.raises(OSError):
        socket.create_connection((host, int(port)), timeout=2).close()
    leftover = subprocess.run(["pgrep", "-f", str(work)], capture_output=True, text=True).stdout
    assert leftover.strip() == ""
