"""Analyst side of paper 5, the curves: ECDFs from quantiles, ROC and PR, their errors.

Paper section "Curve approximation via quantiles" (eqs. 1-3) and Definition 1 (eqs. 4-5):
the survival function of each class is interpolated through its Q quantiles
(:func:`survival_function`; PCHIP in the paper, linear and midpoint as in the reference
code's ``--interp``), then ``T(s) = 1 - Phi+(s)``, ``F(s) = 1 - Phi-(s)`` and
``P = T n+ / (T n+ + F n-)`` are traced over a score grid (:func:`approximate_curves`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.interpolate import PchipInterpolator

from fedroc._docs import fill_doc
from fedroc._validation import FloatArray
from fedroc.exceptions import InputError

INTERPOLATIONS = ("pchip", "linear", "midpoint")
GRID_STEPS = 8  # score-grid points between consecutive quantiles when tracing curves


@fill_doc
def survival_function(
    quantiles: FloatArray, fractions: FloatArray, interpolation: str = "pchip"
) -> Callable[[Any], FloatArray]:
    """``S(s) = 1 - Phi(s)`` through ``(quantile_k, 1 - fraction_k)``, in [0, 1].

    Repeated quantiles are merged (mean of their survival values); S is 1 below the
    smallest quantile and 0 above the largest.

    Parameters
    ----------
    quantiles, fractions : ndarray
        Estimated quantiles at ``fractions`` (non-decreasing).
    {interpolation}

    Returns
    -------
    callable
        ``S(s) -> ndarray`` of the shape of ``s``, values in [0, 1].

    Raises
    ------
    InputError
        An unknown ``interpolation``.
    """
    if interpolation not in INTERPOLATIONS:
        raise InputError(f"interpolation must be one of {INTERPOLATIONS}; got {interpolation!r}")
    q = np.asarray(quantiles, dtype=np.float64)
    y = 1.0 - np.asarray(fractions, dtype=np.float64)
    knots, inverse = np.unique(q, return_inverse=True)
    values = np.bincount(inverse, weights=y) / np.bincount(inverse)
    if knots.size < 2:
        point = float(knots[0])
        return lambda s: np.where(np.asarray(s, dtype=np.float64) < point, 1.0, 0.0)
    if interpolation == "pchip":
        pchip = PchipInterpolator(knots, values, extrapolate=False)

        def inner(s: FloatArray) -> FloatArray:
            return np.asarray(np.nan_to_num(pchip(s), nan=0.0))

    elif interpolation == "linear":

        def inner(s: FloatArray) -> FloatArray:
            return np.interp(s, knots, values)

    else:

        def inner(s: FloatArray) -> FloatArray:
            right = np.searchsorted(knots, s, side="left")  # first knot >= s
            left = np.searchsorted(knots, s, side="right") - 1  # last knot <= s
            last = knots.size - 1
            return 0.5 * (values[np.clip(left, 0, last)] + values[np.clip(right, 0, last)])

    def survival(s: Any) -> FloatArray:
        s = np.asarray(s, dtype=np.float64)
        out = np.clip(inner(s), 0.0, 1.0)
        out[s < knots[0]] = 1.0
        out[s > knots[-1]] = 0.0
        return out

    return survival


@dataclass(frozen=True)
class Curves:
    """ROC and PR curves traced from two survival functions.

    Attributes
    ----------
    scores : ndarray of float64, shape (n_points,)
        Thresholds, decreasing from ``inf`` to ``-inf``.
    fpr, tpr : ndarray of float64, shape (n_points,)
        False and true positive rates at each threshold, from (0, 0) to (1, 1).
    precision : ndarray of float64, shape (n_points,)
        Precision at each threshold; 1 where nothing is predicted positive.
    auc : float
        Trapezoidal area under the traced ROC curve.
    pr_auc : float
        Trapezoidal area under the traced PR curve (precision against recall).
    n_pos, n_neg : float
        The class sizes the precision is computed with.
    """

    scores: FloatArray
    fpr: FloatArray
    tpr: FloatArray
    precision: FloatArray
    auc: float
    pr_auc: float
    n_pos: float
    n_neg: float

    @classmethod
    def from_rates(
        cls, scores: FloatArray, tpr: FloatArray, fpr: FloatArray, n_pos: float, n_neg: float
    ) -> Curves:
        """Trace the curves through ``(fpr, tpr)`` at decreasing ``scores``, (0, 0) to (1, 1).

        The rates are monotone by construction up to rounding; they are made monotone so
        that areas and inverses are sound. Precision is 1 where nothing is predicted positive.
        """
        tpr = np.maximum.accumulate(np.r_[0.0, tpr, 1.0])
        fpr = np.maximum.accumulate(np.r_[0.0, fpr, 1.0])
        tp, fp = tpr * n_pos, fpr * n_neg
        with np.errstate(divide="ignore", invalid="ignore"):
            precision = np.where(tp + fp > 0, tp / (tp + fp), 1.0)
        return cls(
            scores=np.r_[np.inf, scores, -np.inf],
            fpr=fpr,
            tpr=tpr,
            precision=precision,
            auc=float(np.trapezoid(tpr, fpr)),
            pr_auc=float(np.trapezoid(precision, tpr)),
            n_pos=float(n_pos),
            n_neg=float(n_neg),
        )

    @classmethod
    def empty(cls, n_pos: float, n_neg: float) -> Curves:
        """No curve (nothing could be estimated): empty arrays and NaN areas."""
        none = np.zeros(0)
        return cls(none, none, none, none, float("nan"), float("nan"), n_pos, n_neg)

    @property
    def average_precision(self) -> float:
        """Step-wise ``sum_k (R_k - R_{k-1}) P_k`` along the traced curve (NaN without one)."""
        if self.tpr.size == 0:
            return float("nan")
        return float(np.sum(np.diff(self.tpr) * self.precision[1:]))


@fill_doc
def approximate_curves(
    q_pos: FloatArray,
    q_neg: FloatArray,
    fractions: FloatArray,
    n_pos: float,
    n_neg: float,
    lo: float,
    hi: float,
    interpolation: str = "pchip",
) -> Curves:
    """ROC and PR curves traced from the two survival functions (paper eqs. 1-3).

    The score grid holds every quantile and ``GRID_STEPS`` points between consecutive
    ones, so the curves follow the data where it is dense. Points run from the top of the
    range (0, 0) to the bottom (1, 1); precision is 1 where nothing is predicted positive.

    Parameters
    ----------
    q_pos, q_neg : ndarray of float
        Quantiles of the positives' and of the negatives' scores at ``fractions``.
    {quantile_fractions}
    n_pos, n_neg : float
        Class sizes (noisy under DP), for the precision.
    {score_range_lo_hi}
    {interpolation}

    Returns
    -------
    Curves
        The traced ROC and PR curves and their areas.
    """
    knots = np.unique(np.r_[lo, hi, q_pos, q_neg])
    steps = np.linspace(0.0, 1.0, GRID_STEPS + 1)[:-1]
    grid = np.r_[(knots[:-1, None] + np.diff(knots)[:, None] * steps).ravel(), knots[-1]]
    s = grid[::-1]
    tpr = survival_function(q_pos, fractions, interpolation)(s)
    fpr = survival_function(q_neg, fractions, interpolation)(s)
    return Curves.from_rates(s, tpr, fpr, n_pos, n_neg)


# -- area errors (paper, Definition 1) -----------------------------------------------------
def _limit(x: FloatArray, xp: FloatArray, yp: FloatArray, side: str) -> FloatArray:
    """Left or right limit at ``x`` of the polyline through (xp, yp), xp non-decreasing.

    A vertical run (several points at one x) has its first point as the left limit and its
    last as the right limit.
    """
    x = np.clip(x, xp[0], xp[-1])
    if side == "left":
        i = np.searchsorted(xp, x, "left")
        exact = xp[np.minimum(i, xp.size - 1)] == x
        i0 = np.maximum(i - 1, 0)
        i1 = np.minimum(i, xp.size - 1)
    else:
        i = np.searchsorted(xp, x, "right") - 1
        exact = xp[np.maximum(i, 0)] == x
        i0 = np.maximum(i, 0)
        i1 = np.minimum(i + 1, xp.size - 1)
    x0, x1, y0, y1 = xp[i0], xp[i1], yp[i0], yp[i1]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(x1 > x0, (x - x0) / (x1 - x0), 0.0)
    value = y0 + t * (y1 - y0)
    return np.where(exact, yp[i1] if side == "left" else yp[i0], value)


def _abs_area(x1: FloatArray, y1: FloatArray, x2: FloatArray, y2: FloatArray) -> float:
    """Exact integral over [0, 1] of |curve1 - curve2| for two polylines in x."""
    xs = np.unique(np.clip(np.r_[0.0, 1.0, x1, x2], 0.0, 1.0))
    d0 = _limit(xs[:-1], x1, y1, "right") - _limit(xs[:-1], x2, y2, "right")
    d1 = _limit(xs[1:], x1, y1, "left") - _limit(xs[1:], x2, y2, "left")
    dx = np.diff(xs)
    same = d0 * d1 >= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        crossing = (d0**2 + d1**2) / (2.0 * (np.abs(d0) + np.abs(d1)))
    area = np.where(same, (np.abs(d0) + np.abs(d1)) / 2.0, np.nan_to_num(crossing))
    return float(np.sum(area * dx))


@fill_doc
def roc_area_error(
    fpr_true: FloatArray, tpr_true: FloatArray, fpr_hat: FloatArray, tpr_hat: FloatArray
) -> float:
    """``integral_0^1 |T(f) - T_hat(f)| df`` between two ROC polylines (exact; eq. 4).

    Parameters
    ----------
    {roc_polylines}

    Returns
    -------
    float
        The area between the two curves, in [0, 1].
    """
    return _abs_area(
        np.asarray(fpr_true, float),
        np.asarray(tpr_true, float),
        np.asarray(fpr_hat, float),
        np.asarray(tpr_hat, float),
    )


def _precision_at_recall(
    t: FloatArray, fpr: FloatArray, tpr: FloatArray, n_pos: float, n_neg: float
) -> FloatArray:
    f = np.interp(t, tpr, fpr)  # F(T^-1(t)) on the polyline ROC
    tp = t * n_pos
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tp + f * n_neg > 0, tp / (tp + f * n_neg), 1.0)


def pr_area_error(
    fpr_true: FloatArray,
    tpr_true: FloatArray,
    n_pos: float,
    n_neg: float,
    fpr_hat: FloatArray,
    tpr_hat: FloatArray,
    n_pos_hat: float,
    n_neg_hat: float,
    *,
    grid: int = 2**17,
) -> float:
    """``integral_0^1 |P(t) - P_hat(t)| dt`` with ``P(t) = t n+ / (t n+ + F(T^-1(t)) n-)``.

    The paper's Definition 1 (eq. 5): each PR curve comes from its ROC polyline (the
    interpolation of Davis & Goadrich, not straight lines in PR space), evaluated by the
    midpoint rule on ``grid`` recall cells (error below 1 / grid per unit of jump).

    Parameters
    ----------
    fpr_true, tpr_true : ndarray of float
        The pooled (empirical) ROC curve's points, false positive rate non-decreasing.
    n_pos, n_neg : float
        The pooled class sizes.
    fpr_hat, tpr_hat : ndarray of float
        The approximated curve's points.
    n_pos_hat, n_neg_hat : float
        The class sizes of the approximation.
    grid : int, default 2**17
        Recall cells of the midpoint rule.

    Returns
    -------
    float
        The area between the two PR curves, in [0, 1].
    """
    t = (np.arange(grid) + 0.5) / grid
    p = _precision_at_recall(
        t, np.asarray(fpr_true, float), np.asarray(tpr_true, float), n_pos, n_neg
    )
    p_hat = _precision_at_recall(
        t, np.asarray(fpr_hat, float), np.asarray(tpr_hat, float), n_pos_hat, n_neg_hat
    )
    return float(np.mean(np.abs(p - p_hat)))


@dataclass(frozen=True)
class CurveErrors:
    """Errors of approximated curves against the pooled ones (the caller holds the rows).

    ``roc_area_error`` and ``pr_area_error`` are the paper's Definition 1; ``auc_error``,
    ``pr_auc_error`` and ``ap_error`` are the absolute errors of the areas under the
    curves and of the average precision.

    Attributes
    ----------
    roc_area_error : float
        Area between the ROC curves (:func:`roc_area_error`).
    pr_area_error : float
        Area between the PR curves (:func:`pr_area_error`).
    auc_error : float
        ``|AUC - AUC_hat|``.
    pr_auc_error : float
        ``|PR AUC - PR AUC_hat|`` (trapezoidal areas).
    ap_error : float
        ``|AP - AP_hat|`` (average precision).
    """

    roc_area_error: float
    pr_area_error: float
    auc_error: float
    pr_auc_error: float
    ap_error: float

    def to_dict(self) -> dict[str, float]:
        """Return the five errors by name."""
        return asdict(self)


def curve_errors(label: Any, score: Any, curves: Curves) -> CurveErrors:
    """Every error of ``curves`` against the empirical curves of the pooled rows.

    Parameters
    ----------
    label : array-like of bool, shape (n,)
        The pooled rows' labels, True for positive.
    score : array-like of float, shape (n,)
        Their scores.
    curves : Curves
        The approximated curves.

    Returns
    -------
    CurveErrors
        The five errors.
    """
    from fedroc.metrics import average_precision, pr_auc, roc_auc, roc_curve

    y = np.asarray(label, dtype=bool)
    s = np.asarray(score, dtype=np.float64)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    fpr, tpr, _ = roc_curve(y, s)
    return CurveErrors(
        roc_area_error=roc_area_error(fpr, tpr, curves.fpr, curves.tpr),
        pr_area_error=pr_area_error(
            fpr, tpr, n_pos, n_neg, curves.fpr, curves.tpr, curves.n_pos, curves.n_neg
        ),
        auc_error=abs(curves.auc - roc_auc(y, s)),
        pr_auc_error=abs(curves.pr_auc - pr_auc(y, s)),
        ap_error=abs(curves.average_precision - average_precision(y, s)),
    )
