"""Operating points: a threshold and its sensitivity, specificity, PPV and NPV.

Thin layers on :class:`~fedroc.metrics.ScoreCounts`: the sensitivity at a required
specificity, the specificity at a required sensitivity, Youden's threshold, or the table at
a threshold given in advance. Each returns an :class:`~fedroc.metrics.OperatingPoint`
whose ``confidence_interval`` gives Wilson or Clopper-Pearson intervals; read its notes for
what those intervals leave out when the threshold was chosen on the same data.
"""

from __future__ import annotations

from fedroc.metrics._counts import OperatingPoint, ScoreCounts
from fedroc.metrics._scored import score_counts_metric

__all__ = [
    "operating_point",
    "sensitivity_at_specificity",
    "specificity_at_sensitivity",
    "youden_threshold",
]


@score_counts_metric
def operating_point(counts: ScoreCounts, threshold: float) -> OperatingPoint:
    """Tabulate the 2x2 table when predicting positive for ``score >= threshold``.

    Parameters
    ----------
    threshold : float
        Predict positive for scores at or above it.

    Returns
    -------
    OperatingPoint
        The threshold, its (weighted) 2x2 table and proportions.

    Examples
    --------
    >>> op = operating_point([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], 0.35)
    >>> op.sensitivity, op.specificity, op.ppv, op.npv
    (1.0, 0.5, 0.6666666666666666, 1.0)
    """
    return counts.operating_point(threshold)


@score_counts_metric
def sensitivity_at_specificity(counts: ScoreCounts, specificity: float) -> OperatingPoint:
    """Find the threshold of highest sensitivity whose specificity reaches the target.

    The threshold is one of the scores (predict positive when ``score >= threshold``), so
    the returned specificity is achieved on these rows; it may exceed the target.

    Parameters
    ----------
    specificity : float
        The target, in [0, 1].

    Returns
    -------
    OperatingPoint
        The threshold of highest sensitivity among those that reach the specificity, with
        its table; ``criterion`` is ``"specificity >= <target>"``.

    Examples
    --------
    >>> y, s = [0, 0, 0, 0, 1, 1, 1, 1], [0.1, 0.2, 0.3, 0.6, 0.4, 0.5, 0.7, 0.9]
    >>> op = sensitivity_at_specificity(y, s, 0.75)
    >>> op.threshold, op.sensitivity, op.specificity
    (0.4, 1.0, 0.75)
    >>> [round(v, 3) for v in op.confidence_interval("sensitivity", method="clopper-pearson")]
    [0.398, 1.0]
    """
    return counts.at_specificity(specificity)


@score_counts_metric
def specificity_at_sensitivity(counts: ScoreCounts, sensitivity: float) -> OperatingPoint:
    """Find the threshold of highest specificity whose sensitivity reaches the target.

    Parameters
    ----------
    sensitivity : float
        The target, in [0, 1].

    Returns
    -------
    OperatingPoint
        The threshold of highest specificity among those that reach the sensitivity, with
        its table; ``criterion`` is ``"sensitivity >= <target>"``.

    Examples
    --------
    >>> y, s = [0, 0, 0, 0, 1, 1, 1, 1], [0.1, 0.2, 0.3, 0.6, 0.4, 0.5, 0.7, 0.9]
    >>> op = specificity_at_sensitivity(y, s, 0.5)
    >>> op.threshold, op.sensitivity, op.specificity
    (0.7, 0.5, 1.0)
    """
    return counts.at_sensitivity(sensitivity)


@score_counts_metric
def youden_threshold(counts: ScoreCounts) -> OperatingPoint:
    """Find the threshold that maximises Youden's J = sensitivity + specificity - 1.

    Ties go to the highest threshold. The maximum is chosen on these rows, so its J (and
    the sensitivity and specificity there) is optimistic for new data.

    Returns
    -------
    OperatingPoint
        The threshold of largest J and its table (criterion "youden").

    Examples
    --------
    >>> y, s = [0, 0, 0, 0, 1, 1, 1, 1], [0.1, 0.2, 0.3, 0.6, 0.4, 0.5, 0.7, 0.9]
    >>> op = youden_threshold(y, s)
    >>> op.threshold, op.youden_j
    (0.4, 0.75)
    """
    return counts.youden()
