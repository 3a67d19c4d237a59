"""Three OS processes over TLS: the command line, a running cluster, a party that dies.

Each test that starts parties uses :class:`LocalCluster` (127.0.0.1, free ports, throw-away
certificates) and stops exactly the processes it started.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import warnings

import numpy as np
import pandas as pd
import pytest

from fedroc.cli import main
from fedroc.data import SiteData
from fedroc.exceptions import DisclosureError, InputError, ProtocolError
from fedroc.federation import Federation, Site
from fedroc.metrics import brier_score, delong, delong_paired, logit_ci, pr_auc, roc_auc
from fedroc.mpc import ClusterConfig, JobTerms, LocalCluster, make_bundle, open_bundle
from fedroc.mpc.auc import owner_records
from fedroc.mpc.bundle import Bundle, _aad, digest, read_bundle, write_bundle
from fedroc.mpc.certs import generate_cluster, owner_key_file
from fedroc.mpc.owner import (
    load_owner_key,
    new_owner_key,
    owner_public_bytes,
    sign_bundle,
    write_owner_key,
)
from fedroc.mpc.seal import new_key, public_bytes, seal
from fedroc.privacy import DisclosurePolicy
from tests.test_json_contract import check

SIZES = (("north", 60), ("south", 25), ("east", 90))


@pytest.fixture
def site_files(tmp_path):
    rng = np.random.default_rng(11)
    paths = {}
    for name, n in SIZES:
        y = rng.integers(0, 2, n)
        p = np.round(np.clip(rng.beta(2, 4, n) + 0.3 * y, 0, 1), 2)  # ties
        p2 = np.round(np.clip(0.5 * p + 0.5 * rng.beta(2, 4, n) + 0.1 * y, 0, 1), 2)
        path = tmp_path / f"{name}.csv"
        pd.DataFrame({"y": y, "p": p, "p2": p2}).to_csv(path, index=False)
        paths[name] = path
    return paths


def pooled_rows(paths):
    frames = [pd.read_csv(p) for p in paths.values()]
    y = np.concatenate([f["y"].to_numpy() for f in frames])
    s = np.concatenate([f["p"].to_numpy() for f in frames])
    return y, s


def rounded(value, bits=14):
    return round(value * 2**bits) / 2**bits


def test_evaluate_starts_three_processes_by_default(capsys, site_files):
    args = ["evaluate", "--label", "y", "--score", "p", "--method", "mpc", "--json"]
    for name, path in site_files.items():
        args += ["--site", f"{name}={path}"]
    main(args)
    res = json.loads(capsys.readouterr().out)
    y, s = pooled_rows(site_files)
    ref = delong(y, s)
    assert res["method"] == "mpc"
    assert res["auc"] == rounded(ref.auc) and res["pr_auc"] == rounded(pr_auc(y, s))
    assert res["auc_variance"] == rounded(ref.variance, 28)
    # The CI comes from the rounded AUC and variance: within their rounding of the exact one.
    logit = ref.confidence_interval(method="logit")  # the MPC method keeps the logit CI
    assert np.allclose(res["auc_ci"], logit, atol=1e-4)
    assert res["auc_ci"] == list(logit_ci(res["auc"], np.sqrt(res["auc_variance"])))
    # Brier score and calibration by secure aggregation, not per-site aggregates.
    assert abs(res["brier"] - brier_score(y, s)) < 1e-6
    assert "secagg" in " ".join(res["released"]["functions"])
    assert "fedroc.brier" not in res["released"]["functions"]
    assert res["sites"] == [{"name": k, "n": n} for k, n in SIZES]
    parties = res["mpc"]["parties"]
    assert [p["role"] for p in parties] == ["proxy 0", "proxy 1", "helper"]
    assert all(p["rounds"] > 50 and p["bytes_sent"] > 0 for p in parties)
    assert res["mpc"]["released"] is True and res["mpc"]["precision_bits"] == 14
    notes = " ".join(res["released"]["notes"])
    assert "three local processes" in notes and "MPC party 2 (helper)" in notes
    assert "class counts stay secret" in notes


@pytest.fixture
def owner_keys(tmp_path):
    """Owner keys as `fedroc mpc certs --owner NAME` writes them: (directory, registry)."""
    directory = tmp_path / "owners"
    directory.mkdir()
    registry = {name: write_owner_key(directory / owner_key_file(name)) for name, _ in SIZES}
    return directory, registry


def test_a_running_cluster_serves_jobs_and_stays_up(capsys, tmp_path, site_files, owner_keys):
    y, s = pooled_rows(site_files)
    key_dir, registry = owner_keys
    with LocalCluster(owners=registry, fail_first_job={1: 20}) as cluster:
        path = str(cluster.config.path)
        proxies = cluster.proxy_key_bytes()
        # A job that fails while running (proxy 1 errs after 20 rounds): all three end the
        # job, the analyst gets the reason, and the cluster keeps serving.
        frames = [pd.read_csv(p) for p in site_files.values()]
        terms = JobTerms.create([n for n, _ in SIZES], proxies, frac_bits=14)
        keys = {n: load_owner_key(key_dir / owner_key_file(n)) for n, _ in SIZES}
        bundles = [
            make_bundle(n, f["y"], f["p"], terms, keys[n])
            for (n, _), f in zip(SIZES, frames, strict=True)
        ]
        with pytest.raises(ProtocolError, match="MPC job failed at proxy 0: .*fault injected"):
            cluster.run(bundles)
        # Nothing was opened, so the same bundles may run again; now they do.
        result = cluster.run(bundles)
        assert result.outputs.auc == rounded(roc_auc(y, s))
        # Shares sealed for other keys: refused by proxy 0 before the others hear of it.
        stray_terms = JobTerms.create(["north", "south"], (public_bytes(new_key()),) * 2)
        stray = [
            make_bundle(n, [0, 1], [0.1, 0.2], stray_terms, keys[n]) for n in ("north", "south")
        ]
        with pytest.raises(ProtocolError, match="refused by proxy 0: .*other proxies"):
            cluster.run(stray)
        # Proxy 1's share sealed for another cluster (the issue's case that stopped all
        # three parties): proxy 0's check passes, proxy 1 refuses, everyone keeps serving.
        mixed_terms = JobTerms.create(["north", "south"], proxies)
        good = [
            make_bundle(n, [0, 1, 1, 0], [0.1, 0.2, 0.3, 0.4], mixed_terms, keys[n])
            for n in ("north", "south")
        ]
        # A buggy owner: its signed terms name this cluster's proxies, but it sealed the
        # share of proxy 1 for another key. Proxy 0's own checks pass.
        box1 = seal(new_key().public_key(), bytes(8 * 3 * 4), _aad(mixed_terms, "south", 4, 1))
        south = good[1]
        signature = sign_bundle(
            keys["south"], mixed_terms, "south", 4, digest(south.box0), digest(box1)
        )
        buggy = Bundle("south", 4, mixed_terms, south.owner_key, signature, south.box0, box1)
        with pytest.raises(ProtocolError, match="refused by proxy 1: .*cannot open a sealed share"):
            cluster.run([good[0], buggy])
        # The command line: owners share offline for one job (comparing the scores p and p2),
        # the analyst runs it.
        job = JobTerms.create(["x", "y"], proxies).job  # any fresh id
        files = []
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
                    "--owner-key",
                    str(key_dir / owner_key_file(name)),
                    "--job",
                    job,
                    "--owners",
                    ",".join(site_files),
                    "--out",
                    str(out),
                    "--label",
                    "y",
                    "--score",
                    "p",
                    "--compare-score",
                    "p2",
                ]
            )
            files.append(str(out))
        capsys.readouterr()
        main(["mpc", "run", *files, "--cluster", path, "--json"])
        res = json.loads(capsys.readouterr().out)
        assert res["auc"] == rounded(roc_auc(y, s)) and res["job"] == job
        # Its keys are those docs/json.md lists; the rows are n, the class counts secret.
        args = ["mpc", "run", "--json"]
        check(res, ["fedroc mpc run --json"], args, "mpc run")
        check(res["mpc"], ["mpc"], args, "mpc run: mpc")
        check(res["comparison"], ["comparison"], args, "mpc run: comparison")
        assert res["n"] == y.size == sum(e["n"] for e in res["sites"])
        assert res["n_pos"] is None and res["n_neg"] is None
        assert res["mpc"]["released"] is True and res["mpc"]["job"] == job
        assert res["auc_se"] == pytest.approx(np.sqrt(res["auc_variance"]))
        run_record = res
        logit = delong(y, s).confidence_interval(method="logit")  # MPC keeps the logit CI
        assert np.allclose(res["auc_ci"], logit, atol=1e-4)
        s2 = np.concatenate([pd.read_csv(p)["p2"].to_numpy() for p in site_files.values()])
        paired = delong_paired(y, s, s2)
        comparison = res["comparison"]
        assert comparison["auc_b"] == rounded(roc_auc(y, s2))
        assert abs(comparison["se"] - paired.se_difference) < 1e-6
        assert abs(comparison["p_value"] - paired.p_value) < 5e-3
        with pytest.raises(SystemExit) as info:
            main(["mpc", "run", *files, "--cluster", path, "--json"])
        assert info.value.code == 2  # with --json the error is the one JSON object
        assert "was run before" in json.loads(capsys.readouterr().out)["error"]
        # evaluate through in-process sites holding the registered owner keys.
        args = ["evaluate", "--label", "y", "--score", "p", "--method", "mpc", "--json"]
        args += ["--mpc-cluster", path, "--mpc-owner-keys", str(key_dir)]
        for name, data in site_files.items():
            args += ["--site", f"{name}={data}"]
        main(args)
        res = json.loads(capsys.readouterr().out)
        assert res["auc"] == rounded(roc_auc(y, s))
        assert "cluster" in " ".join(res["released"]["notes"])
        # The same job's values under the same keys in both commands.
        for key in ("auc", "n", "n_pos", "n_neg", "pr_auc", "auc_variance", "auc_se", "sites"):
            assert res[key] == run_record[key], key
        assert res["auc_ci"] == pytest.approx(run_record["auc_ci"])
        assert set(res["mpc"]) == set(run_record["mpc"])
        procs = cluster.procs
        assert all(p.poll() is None for p in procs)  # still serving after all that
    assert [p.returncode for p in procs] == [0, 0, 0]  # shut down cleanly


def test_a_dying_party_stops_the_cluster_with_a_clear_error(site_files):
    frames = [pd.read_csv(p) for p in site_files.values()]
    keys = {n: new_owner_key() for n, _ in SIZES}
    registry = {n: owner_public_bytes(k) for n, k in keys.items()}
    with LocalCluster(timeout=30.0, die_after_rounds={2: 25}, owners=registry) as cluster:
        terms = JobTerms.create(list(keys), cluster.proxy_key_bytes())
        bundles = [
            make_bundle(n, f["y"], f["p"], terms, keys[n])
            for (n, _), f in zip(SIZES, frames, strict=True)
        ]
        start = time.monotonic()
        with pytest.raises(ProtocolError, match="helper") as info:
            cluster.run(bundles)
        assert "MPC job failed at proxy" in str(info.value)
        # The surviving parties stop by themselves, well before their 30 s timeout.
        while any(p.poll() is None for p in cluster.procs) and time.monotonic() - start < 20:
            time.sleep(0.05)
        assert [p.poll() for p in cluster.procs] == [1, 1, 3]


def test_bundles_open_only_for_their_proxy_and_job(tmp_path):
    rng = np.random.default_rng(2)
    y, s = rng.integers(0, 2, 20), rng.normal(size=20)
    k0, k1 = new_key(), new_key()
    terms = JobTerms.create(["site", "other"], (public_bytes(k0), public_bytes(k1)))
    owner = new_owner_key()
    bundle = make_bundle("site", y, s, terms, owner)
    assert bundle.verify()
    write_bundle(bundle, tmp_path / "b.share")
    back = read_bundle(tmp_path / "b.share")
    assert back == bundle
    total = open_bundle(back, 0, k0) + open_bundle(back, 1, k1)
    assert np.array_equal(total, owner_records(y, s))
    with pytest.raises(ProtocolError, match="sealed for another key"):
        open_bundle(back, 1, k0)
    moved = type(back)(
        back.owner,
        back.n,
        JobTerms.create(["site", "other"], terms.proxy_keys),
        back.owner_key,
        back.signature,
        back.box0,
        back.box1,
    )
    assert not moved.verify()
    with pytest.raises(ProtocolError):
        open_bundle(moved, 0, k0)
    with pytest.raises(InputError, match="not among the job's owners"):
        make_bundle("stranger", y, s, terms, owner)


def test_share_site_function_releases_signed_shares_under_the_policy():
    rng = np.random.default_rng(3)
    k0, k1 = new_key(), new_key()
    proxies = (public_bytes(k0), public_bytes(k1))
    data = SiteData.from_arrays(rng.integers(0, 2, 12), rng.normal(size=12))

    def args(owners):
        terms = JobTerms.create(owners, proxies)
        return {
            "job": terms.job,
            "owners": list(terms.owners),
            "proxy0_key": proxies[0],
            "proxy1_key": proxies[1],
            **terms.params(),
        }

    fed = Federation.from_sites([Site("a", data), Site("b", data)])
    reply = fed.call("fedroc.mpc.share", **args(["a", "b"]))["a"]
    assert reply["n"] == 12 and reply["box1"].dtype == np.uint8 and len(reply["signature"]) == 64
    assert fed.released().kinds == {"shares": 2}
    small = Site("b", data, policy=DisclosurePolicy(min_count=20))
    with pytest.raises(DisclosureError, match="below the site's minimum of 20"):
        small.handle("fedroc.mpc.share", args(["a", "b"]))
    no_shares = Site("c", data, policy=DisclosurePolicy(allow_shares=False))
    with pytest.raises(DisclosureError, match="forbids releasing shares"):
        no_shares.handle("fedroc.mpc.share", args(["a", "c"]))
    site = Site("d", data)
    # The schema is checked before the function runs.
    with pytest.raises(DisclosureError, match="argument 'seed' is not an argument"):
        site.handle("fedroc.mpc.share", {**args(["a", "d"]), "seed": 1})
    with pytest.raises(DisclosureError, match=r"argument 'frac_bits' must lie in \[1, 52\]"):
        site.handle("fedroc.mpc.share", {**args(["a", "d"]), "frac_bits": 80})
    with pytest.raises(DisclosureError, match="argument 'owners' names an item twice"):
        site.handle("fedroc.mpc.share", {**args(["a", "d"]), "owners": ["a", "a", "d"]})
    with pytest.raises(InputError, match="holds one score column"):
        site.handle("fedroc.mpc.share", {**args(["a", "d"]), "compare": True})


def test_owner_key_file_errors_name_the_file(tmp_path):
    with pytest.raises(InputError, match="owner key file .*nope.pem' does not exist"):
        load_owner_key(tmp_path / "nope.pem")
    # Other operating-system errors name the file too (they ended in a traceback).
    with pytest.raises(InputError, match=r"cannot read owner key file .*: Is a directory"):
        load_owner_key(tmp_path)
    (tmp_path / "k.pem").write_text("not a key")
    with pytest.raises(InputError, match="is not a PEM private key"):
        load_owner_key(tmp_path / "k.pem")


def test_cluster_file_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        ClusterConfig.load(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text('ca = "ca.pem"\n[party.0]\nhost = "x"\nport = 1\ncert = "c"\n')
    with pytest.raises(InputError, match=r"\[party.1\]"):
        ClusterConfig.load(bad)
    path = generate_cluster(tmp_path / "c", ports={0: 7000, 1: 7001, 2: 7002}, owner_keys=["a b"])
    cfg = ClusterConfig.load(path)
    assert cfg.parties[1].port == 7001 and cfg.parties[2].share_public is None
    assert len(public_bytes(cfg.proxy_keys()[0])) == 32
    assert list(cfg.owners) == ["a b"] and (tmp_path / "c" / "owner-a_b.key").exists()
    broken = tmp_path / "c" / "broken.toml"
    broken.write_text(path.read_text() + '"x" = "00"\n')
    with pytest.raises(InputError, match=r"\[owners\] 'x' must be an Ed25519 public key"):
        ClusterConfig.load(broken)


def _party_cli(args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "fedroc", "mpc", "party", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_party_command_errors_are_one_line_with_nonzero_status(tmp_path):
    path = generate_cluster(tmp_path / "c", ports={0: 7000, 1: 7001, 2: 7002})
    (tmp_path / "c" / "party0.share.key").unlink()
    done = _party_cli(["--cluster", str(path), "--id", "0"])
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "[party.0]" in done.stderr and "does not exist" in done.stderr
    # A port in use: the party cannot start; it says so in one line naming the address and
    # exits 2, an error the user fixes in the cluster file (as `fedroc sequester serve` does
    # for its --port); it exited 1, the status README keeps for a bug in fedroc.
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        path = generate_cluster(tmp_path / "d", ports={0: port, 1: 7001, 2: 7002})
        done = _party_cli(["--cluster", str(path), "--id", "0", "--startup-timeout", "2"])
    finally:
        busy.close()
    assert done.returncode == 2
    assert "cannot start" in done.stderr and "Traceback" not in done.stderr
    assert f"127.0.0.1:{port}" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_party_starts_fast():
    """Importing what a party runs stays light: no pandas, scipy or the CLI."""
    code = (
        "import sys, fedroc.mpc.party; "
        "print(sorted(m for m in ('pandas', 'scipy', 'typer', 'fedroc.federation.site') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--method", "mpc", "--mpc-sort", "quick"], "sort must be"),
        (["--method", "mpc", "--mpc-sort", "delta", "--mpc-delta", "2"], "delta must be"),
        (["--method", "mpc", "--mpc-precision", "80"], r"--mpc-precision .*got 80"),
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
    assert len(err.strip().splitlines()) == 1
    assert re.search(message, err) and "Traceback" not in err


def test_documented_mpc_commands_name_the_files_certs_writes(tmp_path, monkeypatch, capsys):
    """docs/mpc.md's `fedroc mpc share ... --owner-key owner-a.key` named a file that its own
    `fedroc mpc certs cluster/ ... --owner a` does not write (it writes cluster/owner-a.key):
    followed literally, the command failed with "owner key file 'owner-a.key' does not exist"."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(tmp_path)
    main(["mpc", "certs", "cluster/", "--owner", "a", "--owner", "b"])
    capsys.readouterr()
    for doc in ("README.md", "docs/mpc.md"):
        text = (root / doc).read_text()
        paths = re.findall(r"--(?:owner-key|cluster) (\S+)", text)
        assert any("owner-" in p for p in paths), doc
        for path in paths:
            if "cluster/" in path or "owner-" in path:
                assert (tmp_path / path).exists(), (doc, path)
