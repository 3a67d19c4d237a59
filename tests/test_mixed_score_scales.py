"""Logits at one site, probabilities at the others (a new user's walkthrough, walk).

The pooled and MPC methods ranked the two scales together without a word: the AUC of
three hospitals with one site's logits came out 0.851 against 0.893 on one scale, and the
only sign was a Brier score shown as "-" with no reason. Each test fails on the code
before: no warning, no caveat, no site named.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedroc import Federation
from tests._cli import run_main


def _site(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    y = np.repeat([0, 1], [n - n // 3, n // 3])
    logit = -1.0 + 1.6 * y + rng.normal(size=n)
    return y, logit


@pytest.fixture
def sites(tmp_path: Path) -> dict[str, Path]:
    """Three sites: 'b' holds logits, 'a' and 'c' probabilities of the same model."""
    rng = np.random.default_rng(11)
    paths = {}
    for name in "abc":
        y, logit = _site(rng, 120)
        score = logit if name == "b" else 1.0 / (1.0 + np.exp(-logit))
        paths[name] = tmp_path / f"{name}.csv"
        pd.DataFrame({"outcome": y, "risk": score}).to_csv(paths[name], index=False)
    return paths


def _site_args(paths: dict[str, Path]) -> list[str]:
    return [x for name, p in paths.items() for x in ("--site", f"{name}={p}")]


def test_evaluate_warns_naming_the_site_on_another_scale(capsys, sites):
    args = ["evaluate", *_site_args(sites), "--label", "outcome", "--score", "risk"]
    code, out, err = run_main(capsys, [*args, "--method", "pooled", "--json"])
    assert code == 0
    lo = pd.read_csv(sites["b"])["risk"].min()
    warning = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1, err
    assert f"'b' in [{lo:.4g}, " in warning[0]
    assert "those at 'a', 'c' lie in [0, 1]" in warning[0]
    # The JSON says why the Brier score is null, with the scores' range.
    result = json.loads(out)
    assert result["brier"] is None
    assert any("no Brier score or calibration" in c for c in result["caveats"])


def test_evaluate_is_silent_on_one_scale(capsys, sites, tmp_path):
    logits = tmp_path / "b_prob.csv"
    frame = pd.read_csv(sites["b"])
    frame["risk"] = 1.0 / (1.0 + np.exp(-frame["risk"]))
    frame.to_csv(logits, index=False)
    paths = {**sites, "b": logits}
    args = ["evaluate", *_site_args(paths), "--label", "outcome", "--score", "risk"]
    code, out, err = run_main(capsys, [*args, "--method", "pooled", "--json"])
    assert code == 0
    assert "warning" not in err
    assert "caveats" not in json.loads(out)


def test_metrics_says_why_there_is_no_brier_score(capsys, sites):
    code, out, _ = run_main(
        capsys, ["metrics", str(sites["b"]), "--label", "outcome", "--score", "risk", "--json"]
    )
    assert code == 0
    result = json.loads(out)
    assert result["brier"] is None
    (caveat,) = result["caveats"]
    lo, hi = (pd.read_csv(sites["b"])["risk"].agg(f) for f in ("min", "max"))
    assert caveat.startswith(
        f"no Brier score or calibration: the scores lie in [{lo:.4g}, {hi:.4g}]"
    )


def test_the_sites_that_are_not_probabilities_are_named(sites):
    from fedroc.federation.basic import all_probabilities, probability_sites
    from fedroc.methods.mpc import _not_probabilities_note

    fed = Federation.from_files(
        {k: str(v) for k, v in sites.items()}, label="outcome", score="risk"
    )
    assert probability_sites(fed) == (["a", "c"], ["b"])
    assert not all_probabilities(fed)
    note = _not_probabilities_note(["a", "c"], ["b"])
    assert note.startswith("scores are not probabilities at site(s) 'b':")
    assert "those at 'a', 'c' lie in [0, 1]" in note
    assert "those at" not in _not_probabilities_note([], ["a", "b", "c"])


def test_flower_up_warns_before_it_starts(capsys, sites, tmp_path):
    """The deployment's ledgers bind a site's rows at its first answer: the warning comes
    before any process starts (here a declared range [0, 1] then refuses the logits)."""
    pytest.importorskip("flwr")
    policy = tmp_path / "policy.toml"
    policy.write_text("score_range = [0, 1]\n")
    data = [x for name, p in sites.items() for x in ("--data", f"{name}={p}")]
    code, _, err = run_main(
        capsys,
        ["flower", "up", *data, "--label", "outcome", "--score", "risk",
         "--policy-file", str(policy), "--dir", str(tmp_path / "dep")],
    )  # fmt: skip
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[0].startswith("warning: scores at site(s) 'b' in [")
    assert lines[-1].startswith("error: ") and "'b'" in lines[-1]
    assert not (tmp_path / "dep" / "nodes").exists()


def test_fixed_rows_after_a_refusal_are_refused_in_words_that_say_why(capsys, sites, tmp_path):
    """Logits at 'b' refused by the histogram bind b's rows (the refusal is a bit of them);
    after the fix b refused "its rows changed since its first exact release", when it had
    released nothing: the message now says a refusal that read the rows counts."""
    audit = tmp_path / "audit"
    args = ["evaluate", *_site_args(sites), "--label", "outcome", "--score", "risk"]
    code, _, err = run_main(capsys, [*args, "--method", "histogram", "--audit-dir", str(audit)])
    assert code == 2 and "site 'b': scores lie outside the public score range" in err
    frame = pd.read_csv(sites["b"])
    frame["risk"] = 1.0 / (1.0 + np.exp(-frame["risk"]))
    frame.to_csv(sites["b"], index=False)  # fixed in place
    code, _, err = run_main(capsys, [*args, "--method", "histogram", "--audit-dir", str(audit)])
    assert code == 2
    assert "site 'b' refuses" in err and "its rows changed since its first exact release" in err
    assert "a refusal that read its rows, such as scores outside the range asked" in err
