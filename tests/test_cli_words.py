"""The command line's tables in words: a statistician who never reads the JSON sees labels,
not its keys (``n_pos``, ``auc_ci_logit``, ``sensitivity_is_heuristic``), and values as a
reader writes them. The JSON keys are a contract (docs/json.md) and stay as they are."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests._cli import run_main
from tests._site_files import clustered_two_scores

# A key of the JSON: lower-case words joined by underscores.
_KEY = re.compile(r"^[a-z0-9]+(_[a-z0-9]+)+$")


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Three sites of 120-160 rows in clusters of 4, two scores: as `--site` options."""
    tmp = tmp_path_factory.mktemp("words")
    rng = np.random.default_rng(11)
    args = []
    for name, clusters in (("north", 35), ("south", 30), ("east", 40)):
        frame = clustered_two_scores(rng, clusters)
        path = tmp / f"{name}.csv"
        frame.to_csv(path, index=False)
        args += ["--site", f"{name}={path}"]
    return args


def table_rows(out: str, title: str) -> dict[str, str]:
    """The rows of the key-value table titled ``title``: label -> value (first line of each)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows: dict[str, str] = {}
    for line in lines[start + 2 :]:
        if line.startswith("└"):
            break
        cells = line.split("│")
        if len(cells) >= 3 and cells[1].strip():
            rows.setdefault(cells[1].strip(), cells[2].strip())
    return rows


EVALUATE_RUNS = [
    ("pooled", ["--bootstrap", "20", "--seed", "1", "--max-fpr", "0.2"]),
    ("rocglm", ["--sensitivity", "0.01", "--a0", "0.6"]),
    ("histogram", []),
    ("histogram", ["--dp-epsilon", "2", "--quantiles", "64"]),
    ("clustered", ["--cluster", "pid"]),
    ("mpc", []),
]


@pytest.mark.parametrize(
    ("method", "options"), EVALUATE_RUNS, ids=[f"{m}-{i}" for i, (m, _) in enumerate(EVALUATE_RUNS)]
)
def test_the_evaluate_table_labels_its_rows_in_words(capsys, sites, method, options):
    """Before: every key a method added was a row under its JSON name (``n_pos``,
    ``average_precision``, ``auc_ci_logit``, ``sensitivity_is_heuristic``, ``equality_p``),
    and the note under the histogram's table began "roc_area_error, pr_area_error, ..."."""
    args = ["evaluate", *sites, "--method", method, *options]
    code, out, err = run_main(capsys, [*args, "--json"])
    assert code == 0, err
    keys = {k for k in json.loads(out) if "_" in k}
    code, out, err = run_main(capsys, args)
    assert code == 0, err
    rows = table_rows(out, f"Evaluation: {method}")
    shown = [label for label in rows if _KEY.match(label) or label in keys]
    assert not shown, out
    assert "standard error of the AUC" in rows and any(label.startswith("rows") for label in rows)
    for key in ("roc_area_error", "auc_error", "ap_error"):
        assert key not in out


def test_the_evaluate_table_shows_the_test_of_a0(capsys, sites):
    """Before: `--a0` gave its one-sided test only in the JSON (``auc_test``, a dict the
    table skipped). The z is on the logit scale with the AUC's SE (docs/json.md)."""
    from scipy.special import logit
    from scipy.stats import norm

    args = ["evaluate", *sites, "--method", "rocglm", "--sensitivity", "0.01", "--a0", "0.6"]
    code, out, err = run_main(capsys, args)
    assert code == 0, err
    rows = table_rows(out, "Evaluation: rocglm")
    auc, se = float(rows["AUC"]), float(rows["standard error of the AUC"])
    z = (logit(auc) - logit(0.6)) * auc * (1 - auc) / se
    assert float(rows["H0 AUC <= 0.6: z (logit scale)"]) == pytest.approx(z, rel=0.01), out
    assert float(rows["p (one-sided)"]) == pytest.approx(norm.sf(z), rel=0.1, abs=1e-4), out


def test_the_histogram_says_its_class_counts_are_noisy_under_dp(capsys, sites):
    """Before: "n 1009.4689" under DP read as an exact count given to four decimals."""
    args = ["evaluate", *sites, "--method", "histogram", "--dp-epsilon", "2"]
    code, out, err = run_main(capsys, [*args, "--quantiles", "64"])
    assert code == 0, err
    rows = table_rows(out, "Evaluation: histogram")
    for label in ("rows (noisy)", "positives (noisy)", "negatives (noisy)"):
        assert re.fullmatch(r"-?\d+\.\d", rows[label]), (label, rows)
    assert "rows" not in rows


def test_a_histogram_without_dp_says_so_instead_of_a_dash(capsys, sites):
    code, out, err = run_main(capsys, ["evaluate", *sites, "--method", "histogram"])
    assert code == 0, err
    rows = table_rows(out, "Evaluation: histogram")
    assert rows["differential privacy: epsilon"] == "none (no differential privacy)", out
    note = " ".join(out.split())
    assert "ROC area, PR area, AUC, PR-AUC and average precision errors against the pooled" in note


def test_a_true_or_false_value_reads_yes_or_no(capsys):
    """Before: rocglm's "sensitivity is a heuristic" and "converged" rows read "True"."""
    from fedroc.cli.evaluate_cmd import render_result
    from fedroc.federation import Released
    from fedroc.methods import EvaluationResult

    result = EvaluationResult(
        method="rocglm",
        sites=[{"name": "a", "n": 10}],
        auc=0.7,
        auc_ci=(0.6, 0.8),
        released=Released(2, ["f"], {}, {}, {}, {}, {}, {}),
        extra={"sensitivity_is_heuristic": True, "converged": False},
    )
    render_result(result)
    rows = table_rows(capsys.readouterr().out, "Evaluation: rocglm")
    assert rows["sensitivity only a heuristic (no bound)"] == "yes", rows
    assert rows["probit fit: converged"] == "no", rows


def test_mpc_run_labels_its_rows_in_words(capsys):
    """Before: `fedroc mpc run` listed its JSON (``auc_ci``, ``auc_variance``,
    ``precision_bits``, ``min_class_count``, ``comparison: p_value``), the class counts as a
    bare "-" and whether the values were opened as "True"."""
    from fedroc.cli.mpc_cmd import render_run

    parties = [
        {"party": k, "role": role, "rounds": 9, "bytes_sent": 10, "bytes_received": 11,
         "messages_sent": 3, "seconds": 0.5}
        for k, role in enumerate(["proxy 0", "proxy 1", "helper"])
    ]  # fmt: skip
    record = {
        "method": "mpc",
        "job": "j1",
        "sites": [{"name": "a", "n": 40}, {"name": "b", "n": 30}],
        "auc": 0.75,
        "auc_ci": [0.6, 0.86],
        "n": 70,
        "n_pos": None,
        "n_neg": None,
        "pr_auc": 0.6,
        "auc_se": 0.06,
        "auc_variance": 0.0036,
        "comparison": {"auc_difference": 0.1, "se": 0.04, "ci": [0.02, 0.18],
                       "ci_wald": [0.02, 0.18], "p_value": 0.012, "auc_b": 0.65,
                       "auc_b_ci": [0.5, 0.78], "method": "paired DeLong under MPC"},
        "mpc": {"job": "j1", "sort": "oblivious", "delta": None, "precision_bits": 14,
                "min_class_count": 5, "released": True, "seconds": 1.5, "parties": parties},
    }  # fmt: skip
    render_run(record, 0.9)
    out = capsys.readouterr().out
    rows = table_rows(out, "MPC result of job j1")
    assert not [label for label in rows if _KEY.match(label)], out
    assert rows["90% CI (logit, paper 1 eq. 3)"] == "[0.6000, 0.8600]"
    assert rows["positives"].startswith("not released") and rows["values opened"] == "yes"
    assert rows["opened values rounded to"] == "2^-14"
    comparison = table_rows(out, "Comparison of two models on the same rows")
    assert comparison["AUC difference"] == "0.1000" and "comparison: p_value" not in out
    assert comparison["p-value (two-sided, equal AUCs)"] == "0.0120"
    assert "2 (helper)" in out and re.search(r"│ b +│ +30 │", out), out


@pytest.mark.parametrize("method", ["histogram", "rocglm"])
def test_flower_run_labels_the_rows_of_a_result_in_words(capsys, sites, method):
    """Before: `fedroc flower run` listed a result's scalars under their JSON keys
    (``n_pos``, ``pr_auc``, ``auc_ci``, ``noise_sd``). The rows of the object an
    in-process run gives, as the ServerApp sends it back."""
    from fedroc.cli.flower_cmd import _result_rows

    options = ["--sensitivity", "0.01"] if method == "rocglm" else []
    code, out, err = run_main(capsys, ["evaluate", *sites, "--method", method, *options, "--json"])
    assert code == 0, err
    result = json.loads(out)
    labels = [label for label, _ in _result_rows(result)]
    assert "positives" in labels and "AUC confidence interval" in labels, labels
    assert not [label for label in labels if _KEY.match(label)], labels
    # With the run's level, as fedroc evaluate labels it (walk: --confidence 0.9 printed
    # "AUC confidence interval" on Flower and "90% CI" in process).
    labels = [label for label, _ in _result_rows(result, "90%")]
    assert "AUC 90% CI" in labels and "AUC confidence interval" not in labels, labels
    assert labels[labels.index("AUC") + 1] == "AUC 90% CI", labels  # under the AUC


def test_operating_points_say_how_each_threshold_was_chosen(capsys, sites):
    """Before: Youden's point was chosen by "youden" (the JSON's value) and the bootstrap
    interval of the choice sat under "CI with choice"."""
    data = sites[1].partition("=")[2]
    args = ["metrics", data, "--at-specificity", "0.8", "--youden", "--seed", "1"]
    code, out, err = run_main(capsys, args)
    assert code == 0, err
    table = out[out.index("Operating points") :]
    header = next(line for line in table.splitlines() if line.startswith("┃"))
    assert "chosen by" in header and "CI, re-chosen" in header, table
    assert "the threshold chosen anew in each resample" in " ".join(table.split())
    rows = [line for line in table.splitlines() if line.startswith("│ ")]
    assert rows[0].startswith("│ specificity >= 0.8") and "Youden's J (max)" in table, table
    assert "youden" not in table


def test_sentences_in_a_table_read_from_the_left_and_numbers_from_the_right(capsys, sites):
    """Before: a calibration bin's note and a comparison's method were right-justified like
    numbers (their wrapped lines began at ragged columns), and the comparison's AUC
    difference, the first column, was left-justified like a name."""
    args = ["evaluate", *sites, "--method", "histogram", "--quantiles", "64"]
    code, out, err = run_main(capsys, [*args, "--dp-epsilon", "2", "--compare-score", "score2"])
    assert code == 0, err
    calibration = out[out.index("\nCalibration") :]
    notes = [line.split("│")[5] for line in calibration.splitlines() if line.startswith("│ [")]
    assert len(notes) == 10 and all(n.startswith(" ") and n[1] != " " for n in notes), notes
    comparison = out[out.index("Comparison of two models") : out.index("\nCalibration")]
    first = next(line for line in comparison.splitlines() if line.startswith("│ "))
    difference, method = first.split("│")[1], first.split("│")[4]
    assert difference.startswith("  ") and difference.endswith(" "), comparison
    assert method.startswith(" paired DeLong"), comparison


@pytest.mark.parametrize("command", [["evaluate"], ["flower", "run"]])
def test_every_method_option_says_its_default(command):
    """Before: `evaluate --help` and `flower run --help` left the defaults of --epsilon,
    --delta, --dp-calibration, --thresholds, --n-thresholds, --dp-noise, --dp-mode,
    --interpolation, --sigma11, --mpc-delta and --mpc-min-class-count unsaid, and half the
    methods' options began in lower case ("threshold rule, grid or positives.")."""
    from fedroc.cli import click_command

    cmd = click_command()
    for name in command:
        cmd = cmd.commands[name]
    checked = 0
    for param in cmd.params:
        panel = getattr(param, "rich_help_panel", None) or ""
        if not panel.startswith("Options of --method") or param.is_flag:
            continue
        text = param.help or ""
        assert text[:1].isupper() or text[:1] in "'-" or text.startswith("l2-"), param.opts
        assert "default" in text.lower() or "required" in text, (param.opts, text)
        checked += 1
    assert checked >= 20


def test_metrics_says_what_the_default_interval_is(capsys, sites):
    """Before: "95% CI (default: logit, with score below 100 of a class)": 100 what, and
    which score? The score interval joins the logit interval below 100 rows of a class."""
    code, out, err = run_main(capsys, ["metrics", sites[1].partition("=")[2]])
    assert code == 0, err
    rows = table_rows(out, "Metrics of")
    label = "95% CI (default: logit; joined with the score CI below 100 rows of a class)"
    assert re.fullmatch(r"\[0\.\d{4}, 0\.\d{4}\]", rows[label]), rows
    assert "with score below 100 of a class" not in out


def test_the_mpc_note_names_the_opened_values_in_words(capsys, sites):
    """Before: "opened to the analyst only: auc, pr_auc, auc_variance rounded to 2^-14",
    and "co-owners ['east', 'north', 'south']" (a Python list)."""
    code, out, err = run_main(capsys, ["evaluate", *sites, "--method", "mpc", "--max-fpr", "0.3"])
    assert code == 0, err
    text = " ".join(out.replace("│", " ").split())  # the wrapped cells, joined
    assert "opened to the analyst only: the AUC, the PR-AUC, the AUC's variance, the " in text
    assert "co-owners east, north, south;" in text and "['" not in text
    assert "pr_auc" not in text and "auc_variance" not in text


def test_the_clustered_settings_read_as_fedroc_clustered_says_them(capsys, sites):
    """Before: evaluate's clustered table said "sigma11 corollary6", "population_estimator
    corrected" and "interval logit", the options' values, where `fedroc clustered` says
    "Sigma11 divisor I-1", "estimator eq. 5 x I/(I-1)" and "t, 167 df, logit scale"."""
    code, out, err = run_main(
        capsys, ["evaluate", *sites, "--method", "clustered", "--cluster", "pid"]
    )
    assert code == 0, err
    rows = table_rows(out, "Evaluation: clustered")
    clusters = int(rows["clusters used (both classes)"])
    assert rows["intervals"] == f"t, {clusters - 1} df, logit scale", rows
    assert rows["Sigma11 divisor"] == "I-1 (Corollary 6)"
    assert rows["population estimator"] == "eq. 5 x I/(I-1)"


def test_a_refusal_for_several_sites_limits_reads_as_a_sentence(capsys, sites):
    """Before: "--delta 0.4 (...) is more than sites site 'east' (0.002857); site 'north'
    (0.0025); site 'south' (0.003333) have left of their delta limits"."""
    args = ["evaluate", *sites, "--method", "rocglm", "--sensitivity", "0.01"]
    code, _, err = run_main(capsys, [*args, "--privacy", "paper"])
    assert code == 2, err
    line = " ".join(err.split())
    assert "is more than what the sites have left of their delta limits (site 'east' " in line
    assert "is more than sites site" not in line and "nothing was released" in line


def test_withheld_dp_calibration_bins_are_named_by_their_ranges(capsys, sites, seeded_site_entropy):
    """Before: "calibration bins [3, 6, 7, 8, 9] are withheld", 0-based indices that the
    calibration table, which names each bin by its range, shows nowhere."""
    args = ["evaluate", *sites, "--method", "histogram", "--quantiles", "64"]
    code, out, err = run_main(capsys, [*args, "--dp-epsilon", "1"])
    assert code == 0, err
    table = out[out.index("\nCalibration") :]
    withheld = [line.split("│")[1].strip() for line in table.splitlines() if "withheld:" in line]
    assert withheld, table  # at epsilon 1 on 420 rows some bins are
    text = " ".join(out.replace("│", " ").split())
    assert f"calibration bins {', '.join(withheld)} are withheld" in text, text


def test_privacy_status_says_which_limit_is_which(capsys, sites, tmp_path):
    """Before: the status table headed both the epsilon and the delta limit "limit"."""
    audit = ["--audit-dir", str(tmp_path)]
    args = ["evaluate", *sites, "--method", "rocglm", "--sensitivity", "0.01", *audit]
    code, _, err = run_main(capsys, args)
    assert code == 0, err
    code, out, err = run_main(capsys, ["privacy", "status", *audit])
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("┃"))
    cells = [c.strip() for c in header.strip("┃").split("┃")]
    assert cells[2:6] == ["epsilon", "epsilon limit", "delta", "delta limit"], header


def test_clustered_population_estimator_says_its_default():
    """Before: `fedroc clustered --help` said what --population-estimator overrides, not
    what it is without it: corrected, or eq5 with --no-pair-correction."""
    from fedroc.cli import click_command

    [param] = [
        p
        for p in click_command().commands["clustered"].params
        if "--population-estimator" in p.opts
    ]
    text = " ".join((param.help or "").split())
    assert "Default: corrected, or eq5 with --no-pair-correction" in text


def test_the_mpc_calibration_note_reads_as_a_sentence(capsys, sites):
    """Before: "ask for it with mpc_calibration=True (--mpc-calibration)": a Python
    keyword and its value where the reader types an option."""
    code, out, err = run_main(capsys, ["evaluate", *sites, "--method", "mpc", "--max-fpr", "0.3"])
    assert code == 0, err
    text = " ".join(out.replace("│", " ").split())
    assert "ask for the curve with --mpc-calibration" in text, text
    assert "=True" not in text


def test_the_histogram_area_errors_fit_120_columns(capsys, sites, monkeypatch):
    """Before: "ROC area error against the pooled rows (paper 5, Definition 1)" and its PR
    twin wrapped over two lines of the evaluate table at 120 columns; the reference is in
    the note under the table."""
    monkeypatch.setenv("COLUMNS", "120")
    code, out, err = run_main(capsys, ["evaluate", *sites, "--method", "histogram"])
    assert code == 0, err
    cells = {line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")}
    for label in (
        "ROC area error against the pooled rows",
        "PR area error against the pooled rows",
    ):
        assert label in cells, cells
    assert not any("Definition 1" in c for c in cells)
    note = " ".join(out[out.index("average precision errors") :].split())
    assert "the area errors are paper 5's Definition 1" in note
