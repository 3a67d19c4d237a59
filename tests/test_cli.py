"""The command line: JSON contract of DESIGN.md, tables, errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn import metrics as skm

import fedroc
from fedroc.cli import main
from tests._cli import run_main
from tests._ranking_brute import drawn_area


def run(capsys, *args):
    main(list(args))
    return capsys.readouterr()


def run_plotting(capsys, *args):
    """Run ``fedroc *args`` and return its output and the figures metrics --plot drew."""
    from fedroc import report

    drawn: list = []
    figure_of = report.metrics_figure
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            report, "metrics_figure", lambda *a, **k: drawn.append(figure_of(*a, **k)) or drawn[-1]
        )
        return run(capsys, *args), drawn


@pytest.fixture
def site_files(tmp_path):
    rng = np.random.default_rng(8)
    paths = {}
    for name, n in (("north", 150), ("south", 90), ("east", 210)):
        y = rng.integers(0, 2, n)
        p = np.clip(rng.beta(2, 4, n) + 0.3 * y, 0, 1).round(3)
        df = pd.DataFrame({"outcome": np.where(y == 1, "dead", "alive"), "risk": p})
        path = tmp_path / f"{name}.csv"
        df.to_csv(path, index=False)
        paths[name] = path
    return paths


def test_metrics_json_matches_sklearn(capsys, site_files):
    path = site_files["north"]
    df = pd.read_csv(path)
    y = (df["outcome"] == "dead").astype(int).to_numpy()
    s = df["risk"].to_numpy()
    res = json.loads(
        run(
            capsys,
            "metrics",
            str(path),
            "--label",
            "outcome",
            "--score",
            "risk",
            "--pos-label",
            "dead",
            "--json",
        ).out
    )
    assert set(res) == {
        "n",
        "n_pos",
        "n_neg",
        "auc",
        "auc_se",
        "auc_ci",
        "auc_ci_logit",
        "auc_ci_wald",
        "confidence_level",
        "average_precision",
        "pr_auc",
        "brier",
        "calibration",
    }
    assert res["n"] == y.size and res["n_pos"] == y.sum()
    assert res["auc"] == pytest.approx(skm.roc_auc_score(y, s), abs=1e-12)
    assert res["average_precision"] == pytest.approx(skm.average_precision_score(y, s))
    prec, rec, _ = skm.precision_recall_curve(y, s)
    assert res["pr_auc"] == pytest.approx(skm.auc(rec, prec))
    assert res["brier"] == pytest.approx(skm.brier_score_loss(y, s))
    lo, _ = res["auc_ci_wald"]
    assert lo == pytest.approx(res["auc"] - 1.959963984540054 * res["auc_se"])
    assert len(res["auc_ci_logit"]) == 2 and res["auc_ci_logit"][0] < res["auc"]
    # The default interval holds the logit one (its union with the score interval below
    # 100 rows of a class) and is the library's.
    (lo, hi), (llo, lhi) = res["auc_ci"], res["auc_ci_logit"]
    assert lo <= llo and hi >= lhi
    assert res["auc_ci"] == pytest.approx(list(fedroc.delong(y, s).ci), abs=1e-12)


def test_metrics_table_and_null_brier(capsys, tmp_path):
    path = tmp_path / "m.csv"
    pd.DataFrame({"label": [0, 1, 0, 1, 1], "score": [-2.0, 3.0, 0.5, 1.0, -1.0]}).to_csv(
        path, index=False
    )
    table = run(capsys, "metrics", str(path)).out
    assert "AUC" in table and "0.8333" in table  # 5 of 6 pairs ordered
    res = json.loads(run(capsys, "metrics", str(path), "--json").out)
    assert res["brier"] is None  # scores outside [0, 1]
    assert res["confidence_level"] == 0.95  # as clustered --json and evaluate --json say it
    wider = json.loads(run(capsys, "metrics", str(path), "--confidence", "0.99", "--json").out)
    assert wider["confidence_level"] == 0.99
    assert wider["auc_ci_wald"][0] < res["auc_ci_wald"][0]


def test_metrics_gives_evaluate_pooleds_calibration_curve(capsys, site_files, tmp_path):
    """metrics FILE gave no calibration curve (no key, no table) although evaluate --method
    pooled --site x=FILE does: now the same bins under the same key, and the same table; on
    scores outside [0, 1] the key is null and the caveat says why."""
    path = str(site_files["north"])
    cols = ["--label", "outcome", "--score", "risk", "--pos-label", "dead"]
    res = json.loads(run(capsys, "metrics", path, *cols, "--json").out)
    pooled = json.loads(
        run(capsys, "evaluate", "--method", "pooled", "--site", f"x={path}", *cols, "--json").out
    )
    assert res["calibration"] is not None and res["calibration"] == pooled["calibration"]
    assert len(res["calibration"]["count"]) == 10 and sum(res["calibration"]["count"]) == 150
    table = run(capsys, "metrics", path, *cols).out
    evaluate_table = run(capsys, "evaluate", "--method", "pooled", "--site", f"x={path}", *cols).out
    assert "Calibration" in table
    bins = [line for line in table.splitlines() if line.lstrip("│ ").startswith("[0")]
    assert len(bins) == 10 and all(b in evaluate_table for b in bins)
    logits = tmp_path / "logits.csv"
    pd.DataFrame({"label": [0, 1, 0, 1, 1], "score": [-2.0, 3.0, 0.5, 1.0, -1.0]}).to_csv(
        logits, index=False
    )
    res = json.loads(run(capsys, "metrics", str(logits), "--json").out)
    assert res["calibration"] is None
    assert any("no Brier score or calibration" in c for c in res["caveats"])
    assert "Calibration" not in run(capsys, "metrics", str(logits)).out


def test_metrics_says_why_asked_operating_points_are_missing_on_one_class(capsys, tmp_path):
    """``--youden`` (or ``--at-specificity``) on one class: before, the JSON had no
    ``operating_points`` key and nothing said why; now the key is null and a warning says."""
    path = tmp_path / "one.csv"
    pd.DataFrame({"label": [1] * 6, "score": np.linspace(0.1, 0.6, 6)}).to_csv(path, index=False)
    captured = run(capsys, "metrics", str(path), "--youden", "--json")
    assert json.loads(captured.out)["operating_points"] is None
    assert "operating points need both classes" in captured.err


def test_metrics_table_shows_every_missing_value_as_a_dash(capsys, tmp_path):
    """One class: the JSON's nulls are '-' in the table. Before, the AUC and SE read 'nan'
    and both intervals were blank (rich took the cell "[nan, nan]" for a markup tag)."""
    path = tmp_path / "one.csv"
    pd.DataFrame({"label": [0] * 6, "score": np.linspace(0.1, 0.6, 6)}).to_csv(path, index=False)
    captured = run(capsys, "metrics", str(path))
    table = captured.out
    assert "only one class" in captured.err
    cells = {
        row.split("│")[1].strip(): row.split("│")[2].strip()
        for row in table.splitlines()
        if row.count("│") == 3
    }
    for key in ("AUC", "SE (DeLong)", "95% CI, logit (paper 1 eq. 3)", "95% CI, Wald"):
        assert cells[key] == "-", key
    assert cells["Brier score"] != "-"


def test_calibration_table_has_a_note_column_only_with_notes():
    from rich.console import Console

    from fedroc.cli._common import calibration_table
    from fedroc.metrics import CalibrationCurve, bin_edges

    plain = CalibrationCurve.from_sums(
        bin_edges(2), [4, 6], [1.0, 4.0], [1.0, 5.0], [False, False]
    )  # fmt: skip
    console = Console(width=200, record=True)
    console.print(calibration_table("Calibration", plain))
    header = next(ln for ln in console.export_text().splitlines() if "bin" in ln)
    assert [c.strip() for c in header.split("┃")[1:-1]] == ["bin", "n", "predicted", "observed"]


def test_evaluate_pooled_json(capsys, site_files):
    args = [f"--site={k}={v}" for k, v in site_files.items()]
    res = json.loads(
        run(
            capsys,
            "evaluate",
            *args,
            "--label",
            "outcome",
            "--score",
            "risk",
            "--pos-label",
            "dead",
            "--method",
            "pooled",
            "--json",
        ).out
    )
    frames = [pd.read_csv(p) for p in site_files.values()]
    y = np.concatenate([(f["outcome"] == "dead").to_numpy() for f in frames]).astype(int)
    s = np.concatenate([f["risk"].to_numpy() for f in frames])
    for key in ("method", "sites", "auc", "auc_ci", "released", "brier", "calibration"):
        assert key in res
    assert res["method"] == "pooled"
    assert res["sites"] == [
        {"name": k, "n": len(f)} for k, f in zip(site_files, frames, strict=True)
    ]
    assert res["auc"] == pytest.approx(skm.roc_auc_score(y, s))
    assert res["brier"] == pytest.approx(skm.brier_score_loss(y, s))
    assert sum(res["calibration"]["count"]) == y.size


def test_evaluate_table_and_report(capsys, site_files, tmp_path):
    args = [f"--site={k}={v}" for k, v in site_files.items()]
    report = tmp_path / "r.html"
    out = run(
        capsys,
        "evaluate",
        *args,
        "--label",
        "outcome",
        "--score",
        "risk",
        "--pos-label",
        "dead",
        "--method",
        "pooled",
        "--report",
        str(report),
    ).out
    assert "north" in out and "Calibration" in out
    html = report.read_text()
    assert html.count("data:image/png;base64") == 3  # ROC, PR, calibration


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["evaluate", "--site", "a=/nope.csv", "--method", "pooled"], "does not exist"),
        (["evaluate", "--site", "nonsense", "--method", "pooled"], "NAME=PATH"),
        (["evaluate", "--site", "a=x.csv", "--method", "magic"], "unknown method 'magic'"),
        (["evaluate", "--method", "pooled"], "at least one --site"),
        (["metrics", "/nope.parquet"], "does not exist"),
    ],
)
def test_errors_are_one_line_and_exit_2(capsys, args, message):
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_wrong_column_names_the_file(capsys, site_files):
    with pytest.raises(SystemExit):
        main(["metrics", str(site_files["north"]), "--label", "y"])
    assert "label column 'y' not found in file" in capsys.readouterr().err


def test_an_empty_file_is_said_to_have_no_rows(capsys, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("label,score\n")
    with pytest.raises(SystemExit) as info:
        main(["metrics", str(empty)])
    assert info.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: file {str(empty)!r} has no rows"


def test_a_directory_given_as_data_is_called_one(capsys, tmp_path):
    """Before: "data file '...' has an unknown format; use .csv, .tsv or .parquet"."""
    with pytest.raises(SystemExit) as info:
        main(["metrics", str(tmp_path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert (
        err.strip()
        == f"error: data file {str(tmp_path)!r} is a directory; give the CSV or Parquet file"
    )


def test_a_report_path_that_is_a_directory_is_refused_before_the_sites_are_asked(
    capsys, site_files, tmp_path
):
    """Before: the method ran to the end, then "[Errno 21] Is a directory: 'DIR.tmp' -> 'DIR'"
    named a file the user never gave, and left DIR.tmp behind."""
    folder = tmp_path / "out"
    folder.mkdir()
    args = [f"--site={k}={v}" for k, v in site_files.items()]
    with pytest.raises(SystemExit) as info:
        main(["evaluate", *args, "--label", "outcome", "--score", "risk", "--pos-label",
              "dead", "--method", "pooled", "--report", str(folder)])  # fmt: skip
    captured = capsys.readouterr()
    assert info.value.code == 2 and captured.out == ""  # nothing computed, nothing shown
    assert captured.err.strip() == (
        f"error: --report {str(folder)!r} is a directory; give a file name, e.g. "
        f"{str(folder / 'report.html')!r}"
    )
    assert list(tmp_path.glob("*.tmp")) == []


def _evaluate_args(site_files):
    sites = [a for name, path in site_files.items() for a in ("--site", f"{name}={path}")]
    return ["evaluate", *sites, "--label", "outcome", "--score", "risk", "--pos-label", "dead"]


def test_evaluate_shows_its_progress_on_a_terminal_only(capsys, site_files, monkeypatch):
    """On a terminal, stderr says which round and site the method is at (before: a spinner
    saying only "running histogram over 3 site(s)"); stdout keeps its one JSON object."""
    import io

    from rich.console import Console

    from fedroc.cli import evaluate_cmd

    args = [*_evaluate_args(site_files), "--method", "histogram", "--json"]
    main(args)  # stderr is not a terminal here: no progress at all
    captured = capsys.readouterr()
    assert "round" not in captured.err
    plain = json.loads(captured.out)

    tty = io.StringIO()
    monkeypatch.setattr(evaluate_cmd, "err", Console(file=tty, force_terminal=True, width=200))
    main(args)
    captured = capsys.readouterr()
    result = json.loads(captured.out)  # one JSON object, nothing else on stdout
    assert result["auc"] == plain["auc"]
    shown = tty.getvalue()
    rounds = result["released"]["rounds"]
    assert f"histogram: round {rounds}, " in shown and f"round {rounds + 1}," not in shown
    for function in result["released"]["functions"]:
        assert f", {function} at site 'north' (1 of 3)" in shown
    assert "at site 'east' (3 of 3)" in shown


def test_rocglm_table_gives_the_rounds_its_progress_counts(capsys, site_files):
    """ROC-GLM's table said 'rounds 10' beside a progress line that reached round 17: the
    7 calls of the Brier score and calibration after it have a row (and a phase) of their
    own."""
    args = [*_evaluate_args(site_files), "--method", "rocglm", "--sensitivity", "0.05"]
    main([*args, "--json"])
    result = json.loads(capsys.readouterr().out)
    main(args)
    table = capsys.readouterr().out
    after = result["calibration_released"]["rounds"]
    assert after > 0
    assert re.search(rf"rounds\s+│\s+{result['released']['rounds']} │", table), table
    assert re.search(rf"rounds of Brier and calibration\s+│\s+{after} │", table), table


def test_console_script_json_is_the_only_stdout(site_files):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedroc",
            "metrics",
            str(site_files["east"]),
            "--label",
            "outcome",
            "--score",
            "risk",
            "--pos-label",
            "dead",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(proc.stdout)["n"] == 210


def test_demo_json(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the demo writes its report into the current directory
    # The MPC method first: its secure calibration binds every site to answer calibration
    # securely for its lifetime, which once made the demo's clear calibration table refused
    # (exit 2) whenever the registry listed mpc before the clear methods.
    import fedroc.methods

    names = fedroc.methods.method_names()
    monkeypatch.setattr(
        fedroc.methods, "method_names", lambda: sorted(names, key=lambda n: n != "mpc")
    )
    captured = run(capsys, "demo", "--json")
    res = json.loads(captured.out)
    assert res["reference"]["method"] == "pooled"
    for row in res["statistics"]:
        assert row["distributed"] == pytest.approx(row["pooled"], abs=1e-12)
    # The distributed curve is the secure one: the pooled counts and observed fractions in
    # every bin (R25), the pooled mean prediction but in the bins where a site has fewer
    # than q rows (their scores left out of the sum, R21), and it leaves the histogram
    # method free to sum its exact trees after it.
    secure, pooled = res["calibration"], res["pooled_calibration"]
    assert any(secure["suppressed"]) and not all(secure["suppressed"])
    assert secure["count"] == pooled["count"]
    assert secure["observed_fraction"] == pytest.approx(pooled["observed_fraction"])
    for k, withheld in enumerate(secure["suppressed"]):
        if not withheld:
            assert secure["mean_predicted"][k] == pytest.approx(pooled["mean_predicted"][k])
    assert "histogram" in [m["method"] for m in res["methods"]]
    # One report, and the demo says where (issue 14.4).
    path = tmp_path / "fedroc-demo-report.html"
    assert f"report written to {path}" in captured.err
    text = path.read_text(encoding="utf-8")
    for section in ("result", "figures", "sites", "released", "methods", "provenance"):
        assert f'<section id="{section}">' in text
    assert "<td>histogram</td>" in text and "<td>mpc</td>" in text
    # mpc opens the AUC only: listed among the methods that released no curve.
    note = re.search(r"No curve from ([^:<]*): these methods release no ROC curve", text)
    assert note is not None and "mpc" in note.group(1).split(", ")


def test_figures_command_writes_registered_figures(tmp_path, capsys, monkeypatch):
    from fedroc import figures as registry

    @registry.paper_figure(4, "99", "a test figure")
    def _make(path, *, quick, seed):
        path.write_bytes(b"\x89PNG test")
        return path

    try:
        main(["figures", "--paper", "4", "--out", str(tmp_path), "--quick", "--json"])
        payload = json.loads(capsys.readouterr().out)
        [entry] = [f for f in payload["figures"] if f["figure"] == "99"]
        assert Path(entry["file"]).name == "paper4_figure99.png"
        assert Path(entry["file"]).stat().st_size > 0
    finally:
        registry._FIGURES[:] = [f for f in registry._FIGURES if f.figure != "99"]
    with pytest.raises(SystemExit) as exc:
        main(["figures", "--paper", "7", "--out", str(tmp_path)])
    assert exc.value.code == 2


def _test_figures(registry, needs=None):
    made = []
    for number in ("97", "98"):

        @registry.paper_figure(4, number, f"test figure {number}", needs=needs)
        def _make(path, *, quick, seed):
            path.write_bytes(b"\x89PNG test")
            made.append(path.name)
            return path

    return made


def test_figures_that_need_a_missing_extra_are_refused_before_any_is_drawn(
    tmp_path, capsys, monkeypatch
):
    """Before: a plain install ran paper 1's figures 3-5 (6.5 minutes), then stopped at
    Figure 6 with "the GBSG2 use case needs scikit-survival"."""
    import importlib.util

    from fedroc import figures as registry

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "sksurv" else find_spec(name, *a),
    )
    made = _test_figures(registry)
    try:

        @registry.paper_figure(4, "99", "needs the examples", needs="examples")
        def _make(path, *, quick, seed):  # pragma: no cover - must not run
            raise AssertionError("drawn without its extra")

        with pytest.raises(SystemExit) as exc:
            main(["figures", "--paper", "4", "--out", str(tmp_path), "--quick"])
    finally:
        registry._FIGURES[:] = [f for f in registry._FIGURES if f.figure not in ("97", "98", "99")]
    captured = capsys.readouterr()
    assert exc.value.code == 2 and made == [] and list(tmp_path.iterdir()) == []
    assert captured.err.strip() == (
        "error: fedroc figures --paper 4 (Figures 99) needs fedroc's 'examples' extra "
        "(sksurv is not installed): pip install 'fedroc[examples]'"
    )


def test_figures_show_which_figure_is_drawn_on_a_terminal_only(tmp_path, capsys, monkeypatch):
    import io

    from rich.console import Console

    from fedroc import figures as registry
    from fedroc.cli import figures_cmd

    made = _test_figures(registry)
    try:
        main(["figures", "--paper", "4", "--out", str(tmp_path / "a"), "--quick"])
        assert "(1 of 2)" not in capsys.readouterr().err  # not a terminal: no status line
        tty = io.StringIO()
        monkeypatch.setattr(figures_cmd, "err", Console(file=tty, force_terminal=True, width=200))
        main(["figures", "--paper", "4", "--out", str(tmp_path / "b"), "--quick"])
    finally:
        registry._FIGURES[:] = [f for f in registry._FIGURES if f.figure not in ("97", "98")]
    assert made == ["paper4_figure97.png", "paper4_figure98.png"] * 2
    shown = tty.getvalue()
    assert "paper 4: Figure 97 (1 of 2): test figure 97" in shown
    assert "paper 4: Figure 98 (2 of 2): test figure 98" in shown


def test_metrics_plot_draws_the_rows_curves_and_keeps_the_json(capsys, site_files, tmp_path):
    """fedroc metrics had no figure (only evaluate's HTML report drew curves)."""
    from sklearn.metrics import precision_recall_curve as sk_pr
    from sklearn.metrics import roc_curve as sk_roc

    path = site_files["north"]
    args = ["metrics", str(path), "--label", "outcome", "--score", "risk", "--pos-label", "dead"]
    plain = json.loads(run(capsys, *args, "--youden", "--json").out)
    captured, drawn = run_plotting(
        capsys, *args, "--youden", "--json", "--plot", str(tmp_path / "curves")
    )
    assert json.loads(captured.out) == plain  # the JSON is unchanged by --plot
    written = tmp_path / "curves.png"  # no suffix: PNG, and the message names the file
    assert captured.err.strip() == f"figure written to {written}"
    assert written.read_bytes()[:4] == b"\x89PNG"
    roc_ax, pr_ax = drawn[0].axes
    df = pd.read_csv(path)
    y = (df["outcome"] == "dead").astype(int)
    fpr, tpr, _ = sk_roc(y, df["risk"])
    curve = roc_ax.lines[0]
    np.testing.assert_allclose(curve.get_xdata(), fpr)
    np.testing.assert_allclose(curve.get_ydata(), tpr)
    precision, recall, _ = sk_pr(y, df["risk"])
    np.testing.assert_allclose(pr_ax.lines[0].get_xdata(), recall)
    np.testing.assert_allclose(pr_ax.lines[0].get_ydata(), precision)
    [youden] = plain["operating_points"]
    marker = roc_ax.lines[1]
    assert marker.get_xdata()[0] == pytest.approx(1 - youden["specificity"])
    assert marker.get_ydata()[0] == pytest.approx(youden["sensitivity"])
    assert f"AUC {plain['auc']:.3f}, 95% CI {plain['auc_ci'][0]:.3f}" in curve.get_label()


def test_metrics_plot_legends_leave_out_an_undefined_interval(capsys, tmp_path):
    """A perfect score has no default interval: its legend read '95% CI nan-nan'."""
    path = tmp_path / "separated.csv"
    score = np.array([0.9, 0.8, 0.7, 0.3, 0.2, 0.1])
    y = [1, 1, 1, 0, 0, 0]
    pd.DataFrame({"y": y, "s": score, "b": score[[0, 3, 1, 4, 2, 5]]}).to_csv(path, index=False)
    args = ["metrics", str(path), "--label", "y", "--score", "s", "--compare-score", "b"]
    plain = json.loads(run(capsys, *args, "--json").out)
    _, drawn = run_plotting(capsys, *args, "--plot", str(tmp_path / "f.png"))
    assert plain["auc_ci"] == [None, None]
    low, high = plain["comparison"]["auc_b_ci"]  # B's interval is defined: it is quoted
    a_label, b_label = (line.get_label() for line in drawn[0].axes[0].lines[:2])
    assert a_label == "s (AUC 1.000)"
    assert b_label == f"b (AUC {plain['comparison']['auc_b']:.3f}, 95% CI {low:.3f}-{high:.3f})"


def test_metrics_plot_roc_curve_encloses_the_auc_with_tied_scores(capsys, tmp_path):
    """Scores rounded to 0.1 tie across the classes: the ROC curve between two thresholds
    is then a diagonal (the AUC counts tied pairs 1/2). It was drawn as a staircase, whose
    area is below the AUC in the legend."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(4)
    y = rng.random(300) < 0.4
    score = np.round(1 / (1 + np.exp(-(1.2 * y + rng.normal(size=y.size)))), 1)
    path = tmp_path / "tied.csv"
    pd.DataFrame({"y": y.astype(int), "s": score}).to_csv(path, index=False)
    args = ["metrics", str(path), "--label", "y", "--score", "s"]
    _, drawn = run_plotting(capsys, *args, "--plot", str(tmp_path / "f.png"))
    # The polyline as drawn (a step style expanded to its corners) encloses the AUC.
    area = drawn_area(drawn[0].axes[0].lines[0])
    assert area == pytest.approx(roc_auc_score(y, score), abs=1e-12)


def test_metrics_plot_says_it_created_a_missing_directory(capsys, site_files, tmp_path):
    """`metrics --plot /new/dir/x.png` created the missing folders without a word (as every
    command's file options do, through make_dir); now one stderr line says so, and none when
    the folder exists."""
    plot = tmp_path / "new" / "dir" / "x.png"
    cols = ["--label", "outcome", "--score", "risk", "--pos-label", "dead"]
    err = run(capsys, "metrics", str(site_files["north"]), *cols, "--plot", str(plot)).err
    assert plot.is_file()
    assert f"note: --plot: created the directory {str(plot.parent)!r}" in err.splitlines()
    err = run(capsys, "metrics", str(site_files["north"]), *cols, "--plot", str(plot)).err
    assert "created the directory" not in err


def test_metrics_plot_of_one_class_is_refused_naming_the_file(capsys, tmp_path):
    path = tmp_path / "negatives.csv"
    pd.DataFrame({"label": [0] * 8, "score": np.linspace(0, 1, 8)}).to_csv(path, index=False)
    with pytest.raises(SystemExit) as exc:
        main(["metrics", str(path), "--plot", str(tmp_path / "f.png")])
    assert exc.value.code == 2 and not (tmp_path / "f.png").exists()
    assert capsys.readouterr().err.strip() == (
        "error: --plot draws ROC and precision-recall curves, which need both classes; "
        f"{str(path)!r} has no positive row"
    )


def _calibration_text(curve) -> str:
    """The calibration table of ``curve`` as a 200-column terminal shows it."""
    from rich.console import Console

    from fedroc.cli._common import calibration_table

    console = Console(width=200, record=True)
    console.print(calibration_table("Calibration", curve))
    return console.export_text()


def _bin_rows(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("│ [")]


def test_calibration_table_says_which_bins_pool_only_some_sites():
    """A bin withheld at one site still shows the others' rows; the table must say so."""
    from fedroc.metrics import CalibrationCurve, bin_edges

    curve = CalibrationCurve(
        bin_edges(3),
        np.array([10, 4, 0]),
        np.array([0.2, 0.5, np.nan]),
        np.array([0.1, 0.5, np.nan]),
        np.array([False, True, True]),
    )
    rows = _bin_rows(_calibration_text(curve))
    assert len(rows) == 3
    assert "withheld" not in rows[0]
    assert "other sites only (withheld at a site)" in rows[1] and "│  4 │" in rows[1]
    assert "withheld at a site (no rows at the others)" in rows[2]
    # A secure curve counts every row; only the mean prediction leaves some out (R25).
    secure = CalibrationCurve.from_sums(
        bin_edges(3), [10, 4, 3], [2.0, 1.0, 0.0], [1.0, 2.0, 3.0], [False, True, True],
        predicted_count=[10, 2, 0],
    )  # fmt: skip
    text = _calibration_text(secure)
    rows = _bin_rows(text)
    assert "predicted over 2 rows (scores withheld at a site)" in rows[1] and "│  4 │" in rows[1]
    assert "predicted withheld" in rows[2] and "1.0000" in rows[2]  # observed: 3 of 3
    # Bins are named k/n; where the edges are k/n rounded to the 1/4096 grid, a caption says so.
    assert [r.split("│")[1].strip() for r in rows] == ["[0, 0.3333)", "[0.3333, 0.6667)",
                                                      "[0.6667, 1]"]  # fmt: skip
    assert "bin edges k/n rounded to the nearest 1/4096" in text
    # An empty bin of a secure curve holds no row at any site: nothing is said withheld
    # (the demo's GBSG2 table said "predicted withheld (scores withheld at a site)" of two).
    empty = CalibrationCurve.from_sums(
        bin_edges(3), [0, 4, 3], [0.0, 1.0, 0.0], [0.0, 2.0, 3.0], [True, True, True],
        predicted_count=[0, 2, 0],
    )  # fmt: skip
    rows = _bin_rows(_calibration_text(empty))
    assert "withheld" not in rows[0] and rows[0].split("│")[2].strip() == "0", rows[0]
    assert "predicted over 2 rows" in rows[1] and "predicted withheld" in rows[2]
    # What the report shades and counts too; a clear curve's flags stand (its n leaves the
    # withheld rows out).
    assert empty.withheld.tolist() == [False, True, True]
    assert curve.withheld.tolist() == curve.suppressed.tolist() == [False, True, True]
    text = _calibration_text(CalibrationCurve.from_sums(
        bin_edges(4), [1, 1, 1, 1], [0.1, 0.3, 0.6, 0.9], [0, 1, 1, 1], [False] * 4))  # fmt: skip
    assert "[0.25, 0.5)" in text and "1/4096" not in text


def test_readme_federation_toml_is_one_fedroc_reads(site_files, tmp_path):
    """The README's TOML example loads as written (keys, sections, relative paths)."""
    from fedroc import Federation

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    [toml] = re.findall(r"```toml\n(.*?)```", readme, flags=re.S)
    pd.read_csv(site_files["south"]).to_parquet(tmp_path / "south.parquet")
    (tmp_path / "federation.toml").write_text(toml)
    fed = Federation.from_toml(tmp_path / "federation.toml", columns={"pos_label": "dead"})
    assert fed.site_names == ["north", "south", "east"]


def test_a_table_title_wider_than_its_columns_stays_on_one_line():
    """fedroc demo printed "Sites (synthetic," / "seed 2024)" over three lines above its
    two narrow columns."""
    import io

    from rich.console import Console

    from fedroc.cli._common import grid_table, kv_table

    title = "Sites (synthetic, seed 2024)"
    for table in (grid_table(title, ["site", "n"], [("a", 1)]), kv_table(title, [("n", 1)])):
        buf = io.StringIO()
        Console(file=buf, width=120).print(table)
        assert buf.getvalue().splitlines()[0].rstrip() == title


def test_a_site_size_the_method_keeps_secret_is_said_so(capsys, site_files):
    """The histogram's sites table showed n as a bare '-' for every site."""
    captured = run(capsys, *_evaluate_args(site_files), "--method", "histogram")
    sites_table = captured.out.split("Evaluation")[0]
    assert "n -: this method does not release the site's row count" in sites_table
    captured = run(capsys, *_evaluate_args(site_files), "--method", "pooled")
    assert "does not release" not in captured.out.split("Evaluation")[0]


def test_small_values_keep_their_digits_and_sentences_read_from_the_left():
    """The rocglm table showed delta 0.00025 as 0.0003 and a p-value of 3e-7 as 0.0000; its
    privacy guarantee wrapped right-justified."""
    import io

    from rich.console import Console

    from fedroc.cli._common import fmt, kv_table

    assert fmt(0.00025) == "0.00025" and fmt(3e-7) == "3e-07" and fmt(-2.5e-5) == "-2.5e-05"
    assert fmt(0.0) == "0.0000" and fmt(0.0012) == "0.0012" and fmt(0.79346) == "0.7935"
    assert fmt((1e-5, 0.5)) == "[1e-05, 0.5000]"
    sentence = "(1, 0.00025)-DP for each row's score, for an l2-sensitivity of 0.0179 " * 2
    buf = io.StringIO()
    Console(file=buf, width=60).print(kv_table("t", [("guarantee", sentence), ("n", 12)]))
    lines = [line for line in buf.getvalue().splitlines() if line.startswith("│")]
    assert all(line.split("│")[2].startswith(" (1, 0.00025)-DP") for line in lines[:1])
    assert lines[-1].split("│")[2].strip() == "12" and lines[-1].split("│")[2].endswith("12 ")
    continued = [line.split("│")[2] for line in lines[1:-1]]
    assert continued and all(not cell.startswith("  ") for cell in continued)


def test_demo_shows_each_methods_calls_on_a_terminal(capsys, tmp_path, monkeypatch):
    """The demo said only 'running rocglm ...' for each method."""
    import io

    from rich.console import Console

    from fedroc.cli import evaluate_cmd

    monkeypatch.chdir(tmp_path)
    tty = io.StringIO()
    monkeypatch.setattr(evaluate_cmd, "err", Console(file=tty, force_terminal=True, width=200))
    res = json.loads(run(capsys, "demo", "--json").out)
    shown = tty.getvalue()
    for method in res["methods"]:
        assert f"{method['method']}: round " in shown
    assert "at site 'site1' (1 of 5)" in shown


def test_version_prints_the_installed_distributions_version(capsys):
    """``fedroc --version``: what a user quotes in a bug report. The package's own
    ``__version__`` and the installed distribution's metadata (pyproject) agree."""
    from importlib.metadata import version

    assert run(capsys, "--version").out.strip() == f"fedroc {version('fedroc')}"
    assert fedroc.__version__ == version("fedroc")


def test_a_second_demo_on_one_audit_dir_shows_what_the_ledgers_refuse_and_the_rest(
    capsys, tmp_path, monkeypatch
):
    """Each site authorises one MPC job in its lifetime: a second ``fedroc demo --audit-dir
    D`` ended at the MPC job with exit 2 and no table. It now shows that method refused by
    the sites (stderr, the table, ``refused`` in the JSON) and every other method's result."""
    monkeypatch.chdir(tmp_path)
    audit = str(tmp_path / "audit")
    first = json.loads(run(capsys, "demo", "--json", "--audit-dir", audit).out)
    assert first["refused"] == {}
    code, out, err = run_main(capsys, ["demo", "--json", "--audit-dir", audit])
    assert code == 0, err
    second = json.loads(out)
    assert list(second["refused"]) == ["mpc"]
    assert "has authorised 1 MPC job(s) already" in second["refused"]["mpc"]
    assert "mpc: refused by the sites:" in err
    done = {m["method"] for m in first["methods"]} - {"mpc"}
    assert done and done == {m["method"] for m in second["methods"]}


def test_the_evaluate_table_says_class_counts_the_method_kept_secret_are_not_released(capsys):
    # The MPC method keeps n_pos and n_neg secret (None in the JSON); the table showed a bare
    # "-", which reads as missing data.
    from fedroc.cli.evaluate_cmd import render_result
    from fedroc.federation import Released
    from fedroc.methods import EvaluationResult

    result = EvaluationResult(
        method="mpc",
        sites=[{"name": "a", "n": 10}, {"name": "b", "n": 12}],
        auc=0.7,
        auc_ci=(0.6, 0.8),
        released=Released(2, ["fedroc.mpc.job"], {}, {}, {}, {}, {}, {}),
        extra={"n": 22, "n_pos": None, "n_neg": None, "brier": None},
    )
    render_result(result)
    out = capsys.readouterr().out
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in out.splitlines()
        if line.count("│") >= 3
    }
    assert rows["positives"] == rows["negatives"] == "not released", out
    assert rows["Brier score"] == "-", out  # not a secret: scores that are no probabilities


def test_report_says_a_histogram_without_dp_used_no_dp_not_that_it_has_no_epsilon(
    capsys, site_files, tmp_path
):
    """The histogram's `epsilon` is null without --dp-epsilon (docs/json.md: "null without
    DP"); the HTML report showed it as "Differential privacy: epsilon | not given by this
    method", as if the method could not give DP. It now says no DP was used."""
    import html
    import re

    report = tmp_path / "r.html"
    args = [f"--site={k}={v}" for k, v in site_files.items()]
    args += ["--label", "outcome", "--score", "risk", "--pos-label", "dead"]
    run(capsys, "evaluate", *args, "--method", "histogram", "--report", str(report), "--json")
    text = html.unescape(re.sub(r"<[^>]+>", " ", report.read_text()))
    text = " ".join(text.split())
    assert "Differential privacy: epsilon none (no differential privacy)" in text
    assert "Differential privacy: epsilon not given by this method" not in text


@pytest.mark.parametrize(("seed", "label"), [([], "unseeded"), (["--seed", "4"], "seed 4")])
def test_report_band_says_whether_it_was_seeded(capsys, site_files, tmp_path, seed, label):
    """The pooled report's ROC band read "(200 samples, seed None)" without --seed, as
    `fedroc metrics --bootstrap` did before it said "unseeded"."""
    report = tmp_path / "r.html"
    args = [f"--site={k}={v}" for k, v in site_files.items()]
    args += ["--label", "outcome", "--score", "risk", "--pos-label", "dead", *seed]
    run(capsys, "evaluate", *args, "--method", "pooled", "--report", str(report), "--json")
    text = report.read_text()
    assert f"bootstrap band (200 samples, {label})." in text
    assert "seed None" not in text
