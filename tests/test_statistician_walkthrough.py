"""A new user's walkthrough as a statistician with clustered data (several lesions per
patient) and as a network analyst with five hospitals, from the README alone: each mistake
answered with one line that names the option, file or site and the value (exit 2, no
traceback), and each figure saying what the table says.

Each test says what the command line or the report showed before.
"""

from __future__ import annotations

import html
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests._cli import run_main

pytestmark = pytest.mark.timeout(120)

SITES = ("north", "south", "east", "west", "central")


def _write_hospitals(folder: Path, patients: int = 40) -> list[str]:
    """Five hospitals' files of lesions (columns outcome, risk, patient): ``--site`` args."""
    rng = np.random.default_rng(11)
    args = []
    for k, name in enumerate(SITES):
        n = patients + patients // 4 * k
        patient = np.repeat(np.arange(n), rng.integers(1, 5, n))
        effect = rng.normal(scale=0.7, size=n)[patient]
        y = (rng.random(patient.size) < 0.4).astype(int)
        risk = 1 / (1 + np.exp(-(-0.8 + 1.3 * y + effect + rng.normal(scale=0.8, size=y.size))))
        path = folder / f"{name}.csv"
        pd.DataFrame(
            {"outcome": y, "risk": risk.round(4), "patient": [f"{name}-{p}" for p in patient]}
        ).to_csv(path, index=False)
        args += ["--site", f"{name}={path}"]
    return [*args, "--label", "outcome", "--score", "risk"]


@pytest.fixture
def hospitals(tmp_path: Path) -> list[str]:
    """Five hospitals of 40 to 80 patients, 1-4 lesions each."""
    return _write_hospitals(tmp_path)


def _audit_records(audit: Path) -> int:
    if not audit.exists():
        return 0
    return sum(len(p.read_text().splitlines()) for p in audit.glob("*.jsonl"))


def test_a_report_under_a_file_is_refused_before_the_sites_spend(capsys, hospitals, tmp_path):
    """Before: ``evaluate --method rocglm --report data.csv/r.html`` ran the whole method (each
    site spent epsilon 1 of its lifetime budget) and then failed with ``error: 'data.csv' is a
    file; a directory was expected there``, naming neither --report nor the path given; a
    ``--plot`` of ``fedroc metrics`` in the same place was refused at once, by name."""
    blocker = tmp_path / "data.csv"
    blocker.write_text("x\n1\n")
    audit = tmp_path / "audit"
    report = blocker / "r.html"
    args = [*hospitals, "--method", "rocglm", "--audit-dir", str(audit), "--report", str(report)]
    code, out, err = run_main(capsys, ["evaluate", *args])
    assert code == 2 and out == "", err
    assert err.strip() == (
        f"error: --report {str(report)!r}: {str(blocker)!r} is a file, not a directory"
    )
    assert _audit_records(audit) == 0  # no site was asked, nothing was spent
    # A missing folder is still made, as for --plot.
    fine = tmp_path / "new" / "r.html"
    code, _, err = run_main(
        capsys, ["evaluate", *hospitals, "--method", "pooled", "--report", str(fine)]
    )
    assert code == 0 and fine.exists(), err


def _report_text(path: Path) -> str:
    """The report's words, its figures and markup left out."""
    text = re.sub(r"<(style|script)>.*?</\1>", " ", path.read_text(), flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text)))


def test_a_report_under_local_dp_says_why_calibration_bins_are_withheld(
    capsys, tmp_path, seeded_site_entropy
):
    """Before: under ``--dp-epsilon 1 --dp-mode local`` the table said of each withheld bin
    "withheld: noisy count within 3 noise SDs of 0", and the report's figure said "8 bin(s)
    withheld at a site are shaded": no site withheld them (under DP none does), the noise
    did. Without DP a bin under a site's minimum count is still said to be withheld there."""
    report = tmp_path / "dp.html"
    # Enough rows that the noisy class counts let the tree out (the noise is seeded).
    hospitals = _write_hospitals(tmp_path, patients=200)
    args = [*hospitals, "--method", "histogram", "--dp-epsilon", "1", "--dp-mode", "local"]
    code, _, err = run_main(capsys, ["evaluate", *args, "--report", str(report)])
    assert code == 0, err
    text = _report_text(report)
    caption = re.search(r"(\d+) bin\(s\) withheld[^.]*\.", text)
    assert caption is not None, text
    assert "at a site" not in caption.group(0), caption.group(0)
    assert "noisy count within 3 noise SDs of 0" in caption.group(0), caption.group(0)


def test_evaluate_plot_points_to_the_report(capsys, hospitals):
    """Before: ``fedroc evaluate ... --plot roc.png`` (as ``fedroc metrics`` and ``fedroc
    clustered`` take it) answered "No such option: --plot. Did you mean --epsilon or
    --mpc-sort or --report?": nothing said that evaluate draws its figures in the report."""
    code, out, err = run_main(
        capsys, ["evaluate", *hospitals, "--method", "pooled", "--plot", "r.png"]
    )
    assert code == 2 and out == ""
    assert err.startswith("error: No such option: --plot. fedroc evaluate draws"), err
    assert "draws its figures" in err and "--report FILE.html" in err, err


@pytest.mark.parametrize("method", ["pooled", "histogram", "rocglm"])
def test_the_reports_roc_legend_quotes_the_auc_and_its_interval(
    capsys, hospitals, tmp_path, monkeypatch, method
):
    """Before: ``fedroc metrics --plot`` labelled its curve "risk (AUC 0.791, 95% CI
    0.765-0.815)", but the report of ``evaluate --report`` labelled it "histogram (released
    curve)" alone: the figure a reader takes away carried neither the AUC nor its interval."""
    import fedroc.report as rep

    labels: list[str] = []
    original = rep.roc_figure

    def spy(*args, **kwargs):
        labels.extend(label for label, _, _ in kwargs.get("curves", ()))
        return original(*args, **kwargs)

    monkeypatch.setattr(rep, "roc_figure", spy)
    report = tmp_path / "r.html"
    args = [*hospitals, "--method", method, "--report", str(report), "--json"]
    code, out, err = run_main(capsys, ["evaluate", *args])
    assert code == 0, err
    result = json.loads(out)
    low, high = result["auc_ci"]
    curve = "pooled rows (reference)" if method == "pooled" else f"{method} (released curve)"
    assert labels == [f"{curve}: AUC {result['auc']:.3f}, 95% CI {low:.3f}-{high:.3f}"]


def test_a_report_draws_no_empty_curves_when_dp_kept_the_tree_back(
    capsys, tmp_path, seeded_site_entropy
):
    """Before: when the sites' noisy class counts were too small for an AUC under ``--dp-epsilon
    1`` (the tree not released, "no AUC, curve or interval" in the caveat), the report still
    drew an empty ROC figure with the legend "histogram (released curve)" and an empty PR
    figure, captioned as the released curves."""
    hospitals = _write_hospitals(tmp_path, patients=15)
    report = tmp_path / "r.html"
    args = [*hospitals, "--method", "histogram", "--dp-epsilon", "1", "--report", str(report)]
    code, out, err = run_main(capsys, ["evaluate", *args, "--json"])
    assert code == 0, err
    assert json.loads(out)["auc"] is None  # the tree was kept back
    text = _report_text(report)
    assert "<img" not in report.read_text()
    assert "No ROC curve: the histogram method released none" in text, text
    assert "No precision-recall curve: the histogram method released none" in text, text


def _clustered_report(capsys, hospitals: list[str], tmp_path: Path) -> tuple[dict, str, Path]:
    """Run ``evaluate --method clustered --report``: its JSON, the report's words, its path."""
    report = tmp_path / "r.html"
    args = [*hospitals, "--method", "clustered", "--cluster", "patient", "--report", str(report)]
    code, out, err = run_main(capsys, ["evaluate", *args, "--json"])
    assert code == 0, err
    return json.loads(out), _report_text(report), report


def test_a_clustered_report_draws_the_confidence_ellipse(capsys, hospitals, tmp_path):
    """Before: the report of ``evaluate --method clustered`` drew only the calibration curve
    ("No ROC curve: the clustered method releases no curve"), though the analyst holds the
    two AUCs and their covariance, from which ``fedroc clustered --plot`` draws the
    confidence ellipse of paper 3's Figure 5 over one file."""
    result, text, report = _clustered_report(capsys, hospitals, tmp_path)
    caption = re.search(r"Confidence ellipses of the personalized[^<]*?\)\.", text)
    assert caption is not None, text
    assert f"z {result['equality_z']:.2f}" in caption.group(0), caption.group(0)
    assert report.read_text().count("<img") == 2  # the ellipses and the calibration curve


def test_the_demo_reports_roc_legend_quotes_every_auc(tmp_path, monkeypatch):
    """Before: ``fedroc demo``'s report drew the released curves beside the pooled one with
    the legends "histogram (released curve)", "rocglm (released curve)" and "pooled rows
    (reference)": which curve has which AUC was only in a table above."""
    import fedroc
    import fedroc.report as rep
    from fedroc import Federation
    from fedroc.data import Columns, SiteData
    from fedroc.methods import pool_site_data

    args = _write_hospitals(tmp_path)
    paths = dict(a.split("=", 1) for a in args[1:10:2])
    calls: list[list[str]] = []
    original = rep.roc_figure

    def spy(*a, **kw):
        calls.append([label for label, _, _ in kw.get("curves", ())])
        if kw.get("reference") is not None:
            calls[-1].append(kw.get("reference_label", "pooled rows (reference)"))
        return original(*a, **kw)

    monkeypatch.setattr(rep, "roc_figure", spy)
    data = {k: SiteData.from_file(v, Columns("outcome", "risk")) for k, v in paths.items()}
    fed = Federation.from_files(paths, label="outcome", score="risk")
    reference = fedroc.evaluate(fed, "pooled", pooled=pool_site_data(data))
    histogram = fedroc.evaluate(fed, "histogram")
    rep.comparison_report(reference, [histogram], seed=1)
    expected = []
    for r, name in ((histogram, "histogram (released curve)"), (reference, "pooled rows")):
        low, high = r.auc_ci
        expected.append(f"{name}: AUC {r.auc:.3f}, 95% CI {low:.3f}-{high:.3f}")
    # The pooled reference's own figure, then the curves beside it.
    assert calls[-1] == [expected[0], expected[1].replace(":", " (reference):", 1)]


def test_the_histograms_error_rows_say_what_they_are_measured_against(capsys, hospitals, tmp_path):
    """Before: the histogram's table listed ``roc_area_error 0.00013``, ``auc_error 8.32e-06``
    ... ``ap_error 0.000728`` with no word on what they are errors against, and the report
    called them "AUC error" and "Ap error": an analyst of remote sites cannot know the
    pooled AUC; only this command, which read the --site files itself, can."""
    report = tmp_path / "r.html"
    args = [*hospitals, "--method", "histogram", "--report", str(report)]
    code, out, err = run_main(capsys, ["evaluate", *args])
    assert code == 0, err
    assert "AUC error against the pooled rows" in out
    note = " ".join(out[out.index("average precision errors") :].split())
    assert "errors against the pooled rows, which this command read from the --site files" in note
    text = _report_text(report)
    for label in ("ROC area error", "PR area error", "AUC error", "PR-AUC error",
                  "Average precision error"):  # fmt: skip
        assert f"{label} against the pooled rows" in text, label
    assert "Ap error" not in text


def test_the_clustered_reports_labels_say_which_rows_and_clusters(capsys, hospitals, tmp_path):
    """Before: the clustered report said "Rows 301" of the rows in clusters holding both
    classes (the sites hold more), "Number of excluded 85", "Number of clusters total" and
    "Delong SE", where ``fedroc clustered`` says "controls, cases used", "clusters with one
    class (excluded)" and "SE (DeLong, clusters ignored)"."""
    r, text, _ = _clustered_report(capsys, hospitals, tmp_path)
    for label, key in (
        ("Rows in the clusters used", "n"),
        ("Positives in the clusters used", "n_pos"),
        ("Negatives in the clusters used", "n_neg"),
        ("Clusters used (both classes)", "n_clusters"),
        ("Clusters in all", "n_clusters_total"),
        ("Clusters with one class (left out)", "n_excluded"),
    ):
        assert f"{label} {r[key]} " in text, label
    assert f"SE of the AUC by DeLong (clusters ignored) {r['delong_se']:.4f}" in text
    assert "Number of excluded" not in text and "Delong SE" not in text


def test_summary_shows_a_small_p_value_as_the_command_line_does(capsys, tmp_path):
    """Before: ``fedroc clustered`` printed the equality test's p as 0.000155 and 7.73e-05,
    but ``clustered_auc(...).summary()`` of the same rows printed 0.0002 and 0.0001 (and a
    p of 1e-9 as 0.0000): the API and the CLI disagreed in the third significant digit."""
    import fedroc

    rng = np.random.default_rng(5)
    patient = np.repeat(np.arange(300), 3)
    y = rng.random(patient.size) < 0.4
    s = 1.2 * y + rng.normal(scale=1.5, size=300)[patient] + rng.normal(size=patient.size)
    path = tmp_path / "lesions.csv"
    pd.DataFrame({"y": y.astype(int), "p": s, "patient": patient}).to_csv(path, index=False)
    r = fedroc.clustered_auc(y.astype(int), s, patient)
    assert r.equality_p < 1e-3  # the design's point: a small p
    code, out, err = run_main(capsys, ["clustered", str(path), "--label", "y", "--score", "p",
                                       "--cluster", "patient"])  # fmt: skip
    assert code == 0, err
    shown = f"{r.equality_p:.3g}"
    assert re.search(rf"p two-sided\s+│?\s*{re.escape(shown)}", out), out
    assert re.search(rf"p two-sided\s+{re.escape(shown)}$", r.summary(), re.M), r.summary()


@pytest.mark.parametrize("method", ["rocglm", "clustered"])
def test_a_site_of_three_rows_is_told_what_to_do(capsys, hospitals, tmp_path, method):
    """Before: a site of 3 rows among five got "site 'central' refuses 'rocglm.scale': the
    rows count is below the minimum of 5 rows per released aggregate" (alike for clustered
    and mpc), while a site short of one class was told "leave it out, or merge its rows
    with another site's". The site's size is said no more precisely than before."""
    tiny = tmp_path / "tiny.csv"
    pd.read_csv(tmp_path / "north.csv").head(3).to_csv(tiny, index=False)
    args = [a if not a.startswith("central=") else f"central={tiny}" for a in hospitals]
    extra = ["--cluster", "patient"] if method == "clustered" else []
    code, out, err = run_main(capsys, ["evaluate", *args, "--method", method, *extra])
    assert code == 2 and out == "" and "Traceback" not in err
    assert "site 'central' refuses" in err, err
    assert "rows count is below the minimum of 5" in err, err
    assert "leave it out, or merge its rows with another site's" in err, err
    assert " 3 " not in err  # the count itself is not told


@pytest.mark.parametrize("method", ["pooled", "histogram"])
def test_the_reports_pr_legend_quotes_the_average_precision(
    capsys, hospitals, tmp_path, monkeypatch, method
):
    """Before: ``fedroc metrics --plot`` labelled its PR curve "risk (AP 0.689)", the report's
    PR figure only "histogram" (or "pooled rows (reference)")."""
    import fedroc.report as rep

    labels: list[str] = []
    original = rep.pr_figure

    def spy(curves, *a, **kw):
        labels.extend(label for label, _, _ in curves)
        return original(curves, *a, **kw)

    monkeypatch.setattr(rep, "pr_figure", spy)
    report = tmp_path / "r.html"
    args = [*hospitals, "--method", method, "--report", str(report), "--json"]
    code, out, err = run_main(capsys, ["evaluate", *args])
    assert code == 0, err
    ap = json.loads(out)["average_precision"]
    curve = "pooled rows (reference)" if method == "pooled" else method
    assert labels == [f"{curve}: AP {ap:.3f}"]


def test_a_spent_budget_is_not_offered_a_dp_epsilon_of_2e_15(capsys, tmp_path, seeded_site_entropy):
    """Before: after --dp-epsilon 4 and then 1 (each site's ledger charged 8 + 2 = its limit
    of 10), a third run was refused with "more than the epsilon left at site(s) ...:
    8.882e-15; ... give --dp-epsilon 2.22e-15 or less": the floating-point rest of a spent
    budget, offered as advice. Now the budget is said to be spent and no epsilon offered."""
    hospitals = _write_hospitals(tmp_path, patients=200)
    audit = ["--audit-dir", str(tmp_path / "audit")]
    for eps in ("4", "1"):
        args = [*hospitals, "--method", "histogram", "--dp-epsilon", eps, *audit, "--json"]
        code, out, err = run_main(capsys, ["evaluate", *args])
        assert code == 0 and json.loads(out)["auc"] is not None, err  # the tree went out
    args = [*hospitals, "--method", "histogram", "--dp-epsilon", "1", *audit]
    code, out, err = run_main(capsys, ["evaluate", *args])
    assert code == 2 and out == "", err
    assert "e-15" not in err and "e-16" not in err, err
    assert "the epsilon left at site(s) 'central', 'east', 'north', 'south', 'west': 0;" in err
    assert "no dp_epsilon fits" in err.replace("--dp-epsilon", "dp_epsilon"), err


def test_a_mistyped_option_of_evaluate_is_named_with_its_spelling(tmp_path):
    """Before: ``fedroc.evaluate(fed, "histogram", quantile=64)`` raised "run_histogram() got
    an unexpected keyword argument 'quantile'" (a function the user never called), where
    ``fedroc evaluate --quantile 64`` says "Did you mean --quantiles?". Nothing is asked of
    the sites before the refusal."""
    import fedroc
    from fedroc import Federation

    args = _write_hospitals(tmp_path)
    paths = dict(a.split("=", 1) for a in args[1:10:2])
    fed = Federation.from_files(paths, label="outcome", score="risk")
    start = fed.mark()
    with pytest.raises(TypeError) as exc:
        fedroc.evaluate(fed, "histogram", quantile=64)
    msg = str(exc.value)
    assert msg.startswith("evaluate(..., 'histogram') got an unexpected option 'quantile'"), msg
    assert "did you mean 'quantiles'?" in msg, msg
    assert fed.released(start).rounds == 0
    # The options it takes are still taken.
    assert fedroc.evaluate(fed, "histogram", quantiles=64).extra["quantiles"] == 64


def test_the_sites_table_is_as_wide_as_its_names(capsys, hospitals):
    """Before: where the method keeps the sites' sizes, the sites table was stretched to its
    caption ("n -: this method does not release the site's row count"): a site column 37
    characters wide for names of 5 to 7. Now the note is a line under a table as narrow as
    the pooled method's."""
    code, out, err = run_main(capsys, ["evaluate", *hospitals, "--method", "histogram"])
    assert code == 0, err
    table = out.split("Evaluation")[0]
    assert "n -: this method does not release the site's row count" in table
    widths = {len(line) for line in table.splitlines() if line.startswith(("┏", "│", "└"))}
    assert widths and max(widths) <= len("│ central │   - │") + 4, table


def test_every_released_line_reads_from_the_left(capsys, hospitals):
    """Before: the histogram's table wrote its long "released" sentences from the left but
    the short one, "per-site row counts were not released" (37 characters), flush right,
    under them, as if it were a number."""
    code, out, err = run_main(capsys, ["evaluate", *hospitals, "--method", "histogram"])
    assert code == 0, err
    cells = [line.split("│")[2] for line in out.splitlines() if line.startswith("│ released ")]
    assert len(cells) == 2, out
    assert all(cell.startswith(" ") and not cell.startswith("  ") for cell in cells), cells


def test_the_rug_plots_legend_hides_no_lesion():
    """Before: ``fedroc clustered --rug`` put its legend ("control", "case") inside the axes
    at the upper left, over the top rows' lowest scores: a control there was drawn under
    the legend box. Now no drawn mark lies under the legend."""
    from fedroc.methods.clustered.plots import rug_figure

    rng = np.random.default_rng(2)
    cluster = np.repeat(np.arange(12), 4)
    y = np.tile([0, 1, 0, 1], 12)
    score = rng.uniform(0.3, 1.0, cluster.size)
    score[(cluster >= 10) & (y == 0)] = 0.0  # the top rows' controls at the lowest score
    fig = rug_figure(y, score, cluster)
    fig.canvas.draw()
    ax = fig.axes[0]
    box = ax.get_legend().get_window_extent()
    marks = np.vstack([ax.transData.transform(c.get_offsets()) for c in ax.collections])
    inside = (marks[:, 0] >= box.x0) & (marks[:, 0] <= box.x1)
    inside &= (marks[:, 1] >= box.y0) & (marks[:, 1] <= box.y1)
    assert not inside.any(), marks[inside]


def _marks_under_legend(ax) -> int:
    """How many vertices of the axes' curves lie under its legend (display coordinates)."""
    ax.figure.canvas.draw()
    box = ax.get_legend().get_window_extent()
    hidden = 0
    for line in ax.get_lines():
        xy = ax.transData.transform(line.get_xydata())
        if line.get_label() and line.get_label().startswith("prevalence"):
            continue  # a horizontal line across the axes, named in the legend itself
        hidden += int(((xy[:, 0] > box.x0) & (xy[:, 0] < box.x1)
                       & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)).sum())  # fmt: skip
    return hidden


def test_the_pr_legend_hides_no_curve_of_a_rare_outcome(capsys, tmp_path):
    """Before: at a prevalence of 3% the PR curve lies low, and the legend, always at the
    lower left, sat on it (``fedroc metrics --plot`` and the report's PR figure alike).
    Now it goes where the curve is not."""
    from fedroc.data import Columns, SiteData
    from fedroc.report import metrics_figure, pr_figure

    rng = np.random.default_rng(4)
    y = (rng.random(3000) < 0.03).astype(int)
    s = 1 / (1 + np.exp(-(rng.normal(size=3000) + 0.6 * y - 3)))  # AUC about 0.67
    path = tmp_path / "rare.csv"
    pd.DataFrame({"label": y, "score": s}).to_csv(path, index=False)
    code, out, err = run_main(capsys, ["metrics", str(path), "--json"])
    assert code == 0, err
    data = SiteData.from_file(path, Columns("label", "score"))
    fig = metrics_figure(data, json.loads(out))
    assert _marks_under_legend(fig.axes[1]) == 0
    from sklearn.metrics import precision_recall_curve

    precision, recall, _ = precision_recall_curve(y, s)
    fig = pr_figure([("rare", recall, precision)], float(y.mean()))
    assert _marks_under_legend(fig.axes[0]) == 0


def test_the_calibration_legend_hides_no_point_of_an_under_predicting_model():
    """Before: the report's calibration legend sat at the upper left, where the curve of a
    model that under-predicts runs (observed 0.9 at a predicted 0.3): its points were drawn
    under the legend box."""
    from fedroc.metrics import calibration_curve
    from fedroc.report import calibration_figure

    rng = np.random.default_rng(8)
    prob = rng.uniform(0.0, 0.6, 4000)
    y = (rng.random(4000) < np.minimum(0.92, 2.5 * prob + 0.2)).astype(int)
    fig = calibration_figure([("under", calibration_curve(y, prob, n_bins=10))])
    ax = fig.axes[0]
    fig.canvas.draw()
    box = ax.get_legend().get_window_extent()
    line = next(ln for ln in ax.get_lines() if ln.get_label() == "under")
    vertices = line.get_xydata()
    vertices = vertices[np.isfinite(vertices).all(axis=1)]
    t = np.linspace(0, 1, 50)[:, None]  # the segments between the points too
    along = [a + t * (b - a) for a, b in itertools.pairwise(vertices)]
    xy = ax.transData.transform(np.vstack(along))
    under = (xy[:, 0] > box.x0) & (xy[:, 0] < box.x1) & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)
    assert not under.any(), ax.transData.inverted().transform(xy[under])


@pytest.mark.parametrize(
    ("command", "where"),
    [
        (["metrics", "{csv}"], "fedroc evaluate --site NAME={csv} --method pooled --report"),
        (["clustered", "{csv}", "--cluster", "patient"], "--method clustered --cluster COL"),
    ],
)
def test_report_on_one_file_points_to_evaluate(capsys, hospitals, command, where):
    """Before: ``fedroc metrics FILE --report r.html`` (and ``fedroc clustered``) answered
    "No such option: --report. Did you mean --plot?": nothing said where the HTML report of
    one file comes from."""
    csv = hospitals[1].split("=", 1)[1]
    args = [a.format(csv=csv) for a in command]
    code, out, err = run_main(capsys, [*args, "--report", "r.html"])
    assert code == 2 and out == ""
    assert err.startswith("error: No such option: --report."), err
    assert where.format(csv="FILE") in err, err


def test_a_missing_cluster_id_from_pandas_is_named_as_missing(tmp_path):
    """Before: ``clustered_auc(y, score, frame["patient"])`` with one empty patient id in the
    CSV raised "cluster mixes id types that cannot be compared" (pandas reads it as NaN
    among strings), where ``fedroc clustered`` says "cluster column 'patient' ... has 1
    missing value(s)". Now the API says the id is missing, and where."""
    import fedroc
    from fedroc.exceptions import InputError

    args = _write_hospitals(tmp_path)
    frame = pd.read_csv(args[1].split("=", 1)[1])
    frame.loc[7, "patient"] = None
    path = tmp_path / "gap.csv"
    frame.to_csv(path, index=False)
    frame = pd.read_csv(path)
    for cluster in (frame["patient"], frame["patient"].to_numpy(dtype=object)):
        with pytest.raises(InputError) as exc:
            fedroc.clustered_auc(frame["outcome"], frame["risk"], cluster)
        assert str(exc.value) == "cluster contains a missing value; first at index 7: nan"
    # ids that truly mix types are still said to
    mixed = np.array(["a", 1] * (len(frame) // 2) + ["a"] * (len(frame) % 2), dtype=object)
    with pytest.raises(InputError, match="mixes id types"):
        fedroc.clustered_auc(frame["outcome"], frame["risk"], mixed)


def test_a_missing_yes_no_label_from_pandas_is_named_as_missing(tmp_path):
    """Before: ``roc_auc(frame["outcome"], frame["risk"], pos_label="yes")`` with one empty
    label in the CSV raised "y_true mixes label types: ['yes', 'yes', 'no', 'yes', nan,
    ...]" (only None was looked for among strings); the CLI says the column "has 1 missing
    value(s)"."""
    import fedroc
    from fedroc.exceptions import InputError

    rng = np.random.default_rng(1)
    y = np.where(rng.random(50) < 0.4, "yes", "no").astype(object)
    y[4] = None
    path = tmp_path / "yn.csv"
    pd.DataFrame({"outcome": y, "risk": rng.random(50)}).to_csv(path, index=False)
    frame = pd.read_csv(path)
    for labels in (frame["outcome"], frame["outcome"].to_numpy(dtype=object)):
        with pytest.raises(InputError) as exc:
            fedroc.roc_auc(labels, frame["risk"], pos_label="yes")
        assert str(exc.value) == (
            "y_true contains 1 missing value(s), first at index 4: nan; labels must be binary"
        )


def test_a_withheld_dp_bins_count_is_shown_with_its_noise_sd(capsys, tmp_path, seeded_site_entropy):
    """Before: under DP the calibration table showed a withheld bin's noisy n (262, say) beside
    "withheld: noisy count within 3 noise SDs of 0", without that SD: it read as a
    contradiction. The note now gives the count's noise SD (public: the tree's shape and the
    noise alone, the same in every run), and the JSON carries it as
    ``calibration_count_noise_sd``."""
    hospitals = _write_hospitals(tmp_path, patients=200)
    args = [*hospitals, "--method", "histogram", "--dp-epsilon", "1", "--dp-mode", "local"]
    code, out, err = run_main(capsys, ["evaluate", *args, "--json"])
    assert code == 0, err
    extra = json.loads(out)
    sd = extra["calibration_count_noise_sd"]
    cal = extra["calibration"]
    withheld = [k for k, s in enumerate(cal["suppressed"]) if s]
    assert withheld, cal  # the seeded noise withholds some bins
    for k in withheld:  # the rule the note states, from the JSON alone
        assert not cal["count"][k] > 3 * sd[k], (k, cal["count"][k], sd[k])
    code, out, err = run_main(capsys, ["evaluate", *args])  # another draw of the noise
    assert code == 0, err
    rows = re.findall(
        r"\[([\d.]+), [\d.]+[)\]] *│ *(-?\d+) *│.*withheld: noisy count within 3 noise SDs of 0 "
        r"\(SD ([\d.e+-]+)\)",
        out,
    )
    assert rows, out
    for lo, n, shown in rows:
        k = round(float(lo) * 10)
        assert float(shown) == pytest.approx(sd[k], rel=5e-3), (lo, shown, sd[k])
        assert not int(n) > 3 * float(shown), (lo, n, shown)  # the note explains the n
