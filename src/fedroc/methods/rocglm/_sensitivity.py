"""The l2-sensitivity heuristic on a model's features (paper 1, section 4.2 and footnote 1).

Paper 1 calibrates the Gaussian noise to the l2-sensitivity of the model,
``max over adjacent x, x' of |f(x) - f(x')|``, with inputs adjacent when their histogram
representations differ by one in l1 norm (footnote 1, after Dwork & Roth). The reference
code (dsBinVal's ``l2sens``) estimates it from a site's rows:

1. every numeric feature is cut into ``n_breaks`` cells (default: a third of the rows; R's
   ``hist`` breaks, equal-width here) and replaced by its cell index; every categorical one
   by its one-hot code;
2. the l1 distance between the rows' codes is computed; the smallest non-zero distance
   defines "adjacent" (1 when two rows sit in neighbouring cells of one feature);
3. the estimate is the largest score difference over adjacent pairs.

This is a heuristic, not a bound: it looks only at the rows at hand (a model can move the
score further between adjacent inputs that no two rows realise), it shrinks as the rows get
denser, and it is itself a function of two rows' scores. Use it to sanity-check a
sensitivity, not to certify one. :func:`~fedroc.methods.rocglm.score_sensitivity` is the
same recipe on the scores alone, for sites that hold nothing but scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedroc._results import ResultMixin, format_table
from fedroc.exceptions import InputError

__all__ = ["FeatureSensitivity", "feature_codes", "feature_sensitivity"]

# Rows per block of the pairwise distances: memory stays at block x n x features.
_BLOCK = 256


@dataclass(frozen=True, repr=False)
class FeatureSensitivity(ResultMixin):
    """Outcome of the feature heuristic.

    Attributes
    ----------
    sensitivity : float
        Largest score difference over adjacent pairs.
    distance : float
        The l1 distance that defined adjacency (1 when neighbouring cells exist).
    pairs : int
        Number of adjacent (unordered) pairs.
    pair : (int, int)
        Row indices of a pair attaining the maximum.
    n_breaks : int
    heuristic : bool
        Always True: this is not a bound (see the module docstring).
    """

    sensitivity: float
    distance: float
    pairs: int
    pair: tuple[int, int]
    n_breaks: int
    heuristic: bool = True

    SUMMARY_TITLE = "Feature sensitivity heuristic (paper 1, section 4.2)"
    # (label, attribute) of each row of the summary.
    SUMMARY_ROWS = (
        ("l2-sensitivity (heuristic, not a bound)", "sensitivity"),
        ("adjacency: l1 distance", "distance"),
        ("adjacent pairs", "pairs"),
        ("pair attaining it", "pair"),
        ("breaks per numeric feature", "n_breaks"),
    )

    def summary(self) -> str:
        """Format the heuristic's outcome (it is not a bound) as a table."""
        rows = [(label, getattr(self, name)) for label, name in self.SUMMARY_ROWS]
        return format_table(rows, title=self.SUMMARY_TITLE)


def _columns(features: Any) -> list[tuple[str, NDArray[Any], bool]]:
    """``(name, values, categorical)`` per column of a DataFrame or a 2-D array."""
    import pandas as pd

    if isinstance(features, pd.DataFrame):
        out = []
        for name in features.columns:
            col = features[name]
            categorical = not pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col)
            out.append((str(name), col.to_numpy(), bool(categorical)))
        return out
    arr = np.asarray(features)
    if arr.ndim != 2:
        raise InputError(f"features must be a 2-D array or a DataFrame; got shape {arr.shape}")
    categorical = arr.dtype.kind not in "iuf"
    return [(str(j), arr[:, j], categorical) for j in range(arr.shape[1])]


def feature_codes(
    features: Any, *, n_breaks: int | None = None, categorical: Sequence[str] = ()
) -> tuple[NDArray[np.float64], int]:
    """Code each row for the histogram: cell indices of numeric columns, one-hot codes.

    Numeric columns: equal-width cells, index ``floor((x - min) / width)`` clipped to
    ``n_breaks - 1``. Columns named in ``categorical`` (and non-numeric ones): one-hot.
    Returns the code matrix (n x codes) and the number of breaks used.
    """
    cols = _columns(features)
    if not cols:
        raise InputError("features has no columns")
    n = len(cols[0][1])
    breaks = max(1, n // 3) if n_breaks is None else int(n_breaks)
    if breaks < 1:
        raise InputError(f"n_breaks must be >= 1; got {n_breaks!r}")
    unknown = set(categorical) - {name for name, _, _ in cols}
    if unknown:
        raise InputError(f"categorical names unknown column(s) {sorted(unknown)}")
    codes = []
    for name, values, is_cat in cols:
        if is_cat or name in categorical:
            levels, inverse = np.unique(values.astype(str), return_inverse=True)
            codes.append(np.eye(levels.size)[inverse])
            continue
        v = values.astype(np.float64)
        if not np.isfinite(v).all():
            raise InputError(f"feature {name!r} holds missing or infinite values")
        lo, hi = float(v.min()), float(v.max())
        width = (hi - lo) / breaks if hi > lo else 1.0
        codes.append(np.minimum(np.floor((v - lo) / width), breaks - 1)[:, None])
    return np.hstack(codes).astype(np.float64), breaks


def feature_sensitivity(
    features: Any,
    scores: ArrayLike,
    *,
    n_breaks: int | None = None,
    categorical: Sequence[str] = (),
) -> FeatureSensitivity:
    """Heuristic l2-sensitivity of a model from its features (dsBinVal's ``l2sens``).

    Parameters
    ----------
    features : DataFrame or array of shape (n, p)
        The rows the model scored (at one site: this runs where the features are).
    scores : array of shape (n,)
        The model's scores of those rows.
    n_breaks : int, optional
        Cells per numeric feature; default a third of the rows (the reference client passes
        a third of the rows over all sites).
    categorical : sequence of str
        Numeric columns to one-hot code instead of binning.

    Returns
    -------
    FeatureSensitivity
        The largest score difference between adjacent rows, and the pair it came from.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0], [1.0], [2.0], [3.0]])  # cells 0, 1, 2, 2 with 3 breaks
    >>> res = feature_sensitivity(x, np.array([0.1, 0.2, 0.6, 0.65]), n_breaks=3)
    >>> round(res.sensitivity, 2), res.pair  # rows 1 and 3 are adjacent (cells 1 and 2)
    (0.45, (1, 3))
    """
    s = np.asarray(scores, np.float64).reshape(-1)
    z, breaks = feature_codes(features, n_breaks=n_breaks, categorical=categorical)
    if z.shape[0] != s.size:
        raise InputError(f"features have {z.shape[0]} rows but scores {s.size}")
    if s.size < 2:
        raise InputError("the sensitivity heuristic needs at least two rows")
    best_d = np.inf
    best = -1.0
    pairs = 0
    pair = (-1, -1)
    # Blocks of rows against all rows (upper triangle only): O(n^2) time, O(block n) memory.
    for start in range(0, s.size, _BLOCK):
        rows = np.arange(start, min(start + _BLOCK, s.size))
        dist = np.abs(z[rows, None, :] - z[None, :, :]).sum(axis=2)
        upper = np.arange(s.size)[None, :] > rows[:, None]
        dist = np.where(upper & (dist > 0), dist, np.inf)
        d = float(dist.min())
        if d > best_d or not np.isfinite(d):
            continue
        hit = dist == d
        diff = np.where(hit, np.abs(s[rows, None] - s[None, :]), -1.0)
        k = int(np.argmax(diff))
        if d < best_d:
            best_d, best, pairs = d, -1.0, 0
        pairs += int(hit.sum())
        if diff.flat[k] > best:
            best = float(diff.flat[k])
            pair = (int(rows[k // s.size]), int(k % s.size))
    if not np.isfinite(best_d):
        raise InputError("all rows have the same binned features: no adjacent pair")
    return FeatureSensitivity(best, best_d, pairs, pair, breaks)
