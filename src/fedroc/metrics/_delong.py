"""DeLong's variance of the AUC, its confidence intervals and tests.

Placement values (DeLong, DeLong & Clarke-Pearson 1988; Pepe 2003):
for a positive with score x, ``V10 = P(negative < x) + 1/2 P(negative = x)``; for a negative
with score y, ``V01 = P(positive > y) + 1/2 P(positive = y)``. The AUC is the mean of either
set, and ``var(AUC) = var(V10) / n_pos + var(V01) / n_neg`` (paper 1, eq. 2).

The fast algorithm of Sun & Xu (2014) gets the placement values from mid-ranks in
O(n log n). Here they come from the class counts at each distinct score
(:class:`~fedroc.metrics.ScoreCounts`): rows with equal scores share one placement value,
so the variances are count-weighted sums over the distinct scores, the same computation
without per-row work. The functions below are thin layers on those counts.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, stats

from fedroc._docs import fill_doc
from fedroc._results import ResultMixin, format_table
from fedroc._validation import BoolArray, FloatArray, check_binary, check_confidence, check_scores
from fedroc.exceptions import InputError
from fedroc.metrics._counts import BootstrapAUCResult, PlacementSums, ScoreCounts
from fedroc.metrics._scored import score_counts_metric

__all__ = [
    "DeLongResult",
    "PairedDeLongResult",
    "PlacementValues",
    "TiePattern",
    "auc_ci",
    "delong",
    "delong_from_counts",
    "delong_paired",
    "logit_ci",
    "logit_test_greater",
    "mover_ci",
    "placement_values",
    "score_ci",
    "small_sample_ci",
    "wald_ci",
]

CIMethod = Literal["auto", "logit", "wald", "score"]
AUCCIMethod = Literal["delong", "bootstrap"]


def _z(confidence_level: float) -> float:
    return float(stats.norm.ppf(0.5 + check_confidence(confidence_level) / 2.0))


@fill_doc
def logit_ci(auc: float, se: float, confidence_level: float = 0.95) -> tuple[float, float]:
    """Compute the logit-scale interval of paper 1, eq. 3, mapped back to the AUC scale.

    ``logit(AUC) +- z * se / (AUC (1 - AUC))``. Unlike :func:`wald_ci` it stays inside
    (0, 1) and is asymmetric near the bounds.

    Parameters
    ----------
    auc : float
        Estimated AUC.
    se : float
        Its standard error (for instance DeLong's, :attr:`DeLongResult.se`).
    {confidence_level}

    Returns
    -------
    low, high : float
        NaN at AUC 0 or 1, or when ``se`` is not finite.

    Examples
    --------
    >>> [round(v, 4) for v in logit_ci(0.8, 0.05)]
    [0.6843, 0.8807]
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

    Parameters
    ----------
    auc : float
        Estimated AUC; the test is defined for AUC in (0, 1).
    se : float
        Its standard error (for instance DeLong's); the test needs it positive.
    a0 : float
        The AUC of the null hypothesis, in (0, 1).

    Returns
    -------
    z : float
        The test statistic.
    p : float
        One-sided p-value, ``P(Z > z)``.

    Raises
    ------
    InputError
        ``a0`` is not in (0, 1).
    """
    if not 0.0 < a0 < 1.0:
        raise InputError(f"a0 must lie in (0, 1); got {a0!r}")
    if not 0.0 < auc < 1.0 or not se > 0:
        return (float("nan"), float("nan"))
    scale = se / (auc * (1.0 - auc))
    z = (math.log(auc / (1 - auc)) - math.log(a0 / (1 - a0))) / scale
    return (z, float(stats.norm.sf(z)))


@fill_doc
def wald_ci(auc: float, se: float, confidence_level: float = 0.95) -> tuple[float, float]:
    """Compute ``AUC +- z * se`` clipped to [0, 1] (pROC's DeLong interval).

    Parameters
    ----------
    auc : float
        Estimated AUC.
    se : float
        Its standard error.
    {confidence_level}

    Returns
    -------
    low, high : float
        NaN when ``auc`` or ``se`` is not finite.

    Examples
    --------
    >>> [round(v, 4) for v in wald_ci(0.97, 0.03)]
    [0.9112, 1.0]
    """
    z = _z(confidence_level)
    if not math.isfinite(auc) or not math.isfinite(se):
        return (float("nan"), float("nan"))
    return (max(0.0, auc - z * se), min(1.0, auc + z * se))


# Below this many rows of a class the default interval (``method="auto"``) is the union of
# the logit and score intervals; from it on, the logit interval alone. fedroc's measurements
# (scripts/results/delong_small_sample.md) found the logit interval below its level (0.81 to
# 0.94 at 95%) with 5 to 100 rows of the smaller class at a high AUC, and within 1.5 Monte
# Carlo SEs of it with 100 rows at AUC 0.95 and 300 at AUC 0.99.
SMALL_CLASS = 100


@dataclass(frozen=True, repr=False, eq=False)
class TiePattern(ResultMixin):
    """Where the rows tie, by increasing score: the data the score interval's model keeps.

    Consecutive untied rows (one row at a score) form one untied segment; each score held
    by more than one row (both classes together) is a tied segment. Only the totals of
    both classes enter, so the pattern says nothing of where the positives are. The
    segments are found on first use (:attr:`rows`, :attr:`tied`): a DeLong result keeps
    its pattern for the score interval, which only a small class or an explicit request
    needs, and finding them costs a pass over every distinct score.

    Parameters
    ----------
    counts : ndarray of float64, shape (n_levels,)
        Rows at each distinct score (both classes), by increasing score; zeros are skipped.

    Attributes
    ----------
    rows : ndarray of float64, shape (n_segments,)
        Rows in each segment, by increasing score.
    tied : ndarray of bool, shape (n_segments,)
        Whether the segment is one tied score (True) or a run of untied rows (False).

    Examples
    --------
    >>> t = TiePattern.from_level_counts([1, 1, 3, 1, 2])
    >>> t.rows.tolist(), t.tied.tolist()
    ([2.0, 3.0, 1.0, 2.0], [False, True, False, True])
    """

    counts: FloatArray

    @cached_property
    def _segments(self) -> tuple[FloatArray, BoolArray]:
        c = self.counts[self.counts > 0]
        if c.size == 0:
            return np.zeros(0), np.zeros(0, dtype=bool)
        tied = c > 1.0
        start = tied | np.r_[True, tied[:-1]]
        rows = np.bincount(np.cumsum(start) - 1, weights=c).astype(np.float64)
        return rows, tied[start]

    @property
    def rows(self) -> FloatArray:
        """Rows in each segment, by increasing score."""
        return self._segments[0]

    @property
    def tied(self) -> BoolArray:
        """Whether each segment is one tied score."""
        return self._segments[1]

    @classmethod
    def from_level_counts(cls, counts: ArrayLike) -> TiePattern:
        """Build the pattern from the rows at each distinct score, by increasing score.

        Scores without a tie are one untied segment, whatever their number: the pattern of
        :meth:`untied` (so a result on continuous scores keeps no count per score).
        """
        c = np.asarray(counts, dtype=np.float64).ravel()
        if c.size and c.max() <= 1.0 and c.max() > 0.0:
            return cls.untied()
        return cls(c)

    @classmethod
    def from_segments(cls, rows: ArrayLike, tied: ArrayLike) -> TiePattern:
        """Build the pattern from its segments (:attr:`rows`, :attr:`tied`).

        Examples
        --------
        >>> TiePattern.from_segments([2, 3, 1], [False, True, False]).counts.tolist()
        [1.0, 1.0, 3.0, 1.0]
        """
        r = np.asarray(rows, dtype=np.float64).ravel()
        t = np.asarray(tied, dtype=bool).ravel()
        if r.shape != t.shape or np.any(r < 1) or np.any(r[t] < 2) or np.any(r != np.round(r)):
            raise InputError(
                "rows and tied must have one entry per segment, whole numbers of rows, a tied "
                "segment at least two"
            )
        return cls(np.repeat(np.where(t, r, 1.0), np.where(t, 1, r.astype(np.int64))))

    @classmethod
    def untied(cls) -> TiePattern:
        """Pattern of scores without ties (the continuous model of Hanley and McNeil)."""
        return cls(np.ones(1))


def _lehmann_cuts(lam: float, prevalence: float, above: FloatArray) -> FloatArray:
    """Solve ``(1 - pi) v + pi v**lam = above`` for v in (0, 1], element-wise.

    ``v = 1 - u`` is the negatives' survival at the latent cut u whose pooled survival is
    ``above``. Newton on log v: the left side's log is convex and increasing in log v, and
    the start makes it non-negative, so the iterates decrease monotonically to the root.
    """
    target = np.log(above)
    log_v = target / max(1.0, lam)
    for _ in range(200):
        a = (1.0 - prevalence) * np.exp(log_v)
        b = prevalence * np.exp(lam * log_v)
        step = (np.log(a + b) - target) * (a + b) / (a + lam * b)
        log_v = log_v - step
        if not np.any(np.abs(step) > 1e-14 * np.maximum(1.0, np.abs(log_v))):
            break
    return np.exp(log_v)


def _lehmann_auc_variance(
    latent_auc: float, ties: TiePattern, n_pos: float, n_neg: float
) -> tuple[float, float]:
    """AUC and variance of the AUC estimate under the tied Lehmann model (ties 1/2).

    The model: on a latent scale the negatives are uniform on (0, 1) and the positives'
    survival is ``(1 - u)**lam``, ``lam = (1 - A) / A`` (Hanley and McNeil's negative
    exponential model, whose AUC is A); the observed scores are the latent ones with each
    tied segment of ``ties`` collapsed to one value, the cuts placed where the model's
    pooled distribution (prevalence ``n_pos / (n_pos + n_neg)``) has the observed share of
    rows. The variance is the exact one of the Mann-Whitney AUC (ties 1/2) under that model,
    ``(s2 + (N* - 1) (xi10 + xi01)) / (n_pos n_neg)`` with Newcombe's ``N* = (n_pos + n_neg)
    / 2``; without ties it is Newcombe's method 5 variance.
    """
    lam = (1.0 - latent_auc) / latent_auc
    prevalence = n_pos / (n_pos + n_neg)
    above = 1.0 - np.cumsum(ties.rows)[:-1] / ties.rows.sum()
    v = np.concatenate(([1.0], _lehmann_cuts(lam, prevalence, np.clip(above, 1e-300, 1.0)), [0.0]))
    va, vb = v[:-1], v[1:]
    pa, pb = va**lam, vb**lam
    f0, f1 = va - vb, pa - pb  # mass of each segment: negatives, positives
    l1, l2 = lam / (lam + 1.0), lam / (lam + 2.0)
    below_pos = 1.0 - va + f0 / 2.0  # placement of a positive in a tied segment
    above_neg = pb + f1 / 2.0  # placement of a negative in a tied segment
    tied = ties.tied
    # Untied segments: integrals over the latent scale in closed form.
    auc = np.where(tied, f1 * below_pos, pa * (1.0 - l1 * va) - pb * (1.0 - l1 * vb)).sum()
    q10 = np.where(
        tied,
        f1 * below_pos**2,
        pa * (1.0 - 2.0 * l1 * va + l2 * va * va) - pb * (1.0 - 2.0 * l1 * vb + l2 * vb * vb),
    ).sum()
    q01 = np.where(
        tied, f0 * above_neg**2, (va ** (2 * lam + 1) - vb ** (2 * lam + 1)) / (2 * lam + 1)
    ).sum()
    tie_prob = np.where(tied, f1 * f0, 0.0).sum()
    s2 = auc - tie_prob / 4.0 - auc * auc
    half = (n_pos + n_neg) / 2.0 - 1.0
    variance = (s2 + half * (q10 - auc * auc + q01 - auc * auc)) / (n_pos * n_neg)
    return float(auc), max(float(variance), 0.0)


@fill_doc
def score_ci(
    auc: float,
    n_pos: float,
    n_neg: float,
    confidence_level: float = 0.95,
    *,
    ties: TiePattern | None = None,
) -> tuple[float, float]:
    """Score interval of the AUC with a model variance that knows the ties.

    The set of AUCs A the z-test ``(AUC - A)**2 <= z**2 V(A)`` does not reject, where V(A)
    is the variance the AUC estimate would have if A were the truth: Newcombe's (2006)
    method 5 (Hanley and McNeil's exponential model, ``N* = (n_pos + n_neg) / 2``), with
    the scores tied as ``ties`` says (:func:`_lehmann_auc_variance`). Without ties it is
    Newcombe's method 5; with ties it is narrower (by 3% to 23% on the 5-level designs of
    scripts/delong_small_sample.py).
    The variance is taken at the candidate AUC, not at the estimate, so a sample that misses
    the small class's rare extreme rows (a high AUC with a small DeLong SE) does not also
    narrow the interval.

    Parameters
    ----------
    auc : float
        Estimated AUC (ties 1/2).
    n_pos, n_neg : float
        Rows of each class.
    {confidence_level}
    ties : TiePattern, optional
        Where the rows tie (:meth:`TiePattern.from_level_counts`); None: no ties.

    Returns
    -------
    low, high : float
        NaN when ``auc`` is not finite or a class has no rows.

    Examples
    --------
    >>> [round(v, 4) for v in score_ci(0.95, 15, 285)]
    [0.8487, 0.9835]
    """
    z = _z(confidence_level)
    if not math.isfinite(auc) or not (n_pos > 0 and n_neg > 0):
        return (float("nan"), float("nan"))
    pattern = TiePattern.untied() if ties is None or ties.rows.size == 0 else ties

    def model(latent: float) -> tuple[float, float]:
        return _lehmann_auc_variance(latent, pattern, n_pos, n_neg)

    def excess(latent: float) -> float:
        a, v = model(latent)
        return (auc - a) ** 2 - z * z * v

    lo_lat, hi_lat = 1e-9, 1.0 - 1e-9
    if model(lo_lat)[0] >= auc:
        centre = lo_lat
    elif model(hi_lat)[0] <= auc:
        centre = hi_lat
    else:
        centre = optimize.brentq(lambda t: model(t)[0] - auc, lo_lat, hi_lat, xtol=1e-13)
    inside = excess(centre) <= 0
    bounds = []
    for edge in (lo_lat, hi_lat):
        if excess(edge) <= 0:
            bounds.append(model(edge)[0])
        elif not inside:
            bounds.append(auc)
        else:
            a, b = sorted((edge, centre))
            bounds.append(model(optimize.brentq(excess, a, b, xtol=1e-12))[0])
    return (min(bounds[0], auc), max(bounds[1], auc))


@fill_doc
def small_sample_ci(
    auc: float,
    se: float,
    n_pos: float,
    n_neg: float,
    confidence_level: float = 0.95,
    *,
    ties: TiePattern | None = None,
) -> tuple[float, float]:
    """Fedroc's default AUC interval: logit, joined with the score interval for a small class.

    With at least ``SMALL_CLASS`` (100) rows of each class, the logit interval of paper 1
    eq. 3 (:func:`logit_ci`). Below, the smallest interval holding both the logit interval
    and :func:`score_ci` (their union): in scripts/delong_small_sample.py the logit
    interval covered 0.81 to 0.94 at 95% with 5 to 100 rows of the smaller class at a high
    AUC, the union 0.955 to 0.999 in every binormal design with equal SDs where it engages
    (0.935 and 0.945 with the positives' SD twice the negatives'; too wide, 0.999, with it
    half the negatives'). The score interval alone undercovers 5-level scores with 50 rows
    of each class at AUC 0.95 (0.895), the logit interval alone the small classes: the
    union covers both. NaN where the logit interval is (AUC 0 or 1, no variance).

    Parameters
    ----------
    auc : float
        Estimated AUC.
    se : float
        Its DeLong standard error.
    n_pos, n_neg : float
        Rows of each class.
    {confidence_level}
    ties : TiePattern, optional
        Where the rows tie; None: no ties (the score interval is then Newcombe's method 5).

    Returns
    -------
    low, high : float

    Examples
    --------
    >>> [round(v, 4) for v in small_sample_ci(0.95, 0.012, 15, 285)]
    [0.8487, 0.9835]
    >>> small_sample_ci(0.8, 0.03, 200, 800) == logit_ci(0.8, 0.03)
    True
    """
    low, high = logit_ci(auc, se, confidence_level)
    if not (math.isfinite(low) and math.isfinite(high)) or min(n_pos, n_neg) >= SMALL_CLASS:
        return (low, high)
    s_low, s_high = score_ci(auc, n_pos, n_neg, confidence_level, ties=ties)
    return (min(low, s_low), max(high, s_high))


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


@fill_doc
def placement_values(
    y_true: ArrayLike, y_score: ArrayLike, *, pos_label: Any = None
) -> PlacementValues:
    """Placement values of the positives (V10) and of the negatives (V01), in input order.

    Parameters
    ----------
    {y_true}
    {y_score}
    {pos_label}

    Returns
    -------
    PlacementValues
        ``v10`` of the positives and ``v01`` of the negatives, each in the order of the rows.

    Raises
    ------
    InputError
        ``y_true`` has one class only (or the inputs are invalid).

    Examples
    --------
    >>> pv = placement_values([0, 1, 1, 0], [0.1, 0.5, 0.9, 0.5])
    >>> pv.v10.tolist(), pv.v01.tolist()
    ([0.75, 1.0], [1.0, 0.75])
    """
    y, s = check_binary(y_true, y_score, pos_label=pos_label)
    if y.all() or not y.any():
        raise InputError("placement values need both classes in y_true")
    v10, v01 = ScoreCounts.from_scores(y, s).placements_at(y, s)
    return PlacementValues(v10=v10, v01=v01)


@dataclass(frozen=True, repr=False)
class DeLongResult(ResultMixin):
    """AUC with DeLong's variance.

    Attributes
    ----------
    auc : float
        The AUC (NaN with one class only).
    variance : float
        ``var(V10) / n_pos + var(V01) / n_neg`` with sample variances (ddof 1).
    n_pos, n_neg : int
        Positives and negatives (total weights when weighted).
    confidence_level : float
        Level of :attr:`ci` and the default of :meth:`confidence_interval`.
    method : str
        "delong", for reports.
    ties : TiePattern or None
        Where the rows tie (the score interval's model); None: taken as untied.
    """

    auc: float
    variance: float
    n_pos: int
    n_neg: int
    confidence_level: float = 0.95
    method: str = field(default="delong")
    ties: TiePattern | None = field(default=None, repr=False, compare=False)

    @property
    def se(self) -> float:
        """Standard error, ``sqrt(variance)``; NaN when the variance is."""
        return math.sqrt(self.variance) if self.variance >= 0 else float("nan")

    @property
    def ci(self) -> tuple[float, float]:
        """The default interval (``method="auto"``) at :attr:`confidence_level`."""
        return self.confidence_interval()

    def confidence_interval(
        self, confidence_level: float | None = None, *, method: CIMethod = "auto"
    ) -> tuple[float, float]:
        """``(low, high)`` of the AUC by ``method``.

        "auto" (default): :func:`small_sample_ci`, the logit interval with at least 100 rows
        of each class and its union with the score interval below; "logit": paper 1 eq. 3;
        "wald": pROC's; "score": :func:`score_ci` with :attr:`ties`.
        """
        level = self.confidence_level if confidence_level is None else confidence_level
        if method == "auto":
            return small_sample_ci(self.auc, self.se, self.n_pos, self.n_neg, level, ties=self.ties)
        if method == "logit":
            return logit_ci(self.auc, self.se, level)
        if method == "wald":
            return wald_ci(self.auc, self.se, level)
        if method == "score":
            return score_ci(self.auc, self.n_pos, self.n_neg, level, ties=self.ties)
        raise InputError(f"method must be 'auto', 'logit', 'wald' or 'score'; got {method!r}")

    def to_dict(self) -> dict[str, Any]:
        """Return the result as JSON-ready types, without :attr:`ties` (a count per score)."""
        out = super().to_dict()
        del out["ties"]
        return out

    def test_greater(self, a0: float) -> tuple[float, float]:
        """One-sided test of H0: AUC <= a0 against H1: AUC > a0 on the logit scale.

        Returns ``(z, p_value)``. Rejecting at level alpha when ``p < alpha`` is the rule of
        paper 1 section 3.3 (``logit(a0)`` below the whole two-sided (1 - 2 alpha) logit
        interval).
        """
        return logit_test_greater(self.auc, self.se, a0)

    def summary(self) -> str:
        """Format the AUC, its DeLong SE and logit and Wald intervals as a table."""
        level = self.confidence_level
        return format_table(
            [
                ("AUC", self.auc),
                ("SE (DeLong)", self.se),
                (f"{level:.0%} CI (default)", self.confidence_interval()),
                (f"{level:.0%} CI (logit)", self.confidence_interval(method="logit")),
                (f"{level:.0%} CI (Wald)", self.confidence_interval(method="wald")),
                ("positives", self.n_pos),
                ("negatives", self.n_neg),
            ],
            title="AUC with DeLong confidence interval",
        )


@score_counts_metric
def delong(counts: ScoreCounts, *, confidence_level: float = 0.95) -> DeLongResult:
    """AUC and its DeLong variance in O(n log n).

    With one class only, warns and returns NaN for the AUC and its variance; with fewer
    than two rows of a class the variance is NaN (with a warning). Weights act as frequency
    weights (a weight of 2 counts a row twice).

    Parameters
    ----------
    confidence_level : float, default 0.95
        Of the result's interval.

    Returns
    -------
    DeLongResult
        The AUC, its variance and the class sizes; ``ci`` is the default interval (logit,
        joined with the score interval below 100 rows of a class: :func:`small_sample_ci`).

    Examples
    --------
    >>> r = delong([0, 0, 1, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.2, 0.9])
    >>> round(r.auc, 4), round(r.se, 4)
    (0.8889, 0.1571)
    """
    return counts.delong(confidence_level=confidence_level)


@fill_doc
def auc_ci(
    y_true: ArrayLike,
    y_score: ArrayLike,
    *,
    ci_method: AUCCIMethod = "delong",
    confidence_level: float = 0.95,
    n_bootstraps: int = 2000,
    seed: int | None = None,
    pos_label: Any = None,
) -> DeLongResult | BootstrapAUCResult:
    """AUC with a confidence interval by DeLong's variance or a stratified bootstrap.

    Parameters
    ----------
    {y_true}
    {y_score}
    ci_method : {"delong", "bootstrap"}, default "delong"
        "delong": :func:`delong` (:func:`small_sample_ci` by default; logit, Wald or score on
        request).
        "bootstrap": positives and negatives resampled with replacement within their class
        (pROC's ``ci.auc(method="bootstrap", boot.stratified=TRUE)``), percentile interval.
    confidence_level : float, default 0.95
    n_bootstraps : int, default 2000
        Bootstrap replicates (pROC's ``boot.n``).
    seed : int, optional
        Seed of the bootstrap's generator; the same seed gives the same interval.
    {pos_label}

    Returns
    -------
    DeLongResult or BootstrapAUCResult
        Both have ``auc``, ``se``, ``ci`` and ``confidence_interval()``.

    Examples
    --------
    >>> y, s = [0, 0, 1, 1, 0, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.2, 0.9, 0.5, 0.6]
    >>> r = auc_ci(y, s, ci_method="bootstrap", n_bootstraps=1000, seed=0)
    >>> r.auc, r.confidence_interval() == auc_ci(
    ...     y, s, ci_method="bootstrap", n_bootstraps=1000, seed=0).confidence_interval()
    (0.875, True)
    """
    counts = ScoreCounts.from_scores(y_true, y_score, pos_label=pos_label)
    if ci_method == "delong":
        return counts.delong(confidence_level=confidence_level)
    if ci_method == "bootstrap":
        return counts.bootstrap_auc(n_bootstraps, seed=seed, confidence_level=confidence_level)
    raise InputError(f"ci_method must be 'delong' or 'bootstrap'; got {ci_method!r}")


@fill_doc
def delong_from_counts(
    pos_counts: ArrayLike, neg_counts: ArrayLike, *, confidence_level: float = 0.95
) -> DeLongResult:
    """DeLong's AUC and variance from per-bin class counts.

    ``pos_counts[k]`` and ``neg_counts[k]`` count the positives and negatives whose score
    falls in bin k, bins ordered by increasing score. Samples in one bin are treated as
    tied, so this equals :func:`delong` on the scores replaced by their bin index. Counts
    add up across sites, so sites can release them (through secure aggregation) instead of
    scores. Counts may be non-integer (noisy, post-processed).

    Parameters
    ----------
    pos_counts : array-like of shape (n_bins,)
        Positives in each bin, bins by increasing score.
    neg_counts : array-like of shape (n_bins,)
        Negatives in each bin.
    {confidence_level}

    Returns
    -------
    DeLongResult
        The AUC of the binned scores and its DeLong variance.

    Examples
    --------
    >>> round(delong_from_counts([0, 1, 3], [2, 2, 0]).auc, 4)
    0.9375
    """
    counts = ScoreCounts.from_bins(pos_counts, neg_counts)
    return counts.delong(confidence_level=confidence_level)


def _paired_class_sizes(n_pos: float, n_neg: float) -> tuple[int, int]:
    """Return the class sizes of a paired comparison; refuse fewer than two rows per class."""
    p, n = round(n_pos), round(n_neg)
    if min(p, n) < 2:
        raise InputError(
            f"the paired comparison needs at least 2 rows per class; got {p} positive and {n} "
            "negative"
        )
    return p, n


PairedCIMethod = Literal["auto", "wald", "mover"]


def mover_ci(
    auc_a: float,
    auc_b: float,
    ci_a: tuple[float, float],
    ci_b: tuple[float, float],
    r: float,
) -> tuple[float, float]:
    """MOVER interval of ``auc_a - auc_b`` from each AUC's interval and their correlation.

    The method of variance estimates recovery (Zou & Donner 2008; for correlated AUCs Zou &
    Yue 2013): with ``(l_a, u_a)`` and ``(l_b, u_b)`` the two AUCs' own intervals and r the
    correlation of the two estimates,
    ``L = d - sqrt((a - l_a)^2 + (u_b - b)^2 - 2 r (a - l_a)(u_b - b))`` and
    ``U = d + sqrt((u_a - a)^2 + (b - l_b)^2 - 2 r (u_a - a)(b - l_b))``, ``d = a - b``.
    The difference's interval inherits each interval's asymmetry: its lower bound takes the
    arms that lower the difference (a's lower, b's upper), its upper bound the others.

    Parameters
    ----------
    auc_a, auc_b : float
        The two AUCs.
    ci_a, ci_b : tuple of float
        Their intervals ``(low, high)``, each holding its AUC.
    r : float
        Correlation of the two AUC estimates, clipped to [-1, 1].

    Returns
    -------
    low, high : float
        NaN when an input is not finite.

    Examples
    --------
    >>> [round(v, 4) for v in mover_ci(0.9, 0.8, (0.85, 0.95), (0.7, 0.9), 0.0)]
    [-0.0118, 0.2118]
    """
    (la, ua), (lb, ub) = ci_a, ci_b
    if not all(math.isfinite(v) for v in (auc_a, auc_b, la, ua, lb, ub, r)):
        return (float("nan"), float("nan"))
    r = min(1.0, max(-1.0, r))
    da, db = auc_a - la, ub - auc_b
    ea, eb = ua - auc_a, auc_b - lb
    low = da * da + db * db - 2.0 * r * da * db
    high = ea * ea + eb * eb - 2.0 * r * ea * eb
    d = auc_a - auc_b
    return (d - math.sqrt(max(0.0, low)), d + math.sqrt(max(0.0, high)))


@dataclass(frozen=True, repr=False)
class PairedDeLongResult(ResultMixin):
    """Comparison of two scores on the same cases (DeLong et al. 1988).

    The default interval of the difference (:attr:`ci`, ``method="auto"``) follows the
    single-AUC default (:func:`small_sample_ci`): with at least ``SMALL_CLASS`` (100) rows
    of each class, the Wald interval ``d +- z se`` of DeLong's paired variance; below, the
    MOVER interval (:func:`mover_ci`) built from the two scores' default single-AUC
    intervals and DeLong's correlation of the two AUCs. In scripts/paired_small_sample.py
    (continuous scores, correlation 0.6) the Wald interval covered 0.897 at 15 positives
    with AUCs 0.95 and 0.90, missing almost only with the truth above it; the MOVER interval
    0.978 there (1.6 times as wide) and 0.950 to 0.973 in the other small-class cells.
    Where a single-AUC interval is undefined (an AUC of 0 or 1, no variance) the default is
    the Wald interval.

    The test (:attr:`z`, :attr:`p_value`) is DeLong's Wald z-test at every size, so below
    100 rows of a class the default interval and the test can disagree: the interval may
    hold 0 while ``p < 1 - confidence_level``, or the other way round. The test is
    symmetric about the estimate with DeLong's standard error; the MOVER interval takes
    each AUC's skew near 1 and the score interval's wider model variance (which does not
    shrink when a small class misses its extreme rows). The Wald interval, the test's own,
    stays available as ``confidence_interval(method="wald")``.

    Attributes
    ----------
    auc_a, auc_b : float
        AUC of score a and of score b.
    covariance : ndarray, shape (2, 2)
        Covariance matrix of (AUC_a, AUC_b).
    n_pos, n_neg : int
        Positives and negatives (at least 2 of each).
    confidence_level : float
        Level of :attr:`ci` and the default of :meth:`confidence_interval`.
    ties : tuple of (TiePattern or None)
        Where the rows of each score tie (the score interval's model); None: untied.
    """

    auc_a: float
    auc_b: float
    covariance: NDArray[np.float64]
    n_pos: int
    n_neg: int
    confidence_level: float = 0.95
    ties: tuple[TiePattern | None, TiePattern | None] = field(
        default=(None, None), repr=False, compare=False
    )

    @classmethod
    def from_sums(
        cls,
        sums: PlacementSums,
        confidence_level: float = 0.95,
        *,
        ties: tuple[TiePattern | None, TiePattern | None] = (None, None),
    ) -> PairedDeLongResult:
        """Compare the two scores of ``sums`` (from rows or from pooled joint counts).

        ``ties``: where each score's rows tie, for the default interval with a small class.
        """
        n_pos, n_neg = _paired_class_sizes(sums.n_pos, sums.n_neg)
        auc_a, auc_b = (float(v) for v in sums.auc)
        return cls(auc_a, auc_b, sums.covariance(), n_pos, n_neg, confidence_level, ties=ties)

    @property
    def difference(self) -> float:
        """``auc_a - auc_b``."""
        return self.auc_a - self.auc_b

    @property
    def se_difference(self) -> float:
        """Standard error of the difference, ``sqrt(var_a + var_b - 2 cov_ab)``."""
        c = self.covariance
        return math.sqrt(max(0.0, float(c[0, 0] + c[1, 1] - 2 * c[0, 1])))

    @property
    def z(self) -> float:
        """``difference / se_difference``; NaN when the standard error is 0."""
        se = self.se_difference
        return self.difference / se if se > 0 else float("nan")

    @property
    def p_value(self) -> float:
        """Two-sided p-value of H0: AUC_a = AUC_b (DeLong's Wald z-test)."""
        return float(2 * stats.norm.sf(abs(self.z))) if math.isfinite(self.z) else float("nan")

    @property
    def ci(self) -> tuple[float, float]:
        """The default interval of the difference (``method="auto"``) at the result's level."""
        return self.confidence_interval()

    def confidence_interval(
        self, confidence_level: float | None = None, *, method: PairedCIMethod = "auto"
    ) -> tuple[float, float]:
        """``(low, high)`` of AUC_a - AUC_b by ``method``.

        "auto" (default): "wald" with at least 100 rows of each class (``SMALL_CLASS``),
        "mover" below (or "wald" where "mover" is undefined); "wald": ``d +- z se`` with
        DeLong's paired SE (the interval of the z-test); "mover": :func:`mover_ci` from
        each score's :func:`small_sample_ci` and DeLong's correlation of the two AUCs (NaN
        where an AUC is 0 or 1 or has no variance).
        """
        level = self.confidence_level if confidence_level is None else confidence_level
        if method not in ("auto", "wald", "mover"):
            raise InputError(f"method must be 'auto', 'wald' or 'mover'; got {method!r}")
        if method == "auto" and min(self.n_pos, self.n_neg) < SMALL_CLASS:
            low, high = self._mover(level)
            if math.isfinite(low) and math.isfinite(high):
                return (low, high)
        elif method == "mover":
            return self._mover(level)
        z = _z(level)
        d, se = self.difference, self.se_difference
        return (d - z * se, d + z * se)

    def _mover(self, level: float) -> tuple[float, float]:
        """MOVER interval from the two default single-AUC intervals."""
        c = self.covariance
        var_a, var_b, cov = float(c[0, 0]), float(c[1, 1]), float(c[0, 1])
        if not (var_a >= 0 and var_b >= 0 and math.isfinite(cov)):
            return (float("nan"), float("nan"))
        se_a, se_b = math.sqrt(var_a), math.sqrt(var_b)
        # A zero variance has zero covariance: its term of the correlation drops out.
        r = cov / (se_a * se_b) if se_a > 0 and se_b > 0 else 0.0
        ci_a, ci_b = self.auc_intervals(level)
        return mover_ci(self.auc_a, self.auc_b, ci_a, ci_b, r)

    def auc_intervals(
        self, confidence_level: float | None = None
    ) -> tuple[tuple[float, float], tuple[float, float]]:
        """Each score's default AUC interval (:func:`small_sample_ci`, with its ties).

        The intervals the MOVER interval of the difference is built from; NaN for a score
        whose variance is negative or not finite.
        """
        level = self.confidence_level if confidence_level is None else confidence_level
        var = np.diag(np.asarray(self.covariance, dtype=np.float64))
        se = [math.sqrt(v) if math.isfinite(v) and v >= 0 else float("nan") for v in var]
        return (
            small_sample_ci(self.auc_a, se[0], self.n_pos, self.n_neg, level, ties=self.ties[0]),
            small_sample_ci(self.auc_b, se[1], self.n_pos, self.n_neg, level, ties=self.ties[1]),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the result as JSON-ready types, without :attr:`ties` (a count per score)."""
        from fedroc._results import jsonable

        fields = (f.name for f in dataclasses.fields(self) if f.name != "ties")
        return {name: jsonable(getattr(self, name)) for name in fields}

    def summary(self) -> str:
        """Format both AUCs, their difference, its intervals and the test as a table."""
        level = self.confidence_level
        return format_table(
            [
                ("AUC a", self.auc_a),
                ("AUC b", self.auc_b),
                ("difference", self.difference),
                ("SE of difference", self.se_difference),
                (f"{level:.0%} CI (default)", self.confidence_interval()),
                (f"{level:.0%} CI (Wald)", self.confidence_interval(method="wald")),
                ("z", self.z),
                ("p (two-sided)", self.p_value),
            ],
            title="Paired DeLong comparison",
        )


@fill_doc
def delong_paired(
    y_true: ArrayLike,
    score_a: ArrayLike,
    score_b: ArrayLike,
    *,
    pos_label: Any = None,
    confidence_level: float = 0.95,
) -> PairedDeLongResult:
    """Compare the AUCs of two scores computed on the same cases (DeLong et al. 1988).

    The covariance of the two AUCs comes from the placement values of each score
    (:class:`~fedroc.metrics.PlacementSums`, which sites can also aggregate).

    Parameters
    ----------
    {y_true}
    score_a, score_b : array-like of shape (n_samples,)
        The two scores of the same rows, higher means more likely positive.
    {pos_label}
    {confidence_level}

    Returns
    -------
    PairedDeLongResult
        Both AUCs, their covariance, the difference's interval and the two-sided test.

    Raises
    ------
    InputError
        Scores of different lengths, fewer than two rows of a class, or invalid input.

    Examples
    --------
    >>> y = [0, 0, 1, 1, 0, 1, 0, 1]
    >>> r = delong_paired(y, [.1, .4, .35, .8, .2, .9, .5, .6], [.2, .1, .3, .9, .4, .7, .6, .5])
    >>> round(r.auc_a, 4), round(r.auc_b, 4), round(r.p_value, 4)
    (0.875, 0.8125, 0.6434)
    """
    y, a = check_binary(y_true, score_a, pos_label=pos_label, name_score="score_a")
    b = check_scores(score_b, "score_b")
    if b.size != a.size:
        raise InputError(f"score_a has {a.size} elements but score_b has {b.size}")
    level = check_confidence(confidence_level)
    n_pos = int(np.count_nonzero(y))
    _paired_class_sizes(n_pos, y.size - n_pos)  # before the counts, which warn on one class
    counts = [ScoreCounts.from_scores(y, a), ScoreCounts.from_scores(y, b)]
    ties = (counts[0].tie_pattern(), counts[1].tie_pattern())
    return PairedDeLongResult.from_sums(
        PlacementSums.from_rows(y, [a, b], counts), level, ties=ties
    )
