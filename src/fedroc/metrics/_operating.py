"""Operating points: a threshold and its sensitivity, specificity, PPV and NPV.

Thin layers on :class:`~fedroc.metrics.ScoreCounts`: the sensitivity at a required
specificity, the specificity at a required sensitivity, Youden's threshold, or the table at
a threshold given in advance. Each returns an :class:`~fedroc.metrics.OperatingPoint`
whose ``confidence_interval`` gives Wilson or Clopper-Pearson intervals; read its notes for
what those intervals leave out when the threshold was chosen on the same data.
"""

from __future__ import annotations

from typing import Any

from numpy.typing import ArrayLike

from fedroc.metrics._counts import OperatingPoint, ScoreCounts

__all__ = [
    "operating_point",
    "sensitivity_at_specificity",
    "specificity_at_sensitivity",
    "youden_threshold",
]


def operating_point(
    y_true: ArrayLike,
    y_score: ArrayLike,
    threshold: float,
    *,
    pos_label: Any = None,
    sample_weight: ArrayLike | None = None,
) -> OperatingPoint:
    """Tabulate the 2x2 table when predicting positive for ``score >= threshold``.

    Examples
    --------
    >>> op = operating_point([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], 0.35)
    >>> op.sensitivity, op.specificity, op.ppv, op.npv
    (1.0, 0.5, 0.6666666666666666, 1.0)
    """
    counts = ScoreCounts.from_scores(
        y_true, y_score, pos_label=pos_label, sample_weight=sample_weight
    )
    return counts.operating_point(threshold)


def sensitivity_at_specificity(
    y_true: ArrayLike,
    y_score: ArrayLike,
    specificity: float,
    *,
    pos_label: Any = None,
    sample_weight: ArrayLike | None = None,
) -> OperatingPoint:
    """Find the threshold of highest sensitivity whose specificity reaches the target.

    The threshold is one of the scores (predict positive when ``score >= threshold``), so
    the returned specificity is achieved on these rows; it may exceed the target.

    Examples
    --------
    >>> y, s = [0, 0, 0, 0, 1, 1, 1, 1], [0.1, 0.2, 0.3, 0.6, 0.4, 0.5, 0.7, 0.9]
    >>> op = sensitivity_at_specificity(y, s, 0.75)
    >>> op.threshold, op.sensitivity, op.specificity
    (0.4, 1.0, 0.75)
    >>> [round(v, 3) for v in op.confidence_interval("sensitivity", method="clopper-pearson")]
    [0.398, 1.0]
    """
    counts = ScoreCounts.from_scores(
        y_true, y_score, pos_label=pos_label, sample_weight=sample_weight
    )
    return counts.at_specificity(specificity)


def specificity_at_sensitivity(
    y_true: ArrayLike,
    y_score: ArrayLike,
    sensitivity: float,
    *,
    pos_label: Any = None,
    sample_weight: ArrayLike | None = None,
) -> OperatingPoint:
    """Find the threshold of highest specificity whose sensitivity reaches the target.

    Examples
    --------
    >>> y, s = [0, 0, 0, 0, 1, 1, 1, 1], [0.1, 0.2, 0.3, 0.6, 0.4, 0.5, 0.7, 0.9]
    >>> op = specificity_at_sensitivity(y, s, 0.5)
    >>> op.threshold, op.sensitivity, op.specificity
    (0.7, 0.5, 1.0)
    """
    counts = ScoreCounts.from_scores(
        y_true, y_score, pos_label=pos_label, sample_weight=sample_weight
    )
    return counts.at_sensitivity(sensitivity)


def youden_threshold(
    y_true: ArrayLike,
    y_score: ArrayLike,
    *,
    pos_label: Any = None,
    sample_weight: ArrayLike | None = None,
) -> OperatingPoint:
    """Find the threshold that maximises Youden's J = sensitivity + specificity - 1.

    Ties go to the highest threshold. The maximum is chosen on these rows, so its J (and
    the sensitivity and specificity there) is optimistic for new data.

    Examples
    --------
    >>> y, s = [0, 0, 0, 0, 1, 1, 1, 1], [0.1, 0.2, 0.3, 0.6, 0.4, 0.5, 0.7, 0.9]
    >>> op = youden_threshold(y, s)
    >>> op.threshold, op.youden_j
    (0.4, 0.75)
    """
    counts = ScoreCounts.from_scores(
        y_true, y_score, pos_label=pos_label, sample_weight=sample_weight
    )
    return counts.youden()
