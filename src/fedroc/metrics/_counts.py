"""Class counts at decreasing thresholds: the one counting representation of fedroc.

Every ranking metric of a binary classifier is a function of how many positives and how
many negatives lie at each score level. :class:`ScoreCounts` holds exactly that, in the
layout of scikit-learn's ``_binary_clf_curve``: thresholds in decreasing order and, for each,
the (weighted) number of positives and negatives at that level. Level ``i`` holds the rows
with ``thresholds[i] <= score < thresholds[i - 1]`` (level 0: ``score >= thresholds[0]``),
so a level is either one distinct score (counts at each distinct score, the exact case) or
a bin whose lower edge is the threshold (counts at shared thresholds). Rows of one level
are treated as tied everywhere, as DeLong's kernel treats equal scores (1/2).

Counts at the same thresholds add up: a site's counts plus another site's counts are the
counts of their pooled rows. Secure aggregation, differential privacy and MPC can
therefore all work on this one representation, and every pooled metric of
:mod:`fedroc.metrics` is a thin layer on it.

The module also holds the placement machinery that needs the rows themselves:
:func:`beaten_counts` (per-row pair counts inside groups, for clustered data),
:func:`bin_index_edges` (fedroc's one binning rule) and :class:`PlacementSums`
(additive sums of placement values of several scores on the same rows: DeLong's paired
comparison from sums that sites can aggregate).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from fedroc._results import ResultMixin, format_table
from fedroc._validation import BoolArray, FloatArray, check_binary, check_confidence
from fedroc.exceptions import InputError, UndefinedMetricWarning, warn_user

if TYPE_CHECKING:  # the result types import this module at run time
    from fedroc.metrics._calibration import CalibrationCurve
    from fedroc.metrics._delong import DeLongResult, TiePattern

__all__ = [
    "EDGE_GRID_HEIGHT",
    "SCORE_TRANSFORMS",
    "SCORE_TRANSFORM_INVERSES",
    "BootstrapAUCResult",
    "BootstrapOptions",
    "OperatingPoint",
    "PlacementSums",
    "ScoreCounts",
    "TwoByTwo",
    "beaten_counts",
    "bin_edges",
    "bin_index_edges",
    "check_sample_weight",
    "grid_edges",
    "leaf_index",
    "on_grid",
    "proportion_ci",
]

ProportionCI = Literal["wilson", "clopper-pearson"]
#: The proportions of a 2x2 table: (the cell counted, the other cell of its margin).
CELLS: dict[str, tuple[str, str]] = {
    "sensitivity": ("tp", "fn"),
    "specificity": ("tn", "fp"),
    "ppv": ("tp", "fp"),
    "npv": ("tn", "fn"),
}
_PROPORTIONS = tuple(CELLS)


# -- validation ----------------------------------------------------------------------------
def check_sample_weight(sample_weight: ArrayLike | None, n: int) -> FloatArray | None:
    """Sample weights as float64 of length ``n``: finite and non-negative (or None)."""
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.ndim == 2 and 1 in w.shape:
        w = w.reshape(-1)
    if w.ndim != 1 or w.size != n:
        raise InputError(
            f"sample_weight must be one-dimensional with one weight per row ({n}); got shape "
            f"{w.shape}"
        )
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"sample_weight must be finite and non-negative; {int(bad.sum())} value(s) are "
            f"not, first at index {i}: {float(w[i])!r}"
        )
    return w


def _sum_by(index: NDArray[np.intp], weights: FloatArray, n: int) -> FloatArray:
    """``out[j] = sum of weights[index == j]`` for ``j < n`` (np.bincount, typed)."""
    return np.asarray(np.bincount(index, weights=weights, minlength=n), dtype=np.float64)


def _warn(message: str) -> None:
    warn_user(message, UndefinedMetricWarning)


# -- the one sort --------------------------------------------------------------------------
def _runs(a: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Distinct values of a sorted array and how often each occurs."""
    new = np.empty(a.size, dtype=bool)
    new[:1] = True
    np.not_equal(a[1:], a[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    return a[starts], np.diff(starts, append=a.size).astype(np.float64)


def _heavy_ties(a: FloatArray, window: int = 4096) -> bool:
    """Whether a sorted array repeats its values a lot (judged on a window in its middle).

    Only chooses between two exact ways of merging the classes (rows or distinct values).
    """
    mid = a[max(0, a.size // 2 - window // 2) :][:window]
    return bool(mid.size >= 64 and np.count_nonzero(mid[1:] != mid[:-1]) < mid.size // 8)


def _merge_levels(y: BoolArray, s: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Distinct scores (decreasing) with the number of positives and negatives at each.

    Each class is sorted on its own (numpy's vectorized quicksort) and the two sorted runs
    are merged by a stable argsort, which timsort does in linear time: faster than one
    argsort of all rows. With many ties the classes' distinct values are merged instead of
    their rows. Gathering through the reversed merge order gives every array in decreasing
    order of score, contiguous. This is the hot path of every pooled metric, so it makes as
    few passes over the rows as it can.
    """
    neg = s[~y]
    neg.sort()
    pos = s[y]
    pos.sort()
    if _heavy_ties(neg) or _heavy_ties(pos):
        (neg, neg_count), (pos, pos_count) = _runs(neg), _runs(pos)
        count = np.concatenate([neg_count, pos_count])
    else:
        count = None
    both = np.concatenate([neg, pos])
    order = np.argsort(both, kind="stable")[::-1]
    values = both[order]
    n = values.size
    is_pos = order >= neg.size
    new = np.empty(n, dtype=bool)
    new[:1] = True
    np.not_equal(values[1:], values[:-1], out=new[1:])
    if count is None and np.count_nonzero(new) == n:  # no ties: one row per level
        pos_level = is_pos.astype(np.float64)
        return values, pos_level, np.subtract(1.0, pos_level)
    starts = np.flatnonzero(new)
    if count is None:
        pos_level = np.add.reduceat(is_pos, starts, dtype=np.float64)
        size = np.diff(starts, append=n).astype(np.float64)
    else:
        merged = count[order]
        pos_level = np.add.reduceat(np.where(is_pos, merged, 0.0), starts)
        size = np.add.reduceat(merged, starts)
    return values[starts], pos_level, size - pos_level


def _sort_levels(
    y: BoolArray, key: NDArray[Any], w: FloatArray | None
) -> tuple[NDArray[Any], FloatArray, FloatArray, NDArray[np.intp]]:
    """Distinct keys (increasing), (weighted) class counts at each, and each row's level."""
    order = np.argsort(key)
    k = key[order]
    new = np.empty(k.size, dtype=bool)
    new[:1] = True
    np.not_equal(k[1:], k[:-1], out=new[1:])
    level_sorted = np.cumsum(new) - 1
    inverse = np.empty(k.size, dtype=np.intp)
    inverse[order] = level_sorted
    n_levels = int(level_sorted[-1]) + 1 if k.size else 0
    yw = y.astype(np.float64) if w is None else np.where(y, w, 0.0)
    nw = (~y).astype(np.float64) if w is None else np.where(y, 0.0, w)
    pos = _sum_by(inverse, yw, n_levels)
    neg = _sum_by(inverse, nw, n_levels)
    return k[new], pos, neg, inverse


def _twice_beats(
    pos: FloatArray,
    neg: FloatArray,
    group_first: NDArray[np.intp] | None = None,
    group_last: NDArray[np.intp] | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Twice the pairs each level's rows win, ties 1/2, levels in decreasing score order.

    A positive at level i beats the negatives below i and half of those at i:
    ``2 * neg_below + neg``; a negative at level i is beaten by the positives above and half
    of those at i: ``2 * pos_above + pos``. Twice the counts stay whole numbers for whole
    counts, so the halves are exact until the final division. With ``group_first`` and
    ``group_last`` (first and last level of each level's group) only levels of the same
    group are compared.
    """
    cum_neg = np.cumsum(neg)
    pos_above = np.cumsum(pos)
    pos_above -= pos
    if group_first is None or group_last is None:
        # The running sum's own total, so that the lowest level has exactly none below.
        neg_below = cum_neg[-1] - cum_neg
    else:
        neg_below = cum_neg[group_last] - cum_neg
        pos_above -= pos_above[group_first]
    neg_below *= 2.0
    neg_below += neg
    pos_above *= 2.0
    pos_above += pos
    return neg_below, pos_above


def beaten_counts(
    label: BoolArray,
    score: NDArray[Any],
    group: NDArray[np.int64] | None = None,
    *,
    weight: FloatArray | None = None,
) -> FloatArray:
    """For each row, the rows of the other class in its group that it beats (ties 1/2).

    A positive counts the negatives of its group with a lower score plus half of those with
    an equal score; a negative counts the positives with a higher score plus half of the
    equal ones. Summed over the positives (or the negatives) of a group this is the group's
    Mann-Whitney count. One sort by (group, score), then running class counts per level:
    no loop over pairs or groups.

    Parameters
    ----------
    label : ndarray of bool, shape (n,)
    score : ndarray, shape (n,)
        Scores; with ``group``, integer ranks (only order and ties matter).
    group : ndarray of int, shape (n,), optional
        Non-negative group codes; None compares every row with every other.
    weight : ndarray of float, shape (n,), optional
        Each beaten row counts with its weight (``sum_k w_k psi``) instead of 1.

    Returns
    -------
    ndarray of float64, shape (n,)

    Examples
    --------
    >>> beaten_counts(np.array([True, False, True]), np.array([0.9, 0.5, 0.5])).tolist()
    [1.0, 1.5, 0.5]
    """
    if label.size == 0:
        return np.zeros(0)
    if group is None:
        values, pos, neg, inverse = _sort_levels(label, score, weight)
        twice_pos, twice_neg = _twice_beats(pos[::-1], neg[::-1])
    else:
        rank = np.asarray(score, dtype=np.int64)
        width = int(rank.max()) + 1
        # One integer key orders by group, then score; int64 holds n_groups * n_ranks.
        key = group.astype(np.int64) * width + rank
        values, pos, neg, inverse = _sort_levels(label, key, weight)
        # Levels from the highest key down: each group's levels are contiguous.
        level_group = (values // width)[::-1]
        new = np.r_[True, level_group[1:] != level_group[:-1]]
        firsts = np.flatnonzero(new)
        lasts = np.r_[firsts[1:], level_group.size] - 1
        gid = np.cumsum(new) - 1
        twice_pos, twice_neg = _twice_beats(pos[::-1], neg[::-1], firsts[gid], lasts[gid])
    level = twice_pos.size - 1 - inverse  # decreasing order
    return np.where(label, twice_pos[level], twice_neg[level]) / 2.0


# Shared bin edges lie on the grid of 2^EDGE_GRID_HEIGHT equal cells of their range: the
# leaves of the histogram method's default tree (binary, 4096 leaves), so that every exact
# partition a site sums securely nests in one grid (see bin_edges).
EDGE_GRID_HEIGHT = 12


def bin_edges(n_bins: int) -> FloatArray:
    """Return ``n_bins + 1`` edges from 0 to 1, equidistant on the grid of 2^-12.

    The edges ``k / n_bins`` rounded to the nearest multiple of ``2**-EDGE_GRID_HEIGHT``
    (at most 2^-13 away; unchanged when ``n_bins`` is a power of 2). A site sums all its
    exact binned counts securely on one grid of equal cells, the histogram method's tree
    (:func:`fedroc.federation.basic.bind_tree`): decimal edges such as 0.1 fall inside the
    default tree's leaves, and the calibration bin minus the leaves was the rows between
    (R31). These edges are boundaries of that tree's leaves.

    Parameters
    ----------
    n_bins : int
        Number of bins, from 1 to ``2**EDGE_GRID_HEIGHT``.

    Returns
    -------
    ndarray of float64, shape (n_bins + 1,)
        ``0, round(4096 / n_bins) / 4096, ..., 1``, increasing.

    Raises
    ------
    InputError
        ``n_bins`` is not a positive integer of at most ``2**EDGE_GRID_HEIGHT``.

    Examples
    --------
    >>> bin_edges(4).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    >>> float(bin_edges(10)[1] * 4096)
    410.0
    """
    cells = 2**EDGE_GRID_HEIGHT
    if int(n_bins) != n_bins or not 1 <= n_bins <= cells:
        raise InputError(f"n_bins must be an integer from 1 to {cells}; got {n_bins!r}")
    return grid_edges(int(n_bins), 0.0, 1.0, EDGE_GRID_HEIGHT)


def grid_edges(n_bins: int, lo: float, hi: float, height: int) -> FloatArray:
    """Return the edges ``k / n_bins`` of ``[lo, hi]`` rounded to a grid of ``2**height`` cells.

    The one snapping rule of fedroc's shared edges (:func:`bin_edges` over [0, 1] at
    :data:`EDGE_GRID_HEIGHT`, the clustered method's edges over a score range): each edge
    is ``lo + (hi - lo) * (c / 2**height)`` for an integer ``c``, the formula by which
    :func:`on_grid` (and so a site) tells a cell boundary, so that the two agree to the bit.

    Parameters
    ----------
    n_bins : int
        Number of bins, from 1 to ``2**height`` (not checked here).
    lo, hi : float
        The range, ``lo < hi``.
    height : int
        The grid has ``2**height`` equal cells.

    Returns
    -------
    ndarray of float64, shape (n_bins + 1,)
        Increasing edges from ``lo`` to ``hi``.

    Examples
    --------
    >>> grid_edges(3, 0.0, 1.0, 2).tolist()
    [0.0, 0.25, 0.75, 1.0]
    """
    cells = 2**height
    c = np.rint(np.linspace(0.0, 1.0, n_bins + 1) * cells)
    return lo + (hi - lo) * (c / cells)


def on_grid(edges: ArrayLike, lo: float, hi: float, cells: int) -> bool:
    """Tell whether every edge is a boundary of ``cells`` equal cells of ``[lo, hi]``, to the bit.

    A boundary is ``lo + (hi - lo) * (c / cells)`` for an integer ``c``, computed so: an
    edge a hair off one would split a cell at the rows on it (R41), and a tolerance in cells
    is a wide one over a wide range (R42).

    Parameters
    ----------
    edges : array-like of float
        The edges to check.
    lo, hi : float
        The range, ``lo < hi``.
    cells : int
        The number of equal cells of the range.

    Returns
    -------
    bool
        True when every edge is a cell boundary.

    Examples
    --------
    >>> on_grid([0.0, 0.25, 1.0], 0.0, 1.0, 4), on_grid([0.1], 0.0, 1.0, 4096)
    (True, False)
    """
    e = np.asarray(edges, dtype=np.float64)
    c = np.rint((e - lo) / (hi - lo) * cells)
    return bool(np.array_equal(e, lo + (hi - lo) * (c / cells)))


#: Public monotone maps of the real line onto (0, 1), applied to scores before they are
#: binned over a range (the histogram method's ``score_transform``): ranks, hence ROC and
#: PR, survive.
SCORE_TRANSFORMS: dict[str, Callable[[FloatArray], FloatArray]] = {
    "logistic": lambda s: 1.0 / (1.0 + np.exp(-s)),
    "arctan": lambda s: 0.5 + np.arctan(s) / np.pi,
}
#: Their inverses, from (0, 1) back onto the scores' own scale.
SCORE_TRANSFORM_INVERSES: dict[str, Callable[[FloatArray], FloatArray]] = {
    "logistic": lambda u: np.log(u) - np.log1p(-u),
    "arctan": lambda u: np.tan(np.pi * (u - 0.5)),
}


def leaf_index(
    scores: FloatArray, n_leaves: int, lo: float = 0.0, hi: float = 1.0
) -> NDArray[np.int64]:
    """Leaf of each score: ``[e_k, e_(k+1))`` with ``e_k = lo + (hi - lo) * (k / n_leaves)``.

    The last leaf is closed (it holds ``hi``), the rule of :func:`bin_index_edges`.
    Computed arithmetically and then corrected against the edges, so it equals the binary
    search on the edges without its cost. The edges are those of :func:`on_grid` and
    :func:`grid_edges`, to the bit: ``k / n`` is one correctly rounded quotient, so a
    coarser level's edge ``j / (n / m)`` is its leaves' edge ``(j m) / n`` whatever ``n``.
    ``linspace`` (``k * ((hi - lo) / n) + lo``) agrees with them only for ``n`` a power of
    2: over 10 leaves of [0, 1] its edge 3 is 0.30000000000000004, the 10-bin joint grid's
    and 100 leaves' edge 0.3, and the rows on 0.3 fell between (R44).

    Parameters
    ----------
    scores : ndarray of float, shape (n,)
        Scores inside ``[lo, hi]`` (not checked here).
    n_leaves : int
        Number of leaves: equal cells of ``[lo, hi]``.
    lo, hi : float, default 0.0 and 1.0
        The public score range ``[lo, hi]``.

    Returns
    -------
    ndarray of int64, shape (n,)
        Leaf of each score, from 0 to ``n_leaves - 1``.
    """
    edges = lo + (hi - lo) * (np.arange(n_leaves + 1) / n_leaves)
    k = ((scores - lo) * (n_leaves / (hi - lo))).astype(np.int64)
    np.clip(k, 0, n_leaves - 1, out=k)
    k -= scores < edges[k]
    k += (scores >= edges[k + 1]) & (k < n_leaves - 1)
    return k


def bin_index_edges(values: FloatArray, edges: FloatArray) -> NDArray[np.intp]:
    """Bin of each value among ``edges``: ``[e_l, e_(l+1))``, the last bin closed.

    fedroc's one binning rule: a value is in the bin of the largest lower edge not above it,
    which is also the level :class:`ScoreCounts` gives it with the lower edges as
    thresholds. Values below ``edges[0]`` get -1 and values above ``edges[-1]`` the last
    bin; callers that must refuse them check the range first.

    Parameters
    ----------
    values : ndarray of float, shape (n,)
        The values to bin.
    edges : ndarray of float, shape (n_bins + 1,)
        Increasing bin edges.

    Returns
    -------
    ndarray of intp, shape (n,)
        Bin of each value, from 0 to ``n_bins - 1`` (-1 below ``edges[0]``).
    """
    return np.minimum(np.searchsorted(edges, values, side="right") - 1, edges.size - 2)


# -- confidence intervals of proportions ---------------------------------------------------
def proportion_ci(
    successes: float,
    trials: float,
    confidence_level: float = 0.95,
    method: ProportionCI = "wilson",
) -> tuple[float, float]:
    """Two-sided interval for a binomial proportion ``successes / trials``.

    Parameters
    ----------
    successes, trials : float
        Whole numbers (counts of rows), ``0 <= successes <= trials``.
    confidence_level : float, default 0.95
    method : {"wilson", "clopper-pearson"}
        Wilson's score interval (Wilson 1927; Agresti & Coull 1998 recommend it) or the
        exact Clopper-Pearson interval (Clopper & Pearson 1934), which is conservative.

    Returns
    -------
    (low, high) : tuple of float
        NaN for ``trials == 0``.

    Examples
    --------
    >>> [round(v, 4) for v in proportion_ci(8, 10)]
    [0.4902, 0.9433]
    >>> [round(v, 4) for v in proportion_ci(8, 10, method="clopper-pearson")]
    [0.4439, 0.9748]
    """
    level = check_confidence(confidence_level)
    k, n = float(successes), float(trials)
    if k != round(k) or n != round(n) or not 0 <= k <= n:
        raise InputError(
            f"a binomial interval needs whole counts with 0 <= successes <= trials; got "
            f"successes={successes!r}, trials={trials!r} (weighted counts have no such "
            "interval)"
        )
    if n == 0:
        return (float("nan"), float("nan"))
    alpha = 1.0 - level
    if method == "wilson":
        z = float(stats.norm.ppf(1.0 - alpha / 2.0))
        centre = (k + z * z / 2.0) / (n + z * z)
        half = z / (n + z * z) * math.sqrt(k * (n - k) / n + z * z / 4.0)
        return (max(0.0, centre - half), min(1.0, centre + half))
    if method == "clopper-pearson":
        low = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2.0, k, n - k + 1))
        high = 1.0 if k == n else float(stats.beta.ppf(1.0 - alpha / 2.0, k + 1, n - k))
        return (low, high)
    raise InputError(f"method must be 'wilson' or 'clopper-pearson'; got {method!r}")


# -- results -------------------------------------------------------------------------------
class _Proportion:
    """A proportion of the cells of a :class:`TwoByTwo`, read like a property."""

    def __init__(self, what: str, note: str) -> None:
        hit, miss = CELLS[what]
        self.what = what
        self.__doc__ = f"``{hit} / ({hit} + {miss})``{'' if note[0] == ';' else ' '}{note}."

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Proportion: ...
    @overload
    def __get__(self, obj: TwoByTwo, owner: type | None = None) -> float: ...
    def __get__(self, obj: TwoByTwo | None, owner: type | None = None) -> _Proportion | float:
        if obj is None:
            return self
        return obj._ratio(*obj._proportion_counts(self.what))

    def __set__(self, obj: TwoByTwo, value: Any) -> None:
        raise AttributeError(f"{self.what} is computed from the table's cells")


class TwoByTwo:
    """The rates of a 2x2 table, for any result with the cells ``tp, fp, tn, fn``.

    A rate whose margin is empty (no positives, nothing predicted positive, ...) is NaN.

    Examples
    --------
    >>> op = OperatingPoint(0.5, tp=3, fp=1, tn=5, fn=1)
    >>> op.sensitivity, op.specificity, op.ppv, op.npv
    (0.75, 0.8333333333333334, 0.75, 0.8333333333333334)
    """

    tp: float
    fp: float
    tn: float
    fn: float

    @staticmethod
    def _ratio(a: float, b: float) -> float:
        return a / b if b > 0 else float("nan")

    def _proportion_counts(self, what: str) -> tuple[float, float]:
        """Return ``(numerator, denominator)`` of the proportion ``what`` (see :data:`CELLS`)."""
        if what not in CELLS:
            raise InputError(f"what must be one of {_PROPORTIONS}; got {what!r}")
        hit, miss = (getattr(self, cell) for cell in CELLS[what])
        return hit, hit + miss

    sensitivity = _Proportion("sensitivity", "(recall, true positive rate)")
    specificity = _Proportion("specificity", "(1 - false positive rate)")
    ppv = _Proportion("ppv", "(precision); NaN when nothing is predicted positive")
    npv = _Proportion("npv", "; NaN when nothing is predicted negative")

    @property
    def youden_j(self) -> float:
        """``sensitivity + specificity - 1``."""
        return self.sensitivity + self.specificity - 1.0


@dataclass(frozen=True, repr=False)
class OperatingPoint(TwoByTwo, ResultMixin):
    """A threshold and the 2x2 table it gives: predict positive when ``score >= threshold``.

    Attributes
    ----------
    threshold : float
        ``inf`` when nothing is predicted positive.
    tp, fp, tn, fn : float
        (Weighted) counts of true/false positives/negatives.
    criterion : str
        How the threshold was chosen ("threshold", "specificity >= 0.9", "youden", ...).

    Notes
    -----
    The intervals of :meth:`confidence_interval` are binomial intervals for a threshold
    fixed in advance. They do not account for (a) a threshold chosen on the same data
    (``at_specificity``, ``at_sensitivity``, ``youden``): the achieved specificity varies
    too, and Youden's maximum is optimistic; (b) PPV and NPV depending on the prevalence of
    the sample (only meaningful for a cohort, not a case-control sample); (c) rows that are
    not independent (several per patient). For (a) use a bootstrap over the whole selection:
    :meth:`ScoreCounts.sensitivity_at_specificity_ci` and
    :meth:`ScoreCounts.specificity_at_sensitivity_ci` re-choose the threshold in every
    replicate.
    """

    threshold: float
    tp: float
    fp: float
    tn: float
    fn: float
    criterion: str = "threshold"

    def confidence_interval(
        self,
        what: str = "sensitivity",
        confidence_level: float = 0.95,
        *,
        method: ProportionCI = "wilson",
    ) -> tuple[float, float]:
        """Binomial interval of one proportion at this (fixed) threshold.

        ``what`` is one of "sensitivity", "specificity", "ppv", "npv"; see the class notes
        for what the interval does not account for.
        """
        k, n = self._proportion_counts(what)
        return proportion_ci(k, n, confidence_level, method)

    def to_dict(self) -> dict[str, Any]:
        """Return the fields and the four proportions as JSON-ready types (NaN as None)."""
        out = super().to_dict()
        for name in _PROPORTIONS:
            value = getattr(self, name)
            out[name] = value if math.isfinite(value) else None
        return out

    def summary(self, confidence_level: float = 0.95) -> str:
        """Format the point as a table of its proportions with binomial intervals.

        Parameters
        ----------
        confidence_level : float, default 0.95
            Level of the Wilson intervals, shown only for whole (unweighted) counts.

        Returns
        -------
        str
        """
        rows: list[tuple[str, Any]] = [("threshold", self.threshold), ("criterion", self.criterion)]
        whole = all(float(v).is_integer() for v in (self.tp, self.fp, self.tn, self.fn))
        for name in _PROPORTIONS:
            value = getattr(self, name)
            ci = self.confidence_interval(name, confidence_level) if whole else None
            rows.append((name, f"{value:.4f}" + (f"  [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "")))
        return format_table(rows, title="Operating point")


@dataclass(frozen=True, repr=False)
class BootstrapAUCResult(ResultMixin):
    """AUC with a stratified bootstrap distribution (pROC's ``ci.auc(method="bootstrap")``).

    Attributes
    ----------
    auc : float
        AUC of the original rows.
    replicates : ndarray, shape (n_bootstraps,)
        AUC of each bootstrap sample (positives and negatives resampled separately).
    n_pos, n_neg : int
        Positives and negatives of the original rows (each replicate keeps both).
    confidence_level : float
        Level of :attr:`ci` and the default of :meth:`confidence_interval`.
    seed : int or None
        Seed of the bootstrap's generator; the same seed gives the same replicates.
    method : str
        How the interval is made, for reports.
    """

    auc: float
    replicates: FloatArray
    n_pos: int
    n_neg: int
    confidence_level: float = 0.95
    seed: int | None = None
    method: str = "bootstrap (stratified, percentile)"

    @property
    def se(self) -> float:
        """Standard deviation of the replicates (ddof 1, pROC's ``var(method="bootstrap")``)."""
        return float(np.std(self.replicates, ddof=1)) if self.replicates.size > 1 else math.nan

    @property
    def variance(self) -> float:
        """Variance of the replicates (``se ** 2``)."""
        return self.se**2

    @property
    def ci(self) -> tuple[float, float]:
        """Percentile interval at :attr:`confidence_level`."""
        return self.confidence_interval()

    def confidence_interval(self, confidence_level: float | None = None) -> tuple[float, float]:
        """Percentile interval: the replicates' (1 -+ level) / 2 quantiles (R's type 7)."""
        level = check_confidence(
            self.confidence_level if confidence_level is None else confidence_level
        )
        if self.replicates.size == 0 or not math.isfinite(self.auc):
            return (float("nan"), float("nan"))
        lo, hi = np.quantile(self.replicates, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
        return (float(lo), float(hi))

    def summary(self) -> str:
        """Format the AUC, its bootstrap SE and percentile interval as a table."""
        return format_table(
            [
                ("AUC", self.auc),
                ("SE (bootstrap)", self.se),
                (f"{self.confidence_level:.0%} CI (percentile)", self.confidence_interval()),
                ("bootstrap samples", int(self.replicates.size)),
                ("seed", self.seed),
                ("positives", self.n_pos),
                ("negatives", self.n_neg),
            ],
            title="AUC with stratified bootstrap confidence interval",
        )


# -- the representation --------------------------------------------------------------------
@dataclass(frozen=True, repr=False)
class ScoreCounts(ResultMixin):
    """(Weighted) class counts at decreasing thresholds; they add up across sites.

    Attributes
    ----------
    thresholds : ndarray of float64, shape (n_levels,)
        Strictly decreasing. Level ``i`` holds the rows with
        ``thresholds[i] <= score < thresholds[i - 1]`` (level 0: ``score >= thresholds[0]``).
    pos, neg : ndarray of float64, shape (n_levels,)
        Number (or total weight) of positives and negatives at each level.
    score_sum : ndarray of float64, shape (n_levels,), or None
        Sum of the (weighted) scores of each level's rows, for calibration. None when each
        level holds the single score of its threshold (counts at each distinct score); NaN
        where unknown.

    Notes
    -----
    Rows of one level count as tied (1/2 in the AUC, one point on the curves). With counts
    at each distinct score every metric is exact and equals scikit-learn's; with counts at
    shared thresholds (bins) the metrics are those of the scores replaced by their bin.

    Examples
    --------
    Counts at each distinct score, and the metrics on them:

    >>> c = ScoreCounts.from_scores([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    >>> c.thresholds.tolist(), c.pos.tolist(), c.neg.tolist()
    ([0.8, 0.4, 0.35, 0.1], [1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0])
    >>> c.auc()
    0.75
    >>> fpr, tpr, thr = c.roc()
    >>> fpr.tolist(), tpr.tolist()
    ([0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.5, 0.5, 1.0, 1.0])

    Two sites count at shared thresholds; their counts add up to those of the pooled rows:

    >>> edges = [0.75, 0.5, 0.25, 0.0]
    >>> a = ScoreCounts.from_scores([0, 1, 1], [0.1, 0.3, 0.9], thresholds=edges)
    >>> b = ScoreCounts.from_scores([0, 0, 1], [0.2, 0.6, 0.7], thresholds=edges)
    >>> (a + b).pos.tolist(), (a + b).neg.tolist()
    ([1.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.0, 2.0])
    >>> (a + b).auc() == ScoreCounts.from_scores(
    ...     [0, 1, 1, 0, 0, 1], [0.1, 0.3, 0.9, 0.2, 0.6, 0.7], thresholds=edges).auc()
    True
    """

    thresholds: FloatArray
    pos: FloatArray
    neg: FloatArray
    score_sum: FloatArray | None = None

    def __post_init__(self) -> None:
        t = np.ascontiguousarray(self.thresholds, dtype=np.float64)
        p = np.ascontiguousarray(self.pos, dtype=np.float64)
        q = np.ascontiguousarray(self.neg, dtype=np.float64)
        if t.ndim != 1 or p.shape != t.shape or q.shape != t.shape:
            raise InputError(
                "thresholds, pos and neg must be 1-d of equal length; got shapes "
                f"{t.shape}, {p.shape} and {q.shape}"
            )
        if t.size == 0:
            raise InputError("ScoreCounts needs at least one threshold")
        if np.isnan(t).any() or (t.size > 1 and not (np.diff(t) < 0).all()):
            raise InputError("thresholds must be strictly decreasing (and not NaN)")
        for name, arr in (("pos", p), ("neg", q)):
            if not np.isfinite(arr).all() or (arr < 0).any():
                raise InputError(f"{name} counts must be finite and non-negative")
        object.__setattr__(self, "thresholds", t)
        object.__setattr__(self, "pos", p)
        object.__setattr__(self, "neg", q)
        if self.score_sum is not None:
            ss = np.ascontiguousarray(self.score_sum, dtype=np.float64)
            if ss.shape != t.shape:
                raise InputError(f"score_sum must have shape {t.shape}; got {ss.shape}")
            object.__setattr__(self, "score_sum", ss)

    @classmethod
    def _trusted(
        cls,
        thresholds: FloatArray,
        pos: FloatArray,
        neg: FloatArray,
        score_sum: FloatArray | None = None,
    ) -> ScoreCounts:
        # Built by this module's own routines, valid by construction: skip the O(k) checks.
        self = object.__new__(cls)
        object.__setattr__(self, "thresholds", thresholds)
        object.__setattr__(self, "pos", pos)
        object.__setattr__(self, "neg", neg)
        object.__setattr__(self, "score_sum", score_sum)
        return self

    # -- constructors ----------------------------------------------------------------------
    @classmethod
    def from_scores(
        cls,
        y_true: ArrayLike,
        y_score: ArrayLike,
        *,
        thresholds: ArrayLike | None = None,
        sample_weight: ArrayLike | None = None,
        pos_label: Any = None,
    ) -> ScoreCounts:
        """Count the rows at each distinct score, or at shared thresholds.

        Parameters
        ----------
        y_true : array-like of shape (n,)
            Binary labels ({0, 1}, {-1, 1}, booleans, or any two values with ``pos_label``).
        y_score : array-like of shape (n,)
            Scores, higher means more likely positive.
        thresholds : array-like, optional
            Shared thresholds (any order, distinct). Each row is counted at the largest
            threshold not above its score; every score must be at or above the smallest
            threshold (pass ``-inf`` as one threshold to keep the rest). None: one level
            per distinct score (scores of zero-weight rows make no level, as in
            scikit-learn).
        sample_weight : array-like of shape (n,), optional
            Non-negative weights; the counts are then sums of weights.
        pos_label : optional
            The positive class, when the labels are not {0, 1} / {-1, 1} / booleans.

        Returns
        -------
        ScoreCounts
        """
        y, s = check_binary(y_true, y_score, pos_label=pos_label)
        w = check_sample_weight(sample_weight, y.size)
        if thresholds is not None:
            return cls._at_thresholds(y, s, w, thresholds)
        if w is None:
            return cls._trusted(*_merge_levels(y, s))
        keep = w != 0
        if not keep.any():
            raise InputError("sample_weight is zero for every row")
        y, s, w = y[keep], s[keep], w[keep]
        values, pos, neg, _ = _sort_levels(y, s, w)
        # Contiguous in decreasing order: reversed views slow down BLAS dot products.
        return cls._trusted(*(np.ascontiguousarray(a[::-1]) for a in (values, pos, neg)))

    @classmethod
    def _at_thresholds(
        cls, y: BoolArray, s: FloatArray, w: FloatArray | None, thresholds: ArrayLike
    ) -> ScoreCounts:
        t = np.asarray(thresholds, dtype=np.float64).reshape(-1)
        if t.size == 0 or np.isnan(t).any():
            raise InputError(f"thresholds must be a non-empty list of numbers; got {t!r}")
        inc = np.sort(t)
        if (np.diff(inc) == 0).any():
            raise InputError("thresholds must be distinct")
        idx = np.searchsorted(inc, s, side="right") - 1
        below = idx < 0
        if below.any():
            raise InputError(
                f"{int(below.sum())} score(s) lie below the smallest threshold {float(inc[0])!r} "
                f"(lowest score {float(s.min())!r}); add -inf as a threshold to count them"
            )
        level = inc.size - 1 - idx
        k = inc.size
        yw = y.astype(np.float64) if w is None else np.where(y, w, 0.0)
        nw = (~y).astype(np.float64) if w is None else np.where(y, 0.0, w)
        return cls._trusted(
            inc[::-1].copy(),
            _sum_by(level, yw, k),
            _sum_by(level, nw, k),
            _sum_by(level, s if w is None else s * w, k),
        )

    @classmethod
    def from_bins(
        cls,
        pos_counts: ArrayLike,
        neg_counts: ArrayLike,
        *,
        edges: ArrayLike | None = None,
        score_sum: ArrayLike | None = None,
    ) -> ScoreCounts:
        """Build counts from per-bin histograms in increasing score order (what sites release).

        Parameters
        ----------
        pos_counts, neg_counts : array-like of shape (n_bins,)
            Positives and negatives in each bin, bins in increasing order of score.
        edges : array-like of shape (n_bins + 1,), optional
            Bin edges; the thresholds are the lower edges. None: the bin index is the score.
        score_sum : array-like of shape (n_bins,), optional
            Sum of the scores in each bin (for :meth:`calibration`).

        Examples
        --------
        >>> c = ScoreCounts.from_bins([0, 1, 2], [2, 1, 0], edges=[0.0, 0.5, 0.8, 1.0])
        >>> c.thresholds.tolist(), c.pos.tolist()
        ([0.8, 0.5, 0.0], [2.0, 1.0, 0.0])
        """
        p = np.asarray(pos_counts, dtype=np.float64)
        q = np.asarray(neg_counts, dtype=np.float64)
        if p.shape != q.shape or p.ndim != 1:
            raise InputError(
                f"pos_counts and neg_counts must be 1-d of equal length; got shapes {p.shape} "
                f"and {q.shape}"
            )
        if (p < 0).any() or (q < 0).any():
            raise InputError("pos_counts and neg_counts must be non-negative")
        if edges is None:
            t = np.arange(p.size, dtype=np.float64)
        else:
            e = np.asarray(edges, dtype=np.float64)
            if e.shape != (p.size + 1,):
                raise InputError(
                    f"edges must have n_bins + 1 = {p.size + 1} values; got shape {e.shape}"
                )
            t = e[:-1]
        ss = (
            np.full(p.size, np.nan)
            if score_sum is None
            else np.asarray(score_sum, dtype=np.float64)
        )
        return cls(t[::-1], p[::-1], q[::-1], ss[::-1])

    def __add__(self, other: object) -> ScoreCounts:
        """Pool two sets of counts at the same thresholds by adding them level by level."""
        if not isinstance(other, ScoreCounts):
            return NotImplemented
        if self.thresholds.shape != other.thresholds.shape or not np.array_equal(
            self.thresholds, other.thresholds
        ):
            raise InputError(
                "only counts at the same thresholds add up; got "
                f"{self.thresholds.size} and {other.thresholds.size} thresholds that differ "
                "(count every site at shared thresholds)"
            )
        if self.score_sum is None and other.score_sum is None:
            ss = None
        else:
            ss = self.score_sums() + other.score_sums()
        return ScoreCounts._trusted(self.thresholds, self.pos + other.pos, self.neg + other.neg, ss)

    def __radd__(self, other: object) -> ScoreCounts:
        """Add to ``0`` as ``self``, so that ``sum(site_counts)`` pools a list of counts."""
        # sum() starts from 0.
        if isinstance(other, int) and other == 0:
            return self
        return self.__add__(other)

    # -- totals ----------------------------------------------------------------------------
    @property
    def n_levels(self) -> int:
        """Number of thresholds (levels)."""
        return int(self.thresholds.size)

    @cached_property
    def n_pos(self) -> float:
        """Total (weight of) positives."""
        return float(self.pos.sum())

    @cached_property
    def n_neg(self) -> float:
        """Total (weight of) negatives."""
        return float(self.neg.sum())

    @property
    def tps(self) -> FloatArray:
        """Positives with ``score >= thresholds[i]`` (scikit-learn's ``tps``)."""
        return np.cumsum(self.pos)

    @property
    def fps(self) -> FloatArray:
        """Negatives with ``score >= thresholds[i]`` (scikit-learn's ``fps``)."""
        return np.cumsum(self.neg)

    def score_sums(self) -> FloatArray:
        """Sum of the scores at each level (``thresholds * count`` for exact counts)."""
        if self.score_sum is None:
            return self.thresholds * (self.pos + self.neg)
        return self.score_sum

    def is_whole(self) -> bool:
        """Tell whether every count is a whole number (unweighted rows)."""
        return bool(
            np.array_equal(self.pos, np.round(self.pos))
            and np.array_equal(self.neg, np.round(self.neg))
        )

    def _defined(self, what: str, *, need_neg: bool = True) -> bool:
        p, n = self.n_pos, self.n_neg
        if p > 0 and (n > 0 or not need_neg):
            return True
        only = "negative" if p <= 0 else "positive"
        _warn(f"only {only} samples in y_true: {what} is undefined and returned as NaN")
        return False

    # -- curves ----------------------------------------------------------------------------
    def roc(self, *, drop_intermediate: bool = True) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Receiver operating characteristic curve, as :func:`sklearn.metrics.roc_curve`.

        Returns
        -------
        fpr, tpr : ndarray of float64, shape (n_points,)
            False and true positive rates at ``score >= thresholds[i]``; from (0, 0) to
            (1, 1). NaN for a class without rows (with a warning).
        thresholds : ndarray of float64, shape (n_points,)
            Decreasing; the first is ``inf``.
        """
        fps, tps, thresholds = self.fps, self.tps, self.thresholds
        if drop_intermediate and fps.size > 2:
            # scikit-learn's rule: drop points collinear with their neighbours.
            keep = np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True]
            fps, tps, thresholds = fps[keep], tps[keep], thresholds[keep]
        fps = np.r_[0.0, fps]
        tps = np.r_[0.0, tps]
        thresholds = np.r_[np.inf, thresholds]
        self._defined("the ROC curve")
        fpr = fps / fps[-1] if fps[-1] > 0 else np.full(fps.shape, np.nan)
        tpr = tps / tps[-1] if tps[-1] > 0 else np.full(tps.shape, np.nan)
        return fpr, tpr, thresholds

    def _pr_points(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(precision, recall, thresholds) at each level with a prediction, decreasing."""
        tps, fps, thresholds = self.tps, self.fps, self.thresholds
        # Levels above every row predict nothing: no point of the curve (exact counts have
        # none; shared thresholds may).
        first = int(np.argmax(tps + fps > 0)) if (tps + fps)[-1] > 0 else tps.size
        tps, fps, thresholds = tps[first:], fps[first:], thresholds[first:]
        precision = tps / (tps + fps)
        recall = tps / tps[-1] if tps.size and tps[-1] > 0 else np.ones(tps.shape)
        return precision, recall, thresholds

    def pr(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Precision-recall curve, as :func:`sklearn.metrics.precision_recall_curve`.

        Returns
        -------
        precision, recall : ndarray of float64, shape (n_thresholds + 1,)
            In order of increasing threshold; the last point is (recall 0, precision 1).
            Without positives recall is 1 at every threshold (with a warning).
        thresholds : ndarray of float64, shape (n_thresholds,)
            Increasing.
        """
        if self.n_pos <= 0:
            _warn("no positive samples in y_true: recall is set to 1 for every threshold")
        precision, recall, thresholds = self._pr_points()
        return np.r_[precision[::-1], 1.0], np.r_[recall[::-1], 0.0], thresholds[::-1]

    # -- areas -----------------------------------------------------------------------------
    def twice_beats(self) -> tuple[FloatArray, FloatArray]:
        """Twice the (weighted) pairs a row of each level wins, ties 1/2.

        Returns
        -------
        pos_wins : ndarray, shape (n_levels,)
            For a positive at level i, ``2 * negatives below + negatives at i``.
        neg_losses : ndarray, shape (n_levels,)
            For a negative at level i, ``2 * positives above + positives at i``.
        """
        return _twice_beats(self.pos, self.neg)

    def _twice_u(self) -> float:
        # sum_i pos_i (2 neg_below_i + neg_i) with neg_below = N - cum_neg: two dot
        # products, no per-level array beyond the running sum.
        cum_neg = np.cumsum(self.neg)
        total_neg, n_pos = float(cum_neg[-1]), self.n_pos
        below = total_neg * n_pos - float(np.dot(self.pos, cum_neg))
        return 2.0 * below + float(np.dot(self.pos, self.neg))

    def mann_whitney(self) -> float:
        """(Weighted) pairs (positive, negative) ordered correctly, ties counted 1/2."""
        return self._twice_u() / 2.0

    def tied_pairs(self) -> float:
        """(Weighted) pairs (positive, negative) at the same level."""
        return float(np.dot(self.pos, self.neg))

    def auc(self, *, max_fpr: float | None = None) -> float:
        """Area under the ROC curve: the Mann-Whitney statistic, ties counted 1/2.

        With ``max_fpr`` the McClish-standardised partial area up to that false positive
        rate (as :func:`sklearn.metrics.roc_auc_score`): 0.5 for chance, 1 for perfect.
        NaN (with a warning) when a class has no rows.

        Examples
        --------
        >>> c = ScoreCounts.from_scores([0, 0, 1, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.2, 0.9])
        >>> round(c.auc(), 4), round(c.auc(max_fpr=0.5), 4)
        (0.8889, 0.8519)
        """
        if max_fpr is not None and not 0 < max_fpr <= 1:
            raise InputError(f"max_fpr must lie in (0, 1]; got {max_fpr!r}")
        if not self._defined("the AUC"):
            return float("nan")
        if max_fpr is not None and max_fpr != 1:
            return self._partial_auc(max_fpr)
        return self._twice_u() / (2.0 * self.n_pos * self.n_neg)

    def _partial_auc(self, max_fpr: float) -> float:
        # scikit-learn's _binary_roc_auc_score: cut the curve at max_fpr (linear
        # interpolation), then McClish's standardisation (McClish 1989).
        fpr, tpr, _ = self.roc()
        stop = int(np.searchsorted(fpr, max_fpr, "right"))
        x_interp = [fpr[stop - 1], fpr[stop]]
        y_interp = [tpr[stop - 1], tpr[stop]]
        tpr = np.append(tpr[:stop], np.interp(max_fpr, x_interp, y_interp))
        fpr = np.append(fpr[:stop], max_fpr)
        partial = float(np.trapezoid(tpr, fpr))
        min_area = 0.5 * max_fpr**2
        max_area = max_fpr
        return 0.5 * (1 + (partial - min_area) / (max_area - min_area))

    def average_precision(self) -> float:
        """Step-wise ``sum_k (R_k - R_(k-1)) P_k`` (scikit-learn's); NaN without positives."""
        if self.n_pos <= 0:
            self._defined("average precision", need_neg=False)
            return float("nan")
        precision, recall, _ = self._pr_points()
        return float(max(0.0, np.sum(np.diff(np.r_[0.0, recall]) * precision)))

    def pr_auc(self) -> float:
        """Area under the PR curve by trapezoids.

        Trapezoids over the points (recall, precision), starting at (0, 1); NaN without positives.
        Equal to ``sklearn.metrics.auc(recall, precision)`` on scikit-learn's PR curve and to
        ppAURORA's tie-aware AUPR.
        """
        if self.n_pos <= 0:
            self._defined("the PR-AUC", need_neg=False)
            return float("nan")
        precision, recall, _ = self._pr_points()
        return float(np.trapezoid(np.r_[1.0, precision], np.r_[0.0, recall]))

    # -- DeLong ----------------------------------------------------------------------------
    def placements(self) -> tuple[FloatArray, FloatArray]:
        """Placement value of a row at each level (DeLong et al. 1988), ties 1/2.

        Returns
        -------
        v10 : ndarray, shape (n_levels,)
            For a positive at level i: fraction of negatives below it (ties 1/2).
        v01 : ndarray, shape (n_levels,)
            For a negative at level i: fraction of positives above it (ties 1/2).
        """
        twice_pos, twice_neg = self.twice_beats()  # fresh arrays: divide in place
        with np.errstate(invalid="ignore", divide="ignore"):
            twice_pos /= 2.0 * self.n_neg
            twice_neg /= 2.0 * self.n_pos
        return twice_pos, twice_neg

    def level_of(self, score: ArrayLike) -> NDArray[np.intp]:
        """Level of each score: the largest threshold not above it (fedroc's binning rule)."""
        s = np.asarray(score, dtype=np.float64)
        inc = self.thresholds[::-1]
        idx = np.searchsorted(inc, s, side="right") - 1
        if (idx < 0).any():
            raise InputError(
                f"{int((idx < 0).sum())} score(s) lie below the smallest threshold "
                f"{float(inc[0])!r}"
            )
        return inc.size - 1 - idx

    def below_and_at(
        self, score: ArrayLike
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Count each class strictly below and exactly at each value, each level as one score.

        For counts at each distinct score (one value per level) this is exact for any value,
        counted or not: the empirical distribution functions of both classes.

        Returns
        -------
        pos_below, pos_at, neg_below, neg_at : ndarray, shape of ``score``

        Examples
        --------
        >>> c = ScoreCounts.from_scores([0, 0, 1, 1], [0.1, 0.4, 0.4, 0.8])
        >>> [a.tolist() for a in c.below_and_at([0.4, 0.5])]
        [[0.0, 1.0], [1.0, 0.0], [1.0, 2.0], [1.0, 0.0]]
        """
        x = np.asarray(score, dtype=np.float64)
        inc = self.thresholds[::-1]
        pos_inc, neg_inc = self.pos[::-1], self.neg[::-1]
        cum_pos = np.r_[0.0, np.cumsum(pos_inc)]
        cum_neg = np.r_[0.0, np.cumsum(neg_inc)]
        i = np.searchsorted(inc, x, side="left")  # levels strictly below x
        j = np.minimum(i, inc.size - 1)
        at = (i < inc.size) & (inc[j] == x)
        return (
            cum_pos[i],
            np.where(at, pos_inc[j], 0.0),
            cum_neg[i],
            np.where(at, neg_inc[j], 0.0),
        )

    def placement_of(self, score: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """DeLong placement of arbitrary values against counts at each distinct score.

        Returns
        -------
        v10 : ndarray
            ``(negatives below + negatives at / 2) / n_neg``: a positive's placement.
        v01 : ndarray
            ``(positives above + positives at / 2) / n_pos``: a negative's placement.
        """
        pos_below, pos_at, neg_below, neg_at = self.below_and_at(score)
        p, n = self.n_pos, self.n_neg
        with np.errstate(invalid="ignore", divide="ignore"):
            return (neg_below + neg_at / 2.0) / n, (p - pos_below - pos_at / 2.0) / p

    def placements_at(self, y: BoolArray, score: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Placement values of rows against these counts.

        (V10 of the positives, V01 of the negatives), in row order. The rows may be some of the
        counted ones (a site's rows against the pooled counts).
        """
        v10, v01 = self.placements()
        return v10[self.level_of(score[y])], v01[self.level_of(score[~y])]

    def delong(self, *, confidence_level: float = 0.95) -> DeLongResult:
        """AUC with DeLong's variance, ``var(V10) / n_pos + var(V01) / n_neg`` (ddof 1).

        The result keeps where the rows tie (:class:`~fedroc.metrics.TiePattern`, both
        classes' totals at each level) for its default interval with a small class.

        The sample variances run over rows: each level's placement value weighted by its
        count (weights act as frequency weights). NaN when a class has no rows, and the
        variance is NaN (with a warning) below two rows per class.

        Returns
        -------
        DeLongResult
        """
        from fedroc.metrics._delong import DeLongResult

        level = check_confidence(confidence_level)
        p, n = self.n_pos, self.n_neg
        if p <= 0 or n <= 0:
            _warn("only one class in y_true: the AUC and its variance are NaN")
            return DeLongResult(float("nan"), float("nan"), round(p), round(n), level)
        v10, v01 = self.placements()
        auc = float(np.dot(self.pos, v10)) / p
        if p < 2 or n < 2:
            _warn(
                f"DeLong's variance needs at least 2 samples per class (got {p:g} positive, "
                f"{n:g} negative); it is returned as NaN"
            )
            variance = float("nan")
        else:
            # Centred in place (the placements are not needed afterwards): large inputs
            # make one level per row, so every pass over the levels counts.
            for v in (v10, v01):
                v -= auc
                v *= v
            var10 = float(np.dot(self.pos, v10)) / (p - 1)
            var01 = float(np.dot(self.neg, v01)) / (n - 1)
            variance = var10 / p + var01 / n
        return DeLongResult(auc, variance, round(p), round(n), level, ties=self.tie_pattern())

    def tie_pattern(self) -> TiePattern:
        """Where the rows tie (both classes' totals at each level, by increasing score)."""
        from fedroc.metrics._delong import TiePattern

        return TiePattern.from_level_counts((self.pos + self.neg)[::-1])

    # -- bootstrap -------------------------------------------------------------------------
    def bootstrap_auc(
        self,
        n_bootstraps: int = 2000,
        *,
        seed: int | None = None,
        confidence_level: float = 0.95,
    ) -> BootstrapAUCResult:
        """Stratified bootstrap of the AUC (pROC's default bootstrap).

        Each replicate draws ``n_pos`` positives and ``n_neg`` negatives with replacement
        from their own class. Rows of one level are interchangeable, so a replicate is a
        multinomial draw of counts over the levels; the AUCs of all replicates come from
        one vectorized pass per batch of replicates.

        Parameters
        ----------
        n_bootstraps : int, default 2000
        seed : int, optional
            Seed of numpy's generator (statistical randomness of the analyst).
        confidence_level : float, default 0.95

        Returns
        -------
        BootstrapAUCResult

        Examples
        --------
        >>> c = ScoreCounts.from_scores([0, 0, 1, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.2, 0.9])
        >>> r = c.bootstrap_auc(500, seed=1)
        >>> r.auc == c.auc(), r.replicates.shape
        (True, (500,))
        """
        level = self._check_bootstrap(n_bootstraps, confidence_level)
        p, n = round(self.n_pos), round(self.n_neg)
        auc = self.auc()
        if not math.isfinite(auc):
            return BootstrapAUCResult(auc, np.zeros(0), p, n, level, seed)
        rng = np.random.default_rng(seed)
        reps = _bootstrap(self.pos, self.neg, int(n_bootstraps), rng, _auc_statistic)
        return BootstrapAUCResult(auc, reps, p, n, level, seed)

    def _check_bootstrap(self, n_bootstraps: int, confidence_level: float) -> float:
        """Check a bootstrap's options and that these counts are rows; return the level."""
        level = check_confidence(confidence_level)
        if int(n_bootstraps) != n_bootstraps or n_bootstraps < 1:
            raise InputError(f"n_bootstraps must be a positive integer; got {n_bootstraps!r}")
        if not self.is_whole():
            raise InputError("the bootstrap resamples rows: it needs whole (unweighted) counts")
        return level

    def _percentile_ci(
        self,
        statistic: BootStatistic,
        *,
        n_bootstraps: int = 2000,
        seed: int | None = None,
        confidence_level: float = 0.95,
    ) -> tuple[float, float]:
        level = self._check_bootstrap(n_bootstraps, confidence_level)
        if self.n_pos <= 0 or self.n_neg <= 0:
            return (float("nan"), float("nan"))
        reps = _bootstrap(
            self.pos, self.neg, int(n_bootstraps), np.random.default_rng(seed), statistic
        )
        lo, hi = np.quantile(reps, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
        return (float(lo), float(hi))

    def sensitivity_at_specificity_ci(
        self, specificity: float, **options: Unpack[BootstrapOptions]
    ) -> tuple[float, float]:
        """Stratified bootstrap interval of :meth:`at_specificity`'s sensitivity.

        Each replicate chooses its own threshold by the same rule, so the interval includes
        the variability of a threshold chosen on the data (what the binomial interval of
        :class:`OperatingPoint` leaves out). Percentile interval, as pROC's ``ci.se``
        (which reads the sensitivity off the interpolated curve instead of at a cut). The
        keyword options are those of :class:`BootstrapOptions`.
        """
        target = self._target("specificity", specificity)
        return self._percentile_ci(_sensitivity_at(target), **options)

    def specificity_at_sensitivity_ci(
        self, sensitivity: float, **options: Unpack[BootstrapOptions]
    ) -> tuple[float, float]:
        """Stratified bootstrap interval of :meth:`at_sensitivity`'s specificity (the mirror)."""
        target = self._target("sensitivity", sensitivity)
        return self._percentile_ci(_specificity_at(target), **options)

    # -- calibration -----------------------------------------------------------------------
    def calibration(self, n_bins: int = 10) -> CalibrationCurve:
        """Calibration curve over ``n_bins`` equal-width bins on [0, 1].

        Each level goes to the bin of its threshold, which is exact when every level lies in
        one bin: counts at each distinct score, or at shared thresholds that include the
        bin edges. Needs probabilities (thresholds of non-empty levels in [0, 1]), whole
        counts, and the levels' score sums.

        Returns
        -------
        CalibrationCurve
        """
        from fedroc.metrics._calibration import CalibrationCurve

        return CalibrationCurve.from_sums(bin_edges(n_bins), *self.calibration_sums(n_bins))

    def calibration_sums(
        self, n_bins: int = 10
    ) -> tuple[NDArray[np.int64], FloatArray, FloatArray]:
        """Per calibration bin: rows, sum of predicted probabilities, positives.

        The bin sums behind :meth:`calibration` (and what a site releases for a calibration
        curve): they add up across sites. Same conditions as :meth:`calibration`.
        """
        edges = bin_edges(n_bins)
        count = self.pos + self.neg
        used = count > 0
        t = self.thresholds[used]
        if ((t < 0) | (t > 1)).any():
            raise InputError(
                "calibration needs probabilities: a level with rows has threshold "
                f"{float(t[(t < 0) | (t > 1)][0])!r} outside [0, 1]"
            )
        if not self.is_whole():
            raise InputError("calibration counts rows: it needs whole (unweighted) counts")
        ss = self.score_sums()
        if np.isnan(ss[used]).any():
            raise InputError(
                "these counts carry no score sums (from_bins without score_sum): the mean "
                "predicted probability per bin is unknown"
            )
        mean = ss[used] / count[used]
        if ((mean < 0) | (mean > 1)).any():
            raise InputError(
                "calibration needs probabilities: a level's mean score is outside [0, 1]"
            )
        idx = bin_index_edges(t, edges)
        k = int(n_bins)
        return (
            _sum_by(idx, count[used], k).round().astype(np.int64),
            _sum_by(idx, ss[used], k),
            _sum_by(idx, self.pos[used], k),
        )

    # -- operating points ------------------------------------------------------------------
    def _points(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(tps, fps, thresholds) of every cut, starting with nothing positive (inf)."""
        return np.r_[0.0, self.tps], np.r_[0.0, self.fps], np.r_[np.inf, self.thresholds]

    def _point(self, i: int, criterion: str, threshold: float | None = None) -> OperatingPoint:
        tps, fps, thr = self._points()
        # Totals from the same running sums, so that the last cut is exactly all positive.
        p, n = tps[-1], fps[-1]
        return OperatingPoint(
            float(thr[i]) if threshold is None else threshold,
            float(tps[i]),
            float(fps[i]),
            float(n - fps[i]),
            float(p - tps[i]),
            criterion,
        )

    def operating_point(self, threshold: float) -> OperatingPoint:
        """Tabulate the 2x2 table when predicting positive for ``score >= threshold``.

        Exact for counts at each distinct score, and for shared thresholds when
        ``threshold`` is one of them.

        Examples
        --------
        >>> c = ScoreCounts.from_scores([0, 0, 1, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.2, 0.9])
        >>> op = c.operating_point(0.4)
        >>> op.tp, op.fp, op.tn, op.fn, op.ppv
        (2.0, 1.0, 2.0, 1.0, 0.6666666666666666)
        """
        t = float(threshold)
        if math.isnan(t):
            raise InputError("threshold must be a number; got nan")
        i = int(np.searchsorted(-self.thresholds, -t, side="right"))  # levels with thr >= t
        return self._point(i, f"threshold {t:g}", threshold=t)

    def _undefined_point(self, what: str, criterion: str) -> OperatingPoint | None:
        """NaN point (with a warning) when a class has no rows, as the AUC."""
        if self._defined(what):
            return None
        nan = float("nan")
        return OperatingPoint(nan, nan, nan, nan, nan, criterion)

    @staticmethod
    def _target(name: str, value: float) -> float:
        v = float(value)
        if not 0.0 <= v <= 1.0:
            raise InputError(f"{name} must lie in [0, 1]; got {value!r}")
        return v

    def at_specificity(self, specificity: float) -> OperatingPoint:
        """Choose the cut with the highest sensitivity among those with specificity >= target.

        Among cuts of equal sensitivity the one with the higher specificity is taken.

        Examples
        --------
        >>> c = ScoreCounts.from_scores([0, 0, 1, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.2, 0.9])
        >>> op = c.at_specificity(0.6)
        >>> op.threshold, round(op.sensitivity, 4), round(op.specificity, 4)
        (0.35, 1.0, 0.6667)
        """
        return self._reaching("specificity", specificity, "sensitivity", _cut_at_specificity)

    def at_sensitivity(self, sensitivity: float) -> OperatingPoint:
        """Choose the cut with the highest specificity among those with sensitivity >= target.

        Among cuts of equal specificity the one with the higher sensitivity is taken.
        """
        return self._reaching("sensitivity", sensitivity, "specificity", _cut_at_sensitivity)

    def _reaching(self, name: str, value: float, free: str, cut: CutRule) -> OperatingPoint:
        """Return the point ``cut`` chooses among the cuts whose ``name`` reaches ``value``.

        ``free`` names the proportion the rule maximises (for the one-class warning).
        """
        target = self._target(name, value)
        criterion = f"{name} >= {target:g}"
        undefined = self._undefined_point(f"the {free} at a {name}", criterion)
        if undefined is not None:
            return undefined
        tps, fps, _ = self._points()
        return self._point(cut(tps, fps, target), criterion)

    def youden(self) -> OperatingPoint:
        """Choose the cut that maximises Youden's J = sensitivity + specificity - 1.

        Ties go to the highest threshold. With one class only: a warning and NaN (as for
        every operating point).
        """
        undefined = self._undefined_point("Youden's threshold", "youden")
        if undefined is not None:
            return undefined
        tps, fps, _ = self._points()
        # J times n_pos n_neg: whole numbers for whole counts, so equal J compare equal.
        j = tps * fps[-1] - fps * tps[-1]
        return self._point(int(np.argmax(j)), "youden")

    def summary(self) -> str:
        """Format the number of levels, the class totals and the AUC as a table."""
        return format_table(
            [
                ("levels", self.n_levels),
                ("positives", self.n_pos),
                ("negatives", self.n_neg),
                ("AUC", self.auc() if self.n_pos > 0 and self.n_neg > 0 else None),
            ],
            title="Class counts at thresholds",
        )


class BootstrapOptions(TypedDict, total=False):
    """Keyword options of a stratified bootstrap interval of :class:`ScoreCounts`.

    Attributes
    ----------
    n_bootstraps : int
        Replicates drawn; default 2000.
    seed : int or None
        Seed of numpy's generator (statistical randomness of the analyst); default None.
    confidence_level : float
        Coverage of the two-sided percentile interval, in (0, 1); default 0.95.
    """

    n_bootstraps: int
    seed: int | None
    confidence_level: float


#: ``cut(tps, fps, target) -> i``: the cut an operating-point rule chooses, from the
#: cumulative counts of :meth:`ScoreCounts._points`.
CutRule = Callable[[FloatArray, FloatArray, float], int]


def _cut_at_specificity(tps: FloatArray, fps: FloatArray, specificity: float) -> int:
    """Return the index of the cut of highest sensitivity whose specificity reaches a target.

    Among cuts of equal sensitivity, the first (the higher specificity).
    """
    ok = (fps[-1] - fps) / fps[-1] >= specificity
    last = int(np.flatnonzero(ok)[-1])  # ok is a prefix; the cut at inf always qualifies
    return int(np.searchsorted(tps, tps[last], side="left"))


def _cut_at_sensitivity(tps: FloatArray, fps: FloatArray, sensitivity: float) -> int:
    """Return the index of the cut of highest specificity whose sensitivity reaches a target.

    Among cuts of equal specificity, the last (the higher sensitivity).
    """
    ok = tps / tps[-1] >= sensitivity
    first = int(np.flatnonzero(ok)[0])  # ok is a suffix; the last cut always qualifies
    return int(np.searchsorted(fps, fps[first], side="right")) - 1


BootStatistic = Callable[[FloatArray, FloatArray, int, int], FloatArray]


def _bootstrap(
    pos: FloatArray,
    neg: FloatArray,
    n_bootstraps: int,
    rng: np.random.Generator,
    statistic: BootStatistic,
) -> FloatArray:
    """``statistic`` of stratified bootstrap replicates of whole level counts.

    ``statistic(bp, bn, n_pos, n_neg)`` maps a batch of replicate counts, (b, k) matrices
    with levels in decreasing order, to b values.
    """
    keep = (pos + neg) > 0  # empty levels add nothing to any replicate
    p_counts, n_counts = pos[keep], neg[keep]
    k = p_counts.size
    p, n = round(p_counts.sum()), round(n_counts.sum())
    out = np.empty(n_bootstraps)
    # Memory per batch ~ batch * (k + rows) values; about 8e6 values at most.
    batch = max(1, min(n_bootstraps, 8_000_000 // max(1, k + p + n)))
    for start in range(0, n_bootstraps, batch):
        b = min(batch, n_bootstraps - start)
        bp = _resample(p_counts, p, b, rng)
        bn = _resample(n_counts, n, b, rng)
        out[start : start + b] = statistic(bp, bn, p, n)
    return out


def _auc_statistic(bp: FloatArray, bn: FloatArray, p: int, n: int) -> FloatArray:
    neg_below = n - np.cumsum(bn, axis=1)
    twice = np.einsum("bk,bk->b", bp, 2.0 * neg_below + bn)
    return np.asarray(twice / (2.0 * p * n), dtype=np.float64)


def _cuts(bp: FloatArray, bn: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Return the running (tps, fps) of each replicate, starting above every score."""
    zero = np.zeros((bp.shape[0], 1))
    return np.hstack([zero, np.cumsum(bp, axis=1)]), np.hstack([zero, np.cumsum(bn, axis=1)])


def _sensitivity_at(specificity: float) -> BootStatistic:
    def statistic(bp: FloatArray, bn: FloatArray, p: int, n: int) -> FloatArray:
        tps, fps = _cuts(bp, bn)
        last = np.count_nonzero((n - fps) / n >= specificity, axis=1) - 1  # a prefix
        return np.asarray(tps[np.arange(tps.shape[0]), last] / p, dtype=np.float64)

    return statistic


def _specificity_at(sensitivity: float) -> BootStatistic:
    def statistic(bp: FloatArray, bn: FloatArray, p: int, n: int) -> FloatArray:
        tps, fps = _cuts(bp, bn)
        first = tps.shape[1] - np.count_nonzero(tps / p >= sensitivity, axis=1)  # a suffix
        return np.asarray((n - fps[np.arange(fps.shape[0]), first]) / n, dtype=np.float64)

    return statistic


def _resample(counts: FloatArray, total: int, b: int, rng: np.random.Generator) -> FloatArray:
    """``b`` draws of ``total`` rows with replacement, counted per level: a (b, k) matrix."""
    if counts.size <= total:
        return _resample_levels(counts, total, b, rng)
    return _resample_rows(counts, total, b, rng)


def _resample_levels(
    counts: FloatArray, total: int, b: int, rng: np.random.Generator
) -> FloatArray:
    # Fewer levels than rows: draw the level counts directly (multinomial).
    return rng.multinomial(total, counts / total, size=b).astype(np.float64)


def _resample_rows(counts: FloatArray, total: int, b: int, rng: np.random.Generator) -> FloatArray:
    # Many levels (most empty for this class): draw rows, then count them per level.
    k = counts.size
    lookup = np.repeat(np.arange(k), counts.astype(np.int64))
    rows = lookup[rng.integers(0, total, size=(b, total))]
    rows += (np.arange(b) * k)[:, None]
    return np.bincount(rows.ravel(), minlength=b * k).reshape(b, k).astype(np.float64)


# -- placement sums: DeLong's covariance from sums that add across sites -------------------
@dataclass(frozen=True, repr=False)
class PlacementSums(ResultMixin):
    """Centred sums of the placement values of several scores on the same rows.

    For scores ``a, b, ...`` of the same rows, DeLong's covariance of their AUCs is
    ``S10 / n_pos + S01 / n_neg`` with ``S10`` the covariance matrix of the positives'
    placement values (V10) and ``S01`` that of the negatives' (V01). The sums here are the
    numerators, centred at the AUCs of the pooled counts (which are the means of V10 and of
    V01), so a site's sums over its own rows against the pooled counts add up across sites
    to the pooled sums: two rounds of aggregation (counts, then these sums) give the paired
    comparison.

    Attributes
    ----------
    auc : ndarray, shape (k,)
        The centre: AUC of each score's pooled counts.
    n_pos, n_neg : float
    cross10 : ndarray, shape (k, k)
        ``sum over positives of (V10 - auc)(V10 - auc)^T``.
    cross01 : ndarray, shape (k, k)
        ``sum over negatives of (V01 - auc)(V01 - auc)^T``.
    """

    auc: FloatArray
    n_pos: float
    n_neg: float
    cross10: FloatArray
    cross01: FloatArray

    @classmethod
    def from_rows(
        cls, y: BoolArray, scores: Sequence[FloatArray], counts: Sequence[ScoreCounts]
    ) -> PlacementSums:
        """Sum over the rows ``(y, scores[j])`` against ``counts[j]`` (the pooled counts).

        Examples
        --------
        >>> y = np.array([True, True, False, False])
        >>> a, b = np.array([0.9, 0.4, 0.5, 0.1]), np.array([0.8, 0.7, 0.2, 0.3])
        >>> sums = PlacementSums.from_rows(
        ...     y, [a, b], [ScoreCounts.from_scores(y, a), ScoreCounts.from_scores(y, b)])
        >>> sums.auc.tolist()
        [0.75, 1.0]
        """
        if len(scores) != len(counts):
            raise InputError(f"{len(scores)} scores but {len(counts)} counts")
        aucs = np.array([c.auc() for c in counts], dtype=np.float64)
        v10 = np.empty((len(scores), int(np.count_nonzero(y))))
        v01 = np.empty((len(scores), y.size - v10.shape[1]))
        for j, (s, c) in enumerate(zip(scores, counts, strict=True)):
            v10[j], v01[j] = c.placements_at(y, np.asarray(s, dtype=np.float64))
        d10 = v10 - aucs[:, None]
        d01 = v01 - aucs[:, None]
        return cls(aucs, float(v10.shape[1]), float(v01.shape[1]), d10 @ d10.T, d01 @ d01.T)

    @classmethod
    def from_joint_counts(cls, pos: ArrayLike, neg: ArrayLike) -> PlacementSums:
        """Build the sums of two scores from their joint bin counts (rows grouped by bin pair).

        ``pos[i, j]`` counts the positives whose first score falls in bin i and whose
        second falls in bin j, bins in increasing score order; ``neg`` the negatives.
        Scores in one bin count as tied (1/2), so this equals :meth:`from_rows` on the rows
        with each score replaced by its bin: a row's placement value depends only on its
        bin, so each sum over rows is a sum over cells weighted by their counts. The counts
        add up across sites, so secure aggregation of them gives the paired comparison in
        one round.

        Examples
        --------
        >>> pos = np.array([[0, 0], [1, 1]])  # positives: (1, 0) and (1, 1)
        >>> neg = np.array([[1, 0], [0, 1]])  # negatives: (0, 0) and (1, 1)
        >>> PlacementSums.from_joint_counts(pos, neg).auc.tolist()
        [0.75, 0.5]
        """
        p = np.asarray(pos, dtype=np.float64)
        q = np.asarray(neg, dtype=np.float64)
        if p.ndim != 2 or p.shape != q.shape or p.shape[0] != p.shape[1]:
            raise InputError(
                f"joint counts must be two square matrices of one shape; got {p.shape} "
                f"and {q.shape}"
            )
        n_pos, n_neg = float(p.sum()), float(q.sum())
        if not (n_pos > 0 and n_neg > 0):
            raise InputError(
                f"the joint counts hold {n_pos:g} positive and {n_neg:g} negative rows; both "
                "classes are needed"
            )
        aucs, d10, d01, w10, w01 = [], [], [], [], []
        for axis in (1, 0):  # margins of the first score (sum over j), then the second
            mp, mn = p.sum(axis=axis), q.sum(axis=axis)
            v10 = (np.cumsum(mn) - 0.5 * mn) / n_neg  # negatives below, half of those tied
            v01 = (n_pos - np.cumsum(mp) + 0.5 * mp) / n_pos  # positives above, half tied
            auc = float(mp @ v10) / n_pos
            aucs.append(auc)
            d10.append(v10 - auc)
            d01.append(v01 - auc)
            w10.append(mp)
            w01.append(mn)
        cross10 = np.empty((2, 2))
        cross01 = np.empty((2, 2))
        for cross, d, w, joint in ((cross10, d10, w10, p), (cross01, d01, w01, q)):
            cross[0, 0] = w[0] @ d[0] ** 2
            cross[1, 1] = w[1] @ d[1] ** 2
            cross[0, 1] = cross[1, 0] = d[0] @ joint @ d[1]
        return cls(np.array(aucs), n_pos, n_neg, cross10, cross01)

    def __add__(self, other: object) -> PlacementSums:
        """Pool two sites' sums centred at the same pooled AUCs.

        Raises
        ------
        InputError
            When the centres (``auc``) differ: the sums were taken against different counts.
        """
        if not isinstance(other, PlacementSums):
            return NotImplemented
        if not np.array_equal(self.auc, other.auc):
            raise InputError("placement sums add up only when centred at the same pooled AUCs")
        return PlacementSums(
            self.auc,
            self.n_pos + other.n_pos,
            self.n_neg + other.n_neg,
            self.cross10 + other.cross10,
            self.cross01 + other.cross01,
        )

    def __radd__(self, other: object) -> PlacementSums:
        """Add to ``0`` as ``self``, so that ``sum(site_sums)`` pools a list of sums."""
        if isinstance(other, int) and other == 0:
            return self
        return self.__add__(other)

    def covariance(self) -> FloatArray:
        """DeLong's covariance matrix of the AUCs, ``S10 / n_pos + S01 / n_neg``."""
        p, n = self.n_pos, self.n_neg
        if p < 2 or n < 2:
            return np.full(self.cross10.shape, np.nan)
        return self.cross10 / ((p - 1) * p) + self.cross01 / ((n - 1) * n)
