"""Shared behaviour of result objects: readable repr, JSON-ready dicts, summaries."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any

import numpy as np


def jsonable(value: Any) -> Any:
    """Convert a value to plain JSON types: NaN and inf become None, tuples become lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_dict"):
            return value.to_dict()
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        # Numbers of a numeric array are plain Python numbers after tolist(); only NaN and
        # inf need replacing, element by element (the audit log converts every released
        # array, and the element-wise walk was a quarter of a federated evaluation's time).
        numeric = value.dtype.kind in "biu" or (
            value.dtype.kind == "f" and bool(np.isfinite(value).all())
        )
        if numeric and value.ndim:
            return value.tolist()
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value


def _short(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"array(shape={value.shape}, dtype={value.dtype})"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, tuple) and all(isinstance(v, float) for v in value):
        return "(" + ", ".join(f"{v:.6g}" for v in value) + ")"
    return repr(value)


class ResultMixin:
    """Mixin for frozen result dataclasses."""

    def __repr__(self) -> str:
        assert dataclasses.is_dataclass(self)
        parts = [
            f"{f.name}={_short(getattr(self, f.name))}" for f in dataclasses.fields(self) if f.repr
        ]
        return f"{type(self).__name__}({', '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        """Return the result as JSON-ready types (NaN as None, arrays as lists)."""
        assert dataclasses.is_dataclass(self)
        return {f.name: jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}


def format_table(rows: Iterable[tuple[str, Any]], title: str | None = None) -> str:
    """Format rows of (label, value) as the two-column plain-text table of ``summary()``."""
    lines = [title, "-" * len(title)] if title else []
    items = [(k, _fmt(v)) for k, v in rows]
    width = max((len(k) for k, _ in items), default=0)
    lines += [f"{k:<{width}}  {v}" for k, v in items]
    return "\n".join(lines)


def format_number(value: float, digits: int = 4) -> str:
    """Format a finite number to ``digits`` decimals, a small one to 3 significant digits.

    The rule of every table, ``summary()``'s and the CLI's (:func:`fedroc.cli._common.fmt`):
    to 4 decimals a p of 7.73e-05 read 0.0001, a delta of 0.00025 read 0.0003, and 1e-9 read
    0.0000.
    """
    if 0 < abs(value) < 10.0 ** (1 - digits):
        return f"{value:.3g}"
    return f"{value:.{digits}f}"


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (float, np.floating)):
        return "nan" if math.isnan(value) else format_number(float(value))
    if isinstance(value, tuple) and len(value) == 2:
        return f"[{_fmt(value[0])}, {_fmt(value[1])}]"
    return str(value)
