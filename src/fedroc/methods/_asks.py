"""What an analyst asks beyond the AUC: operating points, partial AUC, a second model.

Shared by the methods that release enough for them: the pooled reference (exact, from
:class:`~fedroc.metrics.ScoreCounts` of the rows) and the histogram method (from its
estimated class distributions). The keys are those of ``fedroc evaluate --json``:

- ``partial_auc`` and ``max_fpr``: scikit-learn's McClish-standardised partial AUC;
- ``operating_points``: a list of ``{criterion, threshold, sensitivity, specificity, ppv,
  npv, ...}`` (:func:`operating_points_from_counts`);
- ``comparison``: ``{auc_difference, se, ci, p_value, auc_b, auc_b_ci, method}``
  (:func:`comparison_dict`), the same keys as the mpc method's paired comparison.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from fedroc.exceptions import InputError
from fedroc.metrics import OperatingPoint, PairedDeLongResult, ScoreCounts

__all__ = [
    "ASK_OPTIONS",
    "check_targets",
    "comparison_dict",
    "operating_points_from_counts",
    "point_dict",
]

#: Options of ``fedroc evaluate`` that ask for more than the AUC (method keyword -> flag).
ASK_OPTIONS = {
    "max_fpr": "--max-fpr",
    "at_specificity": "--at-specificity",
    "at_sensitivity": "--at-sensitivity",
    "youden": "--youden",
    "compare": "--compare-score",
}

_PROPORTIONS = ("sensitivity", "specificity", "ppv", "npv")


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def check_targets(
    max_fpr: float | None, at_specificity: Sequence[float], at_sensitivity: Sequence[float]
) -> None:
    """Refuse targets outside their range, naming the option and the value."""
    if max_fpr is not None and not 0.0 < max_fpr <= 1.0:
        raise InputError(f"--max-fpr must lie in (0, 1]; got {max_fpr!r}")
    for flag, values in (
        ("--at-specificity", at_specificity),
        ("--at-sensitivity", at_sensitivity),
    ):
        for v in values:
            if not 0.0 <= v <= 1.0:
                raise InputError(f"{flag} must lie in [0, 1]; got {v!r}")


def point_dict(
    op: OperatingPoint, confidence_level: float, *, intervals: bool = True
) -> dict[str, Any]:
    """One operating point as JSON: the 2x2 table, the four proportions and their CIs.

    The intervals are Wilson intervals for a threshold fixed in advance (see
    :class:`~fedroc.metrics.OperatingPoint`); ``intervals=False`` leaves them out (null).
    """
    out: dict[str, Any] = {
        "criterion": op.criterion,
        "threshold": _finite(op.threshold),
        "tp": op.tp,
        "fp": op.fp,
        "tn": op.tn,
        "fn": op.fn,
    }
    for name in _PROPORTIONS:
        out[name] = _finite(getattr(op, name))
    for name in _PROPORTIONS:
        ci = None
        if intervals and out[name] is not None:
            ci = list(op.confidence_interval(name, confidence_level))
        out[f"{name}_ci"] = ci
    out["ci_method"] = "Wilson, threshold taken as fixed" if intervals else None
    return out


def operating_points_from_counts(
    counts: ScoreCounts,
    *,
    at_specificity: Sequence[float] = (),
    at_sensitivity: Sequence[float] = (),
    youden: bool = False,
    confidence_level: float = 0.95,
    seed: int | None = None,
    n_bootstraps: int = 2000,
) -> list[dict[str, Any]]:
    """Operating points of exact counts, with intervals.

    Each point carries Wilson intervals of its four proportions at its threshold. A point
    chosen by a target (``specificity >= 0.9``) also carries ``selection_ci``: a stratified
    bootstrap interval of the free proportion (the sensitivity at that specificity) that
    re-chooses the threshold in every replicate, so it includes the choice (pROC's
    ``ci.se``). Youden's point has no such interval (its J is optimistic on these rows).
    """
    whole = counts.is_whole()
    points = []
    for target in at_specificity:
        d = point_dict(counts.at_specificity(target), confidence_level, intervals=whole)
        d["selection_ci"] = (
            list(
                counts.sensitivity_at_specificity_ci(
                    target,
                    n_bootstraps=n_bootstraps,
                    seed=seed,
                    confidence_level=confidence_level,
                )
            )
            if whole and d["sensitivity"] is not None
            else None
        )
        points.append(d)
    for target in at_sensitivity:
        d = point_dict(counts.at_sensitivity(target), confidence_level, intervals=whole)
        d["selection_ci"] = (
            list(
                counts.specificity_at_sensitivity_ci(
                    target,
                    n_bootstraps=n_bootstraps,
                    seed=seed,
                    confidence_level=confidence_level,
                )
            )
            if whole and d["specificity"] is not None
            else None
        )
        points.append(d)
    if youden:
        d = point_dict(counts.youden(), confidence_level, intervals=whole)
        d["selection_ci"] = None
        points.append(d)
    return points


def comparison_dict(res: PairedDeLongResult, method: str) -> dict[str, Any]:
    """A paired comparison as JSON (the keys of the mpc method's ``comparison``)."""
    from fedroc.metrics import logit_ci

    var_b = float(res.covariance[1, 1])
    se_b = math.sqrt(var_b) if math.isfinite(var_b) and var_b >= 0 else float("nan")
    return {
        "auc_difference": res.difference,
        "se": res.se_difference,
        "ci": list(res.confidence_interval()),
        "p_value": _finite(res.p_value),
        "auc_b": res.auc_b,
        "auc_b_ci": list(logit_ci(res.auc_b, se_b, res.confidence_level)),
        "method": method,
    }
