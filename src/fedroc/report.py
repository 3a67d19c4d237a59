"""HTML report: tables and figures in one self-contained file."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedroc.data import SiteData
from fedroc.metrics import CalibrationCurve, roc_curve

__all__ = ["Report", "calibration_figure", "roc_figure"]


def _matplotlib() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def roc_figure(
    pooled: SiteData | None = None,
    curves: Sequence[tuple[str, np.ndarray, np.ndarray]] = (),
    title: str = "ROC curve",
) -> Any:
    """ROC curves: the pooled empirical one (when the caller holds the rows) and others."""
    plt = _matplotlib()
    fig, ax = plt.subplots(figsize=(5, 5))
    if pooled is not None and 0 < pooled.n_pos < pooled.n:
        fpr, tpr, _ = roc_curve(pooled.label, pooled.score)
        ax.step(fpr, tpr, where="post", color="black", lw=1.2, label="pooled (empirical)")
    for label, fpr, tpr in curves:
        ax.plot(fpr, tpr, lw=1.5, label=label)
    ax.plot([0, 1], [0, 1], ls=":", color="grey", lw=0.8)
    ax.set(
        xlabel="false positive rate",
        ylabel="true positive rate",
        title=title,
        xlim=(0, 1),
        ylim=(0, 1.01),
    )
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def calibration_figure(
    curves: Sequence[tuple[str, CalibrationCurve]], title: str = "Calibration"
) -> Any:
    """Observed fraction against mean predicted probability, one line per curve."""
    plt = _matplotlib()
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], ls=":", color="grey", lw=0.8, label="perfect calibration")
    for label, curve in curves:
        ok = np.isfinite(curve.observed_fraction)
        ax.plot(
            curve.mean_predicted[ok], curve.observed_fraction[ok], marker="o", ms=3, label=label
        )
        sup = ok & curve.suppressed
        if sup.any():
            ax.scatter(
                curve.mean_predicted[sup],
                curve.observed_fraction[sup],
                facecolors="none",
                edgecolors="red",
                s=60,
                zorder=3,
                label=f"{label}: bin withheld at a site",
            )
    ax.set(
        xlabel="mean predicted probability",
        ylabel="observed fraction",
        title=title,
        xlim=(0, 1),
        ylim=(0, 1),
    )
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


class Report:
    """Collects sections and writes a single HTML file with embedded PNG figures."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._parts: list[str] = []

    def add_heading(self, text: str) -> None:
        self._parts.append(f"<h2>{html.escape(text)}</h2>")

    def add_text(self, text: str) -> None:
        self._parts.append(f"<p>{html.escape(text)}</p>")

    def add_table(self, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_cell(c))}</td>" for c in row) + "</tr>"
            for row in rows
        )
        self._parts.append(f"<table><tr>{head}</tr>{body}</table>")

    def add_figure(self, fig: Any, caption: str = "") -> None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        _matplotlib().close(fig)
        data = base64.b64encode(buf.getvalue()).decode()
        self._parts.append(
            f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(caption)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )

    def render(self) -> str:
        style = (
            "body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#222}"
            "table{border-collapse:collapse;margin:1em 0}"
            "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}"
            "th{background:#f3f3f3}figure{display:inline-block;margin:1em}"
        )
        return (
            f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(self.title)}"
            f"</title><style>{style}</style></head><body><h1>{html.escape(self.title)}</h1>"
            + "".join(self._parts)
            + "</body></html>"
        )

    def write(self, path: str | Path) -> Path:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(self.render(), encoding="utf-8")
        tmp.replace(out)  # never leave a half-written report behind
        return out


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return f"[{_cell(value[0])}, {_cell(value[1])}]"
    return str(value)
