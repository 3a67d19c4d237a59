"""The Flower transport without processes: codec, node config, ClientApp, transport logic.

A fake Grid hands each message to fedroc's real ClientApp, round-tripping contents and the
node's Context through Flower's protobuf serialisation and dropping the process cache
between messages, as Flower's default isolation (a new ClientApp process per message) does.
The integration tests with real SuperLink/SuperNode processes are in test_flower_deploy.py.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")

import _flower_plugin  # noqa: F401  (registers the test site functions and method)
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.common import serde
from flwr.supercore.task_identity import TaskIdentity

from fedroc.datasets import make_multisite
from fedroc.exceptions import DisclosureError, FedrocError, InputError, SiteError
from fedroc.federation import Federation, basic
from fedroc.federation.flower import _codec, site_config
from fedroc.federation.flower.apps import client_app, emit_marked, parse_marked
from fedroc.federation.flower.deploy import (
    FlowerConnection,
    generate_certificates,
    node_config_toml,
)
from fedroc.federation.flower.jobs import run_job
from fedroc.federation.flower.site_config import SiteNodeConfig
from fedroc.federation.flower.transport import (
    ERROR_DISCLOSURE,
    ERROR_MISCONFIGURED,
    FlowerTransport,
    error_from_reply,
)
from fedroc.federation.records import encode
from fedroc.federation.roster import (
    KEY_NAME,
    ROSTER_NAME,
    Roster,
    public_key_bytes,
    write_signing_key,
)
from fedroc.methods import evaluate, get_method, method_names
from fedroc.methods.clustered.models import sample_allocation, sample_binormal
from fedroc.privacy import DisclosurePolicy

TaskIdentity.run_id = 7
TaskIdentity.node_id = 0
TaskIdentity.task_id = 1


def _roundtrip(content: RecordDict) -> RecordDict:
    return serde.recorddict_from_proto(serde.recorddict_to_proto(content))


def _json_tree(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
        )
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


# -- codec -----------------------------------------------------------------------------------
TRICKY = {
    "f64": np.linspace(0, 1, 7),
    "scalar0d": np.array(2.5),
    "bool": np.array([True, False, True]),
    "int32_2d": np.arange(6, dtype=np.int32).reshape(2, 3),
    "bigendian": np.arange(4, dtype=">f8"),
    "strided": np.arange(12.0).reshape(3, 4)[:, ::2],
    "empty": np.zeros(0, dtype=np.uint8),
    "int": 3,
    "huge": 2**70,
    "neg": -(2**63),
    "float": 0.1,
    "nan": float("nan"),
    "inf": float("-inf"),
    "bool_scalar": True,
    "none": None,
    "text": "naïve ✓",
    "bytes": b"\x00\xff",
    "ints": [1, 2, 3],
    "mixed": [1, 2.5, "x", None],
    "bools_ints": [True, 1],
    "floats_nan": [1.0, float("nan")],
    "empty_list": [],
}


def test_codec_round_trips_every_record_value_through_protobuf() -> None:
    content = _roundtrip(_codec.to_recorddict(TRICKY))
    back = _codec.from_recorddict(content)
    assert list(back) == list(TRICKY)  # key order kept
    for key, value in TRICKY.items():
        assert _same(value, back[key]), key
    # The canonical encoding (what both transports count as bytes) is unchanged.
    assert encode(back) == encode(TRICKY)


def test_codec_packs_small_arrays_and_keeps_large_ones_in_an_array_record() -> None:
    """Small arrays travel as bytes in the ConfigRecord (one Flower object, not two per
    array plus chunks); a large one keeps Flower's ArrayRecord. Both come back equal."""
    big = np.arange(_codec.PACK_LIMIT // 8 + 1, dtype=">f8")
    record = {"small": np.arange(6, dtype=np.int16).reshape(2, 3), "big": big}
    content = _roundtrip(_codec.to_recorddict(record))
    assert list(content) == [_codec._VALUES, _codec._ARRAYS]
    assert list(content[_codec._ARRAYS]) == ["big"]
    back = _codec.from_recorddict(content)
    assert all(_same(record[k], back[k]) for k in record)
    small_only = _roundtrip(_codec.to_recorddict({"small": record["small"]}))
    assert list(small_only) == [_codec._VALUES]


def test_codec_refuses_what_records_refuse() -> None:
    with pytest.raises(InputError, match="only numeric arrays"):
        _codec.to_recorddict({"s": np.array(["a"])})
    with pytest.raises(InputError, match="not a fedroc message"):
        _codec.from_recorddict(RecordDict({"x": ConfigRecord({"a": 1})}))


# -- node config -----------------------------------------------------------------------------
def test_node_config_parses_and_round_trips(tmp_path: Path) -> None:
    config = {
        "site": "north",
        "data": str(tmp_path / "north.csv"),
        "label": "y",
        "score": "p",
        "pos-label": 1,
        "min-count": 10,
        "allow-noisy": False,
        "epsilon-limit": 2.0,
        "allowed-functions": "fedroc.info, fedroc.sum",
        "audit": str(tmp_path / "north.jsonl"),
    }
    parsed = SiteNodeConfig.from_node_config(config)
    assert parsed.policy == DisclosurePolicy(
        min_count=10,
        allow_noisy=False,
        epsilon_limit=2.0,
        allowed_functions=frozenset({"fedroc.info", "fedroc.sum"}),
        mpc_proxies="none",  # a node's default: MPC shares for no proxies it did not name
    )
    assert SiteNodeConfig.from_node_config(parsed.to_node_config()) == parsed
    pinned = SiteNodeConfig.from_node_config({**config, "mpc-proxies": "/etc/cluster.toml"})
    assert pinned.policy.mpc_proxies == "/etc/cluster.toml"
    assert SiteNodeConfig.from_node_config(pinned.to_node_config()) == pinned
    text = node_config_toml(parsed.to_node_config())
    import tomllib

    assert tomllib.loads(text) == parsed.to_node_config()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("noise-seed", "7", "noise-seed must be a non-negative integer; got '7'"),
        ("noise-seed", 7.9, "noise-seed must be a non-negative integer; got 7.9"),
        ("noise-seed", True, "noise-seed must be a non-negative integer; got True"),
        ("noise-seed", "", "noise-seed must be a non-negative integer; got ''"),
        ("allowed-functions", "", "allowed-functions names no function"),
        ("allowed-functions", " , ", "allowed-functions names no function"),
        ("allowed-functions", ["fedroc.info"], "allowed-functions must be a comma-separated"),
        ("min-count", "5", "min-count must be an integer; got '5'"),
        ("allow-noisy", "false", "allow-noisy must be true or false; got 'false'"),
        ("epsilon-limit", "inf", "epsilon-limit must be a number; got 'inf'"),
        ("mpc-max-jobs", 2.0, "mpc-max-jobs must be a non-negative integer; got 2.0"),
        ("policy-file", "", "policy-file must be a path"),
        ("policy-file", "/nonexistent/policy.toml", "policy-file: policy file .* does not exist"),
        ("audit", ["a.jsonl"], "audit must be a path"),
    ],
)
def test_a_node_config_value_of_the_wrong_type_is_refused_naming_its_key(key, value, message):
    """Before: noise-seed = "7" and true were taken as 7 and 1, 7.9 as 7, "" ended in
    ValueError; allowed-functions = "" let the node serve nothing while the same empty
    --allowed-functions of ``fedroc flower supernode`` let it serve every function, and a
    TOML list became the names "['fedroc.info']"; policy refusals named the Python field
    (min_count) not the node config key; policy-file = "" ended in IsADirectoryError, a
    missing one in FileNotFoundError."""
    node = {"site": "a", "data": "x.csv"}
    with pytest.raises(InputError, match=message):
        SiteNodeConfig.from_node_config({**node, key: value})


def test_a_nodes_policy_file_takes_no_mpc_proxies_unless_it_names_them(tmp_path: Path) -> None:
    """A policy file read by a node: without ``mpc_proxies`` the node's default ("none"),
    not the in-process default ("any")."""
    node = {"site": "a", "data": "x.csv"}
    plain = tmp_path / "plain.toml"
    plain.write_text("[policy]\nmin_count = 7\n")
    parsed = SiteNodeConfig.from_node_config({**node, "policy-file": str(plain)})
    assert parsed.policy.min_count == 7 and parsed.policy.mpc_proxies == "none"
    named = tmp_path / "named.toml"
    named.write_text('[policy]\nmpc_proxies = "any"\n')
    parsed = SiteNodeConfig.from_node_config({**node, "policy-file": str(named)})
    assert parsed.policy.mpc_proxies == "any"
    assert DisclosurePolicy().mpc_proxies == "any"


def test_a_nodes_mpc_owner_key_is_its_operators_in_every_run(tmp_path: Path) -> None:
    """A cluster's proxies accept only the bundles of owners registered under their public
    keys (``[owners]``), so a node must sign every job with the key its operator
    registered. On Flower a site's state lives in the run's ``Context.state``: before, each
    run began without an owner key and generated a fresh one (two runs, two keys, neither
    registrable: no MPC job with a real cluster could run on a Flower node), and a node
    could authorise one job in its lifetime, with no way to raise it. The node config's
    ``mpc-owner-key`` and ``mpc-max-jobs`` set both."""
    from fedroc.mpc.owner import JobTerms, owner_public_key, write_owner_key
    from fedroc.mpc.seal import new_key, public_bytes

    key_file = tmp_path / "owner.key"
    public = write_owner_key(key_file)
    data = tmp_path / "north.csv"
    rng = np.random.default_rng(5)
    pd.DataFrame({"label": rng.integers(0, 2, 40), "score": rng.random(40)}).to_csv(data)
    config = {
        "site": "north",
        "data": str(data),
        "mpc-proxies": "any",
        "mpc-owner-key": str(key_file),
        "mpc-max-jobs": 2,
        "node-dir": str(tmp_path / "node"),
    }
    parsed = SiteNodeConfig.from_node_config(config)
    assert parsed.policy.mpc_owner_key == str(key_file) and parsed.policy.mpc_max_jobs == 2
    assert SiteNodeConfig.from_node_config(parsed.to_node_config()) == parsed
    site = parsed.build()
    proxies = (public_bytes(new_key()), public_bytes(new_key()))

    def share_in_a_new_run() -> bytes:
        site.state = {}  # each Flower run starts from an empty Context.state
        terms = JobTerms.create(["north", "south"], proxies)
        args = {"job": terms.job, "owners": list(terms.owners), **terms.params()}
        args.update(proxy0_key=proxies[0], proxy1_key=proxies[1])
        return bytes(site.handle("fedroc.mpc.share", args)["owner_key"])

    assert [share_in_a_new_run(), share_in_a_new_run()] == [public, public]
    assert owner_public_key(site.state) == public
    # A third job is over the operator's limit of 2, which the ledger keeps across runs.
    with pytest.raises(FedrocError, match="settings allow 2"):
        share_in_a_new_run()


def test_fedroc_supernode_makes_and_keeps_the_nodes_owner_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fedroc flower supernode --mpc-proxies CLUSTER`` gives the node its owner key: it
    makes NODE_DIR/owner.key on first start and prints the ``[owners]`` line, keeps it on the
    next start, and checks a key given with ``--mpc-owner-key`` (naming the option)."""
    from fedroc.cli.flower_cmd import _owner_key
    from fedroc.mpc.owner import load_owner_key, owner_public_bytes

    home = tmp_path / "node"
    first = _owner_key("north", None, home)
    line = capsys.readouterr().err
    public = owner_public_bytes(load_owner_key(first)).hex()
    assert first == home / "owner.key" and f'"north" = "{public}"' in line.replace("\n", "")
    assert _owner_key("north", None, home) == first
    assert owner_public_bytes(load_owner_key(first)).hex() == public  # kept, not replaced
    bad = tmp_path / "bad.key"
    bad.write_text("not a key")
    with pytest.raises(InputError, match="--mpc-owner-key: owner key file .*bad.key"):
        _owner_key("north", bad, home)


def test_a_node_whose_executor_runs_the_bundles_clientapp_serves_no_fedroc_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run by Flower's own executor (``flwr-clientapp``: a stock node in ``subprocess``
    isolation, which would run an analyst's ClientApp just as well, R46), fedroc's ClientApp
    answers every message with a "misconfigured" error naming the fix, instead of serving:
    the operator learns of the unsafe node at the first job. Before, it served."""
    data = tmp_path / "north.csv"
    make_multisite((30,), seed=1)["site1"].to_csv(data, index=False)
    config = {"site": "north", "data": str(data), "node-dir": str(tmp_path / "node")}

    def hello() -> Message:
        message = Message(RecordDict(), dst_node_id=1, message_type="query.fedroc_hello")
        message.metadata.__dict__["_message_id"] = "m1"
        return client_app(message, Context(1, 1, config, RecordDict(), {}))

    assert not hello().has_error()  # fedroc's own executors: served
    monkeypatch.setattr(sys, "argv", ["/venv/bin/flwr-clientapp", "--token", "t"])
    reply = hello()
    assert reply.has_error() and reply.error.code == ERROR_MISCONFIGURED
    assert "--isolation process beside 'fedroc flower executor'" in reply.error.reason


def test_a_node_with_a_seeded_noise_says_so_in_its_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``noise-seed`` in a node config makes the site's DP noise reproducible (tests and
    simulations); left in a real node's config, it went unmentioned. The node's log says it."""
    data = tmp_path / "north.csv"
    make_multisite((30,), seed=1)["site1"].to_csv(data, index=False)
    config = {"site": "north", "data": str(data), "node-dir": str(tmp_path / "node")}
    with caplog.at_level("WARNING", logger="fedroc.flower"):
        SiteNodeConfig.from_node_config(config).build()
        assert "seeded" not in caplog.text
        SiteNodeConfig.from_node_config({**config, "noise-seed": 3}).build()
    assert "its DP noise is seeded (node config noise-seed = 3)" in caplog.text


def test_a_node_with_a_loosened_policy_says_which_settings_in_its_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A node's operator who sets min-count 1 or clear histograms was told nothing; the node
    now logs each setting that protects its rows less than the default, and a node at the
    defaults logs none (``fedroc flower supernode`` shows the same lines as it starts)."""
    data = tmp_path / "north.csv"
    make_multisite((30,), seed=1)["site1"].to_csv(data, index=False)
    config = {"site": "north", "data": str(data), "node-dir": str(tmp_path / "node")}
    with caplog.at_level("WARNING", logger="fedroc.flower"):
        SiteNodeConfig.from_node_config(config).build()
        assert "site 'north'" not in caplog.text
        loose = {**config, "min-count": 1, "clear-histograms": True}
        SiteNodeConfig.from_node_config(loose).build()
    assert "site 'north': min_count = 1: aggregates of 1 row(s) leave" in caplog.text
    assert "site 'north': clear_histograms = true" in caplog.text


def test_a_node_that_pins_an_mpc_cluster_serves_only_mpc_unless_its_operator_says() -> None:
    """``mpc_only``: unset, on where the cluster is pinned and no allowed_functions are
    listed (the MPC job keeps P and N secret); the operator's ``mpc-only`` decides over it,
    in the node config and back; a value that is not a boolean is refused."""
    node = {"site": "a", "data": "x.csv"}
    pinned = SiteNodeConfig.from_node_config({**node, "mpc-proxies": "/etc/cluster.toml"})
    assert pinned.policy.serves_mpc_only and pinned.policy.mpc_only is None
    assert "mpc-only" not in pinned.to_node_config()
    for value in (False, True):
        chosen = SiteNodeConfig.from_node_config(
            {**node, "mpc-proxies": "/etc/cluster.toml", "mpc-only": value}
        )
        assert chosen.policy.serves_mpc_only is value
        assert SiteNodeConfig.from_node_config(chosen.to_node_config()) == chosen
    assert not SiteNodeConfig.from_node_config(node).policy.serves_mpc_only  # no MPC job
    listed = DisclosurePolicy(mpc_proxies="/c.toml", allowed_functions=frozenset({"fedroc.info"}))
    assert not listed.serves_mpc_only  # the operator's own list decides
    assert not DisclosurePolicy().serves_mpc_only  # in-process: "any" proxies
    with pytest.raises(InputError, match="mpc_only must be true or false; got 'false'"):
        DisclosurePolicy(mpc_only="false")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"site": "a", "data": "x.csv", "min_count": 3}, "unknown node config key"),
        ({"data": "x.csv"}, "needs 'site'"),
        ({"site": "a", "data": "x.csv", "min-count": 0}, "min-count must be a positive integer"),
        ({"site": "a", "data": "x.csv", "min-count": 3, "policy-file": "p.toml"}, "not both"),
    ],
)
def test_node_config_refuses_bad_settings(config: dict[str, Any], match: str) -> None:
    with pytest.raises(InputError, match=match):
        SiteNodeConfig.from_node_config(config)


def test_a_node_without_an_audit_path_keeps_its_ledger_in_its_node_directory(
    site_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A budget limit without an audit path used to be refused, and a node without either
    # kept its spending in the run's state only (attack review, hole 4). Now every node has
    # a ledger file: NODE_DIR/audit.ledger.jsonl, NODE_DIR by default ./fedroc-node-SITE.
    monkeypatch.chdir(tmp_path)
    path = site_files["site1"]
    parsed = SiteNodeConfig.from_node_config({"site": "a", "data": str(path), "epsilon-limit": 1.0})
    assert parsed.audit_path == Path("fedroc-node-a") / "audit.jsonl"
    site = parsed.build()
    assert site.ledger.path is not None
    assert site.ledger.path.resolve() == (tmp_path / "fedroc-node-a" / "audit.ledger.jsonl")
    homed = SiteNodeConfig.from_node_config(
        {"site": "a", "data": str(path), "node-dir": str(tmp_path / "n")}
    ).build()
    assert homed.ledger.path == tmp_path / "n" / "audit.ledger.jsonl"


# -- a fake grid around the real ClientApp ---------------------------------------------------
class FakeGrid:
    """Delivers messages to fedroc's ClientApp as Flower would (one process per message)."""

    def __init__(self, configs: dict[int, dict[str, Any]]) -> None:
        self.contexts = {
            node: serde.context_to_proto(Context(7, node, dict(cfg), RecordDict(), {}))
            for node, cfg in configs.items()
        }
        self.replies: dict[str, Message] = {}
        self.dead: set[int] = set()
        self.delivered: list[tuple[int, str]] = []
        self._ids = itertools.count()

    def get_node_ids(self) -> list[int]:
        return list(self.contexts)

    def push_messages(self, messages: list[Message]) -> list[str]:
        ids = []
        for message in messages:
            mid = f"m{next(self._ids)}"
            message.metadata.__dict__["_message_id"] = mid
            ids.append(mid)
            node = message.metadata.dst_node_id
            self.delivered.append((node, message.metadata.message_type))
            if node in self.dead:
                continue
            site_config._CACHE.clear()  # a fresh ClientApp process
            context = serde.context_from_proto(self.contexts[node])
            wire = Message(
                _roundtrip(message.content),
                dst_node_id=node,
                message_type=message.metadata.message_type,
            )
            wire.metadata.__dict__["_message_id"] = mid
            reply = client_app(wire, context)
            self.contexts[node] = serde.context_to_proto(context)
            if reply.has_content():
                reply = Message(_roundtrip(reply.content), reply_to=wire)
            self.replies[mid] = reply
        return ids

    def pull_messages(self, ids: list[str]) -> list[Message]:
        return [self.replies.pop(i) for i in ids if i in self.replies]


@pytest.fixture(scope="module")
def site_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("flower-unit")
    paths = {}
    for name, frame in make_multisite((120, 90, 150), seed=11).items():
        paths[name] = root / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths


def node_dirs(names: list[str], root: Path) -> dict[str, Path]:
    """Each site's node directory with its secure-aggregation key and a roster of all sites.

    What ``fedroc flower up`` writes; keys that exist are kept.
    """
    homes = {name: root / "nodes" / name for name in names}
    keys = {name: write_signing_key(home / KEY_NAME) for name, home in homes.items()}
    roster = Roster({name: public_key_bytes(key) for name, key in keys.items()})
    for home in homes.values():
        roster.write(home / ROSTER_NAME)
    return homes


def _grid(site_files: dict[str, Path], tmp_path: Path, **policy: Any) -> FakeGrid:
    configs = {}
    homes = node_dirs(list(site_files), tmp_path)
    for k, (name, path) in enumerate(site_files.items()):
        configs[100 + k] = {
            "site": name,
            "data": str(path),
            "node-dir": str(homes[name]),
            "audit": str(tmp_path / f"{name}.jsonl"),
            "site-modules": "_flower_plugin",
            **policy,
        }
    return FakeGrid(configs)


def _inprocess(site_files: dict[str, Path], **kwargs: Any) -> Federation:
    return Federation.from_files(site_files, **kwargs)


def test_transport_discovers_sites_in_requested_order(site_files, tmp_path) -> None:
    grid = _grid(site_files, tmp_path)
    transport = FlowerTransport(grid, sites=["site3", "site1"], timeout=5)
    assert transport.site_names == ["site3", "site1"]
    assert transport.node_ids == {"site3": 102, "site1": 100}
    everyone = FlowerTransport(grid, timeout=5)
    assert everyone.site_names == ["site1", "site2", "site3"]


def test_flower_transport_matches_in_process_moments_exactly(site_files, tmp_path) -> None:
    flower = Federation(FlowerTransport(_grid(site_files, tmp_path), timeout=5))
    local = _inprocess(site_files)
    assert run_job("moments", flower, {}) == run_job("moments", local, {})
    cal_f = basic.distributed_calibration(flower, n_bins=7)
    cal_l = basic.distributed_calibration(local, n_bins=7)
    assert cal_f.suppressed_by_site == cal_l.suppressed_by_site
    assert np.array_equal(cal_f.curve.count, cal_l.curve.count)
    assert np.array_equal(cal_f.curve.mean_predicted, cal_l.curve.mean_predicted, equal_nan=True)


def _leaves(tree: Any, path: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        return {k: v for key in tree for k, v in _leaves(tree[key], f"{path}.{key}").items()}
    if isinstance(tree, list):
        return {k: v for i, x in enumerate(tree) for k, v in _leaves(x, f"{path}[{i}]").items()}
    return {path: tree}


@pytest.mark.parametrize(
    "method",
    [
        m
        for m in method_names()
        if not get_method(m).needs_pooled and not get_method(m).needs_clusters
    ],
)
def test_every_method_gives_the_in_process_result_over_flower_messages(
    method: str, site_files, tmp_path
) -> None:
    """State between calls, seeded DP noise and per-site arguments survive the wire.

    Everything an in-process run reproduces with the same seeds (the sites' own noise seed
    and the analyst's) must come back equal over Flower messages; what differs between two
    in-process runs (timings, quantities that depend on cryptographic randomness) is left
    out, and the AUC is never left out.
    """
    options = dict(get_method(method).demo_options)
    # The MPC run starts its own local proxies: these nodes take the job's proxies (a
    # node's default takes none; docs/privacy.md, R13).
    grid = _grid(site_files, tmp_path, **{"noise-seed": 5, "mpc-proxies": "any"})
    flower = Federation(FlowerTransport(grid, timeout=30))
    got = _leaves(_json_tree(evaluate(flower, method, seed=5, **options).to_dict()))
    runs = [
        evaluate(_inprocess(site_files, noise_seed=5), method, seed=5, **options) for _ in range(2)
    ]
    want, again = (_leaves(_json_tree(r.to_dict())) for r in runs)
    reproducible = {k for k in want if again.get(k) == want[k]}
    assert ".auc" in reproducible and ".released.rounds" in reproducible
    assert set(got) == set(want)
    assert {k: got[k] for k in reproducible} == {k: want[k] for k in reproducible}
    if method == "flowertest.rounds":  # the seed matters, so the equality is not vacuous
        other = evaluate(_inprocess(site_files, noise_seed=6), method, seed=5, **options)
        other = other.to_dict()
        assert other["total"] != runs[0].to_dict()["total"]


@pytest.fixture(scope="module")
def clustered_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("flower-clustered")
    rng = np.random.default_rng(21)
    paths = {}
    for k in range(3):
        m, n = sample_allocation(12, 0.4, rng=rng)
        smp = sample_binormal(m, n, delta=0.9, rho=0.5, rng=rng)
        paths[f"site{k + 1}"] = root / f"site{k + 1}.csv"
        pd.DataFrame(
            {
                "label": smp.y_true.astype(int),
                "score": 1.0 / (1.0 + np.exp(-smp.y_score)),
                "patient": smp.cluster,
            }
        ).to_csv(paths[f"site{k + 1}"], index=False)
    return paths


def test_clustered_method_over_flower_messages(clustered_files, tmp_path) -> None:
    """Paper 3's two secure-aggregation rounds over Flower equal the in-process run."""
    flower = Federation(FlowerTransport(_grid(clustered_files, tmp_path, cluster="patient")))
    got = evaluate(flower, "clustered", n_bins=200, calibration_bins=None).to_dict()
    local = Federation.from_files(clustered_files, cluster="patient")
    want = evaluate(local, "clustered", n_bins=200, calibration_bins=None).to_dict()
    assert got["auc"] == want["auc"]  # counts travel exactly through secure aggregation
    assert got["personalized_auc"] == pytest.approx(want["personalized_auc"], abs=1e-8)
    assert got["n_clusters"] == want["n_clusters"] == 36


def test_clustered_method_in_the_clear_over_flower_relays_the_signed_releases(
    clustered_files, tmp_path
) -> None:
    """Paper 3 in the clear (``clear_histograms``) over Flower: each node signs its round-1
    release with its node key, the signatures travel in the replies as bytes, and round 2
    at every node checks the relayed releases under its roster (C2 in the clear). The
    result equals the in-process clear run exactly (every value travels as float64); a
    relay with one node's release altered is refused, naming the node and the argument."""
    from fedroc.methods.clustered import federated_clustered_auc
    from fedroc.methods.clustered._site import (
        FUNCTION_MOMENTS,
        FUNCTION_SUMMARY,
        release_arguments,
        score_bin_edges,
    )
    from fedroc.privacy import DisclosurePolicy

    policy_file = tmp_path / "policy.toml"
    policy_file.write_text("clear_histograms = true\nmin_count = 1\n")
    grid = _grid(clustered_files, tmp_path, cluster="patient", **{"policy-file": str(policy_file)})
    flower = Federation(FlowerTransport(grid))
    got = federated_clustered_auc(flower, n_bins=200, secure=False).estimate
    local = Federation.from_files(
        clustered_files,
        cluster="patient",
        policy=DisclosurePolicy(min_count=1, clear_histograms=True),
    )
    want = federated_clustered_auc(local, n_bins=200, secure=False).estimate
    assert got.population_auc == want.population_auc
    assert got.personalized_auc == want.personalized_auc
    np.testing.assert_array_equal(got.covariance, want.covariance)
    assert got.obuchowski_se == want.obuchowski_se
    # The round-2 request each node answered carried the three signed releases; the same
    # request with site2's release altered (one count moved between bins) is refused.
    first = flower.call(FUNCTION_SUMMARY, edges=score_bin_edges(200))
    assert all(len(r["signature"]) == 64 for r in first.values())
    relay = release_arguments(first)
    values = relay["release_values"].copy()
    k = int(np.flatnonzero(values[1, :200])[0])
    values[1, k] -= 1.0
    values[1, k + 1] += 1.0
    pooled = {
        key: np.sum([np.asarray(r[key]) for r in first.values()], 0)
        for key in ("hist_pos_used", "hist_neg_used", "hist_pos_all", "hist_neg_all")
    }
    with pytest.raises(DisclosureError, match=r"argument 'release_signatures' do not carry the "
                       r"signature of \['site2'\]") as refused:  # fmt: skip
        flower.call(
            FUNCTION_MOMENTS,
            sites=["site1"],
            edges=score_bin_edges(200),
            **pooled,
            n_clusters=36, big_m=1.0, big_n=1.0, total_used=0.0, population=0.5,
            personalized=0.5, obuchowski=0.5, big_m_all=1.0, big_n_all=1.0,
            **{**relay, "release_values": values},
        )  # fmt: skip
    assert refused.value.site == "site1"


def test_refusals_and_site_errors_name_the_site(site_files, tmp_path) -> None:
    flower = Federation(FlowerTransport(_grid(site_files, tmp_path), timeout=5))
    with pytest.raises(DisclosureError, match="below the minimum of 5") as refused:
        flower.call("flowertest.tiny")
    assert refused.value.site == "site1" and refused.value.function == "flowertest.tiny"
    with pytest.raises(SiteError, match="unknown site function") as unknown:
        flower.call("no.such.function")
    assert unknown.value.site == "site1"
    # An unexpected exception: the analyst learns its type, not its text (paths, values).
    with pytest.raises(SiteError, match="failed with RuntimeError") as boom:
        flower.call("flowertest.boom")
    assert "secret" not in str(boom.value) and "/data" not in str(boom.value)
    # The audit logs recorded every refusal and error.
    entries = [json.loads(x) for x in (tmp_path / "site2.jsonl").read_text().splitlines()]
    assert [e["outcome"] for e in entries] == ["refused", "error", "error"]
    assert "secret path" in entries[-1]["reason"]  # the details stay at the site


def test_misconfigured_node_does_not_reveal_its_settings(site_files, tmp_path) -> None:
    grid = _grid(site_files, tmp_path)
    grid.contexts[101] = serde.context_to_proto(
        Context(7, 101, {"site": "site2", "data": "/srv/hidden/x.csv"}, RecordDict(), {})
    )
    with pytest.raises(SiteError, match="misconfigured") as exc:
        FlowerTransport(grid, timeout=5)
    assert "/srv/hidden" not in str(exc.value)


def test_silent_site_is_named_within_the_timeout(site_files, tmp_path) -> None:
    grid = _grid(site_files, tmp_path)
    flower = Federation(FlowerTransport(grid, timeout=0.3))
    grid.dead.add(101)
    with pytest.raises(SiteError, match=r"site 'site2' .* did not answer 'fedroc.sum'") as exc:
        flower.call("fedroc.sum")
    assert exc.value.site == "site2"
    # Discovery: a site that does not come up is named too; nodes that are gone are
    # skipped when the sites are named (a restarted SuperNode gets a new node id).
    with pytest.raises(SiteError, match=r"\['site2'\] did not answer"):
        FlowerTransport(grid, sites=["site1", "site2"], discovery_timeout=0.3)
    assert FlowerTransport(grid, sites=["site3"], discovery_timeout=0.3).site_names == ["site3"]


def test_discovery_says_at_once_which_wanted_site_no_connected_node_serves(
    site_files, tmp_path
) -> None:
    """`flower run --superlink ... --site site9` said nothing for 60 s, then named site9.
    Once every connected node has named its site, discovery says which wanted sites none
    of them serves (the ServerApp logs it, `flower run` shows it) and waits on, since the
    site may yet connect."""
    grid = _grid(site_files, tmp_path)
    said: list[tuple[float, str]] = []
    start = time.monotonic()
    with pytest.raises(SiteError, match=r"\['site9'\] did not answer within 1 s"):
        FlowerTransport(
            grid,
            sites=["site1", "site9"],
            discovery_timeout=1.0,
            status=lambda text: said.append((time.monotonic() - start, text)),
        )
    [(when, text)] = said  # once: the connected sites did not change
    assert when < 0.5, when
    assert "site(s) ['site9'], which no connected SuperNode serves" in text
    assert "(connected sites: ['site1', 'site2', 'site3'])" in text
    said.clear()
    assert FlowerTransport(grid, sites=["site2"], status=said.append).site_names == ["site2"]
    assert said == []  # nothing to say when the wanted sites are there


def test_status_lines_round_trip_and_are_relayed(capsys, monkeypatch) -> None:
    import fedroc.federation.flower._flwr_run as flwr_run
    from fedroc.federation.flower._marked import emit_status, parse_status
    from fedroc.federation.flower.deploy import _follow_run

    emit_status("waiting for 'ü' [1]")
    line = capsys.readouterr().out
    assert parse_status("\x1b[92mINFO\x1b[0m: " + line) == "waiting for 'ü' [1]"
    for other in ("INFO: x", line[:-5], "FEDROC-STATUS 3", "FEDROC-STATUS {}"):
        assert parse_status(other) is None
    script = (
        "from fedroc.federation.flower._marked import emit_marked, emit_status\n"
        "emit_status('waiting')\n"
        "emit_marked('result', {'ok': 1})\n"
    )
    monkeypatch.setattr(flwr_run, "command", lambda exe: [sys.executable, "-c", script])
    seen: list[Any] = []
    _, finished = _follow_run([], dict(os.environ), 60.0, {}, seen.append)
    assert finished and seen == ["waiting"]


def test_two_nodes_claiming_one_site_are_refused(site_files, tmp_path) -> None:
    grid = _grid(site_files, tmp_path)
    grid.contexts[101] = grid.contexts[100]
    with pytest.raises(SiteError, match="two SuperNodes serve the same site"):
        FlowerTransport(grid, timeout=5)


def test_budget_limit_holds_across_processes_through_the_ledger(site_files, tmp_path) -> None:
    grid = _grid(site_files, tmp_path, **{"epsilon-limit": 2.5})
    flower = Federation(FlowerTransport(grid, timeout=5))
    flower.call("flowertest.open", session="s", edges=np.linspace(0, 1, 5))
    args = {"session": "s", "round": 0, "epsilon": 1.0, "weight": 1.0}
    flower.call("flowertest.noisy", **args)
    flower.call("flowertest.noisy", **args)
    # A new run (fresh Context.state) and fresh processes: the budget is read from the
    # site's ledger beside its audit log.
    fresh = Federation(FlowerTransport(_grid(site_files, tmp_path, **{"epsilon-limit": 2.5})))
    fresh.call("flowertest.open", session="s", edges=np.linspace(0, 1, 5))
    with pytest.raises(DisclosureError, match="budget is epsilon 2.5, it has spent 2 and"):
        fresh.call("flowertest.noisy", **args)
    assert (tmp_path / "site1.ledger.jsonl").exists()


def test_error_reply_mapping() -> None:
    reason = json.dumps({"type": "DisclosureError", "message": "no", "function": "f"})
    exc = error_from_reply("north", ERROR_DISCLOSURE, reason)
    assert isinstance(exc, DisclosureError) and exc.site == "north" and exc.function == "f"
    flower_own = error_from_reply("north", 5, "Node unavailable")
    assert isinstance(flower_own, SiteError) and "north" in str(flower_own)


# -- result channel, certificates, connection ------------------------------------------------
def test_marked_output_survives_a_noisy_log(capsys: pytest.CaptureFixture[str]) -> None:
    payload = {"auc": 0.75, "ci": [0.7, 0.8], "text": "ü", "none": None}
    emit_marked("result", payload)
    line = capsys.readouterr().out
    log = "INFO: starting\n" + line + "\x1b[92mINFO\x1b[0m: done\n"
    assert parse_marked(log) == ("result", payload)
    tampered = line.replace("result ", "result 0", 1)
    assert parse_marked(tampered) is None


def test_progress_lines_round_trip_and_anything_else_is_ignored(capsys) -> None:
    from fedroc.federation import CallProgress
    from fedroc.federation.flower._marked import emit_progress, parse_progress

    step = CallProgress(3, "rocglm.setup", ("north", "south"), None, True)
    emit_progress(step)
    line = capsys.readouterr().out
    relayed = parse_progress("\x1b[92mINFO\x1b[0m: " + line)
    assert relayed is not None
    assert (relayed.round, relayed.function, relayed.sites, relayed.site, relayed.done) == (
        3,
        "rocglm.setup",
        ("north", "south"),
        None,
        True,
    )
    cut = line[: line.index("sites")]
    bad_types = line.replace('["north", "south"]', "[1, 2]")
    for other in ("INFO: starting", cut, bad_types, "FEDROC-PROGRESS [1, 2]", "FEDROC-PROGRESS {}"):
        assert parse_progress(other) is None
    emit_progress(CallProgress(2, "fedroc.brier", ("north",), phase="Brier and calibration"))
    phased = parse_progress(capsys.readouterr().out)
    assert phased is not None and (phased.round, phased.phase) == (2, "Brier and calibration")
    assert relayed.phase is None


def test_follow_run_relays_progress_lines_as_they_come(monkeypatch) -> None:
    """Each call is handed on while `flwr run` still runs (here: before the result line is
    printed, 1 s later), not read from the log once the run is over."""
    import fedroc.federation.flower._flwr_run as flwr_run
    from fedroc.federation.flower._marked import PROGRESS_MARK
    from fedroc.federation.flower.deploy import _follow_run

    call = '{"round": 1, "function": "f", "sites": ["a", "b"], "site": null, "done": %s}'
    script = (
        "import sys, time\n"
        "print('Successfully started run 42', flush=True)\n"
        f"print('{PROGRESS_MARK} ' + '{call % 'false'}', flush=True)\n"
        "print('noise', flush=True)\n"
        f"print('{PROGRESS_MARK} ' + '{call % 'true'}', flush=True)\n"
        "time.sleep(1.0)\n"
        "from fedroc.federation.flower._marked import emit_marked\n"
        "emit_marked('result', {'ok': 1})\n"
    )
    monkeypatch.setattr(flwr_run, "command", lambda exe: [sys.executable, "-c", script])
    seen: list[tuple[float, Any]] = []
    start = time.monotonic()
    text, finished = _follow_run(
        [], dict(os.environ), 60.0, {}, lambda s: seen.append((time.monotonic(), s))
    )
    end = time.monotonic()
    assert finished and parse_marked(text) == ("result", {"ok": 1})
    assert [(s.function, s.sites, s.done) for _, s in seen] == [
        ("f", ("a", "b"), False),
        ("f", ("a", "b"), True),
    ]
    assert all(end - t > 0.5 for t, _ in seen), (start, end, seen)


def test_a_display_that_fails_does_not_stop_reading_the_run(monkeypatch) -> None:
    """The progress callback runs in the thread that reads `flwr run`'s output: one that
    raised (ProgressLine.update on a relayed site not among the call's sites, a ValueError)
    ended the thread, so the result line was never read and the run waited for its
    timeout (here 20 s; without --run-timeout for ever). The line is display only."""
    import fedroc.federation.flower._flwr_run as flwr_run
    from fedroc.cli._common import ProgressLine
    from fedroc.federation.flower._marked import PROGRESS_MARK, parse_progress
    from fedroc.federation.flower.deploy import _follow_run

    odd = '{"round": 1, "function": "f", "sites": ["a"], "site": "z", "done": false}'
    assert parse_progress(f"{PROGRESS_MARK} {odd}") is None  # a site outside its call's sites
    script = (
        f"print('{PROGRESS_MARK} ' + '{odd.replace('z', 'a')}', flush=True)\n"
        "from fedroc.federation.flower._marked import emit_marked\n"
        "emit_marked('result', {'ok': 1})\n"
    )
    monkeypatch.setattr(flwr_run, "command", lambda exe: [sys.executable, "-c", script])
    line = ProgressLine("job", "submitted")

    def failing(step: Any) -> None:
        line.update(step)
        raise RuntimeError("a display that fails")

    start = time.monotonic()
    text, finished = _follow_run([], dict(os.environ), 20.0, {}, failing)
    assert finished and parse_marked(text) == ("result", {"ok": 1})
    assert time.monotonic() - start < 15
    assert line.text == "job: round 1, f at site 'a' (1 of 1)"


def test_certificates_chain_to_the_ca_and_name_the_hosts(tmp_path: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    files = generate_certificates(tmp_path, ["link.example.org", "10.0.0.7"])
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    cert = x509.load_pem_x509_certificate(files.server_cert.read_bytes())
    ca.public_key().verify(  # type: ignore[call-arg]
        cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm)
    )
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", "link.example.org"} <= set(san.get_values_for_type(x509.DNSName))
    ips = {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    assert {"127.0.0.1", "10.0.0.7"} <= ips
    assert oct(files.server_key.stat().st_mode)[-3:] == "600"


@pytest.mark.parametrize("bad", [{"timeout": -5}, {"discovery_timeout": 0}, {"run_timeout": -1}])
def test_submit_refuses_bad_timeouts_before_starting_a_run(bad: dict[str, float]) -> None:
    from fedroc.federation.flower.deploy import FlowerConnection, submit_job

    nowhere = FlowerConnection("127.0.0.1:1", insecure=True)  # nothing listens there
    with pytest.raises(InputError, match=f"{next(iter(bad))} must be positive"):
        submit_job(nowhere, "sites", **bad)


@pytest.mark.parametrize("prints_id", [True, False])
def test_a_run_past_its_limit_is_followed_until_its_id_is_known(monkeypatch, prints_id) -> None:
    """Past --run-timeout, `flwr run` is not killed before it reported the run's id (the run
    could not be stopped then), nor waited for once it has exited."""
    import fedroc.federation.flower._flwr_run as flwr_run
    from fedroc.federation.flower.deploy import _follow_run

    script = "import sys, time\ntime.sleep(1.0)\n"
    if prints_id:
        script += "print('Successfully started run 42', flush=True)\ntime.sleep(60)\n"
    monkeypatch.setattr(flwr_run, "command", lambda exe: [sys.executable, "-c", script])
    start = time.monotonic()
    text, finished = _follow_run([], dict(os.environ), 0.2, {})
    assert not finished and time.monotonic() - start < 15
    assert ("Successfully started run 42" in text) == prints_id


def test_connection_needs_a_ca_unless_insecure(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="root_certificates"):
        FlowerConnection("127.0.0.1:9092")
    conn = FlowerConnection("127.0.0.1:9092", tmp_path / "ca.crt", sites=("a", "b"))
    (tmp_path / "connection.json").write_text(json.dumps(conn.to_dict()))
    assert FlowerConnection.from_file(tmp_path) == conn
    assert 'root-certificates = "' in conn.flower_config()


def test_batch_job_equals_its_jobs_run_one_by_one(site_files) -> None:
    jobs = [
        {"job": "moments"},
        {"job": "sites"},
        {"job": "moments", "options": {"column": "label"}},
    ]
    batch = run_job("batch", _inprocess(site_files), {"jobs": jobs})["results"]
    alone = [run_job(j["job"], _inprocess(site_files), j.get("options", {})) for j in jobs]
    assert batch == alone
    assert batch[0]["released"]["rounds"] == 4  # its own transcript, not the batch's
    with pytest.raises(InputError, match="does not take option"):
        run_job("moments", _inprocess(site_files), {"colum": "label"})


def test_flower_run_gives_the_moments_job_its_bins_only_when_asked(site_files) -> None:
    """`flower run --job moments --bins N` was refused as an evaluate option, though the job
    takes calibration_bins; now --bins reaches it (and only then: a clear curve binds a site
    to clear calibration for its lifetime, so it is not made by default)."""
    from fedroc._results import jsonable
    from fedroc.cli.flower_cmd import _job_options

    asked = _job_options("moments", None, None, 0.95, 4, {})
    assert asked == {"calibration_bins": 4}
    assert _job_options("moments", None, None, 0.95, None, {}) == {}
    got = run_job("moments", _inprocess(site_files), asked)
    assert got["calibration"] is not None
    expected = basic.distributed_calibration(_inprocess(site_files), n_bins=4)
    assert jsonable(got["calibration"]) == jsonable(expected)
    assert len(expected.curve.count) == 4
    assert run_job("moments", _inprocess(site_files), {})["calibration"] is None
    # The evaluate job keeps its default of 10 bins.
    assert _job_options("evaluate", "rocglm", None, 0.95, None, {})["calibration_bins"] == 10


def test_moments_job_gives_the_moments_when_a_small_class_site_refuses_the_brier() -> None:
    """7a117fa (R12-3) holds a clear Brier sum and clear calibration bins to q in each
    class. The moments job asked them in the clear, so one site of 3 positives failed the
    whole job, mean and variance (already released) included, which b9c3982 answered: the
    mean and variance of a column over all rows are no class aggregate. Now the Brier score
    and curve are withheld and the job says why."""
    from fedroc.data import SiteData
    from fedroc.federation import Site

    rng = np.random.default_rng(1)
    sites, scores, data = [], [], []
    for k, n_pos in enumerate([30, 30, 3]):
        y = np.r_[np.ones(n_pos, bool), np.zeros(40, bool)]
        s = np.clip(0.3 + 0.3 * y + 0.1 * rng.normal(size=y.size), 0.0, 1.0)
        data.append(SiteData.from_arrays(y, s))
        sites.append(Site(f"s{k}", data[-1]))
        scores.append(s)
    got = run_job("moments", Federation.from_sites(sites), {"calibration_bins": 4})
    every = np.concatenate(scores)
    assert got["mean"] == pytest.approx(every.mean())
    assert got["variance"] == pytest.approx(every.var(ddof=1))
    assert got["brier"] is None and got["calibration"] is None
    note = " ".join(got["released"]["notes"])
    assert "Brier score and calibration withheld" in note and "'s2'" in note
    assert "positive count is below the minimum" in note
    # A refusal of another kind still ends the job.
    with pytest.raises(DisclosureError, match="not among"):
        strict = DisclosurePolicy(allowed_functions=frozenset({"fedroc.is_probability"}))
        run_job("moments", Federation.from_sites([Site("a", data[0], policy=strict)]), {})


def test_moments_job_gives_the_moments_when_the_sites_answered_bins_the_other_way() -> None:
    """After an evaluate job's secure histogram the sites answer binned counts only that way
    for their lifetime, and refuse a clear calibration curve: the moments job with --bins
    failed whole, the mean, variance and Brier score the sites had released included (the
    docs audit). Now the curve is null, the job says why, and the rest stands."""
    from fedroc.data import SiteData
    from fedroc.federation import Site
    from fedroc.methods import evaluate

    rng = np.random.default_rng(2)
    data = [SiteData.from_arrays(rng.random(120) < 0.4, rng.random(120)) for _ in range(3)]
    fed = Federation.from_sites([Site(f"s{k}", d) for k, d in enumerate(data)])
    evaluate(fed, "histogram")
    got = run_job("moments", fed, {"calibration_bins": 4})
    every = np.concatenate([d.score for d in data])
    assert got["mean"] == pytest.approx(every.mean())
    assert got["variance"] == pytest.approx(every.var(ddof=1))
    labels = np.concatenate([d.label for d in data])
    assert got["brier"] == pytest.approx(np.mean((labels - every) ** 2))
    assert got["calibration"] is None
    note = " ".join(got["released"]["notes"])
    assert note.startswith("calibration curve withheld:") and "through secure aggregation" in note


def test_moments_job_refuses_calibration_bins_the_sites_refuse_before_any_call(site_files):
    """calibration_bins 1 (or 101) was sent to the sites after the mean, variance and
    Brier score were released, and the job failed on their refusal of n_bins."""
    for bins in (1, 101, "10"):
        fed = _inprocess(site_files)
        with pytest.raises(
            InputError, match=f"calibration_bins must be an integer from 2 to 100; got {bins!r}"
        ):
            run_job("moments", fed, {"calibration_bins": bins})
        assert fed.transcript == []


def test_cli_supernode_checks_its_site_before_connecting(tmp_path: Path, capsys) -> None:
    from fedroc.cli import main

    base = ["flower", "supernode", "--superlink", "127.0.0.1:1", "--site", "north"]
    with pytest.raises(SystemExit) as exc:
        main([*base, "--data", str(tmp_path / "x.csv")])
    assert exc.value.code == 2 and "--root-certificates" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main([*base, "--data", str(tmp_path / "missing.csv"), "--insecure"])
    assert exc.value.code == 2 and "missing.csv" in capsys.readouterr().err


def test_cli_supernode_writes_the_operators_mpc_only_into_its_node_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--no-mpc-only`` lets a node that pins an MPC cluster serve the other methods too;
    without it the node config leaves ``mpc-only`` unset (on, for a pinned cluster)."""
    import tomllib

    import fedroc.federation.flower.node as node
    from fedroc.cli import main
    from fedroc.mpc.certs import generate_cluster

    monkeypatch.setattr(node, "supervise", lambda args, **_: 0)
    cluster = generate_cluster(tmp_path / "cluster")
    data = tmp_path / "north.csv"
    pd.DataFrame({"label": [0, 1] * 10, "score": np.linspace(0, 1, 20)}).to_csv(data, index=False)
    base = ["flower", "supernode", "--superlink", "127.0.0.1:1", "--site", "north", "--insecure"]
    base += ["--data", str(data), "--mpc-proxies", str(cluster)]
    for extra, expected in (([], None), (["--no-mpc-only"], False), (["--mpc-only"], True)):
        home = tmp_path / f"node-{expected}"
        try:
            main([*base, *extra, "--node-dir", str(home)])
        except SystemExit as exc:
            assert exc.code in (0, None)
        config = tomllib.loads((home / "node-config.toml").read_text())
        assert config.get("mpc-only") is expected
        policy = SiteNodeConfig.from_node_config(config).policy
        assert policy.serves_mpc_only is (expected is not False)


def test_cli_certs_writes_a_ca_and_a_server_certificate(tmp_path: Path, capsys) -> None:
    from fedroc.cli import main

    main(["flower", "certs", str(tmp_path / "tls"), "--host", "link.example.org"])
    assert {p.name for p in (tmp_path / "tls").iterdir()} == {"ca.crt", "server.pem", "server.key"}
    assert "ca.crt" in capsys.readouterr().out


def test_codec_keeps_header_apart_and_refuses_reserved_keys() -> None:
    content = _roundtrip(_codec.to_recorddict({"a": 1}, {"function": "f", "protocol": 1}))
    assert _codec.read_header(content) == {"function": "f", "protocol": 1}
    assert _codec.from_recorddict(content) == {"a": 1}
    with pytest.raises(InputError, match="NUL"):
        _codec.to_recorddict({"\x00keys": 1})


def test_tuned_node_reads_which_clientapp_a_bundle_names() -> None:
    """The tuned SuperNode runs a task only if its bundle names fedroc's ClientApp."""
    import io
    import zipfile

    from fedroc.federation.flower.deploy import app_pyproject
    from fedroc.federation.flower.node import CLIENT_APP_REF, _clientapp_ref

    def bundle(pyproject: str) -> bytes:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as zf:
            zf.writestr("pyproject.toml", pyproject)
        return buffer.getvalue()

    assert _clientapp_ref(bundle(app_pyproject("0.1.0"))) == CLIENT_APP_REF
    foreign = app_pyproject("1").replace(CLIENT_APP_REF, "evil.app:client_app")
    assert _clientapp_ref(bundle(foreign)) == "evil.app:client_app"
    assert _clientapp_ref(b"not a zip") is None
