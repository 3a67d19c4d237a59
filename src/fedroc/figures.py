"""The papers' figures, reproduced by one command: ``fedroc figures --paper N --out DIR``.

A figure is a function ``make(out_dir, *, quick, seed) -> Path`` registered with
:func:`paper_figure` in the paper's module of :mod:`fedroc.experiments`;
:data:`FIGURE_MODULES` lists, per paper, the modules that register figures (imported only
when that paper's figures are asked for). Each file is named after the paper's figure
(``paper1_figure4.png``), and the figure's title says which figure of which paper it
reproduces.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fedroc.exceptions import InputError

__all__ = ["FIGURE_MODULES", "PaperFigure", "make_figures", "paper_figure", "paper_figures"]

PAPERS = {
    1: "Schalk et al., distributed ROC-GLM",
    2: "MIDRC, sequestered test data and Thresholdout_AUC",
    3: "Michael & Tian, population and personalized AUCs",
    4: "Unal et al., ppAURORA",
    5: "Xu & Cormode, federated ROC and PR curves",
}
# Modules that register each paper's figures (the experiments, a layer above the methods).
FIGURE_MODULES: dict[int, list[str]] = {paper: [] for paper in PAPERS}
FIGURE_MODULES[1].append("fedroc.experiments.rocglm")
FIGURE_MODULES[2].append("fedroc.experiments.sequester")
FIGURE_MODULES[3].append("fedroc.experiments.clustered")
FIGURE_MODULES[5].append("fedroc.experiments.histogram")

FigureFn = Callable[..., Path]


@dataclass(frozen=True)
class PaperFigure:
    """A registered figure of a paper and the function that draws it.

    Attributes
    ----------
    paper : int
        The paper's number (1-5, as in :data:`PAPERS`).
    figure : str
        The figure as the paper numbers it: ``"4"``, ``"6 and 8"``, ``"Table 1"``.
    title : str
        What the figure shows.
    make : callable
        ``make(path, *, quick, seed) -> Path`` writes the PNG (see :func:`paper_figure`).
    needs : str or None
        The optional extra of fedroc the figure needs (``"examples"`` for the GBSG2 use
        case), checked by ``fedroc figures`` before it draws anything.
    """

    paper: int
    figure: str  # as the paper numbers it: "4", "6 and 8", "Table 1"
    title: str
    make: FigureFn
    needs: str | None = None

    @property
    def filename(self) -> str:
        """File name of the PNG, e.g. ``paper1_figure4.png`` or ``paper5_figure6+8.png``."""
        tag = self.figure.lower().replace(" ", "").replace("and", "+")
        return f"paper{self.paper}_figure{tag}.png"


_FIGURES: list[PaperFigure] = []


def paper_figure(
    paper: int, figure: str, title: str, *, needs: str | None = None
) -> Callable[[FigureFn], FigureFn]:
    """Register ``make(path, *, quick, seed) -> Path`` as figure ``figure`` of ``paper``.

    ``make`` writes the figure to ``path`` (a PNG) and returns it; with ``quick`` it uses
    fewer replicates (for tests), and ``seed`` seeds every simulation it runs. ``needs``
    names the optional extra of fedroc it needs, if any.
    """
    if paper not in PAPERS:
        raise InputError(f"paper must be one of {sorted(PAPERS)}; got {paper!r}")

    def register(fn: FigureFn) -> FigureFn:
        if not any(f.paper == paper and f.figure == figure for f in _FIGURES):
            _FIGURES.append(PaperFigure(paper, figure, title, fn, needs))
        return fn

    return register


def paper_figures(paper: int) -> list[PaperFigure]:
    """Return the registered figures of one paper, in the order their modules register them."""
    if paper not in PAPERS:
        raise InputError(f"--paper must be one of {sorted(PAPERS)}; got {paper!r}")
    for module in FIGURE_MODULES[paper]:
        importlib.import_module(module)
    return [f for f in _FIGURES if f.paper == paper]


def make_figures(
    paper: int,
    out_dir: str | Path,
    *,
    quick: bool = False,
    seed: int = 0,
    progress: Callable[[int, int, PaperFigure], None] | None = None,
) -> list[tuple[PaperFigure, Path]]:
    """Write every registered figure of ``paper`` into ``out_dir``.

    ``progress(k, n, figure)`` is called as the k-th of n figures starts (from 1).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures = paper_figures(paper)
    if not figures:
        raise InputError(f"fedroc reproduces no figure of paper {paper} ({PAPERS[paper]})")
    made = []
    for k, f in enumerate(figures, 1):
        if progress is not None:
            progress(k, len(figures), f)
        made.append((f, f.make(out / f.filename, quick=quick, seed=seed)))
    return made
