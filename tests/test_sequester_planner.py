"""Planner of paper 2: the paper's numbers, eq. 3 and its inverse, SE, power, CLI, figures."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fedroc.cli import main
from fedroc.exceptions import InputError
from fedroc.experiments import sequester as figures
from fedroc.methods.sequester.planner import (
    PlanWarning,
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
    suggested_noise_rate,
    thresholdout_budget,
)
from fedroc.metrics import auc_power, auc_sample_size, hanley_mcneil_se


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
    if target >= 1:
        assert plan(1047, 100, noise_rate=sigma, budget=target).subset_size == n
    else:  # a plan of 0 perturbed answers is refused
        with pytest.raises(InputError, match="load_factor"):
            plan(1047, 100, noise_rate=sigma, budget=target)


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
    # The DP epsilon the service charges, beside the paper's: at most 16 copies of an image
    # in a subset of 503 positives and 3685 negatives, Delta = 32 / 503, 2 answers at 0.8.
    assert res["max_copies"] == 16
    assert res["sensitivity"] == pytest.approx(32 / 503)
    assert res["epsilon_thresholdout"] == pytest.approx(2 * 2 * (32 / 503) / 0.8)
    assert res["epsilon_laplace"] == pytest.approx(2 * (32 / 503) / 0.8)
    main(["sequester", "plan", "--images", "1047", "--subsets", "100", "--load-factor", "400",
          "--noise-rate", "0.8", "--auc", "0.81", "--prevalence", "0.12", "--max-copies", "0",
          "--json"])  # fmt: skip
    res = json.loads(capsys.readouterr().out)
    assert res["max_copies"] == 0 and res["sensitivity"] == 1.0
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
    assert "--load-factor" in capsys.readouterr().err  # the option, as the user types it
    with pytest.raises(SystemExit) as exc:
        main(["sequester", "plan", "--images", "1047", "--subsets", "100", "--load-factor",
              "400", "--noise-rate", "1", "--max-copies", "-2"])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--max-copies must be a whole number >= 1 (or 0: no cap); got -2" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("option", "value"), [("--power", "2"), ("--alpha", "0")])
def test_cli_plan_refuses_power_and_alpha_without_auc(capsys, option, value):
    """Before: without --auc, --power 2 and --alpha 0 printed a plan (exit 0) whose JSON
    said "power": 2.0 or "alpha": 0.0; with --auc the same values were refused."""
    args = ["sequester", "plan", "--images", "1047", "--subsets", "100", "--load-factor",
            "400", "--noise-rate", "0.8", "--json"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main([*args, option, value])
    assert exc.value.code == 2
    out = capsys.readouterr()
    assert json.loads(out.out)["error"] == f"{option} must lie in (0, 1); got {float(value)}"
    assert "Traceback" not in out.err
    main([*args, option, "0.9" if option == "--power" else "0.01"])
    assert json.loads(capsys.readouterr().out)[option[2:]] in (0.9, 0.01)


def test_figure_out_path_is_checked_before_drawing(tmp_path, capsys):
    """Before: --out f.xyz exited 1 with matplotlib's ValueError and a traceback, and
    --out f wrote f.png but said "wrote f"."""
    with pytest.raises(SystemExit) as info:
        main(["sequester", "figure", "power", "--out", str(tmp_path / "f.xyz")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "Traceback" not in err
    assert f"--out {str(tmp_path / 'f.xyz')!r}: no figure format '.xyz'" in err
    main(["sequester", "figure", "power", "--out", str(tmp_path / "f")])
    assert capsys.readouterr().err.strip() == f"wrote {tmp_path / 'f.png'}"
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


def test_figures_are_written(tmp_path):
    fig = figures.budget_figure(300, 20, load_factors=[10, 50, 90], seed=1)
    axes = fig.get_axes()
    assert len(axes) == 2
    assert len(axes[0].get_lines()) == 4  # one budget curve per noise rate
    fig.savefig(tmp_path / "b.png")
    main(["sequester", "figure", "power", "--out", str(tmp_path / "p.png")])
    for name in ("b.png", "p.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_zero_budget_is_refused_with_what_to_change():
    # The paper's answer noise rate (0.124) with its clinical plan gives B = 0.008.
    with pytest.raises(InputError) as exc:
        plan(1047, 100, noise_rate=0.124, load_factor=400)
    msg = str(exc.value)
    assert "0 perturbed answers" in msg and "load_factor" in msg and "noise_rate" in msg
    assert "budget_units" in msg
    # The load factor and noise rate it names do give one unit, and are the smallest.
    xi_one = float(msg.split("at least ")[1].split(" ")[0])
    sigma_one = float(msg.split("noise_rate to at least ")[1].split(",")[0])
    assert plan(1047, 100, noise_rate=0.124, load_factor=xi_one).budget_units >= 1
    assert thresholdout_budget(subset_size(xi_one * 0.999, 1047, 100), 0.124) < 1
    assert thresholdout_budget(4188, sigma_one * 1.0001) >= 1
    assert thresholdout_budget(4188, sigma_one * 0.999) < 1
    # The custodian may override (and the override is what the plan allows).
    p = plan(1047, 100, noise_rate=0.124, load_factor=400, budget_units=3)
    assert p.budget_units == 3 and p.budget < 1
    with pytest.raises(InputError, match="budget_units"):
        plan(1047, 100, noise_rate=0.8, load_factor=400, budget_units=0)


def test_suggested_noise_rate_is_the_fwhm_rule():
    # FWHM of Lap(s) is 2 s ln 2; the 95% CI of the whole set is 2 * 1.96 * SE wide.
    se = hanley_mcneil_se(0.81, round(0.12 * 1047), 1047 - round(0.12 * 1047))
    s = suggested_noise_rate(0.81, 0.12, 1047)
    assert 2 * s * math.log(2) == pytest.approx(2 * 1.959963984540054 * se, rel=1e-12)


def test_planner_warns_about_the_noise_rates(recwarn):
    # The paper's example: budget at 0.8, answers at 0.124 -> the two differ.
    with pytest.warns(PlanWarning, match="answer_noise_rate 0.124") as rec:
        p = plan(1047, 100, noise_rate=0.8, load_factor=400, answer_noise_rate=0.124)
    assert len(p.warnings) == len(rec) == 1 and "weaker" in p.warnings[0]
    # One noise rate of 0.8 for the answers too: the answers say little.
    with pytest.warns(PlanWarning, match="carry little"):
        plan(1047, 100, noise_rate=0.8, load_factor=400)
    with pytest.warns(PlanWarning, match="carry little"):
        plan(1047, 100, noise_rate=0.8, load_factor=400, auc=0.81, prevalence=0.12)
    # Within a factor of 2 of the rule, budget set at the same rate: no warning (but eq. 3
    # then needs subsets of some 10^5 images for one unit).
    target = suggested_noise_rate(0.81, 0.12, 1047)
    recwarn.clear()
    p = plan(1047, 100, noise_rate=1.9 * target, budget=1, auc=0.81, prevalence=0.12)
    assert p.warnings == () and not [w for w in recwarn if w.category is PlanWarning]
    assert p.subset_size > 100_000
    with pytest.warns(PlanWarning, match="small beside"):
        plan(1047, 100, noise_rate=0.8, load_factor=400, answer_noise_rate=target / 3,
             auc=0.81, prevalence=0.12)  # fmt: skip
    with pytest.warns(PlanWarning, match="budget_units 3 is above"):
        plan(1047, 100, noise_rate=0.124, load_factor=400, budget_units=3)


def test_cli_plan_prints_warnings_and_refuses_zero_budget(capsys):
    main(["sequester", "plan", "--images", "1047", "--subsets", "100", "--load-factor", "400",
          "--noise-rate", "0.8", "--answer-noise-rate", "0.124", "--json"])  # fmt: skip
    captured = capsys.readouterr()
    res = json.loads(captured.out)
    assert res["answer_noise_rate"] == 0.124 and len(res["warnings"]) == 1
    assert "warning" in captured.err and "--answer-noise-rate 0.124" in captured.err
    with pytest.raises(SystemExit) as exc:
        main(["sequester", "plan", "--images", "1047", "--subsets", "100", "--load-factor",
              "400", "--noise-rate", "0.124"])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "0 perturbed answers" in err and "--load-factor" in err and "Traceback" not in err


def test_huge_inputs_are_refused_not_overflowed():
    with pytest.raises(InputError, match="noise_rate"):
        plan(1047, 100, noise_rate=1e308, load_factor=400)
    with pytest.raises(InputError, match="load_factor"):
        plan(1047, 100, noise_rate=0.8, load_factor=1e300)
    with pytest.raises(InputError, match="n_subsets"):
        plan(1047, math.inf, noise_rate=0.8, load_factor=4)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="subset_size"):
        plan(1047, 100, noise_rate=0.8, subset_size=float("nan"))  # type: ignore[arg-type]


def test_perturbation_by_subset_is_the_h_rule():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(3)
    y = rng.random(400) < 0.2
    s = rng.normal(size=400) + 1.2 * y
    for xi in (10.0, 70.0):
        p = figures.perturbation_by_subset(y, s, xi, n_subsets=50, seed=np.random.default_rng(1))
        # Same subsets again from the same generator state: the brute-force reference.
        table = figures.draw_subsets(y, n_subsets=50, subset_size=p.subset_size,
                                     replace=True, max_copies=0,
                                     seed=np.random.default_rng(1))  # fmt: skip
        exact = np.array([roc_auc_score(y[m], s[m]) for m in table.members])
        assert np.allclose(p.subset_auc, exact, atol=1e-12)
        assert p.whole_auc == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        assert np.array_equal(p.perturbed, np.abs(exact - p.whole_auc) > 0.02)
        assert (p.noise[~p.perturbed] == 0).all() and (p.noise[p.perturbed] != 0).all()
    # Larger subsets stray less from the whole set: fewer perturbed (the paper's point).
    small = figures.perturbation_by_subset(y, s, 10.0, n_subsets=200, seed=5)
    large = figures.perturbation_by_subset(y, s, 70.0, n_subsets=200, seed=5)
    assert small.perturbed.sum() > large.perturbed.sum()


def test_cli_perturbation_figure_is_written(tmp_path):
    out = tmp_path / "fig4.png"
    main(["sequester", "figure", "perturbation", "--out", str(out), "--subsets", "40"])
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_fedroc_figures_writes_paper_2(tmp_path, capsys):
    main(["figures", "--paper", "2", "--out", str(tmp_path), "--quick", "--json"])
    made = json.loads(capsys.readouterr().out)["figures"]
    assert [f["figure"] for f in made] == ["3", "4", "5"]
    for f in made:
        data = open(f["file"], "rb").read()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, f


def test_cli_plan_speaks_options_and_titles_by_mechanism(capsys):
    """Walkthrough: the CLI's warning said "give auc and prevalence" (the API's keywords),
    --answer-noise-rate's help gave no default, the load factor 400 read "400.0000" and the
    table was titled "(h-Thresholdout_AUC)", not by the mechanism planned."""
    main(["sequester", "plan", "--images", "1047", "--subsets", "100", "--load-factor", "400",
          "--noise-rate", "0.8"])  # fmt: skip
    captured = capsys.readouterr()
    assert "give --auc and --prevalence for its rule" in captured.err
    assert "Sequestration plan (thresholdout)" in captured.out
    assert "h-Thresholdout_AUC" not in captured.out
    [row] = [line for line in captured.out.splitlines() if "load factor (xi)" in line]
    assert "400" in row and "400.0" not in row
    main(["sequester", "plan", "--images", "1047", "--subsets", "100", "--load-factor", "400",
          "--noise-rate", "0.8", "--json"])  # fmt: skip
    res = json.loads(capsys.readouterr().out)
    assert "mechanism" not in res  # the keys are docs/json.md's
    assert "--auc" in res["warnings"][0]
    main(["sequester", "plan", "--help"])
    assert "Default: --noise-rate" in " ".join(capsys.readouterr().out.split())
    p = plan(1047, 100, noise_rate=0.8, load_factor=400, mechanism="laplace", warn=False)
    assert p.summary().startswith("Sequestration plan (laplace)")
