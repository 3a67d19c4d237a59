"""A new user's walkthrough of the MPC cluster (README "Exact AUC by secure 3-party
computation", docs/mpc.md): the operator's and the analyst's mistakes and interruptions,
each answered with one line that names the file, the party or the job, and no more than
the analyst may learn.

Each test says what the user saw before. Processes listen on loopback, on free ports, and
are stopped by the test within its timeout.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fedroc.mpc import JobTerms, LocalCluster, make_bundle
from fedroc.mpc.bundle import write_bundle
from fedroc.mpc.certs import generate_cluster
from fedroc.mpc.cluster import free_ports
from fedroc.mpc.owner import new_owner_key, owner_public_bytes
from tests._cli import run_main

pytestmark = pytest.mark.timeout(180)


def _party(cluster: Path, pid: int, *extra: str) -> subprocess.Popen[str]:
    """``fedroc mpc party`` as an operator starts it (SIGINT at its default, as in a shell)."""
    cmd = [sys.executable, "-m", "fedroc", "mpc", "party", "--cluster", str(cluster)]
    return subprocess.Popen(
        [*cmd, "--id", str(pid), *extra],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        # A runner that ignores SIGINT (a background job) passes SIG_IGN on; a shell's
        # foreground command has it at its default.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _stop_all(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait(timeout=10)


def _wait_line(proc: subprocess.Popen[str], text: str, timeout: float = 60) -> list[str]:
    """Read ``proc``'s stderr until a line contains ``text``; the lines read."""
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"no line with {text!r} from the party; it said: {lines}")


def test_ctrl_c_at_a_party_mid_job_says_so_and_releases_nothing(tmp_path):
    """Before: Ctrl-C at proxy 1 in the middle of a job ended it with status 130 and not a
    word on its terminal (typer turns KeyboardInterrupt into a silent exit 130)."""
    keys = {n: new_owner_key() for n in ("a", "b")}
    path = generate_cluster(
        tmp_path / "c",
        ports=dict(enumerate(free_ports(3))),
        owners={n: owner_public_bytes(k) for n, k in keys.items()},
    )
    procs = [_party(path, pid, "--startup-timeout", "60") for pid in range(3)]
    try:
        for p in procs:
            _wait_line(p, "ready on")
        rng = np.random.default_rng(5)
        terms = JobTerms.create(["a", "b"], _proxy_keys(path))
        files = []
        for name, key in keys.items():
            y = rng.integers(0, 2, 30000)
            bundle = make_bundle(name, y, rng.normal(size=y.size) + y, terms, key)
            write_bundle(bundle, tmp_path / f"{name}.share")
            files.append(str(tmp_path / f"{name}.share"))
        analyst = subprocess.Popen(
            [sys.executable, "-m", "fedroc", "mpc", "run", *files, "--cluster", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_line(procs[1], f"job {terms.job}")
        procs[1].send_signal(signal.SIGINT)
        _, said = procs[1].communicate(timeout=30)
        assert procs[1].returncode == 130
        assert "Traceback" not in said
        assert f"interrupted (Ctrl-C) during job {terms.job}" in said, said
        _, told = analyst.communicate(timeout=60)
        assert analyst.returncode != 0 and "proxy 1" in told, told
        assert "Traceback" not in told
        # Before: 'MPC job failed at proxy 0: proxy 0: connection from proxy 1 closed'.
        assert "proxy 0: proxy 0" not in told, told
        assert "nothing was released; the same bundles may be submitted again" in told, told
        for p in (procs[0], procs[2]):
            p.wait(timeout=30)
            assert p.returncode == 1  # a lost peer, as docs/mpc.md says
        # Nothing half-written: the proxies' ledgers do not hold the job (it may run again).
        for ledger in (tmp_path / "c").glob("party*.jobs"):
            assert terms.job not in ledger.read_text()
    finally:
        _stop_all(procs)


def _proxy_keys(path: Path) -> tuple[bytes, bytes]:
    from fedroc.mpc.net import ClusterConfig

    return ClusterConfig.load(path).proxy_key_bytes()


@pytest.fixture(scope="module")
def cluster():
    keys = {n: new_owner_key() for n in ("a", "b", "c")}
    with LocalCluster(owners={n: owner_public_bytes(k) for n, k in keys.items()}) as running:
        yield running, keys


def _share(tmp_path, running, keys, rows) -> list[str]:
    """Bundle files of one fresh job over ``rows`` (name -> (labels, scores))."""
    terms = JobTerms.create(list(rows), running.proxy_key_bytes())
    files = []
    for name, (y, s) in rows.items():
        write_bundle(make_bundle(name, y, s, terms, keys[name]), tmp_path / f"{name}.share")
        files.append(str(tmp_path / f"{name}.share"))
    return files


def test_mpc_run_says_why_nothing_was_opened(capsys, tmp_path, cluster):
    """Before: with fewer than 5 positives in the job, `fedroc mpc run` printed a table of
    dashes and `released False`, exit 0, and no word of why (`fedroc evaluate --method mpc`
    says 'withheld: fewer than 5 positives or negatives')."""
    running, keys = cluster
    rows = {"a": ([0] * 40, np.arange(40.0)), "b": ([1, 1, 0, 0, 0, 0], np.arange(6.0))}
    for extra in ([], ["--json"]):
        files = _share(tmp_path, running, keys, rows)
        code, out, err = run_main(
            capsys, ["mpc", "run", *files, "--cluster", str(running.config.path), *extra]
        )
        assert code == 0
        assert "withheld: fewer than 5 positives or negatives (checked under MPC)" in err, err
        assert "withheld" not in out  # --json: the one JSON object stays as it was
    # A released job says nothing of the kind.
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 60)
    files = _share(tmp_path, running, keys, {"a": (y, rng.normal(size=60)), "c": (y, y + 0.5)})
    code, out, err = run_main(capsys, ["mpc", "run", *files, "--cluster", str(running.config.path)])
    assert code == 0 and "withheld" not in err


def _typo_key(d: Path) -> None:
    _retype(d, 'key = "party0.key"', 'key = "party0.kye"')


def _typo_cert(d: Path) -> None:
    _retype(d, 'cert = "party0.pem"', 'cert = "party0.mep"')


def _other_key(d: Path) -> None:
    (d / "party0.key").write_bytes((d / "party1.key").read_bytes())


@pytest.mark.parametrize(
    ("where", "name", "edit", "said"),
    [
        ("[party.0] key", "party0.kye", _typo_key, "does not exist"),
        ("[party.0] cert", "party0.mep", _typo_cert, "does not exist"),
        ("ca", "ca.pem", lambda d: (d / "ca.pem").unlink(), "does not exist"),
        ("[party.0] key", "party0.key", lambda d: _garble(d, "party0.key"), "cannot load"),
        ("[party.0] cert", "party0.pem", lambda d: _garble(d, "party0.pem"), "cannot load"),
        ("[party.0] key", "party0.key", _other_key, "do not match"),
    ],
)
def test_a_bad_tls_file_of_a_party_is_named(capsys, tmp_path, where, name, edit, said):
    """Before: 'cannot load TLS files (/c/party0.pem, /c/party0.kye, /c/ca.pem): [Errno 2] No
    such file or directory', the three files listed and the operator left to guess which."""
    path = generate_cluster(tmp_path / "c", ports=dict(enumerate(free_ports(3))))
    edit(tmp_path / "c")
    code, _, err = run_main(capsys, ["mpc", "party", "--cluster", str(path), "--id", "0"])
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{where} file '{tmp_path / 'c' / name}'" in err and said in err, err
    others = {"party0.key", "party0.pem", "ca.pem", "party0.kye", "party0.mep"} - {name}
    if said != "do not match":  # a certificate and a key that do not match: both named
        assert not any(o in err for o in others), err


def _retype(directory: Path, old: str, new: str) -> None:
    toml = directory / "cluster.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))


def _garble(directory: Path, name: str) -> None:
    (directory / name).write_text("not a PEM file\n")


def test_parties_with_different_cluster_files_say_so(tmp_path):
    """Before: proxy 1, started with the files of another `fedroc mpc certs` run, exited 1
    with 'TLS with party 0 failed: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify
    failed: self-signed certificate in certificate chain', and proxy 0 waited out its
    startup timeout to say 'could not reach party 1 ...: Connection refused' (exit 1), the
    refused certificate forgotten."""
    ports = dict(enumerate(free_ports(3)))
    mine = generate_cluster(tmp_path / "mine", ports=ports)
    other = generate_cluster(tmp_path / "other", ports=ports)
    first = _party(mine, 0, "--startup-timeout", "6")
    try:
        _wait_until_listening(ports[0])
        second = _party(other, 1, "--startup-timeout", "6")
        # Who dials whom first decides which party checks the foreign certificate; both
        # stop, exit 2 (a cluster file to fix) and say so in their last line.
        for proc, ca in ((second, "other"), (first, "mine")):
            _, said = proc.communicate(timeout=60)
            assert proc.returncode == 2, said
            assert "Traceback" not in said, said
            last = said.strip().splitlines()[-1]
            assert "same cluster files" in last, said
            if "not signed by this cluster's CA" in last:
                assert str(tmp_path / ca / "ca.pem") in last and "127.0.0.1" in last, said
            else:
                assert "unknown ca" in last.lower(), said
    finally:
        _stop_all([first])


def _wait_until_listening(port: int, timeout: float = 60) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")


def test_a_party_stopped_by_mpc_stop_says_so(capsys, tmp_path):
    """Before: after `fedroc mpc stop` the three parties exited 0 without a line: their
    operators could not tell a stop from a crash that lost its last words."""
    path = generate_cluster(tmp_path / "c", ports=dict(enumerate(free_ports(3))))
    procs = [_party(path, pid) for pid in range(3)]
    try:
        for p in procs:
            _wait_line(p, "ready on")
        code, _, err = run_main(capsys, ["mpc", "stop", "--cluster", str(path)])
        assert code == 0 and "shutdown sent" in err
        for pid, p in enumerate(procs):
            _, said = p.communicate(timeout=30)
            assert p.returncode == 0
            assert f"party {pid} " in said, said
            assert "shut down by a stop request (fedroc mpc stop)" in said, said
    finally:
        _stop_all(procs)


def test_an_owner_added_to_a_running_cluster_file_is_told_to_restart(capsys, tmp_path, cluster):
    """Before: an operator who added `fedroc mpc owner-key`'s printed line under [owners]
    while the parties ran got 'owner 'd' is not registered with this cluster ([owners] in the
    cluster file)', though the file now registered it: the parties read it at startup."""
    running, keys = cluster
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 40)
    newcomer = new_owner_key()
    keys = {**keys, "d": newcomer}
    files = _share(tmp_path, running, keys, {"a": (y, rng.normal(size=40)), "d": (y, y + 0.1)})
    code, _, err = run_main(capsys, ["mpc", "run", *files, "--cluster", str(running.config.path)])
    assert code == 2 and "owner 'd' is not registered" in err, err
    assert "the parties read the cluster file when they start" in err, err


def test_a_long_mpc_run_shows_that_it_is_running(capsys, tmp_path, cluster, monkeypatch):
    """Before: `fedroc mpc run` over 80,000 rows said nothing for 10 s (docs/mpc.md: 10^6
    rows take about 11 minutes), so the analyst could not tell a long job from a hang."""
    import fedroc.cli.mpc_cmd as mpc_cmd

    monkeypatch.setattr(mpc_cmd, "PROGRESS_EVERY", 0.2)
    running, keys = cluster
    rng = np.random.default_rng(3)
    rows = {}
    for name in ("a", "b"):
        y = rng.integers(0, 2, 20000)
        rows[name] = (y, rng.normal(size=y.size) + y)
    files = _share(tmp_path, running, keys, rows)
    code, out, err = run_main(
        capsys, ["mpc", "run", *files, "--cluster", str(running.config.path), "--json"]
    )
    assert code == 0
    beats = [line for line in err.splitlines() if "waiting for the cluster" in line]
    assert beats and "40000 rows" in beats[0], err
    assert "waiting" not in out  # --json: progress on stderr only


def test_the_python_api_names_mpc_precision_as_the_caller_wrote_it():
    """Before: `fedroc.evaluate(fed, method="mpc", mpc_precision=80)` said 'mpc: frac_bits
    (the precision of the opened values) must be an integer in [1, 52]; got 80', a name the
    caller never wrote (mpc_sort, mpc_delta and mpc_min_class_count were already renamed)."""
    import pandas as pd

    from fedroc.exceptions import InputError
    from fedroc.federation import Federation
    from fedroc.methods import evaluate

    rng = np.random.default_rng(4)
    frames = {
        name: pd.DataFrame({"label": rng.integers(0, 2, 30), "score": rng.normal(size=30)})
        for name in ("a", "b")
    }
    fed = Federation.from_frames(frames)
    with pytest.raises(InputError) as info:
        evaluate(fed, method="mpc", mpc_precision=80)
    message = str(info.value)
    assert message.startswith("mpc: mpc_precision") and "got 80" in message, message
    assert "frac_bits" not in message


def test_mpc_run_against_a_cluster_that_is_not_running(capsys, tmp_path):
    """Before: 'could not reach party 0 at 127.0.0.1:PORT: [Errno 111] Connection refused'
    after 10 s, without a word of what to start; and two bundles of one owner were refused
    as "owner names must differ; got ['a', 'a']", the files unnamed."""
    keys = {"a": new_owner_key(), "b": new_owner_key()}
    path = generate_cluster(
        tmp_path / "c",
        ports=dict(enumerate(free_ports(3))),
        owners={n: owner_public_bytes(k) for n, k in keys.items()},
    )
    terms = JobTerms.create(["a", "b"], _proxy_keys(path))
    for name, key in keys.items():
        write_bundle(make_bundle(name, [0, 1] * 5, range(10), terms, key), tmp_path / name)
    args = ["mpc", "run", str(tmp_path / "a"), str(tmp_path / "b"), "--cluster", str(path)]
    code, _, err = run_main(capsys, args)
    assert code == 2 and "could not reach party 0" in err
    assert f"is the cluster running (fedroc mpc party --cluster {path} --id 0" in err, err
    args = ["mpc", "run", str(tmp_path / "a"), str(tmp_path / "a"), "--cluster", str(path)]
    code, _, err = run_main(capsys, args)
    assert code == 2 and f"'{tmp_path / 'a'}' and '{tmp_path / 'a'}'" in err, err
    assert "owner 'a'" in err, err
