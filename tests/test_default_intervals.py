"""Default intervals of ``evaluate``: withheld with a reason where undefined, and the small
seeded version of scripts/coverage_audit.py."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedroc.data import Columns, SiteData
from fedroc.federation import Federation
from fedroc.methods import evaluate, pool_site_data
from tests._cli import run_main

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "coverage_audit.py"


def _separated_frames() -> dict[str, pd.DataFrame]:
    """Three sites whose positives all score above their negatives: the AUC is 1."""
    rng = np.random.default_rng(5)
    frames = {}
    for k in range(3):
        neg, pos = rng.uniform(0.0, 0.5, 20), rng.uniform(0.6, 1.0, 6)
        frames[f"site{k}"] = pd.DataFrame(
            {"label": np.r_[np.zeros(20, int), np.ones(6, int)], "score": np.r_[neg, pos]}
        )
    return frames


@pytest.mark.parametrize("method", ["pooled", "histogram"])
def test_an_undefined_interval_is_withheld_with_its_reason(method):
    # At AUC 1 DeLong's variance is 0 and the logit interval undefined: it used to come
    # back as (nan, nan), [null, null] in JSON, with no word of why.
    frames = _separated_frames()
    pooled = pool_site_data({k: SiteData.from_frame(v, Columns()) for k, v in frames.items()})
    res = evaluate(
        Federation.from_frames(frames), method, pooled=pooled if method == "pooled" else None
    )
    assert res.auc == 1.0
    assert res.auc_ci is None and res.to_dict()["auc_ci"] is None
    [why] = [c for c in res.extra["caveats"] if c.startswith("no interval")]
    assert "the AUC is 1" in why and "undefined" in why


def test_an_interval_that_exists_is_kept():
    frames = _separated_frames()
    frames["site0"].loc[0, "score"] = 0.99  # one negative above the positives: AUC < 1
    res = evaluate(Federation.from_frames(frames), "histogram")
    assert 0.9 < res.auc < 1.0
    assert res.auc_ci is not None and all(math.isfinite(v) for v in res.auc_ci)
    assert not any(c.startswith("no interval") for c in res.extra.get("caveats") or [])


def test_the_command_line_prints_null_and_the_reason(capsys, tmp_path):
    args = ["evaluate", "--label", "label", "--score", "score", "--method", "histogram"]
    for name, frame in _separated_frames().items():
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
        args += ["--site", f"{name}={tmp_path / f'{name}.csv'}"]
    code, out, _ = run_main(capsys, [*args, "--json"])
    assert code == 0
    res = json.loads(out)
    assert res["auc"] == 1.0 and res["auc_ci"] is None
    assert any("the AUC is 1" in c for c in res["caveats"])


@pytest.fixture(scope="module")
def audit():
    spec = importlib.util.spec_from_file_location("fedroc_coverage_audit_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_audit_pooled_cell_covers_an_easy_design_and_counts_withheld_runs(audit):
    easy = audit.GRID["p50-a80"]
    cell = audit._pooled_cell(easy, 300, audit.DEFAULTS["pooled"], 60, 1, "pooled", easy.auc)
    row = cell.row()
    # 60 replicates: a true coverage of 0.95 falls below 0.85 with probability < 1%.
    assert row["runs"] == 60 and row["failed"] == 0 and row["no_ci"] == 0
    assert row["coverage"] >= 0.85 and abs(row["bias"]) < 0.02
    # Five positives at AUC 0.95: some runs separate the classes and have no interval;
    # they are counted, with the reason, not hidden in the coverage.
    rare = audit.GRID["p05-a95"]
    cell = audit._pooled_cell(rare, 100, audit.DEFAULTS["pooled"], 60, 2, "pooled", rare.auc)
    row = cell.row()
    assert row["runs"] == 60 and row["failed"] == 0 and row["no_ci"] > 0
    assert any("AUC is 1" in k or "fewer than 2 rows" in k for k in cell.withheld), cell.withheld
