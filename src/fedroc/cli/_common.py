"""Output helpers shared by the commands: one JSON object on stdout with --json, readable
tables otherwise; logs and progress on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from fedroc._results import jsonable
from fedroc.data import Columns, SiteData, load_table
from fedroc.exceptions import InputError
from fedroc.metrics import CalibrationCurve

out = Console()
if not out.is_terminal:  # piped or captured: do not squeeze tables into 80 columns
    out = Console(width=120)
err = Console(stderr=True)


def emit_json(obj: Any) -> None:
    """Write exactly one JSON object to stdout."""
    sys.stdout.write(json.dumps(jsonable(obj), indent=2, allow_nan=False) + "\n")
    sys.stdout.flush()


def fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "nan" if value != value else f"{value:.{digits}f}"
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return f"[{fmt(value[0], digits)}, {fmt(value[1], digits)}]"
    return str(value)


def kv_table(title: str, rows: Sequence[tuple[str, Any]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value", justify="right")
    for key, value in rows:
        table.add_row(key, fmt(value))
    return table


def grid_table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    table = Table(title=title, title_justify="left")
    for i, h in enumerate(header):
        table.add_column(h, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*[fmt(c) for c in row])
    return table


def calibration_table(title: str, curve: CalibrationCurve) -> Table:
    rows = []
    for k in range(curve.n_bins):
        close = "]" if k == curve.n_bins - 1 else ")"
        label = f"[{curve.edges[k]:.1f}, {curve.edges[k + 1]:.1f}{close}"
        note = "withheld at a site" if curve.suppressed[k] else ""
        rows.append(
            (label, int(curve.count[k]), curve.mean_predicted[k], curve.observed_fraction[k], note)
        )
    return grid_table(title, ["bin", "n", "predicted", "observed", ""], rows)


def coerce_pos_label(value: str | None) -> Any:
    """Command-line pos_label: numbers become numbers, anything else stays a string."""
    if value is None:
        return None
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def parse_sites(specs: Sequence[str]) -> dict[str, Path]:
    sites: dict[str, Path] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise InputError(f"--site must look like NAME=PATH; got {spec!r}")
        if name in sites:
            raise InputError(f"--site {name!r} is given twice")
        sites[name] = Path(path)
    return sites


def load_site_data(paths: dict[str, Path], columns: Columns, pos_label: Any) -> dict[str, SiteData]:
    data = {}
    for name, path in paths.items():
        frame = load_table(path)
        data[name] = SiteData.from_frame(
            frame, columns, pos_label=pos_label, source=f"site {name!r} (file {str(path)!r})"
        )
    return data
