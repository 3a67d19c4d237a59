"""Planner of paper 2: the paper's numbers, eq. 3 and its inverse, SE, power, CLI, figures."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fedroc.cli import main
from fedroc.exceptions import InputError
from fedroc.metrics import auc_power, auc_sample_size, hanley_mcneil_se
from fedroc.sequester import planner
from fedroc.sequester.planner import (
    auc_se_at,
    epsilon_of,
    load_factor,
    load_factor_for_budget,
    min_subset_size,
    noise_rate_for_budget,
    plan,
    power_grid,
    subset_size,
    subset_size_for_budget,
    thresholdout_budget,
)


def test_paper_sigma1_xi600():
    # Paper section 4: sigma = 1, xi = 600, 1047 images, 100 subsets -> 6282 images, B ~ 6.
    p = plan(1047, 100, noise_rate=1.0, load_factor=600)
    assert p.subset_size == 6282
    assert p.budget == pytest.approx(6.13, abs=0.005)  # NOTES.md: 6.13
    assert p.budget_units == 6
    assert p.epsilon == pytest.approx(p.budget / (1.0 * 1047))


def test_paper_sigma08_xi400():
    # Paper section 3: load factor 400, 100 subsets -> 4188 images; budget "2.0" (2.09).
    p = plan(1047, 100, noise_rate=0.8, load_factor=400)
    assert p.subset_size == 4188
    assert p.budget == pytest.approx(2.09, abs=0.005)
    assert p.budget_units == 2
    assert p.epsilon == pytest.approx(p.budget / (0.8 * 1047))


def test_budget_formula_by_hand():
    # Eq. 3 written out independently for a few points.
    for n, s in [(10, 0.3), (4188, 0.8), (6282, 1.0), (100000, 0.124)]:
        expected = s**5 * n**2 / (512 * (math.log(8) + 2 * s**2 * n))
        assert thresholdout_budget(n, s) == pytest.approx(expected, rel=1e-12)


def test_paper_auc_se_at_load_factor_400():
    # Paper: SE 0.012 at load factor 400 (AUC 0.81); Hanley-McNeil gives it at prevalence 0.12.
    se = auc_se_at(0.81, 0.12, load_factor=400, n_images=1047, n_subsets=100)
    assert se == pytest.approx(0.012, abs=0.0005)
    assert se == hanley_mcneil_se(0.81, round(0.12 * 4188), 4188 - round(0.12 * 4188))
    # SE falls like 1 / sqrt(load factor): quadrupling xi halves it (nearly).
    se4 = auc_se_at(0.81, 0.12, load_factor=1600, n_images=1047, n_subsets=100)
    assert se / se4 == pytest.approx(2.0, rel=0.01)


def test_load_factor_and_subset_size_roundtrip():
    assert load_factor(6282, 100, 1047) == pytest.approx(600.0)
    assert subset_size(1.6, 1047, 73) == 23  # paper section 3: n = 23 at xi = 1.6, 73 subsets
    for xi in [0.5, 1.0, 3.3, 400.0]:
        n = subset_size(xi, 1047, 100)
        assert load_factor(n, 100, 1047) >= xi - 1e-9
        assert load_factor(n - 1, 100, 1047) < xi if n > 1 else True


@pytest.mark.parametrize("sigma", [0.4, 0.8, 1.0])
@pytest.mark.parametrize("target", [0.5, 2.0, 6.0, 50.0])
def test_inverse_subset_size_is_the_smallest(sigma, target):
    n = subset_size_for_budget(target, sigma)
    assert thresholdout_budget(n, sigma) >= target
    assert thresholdout_budget(n - 1, sigma) < target
    xi, n2 = load_factor_for_budget(target, sigma, 1047, 100)
    assert n2 == n
    assert xi == pytest.approx(n * 100 / 1047)
    assert plan(1047, 100, noise_rate=sigma, budget=target).subset_size == n


def test_inverse_noise_rate():
    s = noise_rate_for_budget(6.133750440705771, 6282)
    assert s == pytest.approx(1.0, rel=1e-9)
    for b in [0.1, 3.0, 40.0]:
        assert thresholdout_budget(4188, noise_rate_for_budget(b, 4188)) == pytest.approx(b)


def test_min_subset_size_matches_obuchowski():
    ss = auc_sample_size(0.81, power=0.8, kappa=(1 - 0.3) / 0.3)
    assert min_subset_size(0.81, 0.3, power=0.8) == ss.n_cases + ss.n_controls
    # More power or a rarer class needs more images.
    assert min_subset_size(0.81, 0.3, power=0.9) > min_subset_size(0.81, 0.3, power=0.8)
    assert min_subset_size(0.81, 0.1) > min_subset_size(0.81, 0.3)


def test_power_grid_matches_auc_power():
    xi = np.array([0.5, 1.6, 2.0])
    rho = np.array([10, 73, 100])
    grid = power_grid(0.81, 0.25, xi, rho, 1047)
    for i, r in enumerate(rho):
        for j, x in enumerate(xi):
            n = subset_size(float(x), 1047, int(r))
            if (0.25 * n) == int(0.25 * n):  # auc_power takes whole numbers of cases
                assert grid[i, j] == pytest.approx(
                    auc_power(0.81, int(0.25 * n), kappa=3.0), rel=1e-12
                )
    assert np.all(np.diff(grid, axis=1) >= -1e-12)  # power grows with the load factor
    assert np.all(np.diff(grid, axis=0) <= 1e-12)  # and falls with more subsets
    # Spot check through whole numbers: N = 100 at prevalence 0.25 -> 25 cases.
    g = power_grid(0.7, 0.25, [100 * 10 / 1000], [10], 1000)
    assert g[0, 0] == pytest.approx(auc_power(0.7, 25, kappa=3.0), rel=1e-12)


def test_bad_input_is_named():
    with pytest.raises(InputError, match="noise_rate"):
        plan(1047, 100, noise_rate=0.0, load_factor=1.0)
    with pytest.raises(InputError, match="exactly one"):
        plan(1047, 100, noise_rate=1.0, load_factor=1.0, subset_size=10)
    with pytest.raises(InputError, match="n_subsets"):
        plan(1047, 0, noise_rate=1.0, load_factor=1.0)
    with pytest.raises(InputError, match="prevalence"):
        plan(1047, 100, noise_rate=1.0, load_factor=1.0, auc=0.8, prevalence=1.5)
    with pytest.raises(InputError, match="together"):
        plan(1047, 100, noise_rate=1.0, load_factor=1.0, auc=0.8)
    with pytest.raises(InputError, match="budget"):
        epsilon_of(-1.0, 1.0, 10)


def test_cli_plan_json(capsys):
    main(["sequester", "plan", "--images", "1047", "--subsets", "100", "--load-factor", "400",
          "--noise-rate", "0.8", "--auc", "0.81", "--prevalence", "0.12", "--json"])  # fmt: skip
    res = json.loads(capsys.readouterr().out)
    assert res["subset_size"] == 4188
    assert res["budget"] == pytest.approx(2.0932, abs=1e-4)
    assert res["epsilon"] == pytest.approx(res["budget"] / (0.8 * 1047))
    assert res["auc_se"] == pytest.approx(0.012, abs=0.0005)
    main(["sequester", "plan", "--images", "1047", "--subsets", "100", "--load-factor", "600",
          "--noise-rate", "1", "--json"])  # fmt: skip
    res = json.loads(capsys.readouterr().out)
    assert res["subset_size"] == 6282 and res["auc_se"] is None
    main(["sequester", "plan", "--images", "1047", "--subsets", "100", "--budget", "6",
          "--noise-rate", "1", "--json"])  # fmt: skip
    res = json.loads(capsys.readouterr().out)
    assert res["budget"] >= 6 and res["subset_size"] == subset_size_for_budget(6, 1.0)


def test_cli_plan_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["sequester", "plan", "--images", "1047", "--subsets", "100", "--noise-rate", "1"])
    assert exc.value.code == 2
    assert "load_factor" in capsys.readouterr().err


def test_figures_are_written(tmp_path):
    fig = planner.budget_figure(300, 20, load_factors=[10, 50, 90], seed=1)
    axes = fig.get_axes()
    assert len(axes) == 2
    assert len(axes[0].get_lines()) == 4  # one budget curve per noise rate
    fig.savefig(tmp_path / "b.png")
    main(["sequester", "figure", "power", "--out", str(tmp_path / "p.png")])
    for name in ("b.png", "p.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
