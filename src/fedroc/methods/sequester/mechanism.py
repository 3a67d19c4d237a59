"""How a sequestered test set answers one AUC query (paper 2; papers/NOTES.md section 2).

Three rules, each a :class:`Mechanism`; their noise is drawn by :mod:`fedroc.privacy`
(:func:`fedroc.privacy.laplace_noise`) and each noisy release is described by a
:class:`fedroc.privacy.DPEvent`. ``sigma`` is the noise rate, the scale of the Laplace noise
on the AUC scale; ``Delta`` the sensitivity of one subset AUC to one image's label
(:func:`fedroc.methods.sequester.engine.auc_sensitivity`).

- ``thresholdout`` (Dwork et al., Science 2015; the default): a noisy threshold
  ``T + gamma``, ``gamma ~ Lap(2 sigma)``; per query ``eta ~ Lap(4 sigma)``. If
  ``|AUC(subset) - reference| > T + gamma + eta`` the answer is ``AUC(subset) + xi``,
  ``xi ~ Lap(sigma)``, one budget unit is spent and ``gamma`` is redrawn; otherwise the
  developer's own ``reference`` AUC (training or validation) is returned as sent. Each
  crossing costs ``2 Delta / sigma`` (sparse vector ``Delta / sigma`` plus the Laplace
  answer ``Delta / sigma``), answers below the threshold cost nothing: the whole interaction
  is ``(2 B Delta / sigma, 0)``-DP for ``B`` units.
- ``laplace``: every answer is ``AUC(subset) + Lap(sigma)`` and spends one unit; the
  interaction is ``(B Delta / sigma, 0)``-DP.
- ``h-thresholdout`` (paper Figure 2): ``AUC(subset) + Lap(sigma)`` and one unit when
  ``|AUC(subset) - AUC(whole set)| > T``, else the *exact* subset AUC, free. Not
  differentially private and **unsafe against adaptive developers**: predictions built so
  that the subset AUC stays within ``T`` (one image scored above all others) read labels
  one query at a time without spending budget (``scripts/sequester_adaptive.py``). Kept by
  name for the paper's figures and for custodians who trust their developers.

Every value computed from the test set is clipped to [0, 1] and, when the plan sets a step,
rounded to it (:func:`answer_step`: the precision a subset of its size supports).
"""

from __future__ import annotations

import dataclasses
import math
import threading
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fedroc.exceptions import FedrocError, InputError
from fedroc.privacy import GRID_EXPONENT, DPEvent, laplace_noise

__all__ = [
    "DEFAULT_MECHANISM",
    "MECHANISMS",
    "Answer",
    "BudgetExhausted",
    "Mechanism",
    "MechanismName",
    "ParameterError",
    "ReferenceRequired",
    "answer_step",
    "laplace",
]

MechanismName = Literal["thresholdout", "laplace", "h-thresholdout"]
MECHANISMS: tuple[str, ...] = ("thresholdout", "laplace", "h-thresholdout")
DEFAULT_MECHANISM: MechanismName = "thresholdout"


class BudgetExhausted(FedrocError):
    """The developer has spent every unit of the budget; nothing more is answered."""


class ParameterError(InputError):
    """A value of one parameter the method cannot use.

    The message is for a Python caller; ``parameter`` (the Python name) and ``value``
    (as given) are for callers that speak to their users in another spelling (the
    service's JSON fields), so that they phrase their own message from these attributes
    and never from the text.

    Parameters
    ----------
    message : str
        The error, naming the parameter and repeating the value.
    parameter : str
        The parameter's Python name.
    value : object
        The value refused.
    """

    def __init__(self, message: str, *, parameter: str, value: object) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.value = value


class ReferenceRequired(ParameterError):
    """The mechanism compares with the developer's own AUC (``reference``), and none came.

    Parameters
    ----------
    mechanism : str
        The mechanism's name (``mechanism`` attribute).
    """

    def __init__(self, mechanism: str) -> None:
        super().__init__(
            f"the {mechanism} mechanism needs the developer's reference AUC",
            parameter="reference",
            value=None,
        )
        self.mechanism = mechanism


_POOL_SIZE = 1024


class _NoisePool:
    """Unseeded Laplace draws from :func:`fedroc.privacy.laplace_noise`, 1024 at a time.

    The vetted sampler (OpenDP) costs milliseconds per call and little more for a batch;
    a query draws one to three values. Each pooled value is used once; the pool is server
    state like any other secret of the custodian's, never seen by a developer.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: dict[tuple[float, float], tuple[list[float], DPEvent]] = {}

    def draw(self, scale: float, sensitivity: float) -> tuple[float, DPEvent]:
        key = (scale, sensitivity)
        with self._lock:
            pooled = self._pools.get(key)
            if pooled is None or not pooled[0]:
                noise, event = laplace_noise(
                    _POOL_SIZE, epsilon=sensitivity / scale, sensitivity=sensitivity
                )
                pooled = self._pools[key] = (noise.tolist(), event)
            value = pooled[0].pop()
        return value, dataclasses.replace(pooled[1], size=1)


_POOL = _NoisePool()


def laplace(
    scale: float, *, sensitivity: float = 1.0, rng: np.random.Generator | None = None
) -> tuple[float, DPEvent]:
    """One ``Laplace(0, scale)`` draw from :func:`fedroc.privacy.laplace_noise`.

    The noise is calibrated as ``epsilon = sensitivity / scale``, so the returned event
    states what one such release of a statistic of that sensitivity guarantees. Without
    ``rng`` the draw comes from fedroc.privacy's own sampler and entropy (through a pool
    of unseeded draws), never from anything a developer sends; tests pass a seeded
    generator.
    """
    if rng is None:
        return _POOL.draw(scale, sensitivity)
    noise, event = laplace_noise(1, epsilon=sensitivity / scale, sensitivity=sensitivity, rng=rng)
    return float(noise[0]), event


def _on_grid(holdout: float, rng: np.random.Generator | None) -> float:
    """``holdout`` on OpenDP's 2^-30 grid when the noise added to it is OpenDP's (no ``rng``).

    OpenDP's noise is a multiple of 2^-30; added in floating point to an exact AUC, it
    keeps the AUC's bits below 2^-30, and they name the AUC among the fractions
    ``k / (2 P N)`` (Mironov 2012). On the grid the sum is exact and tells only the noisy
    value; the pool's noise scale already covers the rounding (two grid steps).
    """
    if rng is not None:
        return holdout
    return round(holdout * 2.0**-GRID_EXPONENT) * 2.0**GRID_EXPONENT


def answer_step(n_pos: int, n_neg: int) -> float:
    """Return the AUC rounding step for subsets of ``n_pos`` positives and ``n_neg`` negatives.

    The standard error of an AUC near 0.5 is ``sqrt((n_pos + n_neg + 1) / (12 n_pos
    n_neg))`` (Mann-Whitney under the null); the step is that SE rounded down to 1, 2 or 5
    times a power of ten, so rounding never hides more than the sampling error does.

    Parameters
    ----------
    n_pos, n_neg : int
        Positives and negatives of a subset, at least 1 each.

    Returns
    -------
    float
        The step, 1, 2 or 5 times a power of ten.

    Raises
    ------
    InputError
        A class is empty.

    Examples
    --------
    >>> answer_step(503, 3685)  # the paper's subsets of 4188 images at prevalence 0.12
    0.01
    >>> answer_step(13, 92)
    0.05
    """
    if n_pos < 1 or n_neg < 1:
        raise InputError(f"a subset needs both classes; got {n_pos} positive, {n_neg} negative")
    se = math.sqrt((n_pos + n_neg + 1) / (12.0 * n_pos * n_neg))
    decade = 10.0 ** math.floor(math.log10(se))
    mult = max(m for m in (1, 2, 5) if m * decade <= se * (1 + 1e-12))
    return round(mult * decade, 12)


@dataclass(frozen=True)
class Answer:
    """One answered query. ``value`` is all the developer receives besides the budget.

    ``holdout`` (the exact subset AUC), ``noise``, ``threshold_noise`` and ``events`` stay
    with the custodian (audit).

    Attributes
    ----------
    value : float
        The released AUC, clipped to [0, 1] and rounded to the mechanism's step.
    spent : int
        Budget units this answer spent (0 or 1).
    budget_after : int
        Budget units left after it.
    holdout : float
        The exact subset AUC.
    reference : float
        The value compared with it: the whole-set AUC (h-variant) or the developer's own
        AUC (Dwork's rule).
    noise : float
        Laplace noise added to ``holdout`` (0 when none was released).
    threshold_noise : float
        The noisy threshold's noise after this answer (Dwork's rule; 0 otherwise).
    events : tuple of DPEvent
        The differential-privacy events of this answer.
    """

    value: float
    spent: int
    budget_after: int
    holdout: float
    reference: float
    noise: float
    threshold_noise: float
    events: tuple[DPEvent, ...] = ()


@dataclass(frozen=True)
class Mechanism:
    """An answering rule with its threshold ``T``, noise rate ``sigma`` and rounding step.

    Parameters
    ----------
    name : {"thresholdout", "laplace", "h-thresholdout"}
        See the module docstring; ``thresholdout`` (Dwork et al.) is the default.
    threshold : float, default 0.02
        ``T`` (Gossmann et al.'s simulations, as the paper).
    noise_rate : float, default 0.124
        ``sigma``, the Laplace scale on the AUC scale (the paper's clinical value).
    step : float, default 0
        Released values are rounded to multiples of ``step`` (0: not rounded).
    """

    name: MechanismName = DEFAULT_MECHANISM
    threshold: float = 0.02
    noise_rate: float = 0.124
    step: float = 0.0

    def __post_init__(self) -> None:
        """Check the rule's name, ``threshold >= 0``, ``noise_rate > 0`` and ``0 <= step < 1``."""
        if self.name not in MECHANISMS:
            raise InputError(f"mechanism must be one of {MECHANISMS}; got {self.name!r}")
        if not (self.threshold >= 0 and math.isfinite(self.threshold)):
            raise InputError(f"threshold must be a number >= 0; got {self.threshold!r}")
        if not (self.noise_rate > 0 and math.isfinite(self.noise_rate)):
            raise InputError(f"noise_rate must be a positive number; got {self.noise_rate!r}")
        if not (0 <= self.step < 1):
            raise InputError(f"step must lie in [0, 1); got {self.step!r}")

    @property
    def needs_reference(self) -> bool:
        """Dwork's rule compares with the developer's own AUC, which they must send."""
        return self.name == "thresholdout"

    def comparison(self, reference: float | None, whole_auc: float) -> float:
        """Return the AUC a subset's AUC is compared with in :meth:`answer`.

        Dwork's rule takes the developer's own ``reference`` (:class:`ReferenceRequired`
        when it is None); the others the whole test set's ``whole_auc``.
        """
        if not self.needs_reference:
            return float(whole_auc)
        if reference is None:
            raise ReferenceRequired(self.name)
        return float(reference)

    def epsilon(self, units: int, sensitivity: float) -> float | None:
        """Epsilon of a whole interaction of ``units`` budget units (None: not DP)."""
        per_unit = sensitivity / self.noise_rate
        if self.name == "thresholdout":
            return 2.0 * units * per_unit
        if self.name == "laplace":
            return units * per_unit
        return None

    def release(self, value: float) -> float:
        """Clip a value computed from the test set to [0, 1] and round it to ``step``."""
        v = min(1.0, max(0.0, value))
        if self.step > 0:
            v = min(1.0, max(0.0, round(round(v / self.step) * self.step, 12)))
        return v

    def initial_threshold_noise(
        self, rng: np.random.Generator | None = None, *, sensitivity: float = 1.0
    ) -> float:
        """``gamma ~ Lap(2 sigma)`` for Dwork's rule; 0 for the others (no noisy threshold)."""
        if self.name != "thresholdout":
            return 0.0
        return laplace(2.0 * self.noise_rate, sensitivity=sensitivity, rng=rng)[0]

    def answer(
        self,
        holdout: float,
        reference: float,
        *,
        budget: int,
        threshold_noise: float = 0.0,
        sensitivity: float = 1.0,
        rng: np.random.Generator | None = None,
    ) -> Answer:
        """Answer one query, or raise :class:`BudgetExhausted` when ``budget < 1``.

        ``holdout`` is the subset AUC; ``reference`` the whole-set AUC (h-variant) or the
        developer's own AUC (Dwork; unused by ``laplace``). ``sensitivity`` is the subset
        AUC's sensitivity to one label, for the events. Returns the answer and the state
        after it.
        """
        if budget < 1:
            raise BudgetExhausted("the budget is spent; no more answers")
        sigma = self.noise_rate
        gap = abs(holdout - reference)
        if self.name == "laplace" or (self.name == "h-thresholdout" and gap > self.threshold):
            psi, event = laplace(sigma, sensitivity=sensitivity, rng=rng)
            value = self.release(_on_grid(holdout, rng) + psi)
            return Answer(value, 1, budget - 1, holdout, reference, psi, 0.0, (event,))
        if self.name == "h-thresholdout":
            return Answer(self.release(holdout), 0, budget, holdout, reference, 0.0, 0.0)
        eta = laplace(4.0 * sigma, sensitivity=sensitivity, rng=rng)[0]
        if gap > self.threshold + threshold_noise + eta:
            xi, answer_event = laplace(sigma, sensitivity=sensitivity, rng=rng)
            gamma = laplace(2.0 * sigma, sensitivity=sensitivity, rng=rng)[0]
            # Sparse vector with threshold noise Lap(2 sigma) and query noise Lap(4 sigma),
            # the threshold redrawn after each crossing: Delta / sigma per crossing.
            crossing = DPEvent(
                "sparse-vector",
                sensitivity / sigma,
                0.0,
                sensitivity,
                4.0 * sigma,
                note="Thresholdout crossing (Dwork et al. 2015)",
            )
            value = self.release(_on_grid(holdout, rng) + xi)
            return Answer(
                value, 1, budget - 1, holdout, reference, xi, gamma, (crossing, answer_event)
            )
        return Answer(reference, 0, budget, holdout, reference, 0.0, threshold_noise)
