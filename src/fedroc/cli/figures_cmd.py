"""``fedroc figures``: the papers' figures that fedroc reproduces."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fedroc.cli._common import (
    ProgressLine,
    emit_json,
    err,
    grid_table,
    live_progress,
    make_dir,
    out,
    require_extra,
)
from fedroc.cli._options import JsonOption
from fedroc.exceptions import InputError

if TYPE_CHECKING:
    from fedroc.figures import PaperFigure


def figures(
    paper: Annotated[
        int,
        typer.Option(
            help="Paper: 1 ROC-GLM (Figures 3-8), 2 sequestration (3-5), 3 clustered AUCs "
            "(1, 4), 5 histograms (1-4); paper 4 (MPC) has no figure."
        ),
    ],
    out_dir: Annotated[
        Path, typer.Option("--out", help="Directory for the PNG files (created if missing).")
    ],
    quick: Annotated[
        bool, typer.Option("--quick", help="Fewer replicates: a quick look, not the paper's.")
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the simulations behind the figures.")] = 0,
    as_json: JsonOption = False,
) -> None:
    """Reproduce the figures of one paper, each file named and titled after its figure."""
    from fedroc.figures import PAPERS, make_figures, paper_figures

    if paper not in PAPERS:  # before the banner: an error is one line on stderr
        raise InputError(f"--paper must be one of {sorted(PAPERS)}; got {paper}")
    if not paper_figures(paper):  # before the banner too (it came after it, --out made)
        with_figures = [p for p in sorted(PAPERS) if paper_figures(p)]
        raise InputError(
            f"--paper {paper}: fedroc reproduces no figure of paper {paper} ({PAPERS[paper]}); "
            f"papers with figures: {', '.join(map(str, with_figures))}"
        )
    make_dir("--out", out_dir)
    # Before any figure: paper 1's GBSG2 figures needed scikit-survival, and a plain install
    # learnt it after figures 3-5 had run (6.5 minutes).
    extras: dict[str, list[str]] = {}
    for f in paper_figures(paper):
        if f.needs is not None:
            extras.setdefault(f.needs, []).append(f.figure)
    for extra, which in extras.items():
        numbers = ", ".join(which)
        require_extra(extra, command=f"fedroc figures --paper {paper} (Figures {numbers})")
    err.print(f"paper {paper}: {PAPERS[paper]}", highlight=False)
    with live_progress(err, ProgressLine(f"paper {paper}", "starting")) as show:

        def progress(k: int, n: int, figure: PaperFigure) -> None:
            if show is not None:
                show(f"Figure {figure.figure} ({k} of {n}): {figure.title}")

        made = make_figures(paper, out_dir, quick=quick, seed=seed, progress=progress)
    if as_json:
        emit_json(
            {
                "paper": paper,
                "figures": [
                    {"figure": f.figure, "title": f.title, "file": str(path)} for f, path in made
                ],
            }
        )
        return
    rows = [[f"Figure {f.figure}", f.title, str(path)] for f, path in made]
    out.print(grid_table(f"Paper {paper}: figures", ["figure", "what", "file"], rows))
