"""Standard errors, sample sizes and power for one AUC.

- Hanley & McNeil (1982): SE of an AUC from its value and the class sizes.
- Obuchowski's variance for sample-size planning, as pROC's ``power.roc.test`` uses it
  (papers/NOTES.md section 2): ``V = 0.0099 exp(-a^2/2) ((5a^2 + 8) + (a^2 + 8)/kappa)``,
  ``a = 1.414 Phi^-1(theta)``, ``kappa = n_controls / n_cases``; the null variance is
  ``V0 = 0.0792 (1 + 1/kappa)`` (V at theta = 0.5). ``V / n_cases`` is the variance of the
  AUC, and ``n_cases = (z_alpha sqrt(V0) + z_beta sqrt(V))^2 / (theta - 0.5)^2``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from scipy import stats

from fedroc._results import ResultMixin, format_table
from fedroc.exceptions import InputError

__all__ = [
    "SampleSize",
    "auc_power",
    "auc_sample_size",
    "hanley_mcneil_se",
    "obuchowski_variance",
]

Alternative = Literal["two-sided", "one-sided"]


def _check_auc(theta: float, name: str = "auc") -> float:
    if not 0.0 < theta < 1.0:
        raise InputError(f"{name} must lie in (0, 1); got {theta!r}")
    return float(theta)


def hanley_mcneil_se(auc: float, n_pos: int, n_neg: int) -> float:
    """Compute the standard error of an AUC by Hanley & McNeil (1982), eq. 2.

    ``sqrt([A(1-A) + (n_pos-1)(Q1-A^2) + (n_neg-1)(Q2-A^2)] / (n_pos n_neg))`` with
    ``Q1 = A/(2-A)`` and ``Q2 = 2A^2/(1+A)``.

    Parameters
    ----------
    auc : float
        The AUC, in [0, 1].
    n_pos : int
        Number of positives (abnormal cases), at least 1.
    n_neg : int
        Number of negatives (normal cases), at least 1.

    Returns
    -------
    float
        The standard error of the AUC.

    Raises
    ------
    InputError
        ``auc`` outside [0, 1] or a class size below 1.

    Examples
    --------
    Hanley & McNeil's CT example (51 abnormal, 58 normal; their table's AUC is 0.89317,
    printed as 0.893), published SE 0.032:

    >>> round(hanley_mcneil_se(0.89317, 51, 58), 3)
    0.032
    """
    a = float(auc)
    if not 0.0 <= a <= 1.0:
        raise InputError(f"auc must lie in [0, 1]; got {auc!r}")
    if n_pos < 1 or n_neg < 1:
        raise InputError(f"n_pos and n_neg must be >= 1; got {n_pos} and {n_neg}")
    q1 = a / (2.0 - a)
    q2 = 2.0 * a * a / (1.0 + a)
    var = (a * (1 - a) + (n_pos - 1) * (q1 - a * a) + (n_neg - 1) * (q2 - a * a)) / (n_pos * n_neg)
    return math.sqrt(max(var, 0.0))


def obuchowski_variance(auc: float, kappa: float = 1.0) -> float:
    """Compute Obuchowski's variance function ``V(theta, kappa)`` (times ``n_cases``).

    ``V / n_cases`` is the variance of an AUC estimated on ``n_cases`` cases and
    ``kappa * n_cases`` controls (formula in the module docstring).

    Parameters
    ----------
    auc : float
        The AUC ``theta``, in (0, 1).
    kappa : float, default 1.0
        Controls per case, > 0.

    Returns
    -------
    float
        ``V(theta, kappa)``: ``n_cases`` times the variance of the AUC.

    Raises
    ------
    InputError
        ``auc`` outside (0, 1) or ``kappa <= 0``.

    Examples
    --------
    >>> round(obuchowski_variance(0.5), 4)
    0.1584
    """
    theta = _check_auc(auc)
    if kappa <= 0:
        raise InputError(f"kappa (controls per case) must be > 0; got {kappa!r}")
    a = 1.414 * float(stats.norm.ppf(theta))
    return 0.0099 * math.exp(-a * a / 2.0) * ((5 * a * a + 8) + (a * a + 8) / kappa)


def _z_alpha(alpha: float, alternative: Alternative) -> float:
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha must lie in (0, 1); got {alpha!r}")
    if alternative == "two-sided":
        return float(stats.norm.isf(alpha / 2.0))
    if alternative == "one-sided":
        return float(stats.norm.isf(alpha))
    raise InputError(f"alternative must be 'two-sided' or 'one-sided'; got {alternative!r}")


@dataclass(frozen=True, repr=False)
class SampleSize(ResultMixin):
    """Cases and controls needed to detect AUC ``auc`` against 0.5.

    ``n_cases`` and ``n_controls`` are rounded up; ``n_cases_exact`` is the unrounded
    solution (what pROC's ``power.roc.test`` reports).

    Attributes
    ----------
    n_cases : int
        Cases (positives) needed, rounded up.
    n_controls : int
        Controls (negatives) needed, ``ceil(kappa * n_cases_exact)``.
    n_cases_exact : float
        The unrounded number of cases.
    auc : float
        The AUC under the alternative hypothesis.
    power : float
        The power asked for.
    alpha : float
        The significance level.
    kappa : float
        Controls per case.
    """

    n_cases: int
    n_controls: int
    n_cases_exact: float
    auc: float
    power: float
    alpha: float
    kappa: float

    def summary(self) -> str:
        """Format the plan (AUC, power, alpha, cases and controls) as a table."""
        return format_table(
            [
                ("AUC under H1", self.auc),
                ("power", self.power),
                ("alpha", self.alpha),
                ("controls per case", self.kappa),
                ("cases", self.n_cases),
                ("controls", self.n_controls),
            ],
            title="Sample size for an AUC test (Obuchowski)",
        )


def auc_sample_size(
    auc: float,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    kappa: float = 1.0,
    alternative: Alternative = "two-sided",
) -> SampleSize:
    """Plan the cases and controls to detect ``auc`` against H0: AUC = 0.5.

    Obuchowski's variance (see the module docstring), as pROC's ``power.roc.test``.

    Parameters
    ----------
    auc : float in (0, 1)
        AUC under the alternative; must differ from 0.5.
    power : float in (0, 1), default 0.8
    alpha : float in (0, 1), default 0.05
        Type I error rate.
    kappa : float, default 1.0
        Controls per case.
    alternative : {"two-sided", "one-sided"}, default "two-sided"

    Returns
    -------
    SampleSize
        ``n_cases`` and ``n_controls`` rounded up, and the unrounded ``n_cases_exact``.

    Examples
    --------
    >>> plan = auc_sample_size(0.75)
    >>> plan.n_cases, plan.n_controls, round(auc_power(0.75, plan.n_cases), 3)
    (19, 19, 0.801)
    """
    theta = _check_auc(auc)
    if theta == 0.5:
        raise InputError("auc must differ from 0.5 to plan a test against 0.5")
    if not 0.0 < power < 1.0:
        raise InputError(f"power must lie in (0, 1); got {power!r}")
    za = _z_alpha(alpha, alternative)
    zb = float(stats.norm.ppf(power))
    v0 = obuchowski_variance(0.5, kappa)
    va = obuchowski_variance(theta, kappa)
    n_cases = (za * math.sqrt(v0) + zb * math.sqrt(va)) ** 2 / (theta - 0.5) ** 2
    cases = math.ceil(n_cases - 1e-9)
    controls = math.ceil(cases * kappa - 1e-9)
    return SampleSize(cases, controls, n_cases, theta, power, alpha, kappa)


def auc_power(
    auc: float,
    n_cases: int,
    *,
    alpha: float = 0.05,
    kappa: float = 1.0,
    alternative: Alternative = "two-sided",
) -> float:
    """Compute the power to detect ``auc`` against H0: AUC = 0.5.

    Parameters
    ----------
    auc : float in (0, 1)
        AUC under the alternative.
    n_cases : int
        Cases (positives); the controls are ``kappa * n_cases``.
    alpha : float in (0, 1), default 0.05
    kappa : float, default 1.0
        Controls per case.
    alternative : {"two-sided", "one-sided"}, default "two-sided"

    Returns
    -------
    float
        Probability of rejecting H0 when the AUC is ``auc`` (Obuchowski's variance).

    Examples
    --------
    >>> round(auc_power(0.75, 30), 3)
    0.946
    """
    theta = _check_auc(auc)
    if n_cases < 1:
        raise InputError(f"n_cases must be >= 1; got {n_cases!r}")
    za = _z_alpha(alpha, alternative)
    v0 = obuchowski_variance(0.5, kappa)
    va = obuchowski_variance(theta, kappa)
    zb = (math.sqrt(n_cases) * abs(theta - 0.5) - za * math.sqrt(v0)) / math.sqrt(va)
    return float(stats.norm.cdf(zb))
