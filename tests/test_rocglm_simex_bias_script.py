"""The small version of scripts/rocglm_simex_bias.py (its table:
scripts/results/rocglm_simex_bias.md: why the ROC-GLM is corrected by deconvolution).

The study had no test. Its population AUC under noise is checked by Monte Carlo, and its
nonlinear extrapolant on values of its own form.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _scripts import load_script
from scipy import special


def test_the_population_auc_under_noise_matches_monte_carlo():
    study = load_script("rocglm_simex_bias.py", "fedroc_rocglm_simex_bias_script")
    a = study.population(grid=1201)
    a0 = a(0.0)  # the grid's own AUC: 0.7688 at 601 points, 0.7537 at 3001; the study
    assert a0 == pytest.approx(0.75, abs=0.02)  # measures every bias from it
    rng = np.random.default_rng(0)
    mu = math.sqrt(2.0) * float(special.ndtri(0.75))
    neg = special.ndtr(rng.normal(size=400_000))
    pos = special.ndtr(rng.normal(size=400_000) + mu)
    exact = float(np.mean(pos > neg))
    for sd in (0.05, 0.15, 0.3):
        mc = float(np.mean(pos > neg + sd * rng.normal(size=neg.size)))
        # What the noise takes off the AUC. MC SE 0.001; the grid's error grows with the
        # noise, 0.0034 at sd 0.3 on 1201 points (0.0018 on the study's 3001).
        assert a(sd**2) - a0 == pytest.approx(mc - exact, abs=0.005)
    assert a(0.0) > a(0.01) > a(0.1) > a(1.0) > 0.5


def test_the_rational_extrapolant_is_exact_on_its_own_form():
    study = load_script("rocglm_simex_bias.py", "fedroc_rocglm_simex_bias_script")
    lam = np.array([0.0, 0.5, 1.0, 1.5, 2.0])
    values = 0.7 + 0.08 / (3.0 + lam)
    assert study.rational(lam, values) == pytest.approx(0.7 + 0.08 / 2.0, abs=1e-6)
