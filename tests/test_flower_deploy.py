"""fedroc on a real Flower deployment: a SuperLink and 3 SuperNodes as processes on
loopback, with TLS from a CA generated for the test, SuperNode authentication (a key pair
per site, registered and pinned) and the SuperLink's state in a database.

At the end of the module, a hospital IT team's worries: rogue SuperNodes that hold the CA
certificate and declare themselves a site, and a SuperLink killed mid-job (the next job
succeeds; no site's audit log or privacy ledger loses an entry).

The deployment starts once for the module (fedroc's tuned SuperNodes; the stock
``flower-supernode`` path is exercised by ``test_flower_stock.py``) and every
process is stopped at the end. The sites load ``_flower_plugin`` (test site functions and
the multi-round test method) through their node config.
"""

from __future__ import annotations

import io
import json
import math
import os
import signal
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
from _cli import run_main
from _flower_sites import SIZES, write_sites
from test_json_contract import check, check_evaluate

from fedroc.cli import main
from fedroc.datasets import make_multisite
from fedroc.exceptions import DisclosureError, FedrocError, SiteError
from fedroc.federation import Federation, basic
from fedroc.federation.flower.apps import parse_marked
from fedroc.federation.flower.deploy import (
    QUIET_ENV,
    LocalDeployment,
    free_port,
    node_config_toml,
)
from fedroc.federation.flower.jobs import run_job
from fedroc.federation.flower.site_config import SiteNodeConfig
from fedroc.methods import evaluate, get_method, method_names

TESTS = str(Path(__file__).resolve().parent)
PLUGIN_ENV = {"PYTHONPATH": os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")])}
SLOW_SCRIPT = {"calls": [{"function": "flowertest.slow", "args": {"seconds": 0.3}, "repeat": 40}]}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("flower-deploy")
    paths = write_sites(root)
    configs = [
        SiteNodeConfig(
            site=name,
            data=path,
            # No audit path: the audit log and the ledger live in the node's directory.
            site_modules=("_flower_plugin",),
            noise_seed=SEED,  # the sites' own seed: their noise equals the in-process run's
        )
        for name, path in paths.items()
    ]
    dep = LocalDeployment(configs, root / "deployment", env=PLUGIN_ENV)
    try:
        dep.start(timeout=240)
        yield dep, paths, root
    finally:
        dep.stop()
    # Nothing the deployment started is left, including Flower's own helpers.
    assert dep.processes() == []


def _audit(dep: LocalDeployment, name: str) -> Path:
    return Path(str(dep.sites[name].audit))


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
    dep, paths, _ = deployment
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
        lines = _audit(dep, name).read_text().splitlines()
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
    # The same calls in the same order as the batch: a seeded site's noise also counts the
    # DP releases in its ledger (A2 in tests/test_attacks_review2.py), so each method meets
    # the ledgers the batch's earlier methods left.
    local = Federation.from_files(paths, noise_seed=SEED)
    for m in PARITY[: PARITY.index(method) + 1]:
        options = dict(get_method(m).demo_options)
        want = evaluate(local, m, seed=SEED, **options).to_dict()
    _close(parity_run[method], _json(want))


def test_refusal_comes_back_as_disclosure_error_naming_the_site(deployment) -> None:
    dep, _, _ = deployment
    with pytest.raises(DisclosureError, match="below the minimum") as exc:
        dep.submit("calls", {"calls": [{"function": "flowertest.tiny"}]}, timeout=30)
    assert exc.value.site == "site1" and exc.value.function == "flowertest.tiny"
    last = json.loads(_audit(dep, "site1").read_text().splitlines()[-1])
    assert last["outcome"] == "refused" and last["function"] == "flowertest.tiny"


def test_cli_runs_a_job_on_the_deployment(deployment, capsys) -> None:
    dep, _, _ = deployment
    main(["flower", "run", "--deployment", str(dep.directory), "--job", "sites", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["sites"] == [{"name": n, "n": s} for n, s in zip(dep.sites, SIZES, strict=True)]
    assert set(out["flower"]["nodes"]) == set(dep.sites)


def test_cli_run_shows_each_call_of_the_serverapp_on_a_terminal(deployment, capsys, monkeypatch):
    """The job runs in the ServerApp's process; its log now relays each call to the sites, and
    `fedroc flower run` shows them as `fedroc evaluate` does in process (before: a spinner
    saying only "running moments on Flower (ADDRESS)" for the whole run)."""
    import io

    from rich.console import Console

    from fedroc.cli import flower_cmd

    dep, _, _ = deployment
    tty = io.StringIO()
    monkeypatch.setattr(flower_cmd, "err", Console(file=tty, force_terminal=True, width=200))
    main(["flower", "run", "--deployment", str(dep.directory), "--job", "moments", "--json"])
    result = json.loads(capsys.readouterr().out)  # stdout: the one JSON object
    shown = tty.getvalue()
    functions = result["released"]["functions"]
    assert functions
    for function in functions:
        assert f", {function} at {len(dep.sites)} site(s)" in shown
        assert f", {function} answered by {len(dep.sites)} site(s)" in shown
    assert "moments: round 1, " in shown


def test_cli_gives_the_evaluate_job_the_method_options(deployment, capsys) -> None:
    """`flower run` carried no method option but --sensitivity: a hospital network could not
    choose the histogram's DP epsilon over Flower. Now `--dp-epsilon 1` reaches the sites
    (each is charged 2: a moved row changes two counts), its JSON keys are those docs/json.md
    lists, and a bad --dp-mode is refused before any run."""
    dep, _, _ = deployment
    args = ["flower", "run", "--deployment", str(dep.directory), "--method", "histogram"]
    args += ["--dp-epsilon", "1", "--quantiles", "64", "--max-fpr", "0.5"]
    code, out, err = run_main(capsys, [*args, "--json"])
    assert code == 0, err
    result = json.loads(out)
    assert result["mode"] == "distributed-dp" and result["epsilon"] == 1.0
    assert result["quantiles"] == 64 and result["max_fpr"] == 0.5
    charged = result["released"]["epsilon"]
    assert set(charged) == set(dep.sites)
    assert all(math.isclose(v, 2.0) for v in charged.values()), charged
    run_id = result["flower"]["run_id"]  # the run's lines in each site's audit log
    for name in dep.sites:  # each site's own log of the release says the same
        lines = _audit(dep, name).read_text().splitlines()
        mine = [json.loads(x) for x in lines if f"Flower run {run_id}" in x]
        spent = sum(event["epsilon"] for entry in mine for event in entry["dp"])
        assert math.isclose(spent, 2.0), (name, spent)
    # The keys docs/json.md gives `fedroc evaluate --json` with these options, and `flower`;
    # the ServerApp holds no rows, as `evaluate --sites FILE` (no errors against them).
    flower = result.pop("flower")
    check_evaluate(result, [*args, "--sites"])
    check(flower, ["flower of flower run"], args, "flower run")
    # A bad value: one line naming the option and the value, nothing submitted.
    before = {name: _audit(dep, name).read_text() for name in dep.sites}
    code, out, err = run_main(capsys, [*args, "--dp-mode", "central"])
    assert (code, out) == (2, "")
    assert err == "error: --dp-mode must be one of ['distributed', 'local']; got 'central'\n"
    assert {name: _audit(dep, name).read_text() for name in dep.sites} == before


def test_submit_relays_the_calls_in_order_before_the_result(deployment) -> None:
    dep, _, _ = deployment
    seen: list[Any] = []
    payload = dep.submit("moments", progress=seen.append, timeout=30)
    starts = [s for s in seen if not s.done]
    assert [s.round for s in starts] == list(range(1, len(starts) + 1))
    assert [s.function for s in starts] == [s.function for s in seen if s.done]
    assert set(payload["result"]["released"]["functions"]) <= {s.function for s in starts}
    assert all(s.sites == tuple(payload["sites"]) for s in seen)


def _slow_calls(dep: LocalDeployment, name: str, requester: str = "") -> int:
    """Count the slow calls in a site's audit log (of one requester, if given)."""
    path = _audit(dep, name)
    lines = path.read_text().splitlines() if path.exists() else []
    return sum(
        '"function": "flowertest.slow"' in line and f'"requester": "{requester}' in line
        for line in lines
    )


def test_run_timeout_stops_the_run(deployment) -> None:
    dep, _, _ = deployment
    start = time.monotonic()
    with pytest.raises(FedrocError, match="did not finish within 8 s; it was stopped"):
        dep.submit("calls", SLOW_SCRIPT, timeout=30, run_timeout=8, requester="stopped")
    assert time.monotonic() - start < 8 + 10
    # The run is stopped: its calls end (a call a site had already taken may still finish).
    at_stop = {name: _slow_calls(dep, name, "stopped") for name in dep.sites}
    # The sites were stopped mid-call; they answer the next run at once.
    start = time.monotonic()
    payload = dep.submit("sites", timeout=10, discovery_timeout=15)
    assert [s["name"] for s in payload["result"]["sites"]] == list(dep.sites)
    assert payload["seconds"]["discovery"] < 10
    time.sleep(1.0)
    after = {name: _slow_calls(dep, name, "stopped") for name in dep.sites}
    assert all(after[n] <= at_stop[n] + 1 for n in dep.sites), (at_stop, after)


def test_killed_supernode_stops_the_analyst_naming_it_then_a_new_run_works(deployment) -> None:
    dep, paths, _ = deployment
    killed: dict[str, float] = {}

    def kill_when_running() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            # Mid-protocol: this run's calls have begun (its own requester: calls of an
            # earlier run that a site was still finishing do not count).
            if _slow_calls(dep, "site2", "killed") >= 2:
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
            dep.submit("calls", SLOW_SCRIPT, timeout=timeout, log=log, requester="killed")
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


# -- a hospital's IT team: rogue nodes, crashes --------------------------------------------
class Rogue:
    """A SuperNode started by someone who has only the CA certificate (and maybe a key)."""

    def __init__(
        self, dep: LocalDeployment, root: Path, label: str, site: str, key: Path | None
    ) -> None:
        base = root / f"rogue-{label}"
        base.mkdir(parents=True, exist_ok=True)
        frame = make_multisite([50, 50], seed=99)["site1"]  # the rogue's own 50 rows
        data = base / "rogue.csv"
        frame.to_csv(data, index=False)
        config = base / "node-config.toml"
        config.write_text(
            node_config_toml({"site": site, "data": str(data), "node-dir": str(base / "node")})
        )
        assert dep.tls is not None
        cmd = [sys.executable, "-m", "fedroc.federation.flower.node"]
        cmd += ["--superlink", dep.address, "--root-certificates", str(dep.tls.ca_cert)]
        cmd += ["--node-config", str(config), "--host", "127.0.0.1", "--port", str(free_port())]
        if key is not None:
            cmd += ["--auth-supernode-private-key", str(key)]
        self.log = base / "rogue.log"
        home = base / "home"
        home.mkdir(exist_ok=True)
        self.cmd = cmd
        self.env = {**os.environ, **QUIET_ENV, **PLUGIN_ENV, "FLWR_HOME": str(home)}
        self.proc = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as out:
            return subprocess.Popen(
                self.cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_connected(self, timeout: float) -> bool:
        """Wait until the SuperLink took the rogue; start it again when it gives up (a key
        whose node crashed moments ago is refused until it times out at the SuperLink)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "SuperNode ID:" in self.text():
                return True
            if self.proc.poll() is not None:
                time.sleep(2.0)
                self.proc = self._start()
            time.sleep(0.2)
        return False

    def stop(self, graceful: bool = False) -> None:
        """Kill the rogue; ``graceful``: SIGTERM, so that it signs off at the SuperLink."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM if graceful else signal.SIGKILL)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


def _rogue_key(root: Path) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP384R1())
    path = root / "rogue.key"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    return path


def test_rogue_nodes_are_refused_and_the_refusal_names_them(deployment) -> None:
    """Rogue SuperNodes holding the CA certificate cannot answer as a site.

    While site1 is down: a rogue without a key, one with its own key, and one whose own key
    an attacker registered under the name "site1" through the Control API, all declaring
    site1. None is used as site1. (A node holding another site's registered key is refused
    the same way: test_flower_identity.py, on the SuperLink's node records.)
    """
    from fedroc.federation.flower.deploy import flwr_executable, flwr_home
    from fedroc.federation.flower.identity import generate_node_key, register_sites

    dep, _, root = deployment
    dep.kill_site("site1")
    # An attacker who can reach the Control API registers its own key as "site1".
    stolen_name = generate_node_key(root / "attacker", "site1")
    env = {**os.environ, **flwr_home(dep.connection, root / "attacker")}
    register_sites(
        [flwr_executable()], env, {"site1": stolen_name.public_key}, connection_name="fedroc"
    )
    rogues = {
        "no-key": Rogue(dep, root, "no-key", "site1", None),
        "own-key": Rogue(dep, root, "own-key", "site1", _rogue_key(root)),
        "registered-as-site1": Rogue(dep, root, "named", "site1", stolen_name.private_key),
    }
    try:
        # The SuperLink refuses the unregistered keys outright: those rogues exit, and
        # their logs carry the SuperLink's refusal.
        for kind in ("no-key", "own-key"):
            rogue = rogues[kind]
            assert rogue.proc.wait(timeout=90) != 0, kind
            text = rogue.text()
            assert "Failed to initialize the connection to the SuperLink" in text, kind
            assert "SuperNode ID:" not in text, kind
        # The registered keys connect; the ServerApp refuses them, naming node and site.
        assert rogues["registered-as-site1"].wait_connected(timeout=90)
        with pytest.raises(SiteError) as exc:
            dep.submit("sites", timeout=10, discovery_timeout=10)
        message = str(exc.value)
        assert exc.value.site == "site1" and "did not answer" in message
        assert "declares site 'site1'" in message, message
        assert stolen_name.fingerprint in message  # the rogue's key, named
        # The real site comes back; the rogue registered as "site1" is still connected and
        # still claims site1, yet the job runs on the real sites and reports the refusal.
        dep.restart_site("site1", timeout=90)
        payload = dep.submit("sites", timeout=30)
        assert payload["result"]["sites"] == [
            {"name": n, "n": k} for n, k in zip(dep.sites, SIZES, strict=True)
        ]
        refused = list(payload["refused"].values())
        assert any(stolen_name.fingerprint in why for why in refused), refused
    finally:
        for rogue in rogues.values():
            rogue.stop()
        if not dep.is_alive("site1"):
            dep.restart_site("site1", timeout=90)


def test_runtime_apis_refuse_whoever_lacks_the_executors_secret(deployment) -> None:
    """Nobody but the executors can take tasks from the Runtime APIs.

    The SuperLink serves its Runtime API on the port the sites reach: with only the CA
    certificate, a site (or anyone on the network) called AcquireTask and took the analyst's
    ServerApp task (the job failed, "No heartbeat received from the task"; a taker could
    answer in its place). A node's Runtime API (loopback) handed its ClientApp tasks to any
    local process. Both now demand Flower's SuperExec secret, which only fedroc's executors
    hold (the node's executor calls it in process).
    """
    import httpx
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore.constant import TaskType

    from fedroc.federation.flower.serverexec import _client

    dep, _, _ = deployment
    assert dep.tls is not None
    node_port = dep._node("site1").cmd[dep._node("site1").cmd.index("--port") + 1]
    for address, ca, task_type in (
        (dep.address, str(dep.tls.ca_cert), TaskType.SERVER_APP),
        (f"127.0.0.1:{node_port}", None, TaskType.CLIENT_APP),
    ):
        with pytest.raises(httpx.HTTPStatusError) as exc:
            _client(address, ca).AcquireTask(AcquireTaskRequest(supported_task_types=[task_type]))
        assert exc.value.response.status_code == 401, address
    # The executors still take their tasks: a job runs.
    payload = dep.submit("sites", timeout=30)
    assert [s["name"] for s in payload["result"]["sites"]] == list(dep.sites)


SLOW_KILL = {"calls": [{"function": "flowertest.slow", "args": {"seconds": 0.3}, "repeat": 60}]}


def _entries(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


DP_JOB = {"method": "flowertest.rounds", "seed": 3, "options": {"rounds": 2}}


def test_superlink_killed_mid_job_recovers_and_no_audit_or_ledger_entry_is_lost(
    deployment,
) -> None:
    """A SuperLink crash mid-job, then a site's SuperNode crash: nothing a site recorded is
    lost. The privacy ledger (beside the audit log, in the node's directory) keeps counting
    across both: the budget a site spent before is still spent after."""
    from fedroc.privacy.ledger import ledger_path_for, read_ledger_status

    dep, _, _ = deployment
    audits = {name: _audit(dep, name) for name in dep.sites}
    ledgers = {name: ledger_path_for(p) for name, p in audits.items()}
    assert all(p.parent == dep.node_directory(n) for n, p in audits.items())
    dep.submit("evaluate", DP_JOB, modules=["_flower_plugin"], timeout=30)
    spent = {name: read_ledger_status(p).epsilon for name, p in ledgers.items()}
    assert all(e > 0 for e in spent.values()), spent
    before = {name: len(_entries(p)) for name, p in audits.items()}
    outcome: dict[str, BaseException] = {}

    def job() -> None:
        try:
            dep.submit("calls", SLOW_KILL, timeout=20, run_timeout=90)
        except BaseException as exc:  # the job must fail, not hang
            outcome["error"] = exc

    runner = threading.Thread(target=job)
    runner.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # mid-job: the sites are answering slow calls
        if all(len(_entries(p)) >= before[n] + 3 for n, p in audits.items()):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the job did not reach the sites")
    old_link = dep.superlink_pid
    old_helpers = set(dep.processes("superlink")) - {old_link}
    assert old_helpers  # Flower's SuperExec or fedroc's executor, and the job's ServerApp
    os.kill(old_link, signal.SIGKILL)  # a crash: only the SuperLink; its helpers linger
    at_kill = {name: _entries(p) for name, p in audits.items()}
    ledger_at_kill = {name: p.read_text() for name, p in ledgers.items()}
    runner.join(timeout=150)
    assert not runner.is_alive() and "error" in outcome
    # `flower up` notices and restarts it; the sites reconnect on their own.
    restarted = time.time()
    events: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        events += dep.supervise()
        if dep.is_alive("superlink") and all(
            dep.node_status(n).get("last_contact", 0) > restarted + 1 for n in dep.sites
        ):
            break
        time.sleep(0.5)
    assert any(e.startswith("the SuperLink exited with status -9") for e in events), events
    assert dep.superlink_pid != old_link
    assert not old_helpers & set(dep.processes("superlink"))  # no orphans of the old one
    # A site's node crashes too and comes back (same key, same node directory).
    dep.kill_site("site2")
    dep.restart_site("site2", timeout=90)
    payload = dep.submit("evaluate", DP_JOB, modules=["_flower_plugin"], timeout=30)
    assert payload["result"]["method"] == "flowertest.rounds"
    for name, path in audits.items():
        after = _entries(path)
        assert after[: len(at_kill[name])] == at_kill[name], name  # nothing lost or rewritten
        assert after[-1]["outcome"] == "released"
        ledger = ledgers[name].read_text()
        assert ledger.startswith(ledger_at_kill[name]), name
        # The second DP job was charged on top of the first: the budget was not reset.
        assert read_ledger_status(ledgers[name]).epsilon > spent[name] + 1e-9, name
