"""The result of paper 5's method: the curves, the AUC with its noise, what was released."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedroc._results import ResultMixin, format_table
from fedroc._validation import FloatArray
from fedroc.federation.federation import Released
from fedroc.methods import EvaluationResult
from fedroc.metrics import CalibrationCurve, DeLongResult, small_sample_ci

from ._curves import CurveErrors, survival_function
from ._dp import RatioTest, dp_interval, wald_interval
from ._site import MODE_SA


@dataclass(frozen=True, repr=False)
class HistogramCurves(ResultMixin):
    """ROC and PR curves approximated from aggregated hierarchical histograms.

    Attributes
    ----------
    mode : {"secure-aggregation", "distributed-dp", "local-dp"}
    quantiles, branching, height : int
    score_range : (float, float)
    transform : str or None
    epsilon : float or None
        Total budget per site (basic composition over the levels); None without DP.
    noise : str or None
    interpolation : {"pchip", "linear", "midpoint"}
        How each class's survival function runs between its quantiles.
    n_pos, n_neg : float
        Class sizes from the aggregated trees (noisy under DP).
    oversampling : int
        Quantiles read per requested quantile (the curves use ``quantiles * oversampling``).
    quantiles_pos, quantiles_neg : ndarray, shape (quantiles * oversampling,)
        Estimated quantiles of each class at ``linspace(0, 1, quantiles * oversampling)``.
    leaves_pos, leaves_neg : ndarray
        Aggregated leaf counts (under DP: the non-negative masses the curves use).
    scores, fpr, tpr, precision : ndarray
        The traced curves: at threshold ``scores[i]`` (decreasing), false and true
        positive rates and precision. Empty when no curve could be estimated.
    auc : float
        The AUC estimate: the area under the approximated ROC curve under secure
        aggregation; under DP the noise-unbiased AUC of one level of the tree
        (:mod:`._dp`), because the area under the noisy curves is biased. NaN when no
        class total survived the noise.
    curve_auc, pr_auc, average_precision : float
        Area under the approximated ROC and PR curves and the curve's average precision.
    auc_level : int or None
        Under DP, the tree level the AUC is computed at (``branching ** auc_level`` bins).
    binning_bound : float
        Under DP, the most that ties within that level's bins can move the AUC (half the
        estimated fraction of pairs in one bin); the interval is widened by it.
    auc_test : RatioTest or None
        Under DP, the test whose inversion gives the AUC interval (Fieller's method).
    delong : DeLongResult or None
        DeLong's AUC and variance of the binned scores (the sampling part of the SE).
    noise_variance : float
        Variance the DP noise adds to the AUC (0 without DP).
    noise_sd : float
        Standard deviation of the noise on each node of the released tree (0 without DP).
    ci_withheld : str or None
        Why no interval is given, when the noise makes one meaningless.
    brier, brier_noise_sd : float or None
    calibration : CalibrationCurve or None
        From the leaves (probability scores on [0, 1] only); under DP bins whose noisy
        count is not clearly positive are withheld (suppressed).
    calibration_noise_sd : ndarray or None
        Noise SD of each calibration bin's observed fraction.
    calibration_count_noise_sd : ndarray or None
        Noise SD of each calibration bin's count (a bin is withheld when its noisy count is
        within three of these of 0). A function of the tree's shape and the noise alone.
    errors : CurveErrors or None
        Against the pooled curves, when the caller held the pooled rows.
    caveats : tuple of str
        Plain statements of what the noise did to the numbers above.
    sites, dropped : list and dict
        Sites whose histograms the sum holds, and those that dropped out.
    confidence_level : float
        Level of the AUC interval.
    """

    mode: str
    quantiles: int
    oversampling: int
    branching: int
    height: int
    score_range: tuple[float, float]
    transform: str | None
    epsilon: float | None
    noise: str | None
    interpolation: str
    n_pos: float
    n_neg: float
    quantiles_pos: FloatArray
    quantiles_neg: FloatArray
    leaves_pos: FloatArray
    leaves_neg: FloatArray
    scores: FloatArray
    fpr: FloatArray
    tpr: FloatArray
    precision: FloatArray
    auc: float
    curve_auc: float
    pr_auc: float
    average_precision: float
    delong: DeLongResult | None
    noise_variance: float
    confidence_level: float
    noise_sd: float = 0.0
    auc_level: int | None = None
    binning_bound: float = 0.0
    auc_test: RatioTest | None = None
    ci_withheld: str | None = None
    brier: float | None = None
    brier_noise_sd: float | None = None
    calibration: CalibrationCurve | None = None
    calibration_noise_sd: FloatArray | None = None
    calibration_count_noise_sd: FloatArray | None = None
    errors: CurveErrors | None = None
    caveats: tuple[str, ...] = ()
    sites: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)

    @property
    def roc_area_error(self) -> float | None:
        """The ROC curve's area error against the pooled rows (None without them)."""
        return None if self.errors is None else self.errors.roc_area_error

    @property
    def pr_area_error(self) -> float | None:
        """The PR curve's area error against the pooled rows (None without them)."""
        return None if self.errors is None else self.errors.pr_area_error

    @property
    def se(self) -> float:
        """Standard error of the AUC: DeLong on the binned counts plus the DP noise."""
        if self.delong is None:
            return float("nan")
        return math.sqrt(self.delong.variance + self.noise_variance)

    def confidence_interval(
        self, confidence_level: float | None = None
    ) -> tuple[float, float] | None:
        """Return the AUC interval, or None when :attr:`ci_withheld` says why there is none.

        Under secure aggregation fedroc's default (:func:`~fedroc.metrics.small_sample_ci`:
        logit scale, paper 1 eq. 3, joined below 100 rows of a class with the score
        interval on the leaves' tie pattern); under DP the inverted test of
        :class:`~._dp.RatioTest` (Fieller's interval: the noise's variance taken at each
        candidate AUC, not at the noisy estimate), widened by ``binning_bound`` and clipped
        to [0, 1]; None where that set is not bounded at this level.
        """
        level = self.confidence_level if confidence_level is None else confidence_level
        if self.ci_withheld is not None or not math.isfinite(self.se):
            return None
        if self.mode == MODE_SA:
            ties = None if self.delong is None else self.delong.ties
            return small_sample_ci(self.auc, self.se, self.n_pos, self.n_neg, level, ties=ties)
        if self.auc_test is None:
            low, high = wald_interval(self.auc, self.se, level)
            return (max(0.0, low - self.binning_bound), min(1.0, high + self.binning_bound))
        return dp_interval(self.auc_test, self.binning_bound, level)

    def brier_interval(self, confidence_level: float | None = None) -> tuple[float, float] | None:
        """Interval for the pooled rows' Brier score given the DP noise (not the sampling)."""
        if self.brier is None or self.brier_noise_sd is None:
            return None
        level = self.confidence_level if confidence_level is None else confidence_level
        return wald_interval(self.brier, self.brier_noise_sd, level)

    def roc_points(self) -> tuple[FloatArray, FloatArray]:
        """``(fpr, tpr)`` of the approximated ROC curve (drawn by the HTML report)."""
        return self.fpr, self.tpr

    def pr_points(self) -> tuple[FloatArray, FloatArray]:
        """``(recall, precision)`` of the approximated PR curve."""
        return self.tpr, self.precision

    def survival_functions(self) -> tuple[Callable[[Any], FloatArray], Callable[[Any], FloatArray]]:
        """Interpolate the survival functions ``(T(s), F(s))`` of positives and negatives."""
        fractions = np.linspace(0.0, 1.0, self.quantiles * self.oversampling)
        return (
            survival_function(self.quantiles_pos, fractions, self.interpolation),
            survival_function(self.quantiles_neg, fractions, self.interpolation),
        )

    def summary(self) -> str:
        """Format the settings, the AUROC with its interval, the AUPR, errors and caveats."""
        rows: list[tuple[str, Any]] = [
            ("mode", self.mode),
            (
                "quantiles (Q)",
                f"{self.quantiles} (curves through {self.quantiles * self.oversampling}, "
                f"{self.interpolation})",
            ),
            ("tree", f"branching {self.branching}, height {self.height}"),
            ("epsilon", self.epsilon),
            ("positives / negatives", f"{self.n_pos:.1f} / {self.n_neg:.1f}"),
            ("AUROC", self.auc),
            (f"{self.confidence_level:.0%} CI", self.confidence_interval()),
            ("AUROC of the curve", self.curve_auc),
            ("AUPR", self.pr_auc),
        ]
        if self.errors is not None:
            rows.append(("ROC area error", f"{self.errors.roc_area_error:.3g}"))
            rows.append(("PR area error", f"{self.errors.pr_area_error:.3g}"))
        if self.brier is not None:
            rows.append(("Brier score", self.brier))
            if self.brier_noise_sd:
                rows.append(("Brier noise SD", self.brier_noise_sd))
        rows += [("caveat", c) for c in self.caveats]
        return format_table(rows, title="Federated ROC/PR curves from histograms")

    def to_evaluation(self, released: Released) -> EvaluationResult:
        """Return the common result of ``fedroc evaluate`` (its JSON keys)."""
        exact = self.mode == MODE_SA
        extra: dict[str, Any] = {
            "pr_auc": self.pr_auc,
            "quantiles": self.quantiles,
            "epsilon": self.epsilon,
            "oversampling": self.oversampling,
            "mode": self.mode,
            "interpolation": self.interpolation,
            "branching": self.branching,
            "height": self.height,
            # Exact under secure aggregation (shown as counts), noisy under DP. `n` as every
            # other method names it: their sum, nothing the two counts do not already give.
            "n": round(self.n_pos + self.n_neg) if exact else self.n_pos + self.n_neg,
            "n_pos": round(self.n_pos) if exact else self.n_pos,
            "n_neg": round(self.n_neg) if exact else self.n_neg,
            "auc_se": self.se,
            "curve_auc": self.curve_auc,
            "average_precision": self.average_precision,
        }
        if self.mode == MODE_SA:
            extra["auc_binned"] = None if self.delong is None else self.delong.auc
        else:
            extra["auc_level"] = self.auc_level
            extra["auc_binning_bound"] = self.binning_bound
            extra["noise_sd"] = self.noise_sd
            extra["auc_noise_sd"] = math.sqrt(self.noise_variance)
            extra["ci_withheld"] = self.ci_withheld
        if self.errors is not None:
            extra.update(self.errors.to_dict())
        # Under DP always state them (None when withheld), so that evaluate() does not add
        # Brier sums and calibration bins released in the clear.
        if self.calibration is not None or self.mode != MODE_SA:
            extra["brier"] = self.brier
            extra["calibration"] = self.calibration
            if self.mode != MODE_SA:
                extra["brier_noise_sd"] = self.brier_noise_sd
                extra["brier_ci"] = self.brier_interval()
                extra["calibration_noise_sd"] = self.calibration_noise_sd
                extra["calibration_count_noise_sd"] = self.calibration_count_noise_sd
        if self.dropped:
            extra["dropped"] = sorted(self.dropped)
        if self.caveats:
            extra["caveats"] = list(self.caveats)
        return EvaluationResult(
            method="histogram",
            sites=[{"name": name, "n": None} for name in self.sites],
            auc=self.auc,
            auc_ci=self.confidence_interval(),
            released=released,
            extra=extra,
            confidence_level=self.confidence_level,
            details=self,
        )
