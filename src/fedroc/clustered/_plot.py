"""Confidence ellipses of (population AUC, personalized AUC), as in the paper's Figure 5."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fedroc.clustered._auc import ClusteredAUCResult


def ellipse_figure(
    result: ClusteredAUCResult,
    *,
    path: str | None = None,
    ax: Any = None,
    levels: tuple[float, ...] = (0.95, 0.99),
    title: str | None = None,
) -> Any:
    """Draw the ellipses of ``result`` at ``levels``; returns the Figure (saved if ``path``).

    The figure is a bare :class:`matplotlib.figure.Figure` drawn with the Agg canvas, so it
    needs no display and leaves pyplot's global state alone.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if ax is None:
        fig = Figure(figsize=(5, 5))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    styles = ["-", "--", ":", "-."]
    for k, level in enumerate(sorted(levels)):
        pts = result.ellipse(level)
        ax.plot(
            pts[:, 0],
            pts[:, 1],
            ls=styles[k % len(styles)],
            color="C0",
            lw=1.3,
            label=f"{level:.0%} confidence ellipse",
        )
    ax.plot(
        [result.population_auc], [result.personalized_auc], "o", color="C0", ms=4, label="estimate"
    )
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, label="theta12 = theta11")
    ax.axhline(0.5, color="grey", ls=":", lw=0.8)
    ax.axvline(0.5, color="grey", ls=":", lw=0.8)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("population AUC (theta12)")
    ax.set_ylabel("personalized AUC (theta11)")
    ax.set_title(title or f"Clustered AUCs, {result.n_clusters} clusters")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
