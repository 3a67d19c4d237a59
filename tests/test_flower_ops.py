"""A Flower deployment as a hospital's IT team runs it: authenticated sites, recovery.

One TLS deployment (SuperNode authentication, SuperLink state in a database) for the
module. The attacks: a rogue SuperNode that holds the CA certificate and declares itself a
site, with no key or with a key of its own, and an impostor that holds another site's
registered key. Recovery: the SuperLink is killed mid-job and restarted; the next job
succeeds and no site's audit log loses an entry.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr")

from fedroc.datasets import make_multisite
from fedroc.exceptions import SiteError
from fedroc.federation.flower.deploy import (
    QUIET_ENV,
    LocalDeployment,
    free_port,
    node_config_toml,
)
from fedroc.federation.flower.site_config import SiteNodeConfig

TESTS = str(Path(__file__).resolve().parent)
PLUGIN_ENV = {"PYTHONPATH": os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")])}
SIZES = (260, 180, 330)
ROGUE_ROWS = 50


def _write(root: Path, sizes: tuple[int, ...], seed: int, prefix: str = "") -> dict[str, Path]:
    paths = {}
    for name, frame in make_multisite(list(sizes), seed=seed).items():
        paths[name] = root / f"{prefix}{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("flower-ops")
    paths = _write(root, SIZES, seed=31)
    configs = [
        SiteNodeConfig(site=name, data=path, site_modules=("_flower_plugin",))
        for name, path in paths.items()
    ]
    dep = LocalDeployment(configs, root / "deployment", env=PLUGIN_ENV)
    try:
        dep.start(timeout=240)
        yield dep, root
    finally:
        dep.stop()
    # Nothing the deployment started is left, including Flower's own helpers.
    assert dep.processes() == []


class Rogue:
    """A SuperNode started by someone who has only the CA certificate (and maybe a key)."""

    def __init__(
        self, dep: LocalDeployment, root: Path, label: str, site: str, key: Path | None
    ) -> None:
        base = root / f"rogue-{label}"
        base.mkdir(parents=True, exist_ok=True)
        data = _write(base, (ROGUE_ROWS, ROGUE_ROWS), seed=99, prefix="rogue-")["site1"]
        config = base / "node-config.toml"
        config.write_text(node_config_toml({"site": site, "data": str(data)}))
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

    While site1 and site2 are down: a rogue without a key, one with its own key, one whose
    own key an attacker registered under the name "site1" through the Control API, and an
    impostor holding site2's registered key, all declaring site1. None is used as site1.
    """
    from fedroc.federation.flower.deploy import flwr_executable, flwr_home
    from fedroc.federation.flower.identity import generate_node_key, register_sites

    dep, root = deployment
    dep.kill_site("site1")
    dep.kill_site("site2")
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
        "site2-key": Rogue(dep, root, "site2-key", "site1", dep.keys["site2"].private_key),
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
        for kind in ("registered-as-site1", "site2-key"):
            assert rogues[kind].wait_connected(timeout=90), kind
        with pytest.raises(SiteError) as exc:
            dep.submit("sites", timeout=10, discovery_timeout=10)
        message = str(exc.value)
        assert exc.value.site == "site1" and "did not answer" in message
        assert message.count("declares site 'site1'") == 2, message
        assert stolen_name.fingerprint in message  # the rogue's key, named
        assert dep.keys["site2"].fingerprint in message  # the impostor's key (site2's)
        # The real sites come back (site2 once its stolen key is free again); the rogue
        # registered as "site1" is still connected and still claims site1, yet the job
        # runs on the real sites and reports the refusal.
        rogues["site2-key"].stop(graceful=True)
        dep.restart_site("site1")
        dep.restart_site("site2")
        payload = dep.submit("sites", timeout=30)
        assert payload["result"]["sites"] == [
            {"name": n, "n": k} for n, k in zip(dep.sites, SIZES, strict=True)
        ]
        refused = list(payload["refused"].values())
        assert any(stolen_name.fingerprint in why for why in refused), refused
    finally:
        for rogue in rogues.values():
            rogue.stop()
        for name in ("site1", "site2"):
            if not dep.is_alive(name):
                dep.restart_site(name)


SLOW = {"calls": [{"function": "flowertest.slow", "args": {"seconds": 0.3}, "repeat": 60}]}


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

    dep, _ = deployment
    audits = {name: Path(str(config.audit)) for name, config in dep.sites.items()}
    ledgers = {name: ledger_path_for(p) for name, p in audits.items()}
    assert all(p.parent == dep.node_directory(n) for n, p in audits.items())
    dep.submit("evaluate", DP_JOB, modules=["_flower_plugin"], timeout=30)
    spent = {name: read_ledger_status(p).epsilon for name, p in ledgers.items()}
    assert all(e > 0 for e in spent.values()), spent
    before = {name: len(_entries(p)) for name, p in audits.items()}
    outcome: dict[str, BaseException] = {}

    def job() -> None:
        try:
            dep.submit("calls", SLOW, timeout=20, run_timeout=90)
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
