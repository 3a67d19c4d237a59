"""The command-line part of benchmarks/bench_flower.py, without the Flower deployment.

The benchmark stopped running when ``fedroc evaluate`` and ``fedroc flower run`` began to
refuse ``--seed`` for the ROC-GLM (exit 2: its one resampling is seeded by the released
values): both of its commands passed ``--seed 1``, and the warm-up run failed before any
figure. Here the in-process command runs as the benchmark builds it, on its own files.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from _scripts import load_benchmark
from sklearn.metrics import roc_auc_score

from fedroc.cli import main


def test_the_benchmarks_local_command_runs_and_estimates_the_pooled_auc(tmp_path, capsys):
    bench = load_benchmark("bench_flower.py", "fedroc_bench_flower_script")
    paths = bench._sites(tmp_path, 3)
    local, remote = bench.cli_commands(paths, tmp_path / "deployment")
    # Both commands ask the same of the method; only where the sites are differs.
    assert local[1:2] == ["evaluate"] and remote[1:3] == ["flower", "run"]
    assert local[2 : 2 + len(bench.CLI_METHOD)] == remote[-len(bench.CLI_METHOD) :]
    main(local[1:])  # a refused option exits 2 here
    out = json.loads(capsys.readouterr().out)
    frames = {name: pd.read_csv(path) for name, path in paths.items()}
    assert [(s["name"], s["n"], s["n_pos"]) for s in out["sites"]] == [
        (name, len(f), int(f["label"].sum())) for name, f in frames.items()
    ]
    pooled = pd.concat(frames.values())
    # The sites' DP noise is their own (unseeded), so the estimate is near, not equal to,
    # the pooled rows' AUC: over 20 runs on these files its SD was 0.0024 (largest
    # error 0.0053); the CI's half-width is 0.03.
    assert out["auc"] == pytest.approx(roc_auc_score(pooled["label"], pooled["score"]), abs=0.02)
    assert out["auc_ci"][0] < out["auc"] < out["auc_ci"][1]
