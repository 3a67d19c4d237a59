"""``fedroc figures``: the papers' figures that fedroc reproduces."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedroc.cli._common import emit_json, err, grid_table, out
from fedroc.cli._options import JsonOption
from fedroc.exceptions import InputError


def figures(
    paper: Annotated[int, typer.Option(help="Paper number, 1 to 5 (see README).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for the PNG files.")],
    quick: Annotated[
        bool, typer.Option("--quick", help="Fewer replicates: a quick look, not the paper's.")
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the simulations behind the figures.")] = 0,
    as_json: JsonOption = False,
) -> None:
    """Reproduce the figures of one paper, each file named and titled after its figure."""
    from fedroc.figures import PAPERS, make_figures

    if paper not in PAPERS:  # before the banner: an error is one line on stderr
        raise InputError(f"--paper must be one of {sorted(PAPERS)}; got {paper}")
    err.print(f"paper {paper}: {PAPERS[paper]}", highlight=False)
    made = make_figures(paper, out_dir, quick=quick, seed=seed)
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
