"""The MPC method on Flower SuperNodes with a running cluster that registers its owners.

A cluster's proxies run a job only on bundles signed by the owner keys its file registers
(``[owners]``), so each node must sign with the key its operator registered, in every run.
One deployment (about 100 s) and a three-party cluster: outside ``make test``, run with
``.venv/bin/python -m pytest -m slow tests/test_flower_mpc.py``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("flwr")

from _flower_sites import write_sites

from fedroc.federation.flower.deploy import LocalDeployment
from fedroc.federation.flower.site_config import SiteNodeConfig
from fedroc.metrics import roc_auc
from fedroc.mpc.cluster import LocalCluster
from fedroc.mpc.owner import write_owner_key
from fedroc.privacy import DisclosurePolicy


@pytest.mark.slow
def test_mpc_jobs_on_flower_nodes_sign_with_the_owner_keys_their_cluster_registered(
    tmp_path: Path,
) -> None:
    """Two MPC jobs in two Flower runs on nodes whose owner keys the cluster registered.

    Before c0aa232 a Flower node kept its owner key in the run's state: each run generated
    a fresh one (two runs of one job at one site: two keys, measured in
    ``test_flower.py::test_a_nodes_mpc_owner_key_is_its_operators_in_every_run``), which no
    cluster file could register, and the proxies run only registered owners' bundles.
    """
    paths = write_sites(tmp_path)
    names = ("site1", "site2")
    keys = {name: tmp_path / f"owner-{name}.key" for name in names}
    registry = {name: write_owner_key(keys[name]) for name in names}
    with LocalCluster(owners=registry) as cluster:
        cluster_file = str(cluster.config.path)
        configs = [
            SiteNodeConfig(
                site=name,
                data=paths[name],
                policy=DisclosurePolicy(
                    mpc_proxies=cluster_file, mpc_owner_key=str(keys[name]), mpc_max_jobs=2
                ),
            )
            for name in names
        ]
        frames = [pd.read_csv(paths[name]) for name in names]
        y = pd.concat([f["label"] for f in frames]).to_numpy()
        s = pd.concat([f["score"] for f in frames]).to_numpy()
        with LocalDeployment(configs, tmp_path / "deployment") as dep:
            aucs = []
            for _ in range(2):  # two runs: each node's state starts empty
                payload = dep.submit(
                    "evaluate",
                    {"method": "mpc", "options": {"mpc_cluster": cluster_file}},
                    timeout=120,
                )
                aucs.append(payload["result"]["auc"])
    exact = roc_auc(y, s)
    assert all(abs(a - exact) <= 2.0**-14 for a in aucs), (aucs, exact)
