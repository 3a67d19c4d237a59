"""Differential-privacy mechanisms.

Each mechanism takes keyword-only ``epsilon``, ``delta`` (where it applies) and ``rng`` and
exposes the scale of its noise, so that a confidence interval can include the noise
variance. Noise comes from a ``numpy.random.Generator``: pass a seeded one to reproduce a
run; leave ``rng=None`` in production to draw from operating-system entropy.

- Gaussian, classic calibration (Dwork & Roth 2014, Thm A.1; paper 1 section 4.2):
  ``sigma = sqrt(2 ln(1.25/delta)) * Delta2 / epsilon``, valid for epsilon < 1.
- Analytic Gaussian (Balle & Wang 2018, Thm 8): the smallest sigma with
  ``Phi(D/(2s) - e s/D) - exp(e) Phi(-D/(2s) - e s/D) <= delta``, found by root finding.
- Laplace: scale ``Delta1 / epsilon``.
- Discrete Laplace (two-sided geometric) as n additive shares: each share is the
  difference of two negative-binomial NB(1/n, 1 - exp(-epsilon/Delta)) variables, so the
  n shares sum to one discrete Laplace variable (Goryczka & Xiong 2015; paper 5).
- Continuous Laplace as n shares: difference of two Gamma(1/n, Delta/epsilon) variables.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, stats

from fedroc.exceptions import InputError
from fedroc.privacy.ledger import DPEvent

__all__ = [
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "continuous_laplace_shares",
    "discrete_laplace_shares",
    "discrete_laplace_variance",
    "gaussian_noise",
    "laplace_noise",
]


def _check_eps_delta(epsilon: float, delta: float | None = None) -> None:
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise InputError(f"epsilon must be a positive number; got {epsilon!r}")
    if delta is not None and not 0.0 < delta < 1.0:
        raise InputError(f"delta must lie in (0, 1); got {delta!r}")


def _check_sensitivity(sensitivity: float) -> None:
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise InputError(f"sensitivity must be a positive number; got {sensitivity!r}")


def _rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def classic_gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float) -> float:
    """Noise sd of the classic Gaussian mechanism, ``sqrt(2 ln(1.25/delta)) Delta2 / epsilon``.

    The guarantee holds for epsilon < 1 (Dwork & Roth, Theorem A.1); paper 1 uses it for
    all epsilon, as does this function, which is why the analytic variant exists.
    """
    _check_eps_delta(epsilon, delta)
    _check_sensitivity(sensitivity)
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon


def analytic_gaussian_delta(sigma: float, *, epsilon: float, sensitivity: float) -> float:
    """Exact delta of the Gaussian mechanism with noise sd ``sigma`` (Balle & Wang, Thm 8)."""
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    # exp(eps) Phi(-a - b) in log space: the product under- and overflows for large eps.
    second = math.exp(epsilon + float(stats.norm.logcdf(-a - b)))
    return float(stats.norm.cdf(a - b)) - second


def analytic_gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest noise sd that makes the Gaussian mechanism (epsilon, delta)-DP.

    Balle & Wang (2018), "Improving the Gaussian mechanism for differential privacy",
    Theorem 8; delta(sigma) decreases in sigma, so a bracketing root finder is exact.
    """
    _check_eps_delta(epsilon, delta)
    _check_sensitivity(sensitivity)

    def excess(log_sigma: float) -> float:
        return (
            analytic_gaussian_delta(math.exp(log_sigma), epsilon=epsilon, sensitivity=sensitivity)
            - delta
        )

    lo, hi = math.log(sensitivity) - 20.0, math.log(sensitivity) + 20.0
    root = optimize.brentq(excess, lo, hi, xtol=1e-14, rtol=1e-14)
    sigma = math.exp(root)
    # Round up so the guarantee holds despite the finite tolerance of the root.
    while analytic_gaussian_delta(sigma, epsilon=epsilon, sensitivity=sensitivity) > delta:
        sigma *= 1.0 + 1e-12
    return sigma


def gaussian_noise(
    size: int | tuple[int, ...],
    *,
    epsilon: float,
    delta: float,
    sensitivity: float,
    calibration: str = "classic",
    rng: np.random.Generator | int | None = None,
) -> tuple[NDArray[np.float64], DPEvent]:
    """Gaussian noise calibrated to (epsilon, delta) and the l2-sensitivity.

    ``calibration`` is ``"classic"`` (paper 1) or ``"analytic"`` (Balle & Wang).
    Returns the noise and the event to record.
    """
    if calibration == "classic":
        sigma = classic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
        name = "gaussian"
    elif calibration == "analytic":
        sigma = analytic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
        name = "analytic-gaussian"
    else:
        raise InputError(f"calibration must be 'classic' or 'analytic'; got {calibration!r}")
    noise = _rng(rng).normal(0.0, sigma, size)
    return noise, DPEvent(name, epsilon, delta, sensitivity, sigma, int(np.size(noise)))


def laplace_noise(
    size: int | tuple[int, ...],
    *,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator | int | None = None,
) -> tuple[NDArray[np.float64], DPEvent]:
    """Laplace noise of scale ``sensitivity / epsilon`` (l1-sensitivity)."""
    _check_eps_delta(epsilon)
    _check_sensitivity(sensitivity)
    scale = sensitivity / epsilon
    noise = _rng(rng).laplace(0.0, scale, size)
    return noise, DPEvent("laplace", epsilon, 0.0, sensitivity, scale, int(np.size(noise)))


def discrete_laplace_variance(*, epsilon: float, sensitivity: float = 1.0) -> float:
    """Variance of the discrete Laplace law ``P(k) ∝ exp(-epsilon |k| / sensitivity)``."""
    alpha = math.exp(-epsilon / sensitivity)
    return 2.0 * alpha / (1.0 - alpha) ** 2


def discrete_laplace_shares(
    size: int | tuple[int, ...],
    *,
    n_shares: int,
    epsilon: float,
    sensitivity: float = 1.0,
    rng: np.random.Generator | int | None = None,
) -> tuple[NDArray[np.int64], DPEvent]:
    """One party's share of discrete Laplace noise split over ``n_shares`` parties.

    Each party calls this with its own generator; the sum of the ``n_shares`` results is
    distributed as a discrete Laplace variable with parameter ``exp(-epsilon/sensitivity)``.
    The event records the guarantee of the summed noise.
    """
    _check_eps_delta(epsilon)
    _check_sensitivity(sensitivity)
    if int(n_shares) != n_shares or n_shares < 1:
        raise InputError(f"n_shares must be a positive integer; got {n_shares!r}")
    g = _rng(rng)
    p = 1.0 - math.exp(-epsilon / sensitivity)
    share = g.negative_binomial(1.0 / n_shares, p, size) - g.negative_binomial(
        1.0 / n_shares, p, size
    )
    scale = math.sqrt(discrete_laplace_variance(epsilon=epsilon, sensitivity=sensitivity))
    event = DPEvent(
        "discrete-laplace-share",
        epsilon,
        0.0,
        sensitivity,
        scale,
        int(np.size(share)),
        note=f"one of {n_shares} shares",
    )
    return share.astype(np.int64), event


def continuous_laplace_shares(
    size: int | tuple[int, ...],
    *,
    n_shares: int,
    epsilon: float,
    sensitivity: float = 1.0,
    rng: np.random.Generator | int | None = None,
) -> tuple[NDArray[np.float64], DPEvent]:
    """One party's share of Laplace(sensitivity/epsilon) noise split over ``n_shares`` parties.

    Difference of two Gamma(1/n, b) variables; n shares sum to a Laplace(b) variable.
    """
    _check_eps_delta(epsilon)
    _check_sensitivity(sensitivity)
    if int(n_shares) != n_shares or n_shares < 1:
        raise InputError(f"n_shares must be a positive integer; got {n_shares!r}")
    g = _rng(rng)
    b = sensitivity / epsilon
    share = g.gamma(1.0 / n_shares, b, size) - g.gamma(1.0 / n_shares, b, size)
    event = DPEvent(
        "laplace-share",
        epsilon,
        0.0,
        sensitivity,
        b,
        int(np.size(share)),
        note=f"one of {n_shares} shares",
    )
    return share, event
