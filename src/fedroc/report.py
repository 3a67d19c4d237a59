"""HTML report: one self-contained file (figures inline as PNG, no external resource).

:func:`evaluation_report` turns an :class:`~fedroc.methods.EvaluationResult` into a report
with the result, the comparison and operating points when asked, the ROC curve (with a
confidence band where the method supports one), the PR curve, the calibration plot (bins
withheld by a site shown as withheld, never joined by the line), a per-site table, what
left the sites, and the provenance of the run.

A figure shows only what the analyst holds: the curve a method released, never the pooled
empirical curve unless the method is the pooled reference (then labelled as such). The mpc
method opens the AUC only, so its report draws no ROC curve.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fedroc._docs import fill_doc
from fedroc._labels import LABELS, human_label, method_label
from fedroc._plotting import roc_axes
from fedroc.data import SiteData
from fedroc.metrics import CalibrationCurve, ScoreCounts, precision_recall_curve, roc_curve

if TYPE_CHECKING:
    from fedroc.methods import EvaluationResult

__all__ = [
    "LABELS",
    "Provenance",
    "Report",
    "calibration_figure",
    "comparison_report",
    "evaluation_report",
    "human_label",
    "metrics_figure",
    "pr_figure",
    "roc_band",
    "roc_figure",
]


def _matplotlib() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# -- figures -------------------------------------------------------------------------------
@fill_doc
def roc_band(
    counts: ScoreCounts,
    *,
    n_bootstraps: int = 200,
    confidence_level: float = 0.95,
    seed: int | None = None,
    grid: int = 101,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pointwise stratified-bootstrap band of the empirical ROC curve (vertical averaging).

    Each replicate resamples the positives and the negatives from their own class (a
    multinomial draw over the levels of whole ``counts``); the band holds the percentile
    interval of the replicates' true positive rate at each false positive rate of the grid
    (pROC's ``ci.se`` over a grid of specificities).

    Parameters
    ----------
    counts : ScoreCounts
        Whole (unweighted) class counts of the pooled rows, both classes present.
    n_bootstraps : int, default 200
        Bootstrap replicates.
    {confidence_level}
    {seed}
    grid : int, default 101
        Number of equally spaced false positive rates from 0 to 1.

    Returns
    -------
    fpr : ndarray, shape (grid,)
        The false positive rates of the grid.
    low, high : ndarray, shape (grid,)
        Percentile band of the true positive rate at each of them.
    """
    rng = np.random.default_rng(seed)
    keep = (counts.pos + counts.neg) > 0
    pos, neg = counts.pos[keep], counts.neg[keep]
    p, n = round(pos.sum()), round(neg.sum())
    fpr = np.linspace(0.0, 1.0, grid)
    tpr = np.empty((n_bootstraps, grid))
    bp = rng.multinomial(p, pos / p, size=n_bootstraps)
    bn = rng.multinomial(n, neg / n, size=n_bootstraps)
    tps = np.cumsum(bp, axis=1) / p
    fps = np.cumsum(bn, axis=1) / n
    for b in range(n_bootstraps):  # one pass per replicate (not per row)
        f = np.r_[0.0, fps[b]]
        t = np.r_[0.0, tps[b]]
        # The step curve's highest TPR at a false positive rate not above each grid value.
        tpr[b] = t[np.searchsorted(f, fpr + 1e-12, side="right") - 1]
    alpha = (1.0 - confidence_level) / 2.0
    low, high = np.quantile(tpr, [alpha, 1.0 - alpha], axis=0)
    return fpr, low, high


def roc_figure(
    pooled: SiteData | None = None,
    curves: Sequence[tuple[str, np.ndarray, np.ndarray]] = (),
    title: str = "ROC curve",
    *,
    band: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    band_label: str = "",
    points: Sequence[tuple[str, float, float]] = (),
    reference: tuple[np.ndarray, np.ndarray] | None = None,
    reference_label: str = "pooled rows (reference)",
) -> Any:
    """ROC curves, an optional band and operating points.

    ``pooled`` (rows) or ``reference`` (its ``(fpr, tpr)``) draws the pooled empirical
    curve, labelled as the reference: pass it only when the analyst really pooled the rows.

    Parameters
    ----------
    pooled : SiteData, optional
        Pooled rows whose empirical ROC curve is drawn as the reference (only when both
        classes are present).
    curves : sequence of (str, ndarray, ndarray), default ()
        ``(label, fpr, tpr)`` of each curve to draw.
    title : str, default "ROC curve"
        Title of the axes.
    band : tuple of three ndarray, optional
        ``(fpr, low, high)`` of a pointwise band, e.g. from :func:`roc_band`, shaded.
    band_label : str, default ""
        Legend entry of the band.
    points : sequence of (str, float, float), default ()
        ``(label, fpr, tpr)`` of operating points, drawn as markers.
    reference : tuple of two ndarray, optional
        ``(fpr, tpr)`` of the pooled curve, drawn dashed on top of the others.
    reference_label : str, default "pooled rows (reference)"
        Legend entry of ``reference``.

    Returns
    -------
    matplotlib.figure.Figure
        A 5 x 5 inch figure (Agg backend), the diagonal dotted.
    """
    plt = _matplotlib()
    fig, ax = plt.subplots(figsize=(5, 5))
    if band is not None:
        f, lo, hi = band
        ax.fill_between(f, lo, hi, step="post", color="tab:blue", alpha=0.2, label=band_label)
    if pooled is not None and 0 < pooled.n_pos < pooled.n:
        fpr, tpr, _ = roc_curve(pooled.label, pooled.score)
        # Straight segments, as the AUC measures the curve (a threshold tied across the
        # classes moves up and right at once; a staircase drew a corner below it).
        ax.plot(fpr, tpr, color="black", lw=1.2, label="pooled rows (reference)")
    for label, fpr, tpr in curves:
        ax.plot(fpr, tpr, lw=1.5, label=label, drawstyle="default")
    if reference is not None:  # on top, thin and dashed, so that it does not hide the others
        ax.plot(*reference, color="black", lw=1.0, ls="--", zorder=3, label=reference_label)
    for label, x, y in points:
        ax.plot([x], [y], marker="o", ms=6, ls="none", label=label)
    roc_axes(ax, title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def pr_figure(
    curves: Sequence[tuple[str, np.ndarray, np.ndarray]],
    prevalence: float | None = None,
    title: str = "Precision-recall curve",
) -> Any:
    """Precision against recall, one line per ``(label, recall, precision)``.

    Parameters
    ----------
    curves : sequence of (str, ndarray, ndarray)
        ``(label, recall, precision)`` of each curve.
    prevalence : float, optional
        Fraction of positives, drawn as the horizontal line of a random classifier (not
        drawn when None or not finite).
    title : str, default "Precision-recall curve"
        Title of the axes.

    Returns
    -------
    matplotlib.figure.Figure
        A 5 x 5 inch figure (Agg backend).
    """
    plt = _matplotlib()
    fig, ax = plt.subplots(figsize=(5, 5))
    for label, recall, precision in curves:
        ax.plot(recall, precision, lw=1.5, label=label)
    if prevalence is not None and math.isfinite(prevalence):
        ax.axhline(prevalence, ls=":", color="grey", lw=0.8, label=f"prevalence {prevalence:.3f}")
    ax.set(xlabel="recall (sensitivity)", ylabel="precision (PPV)", title=title)
    ax.set(xlim=(0, 1), ylim=(0, 1.01))
    # Where the curves are not: at a rare outcome they run low, under a lower-left legend.
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return fig


def metrics_figure(
    data: SiteData,
    result: Mapping[str, Any],
    *,
    names: tuple[str, str | None] = ("score", None),
    confidence_level: float = 0.95,
    title: str = "",
) -> Any:
    """Draw the ROC and precision-recall curves of one file's rows (``fedroc metrics --plot``).

    Parameters
    ----------
    data : SiteData
        The rows, both classes present; with ``score_b``, its curves are drawn too.
    result : mapping
        The JSON object of ``fedroc metrics`` for these rows: the legends quote its AUC, CI
        and comparison; its operating points are marked on the ROC curve.
    names : tuple of (str, str or None), default ("score", None)
        Names of the score and of the second score (their columns).
    confidence_level : float, default 0.95
        The level of ``result``'s interval, as the legend names it.
    title : str, default ""
        Title above both panels (e.g. the file's name).

    Returns
    -------
    matplotlib.figure.Figure
        Two 5 x 5 inch panels side by side (Agg canvas, no pyplot state).
    """
    from fedroc._plotting import new_figure
    from fedroc.metrics import average_precision

    fig = new_figure((10, 5))
    roc_ax, pr_ax = fig.subplots(1, 2)
    comparison = result.get("comparison") or {}

    scores = [(names[0], data.score, result["auc"], _ci_text(result["auc_ci"], confidence_level))]
    if data.score_b is not None:
        b = (names[1] or "score B", data.score_b, comparison.get("auc_b"))
        scores.append((*b, _ci_text(comparison.get("auc_b_ci"), confidence_level)))
    for name, score, auc, interval in scores:
        fpr, tpr, _ = roc_curve(data.label, score)
        # Straight segments between the thresholds' points: a threshold tied across the
        # classes moves up and right at once (the AUC counts such pairs 1/2), which a
        # staircase drew as a corner below the curve the AUC measures.
        roc_ax.plot(fpr, tpr, lw=1.5, label=f"{name} (AUC {auc:.3f}{interval})")
        precision, recall, _ = precision_recall_curve(data.label, score)
        ap = average_precision(data.label, score)
        pr_ax.step(recall, precision, where="post", lw=1.5, label=f"{name} (AP {ap:.3f})")
    for point in result.get("operating_points") or []:
        if point.get("threshold") is not None:
            x, y = 1.0 - point["specificity"], point["sensitivity"]
            label = f"{point['criterion']} (score >= {point['threshold']:.4g})"
            roc_ax.plot([x], [y], marker="o", ms=6, ls="none", label=label)
    roc_axes(roc_ax, "ROC curve")
    roc_ax.legend(loc="lower right", fontsize=8)
    prevalence = data.n_pos / data.n
    pr_ax.axhline(prevalence, ls=":", color="grey", lw=0.8, label=f"prevalence {prevalence:.3f}")
    pr_ax.set(xlabel="recall (sensitivity)", ylabel="precision (PPV)")
    pr_ax.set(title="Precision-recall curve", xlim=(0, 1), ylim=(0, 1.01))
    pr_ax.legend(loc="best", fontsize=8)  # a rare outcome's curve ran under "lower left"
    if title:
        fig.suptitle(title)
    return fig


def calibration_figure(
    curves: Sequence[tuple[str, CalibrationCurve]],
    title: str = "Calibration",
    noise_sd: Sequence[Any] | None = None,
) -> Any:
    """Observed fraction against mean predicted probability, with the rows of each bin.

    The line joins only bins that every site released: a bin withheld at a site (fewer
    rows than its minimum count) is shaded and labelled as withheld, and what the other
    sites released there is a hollow marker, never a point on the line.

    Parameters
    ----------
    curves : sequence of (str, CalibrationCurve)
        ``(label, curve)`` of each curve; each curve's rows per bin are drawn side by side
        below.
    title : str, default "Calibration"
        Title of the upper axes.
    noise_sd : sequence, optional
        Per curve, the DP noise SD of each bin's observed fraction (None where a bin has
        none) or None: drawn as bars of +-1.96 SD. Under DP the observed fractions carry
        noise of SD 0.1 to 0.2 at a few hundred rows; a line without bars read as exact.

    Returns
    -------
    matplotlib.figure.Figure
        Reliability diagram above, rows per bin below (Agg backend).
    """
    plt = _matplotlib()
    fig, (ax, bars) = plt.subplots(
        2, 1, figsize=(5, 6.2), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    ax.plot([0, 1], [0, 1], ls=":", color="grey", lw=0.8, label="perfect calibration")
    shaded = False
    for i, (label, curve) in enumerate(curves):
        ok = np.isfinite(curve.observed_fraction) & np.isfinite(curve.mean_predicted)
        withheld = curve.withheld  # a secure curve's empty bins hold no row to withhold
        known = ok & ~withheld
        # NaN breaks the line: nothing is drawn through a withheld bin.
        y = np.where(known, curve.observed_fraction, np.nan)
        ax.plot(curve.mean_predicted, y, marker="o", ms=3, label=label)
        sd = None if noise_sd is None else noise_sd[i]
        if sd is not None:
            err = np.array([np.nan if v is None else float(v) for v in sd], dtype=float)
            bar = known & np.isfinite(err)
            if bar.any():
                ax.errorbar(
                    curve.mean_predicted[bar],
                    curve.observed_fraction[bar],
                    yerr=1.96 * err[bar],
                    fmt="none",
                    ecolor=f"C{i}",
                    elinewidth=0.8,
                    capsize=2,
                    label=f"{label}: +-1.96 DP noise SD",
                )
        partial = ok & withheld
        if partial.any():
            ax.scatter(
                curve.mean_predicted[partial],
                curve.observed_fraction[partial],
                facecolors="none",
                edgecolors="red",
                s=60,
                zorder=3,
                label=f"{label}: bin withheld at a site (in part)",
            )
        for k in np.flatnonzero(withheld):
            ax.axvspan(curve.edges[k], curve.edges[k + 1], color="grey", alpha=0.15, lw=0)
            shaded = True
        width = np.diff(curve.edges)
        bars.bar(
            curve.edges[:-1] + i * width / (len(curves) + 1),
            curve.count,
            width=width / (len(curves) + 1),
            align="edge",
            label=label,
            color=np.where(withheld, "lightgrey", f"C{i}"),
        )
    if shaded:
        ax.axvspan(0, 0, color="grey", alpha=0.15, label="withheld bin")
    ax.set(ylabel="observed fraction of positives", title=title, xlim=(0, 1), ylim=(0, 1))
    # Where the curves are not: a model that under-predicts runs through the upper left.
    ax.legend(loc="best", fontsize=7)
    bars.set(xlabel="mean predicted probability", ylabel="rows per bin")
    fig.tight_layout()
    return fig


# -- the document --------------------------------------------------------------------------
class Report:
    """Collects sections and writes a single HTML file with embedded PNG figures.

    Parameters
    ----------
    title : str
        Title of the document (``<title>`` and its first heading).
    """

    def __init__(self, title: str) -> None:
        self.title = title
        self._parts: list[str] = []
        self._open = False

    def start_section(self, ident: str, heading: str) -> None:
        """Open a ``<section id=ident>`` with an ``<h2>``; the next parts go inside it."""
        self.end_section()
        self._parts.append(f'<section id="{html.escape(ident)}"><h2>{html.escape(heading)}</h2>')
        self._open = True

    def end_section(self) -> None:
        """Close the open section, if any."""
        if self._open:
            self._parts.append("</section>")
            self._open = False

    def add_heading(self, text: str) -> None:
        """Append an ``<h2>`` heading (text escaped)."""
        self._parts.append(f"<h2>{html.escape(text)}</h2>")

    def add_text(self, text: str, cls: str | None = None) -> None:
        """Append a paragraph (text escaped), with an optional CSS class such as ``"note"``."""
        attr = f' class="{html.escape(cls)}"' if cls else ""
        self._parts.append(f"<p{attr}>{html.escape(text)}</p>")

    def add_table(
        self, header: Sequence[str], rows: Sequence[Sequence[Any]], cls: str | None = None
    ) -> None:
        """Append a table: one header row, then one row per sequence of cells.

        Cells are formatted for readers: None and NaN as "-", booleans as yes/no, floats with four
        decimals (small ones with three significant digits), pairs as ``[low, high]``.
        """
        head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_cell(c))}</td>" for c in row) + "</tr>"
            for row in rows
        )
        attr = f' class="{html.escape(cls)}"' if cls else ""
        self._parts.append(
            f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        )

    def add_figure(self, fig: Any, caption: str = "") -> None:
        """Append a matplotlib figure as an inline PNG with a caption, and close the figure."""
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        _matplotlib().close(fig)
        data = base64.b64encode(buf.getvalue()).decode()
        self._parts.append(
            f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(caption)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )

    def render(self) -> str:
        """Return the whole document as one HTML string (closing an open section)."""
        self.end_section()
        style = (
            "body{font-family:sans-serif;max-width:62em;margin:2em auto;color:#222}"
            "table{border-collapse:collapse;margin:1em 0}"
            "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}"
            "td:first-child,th:first-child{text-align:left}"
            "th{background:#f3f3f3}figure{display:inline-block;margin:1em;vertical-align:top}"
            "figcaption{max-width:32em;font-size:.9em}.note{color:#555;font-size:.9em}"
            "section{margin-top:2em}"
        )
        return (
            "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(self.title)}</title><style>{style}</style></head><body>"
            f"<h1>{html.escape(self.title)}</h1>" + "".join(self._parts) + "</body></html>"
        )

    def write(self, path: str | Path) -> Path:
        """Write the document to ``path`` atomically and return the path."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        try:
            tmp.write_text(self.render(), encoding="utf-8")
            tmp.replace(out)  # never leave a half-written report behind
        except BaseException:
            tmp.unlink(missing_ok=True)  # nor the temporary file of one that failed
            raise
        return out


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        # Small values such as a DP delta keep their significant digits.
        return f"{value:.3g}" if 0 < abs(value) < 1e-3 else f"{value:.4f}"
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return f"[{_cell(value[0])}, {_cell(value[1])}]"
    if isinstance(value, (tuple, list)):
        return ", ".join(_cell(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class Provenance:
    """Where a result came from, for the report's provenance block.

    Attributes
    ----------
    inputs : mapping of str to str, default {}
        Each site's input (its data file, or a description such as the TOML it came from).
    columns : mapping of str to object, default {}
        The column mapping (label, score, ...); None values are not shown.
    options : mapping of str to object, default {}
        The options the method ran with.
    seed : int, optional
        Seed of the run.
    command : str, optional
        The command line.
    date : str, optional
        When the run happened, ISO 8601 in UTC (:meth:`now`).
    version : str, optional
        fedroc's version.
    """

    inputs: Mapping[str, str] = field(default_factory=dict)  # site -> file (or "TOML ...")
    columns: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    command: str | None = None
    date: str | None = None
    version: str | None = None

    @staticmethod
    def now() -> str:
        """Return the current UTC time in ISO 8601, to the second."""
        from datetime import datetime

        return datetime.now(UTC).isoformat(timespec="seconds")


_SKIP_KEYS = {
    "calibration",
    "calibration_released",
    "calibration_noise_sd",
    "comparison",
    "operating_points",
    "mpc",
    "caveats",
}


def evaluation_report(
    result: EvaluationResult,
    *,
    provenance: Provenance | None = None,
    site_rows: Sequence[Mapping[str, Any]] | None = None,
    audit_summary: Mapping[str, Mapping[str, int]] | None = None,
    seed: int | None = None,
    title: str | None = None,
) -> Report:
    """Build the HTML report of one evaluation (tables, curves, provenance).

    Parameters
    ----------
    result : EvaluationResult
        The evaluation to report (from :func:`fedroc.evaluate`).
    provenance : Provenance, optional
        Inputs, options, seed and command line, shown in a provenance block when given.
    site_rows : sequence of mapping, optional
        Per-site ``{name, n, n_pos, auc}`` the analyst holds (the pooled reference, which
        holds the rows). Without it the table shows what the method's result says of each
        site, and "not released" for the rest.
    audit_summary : mapping, optional
        Per site, the number of audit records per outcome (released, refused, error), from
        the sites' audit logs where the caller can read them (in-process sites).
    seed : int, optional
        Seed of the bootstrap band of the pooled ROC curve.
    title : str, optional
        Title of the document; None gives "fedroc evaluation: <method>".

    Returns
    -------
    Report
        The document; ``Report.write(path)`` writes it as one HTML file.
    """
    from fedroc.methods import ALIAS_KEYS

    level = result.confidence_level
    pct = f"{level:.0%}"
    report = Report(title or f"fedroc evaluation: {result.method}")
    extra = result.extra

    report.start_section("result", "Result")
    rows: list[tuple[str, Any]] = [
        ("Method", result.method),
        ("AUC", result.auc),
        (f"AUC {pct} confidence interval", result.auc_ci),
    ]
    for key, value in extra.items():
        if key in _SKIP_KEYS or isinstance(value, dict):
            continue
        if key in ALIAS_KEYS.get(result.method, ()):  # shown under their other name
            continue
        if isinstance(value, (list, tuple)) and len(value) > 2 and key != "rocglm_params":
            continue
        if key == "epsilon" and value is None:  # the method can add DP; this run did not
            value = "none (no differential privacy)"
        rows.append((method_label(key, result.method), value))
    rows = [(k, "not given by this method" if v is None else v) for k, v in rows]
    report.add_table(["Quantity", "Value"], rows, cls="result")
    for caveat in extra.get("caveats") or []:
        report.add_text(f"Caveat: {caveat}", cls="note")

    comparison = extra.get("comparison")
    if comparison is not None:
        report.start_section("comparison", "Comparison of two models on the same rows")
        report.add_table(
            ["Quantity", "Value"],
            [
                ("AUC of the compared model", comparison.get("auc_b")),
                ("AUC difference (model minus compared model)", comparison["auc_difference"]),
                ("Standard error of the difference", comparison.get("se")),
                (f"{pct} confidence interval of the difference", comparison["ci"]),
                ("p-value (two-sided, equal AUCs)", comparison["p_value"]),
                ("Test", comparison["method"]),
            ],
        )

    points = extra.get("operating_points") or []
    if points:
        report.start_section("operating-points", "Operating points")
        report.add_table(
            [
                "Chosen by",
                "Threshold",
                "Sensitivity",
                "Specificity",
                "PPV",
                "NPV",
                f"{pct} CI of the chosen rate, threshold re-chosen",
            ],
            [
                (
                    p["criterion"],
                    p["threshold"],
                    _with_ci(p, "sensitivity"),
                    _with_ci(p, "specificity"),
                    _with_ci(p, "ppv"),
                    _with_ci(p, "npv"),
                    p.get("selection_ci"),
                )
                for p in points
            ],
        )
        report.add_text(
            "A case is predicted positive when its score is at least the threshold. The "
            f"bracketed {pct} intervals treat the threshold as fixed in advance; the last column "
            "re-chooses it in every bootstrap sample. PPV and NPV depend on the prevalence of "
            "these rows.",
            cls="note",
        )

    report.start_section("figures", "Figures")
    _ellipse_section(report, result)
    _roc_section(report, result, points, seed)
    _pr_section(report, result)
    cal = extra.get("calibration")
    if cal is not None:
        withheld = int(np.count_nonzero(cal.withheld))
        # Under DP no site withholds a bin: the analyst does, for its noise (as the CLI's
        # calibration table says); the report said "withheld at a site" there too.
        noise = extra.get("calibration_noise_sd")
        why = (
            "withheld for their noise (noisy count within 3 noise SDs of 0)"
            if noise is not None
            else "withheld at a site"
        )
        report.add_figure(
            calibration_figure(
                [(result.method, cal)],
                title="Calibration",
                noise_sd=None if noise is None else [noise],
            ),
            "Calibration: observed fraction of positives per bin of predicted probability, "
            "rows per bin below"
            + (" (noisy counts)" if noise is not None else "")
            + ". "
            + (
                "Bars: +-1.96 SD of the DP noise on each observed fraction (not the "
                "sampling error). "
                if noise is not None
                else ""
            )
            + (
                f"{withheld} bin(s) {why} are shaded; the line does not pass them."
                if withheld
                else "No bin was withheld."
            ),
        )
    else:
        report.add_text(
            "No calibration plot: the scores are not probabilities, or the method released "
            "no calibration bins.",
            cls="note",
        )

    _sites_section(report, result, site_rows)
    _released_section(report, result, audit_summary)
    if provenance is not None:
        _provenance_section(report, provenance, result)
    report.end_section()
    return report


def _ellipse_section(report: Report, result: EvaluationResult) -> None:
    """Draw the clustered method's confidence ellipses (paper 3, Figure 5).

    The analyst holds the two AUCs and their covariance: what ``fedroc clustered --plot``
    draws over one file.
    """
    details = result.details
    if result.method != "clustered" or not callable(getattr(details, "ellipse", None)):
        return
    levels = tuple(sorted({result.confidence_level, 0.99}))
    z, p = result.extra.get("equality_z"), result.extra.get("equality_p")
    test = "" if z is None or p is None else f"; the test of equality: z {z:.2f}, p {p:.3g}"
    report.add_figure(
        details.plot(levels=levels),
        "Confidence ellipses of the personalized (x) and population (y) AUCs at "
        + " and ".join(f"{level:.0%}" for level in levels)
        + f" (their joint covariance, Corollary 6{test}). The diagonal is equality.",
    )


def _auc_legend(label: str, result: EvaluationResult) -> str:
    """Return ``label`` with the result's AUC and interval, as ``fedroc metrics --plot``.

    A figure taken out of the report said only "histogram (released curve)".
    """
    if result.auc is None or not math.isfinite(result.auc):
        return label
    return f"{label}: AUC {result.auc:.3f}" + _ci_text(result.auc_ci, result.confidence_level)


def _ci_text(bounds: Sequence[float | None] | None, level: float) -> str:
    """Return ``", 95% CI lo-hi"`` for a legend; empty for an undefined interval.

    An AUC of 0 or 1 has none by default (its bounds null or NaN).
    """
    low, high = (None, None) if bounds is None else bounds
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return ""
    return f", {level:.0%} CI {low:.3f}-{high:.3f}"


def _drawable(x: Any, y: Any) -> bool:
    """Whether a released curve has a point to draw."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return bool(x.size and y.size and np.any(np.isfinite(x) & np.isfinite(y)))


def _with_ci(point: Mapping[str, Any], name: str) -> str:
    value, ci = point.get(name), point.get(f"{name}_ci")
    return _cell(value) + ("" if ci is None else f" {_cell(ci)}")


def _released_curve(
    report: Report, result: EvaluationResult, points: str, curve: str, *, never: str
) -> tuple[Any, Any] | None:
    """Return the curve ``result.details.<points>()`` released, or None after a note why not.

    ``never`` ends the note for a method that releases no such curve at all
    ("No {curve}: the {method} method {never}.").
    """
    released = getattr(result.details, points, None)
    if not callable(released):
        report.add_text(f"No {curve}: the {result.method} method {never}.", cls="note")
        return None
    x, y = released()
    if not _drawable(x, y):
        # Under DP the sites may keep the tree back (the caveat says why): an empty figure
        # was drawn and captioned as the released curve.
        report.add_text(
            f"No {curve}: the {result.method} method released none in this run (see the "
            "caveat above).",
            cls="note",
        )
        return None
    return x, y


def _roc_section(
    report: Report, result: EvaluationResult, points: Sequence[Mapping[str, Any]], seed: int | None
) -> None:
    curve = _released_curve(
        report,
        result,
        "roc_points",
        "ROC curve",
        never="releases no curve (only what the result table lists), and this report draws "
        "only what the analyst holds",
    )
    if curve is None:
        return
    fpr, tpr = curve
    counts = getattr(result.details, "counts", None)
    band = None
    band_text = "The method releases no uncertainty of the curve: no band is drawn."
    weighted = bool(result.extra.get("weighted"))  # a row bootstrap says nothing of weights
    if (
        result.method == "pooled"
        and not weighted
        and isinstance(counts, ScoreCounts)
        and counts.is_whole()
    ):
        band = roc_band(counts, confidence_level=result.confidence_level, seed=seed)
        band_text = (
            f"Shaded: pointwise {result.confidence_level:.0%} stratified bootstrap band "
            f"(200 samples, {'unseeded' if seed is None else f'seed {seed}'})."
        )
    label = (
        "pooled rows (reference)"
        if result.method == "pooled"
        else f"{result.method} (released curve)"
    )
    marks = [
        (f"{p['criterion']}", 1.0 - p["specificity"], p["sensitivity"])
        for p in points
        if p.get("specificity") is not None and p.get("sensitivity") is not None
    ]
    report.add_figure(
        roc_figure(
            curves=[(_auc_legend(label, result), fpr, tpr)],
            band=band,
            band_label=f"{result.confidence_level:.0%} band" if band is not None else "",
            points=marks,
        ),
        f"ROC curve: {label}. {band_text}",
    )


def _pr_section(report: Report, result: EvaluationResult) -> None:
    curve = _released_curve(
        report, result, "pr_points", "precision-recall curve", never="releases none"
    )
    if curve is None:
        return
    recall, precision = curve
    n_pos, n_neg = result.extra.get("n_pos"), result.extra.get("n_neg")
    prevalence = None
    if isinstance(n_pos, (int, float)) and isinstance(n_neg, (int, float)) and n_pos + n_neg > 0:
        prevalence = float(n_pos) / float(n_pos + n_neg)
    label = "pooled rows (reference)" if result.method == "pooled" else f"{result.method}"
    ap = result.extra.get("average_precision")
    # As `fedroc metrics --plot` labels its PR curve ("risk (AP 0.689)").
    legend = f"{label}: AP {ap:.3f}" if isinstance(ap, float) and math.isfinite(ap) else label
    report.add_figure(
        pr_figure([(legend, recall, precision)], prevalence),
        f"Precision-recall curve: {label}. The dotted line is the prevalence (a random score).",
    )


def _site_row(site: Any, missing: str) -> tuple[Any, ...]:
    """(name, rows, prevalence, AUC) of one site, ``missing`` where it released none."""
    info = site if isinstance(site, Mapping) else {}
    name = site["name"] if isinstance(site, Mapping) else str(site)
    n, n_pos = info.get("n"), info.get("n_pos")
    prev = n_pos / n if n and n_pos is not None else None
    return (
        name,
        missing if n is None else n,
        missing if prev is None else prev,
        info.get("auc", missing),
    )


def _sites_section(
    report: Report, result: EvaluationResult, site_rows: Sequence[Mapping[str, Any]] | None
) -> None:
    report.start_section("sites", "Sites")
    pooled = site_rows is not None
    sites: Sequence[Any] = result.sites if site_rows is None else site_rows
    rows = [_site_row(s, "not released") for s in sites]
    report.add_table(["Site", "Rows", "Prevalence", "AUC at the site"], rows, cls="sites")
    if pooled:
        note = "The pooled reference holds every row, so each site's figures are known here."
    else:
        note = (
            f"Only what the {result.method} method released about each site is shown; no "
            "site released its own AUC."
        )
    report.add_text(note, cls="note")


def _released_section(
    report: Report,
    result: EvaluationResult,
    audit_summary: Mapping[str, Mapping[str, int]] | None,
) -> None:
    rel = result.released
    report.start_section("released", "What left the sites")
    sites = sorted(set(rel.bytes_received) | set(rel.epsilon) | set(rel.dp))
    report.add_table(
        ["Quantity", "Value"],
        [
            ("Rounds (calls of site functions)", rel.rounds),
            ("Site functions called", ", ".join(rel.functions) or "none"),
            ("Replies by kind", ", ".join(f"{k}: {v}" for k, v in rel.kinds.items()) or "none"),
            ("Bytes sent by the sites, total", sum(rel.bytes_received.values())),
        ],
        cls="released",
    )
    if sites:
        rows = []
        for site in sites:
            events = rel.dp.get(site, [])
            mechanisms = sorted({str(e.get("mechanism", "?")) for e in events}) if events else []
            rows.append(
                (
                    site,
                    rel.bytes_received.get(site, 0),
                    rel.bytes_sent.get(site, 0),
                    ", ".join(mechanisms) or "none (no noise)",
                    rel.epsilon.get(site),
                    rel.delta.get(site),
                )
            )
        report.add_table(
            [
                "Site",
                "Bytes sent",
                "Bytes received",
                "DP mechanisms",
                "Epsilon spent",
                "Delta spent",
            ],
            rows,
            cls="privacy",
        )
    for note in rel.notes:
        report.add_text(note, cls="note")
    dropped = result.extra.get("dropped")
    if dropped:
        report.add_text(f"Sites that refused or were dropped: {', '.join(dropped)}", cls="note")
    if audit_summary:
        report.add_table(
            ["Site", "Released", "Refused", "Errors"],
            [
                (site, c.get("released", 0), c.get("refused", 0), c.get("error", 0))
                for site, c in sorted(audit_summary.items())
            ],
            cls="audit",
        )
        report.add_text("From the sites' audit logs (every reply and refusal).", cls="note")


def _provenance_section(report: Report, prov: Provenance, result: EvaluationResult) -> None:
    report.start_section("provenance", "Provenance")
    rows: list[tuple[str, Any]] = [(f"Input: {k}", v) for k, v in prov.inputs.items()]
    rows += [(f"Column: {k}", v) for k, v in prov.columns.items() if v is not None]
    rows += [(f"Option: {k}", v) for k, v in prov.options.items()]
    rows += [
        ("Method", result.method),
        ("Confidence level", result.confidence_level),
        ("Seed", prov.seed),
        ("fedroc version", prov.version),
        ("Date (UTC)", prov.date),
        ("Command", prov.command),
    ]
    report.add_table(["Item", "Value"], rows, cls="provenance")


def comparison_report(
    reference: EvaluationResult,
    results: Sequence[EvaluationResult],
    *,
    provenance: Provenance | None = None,
    site_rows: Sequence[Mapping[str, Any]] | None = None,
    seed: int | None = None,
    title: str = "fedroc: every method beside the pooled reference",
) -> Report:
    """Several methods on the same sites beside the pooled reference (``fedroc demo``).

    The analyst of the demo holds the synthetic rows, so the pooled curve is drawn, labelled
    as the reference; each private method adds only the curve it released (none for mpc).

    Parameters
    ----------
    reference : EvaluationResult
        The pooled reference's result (method "pooled"), whose details hold the rows'
        curves.
    results : sequence of EvaluationResult
        The private methods' results on the same sites.
    provenance : Provenance, optional
        Inputs, options, seed and command line, shown in a provenance block when given.
    site_rows : sequence of mapping, optional
        Per-site ``{name, n, n_pos, auc}``, as in :func:`evaluation_report`.
    seed : int, optional
        Seed of the bootstrap band of the pooled ROC curve.
    title : str, default "fedroc: every method beside the pooled reference"
        Title of the document.

    Returns
    -------
    Report
        The document; ``Report.write(path)`` writes it as one HTML file.
    """
    report = evaluation_report(
        reference, provenance=None, site_rows=site_rows, seed=seed, title=title
    )
    report.start_section("methods", "Private methods beside the pooled reference")
    rows = []
    for r in results:
        eps = max(r.released.epsilon.values()) if r.released.epsilon else None
        rows.append(
            (
                r.method,
                r.auc,
                "not given by this method" if r.auc_ci is None else r.auc_ci,
                abs(r.auc - reference.auc) if math.isfinite(r.auc) else None,
                r.released.rounds,
                sum(r.released.bytes_received.values()),
                "none" if eps is None else eps,
            )
        )
    report.add_table(
        [
            "Method",
            "AUC",
            f"AUC {reference.confidence_level:.0%} CI",
            "Distance to the pooled AUC",
            "Rounds",
            "Bytes sent by the sites",
            "Largest epsilon spent by a site",
        ],
        rows,
        cls="methods",
    )
    curves = []
    silent = []
    for r in results:
        roc = getattr(r.details, "roc_points", None)
        if callable(roc):
            fpr, tpr = roc()
            if _drawable(fpr, tpr):
                curves.append((_auc_legend(f"{r.method} (released curve)", r), fpr, tpr))
                continue
        silent.append(r.method)
    fpr, tpr = reference.details.roc_points()
    report.add_figure(
        roc_figure(
            curves=curves,
            reference=(fpr, tpr),
            reference_label=_auc_legend("pooled rows (reference)", reference),
        ),
        "ROC curves the private methods released, beside the pooled reference.",
    )
    if silent:
        report.add_text(
            f"No curve from {', '.join(silent)}: these methods release no ROC curve.",
            cls="note",
        )
    for r in results:
        report.add_text(f"{r.method}: " + "; ".join(r.released.notes or ["no notes"]), cls="note")
    if provenance is not None:
        _provenance_section(report, provenance, reference)
    report.end_section()
    return report
