"""The pooled reference: every metric on all rows together (no privacy).

This is the ground truth the private methods are compared with. It needs the rows
themselves, so it only runs where the caller holds them (local files, tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedroc.exceptions import InputError
from fedroc.federation.federation import Released
from fedroc.methods import EvaluationInputs, EvaluationResult, register_method
from fedroc.methods.asks import (
    check_targets,
    comparison_dict,
    not_probabilities_caveat,
    operating_points_from_counts,
)
from fedroc.metrics import (
    DeLongResult,
    PairedDeLongResult,
    ScoreCounts,
    brier_score,
    calibration_curve,
    delong_paired,
)


@register_method("pooled", "all rows pooled: the reference, no privacy", needs_pooled=True)
def run_pooled(
    inputs: EvaluationInputs,
    *,
    site_sizes: dict[str, int] | None = None,
    n_bins: int = 10,
    max_fpr: float | None = None,
    at_specificity: Sequence[float] = (),
    at_sensitivity: Sequence[float] = (),
    youden: bool = False,
    compare: bool = False,
    sample_weight: bool = False,
    bootstrap: int | None = None,
) -> EvaluationResult:
    """Compute the pooled reference.

    Parameters
    ----------
    site_sizes : dict, optional
        Rows per site, for the result's ``sites`` (the pooled rows do not know them).
    n_bins : int
        Calibration bins.
    max_fpr : float, optional
        Adds ``partial_auc`` (scikit-learn's McClish-standardised partial AUC) and
        ``max_fpr``.
    at_specificity, at_sensitivity : sequence of float
        Adds ``operating_points`` at these targets (with Wilson intervals at the chosen
        threshold and a bootstrap interval of the choice, seeded by the analyst's seed).
    youden : bool
        Adds Youden's threshold to ``operating_points``.
    compare : bool
        Compare the second score of the rows (``SiteData.score_b``) with the first: paired
        DeLong, as ``comparison`` (difference first minus second).
    sample_weight : bool
        Weight the rows by ``SiteData.weight`` (``--sample-weight COL``): AUC, partial AUC,
        average precision, PR-AUC, Brier score and operating points as scikit-learn's with
        ``sample_weight``. No confidence interval (DeLong's variance and the Wilson and
        bootstrap intervals count rows, which weights are not), no calibration curve (it
        counts rows) and no comparison; the result says so in ``caveats``.
    bootstrap : int, optional
        Adds ``auc_ci_bootstrap``: pROC's stratified bootstrap CI of the AUC with this many
        samples, seeded by the analyst's seed (``bootstrap``: samples and seed).
    """
    data = inputs.pooled
    if data is None:
        raise InputError("the pooled method needs the pooled rows")
    check_targets(max_fpr, at_specificity, at_sensitivity)
    if bootstrap is not None and (isinstance(bootstrap, bool) or bootstrap < 1):
        raise InputError(f"--bootstrap must be a positive number of samples; got {bootstrap}")
    if sample_weight:
        counts, extra = _weighted(data, compare, bootstrap)
        details = PooledDetails(None, counts)
        auc, auc_ci = counts.auc(), None
    else:
        res, counts, extra = _unweighted(data, inputs, n_bins, bootstrap)
        details = PooledDetails(res, counts)
        auc, auc_ci = res.auc, res.ci
    if max_fpr is not None:
        extra["max_fpr"] = max_fpr
        extra["partial_auc"] = counts.auc(max_fpr=max_fpr)
    if at_specificity or at_sensitivity or youden:
        extra["operating_points"] = operating_points_from_counts(
            counts,
            at_specificity=at_specificity,
            at_sensitivity=at_sensitivity,
            youden=youden,
            confidence_level=inputs.confidence_level,
            seed=inputs.seed,
            # Weights, even whole numbers, do not count rows: no intervals.
            intervals=not sample_weight,
        )
    if compare:
        extra["comparison"] = comparison_dict(
            _paired(data.label, data.score, data.score_b, inputs.confidence_level),
            "paired DeLong (pooled rows)",
        )
    sizes = site_sizes if site_sizes is not None else {"pooled": data.n}
    return EvaluationResult(
        method="pooled",
        sites=[{"name": k, "n": v} for k, v in sizes.items()],
        auc=auc,
        auc_ci=auc_ci,
        released=Released.pooled(data.n),
        extra=extra,
        confidence_level=inputs.confidence_level,
        details=details,
    )


def _is_probability(s: np.ndarray) -> bool:
    """Tell whether every score lies in [0, 1] (Brier and calibration need probabilities)."""
    return bool(np.all((s >= 0) & (s <= 1)))


def _counts_extra(data: Any, counts: ScoreCounts) -> dict[str, Any]:
    """Return the keys the weighted and unweighted results share: row counts and PR areas."""
    return {
        "n": data.n,
        "n_pos": data.n_pos,
        "n_neg": data.n_neg,
        "average_precision": counts.average_precision(),
        "pr_auc": counts.pr_auc(),
    }


def _unweighted(
    data: Any, inputs: EvaluationInputs, n_bins: int, bootstrap: int | None
) -> tuple[DeLongResult, ScoreCounts, dict[str, Any]]:
    """Count the rows: DeLong's result, the counts and the keys before the analyst's asks."""
    y, s = data.label, data.score
    level = inputs.confidence_level
    counts = ScoreCounts.from_scores(y, s)
    res = counts.delong(confidence_level=level)
    is_prob = _is_probability(s)
    extra: dict[str, Any] = {
        **_counts_extra(data, counts),
        "auc_se": res.se,
        "auc_ci_logit": res.confidence_interval(method="logit"),
        "auc_ci_wald": res.confidence_interval(method="wald"),
        "brier": brier_score(y, s) if is_prob else None,
        "calibration": calibration_curve(y, s, n_bins=n_bins) if is_prob else None,
    }
    if not is_prob and data.n:
        extra["caveats"] = [not_probabilities_caveat(s)]
    if bootstrap is not None:
        boot = counts.bootstrap_auc(bootstrap, seed=inputs.seed, confidence_level=level)
        extra["auc_ci_bootstrap"] = list(boot.confidence_interval())
        extra["bootstrap"] = {"samples": bootstrap, "seed": inputs.seed}
    return res, counts, extra


def _weighted(
    data: Any, compare: bool, bootstrap: int | None
) -> tuple[ScoreCounts, dict[str, Any]]:
    """Count the rows by weight (see :func:`run_pooled`); the keys before the asks."""
    if bootstrap is not None:
        raise InputError("--bootstrap does not take --sample-weight: it resamples rows")
    if data.weight is None:
        raise InputError("--sample-weight needs a weight column at every site")
    if compare:
        raise InputError(
            "--compare-score does not take --sample-weight: paired DeLong counts rows, "
            "which weights are not"
        )
    y, s, w = data.label, data.score, data.weight
    counts = ScoreCounts.from_scores(y, s, sample_weight=w)
    if not (counts.n_pos > 0 and counts.n_neg > 0):
        raise InputError("--sample-weight: both classes need a positive total weight")
    return counts, {
        **_counts_extra(data, counts),
        "weighted": True,
        "weight_pos": float(counts.n_pos),
        "weight_neg": float(counts.n_neg),
        "auc_se": None,
        "brier": brier_score(y, s, sample_weight=w) if _is_probability(s) else None,
        "calibration": None,
        "caveats": [
            "weighted by --sample-weight: no confidence interval (DeLong's variance, Wilson "
            "and bootstrap intervals count rows, which weights are not)",
            "weighted: no calibration curve (its bins count rows)",
            *([] if _is_probability(s) else [not_probabilities_caveat(s)]),
        ],
    }


def _paired(y: np.ndarray, a: np.ndarray, b: np.ndarray | None, level: float) -> PairedDeLongResult:
    if b is None:
        raise InputError(
            "the pooled comparison needs a second score column at every site (--compare-score)"
        )
    return delong_paired(y, a, b, confidence_level=level)


@dataclass(frozen=True)
class PooledDetails:
    """The pooled result's details: DeLong's result and the counts behind every metric."""

    delong: DeLongResult | None  # None when weighted (no DeLong variance of weights)
    counts: ScoreCounts

    def roc_points(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(fpr, tpr)`` of the empirical ROC curve, for the report's figure."""
        fpr, tpr, _ = self.counts.roc()
        return fpr, tpr

    def pr_points(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(recall, precision)`` of the empirical PR curve, for the report's figure."""
        precision, recall, _ = self.counts.pr()
        return recall, precision
