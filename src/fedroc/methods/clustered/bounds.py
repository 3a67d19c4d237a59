"""Theorem 3 of Michael & Tian: how far apart the two AUCs can be for constant cluster sizes.

When every cluster has the same numbers of controls m and cases n (so the cluster sizes
carry no information about the scores), the population AUC is bounded by the personalized
AUC:

    1/2 (theta11 + t/2)^2  <=  theta12  <=  1 - 1/2 (1 - theta11 + t/2)^2,

where ``t = sum_{k,l} P(X_1k = Y_1l) / (m n)`` is the within-cluster tie probability. Without
ties this inverts to ``1 - sqrt(2 (1 - theta12)) <= theta11 <= sqrt(2 theta12)``: a useless
personalized AUC (1/2) limits the population AUC to [1/8, 7/8], while a useless population
AUC says nothing about the personalized one.

Section 4 first proves a sharper bound for the simple case that introduces Theorem 3 (one
control and one case per cluster, ``P`` on finitely many atoms ``(x_i, y_i)`` with distinct
coordinates): with ``K`` atoms in ``{x < y}`` and ``K'`` in ``{x > y}``,

    1/2 (1 + 1/K) theta11^2  <=  theta12  <=  1 - 1/2 (1 + 1/K') (1 - theta11)^2

(:func:`finite_support_bounds`); the lower bound is attained by ``K`` atoms of equal mass
whose squares ``[x_i, y_i]`` do not overlap.
"""

from __future__ import annotations

import math

from fedroc.exceptions import InputError

__all__ = ["finite_support_bounds", "personalized_auc_bounds", "population_auc_bounds"]


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

    Parameters
    ----------
    population_auc : float
        The population AUC theta12, in [0, 1].
    tie_probability : float, default 0.0
        Probability ``t`` that a case and a control of one cluster tie, in [0, 1].

    Returns
    -------
    low, high : float
        The range of personalized AUCs theta11 consistent with it.

    Raises
    ------
    InputError
        An argument outside [0, 1].

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


def _check_atoms(k: int | None, name: str) -> int | None:
    if k is None:
        return None
    if isinstance(k, bool) or int(k) != k or k < 0:
        raise InputError(f"{name} must be a non-negative integer; got {k!r}")
    return int(k)


def finite_support_bounds(
    personalized_auc: float,
    n_concordant_atoms: int | None,
    n_discordant_atoms: int | None = None,
) -> tuple[float, float]:
    """Section 4's bounds on the population AUC for a finitely supported (X, Y), M = N = 1.

    ``P = sum_i p_i delta_(x_i, y_i)`` with all coordinates distinct: every atom in
    ``{x < y}`` of mass p contributes p^2 to ``theta12 = P_indep(X < Y)`` and every pair of
    them at least ``p q``, so by Cauchy-Schwarz ``theta12 >= 1/2 (1 + 1/K) theta11^2``; the
    same argument on ``{x > y}`` gives the upper bound.

    Parameters
    ----------
    personalized_auc : float
        theta11 = P(X < Y).
    n_concordant_atoms : int or None
        K, the atoms with ``x_i < y_i``; None (unknown, or infinitely many) gives Theorem 3's
        lower bound ``theta11^2 / 2``.
    n_discordant_atoms : int or None
        K', the atoms with ``x_i > y_i``; None gives Theorem 3's upper bound.

    Returns
    -------
    (low, high) : tuple of float

    Examples
    --------
    >>> finite_support_bounds(1.0, 4)  # four equal atoms above the diagonal: (1 + 1/4) / 2
    (0.625, 1.0)
    """
    th = _check_unit(personalized_auc, "personalized_auc")
    k = _check_atoms(n_concordant_atoms, "n_concordant_atoms")
    k_bar = _check_atoms(n_discordant_atoms, "n_discordant_atoms")
    if k == 0 and th > 1e-12:
        raise InputError(
            f"personalized_auc={personalized_auc!r} needs at least one atom with x < y; "
            "got n_concordant_atoms=0"
        )
    if k_bar == 0 and th < 1 - 1e-12:
        raise InputError(
            f"personalized_auc={personalized_auc!r} needs at least one atom with x > y; "
            "got n_discordant_atoms=0"
        )
    low = 0.0 if k == 0 else 0.5 * (1.0 + (1.0 / k if k else 0.0)) * th**2
    high = (
        1.0 if k_bar == 0 else 1.0 - 0.5 * (1.0 + (1.0 / k_bar if k_bar else 0.0)) * (1 - th) ** 2
    )
    return (low, high)
