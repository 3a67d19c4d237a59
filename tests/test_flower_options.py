"""`fedroc flower run` gives the evaluate job the method options of `fedroc evaluate`.

`flower run` carried only --seed, --confidence, --bins and --sensitivity: over Flower a
hospital network could not choose, e.g., the histogram's DP epsilon or a score range. The
options now reach the ServerApp's evaluate job as `fedroc evaluate` gives them to the method
in process (the same keywords, fedroc.cli._method_options), and `flower run` checks their
values before it connects, without loading the methods (fedroc.cli._method_options
.check_values mirrors their checks; the tests here hold the two together). The deployment
test is tests/test_flower_deploy.py::test_cli_gives_the_evaluate_job_the_method_options.
"""

from __future__ import annotations

import inspect
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _cli import run_main
from _flower_sites import write_sites

pytest.importorskip("flwr")

from fedroc.cli._method_options import CHOICES, FLOWER_TAKES, INTEGERS

FLOWER = ["flower", "run", "--superlink", "127.0.0.1:1", "--insecure"]


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_sites(tmp_path_factory.mktemp("flower-options"))


class _Stop(Exception):
    """Ends a command once the options it would send were seen."""


def _flower_job_options(monkeypatch, capsys, args: list[str]) -> dict[str, Any]:
    """What `flower run ARGS` submits to the ServerApp (the job's options), nothing run."""
    from fedroc.federation.flower import deploy

    sent: dict[str, Any] = {}

    def submit(connection: Any, job: str, options: Any, **kwargs: Any) -> Any:
        sent.update(job=job, options=json.loads(json.dumps(options)))  # as the run config
        raise _Stop

    monkeypatch.setattr(deploy, "submit_job", submit)
    _, _, err = run_main(capsys, [*FLOWER, *args])
    assert sent, err
    assert sent["job"] == "evaluate"
    return dict(sent["options"])


def _evaluate_options(monkeypatch, capsys, paths, args: list[str]) -> dict[str, Any]:
    """The method keywords `fedroc evaluate ARGS` passes to fedroc.methods.evaluate."""
    import fedroc.methods

    seen: dict[str, Any] = {}

    def evaluate(federation: Any, method: str, **kwargs: Any) -> Any:
        seen.update(json.loads(json.dumps(kwargs, default=str)))
        raise _Stop

    monkeypatch.setattr(fedroc.methods, "evaluate", evaluate)
    sites = [f"--site={name}={path}" for name, path in paths.items()]
    _, _, err = run_main(capsys, ["evaluate", *sites, *args])
    assert seen, err
    for common in ("pooled", "seed", "confidence_level", "calibration_bins"):
        seen.pop(common)
    return seen


CASES = {
    "histogram": [
        *("--dp-epsilon 1 --dp-mode local --dp-noise continuous --quantiles 64".split()),
        *("--interpolation linear --branching 4 --height 5 --score-range=-0.5,1.5".split()),
        *("--max-fpr 0.3 --at-specificity 0.9 --at-specificity 0.8 --youden".split()),
    ],
    "rocglm": [
        *("--epsilon 2 --delta 1e-4 --sensitivity 0.02 --dp-calibration classic".split()),
        *("--thresholds grid --n-thresholds 20 --correction deconvolution".split()),
        *("--bootstrap 30 --a0 0.6 --score-range 0,2 --privacy default".split()),
    ],
    "clustered": [
        *("--cluster-bins 200 --population-estimator between --sigma11 authors".split()),
        *("--cluster-interval wald --plain --score-range 0,1".split()),
    ],
}


@pytest.mark.parametrize("method", sorted(CASES))
def test_flower_run_sends_the_method_the_keywords_evaluate_gives_it(
    monkeypatch, capsys, paths, method
):
    """The job options of `flower run` are those `fedroc evaluate` passes in process."""
    # --seed only where the method draws numbers of the analyst's (rocglm, clustered refuse it)
    seed = ["--seed", "3"] if method == "histogram" else []
    args = ["--method", method, *CASES[method], *seed, "--confidence", "0.9"]
    sent = _flower_job_options(monkeypatch, capsys, [*args, "--bins", "8"])
    cluster = ["--cluster", "patient"] if method == "clustered" else []
    given = _evaluate_options(monkeypatch, capsys, paths, [*args, *cluster])
    assert sent.pop("options") == given
    expected_seed = 3 if seed else None
    assert sent == {
        "method": method,
        "seed": expected_seed,
        "confidence_level": 0.9,
        "calibration_bins": 8,
    }
    # Every option of the case arrived (none dropped on the way): one keyword per flag.
    flags = {a.split("=")[0] for a in CASES[method] if a.startswith("--")}
    assert len(given) == len(flags)


def test_the_serverapps_evaluate_job_runs_the_method_with_them(monkeypatch, capsys, paths):
    """The job options of `flower run --method histogram --dp-epsilon 1 --quantiles 64`,
    run by the ServerApp's evaluate job (here on the in-process transport): each site is
    charged twice the epsilon (a moved row changes two counts), on the 64-quantile tree."""
    import fedroc.apps.application  # noqa: F401  (registers the evaluate job)
    from fedroc.federation import Federation
    from fedroc.federation.flower.jobs import run_job

    args = ["--method", "histogram", "--dp-epsilon", "1", "--quantiles", "64"]
    options = _flower_job_options(monkeypatch, capsys, [*args, "--max-fpr", "0.5"])
    result = run_job("evaluate", Federation.from_files(paths, noise_seed=5), options)
    assert result["mode"] == "distributed-dp" and result["quantiles"] == 64
    assert result["epsilon"] == 1.0
    charged = result["released"]["epsilon"]
    assert set(charged) == set(paths)
    assert all(math.isclose(v, 2.0) for v in charged.values()), charged
    assert result["max_fpr"] == 0.5 and 0.5 <= result["partial_auc"] <= 1
    plain = run_job("evaluate", Federation.from_files(paths), {"method": "histogram"})
    assert plain["mode"] == "secure-aggregation" and not plain["released"]["epsilon"]


def test_bins_sets_the_histograms_calibration_bins_in_process_and_in_the_serverapp(
    monkeypatch, capsys, paths
):
    """`--bins 5 --method histogram` gave a calibration curve of 10 bins in both commands:
    fedroc.methods.evaluate kept calibration_bins for the curve it adds itself and never
    passed it to the histogram method, which computes its own curve from the tree."""
    import fedroc.apps.application  # noqa: F401  (registers the evaluate job)
    from fedroc.federation import Federation
    from fedroc.federation.flower.jobs import run_job

    sites = [f"--site={name}={path}" for name, path in paths.items()]
    for bins in (5, 12):
        args = ["--method", "histogram", "--bins", str(bins)]
        code, out, err = run_main(capsys, ["evaluate", *sites, *args, "--json"])
        assert code == 0, err
        assert len(json.loads(out)["calibration"]["edges"]) == bins + 1
        options = _flower_job_options(monkeypatch, capsys, args)
        result = run_job("evaluate", Federation.from_files(paths), options)
        assert len(result["calibration"]["edges"]) == bins + 1


# -- the checks before any connection, against the methods' own ------------------------------
def test_the_checks_take_the_values_the_methods_take():
    from fedroc.methods.clustered._estimators import POPULATION_ESTIMATORS, SIGMA11_DIVISORS
    from fedroc.methods.clustered._result import INTERVALS
    from fedroc.methods.clustered._site import MAX_BINS
    from fedroc.methods.histogram import INTERPOLATIONS, NOISES, TRANSFORMS
    from fedroc.methods.histogram._protocol import DP_MODES
    from fedroc.methods.rocglm._core import THRESHOLD_RULES
    from fedroc.methods.rocglm._distributed import (
        CALIBRATIONS,
        CORRECTIONS,
        MAX_RESAMPLES,
        PRIVACY_SETTINGS,
    )
    from fedroc.methods.rocglm._site import MAX_THRESHOLDS

    assert CHOICES == {
        "dp_noise": tuple(NOISES),
        "dp_mode": tuple(DP_MODES),
        "interpolation": tuple(INTERPOLATIONS),
        "score_transform": tuple(TRANSFORMS),
        "dp_calibration": tuple(CALIBRATIONS),
        "privacy": tuple(PRIVACY_SETTINGS),
        "thresholds": tuple(THRESHOLD_RULES),
        "correction": tuple(CORRECTIONS),
        "population_estimator": tuple(POPULATION_ESTIMATORS),
        "sigma11": tuple(SIGMA11_DIVISORS),
        # across sites the clustered method refuses the jackknife (the pooled analysis's)
        "interval": tuple(i for i in INTERVALS if i != "jackknife"),
    }
    assert INTEGERS["n_thresholds"] == (2, MAX_THRESHOLDS)
    assert INTEGERS["bootstrap"] == (2, MAX_RESAMPLES)
    assert INTEGERS["n_bins"] == (1, MAX_BINS)


def test_each_method_takes_exactly_the_flower_options_its_runner_takes():
    from fedroc.methods import get_method

    offered = set().union(*FLOWER_TAKES.values())
    for method, takes in FLOWER_TAKES.items():
        params = set(inspect.signature(get_method(method).run).parameters)
        assert takes == offered & params, method


BAD = [
    (["--method", "histogram", "--dp-mode", "central"], "--dp-mode", "'central'"),
    (["--method", "histogram", "--dp-noise", "gaussian"], "--dp-noise", "'gaussian'"),
    (["--method", "histogram", "--dp-epsilon", "0"], "--dp-epsilon", "0"),
    (["--method", "histogram", "--dp-epsilon", "nan"], "--dp-epsilon", "nan"),
    (["--method", "histogram", "--dp-mode", "local"], "--dp-mode", "'local'"),
    (["--method", "histogram", "--interpolation", "cubic"], "--interpolation", "'cubic'"),
    (["--method", "histogram", "--quantiles", "1"], "--quantiles", "1"),
    (["--method", "histogram", "--branching", "1"], "--branching", "1"),
    (["--method", "histogram", "--height", "0"], "--height", "0"),
    (["--method", "histogram", "--score-range", "1,0"], "--score-range", "1"),
    (["--method", "histogram", "--score-range", "zero,one"], "--score-range", "'zero,one'"),
    (["--method", "histogram", "--score-range=-1e308,1e308"], "--score-range", "1e+308"),
    (["--method", "clustered", "--score-range=-1e308,1e308"], "--score-range", "1e+308"),
    (["--method", "histogram", "--score-transform", "probit"], "--score-transform", "'probit'"),
    (["--method", "histogram", "--max-fpr", "0"], "--max-fpr", "0"),
    (["--method", "histogram", "--at-sensitivity", "1.5"], "--at-sensitivity", "1.5"),
    (["--method", "rocglm", "--epsilon", "1", "--delta", "1"], "--delta", "1"),
    (["--method", "rocglm", "--epsilon", "-1", "--delta", "0.01"], "--epsilon", "-1"),
    (["--method", "rocglm", "--sensitivity", "0"], "--sensitivity", "0"),
    (["--method", "rocglm", "--dp-calibration", "exact"], "--dp-calibration", "'exact'"),
    (["--method", "rocglm", "--privacy", "none"], "--privacy", "'none'"),
    (["--method", "rocglm", "--thresholds", "all"], "--thresholds", "'all'"),
    (["--method", "rocglm", "--n-thresholds", "65"], "--n-thresholds", "65"),
    (["--method", "rocglm", "--correction", "simex"], "--correction", "'simex'"),
    (["--method", "rocglm", "--bootstrap", "1"], "--bootstrap", "1"),
    (["--method", "rocglm", "--score-levels", "3"], "--score-levels", "3"),
    (["--method", "rocglm", "--a0", "1"], "--a0", "1"),
    (["--method", "clustered", "--cluster-bins", "0"], "--cluster-bins", "0"),
    (["--method", "clustered", "--cluster-bins", "10000000000"], "--cluster-bins", "10000000000"),
    (["--method", "clustered", "--sigma11", "n"], "--sigma11", "'n'"),
    (["--method", "clustered", "--population-estimator", "x"], "--population-estimator", "'x'"),
    (["--method", "clustered", "--cluster-interval", "jackknife"], "--cluster-interval", "jack"),
]


@pytest.mark.parametrize(("args", "flag", "value"), BAD)
def test_a_bad_value_is_refused_before_connecting_as_evaluate_refuses_it(
    monkeypatch, capsys, paths, args, flag, value
):
    """Refused at once (nothing submitted), one line naming the option and the value; and
    `fedroc evaluate` (the method itself) refuses the same value, naming the same option."""
    from fedroc.federation.flower import deploy

    def submit(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("submitted")

    monkeypatch.setattr(deploy, "submit_job", submit)
    code, out, err = run_main(capsys, [*FLOWER, *args])
    assert code == 2 and out == "", err
    [line] = err.splitlines()
    assert line.startswith(f"error: {flag}") and value in line, line
    cluster = ["--cluster", "patient"] if "clustered" in args else []
    sites = [f"--site={name}={path}" for name, path in paths.items()]
    code, out, err = run_main(capsys, ["evaluate", *sites, *args, *cluster])
    assert code == 2 and out == "", err
    assert flag in err.splitlines()[0], err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--method", "histogram", "--epsilon", "1"], "option(s) --epsilon do not apply to"),
        (["--method", "mpc", "--quantiles", "8"], "option(s) --quantiles do not apply to --method"),
        (["--method", "clustered", "--youden"], "--method clustered cannot give --youden"),
        (["--method", "rocglm", "--epsilon", "1"], "give both --epsilon and --delta, or neither"),
        (["--method", "histogram", "--compare-score", "m2"], "--compare-score does not apply on"),
        # The MPC job over Flower draws no calibration curve (no --mpc-calibration there).
        (["--method", "mpc", "--bins", "5"], "--bins applies to --method mpc with --mpc-calib"),
        (
            ["--job", "moments", "--quantiles", "8", "--plain"],
            "--quantiles, --plain apply to --job",
        ),
    ],
)
def test_an_option_that_does_not_apply_is_refused_naming_it(monkeypatch, capsys, args, message):
    code, out, err = run_main(capsys, [*FLOWER, *args])
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert line.startswith(f"error: {message}"), line


# An option that only shapes what another option (or its default) turns off: the method
# took it and ignored it without a word, in process and over Flower (review s15).
IGNORED = [
    (
        ["--method", "histogram", "--dp-noise", "continuous"],
        "--dp-noise 'continuous' needs --dp-epsilon",
    ),
    (
        ["--method", "rocglm", "--correction", "none", "--bootstrap", "30"],
        "--bootstrap does not apply with --correction none",
    ),
    (
        ["--method", "rocglm", "--thresholds", "positives", "--n-thresholds", "20"],
        "--n-thresholds does not apply with --thresholds positives",
    ),
    (
        ["--method", "rocglm", "--score-levels", "0,0.5,1", "--score-range", "0,2"],
        "--score-range does not apply with --score-levels",
    ),
    # Measured before: the run released at --epsilon/--delta (paper 1's table ignored) with
    # the paper's classic calibration (sd 0.948 where the default analytic one is smaller),
    # and the result said nothing of --privacy.
    (
        ["--method", "rocglm", "--privacy", "paper", "--epsilon", "0.5", "--delta", "1e-5"],
        "--privacy 'paper' does not apply with --epsilon and --delta: it chooses the "
        "(epsilon, delta) of a run without them (paper 1's table); give one or the other "
        "(paper 1's Gaussian mechanism at your own values: --dp-calibration classic)",
    ),
]


@pytest.mark.parametrize(("args", "message"), IGNORED)
def test_an_option_the_method_would_ignore_is_refused_by_both_commands(
    monkeypatch, capsys, paths, args, message
):
    """Measured before: `--correction none --bootstrap 30` gave the very result of
    `--correction none`, as did `--dp-noise continuous` without --dp-epsilon the result of
    no option, `--thresholds positives --n-thresholds 20` that of the positives rule and
    `--score-levels L --score-range R` that of the levels alone."""
    from fedroc.federation.flower import deploy

    def submit(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("submitted")

    monkeypatch.setattr(deploy, "submit_job", submit)
    sites = [f"--site={name}={path}" for name, path in paths.items()]
    for command in (FLOWER, ["evaluate", *sites]):
        code, out, err = run_main(capsys, [*command, *args])
        assert (code, out) == (2, ""), err
        [line] = err.splitlines()
        assert line.startswith(f"error: {message}"), line


def test_the_checks_load_no_method_code():
    """`flower run` avoids pandas and scipy (1-5 s per job, docs/flower.md); checking the
    method options must not load them, or a refusal would take as long as a run's start."""
    code = (
        "import sys\n"
        "from fedroc.cli import main\n"
        "try:\n"
        "    main(['flower', 'run', '--superlink', '127.0.0.1:1', '--insecure',\n"
        "          '--method', 'histogram', '--dp-epsilon', '1', '--dp-mode', 'central'])\n"
        "except SystemExit as exc:\n"
        "    print(exc.code)\n"
        "print(sorted(m for m in ('numpy', 'pandas', 'scipy', 'fedroc.methods',\n"
        "                         'fedroc.federation.site') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["2", "[]"], done
    assert "--dp-mode must be one of ['distributed', 'local']; got 'central'" in done.stderr


def test_both_commands_name_plain_as_the_option_that_does_not_apply(capsys, paths):
    """`evaluate --method histogram --plain` said "option(s) --secure do not apply": the
    method's keyword, no option of the command."""
    sites = [f"--site={name}={path}" for name, path in paths.items()]
    for args in (["evaluate", *sites], FLOWER):
        code, out, err = run_main(capsys, [*args, "--method", "histogram", "--plain"])
        assert (code, out) == (2, "")
        assert err == (
            "error: option(s) --plain do not apply to --method histogram; "
            "--plain is an option of --method clustered\n"
        )


def test_the_methods_refusal_in_the_serverapp_names_the_option(monkeypatch, capsys):
    """What only the sites' data can refuse comes back from the ServerApp as the method's
    InputError, which named its keyword (score_range); it names the option, as evaluate's."""
    from fedroc.exceptions import InputError
    from fedroc.federation.flower import deploy

    def submit(*args: Any, **kwargs: Any) -> Any:
        raise InputError("score_range (0.0, 0.5) misses the scores of site(s) ['site2']")

    monkeypatch.setattr(deploy, "submit_job", submit)
    args = [*FLOWER, "--method", "histogram", "--score-range", "0,0.5"]
    code, out, err = run_main(capsys, args)
    assert (code, out) == (2, "")
    assert err == "error: --score-range (0.0, 0.5) misses the scores of site(s) ['site2']\n"


def test_a_real_refusal_of_the_method_in_the_job_names_the_option(monkeypatch, capsys, paths):
    """As the test above, on the method's own refusal rather than a made-up message: the
    evaluate job runs (in process) on sites whose scores are not the declared levels, its
    InputError crosses the wire form the ServerApp sends (error_to_dict / error_from_dict),
    and `flower run` names --score-levels, as `fedroc evaluate` does."""
    import fedroc.apps.application  # noqa: F401  (registers the evaluate job)
    from fedroc.exceptions import FedrocError, error_from_dict, error_to_dict
    from fedroc.federation import Federation
    from fedroc.federation.flower import deploy
    from fedroc.federation.flower.jobs import run_job

    def submit(connection: Any, job: str, options: Any, **kwargs: Any) -> Any:
        try:
            run_job(job, Federation.from_files(paths), json.loads(json.dumps(options)))
        except FedrocError as exc:
            raise error_from_dict(error_to_dict(exc), fallback="FedrocError") from None
        raise AssertionError("the method did not refuse the levels")

    monkeypatch.setattr(deploy, "submit_job", submit)
    args = ["--method", "rocglm", "--score-levels", "1,2,3"]
    code, out, err = run_main(capsys, [*FLOWER, *args])
    assert (code, out) == (2, "")
    [line] = err.splitlines()
    assert line.startswith("error: site(s) ") and "not among the declared --score-levels" in line
    sites = [f"--site={name}={path}" for name, path in paths.items()]
    code, out, err2 = run_main(capsys, ["evaluate", *sites, *args])
    assert code == 2 and err2 == err
