"""Three OS processes over TLS: the command line, a running cluster, a party that dies.

Each test that starts parties uses :class:`LocalCluster` (127.0.0.1, free ports, throw-away
certificates) and stops exactly the processes it started.
"""

from __future__ import annotations

import json
import time
import warnings

import numpy as np
import pandas as pd
import pytest

from fedroc.cli import main
from fedroc.data import SiteData
from fedroc.exceptions import DisclosureError, InputError, ProtocolError
from fedroc.federation import Federation, Site
from fedroc.metrics import pr_auc, roc_auc
from fedroc.mpc import AucSpec, ClusterConfig, LocalCluster, make_bundle, open_bundle
from fedroc.mpc.auc import owner_records
from fedroc.mpc.bundle import read_bundle, write_bundle
from fedroc.mpc.certs import generate_cluster
from fedroc.mpc.seal import new_key, public_bytes
from fedroc.privacy import DisclosurePolicy

TOL = 1e-12


@pytest.fixture
def site_files(tmp_path):
    rng = np.random.default_rng(11)
    paths = {}
    for name, n in (("north", 60), ("south", 25), ("east", 90)):
        y = rng.integers(0, 2, n)
        p = np.round(np.clip(rng.beta(2, 4, n) + 0.3 * y, 0, 1), 2)  # ties
        path = tmp_path / f"{name}.csv"
        pd.DataFrame({"y": y, "p": p}).to_csv(path, index=False)
        paths[name] = path
    return paths


def pooled_values(paths):
    frames = [pd.read_csv(p) for p in paths.values()]
    y = np.concatenate([f["y"].to_numpy() for f in frames])
    s = np.concatenate([f["p"].to_numpy() for f in frames])
    return roc_auc(y, s), pr_auc(y, s)


def test_evaluate_starts_three_processes_by_default(capsys, site_files):
    args = ["evaluate", "--label", "y", "--score", "p", "--method", "mpc", "--json"]
    for name, path in site_files.items():
        args += ["--site", f"{name}={path}"]
    main(args)
    res = json.loads(capsys.readouterr().out)
    auc, pr = pooled_values(site_files)
    assert res["method"] == "mpc" and res["auc_ci"] is None
    assert abs(res["auc"] - auc) <= TOL and abs(res["pr_auc"] - pr) <= TOL
    assert res["sites"] == [
        {"name": k, "n": n} for k, n in (("north", 60), ("south", 25), ("east", 90))
    ]
    assert res["released"]["kinds"] == {"shares": 3}
    parties = res["mpc"]["parties"]
    assert [p["role"] for p in parties] == ["proxy 0", "proxy 1", "helper"]
    assert all(p["rounds"] > 50 and p["bytes_sent"] > 0 for p in parties)
    notes = " ".join(res["released"]["notes"])
    assert "three local processes" in notes and "MPC party 2 (helper)" in notes


def test_a_running_cluster_serves_several_jobs(capsys, tmp_path, site_files):
    auc, pr = pooled_values(site_files)
    with LocalCluster() as cluster:
        path = str(cluster.config.path)
        # Shares sealed for other keys: refused by proxy 0, and the cluster keeps serving.
        stray = make_bundle("x", [0, 1], [0.1, 0.2], (new_key().public_key(),) * 2, "c")
        with pytest.raises(ProtocolError, match="job refused by proxy 0"):
            cluster.run(AucSpec((2,)), [stray])
        bundles = []
        for name, data in site_files.items():
            out = tmp_path / f"{name}.share"
            main(
                [
                    "mpc",
                    "share",
                    str(data),
                    "--cluster",
                    path,
                    "--owner",
                    name,
                    "--out",
                    str(out),
                    "--label",
                    "y",
                    "--score",
                    "p",
                ]
            )
            bundles.append(str(out))
        capsys.readouterr()
        main(["mpc", "run", *bundles, "--cluster", path, "--json"])
        res = json.loads(capsys.readouterr().out)
        assert abs(res["auc"] - auc) <= TOL and abs(res["pr_auc"] - pr) <= TOL
        args = [
            "evaluate",
            "--label",
            "y",
            "--score",
            "p",
            "--method",
            "mpc",
            "--json",
            "--mpc-cluster",
            path,
        ]
        for name, data in site_files.items():
            args += ["--site", f"{name}={data}"]
        main(args)
        res = json.loads(capsys.readouterr().out)
        assert abs(res["auc"] - auc) <= TOL
        assert "cluster" in " ".join(res["released"]["notes"])
        procs = cluster.procs
    assert [p.returncode for p in procs] == [0, 0, 0]  # shut down cleanly


def test_a_dying_party_stops_the_cluster_with_a_clear_error(site_files):
    frames = [pd.read_csv(p) for p in site_files.values()]
    with LocalCluster(timeout=30.0, die_after_rounds={2: 25}) as cluster:
        keys = cluster.proxy_keys()
        bundles = [make_bundle(f"o{i}", f["y"], f["p"], keys, "ctx") for i, f in enumerate(frames)]
        spec = AucSpec(tuple(b.n for b in bundles))
        start = time.monotonic()
        with pytest.raises(ProtocolError, match="helper") as info:
            cluster.run(spec, bundles)
        assert "MPC job failed at proxy" in str(info.value)
        # The surviving parties stop by themselves, well before their 30 s timeout.
        while any(p.poll() is None for p in cluster.procs) and time.monotonic() - start < 20:
            time.sleep(0.1)
        assert [p.poll() for p in cluster.procs] == [1, 1, 3]


def test_bundles_open_only_for_their_proxy_and_job(tmp_path):
    rng = np.random.default_rng(2)
    y, s = rng.integers(0, 2, 20), rng.normal(size=20)
    k0, k1 = new_key(), new_key()
    bundle = make_bundle("site", y, s, (k0.public_key(), k1.public_key()), "job-1")
    write_bundle(bundle, tmp_path / "b.share")
    back = read_bundle(tmp_path / "b.share")
    assert back == bundle
    total = open_bundle(back, 0, k0) + open_bundle(back, 1, k1)
    assert np.array_equal(total, owner_records(y, s))
    with pytest.raises(ProtocolError, match="sealed for another key"):
        open_bundle(back, 1, k0)
    moved = type(back)(back.owner, back.n, "job-2", back.box0, back.box1)
    with pytest.raises(ProtocolError):
        open_bundle(moved, 0, k0)


def test_share_site_function_releases_sealed_shares_under_the_policy():
    rng = np.random.default_rng(3)
    k0, k1 = new_key(), new_key()
    args = {"context": "c", "proxy0_key": public_bytes(k0), "proxy1_key": public_bytes(k1)}
    data = SiteData.from_arrays(rng.integers(0, 2, 12), rng.normal(size=12))
    fed = Federation.from_sites([Site("a", data)])
    reply = fed.call("fedroc.mpc.share", **args)["a"]
    assert reply["n"] == 12 and reply["box1"].dtype == np.uint8
    assert fed.released().kinds == {"shares": 1}
    small = Site("b", data, policy=DisclosurePolicy(min_count=20))
    with pytest.raises(DisclosureError, match="rows count is 12"):
        small.handle("fedroc.mpc.share", args)
    no_shares = Site("c", data, policy=DisclosurePolicy(allow_shares=False))
    with pytest.raises(DisclosureError, match="forbids releasing shares"):
        no_shares.handle("fedroc.mpc.share", args)


def test_cluster_file_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        ClusterConfig.load(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text('ca = "ca.pem"\n[party.0]\nhost = "x"\nport = 1\ncert = "c"\n')
    with pytest.raises(InputError, match=r"\[party.1\]"):
        ClusterConfig.load(bad)
    path = generate_cluster(tmp_path / "c", ports={0: 7000, 1: 7001, 2: 7002})
    cfg = ClusterConfig.load(path)
    assert cfg.parties[1].port == 7001 and cfg.parties[2].share_public is None
    assert len(public_bytes(cfg.proxy_keys()[0])) == 32


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--method", "mpc", "--mpc-sort", "quick"], "--mpc-sort must be"),
        (["--method", "mpc", "--mpc-sort", "delta", "--mpc-delta", "2"], "--mpc-delta must be"),
        (["--method", "pooled", "--mpc-delta", "3"], "do not apply to --method pooled"),
    ],
)
def test_bad_mpc_options_are_one_line_errors(capsys, site_files, extra, message):
    args = [
        "evaluate",
        "--site",
        f"a={site_files['north']}",
        "--label",
        "y",
        "--score",
        "p",
        *extra,
    ]
    with pytest.raises(SystemExit) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
