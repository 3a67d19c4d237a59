"""The ROC-GLM on pooled data: thresholds, placement values, grouped table, probit fit.

Paper 1, section 3.4 (Pepe 2000). For every positive ``i`` and threshold ``t_j`` the
response is ``U_ij = 1(S0(score_i) <= t_j)`` with ``S0(x) = (#{negatives > x} +
#{negatives = x} / 2) / n0``, the empirical survivor function with ties counted one half,
and the model is
``P(U_ij = 1) = Phi(g1 + g2 Phi^-1(t_j))``. Rows that share a threshold are one binomial
row ``(successes_j, trials_j)``, so the fit costs O(n log n + n_T) and never builds the
n1 x n_T table.

Ties: the placement of a positive tied with negatives counts them one half, the
convention of DeLong's variance (paper 1, eq. 2) and of scikit-learn's AUC, so that the
area under the empirical curve of the placements is the AUC DeLong's interval is about.
The reference code (and paper 1, section 3.4, ``U = 1(Y1 >= Y0)``) counts ties as wins:
on 5-level ratings that gave 0.845 against the empirical 0.770 (issue "Honest statistics by
default").

Threshold rules:

- ``"grid"`` (the paper): ``t_j = j / (n_T + 1)``, j = 1..n_T, the same at every site.
  Any score scale works.
- ``"positives"`` (the reference code): each site uses its own positives' scores as the
  ``t_j``, read as false-positive rates. This needs scores in [0, 1]; scores exactly 0 or
  1 are dropped from the threshold set (``Phi^-1`` is infinite there). Across sites the
  tables differ, so the distributed fit equals the fit on the stacked per-site tables.

"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import integrate, special

from fedroc._docs import fill_doc
from fedroc._results import ResultMixin, format_table
from fedroc._validation import check_binary
from fedroc.exceptions import FedrocWarning, InputError, warn_user
from fedroc.methods.rocglm._probit import (
    DEFAULT_MAX_ITER,
    DEFAULT_TOL,
    fisher_scoring,
    probit_parts,
)

__all__ = [
    "DEFAULT_N_THRESHOLDS",
    "THRESHOLD_RULES",
    "GroupedTable",
    "PrivacyCautionWarning",
    "RocGlmFit",
    "binormal_auc",
    "binormal_auc_integral",
    "binormal_roc",
    "delong_placements",
    "grouped_from_placements",
    "positive_thresholds",
    "recommended_privacy",
    "rocglm",
    "rocglm_from_scores",
    "score_sensitivity",
    "survivor",
    "threshold_grid",
]

FloatArray = NDArray[np.float64]
THRESHOLD_RULES = ("grid", "positives")
# The grid of the paper's simulation code: seq(0, 1, length.out = 30) without its ends.
DEFAULT_N_THRESHOLDS = 28


class PrivacyCautionWarning(FedrocWarning):
    """The l2-sensitivity is above the range paper 1 validated (0.07)."""


# --- thresholds and placement values -------------------------------------------------------


def check_rule(rule: str) -> str:
    if rule not in THRESHOLD_RULES:
        raise InputError(f"thresholds must be one of {THRESHOLD_RULES}; got {rule!r}")
    return rule


def threshold_grid(n_thresholds: int = DEFAULT_N_THRESHOLDS) -> FloatArray:
    """Return the paper's equidistant false-positive rates ``j / (n_T + 1)``, j = 1..n_T."""
    if int(n_thresholds) != n_thresholds or n_thresholds < 2:
        raise InputError(f"n_thresholds must be an integer >= 2; got {n_thresholds!r}")
    n = int(n_thresholds)
    return np.arange(1, n + 1, dtype=np.float64) / (n + 1)


def survivor(sorted_ref: FloatArray, x: ArrayLike) -> FloatArray:
    """Evaluate the survivor function of ``sorted_ref`` at ``x``, ties counted one half.

    ``(#{ref > x} + #{ref = x} / 2) / n_ref``, that is ``1 -`` the DeLong placement of ``x``.
    """
    return 1.0 - delong_placements(sorted_ref, x, below=True)


def delong_placements(sorted_ref: FloatArray, x: ArrayLike, *, below: bool) -> FloatArray:
    """DeLong placement values of ``x`` in ``sorted_ref`` with ties counted 1/2.

    ``below=True``: ``(#{ref < x} + #{ref = x} / 2) / n`` (a positive against the
    negatives, V10); ``below=False``: ``(#{ref > x} + #{ref = x} / 2) / n`` (a negative
    against the positives, V01).

    Parameters
    ----------
    sorted_ref : ndarray of float64, shape (n,)
        The reference class's scores, sorted increasingly.
    x : array-like of float
        The scores to place.
    below : bool
        Count the reference scores below ``x`` (True) or above it (False).

    Returns
    -------
    ndarray of float64, shape of ``x``
        The placement of each ``x``, in [0, 1].
    """
    x = np.asarray(x, np.float64)
    n = sorted_ref.size
    lo = np.searchsorted(sorted_ref, x, "left")
    hi = np.searchsorted(sorted_ref, x, "right")
    if below:
        return (lo + hi) / (2.0 * n)
    return (2 * n - lo - hi) / (2.0 * n)


def grouped_from_placements(placements: FloatArray, t: FloatArray) -> FloatArray:
    """Successes ``#{placement <= t_j}`` for each threshold (direct definition)."""
    return np.searchsorted(np.sort(placements), t, "right").astype(np.float64)


def positive_thresholds(scores: FloatArray, where: str = "the positives") -> FloatArray:
    """Threshold set of the reference code: the positives' scores (sorted, with repeats).

    Scores must lie in [0, 1] because they are read as false-positive rates; 0 and 1 are
    dropped (``Phi^-1`` is infinite there and such rows carry no information).
    """
    bad = (scores < 0.0) | (scores > 1.0)
    if bad.any():
        first = scores[np.flatnonzero(bad)[0]]
        raise InputError(
            f"thresholds='positives' reads the positive scores of {where} as false-positive "
            f"rates, so they must lie in [0, 1]; found {int(bad.sum())} outside, e.g. "
            f"{first!r} (use thresholds='grid' for scores on another scale)"
        )
    t = np.sort(scores[(scores > 0.0) & (scores < 1.0)])
    return t


@dataclass(frozen=True)
class GroupedTable:
    """The ROC-GLM data as binomial rows: covariate ``Phi^-1(t)``, successes, trials.

    Attributes
    ----------
    t : ndarray of float64, shape (n_rows,)
        False-positive rate of each row, in (0, 1).
    successes : ndarray of float64, shape (n_rows,)
        Number of positives whose placement is at most ``t`` (times the threshold's
        multiplicity under the positives rule).
    trials : ndarray of float64, shape (n_rows,)
        Number of positives behind each row.
    """

    t: FloatArray
    successes: FloatArray
    trials: FloatArray

    @property
    def x(self) -> FloatArray:
        """The covariate ``Phi^-1(t)`` of each row."""
        return special.ndtri(self.t)

    @classmethod
    def from_positives_rule(cls, placements: FloatArray, t: FloatArray) -> GroupedTable:
        """One row per distinct threshold, weighted by its multiplicity (reference code)."""
        values, mult = np.unique(t, return_counts=True)
        succ = grouped_from_placements(placements, values) * mult
        return cls(values, succ, (mult * placements.size).astype(np.float64))

    def stacked(self, other: GroupedTable) -> GroupedTable:
        """Return the rows of this table followed by those of ``other``."""
        return GroupedTable(
            np.concatenate([self.t, other.t]),
            np.concatenate([self.successes, other.successes]),
            np.concatenate([self.trials, other.trials]),
        )


# --- the binormal ROC curve ---------------------------------------------------------------


@fill_doc
def binormal_auc(g1: float, g2: float) -> float:
    """Closed-form area under ``Phi(g1 + g2 Phi^-1(t))``: ``Phi(g1 / sqrt(1 + g2^2))``.

    Parameters
    ----------
    {binormal_g}

    Returns
    -------
    float in [0, 1]
        The AUC.
    """
    return float(special.ndtr(g1 / math.sqrt(1.0 + g2 * g2)))


@fill_doc
def binormal_auc_integral(g1: float, g2: float) -> float:
    """Integrate the binormal AUC by adaptive quadrature (QUADPACK, as R's ``integrate``).

    Parameters
    ----------
    {binormal_g}

    Returns
    -------
    float
        The area, to about 1e-10 (it agrees with :func:`binormal_auc`).
    """
    value, _ = integrate.quad(
        lambda t: float(special.ndtr(g1 + g2 * special.ndtri(t))),
        0.0,
        1.0,
        epsabs=1e-12,
        epsrel=1e-10,
        limit=200,
    )
    return float(value)


@fill_doc
def binormal_roc(g1: float, g2: float, t: ArrayLike) -> FloatArray:
    """``ROC(t) = Phi(g1 + g2 Phi^-1(t))`` for false-positive rates ``t`` in [0, 1].

    The end points take their limits (0 and 1 for ``g2 > 0``).

    Parameters
    ----------
    {binormal_g}
    t : array-like of float
        False-positive rates, in [0, 1].

    Returns
    -------
    ndarray of float64, shape of ``t``
        The true-positive rate at each ``t``.

    Raises
    ------
    InputError
        A rate outside [0, 1].
    """
    t = np.asarray(t, dtype=np.float64)
    if ((t < 0) | (t > 1)).any():
        raise InputError("false-positive rates t must lie in [0, 1]")
    with np.errstate(invalid="ignore"):
        z = special.ndtri(t)
        eta = g1 + g2 * z
    if g2 == 0:
        eta = np.full_like(t, g1)
    return np.asarray(special.ndtr(eta), dtype=np.float64)


# --- the pooled fit ---------------------------------------------------------------------


class BinormalCurve:
    """The fitted binormal ROC curve ``ROC(t) = Phi(g1 + g2 Phi^-1(t))`` of a result."""

    g1: float
    g2: float

    @property
    def params(self) -> tuple[float, float]:
        return (self.g1, self.g2)

    @property
    def auc_integral(self) -> float:
        """Numerical integral of the fitted curve (agrees with the closed-form AUC)."""
        return binormal_auc_integral(self.g1, self.g2)

    def roc(self, t: ArrayLike) -> FloatArray:
        """Evaluate the fitted curve at false-positive rates ``t``."""
        return binormal_roc(self.g1, self.g2, t)

    def roc_curve(self, n_points: int = 201) -> tuple[FloatArray, FloatArray]:
        """``(fpr, tpr)`` of the fitted curve on ``n_points`` equidistant rates."""
        fpr = np.linspace(0.0, 1.0, n_points)
        return fpr, self.roc(fpr)

    def roc_points(self) -> tuple[FloatArray, FloatArray]:
        """``(fpr, tpr)`` for the report's ROC figure."""
        return self.roc_curve()


@dataclass(frozen=True, repr=False)
class RocGlmFit(BinormalCurve, ResultMixin):
    """A fitted binormal ROC-GLM ``ROC(t) = Phi(g1 + g2 Phi^-1(t))``.

    Attributes
    ----------
    g1, g2 : float
        Intercept and slope of the probit model.
    iterations : int
        Fisher-scoring updates until R ``glm``'s relative deviance rule held.
    converged : bool
    deviance : float
        ``-2 log-likelihood`` of the expanded binary table at the estimate.
    table : GroupedTable
        The grouped data the model was fitted to.
    thresholds : str
        The threshold rule (``"grid"`` or ``"positives"``).
    """

    g1: float
    g2: float
    iterations: int
    converged: bool
    deviance: float
    table: GroupedTable = field(repr=False)
    thresholds: str = "grid"

    @property
    def auc(self) -> float:
        """Closed form ``Phi(g1 / sqrt(1 + g2^2))``."""
        return binormal_auc(self.g1, self.g2)

    def summary(self) -> str:
        """Format the coefficients, the AUC and the fit's convergence as a table."""
        return format_table(
            [
                ("g1", self.g1),
                ("g2", self.g2),
                ("AUC (closed form)", self.auc),
                ("thresholds", f"{self.thresholds} ({self.table.t.size} rows)"),
                ("iterations", self.iterations),
                ("converged", self.converged),
                ("deviance", self.deviance),
            ],
            title="ROC-GLM (binormal)",
        )


def fit_table(
    table: GroupedTable,
    *,
    thresholds: str = "grid",
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
) -> RocGlmFit:
    """Fit the probit ROC-GLM to a grouped table by Fisher scoring."""
    x = table.x

    def parts(gamma: FloatArray, which: Any) -> Any:
        return probit_parts(x, table.successes, table.trials, gamma)

    trace = fisher_scoring(parts, 1, tol=tol, max_iter=max_iter)
    fit = RocGlmFit(
        float(trace.gamma[0, 0]),
        float(trace.gamma[0, 1]),
        int(trace.iterations[0]),
        bool(trace.converged[0]),
        float(trace.deviance[0]),
        table,
        thresholds,
    )
    warn_unconverged(fit.converged, max_iter)
    return fit


def warn_unconverged(converged: bool, max_iter: int) -> None:
    if not converged:
        # What it means and what to read instead, in one line: the bare "did not converge"
        # left a reader of `fedroc evaluate` or `fedroc figures --paper 1` to guess.
        warn_user(
            f"the ROC-GLM did not converge in {max_iter} Fisher-scoring iterations: the "
            "classes are (almost) separated, AUC near 1, where the binormal fit has no finite "
            "coefficients; those reported are the last iteration's, not estimates (for such "
            "data read the empirical AUC: fedroc metrics, evaluate --method histogram or mpc)",
            FedrocWarning,
        )


def pooled_table(
    pos: FloatArray,
    neg: FloatArray,
    *,
    thresholds: str = "grid",
    n_thresholds: int = DEFAULT_N_THRESHOLDS,
) -> GroupedTable:
    """Group one data set for the ROC-GLM (placements of the positives in ``neg``)."""
    check_rule(thresholds)
    sorted_neg = np.sort(neg)
    placements = survivor(sorted_neg, pos)
    if thresholds == "grid":
        t = threshold_grid(n_thresholds)
        return GroupedTable(
            t, grouped_from_placements(placements, t), np.full(t.size, float(pos.size))
        )
    return GroupedTable.from_positives_rule(placements, positive_thresholds(pos))


@fill_doc
def rocglm_from_scores(
    pos: ArrayLike,
    neg: ArrayLike,
    *,
    thresholds: str = "grid",
    n_thresholds: int = DEFAULT_N_THRESHOLDS,
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
) -> RocGlmFit:
    """ROC-GLM from the positives' and the negatives' scores.

    Parameters
    ----------
    pos : array-like of float
        Scores of the positives.
    neg : array-like of float
        Scores of the negatives.
    {rocglm_thresholds}
    {rocglm_n_thresholds}
    {tol}
    {max_iter}

    Returns
    -------
    RocGlmFit
        The binormal coefficients, the fit's outcome and the grouped table.

    Raises
    ------
    InputError
        A class without scores, or fewer than two thresholds strictly inside (0, 1).
    """
    p = np.asarray(pos, np.float64)
    n = np.asarray(neg, np.float64)
    if p.size == 0 or n.size == 0:
        raise InputError("the ROC-GLM needs at least one positive and one negative")
    table = pooled_table(p, n, thresholds=thresholds, n_thresholds=n_thresholds)
    if table.t.size < 2:
        raise InputError("the ROC-GLM needs at least two thresholds strictly inside (0, 1)")
    return fit_table(table, thresholds=thresholds, tol=tol, max_iter=max_iter)


@fill_doc
def rocglm(
    y_true: ArrayLike,
    y_score: ArrayLike,
    *,
    thresholds: str = "grid",
    n_thresholds: int = DEFAULT_N_THRESHOLDS,
    pos_label: Any = None,
) -> RocGlmFit:
    """Fit the binormal ROC-GLM of paper 1 (section 3.4) on pooled data.

    Parameters
    ----------
    {y_true}
    {y_score}
    {rocglm_thresholds}
    {rocglm_n_thresholds}
    {pos_label}

    Returns
    -------
    RocGlmFit
        The binormal coefficients ``g1, g2``, their AUC and the fit's outcome.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = rng.random(4000) < 0.5
    >>> s = rng.normal(size=4000) + 1.0 * y
    >>> round(rocglm(y, s).auc, 2)  # binormal truth: Phi(1 / sqrt(2)) = 0.76
    0.76
    """
    y, s = check_binary(y_true, y_score, pos_label=pos_label)
    return rocglm_from_scores(s[y], s[~y], thresholds=thresholds, n_thresholds=n_thresholds)


# --- privacy parameters -------------------------------------------------------------------

# Paper 1, section 5.3.1: (epsilon, delta) by l2-sensitivity, upper bounds inclusive.
_RECOMMENDED = ((0.01, 0.2, 0.1), (0.03, 0.3, 0.4), (0.05, 0.5, 0.3), (0.07, 0.5, 0.5))


def recommended_privacy(sensitivity: float) -> tuple[float, float]:
    """Paper 1's (epsilon, delta) for an l2-sensitivity (section 5.3.1).

    ``<= 0.01 -> (0.2, 0.1)``, ``(0.01, 0.03] -> (0.3, 0.4)``, ``(0.03, 0.05] -> (0.5, 0.3)``,
    ``(0.05, 0.07] -> (0.5, 0.5)``. Above 0.07 the paper advises caution: this returns
    (0.5, 0.5) and warns with :class:`PrivacyCautionWarning`.

    These settings were chosen for accuracy, not for strong privacy: delta = 0.1 to 0.5
    is far above the usual "delta much smaller than 1/n".

    Parameters
    ----------
    sensitivity : float
        The score's l2-sensitivity, positive.

    Returns
    -------
    epsilon, delta : float
        The paper's setting for it.

    Raises
    ------
    InputError
        ``sensitivity`` is not a positive number.
    """
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise InputError(f"sensitivity must be a positive number; got {sensitivity!r}")
    for bound, eps, delta in _RECOMMENDED:
        if sensitivity <= bound:
            return (eps, delta)
    warn_user(
        f"l2-sensitivity {sensitivity:.4g} is above 0.07: paper 1 found the distributed AUC "
        "inaccurate there (too much noise); using its largest setting (0.5, 0.5)",
        PrivacyCautionWarning,
    )
    return (0.5, 0.5)


@fill_doc
def score_sensitivity(score: ArrayLike, n_breaks: int | None = None) -> tuple[float, int]:
    """Heuristic l2-sensitivity of a site's scores, after the reference code (``l2sens``).

    The reference code bins every feature into ``n_breaks`` (default ``n // 3``) histogram
    cells, calls the rows at the smallest non-zero L1 distance between cells "adjacent",
    and returns the largest score difference over adjacent pairs. A fedroc site holds only
    the label and the score, so here the score itself is binned: the result is the largest
    difference between scores in the two closest occupied cells.

    This is a heuristic, not a bound: the true l2-sensitivity is a property of the model
    over all pairs of adjacent inputs, not of the rows at hand; the value shrinks as a site
    has more rows, and it is itself computed from two rows' scores. Give the sensitivity
    from an analysis of the model where you can.

    Parameters
    ----------
    score : array-like of float
        The site's scores, at least two distinct values.
    {n_breaks}

    Returns
    -------
    (sensitivity, cell_distance) : (float, int)
    """
    s = np.sort(np.asarray(score, np.float64))
    n = s.size
    if n < 2:
        raise InputError("the sensitivity heuristic needs at least two scores")
    breaks = max(1, n // 3) if n_breaks is None else int(n_breaks)
    if breaks < 1:
        raise InputError(f"n_breaks must be >= 1; got {n_breaks!r}")
    lo, hi = float(s[0]), float(s[-1])
    if hi == lo:
        raise InputError("the sensitivity heuristic needs scores that are not all equal")
    cell = np.minimum(((s - lo) / (hi - lo) * breaks).astype(np.int64), breaks - 1)
    occupied, first = np.unique(cell, return_index=True)
    if occupied.size < 2:
        raise InputError("the sensitivity heuristic found one occupied cell; use more breaks")
    cell_min = s[first]
    cell_max = s[np.append(first[1:], n) - 1]
    gaps = np.diff(occupied)
    d = int(gaps.min())
    pairs = np.flatnonzero(gaps == d)
    return float(np.max(cell_max[pairs + 1] - cell_min[pairs])), d
