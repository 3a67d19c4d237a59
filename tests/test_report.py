"""The HTML report (issue 14.4): sections and labels parsed from the HTML, figures that show
only what the analyst holds, withheld calibration bins never joined by the line, and a
real headless browser that renders the page (skipped without Chromium)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn import metrics as skm

from fedroc.metrics import CalibrationCurve, ScoreCounts, bin_edges
from fedroc.report import calibration_figure, human_label, roc_band
from tests._cli import run_main
from tests._ranking_brute import drawn_area
from tests._scripts import load_script

SECTIONS = ["result", "figures", "sites", "released", "provenance"]


class Page(HTMLParser):
    """Sections, headings, table cells, images and links of a report."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.headings: list[str] = []
        self.cells: dict[str, list[list[str]]] = {}  # section id -> rows of cell texts
        self.images: list[dict[str, str]] = []
        self.captions: list[str] = []
        self.notes: list[str] = []
        self.urls: list[str] = []
        self._section = ""
        self._tag: list[str] = []
        self._row: list[str] | None = None
        self._text = ""
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href"):
            if key in a:
                self.urls.append(a[key] or "")
        if tag == "section":
            self._section = a.get("id", "")
            self.sections.append(self._section)
        elif tag == "tr":
            self._row = []
        elif tag == "img":
            self.images.append({k: v or "" for k, v in a.items()})
        self._tag.append(tag)
        self._text = ""

    def handle_endtag(self, tag):
        text = self._text.strip()
        if tag in ("td", "th") and self._row is not None:
            self._row.append(text)
        elif tag == "tr" and self._row is not None:
            self.cells.setdefault(self._section, []).append(self._row)
            self._row = None
        elif tag == "h2":
            self.headings.append(text)
        elif tag == "figcaption":
            self.captions.append(text)
        elif tag == "p":
            self.notes.append(text)
        if self._tag:
            self._tag.pop()

    def handle_data(self, data):
        self._text += data

    def row(self, section: str, first: str) -> list[str]:
        return next(r for r in self.cells[section] if r and r[0] == first)


@pytest.fixture(scope="module")
def sites(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("report")
    rng = np.random.default_rng(41)
    paths = {}
    for name, n in (("north", 140), ("south", 90), ("east", 170)):
        y = rng.random(n) < 0.4
        z = rng.normal(size=n)
        a = 1 / (1 + np.exp(-(1.4 * y + z - 0.4)))
        b = 1 / (1 + np.exp(-(0.8 * y + 0.8 * z + 0.6 * rng.normal(size=n) - 0.4)))
        df = pd.DataFrame({"y": y.astype(int), "m1": a.round(3), "m2": b.round(3)})
        paths[name] = tmp / f"{name}.csv"
        df.to_csv(paths[name], index=False)
    return paths


def _report(capsys, sites, tmp_path, method: str, *extra: str) -> tuple[Page, str]:
    out = tmp_path / f"{method}.html"
    args = ["evaluate", *[a for k, p in sites.items() for a in ("--site", f"{k}={p}")]]
    args += ["--label", "y", "--score", "m1", "--method", method, "--report", str(out), *extra]
    code, _, err = run_main(capsys, [*args, "--json"])
    assert code == 0, err
    assert f"report written to {out}" in err
    text = out.read_text(encoding="utf-8")
    return Page(text), text


def _no_external(page: Page, text: str) -> None:
    assert all(u.startswith("data:") for u in page.urls), page.urls
    assert not re.search(r"https?://", text)


def test_pooled_report_has_every_section_and_human_labels(capsys, sites, tmp_path):
    page, text = _report(
        capsys,
        sites,
        tmp_path,
        "pooled",
        "--compare-score",
        "m2",
        "--at-specificity",
        "0.9",
        "--youden",
        "--max-fpr",
        "0.2",
        "--seed",
        "3",
    )
    assert page.sections == [
        "result",
        "comparison",
        "operating-points",
        "figures",
        "sites",
        "released",
        "provenance",
    ]
    labels = [r[0] for r in page.cells["result"]]
    assert "Standard error of the AUC" in labels and "Brier score" in labels
    assert "Partial AUC (McClish-standardised)" in labels
    visible = " ".join(c for rows in page.cells.values() for r in rows for c in r)
    for raw in ("auc_se", "auc_ci_wald", "average_precision", "n_pos", "partial_auc"):
        assert raw not in visible and raw not in " ".join(page.notes)
    # Per-site table: the pooled reference holds the rows, so each site's AUC is shown.
    df = pd.read_csv(sites["south"])
    row = page.row("sites", "south")
    assert row[1] == "90"
    assert float(row[2]) == pytest.approx(df["y"].mean(), abs=5e-5)
    assert float(row[3]) == pytest.approx(skm.roc_auc_score(df["y"], df["m1"]), abs=5e-5)
    # The comparison, with the difference first model minus second.
    pooled = pd.concat([pd.read_csv(p) for p in sites.values()])
    diff = skm.roc_auc_score(pooled["y"], pooled["m1"]) - skm.roc_auc_score(
        pooled["y"], pooled["m2"]
    )
    cmp_row = page.row("comparison", "AUC difference (model minus compared model)")
    assert float(cmp_row[1]) == pytest.approx(diff, abs=5e-5)
    # Figures: ROC with a band, PR, calibration; all inline.
    assert any(c.startswith("ROC curve: pooled rows (reference). Shaded") for c in page.captions)
    assert any(c.startswith("Precision-recall curve") for c in page.captions)
    assert any(c.startswith("Calibration") for c in page.captions)
    assert len(page.images) == 3
    _no_external(page, text)
    # Provenance: inputs, columns, version, seed, date, command.
    prov = {r[0]: r[1] for r in page.cells["provenance"]}
    assert prov["Input: south"] == str(sites["south"])
    assert prov["Column: score"] == "m1" and prov["Column: compared score"] == "m2"
    assert prov["Seed"] == "3"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", prov["Date (UTC)"])
    assert prov["fedroc version"]
    assert "--compare-score" in prov["Command"]


def test_a_method_without_a_released_curve_gets_no_curve(capsys, sites, tmp_path):
    """An mpc-like result (it opens the AUC only): no ROC or PR figure, and never the pooled
    curve, although the analyst's command line held the site files."""
    from fedroc.federation.federation import Released
    from fedroc.methods import EvaluationResult
    from fedroc.report import evaluation_report

    result = EvaluationResult(
        method="mpc",
        sites=[{"name": "north", "n": 140}, {"name": "south", "n": 90}],
        auc=0.8,
        auc_ci=None,
        released=Released(1, ["fedroc.mpc.share"], {"north": 10, "south": 12}, {}, {}, {}, {}, {}),
        extra={"pr_auc": 0.7, "brier": None, "calibration": None},
        details=object(),
    )
    text = evaluation_report(result).render()
    page = Page(text)
    assert page.images == [] and page.captions == []
    assert any(n.startswith("No ROC curve: the mpc method releases no curve") for n in page.notes)
    row = page.row("sites", "north")
    assert row[1] == "140" and row[2] == "not released" and row[3] == "not released"
    result_rows = {r[0]: r[1] for r in page.cells["result"]}
    assert result_rows["AUC 95% confidence interval"] == "not given by this method"
    released = {r[0]: r[1] for r in page.cells["released"]}
    assert released["Rounds (calls of site functions)"] == "1"
    assert released["Bytes sent by the sites, total"] == "22"
    _no_external(page, text)


def test_histogram_report_shows_the_released_curve_and_privacy(
    capsys, sites, tmp_path, seeded_site_entropy
):
    # Seeded, at epsilon 2: at epsilon 1 the sites' noisy class counts (400 rows) kept the
    # tree back now and then (always under this seed), and the report, which drew an empty
    # figure captioned as the released curve there, now draws none.
    page, text = _report(
        capsys,
        sites,
        tmp_path,
        "histogram",
        "--dp-epsilon",
        "2",
        "--audit-dir",
        str(tmp_path / "audit"),
    )
    assert any(c.startswith("ROC curve: histogram (released curve)") for c in page.captions)
    assert not any("pooled" in c for c in page.captions)
    privacy = page.cells["released"]
    header = next(r for r in privacy if r and r[0] == "Site")
    eps_col = header.index("Epsilon spent")
    eps = {r[0]: r[eps_col] for r in privacy if len(r) == len(header) and r[0] in sites}
    assert set(eps) == set(sites) and all(float(v) > 0 for v in eps.values())
    audit = {r[0]: r for r in privacy if r and r[0] in sites and len(r) == 4}
    assert set(audit) == set(sites) and all(int(r[1]) > 0 for r in audit.values())
    _no_external(page, text)


def test_calibration_line_is_broken_at_withheld_bins():
    edges = bin_edges(5)
    count = np.array([10, 3, 12, 20, 8])
    predicted = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
    observed = np.array([0.1, 0.9, 0.5, 0.6, 0.85])  # bin 1: what the other sites released
    suppressed = np.array([False, True, False, False, False])
    curve = CalibrationCurve(edges, count, predicted, observed, suppressed)
    fig = calibration_figure([("histogram", curve)])
    ax = fig.axes[0]
    line = next(ln for ln in ax.lines if ln.get_label() == "histogram")
    y = np.asarray(line.get_ydata(), dtype=float)
    assert np.isnan(y[1]) and np.isfinite(y[[0, 2, 3, 4]]).all()
    # The partial value is a separate hollow marker, and the bin is shaded.
    assert any("withheld" in str(c.get_label()) for c in ax.collections)
    assert any("withheld" in str(p.get_label()) for p in ax.patches)
    # Rows per bin below, the withheld bin greyed.
    bars = fig.axes[1].patches
    assert [b.get_height() for b in bars] == list(count)


def test_roc_band_holds_the_curve_and_narrows_with_more_rows():
    rng = np.random.default_rng(2)

    def band_width(n: int) -> float:
        y = rng.random(n) < 0.4
        s = rng.normal(y * 1.0, 1.0)
        counts = ScoreCounts.from_scores(y, s)
        fpr, lo, hi = roc_band(counts, seed=1)
        fp, tp, _ = skm.roc_curve(y, s)
        step = tp[np.searchsorted(fp, fpr + 1e-12, side="right") - 1]
        assert np.mean((lo <= step + 1e-12) & (step <= hi + 1e-12)) > 0.95
        return float(np.mean(hi - lo))

    small, large = band_width(200), band_width(3200)
    assert 2.5 < small / large < 6.0  # about sqrt(16) = 4


def test_human_labels():
    assert human_label("auc_se") == "Standard error of the AUC"
    assert human_label("auc_noise_sd") == "Noise standard deviation of the AUC"
    assert human_label("brier_noise_sd") == "Brier noise SD"


def _browser_check():
    return load_script("check_report_browser.py", "fedroc_check_report_browser")


def test_report_renders_in_headless_chromium(capsys, sites, tmp_path):
    check = _browser_check()
    chromium = check.find_chromium()
    if chromium is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    _report(capsys, sites, tmp_path, "pooled", "--youden", "--seed", "1")
    good = tmp_path / "pooled.html"
    assert check.check(good, SECTIONS, chromium) == []
    # The check fails on a broken page: a corrupt figure and a resource from the network.
    text = good.read_text(encoding="utf-8")
    broken = tmp_path / "broken.html"
    broken.write_text(
        text.replace("base64,iVBOR", "base64,AAAA", 1).replace(
            "</body>", '<img src="https://cdn.example.org/x.png"></body>'
        ),
        encoding="utf-8",
    )
    problems = check.check(broken, SECTIONS, chromium)
    assert any("did not decode" in p for p in problems)
    assert any("external" in p for p in problems)


def test_roc_figure_pooled_reference_encloses_the_auc_with_tied_scores():
    """The report's pooled reference curve was drawn as a staircase: with scores tied
    across the classes its area was below the AUC (a tied threshold moves up and right at
    once, which the AUC counts 1/2)."""
    from fedroc.data import SiteData
    from fedroc.report import roc_figure

    rng = np.random.default_rng(4)
    y = rng.random(300) < 0.4
    score = np.round(1 / (1 + np.exp(-(1.2 * y + rng.normal(size=y.size)))), 1)
    fig = roc_figure(SiteData.from_arrays(y, score))
    [line] = [ln for ln in fig.axes[0].lines if ln.get_label() == "pooled rows (reference)"]
    assert drawn_area(line) == pytest.approx(skm.roc_auc_score(y, score), abs=1e-12)


def test_calibration_figure_under_dp_draws_the_noise_of_each_observed_fraction():
    """Under DP the observed fractions carry noise of SD 0.1-0.2 at a few hundred rows per
    bin (three hospitals, epsilon 1); the figure drew them as an exact line (walk)."""
    edges = np.linspace(0.0, 1.0, 5)
    count = np.array([90, 250, 160, 40])
    predicted = np.array([0.08, 0.14, 0.22, np.nan])
    observed = np.array([0.05, 0.0, 0.08, np.nan])
    suppressed = np.array([False, False, False, True])
    curve = CalibrationCurve(edges, count, predicted, observed, suppressed)
    sd = [0.2, 0.13, 0.17, None]
    ax = calibration_figure([("histogram", curve)], noise_sd=[sd]).axes[0]
    (bars,) = [c for c in ax.containers if "noise" in str(c.get_label())]
    segments = bars.lines[2][0].get_segments()  # one vertical bar per released bin
    assert len(segments) == 3
    for seg, x, y, s in zip(segments, predicted[:3], observed[:3], sd[:3], strict=True):
        assert seg[0][0] == pytest.approx(x)
        assert sorted(p[1] for p in seg) == pytest.approx([y - 1.96 * s, y + 1.96 * s])
    # Without DP noise, no bars.
    assert not calibration_figure([("pooled", curve)]).axes[0].containers
