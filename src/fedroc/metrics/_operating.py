"""Operating points: a threshold and its sensitivity, specificity, PPV and NPV.

Thin layers on :class:`~fedroc.metrics.ScoreCounts`: the sensitivity at a required
specificity, the specificity at a required sensitivity, Youden's threshold, or the table at
a threshold given in advance. Each returns an :class:`~fedroc.metrics.OperatingPoint`
whose ``confidence_interval`` gives Wilson or Clopper-Pearson intervals; read its notes for
what those intervals leave out when the threshold was chosen on the same data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fedroc._docs import fill
from fedroc.metrics._counts import OperatingPoint, ScoreCounts
from fedroc.metrics._scored import score_counts_metric

__all__ = [
    "operating_point",
    "sensitivity_at_specificity",
    "specificity_at_sensitivity",
    "youden_threshold",
]

Ask = TypeVar("Ask", bound=Callable[..., Any])


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


def _reaching(target: str, free: str) -> Callable[[Ask], Ask]:
    """Document a metric that maximises ``free`` where ``target`` reaches a given value.

    :func:`sensitivity_at_specificity` and :func:`specificity_at_sensitivity` mirror each
    other: their parameter, result and examples are written once, here, and put in place of
    the line ``{reaching}`` of their docstrings.
    """
    reaching = f"""\
The threshold is one of the scores (predict positive when ``score >= threshold``), so
the returned {target} is achieved on these rows; it may exceed the target.

Parameters
----------
{target} : float
    The target, in [0, 1].

Returns
-------
OperatingPoint
    The threshold of highest {free} among those that reach the {target}, with its
    table; ``criterion`` is ``"{target} >= <target>"``.

Examples
--------
>>> y, s = [0, 0, 0, 0, 1, 1, 1, 1], [0.1, 0.2, 0.3, 0.6, 0.4, 0.5, 0.7, 0.9]
>>> op = sensitivity_at_specificity(y, s, 0.75)
>>> op.threshold, op.sensitivity, op.specificity
(0.4, 1.0, 0.75)
>>> [round(v, 3) for v in op.confidence_interval("sensitivity", method="clopper-pearson")]
[0.398, 1.0]
>>> op = specificity_at_sensitivity(y, s, 0.5)
>>> op.threshold, op.sensitivity, op.specificity
(0.7, 0.5, 1.0)"""

    def document(ask: Ask) -> Ask:
        ask.__doc__ = fill(ask.__doc__ or "", reaching=reaching)
        return ask

    return document


@score_counts_metric
@_reaching("specificity", free="sensitivity")
def sensitivity_at_specificity(counts: ScoreCounts, specificity: float) -> OperatingPoint:
    """Find the threshold of highest sensitivity whose specificity reaches the target.

    {reaching}
    """
    return counts.at_specificity(specificity)


@score_counts_metric
@_reaching("sensitivity", free="specificity")
def specificity_at_sensitivity(counts: ScoreCounts, sensitivity: float) -> OperatingPoint:
    """Find the threshold of highest specificity whose sensitivity reaches the target.

    {reaching}
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
