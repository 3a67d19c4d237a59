"""The three sites' tables of the Flower deployment tests (deploy and stock)."""

from __future__ import annotations

from pathlib import Path

from fedroc.datasets import make_multisite

SIZES = (260, 180, 330)


def write_sites(root: Path) -> dict[str, Path]:
    """Write site1-site3 (``SIZES`` rows) as CSV files under ``root``; return their paths."""
    paths = {}
    for name, frame in make_multisite(SIZES, seed=21).items():
        paths[name] = root / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths
