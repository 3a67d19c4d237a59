"""Paper 3's two views: confidence ellipses (Figure 5) and rug plots of clusters (Figure 1).

Every figure is a bare :class:`matplotlib.figure.Figure` drawn with the Agg canvas, so it
needs no display and leaves pyplot's global state alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedroc._plotting import new_figure
from fedroc._validation import check_binary
from fedroc.exceptions import InputError

if TYPE_CHECKING:
    from fedroc.methods.clustered._result import ClusteredAUCResult

__all__ = ["ellipse_figure", "new_figure", "rug_axes", "rug_clusters", "rug_figure"]


def ellipse_figure(
    result: ClusteredAUCResult,
    *,
    path: str | None = None,
    ax: Any = None,
    levels: tuple[float, ...] = (0.95, 0.99),
    title: str | None = None,
) -> Any:
    """Draw the ellipses of ``result`` at ``levels``; returns the Figure (saved if ``path``).

    Axes in the authors' order (``plot.auc.cluster`` of their R code, and Figure 5): the
    personalized AUC theta11 on the x-axis, the population AUC theta12 on the y-axis, the
    diagonal theta12 = theta11 and the lines at 1/2.
    """
    if ax is None:
        fig = new_figure((5, 5))
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    styles = ["-", "--", ":", "-."]
    for k, level in enumerate(sorted(levels)):
        pts = result.ellipse(level)  # columns (population, personalized)
        ax.plot(
            pts[:, 1],
            pts[:, 0],
            ls=styles[k % len(styles)],
            color="C0",
            lw=1.3,
            label=f"{level:.0%} confidence ellipse",
        )
    ax.plot(
        [result.personalized_auc], [result.population_auc], "o", color="C0", ms=4, label="estimate"
    )
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, label="theta12 = theta11")
    ax.axhline(0.5, color="grey", ls=":", lw=0.8)
    ax.axvline(0.5, color="grey", ls=":", lw=0.8)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("personalized AUC (theta11)")
    ax.set_ylabel("population AUC (theta12)")
    ax.set_title(title or f"Clustered AUCs, {result.n_clusters} clusters")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def rug_axes(
    ax: Any,
    y_true: ArrayLike,
    y_score: ArrayLike,
    cluster: ArrayLike,
    *,
    pos_label: Any = None,
    title: str | None = None,
    show: NDArray[np.int64] | None = None,
) -> None:
    """Draw the rug plot of Figure 1 on ``ax``.

    One row per cluster (in the order of their ids), controls drawn as ``|`` and cases as
    ``-``, and all clusters combined on the bottom row, below a line: a reader sees at once
    whether the cases sit to the right of the controls within each cluster (the
    personalized AUC) and in the combined row (the population AUC). ``show`` (positions in
    the sorted ids) limits the cluster rows to those clusters; the combined row keeps every
    row.
    """
    from fedroc.methods.clustered._pooled import encode_clusters

    y, s = check_binary(y_true, y_score, pos_label=pos_label)
    codes, ids = encode_clusters(cluster, y.size)
    # Row k + 1 for the k-th cluster drawn; -1 for a cluster left out.
    position = np.arange(ids.size)
    if show is not None:
        position = np.full(ids.size, -1)
        position[show] = np.arange(len(show))
        ids = ids[show]
    drawn = position[codes] >= 0
    rows = position[codes][drawn] + 1.0
    ys, ss = y[drawn], s[drawn]
    ax.scatter(ss[~ys], rows[~ys], marker="|", s=80, color="C0", label="control")
    ax.scatter(ss[ys], rows[ys], marker="_", s=80, color="C3", label="case")
    ax.scatter(s[~y], np.zeros(int((~y).sum())), marker="|", s=80, color="C0")
    ax.scatter(s[y], np.zeros(int(y.sum())), marker="_", s=80, color="C3")
    ax.axhline(0.5, color="black", lw=0.8)
    ax.set_ylim(-0.8, ids.size + 0.8)
    ax.set_yticks([0, *range(1, ids.size + 1)])
    ax.set_yticklabels(["all"] + [str(v) for v in ids], fontsize=6)
    ax.set_xlabel("predictor")
    ax.set_ylabel("clusters")
    if title:
        ax.set_title(title, fontsize=9)


#: Most clusters :func:`rug_figure` draws by default (one row each).
RUG_MAX_CLUSTERS = 60


def rug_figure(
    y_true: ArrayLike,
    y_score: ArrayLike,
    cluster: ArrayLike,
    *,
    path: str | None = None,
    pos_label: Any = None,
    title: str | None = None,
    max_clusters: int = RUG_MAX_CLUSTERS,
    sample: bool = False,
) -> Any:
    """Rug plot of every cluster and of the combined data (Figure 1's view).

    Returns the Figure (saved if ``path``). A row per cluster stays legible up to
    ``max_clusters`` clusters; with more it refuses, or with ``sample=True`` draws the rows
    of ``max_clusters`` clusters evenly spaced in the order of their ids (every cluster
    still in the combined row) and says so in the title.
    """
    y, _ = check_binary(y_true, y_score, pos_label=pos_label)
    show, total = rug_clusters(cluster, y.size, max_clusters, sample=sample)
    drawn = total if show is None else len(show)
    if show is not None:
        shown = f"{drawn} of {total} clusters (evenly spaced by id); bottom row: all {total}"
        title = f"{title}\n{shown}" if title else shown
    fig = new_figure((6, 1.2 + 0.25 * drawn + (0.3 if show is not None else 0.0)))
    ax = fig.add_subplot()
    rug_axes(ax, y_true, y_score, cluster, pos_label=pos_label, title=title, show=show)
    # Outside the axes: inside, at the upper left, it covered the top rows' lowest scores.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=7)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def rug_clusters(
    cluster: ArrayLike, n: int, max_clusters: int = RUG_MAX_CLUSTERS, *, sample: bool = False
) -> tuple[NDArray[np.int64] | None, int]:
    """Which clusters a rug plot draws a row for: ``(positions or None for all, total)``.

    Above ``max_clusters`` rows the plot is unreadable (1000 clusters: a 251-inch figure,
    5.5 s): refused, or with ``sample`` ``max_clusters`` positions evenly spaced over the
    sorted ids (deterministic, first and last included).
    """
    from fedroc.methods.clustered._pooled import encode_clusters

    if int(max_clusters) < 1:
        raise InputError(f"max_clusters must be at least 1; got {max_clusters!r}")
    _, ids = encode_clusters(cluster, n)
    if ids.size <= max_clusters:
        return None, int(ids.size)
    if not sample:
        raise InputError(
            f"a rug plot shows one row per cluster; got {ids.size} clusters, more than "
            f"max_clusters={max_clusters} (sample=True draws {max_clusters} of them)"
        )
    picked = np.unique(np.linspace(0, ids.size - 1, int(max_clusters)).round().astype(np.int64))
    return picked, int(ids.size)
