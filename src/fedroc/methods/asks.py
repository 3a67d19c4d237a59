"""What an analyst asks beyond the AUC: operating points, partial AUC, a second model.

Shared by the methods that release enough for them: the pooled reference (exact, from
:class:`~fedroc.metrics.ScoreCounts` of the rows) and the histogram method (from its
estimated class distributions). The keys are those of ``fedroc evaluate --json``:

- ``partial_auc`` and ``max_fpr``: scikit-learn's McClish-standardised partial AUC;
- ``operating_points``: a list of ``{criterion, threshold, sensitivity, specificity, ppv,
  npv, ...}`` (:func:`operating_points_from_counts`);
- ``comparison``: ``{auc_difference, se, ci, ci_wald, p_value, auc_b, auc_b_ci, method}``
  (:func:`comparison_dict`), the same keys as the mpc method's paired comparison; ``ci`` is
  the default interval of the difference (Wald with at least 100 rows of each class, MOVER
  below: :class:`~fedroc.metrics.PairedDeLongResult`), ``ci_wald`` the Wald interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from fedroc.exceptions import InputError
from fedroc.metrics import (
    SCORE_TRANSFORM_INVERSES,
    OperatingPoint,
    PairedDeLongResult,
    ScoreCounts,
)

__all__ = [
    "binned_asks",
    "check_targets",
    "comparison_dict",
    "operating_points_from_counts",
    "partial_auc_bounds",
    "point_dict",
]

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


def not_probabilities_caveat(score: np.ndarray) -> str:
    """Say why there is no Brier score or calibration: the scores' range, outside [0, 1]."""
    lo, hi = float(np.min(score)), float(np.max(score))
    return (
        f"no Brier score or calibration: the scores lie in [{lo:.4g}, {hi:.4g}], outside "
        "[0, 1], so they are not probabilities (logits: apply the logistic function first)"
    )


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
    intervals: bool = True,
) -> list[dict[str, Any]]:
    """Operating points of exact counts, with intervals.

    Each point carries Wilson intervals of its four proportions at its threshold. A point
    chosen by a target (``specificity >= 0.9``) also carries ``selection_ci``: a stratified
    bootstrap interval of the free proportion (the sensitivity at that specificity) that
    re-chooses the threshold in every replicate, so it includes the choice (pROC's
    ``ci.se``). Youden's point has no such interval (its J is optimistic on these rows).
    Counts that are not whole rows (weights) get no intervals, nor does ``intervals=False``
    (weights that happen to be whole numbers still do not count rows).
    """
    whole = intervals and counts.is_whole()
    points = []
    # A target on one proportion chooses the threshold; the other (free) one gets the interval.
    targeted = (
        (
            at_specificity,
            counts.at_specificity,
            counts.sensitivity_at_specificity_ci,
            "sensitivity",
        ),
        (
            at_sensitivity,
            counts.at_sensitivity,
            counts.specificity_at_sensitivity_ci,
            "specificity",
        ),
    )
    for targets, choose, selection_ci, free in targeted:
        for target in targets:
            d = point_dict(choose(target), confidence_level, intervals=whole)
            d["selection_ci"] = (
                list(
                    selection_ci(
                        target,
                        n_bootstraps=n_bootstraps,
                        seed=seed,
                        confidence_level=confidence_level,
                    )
                )
                if whole and d[free] is not None
                else None
            )
            points.append(d)
    if youden:
        d = point_dict(counts.youden(), confidence_level, intervals=whole)
        d["selection_ci"] = None
        points.append(d)
    return points


def comparison_dict(res: PairedDeLongResult, method: str) -> dict[str, Any]:
    """Format a paired comparison as JSON (the keys of the mpc method's ``comparison``).

    ``ci`` is the result's default interval (:attr:`~fedroc.metrics.PairedDeLongResult.ci`:
    MOVER below 100 rows of a class, Wald from there on), ``ci_wald`` the Wald interval,
    the one the two-sided ``p_value`` inverts. ``auc_b_ci`` is B's AUC's default interval
    (:meth:`~fedroc.metrics.PairedDeLongResult.auc_intervals`), as ``auc_ci`` is A's.
    """
    return {
        "auc_difference": res.difference,
        "se": res.se_difference,
        "ci": list(res.confidence_interval()),
        "ci_wald": list(res.confidence_interval(method="wald")),
        "p_value": _finite(res.p_value),
        "auc_b": res.auc_b,
        "auc_b_ci": list(res.auc_intervals()[1]),
        "method": method,
    }


def _untransform(t: np.ndarray, transform: str | None) -> np.ndarray:
    """Thresholds back on the scores' own scale (the histogram's public transforms)."""
    if transform is None:
        return t
    with np.errstate(divide="ignore", invalid="ignore"):  # thresholds 0 and 1: -inf, inf
        return SCORE_TRANSFORM_INVERSES[transform](t)


def partial_auc_bounds(counts: ScoreCounts, max_fpr: float) -> tuple[float, float]:
    """Bound the McClish-standardised partial AUC of any rows that these bins could hold.

    Within a bin the rows' ROC curve runs monotonically from the bin's lower-left corner
    to its upper-right one, so it stays in that rectangle: the lower and upper steps bound
    the partial area of the rows (scikit-learn's definition, ties or not).
    """
    fpr, tpr, _ = counts.roc(drop_intermediate=False)
    width = np.clip(fpr[1:], 0.0, max_fpr) - np.clip(fpr[:-1], 0.0, max_fpr)
    low = float(np.dot(tpr[:-1], width))
    high = float(np.dot(tpr[1:], width))
    min_area, max_area = 0.5 * max_fpr**2, max_fpr

    def standardise(a: float) -> float:
        return 0.5 * (1 + (a - min_area) / (max_area - min_area))

    return standardise(low), standardise(high)


def binned_asks(
    pos: ArrayLike,
    neg: ArrayLike,
    edges: ArrayLike,
    *,
    exact: bool,
    max_fpr: float | None = None,
    at_specificity: Sequence[float] = (),
    at_sensitivity: Sequence[float] = (),
    youden: bool = False,
    confidence_level: float = 0.95,
    seed: int | None = None,
    transform: str | None = None,
) -> dict[str, Any]:
    """Partial AUC and operating points from aggregated bin counts (the histogram method).

    ``pos`` and ``neg`` are the per-bin counts in increasing score order and ``edges`` the
    bin edges (on the transformed scale when ``transform`` is set). A row is predicted
    positive when its score is at least a bin's lower edge, so with exact counts
    (``exact``: secure aggregation) the 2x2 table at every edge is exact and the operating
    points are exact at thresholds restricted to the edges; their intervals are those of
    :func:`operating_points_from_counts`. The partial AUC is that of the binned scores
    (ties within a bin count 1/2) with ``partial_auc_error_bound``, the most the rows'
    own partial AUC can differ from it (:func:`partial_auc_bounds`). Under DP the counts
    are noisy masses: the same numbers without intervals, and the bound leaves the noise
    out.
    """
    e = np.asarray(edges, dtype=np.float64)
    pos_a, neg_a = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
    if exact:  # sums of integer counts; the tree's arithmetic may leave 1e-16 behind
        pos_a, neg_a = np.round(pos_a), np.round(neg_a)
    counts = ScoreCounts.from_bins(pos_a, neg_a, edges=e)
    out: dict[str, Any] = {}
    note = f"thresholds restricted to the {e.size - 1} bin edges (width {e[1] - e[0]:.3g})"
    if not exact:
        note += "; from noisy counts: no interval, and the noise is not in the error bound"
    if max_fpr is not None:
        out["max_fpr"] = max_fpr
        value = counts.auc(max_fpr=max_fpr)
        low, high = partial_auc_bounds(counts, max_fpr)
        out["partial_auc"] = value
        if exact:
            out["partial_auc_error_bound"] = max(value - low, high - value)
        else:  # the bound of the bins says nothing about the noise on every leaf
            out["partial_auc_error_bound"] = None
            out["partial_auc_note"] = (
                "from noisy leaf masses: the DP noise on the leaves biases it; no error bound"
            )
    if at_specificity or at_sensitivity or youden:
        if exact:
            points = operating_points_from_counts(
                counts,
                at_specificity=at_specificity,
                at_sensitivity=at_sensitivity,
                youden=youden,
                confidence_level=confidence_level,
                seed=seed,
            )
        else:
            chosen = [counts.at_specificity(t) for t in at_specificity]
            chosen += [counts.at_sensitivity(t) for t in at_sensitivity]
            chosen += [counts.youden()] if youden else []
            points = [
                {**point_dict(op, confidence_level, intervals=False), "selection_ci": None}
                for op in chosen
            ]
        for p in points:
            if p["threshold"] is not None and transform is not None:
                p["threshold"] = float(_untransform(np.array([p["threshold"]]), transform)[0])
            p["approximation"] = note
        out["operating_points"] = points
    return out
