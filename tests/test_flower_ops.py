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
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr")

from fedroc.datasets import make_multisite
from fedroc.exceptions import FedrocError, SiteError
from fedroc.federation.flower.deploy import LocalDeployment, QUIET_ENV, node_config_toml
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
        dep.start(timeout=120)
        yield dep, root
    finally:
        dep.stop()


class Rogue:
    """A SuperNode started by someone who has only the CA certificate (and maybe a key)."""

    def __init__(self, dep: LocalDeployment, root: Path, site: str, key: Path | None) -> None:
        base = root / f"rogue-{site}-{'key' if key else 'nokey'}"
        base.mkdir(parents=True, exist_ok=True)
        data = _write(base, (ROGUE_ROWS, ROGUE_ROWS), seed=99, prefix="rogue-")["site1"]
        config = base / "node-config.toml"
        config.write_text(node_config_toml({"site": site, "data": str(data)}))
        assert dep.tls is not None
        cmd = [sys.executable, "-m", "fedroc.federation.flower.node"]
        cmd += ["--superlink", dep.address, "--root-certificates", str(dep.tls.ca_cert)]
        cmd += ["--node-config", str(config), "--host", "127.0.0.1", "--port", "0"]
        if key is not None:
            cmd += ["--auth-supernode-private-key", str(key)]
        from fedroc.federation.flower.deploy import free_port

        cmd[-1] = str(free_port())
        self.log = base / "rogue.log"
        home = base / "home"
        home.mkdir(exist_ok=True)
        env = {**os.environ, **QUIET_ENV, **PLUGIN_ENV, "FLWR_HOME": str(home)}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.text():
                return True
            if self.proc.poll() is not None:
                return needle in self.text()
            time.sleep(0.2)
        return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
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


@pytest.mark.parametrize("with_key", [False, True], ids=["no-key", "own-key"])
def test_rogue_node_with_the_ca_certificate_is_refused(deployment, with_key: bool) -> None:
    """A rogue declaring site1 while site1 is down must not answer for it."""
    dep, root = deployment
    dep.kill_site("site1")
    rogue = Rogue(dep, root, "site1", _rogue_key(root) if with_key else None)
    try:
        # Give the rogue every chance to connect (it registers within a few seconds).
        rogue.wait_for("SuperNode ID:", timeout=30)
        with pytest.raises(SiteError) as exc:
            dep.submit("sites", timeout=15, discovery_timeout=15)
        assert exc.value.site == "site1"
    finally:
        rogue.stop()
        dep.restart_site("site1")
    payload = dep.submit("sites", timeout=30)
    assert payload["result"]["sites"][0] == {"name": "site1", "n": SIZES[0]}
