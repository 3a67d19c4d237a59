"""Figures without a display: every figure fedroc draws starts and ends here.

A figure is a bare :class:`matplotlib.figure.Figure` on its own Agg canvas, so it needs no
display and leaves pyplot's global state alone (nothing to close, nothing shared between
threads). Matplotlib is imported only when a figure is drawn: ``import fedroc`` and the
command line's help stay free of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["new_figure", "roc_axes", "save_figure"]


def new_figure(figsize: tuple[float, float]) -> Any:
    """Create a Figure of ``figsize`` inches on the Agg canvas (no display, no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def save_figure(
    fig: Any,
    path: str | Path,
    *,
    dpi: int = 100,
    rect: tuple[float, float, float, float] | None = None,
) -> Path:
    """Lay out ``fig`` (leaving ``rect`` of the canvas to its axes) and write it to ``path``."""
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=dpi)
    return Path(path)


def roc_axes(ax: Any, title: str, *, chance: bool = True) -> None:
    """Label ``ax`` as a ROC plot on [0, 1] x [0, 1] with ``title``; ``chance``: the diagonal."""
    if chance:
        ax.plot([0, 1], [0, 1], ls=":", color="grey", lw=0.8)
    ax.set(
        xlabel="false positive rate (1 - specificity)",
        ylabel="true positive rate (sensitivity)",
        title=title,
        xlim=(0, 1),
        ylim=(0, 1.01),
    )
