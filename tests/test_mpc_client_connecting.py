"""`fedroc mpc run` says at once that it is trying to reach party 0, not after its time-out.

The analyst's client kept trying to reach party 0 for 10 s in silence before it said
"could not reach party 0": a user could not tell a slow cluster from a wrong address. Now
a line on stderr names the party and its address within a second, the final error is
unchanged, and --json's stdout holds no such line.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pandas as pd

import fedroc.cli.mpc_cmd as mpc_cmd
from tests._cli import run_main


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Recorder:
    """Stands in for the command's stderr console: each line with when it came."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []

    def print(self, *args, **kwargs) -> None:
        self.lines.append((time.monotonic(), " ".join(str(a) for a in args)))


def _cluster_with_no_party_0(tmp_path: Path, capsys) -> tuple[int, Path]:
    """A cluster file for owners a and b whose party 0's port nothing listens on."""
    port = _free_port()  # nothing listens there: no cluster is running
    cluster = tmp_path / "cluster"
    code, _, err = run_main(
        capsys,
        ["mpc", "certs", str(cluster), "--port", f"0={port}", "--owner", "a", "--owner", "b"],
    )
    assert code == 0, err
    return port, cluster


def test_mpc_run_says_it_is_trying_to_reach_party_0_at_once(tmp_path: Path, capsys, monkeypatch):
    port, cluster = _cluster_with_no_party_0(tmp_path, capsys)
    shares = []
    for name in "ab":
        data = tmp_path / f"{name}.csv"
        pd.DataFrame({"label": [0, 1] * 5, "score": [i / 10 for i in range(10)]}).to_csv(
            data, index=False
        )
        shares.append(str(tmp_path / f"{name}.share"))
        code, _, err = run_main(capsys, [
            "mpc", "share", str(data), "--cluster", str(cluster / "cluster.toml"),
            "--owner", name, "--owner-key", str(cluster / f"owner-{name}.key"),
            "--job", "job-left39-02", "--owners", "a,b", "--out", shares[-1],
        ])  # fmt: skip
        assert code == 0, err
    recorder = _Recorder()
    monkeypatch.setattr(mpc_cmd, "err", recorder)
    monkeypatch.setattr(mpc_cmd, "CONNECT_TIMEOUT", 2.0, raising=False)
    start = time.monotonic()
    code, out, err = run_main(
        capsys, ["mpc", "run", *shares, "--cluster", str(cluster / "cluster.toml"), "--json"]
    )
    assert code != 0
    assert f"could not reach party 0 at 127.0.0.1:{port}" in out + err, (out, err)  # as before
    trying = [(t, line) for t, line in recorder.lines if "trying to reach party 0" in line]
    assert trying, recorder.lines
    when, line = trying[0]
    assert f"127.0.0.1:{port}" in line and "job-left39-02" in line, line
    assert when - start < 1.5, when - start
    assert "trying to reach" not in out  # --json: the error's one JSON object, no progress


def test_evaluate_mpc_cluster_says_it_is_trying_to_reach_party_0(
    tmp_path: Path, capsys, monkeypatch
):
    """`fedroc evaluate --method mpc --mpc-cluster FILE` kept the same 10 s of silence
    that `fedroc mpc run` no longer keeps: it prints the same line on stderr (not stdout)."""
    import fedroc.cli.evaluate_cmd as evaluate_cmd
    from fedroc.mpc import net

    port, cluster = _cluster_with_no_party_0(tmp_path, capsys)
    args = ["evaluate", "--method", "mpc", "--json", "--mpc-cluster", str(cluster / "cluster.toml")]
    args += ["--mpc-owner-keys", str(cluster)]
    for name in "ab":
        data = tmp_path / f"{name}.csv"
        pd.DataFrame({"label": [0, 1] * 10, "score": [i / 20 for i in range(20)]}).to_csv(
            data, index=False
        )
        args += ["--site", f"{name}={data}"]
    recorder = _Recorder()
    recorder.is_terminal = False  # type: ignore[attr-defined]  # no progress spinner
    monkeypatch.setattr(evaluate_cmd, "err", recorder)
    defaults = {**(net.ClusterClient.__init__.__kwdefaults__ or {}), "connect_timeout": 2.0}
    monkeypatch.setattr(net.ClusterClient.__init__, "__kwdefaults__", defaults)
    start = time.monotonic()
    code, out, err = run_main(capsys, args)
    assert code != 0
    assert f"could not reach party 0 at 127.0.0.1:{port}" in out + err, (out, err)
    trying = [(t, line) for t, line in recorder.lines if "trying to reach party 0" in line]
    assert trying, (recorder.lines, out, err)
    when, line = trying[0]
    assert f"127.0.0.1:{port}" in line and line.startswith("MPC job "), line
    assert when - start < 1.5 + 2.0, when - start  # the sites' bundles come first
    assert "trying to reach" not in out
