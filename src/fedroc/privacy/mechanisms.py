"""Differential-privacy mechanisms.

Each mechanism takes keyword-only ``epsilon``, ``delta`` (where it applies) and ``rng`` and
exposes the scale of its noise, so that a confidence interval can include the noise
variance.

Where the noise comes from (the site's choice, never the analyst's):

- ``rng=None`` (production): the continuous mechanisms (Gaussian, Laplace) are OpenDP's
  (``opendp.measurements.make_gaussian`` / ``make_laplace``), which sample exactly on a
  grid of width 2^-30 and so resist the floating-point attacks on textbook samplers
  (Mironov 2012, "On significance of the least significant bits for differential
  privacy"): the released value is rounded with the noise, not the float sum ``x + noise``.
  The sensitivity is raised by two grid steps to cover that rounding. The noise *shares*
  of distributed DP (negative-binomial / Gamma differences) have no OpenDP sampler (0.16
  offers Laplace, Gaussian and geometric laws only); they are drawn by numpy from a
  generator seeded with 128 bits of operating-system entropy (``secrets``). Discrete
  shares are integers, so there are no low-order bits to leak; their law is tested
  against the exact discrete Laplace pmf.
- ``rng=<numpy Generator>``: a generator the *site* seeded from its own configuration,
  for reproducible simulations and tests (``Site(noise_seed=...)``). The event records
  ``sampler="site-seed"`` so a release drawn that way is never mistaken for production.

Mechanisms:

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
import secrets
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special

from fedroc._docs import fill, fill_doc
from fedroc.exceptions import InputError
from fedroc.privacy.ledger import DPEvent

__all__ = [
    "GRID_EXPONENT",
    "MIN_DISCRETE_EPSILON",
    "NOISE_SHARES",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "continuous_laplace_shares",
    "discrete_laplace_mechanism",
    "discrete_laplace_shares",
    "discrete_laplace_variance",
    "gaussian_mechanism",
    "gaussian_noise",
    "laplace_mechanism",
    "laplace_noise",
    "laplace_shares",
    "os_entropy_rng",
]

T = TypeVar("T")

# OpenDP rounds released values to multiples of 2^GRID_EXPONENT (its ``k``).
GRID_EXPONENT = -30
_GRID_SLACK = 2.0 ** (GRID_EXPONENT + 1)
# Below it (epsilon over sensitivity) discrete Laplace noise, of scale 1/epsilon, overflows
# 64-bit counts in its tails (and 1 - exp(-epsilon) rounds to 0).
MIN_DISCRETE_EPSILON = 1e-12


def _check_sensitivity(sensitivity: float) -> None:
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise InputError(f"sensitivity must be a positive number; got {sensitivity!r}")


def _check_privacy(epsilon: float, sensitivity: float, delta: float | None = None) -> None:
    """Refuse an epsilon or a sensitivity that is not a positive number, a delta outside (0, 1)."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise InputError(f"epsilon must be a positive number; got {epsilon!r}")
    if delta is not None and not 0.0 < delta < 1.0:
        raise InputError(f"delta must lie in (0, 1); got {delta!r}")
    _check_sensitivity(sensitivity)
    if not math.isfinite(sensitivity / epsilon):
        # A subnormal epsilon (5e-324): the noise's scale overflows, which OpenDP refused
        # with an error of its own, not one naming the argument.
        raise InputError(
            f"epsilon {epsilon!r} is too small: the noise's scale (sensitivity / epsilon) is "
            "not a finite number"
        )


def _refuses_gaussian_parameters(func: T) -> T:
    """Document the refusals of a Gaussian calibration (:func:`_check_privacy`) once."""
    func.__doc__ = fill(
        func.__doc__ or "",
        gaussian_refusals="""\
InputError
    ``epsilon`` or ``sensitivity`` not positive, or ``delta`` outside (0, 1).""",
    )
    return func


def os_entropy_rng() -> np.random.Generator:
    """Return a numpy generator seeded with 128 bits from the operating system (``secrets``).

    Returns
    -------
    numpy.random.Generator
        A PCG64 generator, for the laws OpenDP lacks.
    """
    return np.random.Generator(np.random.PCG64(secrets.randbits(128)))


def _rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    return os_entropy_rng() if rng is None else np.random.default_rng(rng)


def _sampler(rng: Any) -> str:
    return "site-seed" if rng is not None else "opendp"


def _opendp() -> Any:
    # Imported on first use: OpenDP's native library takes a moment to load.
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


def _opendp_apply(kind: str, values: NDArray[np.float64], scale: float) -> NDArray[np.float64]:
    """``values`` plus OpenDP's Gaussian or Laplace noise of ``scale``, on the 2^k grid."""
    flat = np.array(values, dtype=np.float64).reshape(-1)  # OpenDP refuses read-only arrays
    if flat.size == 0:
        return flat.reshape(np.shape(values))
    dp = _opendp()
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=int(flat.size))
    if kind == "gaussian":
        meas = dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=scale, k=GRID_EXPONENT)
    else:
        meas = dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=scale, k=GRID_EXPONENT)
    return np.asarray(meas(flat), dtype=np.float64).reshape(np.shape(values))


def _opendp_discrete_laplace(size: int | tuple[int, ...], scale: float) -> NDArray[np.int64]:
    """OpenDP's discrete Laplace noise of ``scale`` (``P(k) ~ exp(-|k| / scale)``), int64."""
    n = int(np.prod(size))
    if n == 0:
        return np.zeros(size, dtype=np.int64)
    dp = _opendp()
    domain = dp.vector_domain(dp.atom_domain(T="i64"), size=n)
    meas = dp.m.make_laplace(domain, dp.l1_distance(T="i64"), scale=scale)
    return np.asarray(meas([0] * n), dtype=np.int64).reshape(size)


def _grid_slack(rng: np.random.Generator | None) -> float:
    """Return what OpenDP's rounding to its grid adds to the sensitivity (0 with a site rng)."""
    return _GRID_SLACK if rng is None else 0.0


def _release(
    law: str, values: NDArray[np.float64], rng: np.random.Generator | None, event: DPEvent
) -> tuple[NDArray[np.float64], DPEvent]:
    """``values`` plus ``law``'s noise ("gaussian" or "laplace") of ``event.noise_scale``.

    Without ``rng`` OpenDP draws the noise on its grid (production); with the site-seeded
    ``rng`` numpy does (simulations). Returns the noisy values and ``event`` completed with
    their number and the sampler.
    """
    x = np.asarray(values, dtype=np.float64)
    if rng is None:
        noisy = _opendp_apply(law, x, event.noise_scale)
    else:
        draw = _rng(rng).normal if law == "gaussian" else _rng(rng).laplace
        noisy = x + draw(0.0, event.noise_scale, x.shape)
    return noisy, replace(event, size=int(x.size), sampler=_sampler(rng))


@_refuses_gaussian_parameters
def classic_gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float) -> float:
    """Noise sd of the classic Gaussian mechanism, ``sqrt(2 ln(1.25/delta)) Delta2 / epsilon``.

    The guarantee holds for epsilon < 1 (Dwork & Roth, Theorem A.1); paper 1 uses it for
    all epsilon, as does this function, which is why the analytic variant exists.

    Parameters
    ----------
    {epsilon}
    {delta}
    {l2_sensitivity}

    Returns
    -------
    float
        The noise standard deviation sigma.

    Raises
    ------
    {gaussian_refusals}
    """
    _check_privacy(epsilon, sensitivity, delta)
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon


@fill_doc
def analytic_gaussian_delta(sigma: float, *, epsilon: float, sensitivity: float) -> float:
    """Exact delta of the Gaussian mechanism with noise sd ``sigma`` (Balle & Wang, Thm 8).

    Parameters
    ----------
    sigma : float
        Noise standard deviation, positive.
    {epsilon}
    {l2_sensitivity}

    Returns
    -------
    float
        The smallest delta for which the mechanism is (epsilon, delta)-DP.
    """
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    # exp(eps) Phi(-a - b) in log space: the product under- and overflows for large eps.
    # Phi by scipy.special (what scipy.stats.norm calls, without its 70 us of argument
    # handling per call: the root finder of analytic_gaussian_sigma calls this ~100 times).
    second = math.exp(epsilon + float(special.log_ndtr(-a - b)))
    return float(special.ndtr(a - b)) - second


@_refuses_gaussian_parameters
def analytic_gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest noise sd that makes the Gaussian mechanism (epsilon, delta)-DP.

    Balle & Wang (2018), "Improving the Gaussian mechanism for differential privacy",
    Theorem 8; delta(sigma) decreases in sigma, so a bracketing root finder is exact.

    Parameters
    ----------
    {epsilon, delta, l2_sensitivity}

    Returns
    -------
    float
        sigma, rounded up so that :func:`analytic_gaussian_delta` of it is at most
        ``delta``.

    Raises
    ------
    {gaussian_refusals}
    """
    _check_privacy(epsilon, sensitivity, delta)

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


def _gaussian_sigma(
    epsilon: float, delta: float, sensitivity: float, calibration: str
) -> tuple[float, str]:
    if calibration == "classic":
        return (
            classic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity),
            "gaussian",
        )
    if calibration == "analytic":
        return (
            analytic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity),
            "analytic-gaussian",
        )
    raise InputError(f"calibration must be 'classic' or 'analytic'; got {calibration!r}")


@fill_doc
def gaussian_mechanism(
    values: NDArray[np.float64],
    *,
    epsilon: float,
    delta: float,
    sensitivity: float,
    calibration: str = "classic",
    rng: np.random.Generator | None = None,
) -> tuple[NDArray[np.float64], DPEvent]:
    """``values`` with Gaussian noise calibrated to (epsilon, delta) and the l2-sensitivity.

    ``calibration`` is ``"classic"`` (paper 1) or ``"analytic"`` (Balle & Wang). The
    classic calibration is proven for epsilon < 1 only: its event records the larger of
    ``delta`` and the Gaussian's exact delta at the noise used
    (:func:`analytic_gaussian_delta`), which exceeds ``delta`` at large epsilon. Without
    ``rng`` OpenDP draws the noise and rounds the result to its grid (see the module
    docstring); with a site-seeded ``rng`` numpy does (simulations).

    Returns the noisy values and the event to record.

    Parameters
    ----------
    values : ndarray of float64
        The exact values to release.
    {epsilon}
    {delta}
    {l2_sensitivity}
    {calibration}
    {mechanism_rng}

    {returns_noisy_release}

    Raises
    ------
    InputError
        Invalid ``epsilon``, ``delta``, ``sensitivity`` or ``calibration``.
    """
    _check_sensitivity(sensitivity)
    bound = sensitivity + _grid_slack(rng)
    sigma, name = _gaussian_sigma(epsilon, delta, bound, calibration)
    if calibration == "classic":
        # The classic bound holds for epsilon < 1 only; above it the noise may be (epsilon,
        # delta')-DP for a larger delta' only, and that is what the event records (R26).
        delta = max(delta, analytic_gaussian_delta(sigma, epsilon=epsilon, sensitivity=bound))
    return _release("gaussian", values, rng, DPEvent(name, epsilon, delta, sensitivity, sigma))


@fill_doc
def gaussian_noise(
    size: int | tuple[int, ...],
    *,
    epsilon: float,
    delta: float,
    sensitivity: float,
    calibration: str = "classic",
    rng: np.random.Generator | int | None = None,
) -> tuple[NDArray[np.float64], DPEvent]:
    """Gaussian noise alone (the mechanism applied to zeros); see :func:`gaussian_mechanism`.

    Prefer :func:`gaussian_mechanism` on the values themselves: adding float noise to a
    value afterwards is exactly what the floating-point attacks exploit.

    Parameters
    ----------
    size : int or tuple of int
        Shape of the noise.
    {epsilon}
    {delta}
    {l2_sensitivity}
    {calibration}
    {noise_rng}

    {returns_noise}
    """
    gen = None if rng is None else _rng(rng)
    return gaussian_mechanism(
        np.zeros(size),
        epsilon=epsilon,
        delta=delta,
        sensitivity=sensitivity,
        calibration=calibration,
        rng=gen,
    )


@fill_doc
def laplace_mechanism(
    values: NDArray[np.float64],
    *,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator | None = None,
) -> tuple[NDArray[np.float64], DPEvent]:
    """``values`` with Laplace noise of scale ``sensitivity / epsilon`` (l1-sensitivity).

    Parameters
    ----------
    values : ndarray of float64
        The exact values to release.
    {epsilon}
    {l1_sensitivity}
    {mechanism_rng}

    {returns_noisy_release}

    Raises
    ------
    InputError
        ``epsilon`` or ``sensitivity`` not a positive number.
    """
    _check_privacy(epsilon, sensitivity)
    scale = (sensitivity + _grid_slack(rng)) / epsilon
    return _release("laplace", values, rng, DPEvent("laplace", epsilon, 0.0, sensitivity, scale))


@fill_doc
def laplace_noise(
    size: int | tuple[int, ...],
    *,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator | int | None = None,
) -> tuple[NDArray[np.float64], DPEvent]:
    """Laplace noise alone (the mechanism applied to zeros); see :func:`laplace_mechanism`.

    Parameters
    ----------
    size : int or tuple of int
        Shape of the noise.
    {epsilon}
    {l1_sensitivity}
    {noise_rng}

    {returns_noise}
    """
    gen = None if rng is None else _rng(rng)
    return laplace_mechanism(np.zeros(size), epsilon=epsilon, sensitivity=sensitivity, rng=gen)


@fill_doc
def discrete_laplace_variance(*, epsilon: float, sensitivity: float = 1.0) -> float:
    """Variance of the discrete Laplace law ``P(k) ∝ exp(-epsilon |k| / sensitivity)``.

    Parameters
    ----------
    {epsilon}
    sensitivity : float, default 1.0
        The l1-sensitivity (for counts, 1).

    Returns
    -------
    float
        ``2 alpha / (1 - alpha)^2`` with ``alpha = exp(-epsilon / sensitivity)``.
    """
    alpha = math.exp(-epsilon / sensitivity)
    return 2.0 * alpha / (1.0 - alpha) ** 2


@fill_doc
def discrete_laplace_mechanism(
    count: int,
    *,
    epsilon: float,
    sensitivity: int = 1,
    rng: np.random.Generator | None = None,
) -> tuple[int, DPEvent]:
    """Add discrete Laplace noise to a count, ``P(k) ∝ exp(-epsilon |k| / sensitivity)``.

    Without ``rng`` OpenDP samples it (``make_laplace`` over integers: exact, no float bits
    to leak); with the site's ``rng`` numpy does (simulations).

    Parameters
    ----------
    count : int
        The exact count to release.
    {epsilon}
    sensitivity : int, default 1
        How much one person changes ``count``.
    {mechanism_rng}

    Returns
    -------
    noisy : int
        ``count`` plus the noise.
    event : DPEvent
        The guarantee, ``(epsilon, 0)``, and the noise's standard deviation.

    Raises
    ------
    InputError
        ``epsilon`` or ``sensitivity`` not a positive number, or ``count`` not whole.
    """
    _check_privacy(epsilon, sensitivity)
    if isinstance(count, bool) or int(count) != count:
        raise InputError(f"count must be a whole number; got {count!r}")
    scale = sensitivity / epsilon
    if rng is None:
        dp = _opendp()
        meas = dp.m.make_laplace(dp.atom_domain(T=int), dp.absolute_distance(T=int), scale=scale)
        noisy, sampler = int(meas(int(count))), "opendp"
    else:
        share, _ = laplace_shares(
            1, noise="discrete", n_shares=1, epsilon=epsilon, sensitivity=sensitivity, rng=rng
        )
        noisy, sampler = int(count) + int(share[0]), "site-seed"
    sd = math.sqrt(discrete_laplace_variance(epsilon=epsilon, sensitivity=sensitivity))
    return noisy, DPEvent("discrete-laplace", epsilon, 0.0, sensitivity, sd, 1, sampler=sampler)


NOISE_SHARES = ("discrete", "continuous")


@fill_doc
def laplace_shares(
    size: int | tuple[int, ...],
    *,
    noise: str,
    n_shares: int,
    epsilon: float,
    sensitivity: float = 1.0,
    rng: np.random.Generator | int | None = None,
) -> tuple[NDArray[Any], DPEvent]:
    """One party's share of Laplace noise split over ``n_shares`` parties.

    Each party calls this with its own generator; the event records the guarantee of the
    summed noise.

    Parameters
    ----------
    size : int or tuple of int
        Shape of the share.
    noise : {"discrete", "continuous"}
        ``"discrete"``: the difference of two NB(1/n, 1 - exp(-epsilon/sensitivity))
        variables (int64); the n shares sum to a discrete Laplace variable with parameter
        ``exp(-epsilon/sensitivity)``. ``"continuous"``: the difference of two
        Gamma(1/n, sensitivity/epsilon) variables (float64); the n shares sum to a
        Laplace(sensitivity/epsilon) variable. A full draw (``n_shares=1``) without
        ``rng`` is released as it is: OpenDP's (discrete) Laplace, on its 2^-30 grid for
        continuous noise, as every clear release (float noise would tell a count by its low
        bits).
    n_shares : int
        Number of parties whose shares are summed, at least 1.
    {epsilon}
    sensitivity : float, default 1.0
        The l1-sensitivity of the summed values (for counts, 1).
    rng : numpy.random.Generator, int or None, optional
        The site's generator or seed (simulations); None: the operating system's entropy
        (:func:`os_entropy_rng`), or OpenDP for a full continuous draw.

    Returns
    -------
    share : ndarray of int64 (discrete) or float64 (continuous), shape ``size``
        This party's share of the noise.
    event : DPEvent
        The guarantee of the summed noise, noted as one of ``n_shares`` shares.

    Raises
    ------
    InputError
        Invalid ``epsilon``, ``sensitivity``, ``n_shares`` or ``noise``; discrete noise at
        ``epsilon / sensitivity`` below :data:`MIN_DISCRETE_EPSILON`.
    """
    _check_privacy(epsilon, sensitivity)
    if int(n_shares) != n_shares or n_shares < 1:
        raise InputError(f"n_shares must be a positive integer; got {n_shares!r}")
    if noise not in NOISE_SHARES:
        raise InputError(f"noise must be one of {NOISE_SHARES}; got {noise!r}")
    share: NDArray[Any]
    sampler = "site-seed" if rng is not None else "os-entropy"
    if noise == "discrete":
        if epsilon / sensitivity < MIN_DISCRETE_EPSILON:
            raise InputError(
                f"epsilon {epsilon:g} over sensitivity {sensitivity:g} is below "
                f"{MIN_DISCRETE_EPSILON:g}: discrete Laplace noise that wide overflows 64-bit "
                "counts; give a larger epsilon"
            )
        if n_shares == 1 and rng is None:
            # A full draw, released as it is (local DP): OpenDP's discrete Laplace, as every
            # clear release.
            share = _opendp_discrete_laplace(size, sensitivity / epsilon)
            sampler = "opendp"
        else:
            g = _rng(rng)
            p = -math.expm1(-epsilon / sensitivity)
            draws = [g.negative_binomial(1.0 / n_shares, p, size) for _ in range(2)]
            share = (draws[0] - draws[1]).astype(np.int64)
        scale = math.sqrt(discrete_laplace_variance(epsilon=epsilon, sensitivity=sensitivity))
    else:
        scale = sensitivity / epsilon
        if n_shares == 1 and rng is None:
            # A full draw, released as it is (local DP): OpenDP's Laplace on its grid, as
            # every clear release. Float noise added to a count leaks the count through its
            # low bits (Mironov 2012): a value near 0 finer than 2^-53 comes only from a 0.
            share, sampler = _opendp_apply("laplace", np.zeros(size), scale), "opendp"
        else:
            g = _rng(rng)
            share = g.gamma(1.0 / n_shares, scale, size) - g.gamma(1.0 / n_shares, scale, size)
    event = DPEvent(
        "discrete-laplace-share" if noise == "discrete" else "laplace-share",
        epsilon,
        0.0,
        sensitivity,
        scale,
        int(np.size(share)),
        note=f"one of {n_shares} shares",
        sampler=sampler,
    )
    return share, event


discrete_laplace_shares = partial(laplace_shares, noise="discrete")
discrete_laplace_shares.__doc__ = "``laplace_shares(..., noise='discrete')``: integer shares."
continuous_laplace_shares = partial(laplace_shares, noise="continuous")
continuous_laplace_shares.__doc__ = "``laplace_shares(..., noise='continuous')``: float shares."
