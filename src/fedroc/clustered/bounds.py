"""Theorem 3 of Michael & Tian: how far apart the two AUCs can be for constant cluster sizes.

When every cluster has the same numbers of controls m and cases n (so the cluster sizes
carry no information about the scores), the population AUC is bounded by the personalized
AUC:

    1/2 (theta11 + t/2)^2  <=  theta12  <=  1 - 1/2 (1 - theta11 + t/2)^2,

where ``t = sum_{k,l} P(X_1k = Y_1l) / (m n)`` is the within-cluster tie probability. Without
ties this inverts to ``1 - sqrt(2 (1 - theta12)) <= theta11 <= sqrt(2 theta12)``: a useless
personalized AUC (1/2) limits the population AUC to [1/8, 7/8], while a useless population
AUC says nothing about the personalized one.
"""

from __future__ import annotations

import math

from fedroc.exceptions import InputError

__all__ = ["personalized_auc_bounds", "population_auc_bounds"]


def _check_unit(value: float, name: str) -> float:
    v = float(value)
    # Slack for probabilities that were summed in floating point.
    if not -1e-12 <= v <= 1.0 + 1e-12:
        raise InputError(f"{name} must lie in [0, 1]; got {value!r}")
    return min(max(v, 0.0), 1.0)


def _check_ties(auc: float, tie_probability: float, name: str) -> float:
    t = _check_unit(tie_probability, "tie_probability")
    # theta = P(<) + t/2 with P(<) in [0, 1 - t]; rounding slack for values read from data.
    if not t / 2 - 1e-12 <= auc <= 1 - t / 2 + 1e-12:
        raise InputError(
            f"{name}={auc!r} is impossible with tie_probability={tie_probability!r}: it must "
            f"lie in [{t / 2:.6g}, {1 - t / 2:.6g}]"
        )
    return t


def population_auc_bounds(
    personalized_auc: float, tie_probability: float = 0.0
) -> tuple[float, float]:
    """Bounds of Theorem 3 on the population AUC given the personalized AUC.

    Parameters
    ----------
    personalized_auc : float
        theta11.
    tie_probability : float, default 0
        ``sum_{k,l} P(X_1k = Y_1l) / (m n)``, the probability that a control and a case of
        one cluster tie (0 for continuous scores).

    Returns
    -------
    (low, high) : tuple of float

    Examples
    --------
    >>> population_auc_bounds(0.5)
    (0.125, 0.875)
    """
    th = _check_unit(personalized_auc, "personalized_auc")
    t = _check_ties(th, tie_probability, "personalized_auc")
    low = 0.5 * (th + t / 2) ** 2
    high = 1.0 - 0.5 * (1.0 - th + t / 2) ** 2
    return (low, high)


def personalized_auc_bounds(
    population_auc: float, tie_probability: float = 0.0
) -> tuple[float, float]:
    """Theorem 3 solved for the personalized AUC given the population AUC.

    ``1 + t/2 - sqrt(2 (1 - theta12)) <= theta11 <= sqrt(2 theta12) - t/2``, intersected with
    the range ``[t/2, 1 - t/2]`` that theta11 can take at tie probability t.

    Examples
    --------
    >>> personalized_auc_bounds(0.5)
    (0.0, 1.0)
    """
    th = _check_unit(population_auc, "population_auc")
    t = _check_unit(tie_probability, "tie_probability")
    low = max(t / 2, 1.0 + t / 2 - math.sqrt(2.0 * (1.0 - th)))
    high = min(1.0 - t / 2, math.sqrt(2.0 * th) - t / 2)
    return (low, high)
