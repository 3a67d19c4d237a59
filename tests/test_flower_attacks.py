"""The curious analyst against real Flower deployments: what it controls in a Flower run.

The analyst submits the run: its app bundle (FAB), its run config and every message. A
SuperNode's guarantees are those of the code that answers the messages; these tests send
a FAB whose ClientApp is the analyst's own (a Flower app may name any ClientApp and ship
its code), on fedroc's tuned SuperNode and on the stock ``flower-supernode``.

A file of its own (two deployments), so that ``make test``'s two pytest processes run it
beside the other Flower files.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr")

import tomli_w
from _flower_sites import write_sites

from fedroc.exceptions import FedrocError
from fedroc.federation.flower import SERVER_APP_REF
from fedroc.federation.flower._marked import parse_marked
from fedroc.federation.flower.deploy import (
    CONNECTION_NAME,
    JOB_KEY,
    LocalDeployment,
    _follow_run,
    flwr_home,
)
from fedroc.federation.flower.site_config import SiteNodeConfig

# The analyst's ClientApp: it answers fedroc's hello as fedroc does (so that the job finds
# the sites) and every call with the site's data file, read from the node config.
ROW_DUMP = """
from flwr.app import Message
from flwr.clientapp import ClientApp

from fedroc._version import __version__
from fedroc.federation.flower._codec import PROTOCOL, to_recorddict

app = ClientApp()


@app.query("fedroc_hello")
def hello(message, context):  # fedroc's answer, without fedroc's checks of its executor
    info = {"site": str(context.node_config["site"]), "version": __version__}
    info["protocol"] = PROTOCOL
    return Message(to_recorddict({}, info), reply_to=message)


@app.query("fedroc_call")
def dump(message, context):
    with open(str(context.node_config["data"])) as fh:
        rows = fh.read()
    return Message(to_recorddict({"rows": rows}), reply_to=message)
"""


def _foreign_app(directory: Path) -> Path:
    """A FAB of fedroc's ServerApp with the analyst's ClientApp (shipped in the bundle)."""
    app = directory / "app"
    app.mkdir()
    (app / "rowdump.py").write_text(ROW_DUMP)
    (app / "pyproject.toml").write_text(
        tomli_w.dumps(
            {
                "project": {"name": "fedroc-job", "version": "1.0.0", "dependencies": []},
                "tool": {
                    "flwr": {
                        "app": {
                            "publisher": "fedroc",
                            "components": {
                                "serverapp": SERVER_APP_REF,
                                "clientapp": "rowdump:app",
                            },
                            "config": {JOB_KEY: ""},
                        }
                    }
                },
            }
        )
    )
    return app


def _run_foreign_app(dep: LocalDeployment) -> dict[str, Any]:
    """Submit the foreign FAB with a ``calls`` job of ``fedroc.info``; return the result."""
    conn = dep.connection
    spec = {
        "job": "calls",
        "options": {"calls": [{"function": "fedroc.info"}]},
        "sites": list(conn.sites or ()),
        "site_keys": None
        if conn.site_keys is None
        else {k: list(v) for k, v in conn.site_keys.items()},
        "require_registered": bool(conn.node_auth),
        "timeout": 60.0,
        "discovery_timeout": 60.0,
    }
    with tempfile.TemporaryDirectory(prefix="fedroc-attack-") as tmp:
        app = _foreign_app(Path(tmp))
        overrides = Path(tmp) / "job.toml"
        overrides.write_text(tomli_w.dumps({JOB_KEY: json.dumps(spec)}))
        env = {**os.environ, **flwr_home(conn, Path(tmp))}
        args = [str(app), CONNECTION_NAME, "--run-config", str(overrides), "--stream"]
        text, finished = _follow_run(args, env, 150.0, {})
    marked = parse_marked(text)
    if marked is None:
        raise FedrocError(f"no fedroc result (finished: {finished}): {text[-400:]}")
    kind, payload = marked
    if kind == "error":
        raise FedrocError(f"the job failed: {payload}")
    return dict(payload)


# Three local deployments, about 100-200 s each: outside `make test` (10 minutes in all); run with
# `.venv/bin/python -m pytest -m slow tests/test_flower_attacks.py`. The tuned node's check
# itself is in the suite (tests/test_flower.py, the bundle's ClientApp reference).
@pytest.mark.slow
@pytest.mark.parametrize(
    ("tuned", "bundle"),
    [
        pytest.param(True, False, id="tuned"),
        pytest.param(False, False, id="stock-with-fedroc-executor"),
        pytest.param(
            False,
            True,
            id="stock-running-the-bundles-clientapp",
            marks=pytest.mark.xfail(
                strict=True,
                reason=(
                    "R46, Flower's design: a stock flower-supernode in its default "
                    "'subprocess' isolation installs the run's app bundle and runs the "
                    "ClientApp it names, so an analyst's ClientApp reads the site's data "
                    "file from the node config (every row of every site, 2 of 2 sites); "
                    "fedroc's executor in 'process' isolation closes it (the case above)"
                ),
            ),
        ),
    ],
)
def test_a_clientapp_shipped_in_the_analysts_app_bundle_does_not_run_at_a_site(
    tmp_path: Path, tuned: bool, bundle: bool
) -> None:
    """R46: the analyst's FAB names its own ClientApp (``rowdump:app``, shipped in the
    bundle) beside fedroc's ServerApp; the job calls ``fedroc.info`` on every site.

    Measured on main beac9d0 (TLS, node authentication, 2 sites): on stock
    ``flower-supernode`` nodes (``flower up --stock``, or ``flower-supernode --node-config``
    as docs/flower.md describes) the job returned each site's whole CSV file, header and
    every row, 2 of 2 sites, one run, no budget, nothing in the audit logs; fedroc's tuned
    node refused the ClientApp (error reply "runs only fedroc's ClientApp"), so the job
    failed and no row left. Since: a stock node in ``process`` isolation with fedroc's
    executor beside it (:mod:`fedroc.federation.flower.executor`, what ``flower up --stock``
    runs) refuses it alike, 0 of 2 sites; the stock node in its default ``subprocess``
    isolation (Flower's executor) still runs the bundle's ClientApp, 2 of 2 (strict xfail).
    """
    paths = write_sites(tmp_path)
    configs = [
        SiteNodeConfig(site=name, data=path) for name, path in paths.items() if name != "site3"
    ]
    dep = LocalDeployment(configs, tmp_path / "deployment", tuned=tuned, bundle_clientapp=bundle)
    try:
        dep.start(timeout=240)
        try:
            payload = _run_foreign_app(dep)
        except FedrocError:
            payload = {}
        calls = payload.get("result", {}).get("calls") or [{"replies": {}}]
        replies = calls[0]["replies"]
        leaked = [
            name
            for name in ("site1", "site2")
            if replies.get(name, {}).get("rows") == paths[name].read_text()
        ]
        # Measure: the number of sites whose data file came back in the job's result.
        assert leaked == []
    finally:
        dep.stop()
