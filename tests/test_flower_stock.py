"""`fedroc flower up --insecure --stock`: Flower's own ``flower-supernode`` at the sites (in
``process`` isolation, with fedroc's executor beside it: every reply below comes from it) and,
for a job past ``--run-timeout``, Flower's own ``flwr run`` and ``flwr stop`` at the analyst
(what fedroc runs on Flower versions other than 1.41 or with ``FEDROC_FLOWER_TUNING=off``).

A file of its own, beside ``test_flower_deploy.py``, so that ``make test``'s two pytest
processes run the two deployments side by side.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from _flower_sites import SIZES, write_sites

from fedroc.exceptions import FedrocError
from fedroc.federation.flower.deploy import FlowerConnection, submit_job
from fedroc.methods import get_method


def test_flower_up_cli_insecure_stock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fedroc flower up` (insecure, stock flower-supernode) and `fedroc flower run`; the
    analyst's side stock too (``flwr run``, and ``flwr stop`` past ``--run-timeout``)."""
    paths = write_sites(tmp_path)
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
        # Stock nodes take seconds per round: a ROC-GLM job is stopped, here by the stock
        # analyst's `flwr stop` (Flower's CLI, as on other Flower versions).
        monkeypatch.setenv("FEDROC_FLOWER_TUNING", "off")
        options = {"method": "rocglm", "options": dict(get_method("rocglm").demo_options)}
        with pytest.raises(FedrocError, match="did not finish within 3 s; it was stopped"):
            submit_job(conn, "evaluate", options, timeout=60, run_timeout=3)
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
