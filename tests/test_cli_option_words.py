"""An API message that gives both forms of an option reads as one on the command line."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fedroc.cli._common import option_words
from tests._cli import run_main


def test_both_forms_of_an_option_become_the_option_alone():
    words = option_words(
        "pass score_range=(lo, hi) (--score-range LO,HI), and more",
        {"score_range": "--score-range"},
    )
    assert words == "pass --score-range LO,HI, and more"


def test_rocglm_on_logits_names_the_option_once(capsys, tmp_path):
    """Logits at one of three sites: the refusal read "pass --score-range=(lo, hi)
    (--score-range LO,HI)" (walk)."""
    rng = np.random.default_rng(5)
    sites = []
    for name in "abc":
        y = np.repeat([0, 1], [60, 30])
        logit = -1.0 + 1.5 * y + rng.normal(size=90)
        score = logit if name == "b" else 1.0 / (1.0 + np.exp(-logit))
        path = tmp_path / f"{name}.csv"
        pd.DataFrame({"label": y, "score": score}).to_csv(path, index=False)
        sites += ["--site", f"{name}={path}"]
    code, _, err = run_main(capsys, ["evaluate", *sites, "--method", "rocglm"])
    assert code == 2
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: site(s) ['b'] have scores outside the score range [0, 1]")
    assert "pass --score-range LO,HI, and" in line
    assert "=(lo, hi)" not in line
