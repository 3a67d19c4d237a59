"""Site identity, health checks, logs and launchers of the Flower deployment, without
processes of Flower's (fast). The attacks with real SuperLink/SuperNodes are in
test_flower_ops.py."""

from __future__ import annotations

import io
import itertools
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr")

import _flower_plugin  # noqa: F401
from flwr.proto.node_pb2 import NodeInfo
from test_flower import FakeGrid

from fedroc.datasets import make_multisite
from fedroc.exceptions import InputError, SiteError
from fedroc.federation.flower import health, identity
from fedroc.federation.flower._logs import JsonFormatter
from fedroc.federation.flower.deploy import MARKER, _run_status, marked_processes
from fedroc.federation.flower.superlink import executor_command, superlink_args
from fedroc.federation.flower.transport import FlowerTransport


# -- keys ------------------------------------------------------------------------------------
def test_node_key_files_fingerprints_and_reuse(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    key = identity.generate_node_key(tmp_path / "n", "north")
    assert key.private_key is not None and oct(key.private_key.stat().st_mode)[-3:] == "600"
    assert key.public_key.read_text().rstrip().endswith("fedroc-site:north")
    # Flower's tools read these formats; a PEM copy has the same fingerprint.
    private = serialization.load_ssh_private_key(key.private_key.read_bytes(), None)
    pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert identity.fingerprint(pem) == key.fingerprint
    # A second start keeps the site's identity; rotation replaces it.
    assert identity.generate_node_key(tmp_path / "n", "north") == key
    rotated = identity.generate_node_key(tmp_path / "n", "north", overwrite=True)
    assert rotated.fingerprint != key.fingerprint
    with pytest.raises(InputError, match="nope.pub"):
        identity.public_key_fingerprint(tmp_path / "nope.pub")
    (tmp_path / "bad.pub").write_text("not a key")
    with pytest.raises(InputError, match="bad.pub"):
        identity.public_key_fingerprint(tmp_path / "bad.pub")


def test_keys_cli_rotates_the_node_key_and_the_secagg_key_separately(
    tmp_path: Path, capsys
) -> None:
    """`fedroc flower keys`: a second run keeps both keys; --rotate replaces the node key
    only, --rotate-secagg the secure-aggregation key only, and the site's own roster line
    follows it (else the site would refuse to start: its roster names another key)."""
    from _cli import run_main

    from fedroc.federation.flower.site_config import SiteNodeConfig
    from fedroc.federation.roster import KEY_NAME, ROSTER_NAME, load_signing_key, public_key_text

    node = tmp_path / "node"
    base = ["flower", "keys", "--site", "north", "--node-dir", str(node)]

    def keys() -> tuple[str, str]:
        return identity.read_node_key(node, "north").fingerprint, public_key_text(
            load_signing_key(node / KEY_NAME)
        )

    assert run_main(capsys, base)[0] == 0
    first = keys()
    south = public_key_text(b"s" * 32)
    (node / ROSTER_NAME).write_text(
        f'# the peers\n[roster]\nnorth = "{first[1]}"  # us\nsouth = "{south}"\n'
    )
    assert run_main(capsys, base)[0] == 0 and keys() == first
    assert run_main(capsys, [*base, "--rotate"])[0] == 0
    second = keys()
    assert second[0] != first[0] and second[1] == first[1]
    code, out, _ = run_main(capsys, [*base, "--rotate-secagg"])
    third = keys()
    assert code == 0 and third[0] == second[0] and third[1] != second[1]
    assert third[1] in out  # the new roster line to send to the other sites
    roster = (node / ROSTER_NAME).read_text()
    assert f'north = "{third[1]}"  # us' in roster and first[1] not in roster
    assert oct((node / KEY_NAME).stat().st_mode)[-3:] == "600"
    data = tmp_path / "north.csv"
    make_multisite([40, 40], seed=1)["site1"].to_csv(data, index=False)
    site = SiteNodeConfig(site="north", data=data, node_dir=node).build()
    assert site.identity is not None and public_key_text(site.identity.public_key) == third[1]


# -- the ServerApp's identity check ----------------------------------------------------------
@pytest.fixture(scope="module")
def site_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("flower-identity")
    paths = {}
    for name, frame in make_multisite((60, 70, 80), seed=4).items():
        paths[name] = root / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths


class RegisteredGrid(FakeGrid):
    """A fake grid whose nodes carry the SuperLink's record: registered name and key."""

    def __init__(self, configs: dict[int, dict[str, Any]], infos: dict[int, NodeInfo]):
        super().__init__(configs)
        self.infos = infos

    def get_nodes(self) -> list[NodeInfo]:
        return [self.infos[n] for n in self.contexts]


def _pem(key: identity.NodeKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    assert key.private_key is not None
    private = serialization.load_ssh_private_key(key.private_key.read_bytes(), None)
    return private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _deployment(site_files, tmp_path, declared: dict[int, str], registered: dict[int, tuple]):
    keys = {n: identity.generate_node_key(tmp_path / "keys" / n, n) for n in site_files}
    configs = {
        node: {
            "site": site,
            "data": str(site_files[site if site in site_files else "site1"]),
            "node-dir": str(tmp_path / "nodes" / str(node)),
        }
        for node, site in declared.items()
    }
    infos = {
        node: NodeInfo(node_id=node, name=name, public_key=_pem(keys[owner]))
        for node, (name, owner) in registered.items()
    }
    pins = {n: (k.fingerprint,) for n, k in keys.items()}
    return RegisteredGrid(configs, infos), pins, keys


def test_genuine_nodes_are_accepted(site_files, tmp_path) -> None:
    declared = {1: "site1", 2: "site2", 3: "site3"}
    registered = {1: ("site1", "site1"), 2: ("site2", "site2"), 3: ("site3", "site3")}
    grid, pins, _ = _deployment(site_files, tmp_path, declared, registered)
    transport = FlowerTransport(grid, site_keys=pins, require_registered=True, timeout=5)
    assert transport.site_names == ["site1", "site2", "site3"] and transport.refused == {}


def test_a_node_with_another_sites_key_is_refused_naming_it(site_files, tmp_path) -> None:
    # Node 9 holds site2's registered key and declares site1.
    declared = {1: "site1", 2: "site2", 9: "site1"}
    registered = {1: ("site1", "site1"), 2: ("site2", "site2"), 9: ("site2", "site2")}
    grid, pins, keys = _deployment(site_files, tmp_path, declared, registered)
    transport = FlowerTransport(
        grid, sites=["site1", "site2"], site_keys=pins, require_registered=True, timeout=5
    )
    assert transport.node_ids == {"site1": 1, "site2": 2}  # the genuine ones, no DoS
    why = transport.refused[9]
    assert "Flower node 9 declares site 'site1'" in why and keys["site2"].fingerprint in why
    # Without the pins, the registered name alone refuses it too.
    grid, _, _ = _deployment(site_files, tmp_path, declared, registered)
    named = FlowerTransport(grid, sites=["site1"], require_registered=True, timeout=5)
    assert "registered as 'site2'" in named.refused[9]
    # With neither check (an unauthenticated deployment) it would have been a second site1.
    grid, _, _ = _deployment(site_files, tmp_path, declared, registered)
    with pytest.raises(SiteError, match="two SuperNodes serve the same site"):
        FlowerTransport(grid, sites=["site1"], timeout=5)


def test_a_rogue_key_registered_under_a_sites_name_is_refused(site_files, tmp_path) -> None:
    rogue = identity.generate_node_key(tmp_path / "rogue", "site1")
    declared = {9: "site1", 2: "site2"}
    grid, pins, _ = _deployment(site_files, tmp_path, declared, {2: ("site2", "site2")})
    grid.infos[9] = NodeInfo(node_id=9, name="site1", public_key=_pem(rogue))
    with pytest.raises(SiteError) as exc:
        FlowerTransport(
            grid,
            sites=["site1", "site2"],
            site_keys=pins,
            require_registered=True,
            discovery_timeout=0.5,
        )
    assert exc.value.site == "site1"
    assert rogue.fingerprint in str(exc.value) and "refused" in str(exc.value)


def test_an_unregistered_node_and_an_unknown_site_are_refused(site_files, tmp_path) -> None:
    declared = {1: "site1", 5: "elsewhere"}
    grid, pins, _ = _deployment(site_files, tmp_path, declared, {1: ("site1", "site1")})
    grid.infos[5] = NodeInfo(node_id=5)  # self-registered: no name, no key on record
    transport = FlowerTransport(
        grid, sites=["site1"], site_keys=pins, require_registered=True, timeout=5
    )
    assert (
        "declares site 'elsewhere', whose key the analyst has not pinned" in (transport.refused[5])
    )
    assert "pinned for ['site1', 'site2', 'site3']" in transport.refused[5]
    grid, _, _ = _deployment(
        site_files, tmp_path, {1: "site1", 5: "site1"}, {1: ("site1", "site1")}
    )
    grid.infos[5] = NodeInfo(node_id=5)
    unnamed = FlowerTransport(grid, sites=["site1"], require_registered=True, timeout=5)
    assert "not registered under a name" in unnamed.refused[5]


# -- logs, health, launchers -----------------------------------------------------------------
def test_log_records_are_json_lines_with_utc_timestamps() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(component="supernode", site="north"))
    logger = logging.getLogger("fedroc.test.json")
    logger.addHandler(handler)
    logger.propagate = False
    logger.warning("SuperNode ID: %s\n", 42)
    entry = json.loads(stream.getvalue())
    assert entry["message"] == "SuperNode ID: 42" and entry["level"] == "WARNING"
    assert entry["site"] == "north" and entry["component"] == "supernode"
    assert time.strptime(entry["time"][:19], "%Y-%m-%dT%H:%M:%S") and entry["time"].endswith("Z")


def test_node_health_from_its_status_file(tmp_path: Path) -> None:
    assert not health.check_node(tmp_path)["healthy"]
    status = {"site": "north", "node_id": 7, "pid": os.getpid(), "last_contact": time.time()}
    (tmp_path / "status.json").write_text(json.dumps(status))
    assert health.check_node(tmp_path)["healthy"]
    (tmp_path / "status.json").write_text(json.dumps({**status, "last_contact": time.time() - 99}))
    report = health.check_node(tmp_path, max_age=60)
    assert not report["healthy"] and "no contact with the SuperLink" in report["detail"]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "status.json").write_text(json.dumps({**status, "pid": dead.pid}))
    assert "is gone" in health.check_node(tmp_path)["detail"]


def test_superlink_health_of_nothing_listening_is_unhealthy() -> None:
    from fedroc.federation.flower.deploy import free_port

    report = health.check_superlink(f"127.0.0.1:{free_port()}", None, timeout=2)
    assert not report["healthy"]


def test_superlink_launcher_defaults_and_executor_command() -> None:
    args = superlink_args(["--host", "0.0.0.0", "--port", "9093"], warm=True)
    assert "--disable-runtime-dependency-installation" in args
    assert args[-2:] == ["--isolation", "process"]
    assert "--isolation" not in superlink_args(["--port", "9093"], warm=False)
    tls = ["--host", "0.0.0.0", "--port", "9093", "--ssl-ca-certfile", "/tls/ca.crt"]
    cmd = executor_command(tls)
    assert cmd[cmd.index("--runtime-api-address") + 1] == "127.0.0.1:9093"
    assert cmd[-2:] == ["--root-certificates", "/tls/ca.crt"]
    assert executor_command(["--insecure"])[-1] == "--insecure"


def test_the_stock_node_executor_refuses_what_would_run_the_bundles_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fedroc flower executor`` (beside a stock node in process isolation): its options are
    checked before it starts (exit 2, one line naming the option), and its launcher refuses a
    node in ``subprocess`` isolation, where Flower's executor runs the bundle's ClientApp."""
    from _cli import run_main

    from fedroc.federation.flower.executor import run_beside_stock_node

    code, _, err = run_main(capsys, ["flower", "executor"])
    assert code == 2 and "--insecure" in err and len(err.strip().splitlines()) == 1
    missing = tmp_path / "nope.toml"
    code, _, err = run_main(
        capsys, ["flower", "executor", "--insecure", "--node-config", str(missing)]
    )
    assert code == 2 and f"--node-config {str(missing)!r} does not exist" in err
    with pytest.raises(SystemExit, match="runs the ClientApp the run's bundle names"):
        run_beside_stock_node(["--insecure", "--isolation", "subprocess"])


def test_the_executors_start_check_builds_the_site_the_node_then_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fedroc flower executor --node-config F`` checks F by building its site before it
    starts; the executor then built it again (its preload) before the node's first message:
    two loads of the data, two openings of the ledger. The check now builds it as the node
    does (``cached_site``), so the preload and the first message take that one site. What it
    writes (NODE_DIR, by default ./fedroc-node-SITE, and the ledger's limits) is where the
    node's site writes: the check runs in the executor's process, whose ClientApp the node
    config's relative paths are read by."""
    from _cli import run_main
    from flwr.common.config import parse_config_args

    from fedroc.federation.flower import executor as executor_module
    from fedroc.federation.flower import site_config
    from fedroc.federation.flower.executor import HttpExecutor

    data = tmp_path / "rows.csv"
    next(iter(make_multisite((150,), seed=4).values())).to_csv(data, index=False)
    config = tmp_path / "node.toml"
    config.write_text(f'site = "north"\ndata = "{data}"\nmin-count = 5\n')
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    builds: list[Any] = []
    build = site_config.SiteNodeConfig.build

    def counted(self: Any) -> Any:
        builds.append(self.site)
        return build(self)

    monkeypatch.setattr(site_config.SiteNodeConfig, "build", counted)
    monkeypatch.setattr(site_config, "_CACHE", {})
    sites: list[Any] = []

    def serve(address: str, *, node_config: Path, **kwargs: Any) -> None:
        HttpExecutor(address, node_config=node_config).preload()
        # The node's first message: its Context carries Flower's parse of --node-config.
        sites.append(site_config.cached_site(parse_config_args([str(config)])))

    monkeypatch.setattr(executor_module, "serve", serve)
    code, _, err = run_main(
        capsys, ["flower", "executor", "--insecure", "--node-config", str(config)]
    )
    assert code == 0, err
    assert builds == ["north"]  # ["north", "north"] before: the check's, then the preload's
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["node.toml", "rows.csv", "work/fedroc-node-north/audit.ledger.jsonl"]
    assert sites[0].ledger.path.resolve() == work / "fedroc-node-north" / "audit.ledger.jsonl"


def test_the_stock_node_executor_backs_off_while_the_node_has_no_task() -> None:
    """Beside a stock node the executor asks its Runtime API over HTTP: every 50 ms after a
    task, doubling to 0.5 s while none comes (at 50 ms throughout, an idle site would send
    20 requests a second)."""
    import threading

    from fedroc.federation.flower.executor import HttpExecutor

    asks: list[float] = []

    class Idle:
        def AcquireTask(self, request: Any) -> Any:
            asks.append(time.monotonic())

            class Empty:
                token = ""

                def HasField(self, name: str) -> bool:
                    return False

            return Empty()

    executor = HttpExecutor("127.0.0.1:1")
    executor._client = lambda token: Idle()  # type: ignore[method-assign]
    executor.preload = lambda: None  # type: ignore[method-assign]
    thread = threading.Thread(target=executor.run, daemon=True)
    thread.start()
    time.sleep(2.0)
    executor.stop.set()
    thread.join(timeout=5)
    gaps = [b - a for a, b in itertools.pairwise(asks)]
    # 7 asks in 2 s (0, 0.05, 0.15, 0.35, 0.75, 1.25, 1.75); 40 without the back-off.
    assert 3 <= len(asks) <= 10, len(asks)
    assert gaps[0] < 0.4 and gaps[-1] > 0.4, gaps


def test_processes_are_found_by_their_marker() -> None:
    env = {**os.environ, MARKER: "fedroc-test-marker/site1"}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        assert child.pid in marked_processes("fedroc-test-marker")
        assert child.pid in marked_processes("fedroc-test-marker/site1")
        assert child.pid not in marked_processes("fedroc-test-marker/site2")
        assert child.pid not in marked_processes("fedroc-test")
    finally:
        child.kill()
        child.wait()


def test_run_status_never_raises(monkeypatch) -> None:
    from fedroc.federation.flower import deploy

    def fake(output: str):
        return lambda *a, **k: output

    monkeypatch.setattr(deploy, "_flwr", fake('{"success": false, "error-message": "no run"}'))
    assert _run_status("1", {}) == "unknown: no run"
    monkeypatch.setattr(deploy, "_flwr", fake("Traceback: boom"))
    assert _run_status("1", {}).startswith("unknown: `flwr ls` did not print JSON")
    run = '{"runs": [{"status": "finished:failed", "status-details": "ServerApp crashed"}]}'
    monkeypatch.setattr(deploy, "_flwr", fake(run))
    assert _run_status("1", {}) == "finished:failed (ServerApp crashed)"


def test_site_supervisor_restarts_an_exiting_node_and_stops_on_sigterm() -> None:
    import signal
    import threading

    from fedroc.federation.flower.node import supervise

    # A SuperNode that cannot start (an unknown flag) exits at once, with status 2.
    assert supervise(["--no-such-flag"], restart=False, log=lambda line: None) == 2
    lines: list[str] = []
    timer = threading.Timer(180.0, os.kill, (os.getpid(), signal.SIGTERM))

    def log(line: str) -> None:
        lines.append(line)
        if len(lines) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # the operator stops it

    timer.start()  # bounds the test if the node never exits
    try:
        assert supervise(["--no-such-flag"], restart=True, log=log) == 0
    finally:
        timer.cancel()
    assert lines[:2] == [
        "the SuperNode exited with status 2; starting it again in 2 s",
        "the SuperNode exited with status 2; starting it again in 4 s",
    ]
