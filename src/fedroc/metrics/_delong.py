"""DeLong's variance of the AUC, its confidence intervals and tests.

Placement values (DeLong, DeLong & Clarke-Pearson 1988; Pepe 2003):
for a positive with score x, ``V10 = P(negative < x) + 1/2 P(negative = x)``; for a negative
with score y, ``V01 = P(positive > y) + 1/2 P(positive = y)``. The AUC is the mean of either
set, and ``var(AUC) = var(V10) / n_pos + var(V01) / n_neg`` (paper 1, eq. 2).

The fast algorithm of Sun & Xu (2014) gets the placement values from mid-ranks in
O(n log n). Here each class is sorted once and the placement values come from binary
searches of one sorted class in the other, which is the same computation without the
pooled sort.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from fedroc._results import ResultMixin, format_table
from fedroc._validation import FloatArray, check_binary, check_confidence, check_scores
from fedroc.exceptions import InputError, UndefinedMetricWarning

__all__ = [
    "DeLongResult",
    "PairedDeLongResult",
    "PlacementValues",
    "delong",
    "delong_from_counts",
    "delong_paired",
    "logit_ci",
    "logit_test_greater",
    "placement_values",
    "wald_ci",
]

CIMethod = Literal["logit", "wald"]


def _z(confidence_level: float) -> float:
    return float(stats.norm.ppf(0.5 + check_confidence(confidence_level) / 2.0))


def logit_ci(auc: float, se: float, confidence_level: float = 0.95) -> tuple[float, float]:
    """Logit-scale interval of paper 1, eq. 3, mapped back to the AUC scale.

    ``logit(AUC) +- z * se / (AUC (1 - AUC))``. Undefined (NaN) at AUC 0 or 1.
    """
    z = _z(confidence_level)
    if not 0.0 < auc < 1.0 or not math.isfinite(se):
        return (float("nan"), float("nan"))
    centre = math.log(auc / (1.0 - auc))
    half = z * se / (auc * (1.0 - auc))
    return (float(stats.logistic.cdf(centre - half)), float(stats.logistic.cdf(centre + half)))


def logit_test_greater(auc: float, se: float, a0: float) -> tuple[float, float]:
    """One-sided z-test of H0: AUC <= a0 on the logit scale, returning ``(z, p)``.

    ``z = (logit(AUC) - logit(a0)) / (se / (AUC (1 - AUC)))``; NaN where the logit scale is
    undefined (AUC 0 or 1, or no variance).
    """
    if not 0.0 < a0 < 1.0:
        raise InputError(f"a0 must lie in (0, 1); got {a0!r}")
    if not 0.0 < auc < 1.0 or not se > 0:
        return (float("nan"), float("nan"))
    scale = se / (auc * (1.0 - auc))
    z = (math.log(auc / (1 - auc)) - math.log(a0 / (1 - a0))) / scale
    return (z, float(stats.norm.sf(z)))


def wald_ci(auc: float, se: float, confidence_level: float = 0.95) -> tuple[float, float]:
    """``AUC +- z * se`` clipped to [0, 1] (pROC's DeLong interval)."""
    z = _z(confidence_level)
    if not math.isfinite(auc) or not math.isfinite(se):
        return (float("nan"), float("nan"))
    return (max(0.0, auc - z * se), min(1.0, auc + z * se))


@dataclass(frozen=True, repr=False)
class PlacementValues(ResultMixin):
    """Placement values of each class.

    Attributes
    ----------
    v10 : ndarray, shape (n_pos,)
        For each positive, the fraction of negatives below it (ties 1/2).
    v01 : ndarray, shape (n_neg,)
        For each negative, the fraction of positives above it (ties 1/2).
    """

    v10: FloatArray
    v01: FloatArray


def _placements(
    pos: FloatArray, neg: FloatArray, neg_sorted: FloatArray, pos_sorted: FloatArray
) -> tuple[FloatArray, FloatArray]:
    # Binary search of each query in the other class: left counts the strictly smaller,
    # right the smaller-or-equal; their mean counts ties 1/2.
    v10 = np.searchsorted(neg_sorted, pos, "left") + np.searchsorted(neg_sorted, pos, "right")
    v01 = np.searchsorted(pos_sorted, neg, "left") + np.searchsorted(pos_sorted, neg, "right")
    return v10 / (2.0 * neg.size), 1.0 - v01 / (2.0 * pos.size)


def placement_values(
    y_true: ArrayLike, y_score: ArrayLike, *, pos_label: Any = None
) -> PlacementValues:
    """Placement values of the positives (V10) and of the negatives (V01), in input order."""
    y, s = check_binary(y_true, y_score, pos_label=pos_label)
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        raise InputError("placement values need both classes in y_true")
    v10, v01 = _placements(pos, neg, np.sort(neg), np.sort(pos))
    return PlacementValues(v10=v10, v01=v01)


@dataclass(frozen=True, repr=False)
class DeLongResult(ResultMixin):
    """AUC with DeLong's variance.

    Attributes
    ----------
    auc : float
    variance : float
        ``var(V10) / n_pos + var(V01) / n_neg`` with sample variances (ddof 1).
    n_pos, n_neg : int
    confidence_level : float
        Level of :attr:`ci` and the default of :meth:`confidence_interval`.
    """

    auc: float
    variance: float
    n_pos: int
    n_neg: int
    confidence_level: float = 0.95
    method: str = field(default="delong")

    @property
    def se(self) -> float:
        return math.sqrt(self.variance) if self.variance >= 0 else float("nan")

    @property
    def ci(self) -> tuple[float, float]:
        """Logit-scale interval at :attr:`confidence_level`."""
        return self.confidence_interval()

    def confidence_interval(
        self, confidence_level: float | None = None, *, method: CIMethod = "logit"
    ) -> tuple[float, float]:
        """``(low, high)``: logit-scale (paper 1 eq. 3, default) or Wald (pROC)."""
        level = self.confidence_level if confidence_level is None else confidence_level
        if method == "logit":
            return logit_ci(self.auc, self.se, level)
        if method == "wald":
            return wald_ci(self.auc, self.se, level)
        raise InputError(f"method must be 'logit' or 'wald'; got {method!r}")

    def test_greater(self, a0: float) -> tuple[float, float]:
        """One-sided test of H0: AUC <= a0 against H1: AUC > a0 on the logit scale.

        Returns ``(z, p_value)``. Rejecting at level alpha when ``p < alpha`` is the rule of
        paper 1 section 3.3 (``logit(a0)`` below the whole two-sided (1 - 2 alpha) logit
        interval).
        """
        return logit_test_greater(self.auc, self.se, a0)

    def summary(self) -> str:
        level = self.confidence_level
        return format_table(
            [
                ("AUC", self.auc),
                ("SE (DeLong)", self.se),
                (f"{level:.0%} CI (logit)", self.confidence_interval(method="logit")),
                (f"{level:.0%} CI (Wald)", self.confidence_interval(method="wald")),
                ("positives", self.n_pos),
                ("negatives", self.n_neg),
            ],
            title="AUC with DeLong confidence interval",
        )


def _result_from_placements(
    v10: FloatArray, v01: FloatArray, confidence_level: float
) -> DeLongResult:
    n_pos, n_neg = v10.size, v01.size
    auc = float(v10.mean())
    if n_pos < 2 or n_neg < 2:
        warnings.warn(
            f"DeLong's variance needs at least 2 samples per class (got {n_pos} positive, "
            f"{n_neg} negative); it is returned as NaN",
            UndefinedMetricWarning,
            stacklevel=3,
        )
        variance = float("nan")
    else:
        variance = float(v10.var(ddof=1) / n_pos + v01.var(ddof=1) / n_neg)
    return DeLongResult(auc, variance, n_pos, n_neg, check_confidence(confidence_level))


def delong(
    y_true: ArrayLike,
    y_score: ArrayLike,
    *,
    pos_label: Any = None,
    confidence_level: float = 0.95,
) -> DeLongResult:
    """AUC and its DeLong variance in O(n log n), sorting each class once.

    With one class only, warns and returns NaN for the AUC and its variance.

    Examples
    --------
    >>> r = delong([0, 0, 1, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.2, 0.9])
    >>> round(r.auc, 4)
    0.8889
    """
    y, s = check_binary(y_true, y_score, pos_label=pos_label)
    n_pos = int(np.count_nonzero(y))
    if n_pos == 0 or n_pos == y.size:
        warnings.warn(
            "only one class in y_true: the AUC and its variance are NaN",
            UndefinedMetricWarning,
            stacklevel=2,
        )
        return DeLongResult(float("nan"), float("nan"), n_pos, y.size - n_pos, confidence_level)
    pos = np.sort(s[y])
    neg = np.sort(s[~y])
    v10, v01 = _placements(pos, neg, neg, pos)
    return _result_from_placements(v10, v01, confidence_level)


def delong_from_counts(
    pos_counts: ArrayLike, neg_counts: ArrayLike, *, confidence_level: float = 0.95
) -> DeLongResult:
    """DeLong's AUC and variance from per-bin class counts.

    ``pos_counts[k]`` and ``neg_counts[k]`` count the positives and negatives whose score
    falls in bin k, bins ordered by increasing score. Samples in one bin are treated as
    tied, so this equals :func:`delong` on the scores replaced by their bin index. Counts
    add up across sites, so sites can release them (through secure aggregation) instead of
    scores. Counts may be non-integer (noisy, post-processed).
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
    n_pos, n_neg = p.sum(), q.sum()
    if n_pos <= 0 or n_neg <= 0:
        warnings.warn(
            "one class has no counts: the AUC is NaN", UndefinedMetricWarning, stacklevel=2
        )
        return DeLongResult(float("nan"), float("nan"), int(n_pos), int(n_neg), confidence_level)
    neg_below = np.cumsum(q) - q
    pos_above = n_pos - np.cumsum(p)
    v10 = (neg_below + 0.5 * q) / n_neg  # one value per bin, weight p
    v01 = (pos_above + 0.5 * p) / n_pos  # one value per bin, weight q
    auc = float(np.dot(p, v10) / n_pos)
    if n_pos < 2 or n_neg < 2:
        variance = float("nan")
    else:
        var10 = float(np.dot(p, (v10 - auc) ** 2) / (n_pos - 1))
        var01 = float(np.dot(q, (v01 - auc) ** 2) / (n_neg - 1))
        variance = var10 / n_pos + var01 / n_neg
    return DeLongResult(
        auc, variance, round(n_pos), round(n_neg), check_confidence(confidence_level)
    )


@dataclass(frozen=True, repr=False)
class PairedDeLongResult(ResultMixin):
    """Comparison of two scores on the same cases (DeLong et al. 1988).

    Attributes
    ----------
    auc_a, auc_b : float
    covariance : ndarray, shape (2, 2)
        Covariance matrix of (AUC_a, AUC_b).
    """

    auc_a: float
    auc_b: float
    covariance: NDArray[np.float64]
    n_pos: int
    n_neg: int
    confidence_level: float = 0.95

    @property
    def difference(self) -> float:
        return self.auc_a - self.auc_b

    @property
    def se_difference(self) -> float:
        c = self.covariance
        return math.sqrt(max(0.0, float(c[0, 0] + c[1, 1] - 2 * c[0, 1])))

    @property
    def z(self) -> float:
        se = self.se_difference
        return self.difference / se if se > 0 else float("nan")

    @property
    def p_value(self) -> float:
        """Two-sided p-value of H0: AUC_a = AUC_b."""
        return float(2 * stats.norm.sf(abs(self.z))) if math.isfinite(self.z) else float("nan")

    def confidence_interval(self, confidence_level: float | None = None) -> tuple[float, float]:
        """Wald interval of AUC_a - AUC_b."""
        z = _z(self.confidence_level if confidence_level is None else confidence_level)
        d, se = self.difference, self.se_difference
        return (d - z * se, d + z * se)

    def summary(self) -> str:
        return format_table(
            [
                ("AUC a", self.auc_a),
                ("AUC b", self.auc_b),
                ("difference", self.difference),
                ("SE of difference", self.se_difference),
                (f"{self.confidence_level:.0%} CI", self.confidence_interval()),
                ("z", self.z),
                ("p (two-sided)", self.p_value),
            ],
            title="Paired DeLong comparison",
        )


def delong_paired(
    y_true: ArrayLike,
    score_a: ArrayLike,
    score_b: ArrayLike,
    *,
    pos_label: Any = None,
    confidence_level: float = 0.95,
) -> PairedDeLongResult:
    """Compare the AUCs of two scores computed on the same cases."""
    y, a = check_binary(y_true, score_a, pos_label=pos_label, name_score="score_a")
    b = check_scores(score_b, "score_b")
    if b.size != a.size:
        raise InputError(f"score_a has {a.size} elements but score_b has {b.size}")
    n_pos = int(np.count_nonzero(y))
    n_neg = y.size - n_pos
    if min(n_pos, n_neg) < 2:
        raise InputError(
            f"the paired comparison needs at least 2 samples per class; got {n_pos} "
            f"positive and {n_neg} negative"
        )
    v10 = np.empty((2, n_pos))
    v01 = np.empty((2, n_neg))
    for k, s in enumerate((a, b)):
        pos, neg = s[y], s[~y]
        v10[k], v01[k] = _placements(pos, neg, np.sort(neg), np.sort(pos))
    cov = np.cov(v10) / n_pos + np.cov(v01) / n_neg
    return PairedDeLongResult(
        float(v10[0].mean()),
        float(v10[1].mean()),
        cov,
        n_pos,
        n_neg,
        check_confidence(confidence_level),
    )
