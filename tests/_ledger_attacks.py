"""The attacks on what a site's ledger binds (review 13's H13-3), shared by the status test
and the ledger-copy test.

The rows digest: a site of 200 rows binds a digest of them at its first exact release
(``fedroc.sum`` here); who knows every row but one label finds the label among the two
candidates' digests wherever the bound value is shown.

The clear clustered cuts: a site that answers clustered histograms in the clear binds the
first of the analyst's edges above each group of its scores (``clustered:clear-edges``). One
request over 4097 edges (refused: bins under q) makes that list a reading of every score to
1/4096: a kept edge e marks the cell [e - 1/4096, e) as holding a score.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from fedroc.data import SiteData
from fedroc.federation import Federation
from fedroc.federation.site import Site

EDGES = np.linspace(0.0, 1.0, 4097)


def summed_sites(
    tmp_path: Path, seed0: int, trials: int
) -> Iterator[tuple[np.ndarray, np.ndarray, Path]]:
    """Yield each trial's labels, scores and audit folder, after one ``fedroc.sum``."""
    for seed in range(trials):
        rng = np.random.default_rng([seed0, seed])
        y, s = rng.random(200) < 0.4, rng.random(200)
        audit = tmp_path / str(seed)
        site = Site("north", SiteData.from_arrays(y, s), audit=audit / "north.jsonl")
        Federation.from_sites([site]).call("fedroc.sum")
        yield y, s, audit


def label_read(y: np.ndarray, s: np.ndarray, shown: str, digits: int | None = None) -> bool:
    """Whether ``shown`` holds the digest (its first ``digits``) of the true rows only,
    of the two candidates for row 0's label."""
    fits = []
    for label in (False, True):
        guess = y.copy()
        guess[0] = label
        fits.append(SiteData.from_arrays(guess, s).projection_digests[()][:digits] in shown)
    return fits == [not y[0], bool(y[0])]


def asked_sites(tmp_path: Path, seed0: int, trials: int) -> Iterator[tuple[np.ndarray, Path]]:
    """Yield each trial's scores and audit folder, after the one refused 4097-edge request."""
    from fedroc.exceptions import DisclosureError
    from fedroc.methods.clustered._site import FUNCTION_SUMMARY
    from fedroc.privacy import DisclosurePolicy

    for seed in range(trials):
        rng = np.random.default_rng([seed0, seed])
        y, s, c = rng.random(200) < 0.4, rng.random(200), rng.integers(0, 40, 200)
        audit = tmp_path / str(seed)
        site = Site("north", SiteData.from_arrays(y, s, c), audit=audit / "north.jsonl",
                    policy=DisclosurePolicy(clear_histograms=True))  # fmt: skip
        try:
            Federation.from_sites([site]).call(FUNCTION_SUMMARY, edges=EDGES)
        except DisclosureError:
            pass
        yield s, audit


def scores_read(scores: np.ndarray, shown: Iterable[float]) -> bool:
    """Whether ``shown`` edges mark exactly the cells of the scores (but the first and last
    cell, which no edge marks; the first inner edge is always kept)."""
    shown = list(shown)
    width = EDGES[1]
    cells = set(np.floor(scores / width).astype(int).tolist()) - {0, EDGES.size - 2}
    marked = {round(e / width) - 1 for e in shown} - {0}
    return bool(shown) and marked == cells
