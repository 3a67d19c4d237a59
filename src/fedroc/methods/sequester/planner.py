"""The load-factor planner of paper 2 (Tang et al., MIDRC; papers/NOTES.md section 2).

A custodian holds ``phi`` sequestered images and answers AUC queries on ``rho`` test
subsets of ``N`` images each. The *load factor* of the hash table that maps images to
subsets is ``xi = N rho / phi`` (values per key). The planner answers:

- which subset size a load factor gives (``N = xi phi / rho``, rounded up so the load
  factor is reached);
- the h-Thresholdout_AUC budget of eq. 3,
  ``B = sigma^5 N^2 / (512 (ln 8 + 2 sigma^2 N))``, and its privacy parameter
  ``epsilon = B / (sigma phi)`` (as the paper states it; see the threat model in
  :mod:`fedroc.methods.sequester` for what it does and does not cover);
- the minimum subset size for a given power of the test "AUC = 0.5" at a prevalence
  (Obuchowski's variance, :func:`fedroc.metrics.auc_sample_size`);
- the AUC standard error of one subset (Hanley & McNeil 1982);
- the inverse questions: which subset size and load factor give a requested budget at a
  noise rate, and which noise rate gives it at a load factor.

The budget counts perturbed answers; the engine allows ``floor(B)`` of them (the paper
rounds ``B = 2.09`` to 2.0), so that the number of noisy releases never exceeds ``B``. A plan
of 0 units is refused with the load factor and noise rate that would give one unit.

The paper sets the budget with one noise rate (0.8 in its clinical plan, Figure 5) and
perturbs answers with another (0.124, the Laplace whose full width at half maximum equals
the width of the whole set's bootstrap 95% CI, Figure 4). :func:`plan` takes both
(``noise_rate`` for eq. 3, ``answer_noise_rate`` for the answers, the same by default) and
warns when they differ or when the answers' noise is far from that width rule
(:func:`suggested_noise_rate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize

from fedroc._docs import fill_doc
from fedroc._results import ResultMixin, format_table
from fedroc.exceptions import InputError, warn_user
from fedroc.methods.sequester.engine import resolve_max_copies
from fedroc.methods.sequester.mechanism import DEFAULT_MECHANISM, Mechanism, MechanismName
from fedroc.metrics import (
    auc_sample_size,
    hanley_mcneil_se,
    obuchowski_variance,
)

__all__ = [
    "Plan",
    "PlanWarning",
    "auc_se_at",
    "epsilon_of",
    "load_factor",
    "load_factor_for_budget",
    "min_subset_size",
    "noise_rate_for_budget",
    "plan",
    "power_grid",
    "subset_size",
    "subset_size_for_budget",
    "suggested_noise_rate",
    "thresholdout_budget",
]


class PlanWarning(UserWarning):
    """A plan the paper's example would not choose (see :func:`plan`)."""


_LN8 = math.log(8.0)


def _positive(value: float, name: str) -> float:
    try:
        v = float(value)
    except OverflowError:  # an integer past 1e308 (S4)
        v = math.inf
    if not (v > 0 and math.isfinite(v)):
        raise InputError(f"{name} must be a positive number; got {value!r}")
    return v


MIN_NOISE_RATE, MAX_NOISE_RATE = 1e-6, 100.0


def _noise_rate(value: float, name: str = "noise_rate") -> float:
    # Bounded so that eq. 3 and its inverse neither overflow nor underflow (sigma**5);
    # Laplace noise of scale 100 on an AUC in [0, 1] already answers nothing.
    s = _positive(value, name)
    if not MIN_NOISE_RATE <= s <= MAX_NOISE_RATE:
        raise InputError(
            f"{name} must lie in [{MIN_NOISE_RATE:g}, {MAX_NOISE_RATE:g}]; got {value!r}"
        )
    return s


def _count(value: int, name: str) -> int:
    try:
        ok = (
            isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and int(value) == value
            and value >= 1
        )
    except OverflowError:  # an integer past 1e308 is no count the planner can use (S4)
        ok = False
    if not ok:
        raise InputError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


MAX_SUBSET_SIZE = 10**8
#: The most entries (n_subsets * subset_size) the service draws: 200 MB of int32 membership.
MAX_TABLE_ENTRIES = 50_000_000


def _subset_count(n: float, what: str) -> int:
    if not n <= MAX_SUBSET_SIZE:
        # A size past 1e308 is infinite in floating point, which math.ceil cannot round (S4).
        n = math.ceil(n) if math.isfinite(n) else n
        raise InputError(
            f"{what} gives subsets of {n} images, more than {MAX_SUBSET_SIZE:.0e}; "
            "ask for a smaller load factor or subset size"
        )
    return math.ceil(n)


def _levels(**levels: float) -> None:
    for name, value in levels.items():
        if not (isinstance(value, (int, float)) and 0.0 < value < 1.0):
            raise InputError(f"{name} must lie in (0, 1); got {value!r}")


def _prevalence(value: float) -> float:
    p = float(value)
    if not 0.0 < p < 1.0:
        raise InputError(f"prevalence must lie in (0, 1); got {value!r}")
    return p


@fill_doc
def load_factor(subset_size: int, n_subsets: int, n_images: int) -> float:
    """Load factor ``xi = N rho / phi`` of the image-to-subset hash table.

    Parameters
    ----------
    {subset_size, n_subsets, n_images}

    Returns
    -------
    float
        ``xi``.

    Raises
    ------
    InputError
        An argument that is not a positive integer.
    """
    n = _count(subset_size, "subset_size")
    rho = _count(n_subsets, "n_subsets")
    phi = _count(n_images, "n_images")
    return n * rho / phi


@fill_doc
def subset_size(load_factor: float, n_images: int, n_subsets: int) -> int:
    """Images per subset for a load factor: ``ceil(xi phi / rho)`` (at least 1).

    Parameters
    ----------
    {load_factor}
    {n_images}
    {n_subsets}

    Returns
    -------
    int
        ``N``, at most 1e8.

    Raises
    ------
    InputError
        An invalid argument, or subsets of more than 1e8 images.

    Examples
    --------
    The paper's clinical plan (1047 images, 100 subsets, load factor 400):

    >>> subset_size(400, 1047, 100)
    4188
    """
    xi = _positive(load_factor, "load_factor")
    phi = _count(n_images, "n_images")
    rho = _count(n_subsets, "n_subsets")
    # Rounding up keeps the realised load factor at or above the requested one; the
    # tolerance stops 600 * 1047 / 100 = 6282.000000001 from becoming 6283.
    n = xi * phi / rho
    if n > MAX_SUBSET_SIZE:
        _subset_count(n, f"load_factor {load_factor!r}")
    return max(1, math.ceil(n - 1e-9))


_subset_size_of = subset_size  # plan() has a parameter of the same name


@fill_doc
def thresholdout_budget(subset_size: float, noise_rate: float) -> float:
    """Eq. 3: ``B = sigma^5 N^2 / (512 (ln 8 + 2 sigma^2 N))`` for subsets of ``N`` images.

    Parameters
    ----------
    subset_size : float
        ``N``, images per subset, positive.
    {noise_rate}

    Returns
    -------
    float
        ``B``.

    Examples
    --------
    >>> round(thresholdout_budget(6282, 1.0), 2)
    6.13
    """
    n = _positive(subset_size, "subset_size")
    s = _noise_rate(noise_rate)
    return s**5 * n * n / (512.0 * (_LN8 + 2.0 * s * s * n))


@fill_doc
def epsilon_of(budget: float, noise_rate: float, n_images: int) -> float:
    """Privacy parameter the paper attaches to a budget: ``epsilon = B / (sigma phi)``.

    Parameters
    ----------
    budget : float
        ``B``, non-negative.
    {noise_rate}
    {n_images}

    Returns
    -------
    float
        ``epsilon``.
    """
    if not (budget >= 0 and math.isfinite(budget)):
        raise InputError(f"budget must be a non-negative number; got {budget!r}")
    return float(budget) / (_noise_rate(noise_rate) * _count(n_images, "n_images"))


@fill_doc
def subset_size_for_budget(budget: float, noise_rate: float) -> int:
    """Smallest subset size ``N`` whose eq.-3 budget reaches ``budget`` at ``noise_rate``.

    Eq. 3 rearranged is the quadratic ``sigma^5 N^2 - 1024 B sigma^2 N - 512 B ln 8 = 0``;
    its positive root, rounded up, is returned (the budget grows with ``N``).

    Parameters
    ----------
    {budget}
    {noise_rate}

    Returns
    -------
    int
        ``N``.
    """
    b = _positive(budget, "budget")
    s = _noise_rate(noise_rate)
    a2 = s**5
    a1 = 1024.0 * b * s * s
    a0 = 512.0 * b * _LN8
    root = (a1 + math.sqrt(a1 * a1 + 4.0 * a2 * a0)) / (2.0 * a2)
    if not math.isfinite(root):  # past 1e308, which math.ceil cannot round (S4)
        _subset_count(root, f"budget {budget!r}")
    n = max(1, math.ceil(root - 1e-9))
    # Guard against the last ulp of the root: the budget at n must reach the request.
    while thresholdout_budget(n, s) < b * (1 - 1e-12):
        n += 1
    return n


@fill_doc
def load_factor_for_budget(
    budget: float, noise_rate: float, n_images: int, n_subsets: int
) -> tuple[float, int]:
    """Load factor and subset size that give ``budget`` at ``noise_rate``.

    Returns ``(xi, N)`` with ``N = subset_size_for_budget(budget, noise_rate)`` and
    ``xi = N rho / phi``.

    Parameters
    ----------
    {budget}
    {noise_rate}
    {n_images}
    {n_subsets}

    Returns
    -------
    load_factor : float
        ``xi``.
    subset_size : int
        ``N``.
    """
    n = subset_size_for_budget(budget, noise_rate)
    return load_factor(n, n_subsets, n_images), n


@fill_doc
def noise_rate_for_budget(budget: float, subset_size: int) -> float:
    """Noise rate at which subsets of ``subset_size`` images have the eq.-3 ``budget``.

    The budget increases with the noise rate (about ``sigma^3 N / 1024`` for large ``N``),
    so the root is unique; it is found by Brent's method.

    Parameters
    ----------
    {budget}
    {subset_size}

    Returns
    -------
    float
        ``sigma``, in [1e-6, 100].

    Raises
    ------
    InputError
        No noise rate in that range gives the budget.
    """
    b = _positive(budget, "budget")
    n = _count(subset_size, "subset_size")

    def gap(log_s: float) -> float:
        # exp(log(x)) may miss the bounds by an ulp
        sigma = min(max(math.exp(log_s), MIN_NOISE_RATE), MAX_NOISE_RATE)
        return math.log(thresholdout_budget(n, sigma)) - math.log(b)

    lo, hi = math.log(MIN_NOISE_RATE), math.log(MAX_NOISE_RATE)
    if gap(lo) > 0 or gap(hi) < 0:
        raise InputError(
            f"no noise rate in [{MIN_NOISE_RATE:g}, {MAX_NOISE_RATE:g}] gives budget {budget!r} "
            f"with subsets of {n} images"
        )
    root = math.exp(optimize.brentq(gap, lo, hi, xtol=1e-14, rtol=1e-14))
    return min(max(root, MIN_NOISE_RATE), MAX_NOISE_RATE)


@fill_doc
def suggested_noise_rate(
    auc: float, prevalence: float, n_images: int, *, confidence: float = 0.95
) -> float:
    """Suggest the paper's noise rate: a Laplace whose FWHM equals the whole set's AUC CI width.

    The paper sets ``sigma = 0.124`` so that the full width at half maximum of
    ``Lap(sigma)``, ``2 sigma ln 2``, equals the width of a bootstrap 95% CI of the AUC of
    the whole sequestered set. With the Hanley & McNeil SE in place of the bootstrap,
    ``sigma = z SE / ln 2``.

    Parameters
    ----------
    {planning_auc}
    {prevalence}
    n_images : int
        ``phi``, the number of sequestered images, at least 2.
    confidence : float, default 0.95
        Level of the whole set's AUC interval whose width the noise matches.

    Returns
    -------
    float
        The suggested ``sigma``.

    Examples
    --------
    >>> round(suggested_noise_rate(0.81, 0.12, 1047), 3)
    0.068
    """
    from scipy import stats

    phi = _count(n_images, "n_images")
    if phi < 2:
        raise InputError(f"n_images must be at least 2; got {n_images!r}")
    n_pos, n_neg = _class_sizes(phi, _prevalence(prevalence))
    z = float(stats.norm.isf((1.0 - confidence) / 2.0))
    return z * hanley_mcneil_se(auc, n_pos, n_neg) / math.log(2.0)


def _class_sizes(n: int, prevalence: float) -> tuple[int, int]:
    """Positives and negatives of a subset of ``n`` images at ``prevalence`` (>= 1 each)."""
    n_pos = min(max(round(prevalence * n), 1), n - 1)
    return n_pos, n - n_pos


@fill_doc
def auc_se_at(
    auc: float, prevalence: float, *, load_factor: float, n_images: int, n_subsets: int
) -> float:
    """Hanley & McNeil SE of the AUC of one subset at a load factor.

    The subset holds ``N = ceil(xi phi / rho)`` images, ``round(prevalence N)`` of them
    positive; the SE falls like ``sqrt(rho / (xi phi))``.

    Parameters
    ----------
    {planning_auc}
    {prevalence}
    {load_factor}
    {n_images}
    {n_subsets}

    Returns
    -------
    float
        The standard error of one subset's AUC.

    Raises
    ------
    InputError
        Subsets of fewer than two images, or an invalid argument.
    """
    n = subset_size(load_factor, n_images, n_subsets)
    if n < 2:
        raise InputError(f"a subset of {n} image cannot hold both classes")
    n_pos, n_neg = _class_sizes(n, _prevalence(prevalence))
    return hanley_mcneil_se(auc, n_pos, n_neg)


@fill_doc
def min_subset_size(
    auc: float, prevalence: float, *, power: float = 0.8, alpha: float = 0.05
) -> int:
    """Smallest subset that detects ``auc`` against 0.5 with ``power`` at ``prevalence``.

    Cases are the positives: ``kappa = (1 - p) / p`` controls per case, and the size is
    ``n_cases + n_controls`` from :func:`fedroc.metrics.auc_sample_size` (Obuchowski).

    Parameters
    ----------
    {planning_auc}
    {prevalence}
    {power}
    {alpha}

    Returns
    -------
    int
        Images per subset.
    """
    p = _prevalence(prevalence)
    ss = auc_sample_size(auc, power=power, alpha=alpha, kappa=(1.0 - p) / p)
    return ss.n_cases + ss.n_controls


@fill_doc
def power_grid(
    auc: float,
    prevalence: float,
    load_factors: ArrayLike,
    n_subsets: ArrayLike,
    n_images: int,
    *,
    alpha: float = 0.05,
) -> NDArray[np.float64]:
    """Power of the two-sided test AUC = 0.5 for subsets on a (load factor, subsets) grid.

    Entry ``[i, j]`` is for ``n_subsets[i]`` and ``load_factors[j]``: subsets of
    ``N = ceil(xi phi / rho)`` images hold ``n_cases = p N`` positives (not rounded, so the
    surface is smooth) and ``kappa = (1 - p) / p`` controls per case; the power is
    ``Phi((sqrt(n_cases) |theta - 0.5| - z sqrt(V0)) / sqrt(V))`` with Obuchowski's ``V``
    (the formula of :func:`fedroc.metrics.auc_power`, vectorized). Paper 2, Figure 3.

    Parameters
    ----------
    {planning_auc}
    {prevalence}
    load_factors : array-like of float, shape (n_load_factors,)
        Load factors ``xi``, positive.
    n_subsets : array-like of int, shape (n_subset_counts,)
        Numbers of subsets ``rho``, at least 1.
    {n_images}
    {alpha}

    Returns
    -------
    ndarray of float64, shape (n_subset_counts, n_load_factors)
        The power at each grid point.
    """
    from scipy import stats

    p = _prevalence(prevalence)
    phi = _count(n_images, "n_images")
    xi = np.asarray(load_factors, dtype=np.float64)
    rho = np.asarray(n_subsets, dtype=np.float64)
    if (xi <= 0).any() or (rho < 1).any():
        raise InputError("load factors must be > 0 and numbers of subsets >= 1")
    kappa = (1.0 - p) / p
    v0 = obuchowski_variance(0.5, kappa)
    va = obuchowski_variance(auc, kappa)
    z = float(stats.norm.isf(alpha / 2.0))
    n = np.maximum(np.ceil(xi[None, :] * phi / rho[:, None] - 1e-9), 1.0)
    cases = p * n
    zb = (np.sqrt(cases) * abs(auc - 0.5) - z * math.sqrt(v0)) / math.sqrt(va)
    return np.asarray(stats.norm.cdf(zb), dtype=np.float64)


@dataclass(frozen=True, repr=False)
class Plan(ResultMixin):
    """A sequestration plan: subsets, h-Thresholdout_AUC budget, privacy, precision.

    Attributes
    ----------
    n_images, n_subsets : int
        ``phi`` and ``rho``.
    load_factor : float
        Realised ``N rho / phi`` (at least the requested one).
    subset_size : int
        ``N``, images per subset.
    noise_rate : float
        ``sigma`` of eq. 3, the noise rate the budget is computed for.
    answer_noise_rate : float
        Scale of the Laplace perturbation of the answers (``noise_rate`` unless given).
    budget : float
        Eq. 3 at ``N`` and ``sigma``.
    budget_units : int
        ``floor(budget)``: perturbed answers a developer may receive.
    epsilon : float
        ``budget / (sigma phi)``.
    auc, prevalence : float or None
        Planning assumptions for the AUC SE and the power.
    auc_se : float or None
        Hanley & McNeil SE of one subset's AUC (when ``auc`` and ``prevalence`` are given).
    min_subset_size : int or None
        Smallest subset reaching ``power`` at ``alpha`` (Obuchowski).
    subset_power : float or None
        Power of one subset of ``N`` images.
    power, alpha : float
        Targets used for ``min_subset_size``.
    max_copies : int
        The most copies of one image in a subset (1: drawn without replacement), as the
        service draws them (:func:`~fedroc.methods.sequester.engine.draw_subsets`).
    sensitivity : float or None
        With ``prevalence``: the AUC's sensitivity the service charges,
        ``min(1, 2 max_copies / min(P, Q))`` at the subset's class sizes.
    epsilon_thresholdout, epsilon_laplace : float or None
        With ``prevalence``: the differential-privacy epsilon in one image's label of a
        developer's ``budget_units`` answers under each mechanism (``2 U Delta / sigma_a``
        and ``U Delta / sigma_a``, ``U = budget_units``, not the eq.-3 ``budget``), which
        the service reports as ``epsilon_guarantee``; ``epsilon`` above is the paper's
        figure, not a guarantee.
    warnings : tuple of str
        What the paper's example would do differently (also issued as
        :class:`PlanWarning`).
    mechanism : str
        The answering rule planned for (``plan``'s ``mechanism``), which titles the
        summary; not in :meth:`to_dict` (the keys of ``fedroc sequester plan --json`` are
        a contract, docs/json.md).
    """

    n_images: int
    n_subsets: int
    load_factor: float
    subset_size: int
    noise_rate: float
    budget: float
    budget_units: int
    epsilon: float
    auc: float | None = None
    prevalence: float | None = None
    auc_se: float | None = None
    min_subset_size: int | None = None
    subset_power: float | None = None
    power: float = 0.8
    alpha: float = 0.05
    answer_noise_rate: float | None = None
    max_copies: int | None = None
    sensitivity: float | None = None
    epsilon_thresholdout: float | None = None
    epsilon_laplace: float | None = None
    warnings: tuple[str, ...] = ()
    mechanism: str = DEFAULT_MECHANISM

    @property
    def summary_title(self) -> str:
        """The title of :meth:`summary`: the mechanism planned for, not always the paper's."""
        return f"Sequestration plan ({self.mechanism})"

    def to_dict(self) -> dict[str, Any]:
        """Return the plan as JSON-ready types (without ``mechanism``, see the attributes)."""
        out = super().to_dict()
        del out["mechanism"]
        return out

    # (label, attribute) of each row of the summary; a label may name ``{power}``.
    SUMMARY_ROWS = (
        ("images (phi)", "n_images"),
        ("subsets (rho)", "n_subsets"),
        ("load factor (xi)", "load_factor"),
        ("subset size (N)", "subset_size"),
        ("noise rate (sigma)", "noise_rate"),
        ("noise rate of the answers", "answer_noise_rate"),
        ("budget (eq. 3)", "budget"),
        ("perturbed answers allowed", "budget_units"),
        ("epsilon = B / (sigma phi) (the paper's, not DP)", "epsilon"),
        ("most copies of an image in a subset", "max_copies"),
        ("AUC sensitivity (Delta)", "sensitivity"),
        ("DP epsilon of the answers, thresholdout", "epsilon_thresholdout"),
        ("DP epsilon of the answers, laplace", "epsilon_laplace"),
        ("AUC SE of one subset (Hanley-McNeil)", "auc_se"),
        ("minimum subset size (power {power:g})", "min_subset_size"),
        ("power of one subset", "subset_power"),
    )

    def summary_rows(self) -> list[tuple[str, Any]]:
        """Give the ``(quantity, value)`` rows of :meth:`summary` and ``fedroc sequester plan``.

        The load factor is written to 6 significant digits: the realised ``N rho / phi`` of
        ``--load-factor 400`` read "400.0000", a precision nobody asked for.
        """
        return [
            (
                label.format(power=self.power),
                f"{self.load_factor:.6g}" if name == "load_factor" else getattr(self, name),
            )
            for label, name in self.SUMMARY_ROWS
        ]

    def summary(self) -> str:
        """Format the plan (sizes, noise, budget, epsilon and power) as a table."""
        return format_table(self.summary_rows(), title=self.summary_title)


@fill_doc
def plan(
    n_images: int,
    n_subsets: int,
    *,
    noise_rate: float,
    load_factor: float | None = None,
    subset_size: int | None = None,
    budget: float | None = None,
    auc: float | None = None,
    prevalence: float | None = None,
    power: float = 0.8,
    alpha: float = 0.05,
    answer_noise_rate: float | None = None,
    budget_units: int | None = None,
    max_copies: int | None = None,
    mechanism: MechanismName = DEFAULT_MECHANISM,
    warn: bool = True,
) -> Plan:
    """Plan subsets from exactly one of a load factor, a subset size or a target budget.

    ``noise_rate`` sets the eq.-3 budget; ``answer_noise_rate`` (default: the same) is the
    Laplace scale of the answers. ``budget_units`` overrides ``floor(B)`` (which relaxes
    the paper's guarantee).

    Parameters
    ----------
    {n_images}
    {n_subsets}
    {noise_rate}
    load_factor : float, optional
        Plan from this load factor ``xi`` (exactly one of ``load_factor``,
        ``subset_size`` and ``budget``).
    subset_size : int, optional
        Plan from this subset size ``N``.
    budget : float, optional
        Plan the smallest subsets whose eq.-3 budget reaches this.
    auc, prevalence : float, optional
        Planning assumptions (both or neither) for the SE and the power of one subset.
    {power}
    {alpha}
    answer_noise_rate : float, optional
        Laplace scale of the answers; default ``noise_rate``.
    budget_units : int, optional
        Perturbed answers allowed, overriding ``floor(B)``.
    max_copies : int, optional
        The most copies of one image in a subset, as the service's ``max_copies`` (1 for
        subsets drawn without replacement, 0 for no cap); default
        :func:`~fedroc.methods.sequester.engine.default_max_copies`.
    mechanism : {"thresholdout", "laplace", "h-thresholdout"}, default "thresholdout"
        The answering rule, for the warnings: with ``budget_units`` above eq. 3 the
        differentially private ones keep their own guarantee, h-thresholdout has none.
    warn : bool, default True
        Issue the notes as :class:`PlanWarning` too; False keeps them in ``Plan.warnings``
        only (the service answers them to the custodian who asked, not to its log).

    Returns
    -------
    Plan
        Subsets, budget, epsilon and, with ``auc`` and ``prevalence``, precision and power.

    Raises
    ------
    InputError
        For invalid parameters, and for a plan of 0 budget units: the message names the
        load factor and the noise rate that would give one unit.

    Warns
    -----
    PlanWarning
        When the two noise rates differ, or the answers' noise rate is off the paper's
        rule by more than a factor of 2 (:func:`suggested_noise_rate`, with ``auc`` and
        ``prevalence``; without them, above 0.25). The texts are in ``Plan.warnings``.

    Examples
    --------
    >>> p = plan(1047, 100, noise_rate=1.0, load_factor=600)
    >>> p.subset_size, round(p.budget, 2), p.budget_units
    (6282, 6.13, 6)
    """
    phi = _count(n_images, "n_images")
    rho = _count(n_subsets, "n_subsets")
    sigma = _noise_rate(noise_rate)
    sigma_a = (
        sigma if answer_noise_rate is None else _noise_rate(answer_noise_rate, "answer_noise_rate")
    )
    given = [k for k, v in (("load_factor", load_factor), ("subset_size", subset_size),
                            ("budget", budget)) if v is not None]  # fmt: skip
    if len(given) != 1:
        raise InputError(
            "give exactly one of load_factor, subset_size and budget; got "
            + (", ".join(given) if given else "none")
        )
    if load_factor is not None:
        n = _subset_size_of(load_factor, phi, rho)
    elif subset_size is not None:
        n = _subset_count(_count(subset_size, "subset_size"), "subset_size")
    else:
        assert budget is not None
        n = _subset_count(subset_size_for_budget(budget, sigma), f"budget {budget!r}")
    b = thresholdout_budget(n, sigma)
    xi = n * rho / phi
    if (auc is None) != (prevalence is None):
        raise InputError("give auc and prevalence together (both or neither)")
    # Checked without auc too: the plan keeps both (its JSON prints them).
    _levels(power=power, alpha=alpha)
    if budget_units is not None:
        _count(budget_units, "budget_units")
    copies = resolve_max_copies(max_copies, True, n, phi)
    if copies >= 1 and n > copies * phi:
        # The service refuses to draw it; say so here, where the plan is made.
        if subset_size is not None:
            size = f"subset_size {n}"
        else:
            size = (
                f"{given[0]} {load_factor if budget is None else budget:g} (subsets of {n} images)"
            )
        raise InputError(
            f"{size} cannot be drawn with max_copies {copies} from n_images {phi}: a "
            f"subset holds at most {copies * phi} images; raise max_copies or ask for "
            "smaller subsets"
        )
    se = min_n = sub_power = delta = None
    if auc is not None and prevalence is not None:
        p = _prevalence(prevalence)
        if n >= 2:
            n_pos, n_neg = _class_sizes(n, p)
            se = hanley_mcneil_se(auc, n_pos, n_neg)
            sub_power = float(power_grid(auc, p, [xi], [rho], phi, alpha=alpha)[0, 0])
            delta = 1.0 if copies == 0 else min(1.0, 2.0 * copies / min(n_pos, n_neg))
        min_n = min_subset_size(auc, p, power=power, alpha=alpha)
    units = math.floor(b + 1e-12) if budget_units is None else int(budget_units)
    if units < 1:
        raise InputError(_zero_budget_message(b, n, sigma, phi, rho, xi))
    notes = _warnings(sigma, sigma_a, auc, prevalence, phi)
    if n * rho > MAX_TABLE_ENTRIES:
        notes.append(
            f"{rho} subsets of {n} images make {n * rho:,} entries, more than "
            f"{MAX_TABLE_ENTRIES:,}: the service (fedroc sequester serve) will refuse to draw "
            "them; ask for fewer subsets or smaller ones"
        )
    if budget_units is not None and units > math.floor(b + 1e-12):
        private = Mechanism(mechanism).epsilon(1, 1.0) is not None
        notes.append(
            f"budget_units {units} is above the eq.-3 budget {b:.3g} of this plan: its epsilon "
            "no longer describes it"
            + (" (the mechanism's own guarantee still does)" if private else "")
        )
    for note in notes if warn else ():
        warn_user(note, PlanWarning)
    return Plan(
        n_images=phi,
        n_subsets=rho,
        load_factor=xi,
        subset_size=n,
        noise_rate=sigma,
        budget=b,
        budget_units=units,
        epsilon=epsilon_of(b, sigma, phi),
        auc=None if auc is None else float(auc),
        prevalence=None if prevalence is None else float(prevalence),
        auc_se=se,
        min_subset_size=min_n,
        subset_power=sub_power,
        power=power,
        alpha=alpha,
        answer_noise_rate=sigma_a,
        max_copies=copies,
        sensitivity=delta,
        epsilon_thresholdout=_dp_epsilon("thresholdout", sigma_a, units, delta),
        epsilon_laplace=_dp_epsilon("laplace", sigma_a, units, delta),
        warnings=tuple(notes),
        mechanism=Mechanism(mechanism).name,
    )


def _dp_epsilon(mechanism: str, noise_rate: float, units: int, delta: float | None) -> float | None:
    if delta is None or units < 1:
        return None
    return Mechanism(mechanism, noise_rate=noise_rate).epsilon(units, delta)  # type: ignore[arg-type]


def _up(x: float, digits: int = 4) -> str:
    """``x`` rounded *up* to ``digits`` significant digits, in plain notation."""
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{math.ceil(x * 10**decimals) / 10**decimals:.{decimals}f}"


def _zero_budget_message(b: float, n: int, sigma: float, phi: int, rho: int, xi: float) -> str:
    xi_one, n_one = load_factor_for_budget(1.0, sigma, phi, rho)
    try:
        sigma_one = f"noise_rate to at least {_up(noise_rate_for_budget(1.0, n))}"
    except InputError:
        sigma_one = "noise_rate (no noise rate reaches one unit at this subset size)"
    return (
        f"this plan allows 0 perturbed answers: the eq.-3 budget of subsets of {n} images at "
        f"noise_rate {sigma:g} is {b:.3g}, below one unit. Raise load_factor from {xi:.4g} to "
        f"at least {_up(xi_one, 6)} (subsets of {n_one} images), or {sigma_one}, or set "
        "budget_units (which relaxes the paper's guarantee)"
    )


def _warnings(
    sigma: float, sigma_a: float, auc: float | None, prevalence: float | None, phi: int
) -> list[str]:
    notes = []
    if not math.isclose(sigma, sigma_a, rel_tol=1e-9):
        weaker = "weaker" if sigma_a < sigma else "stronger"
        notes.append(
            f"the budget is computed at noise_rate {sigma:g} but answers are perturbed at "
            f"answer_noise_rate {sigma_a:g}: the guarantee of eq. 3 assumes the answers' own "
            f"noise, so this plan is {weaker} than its epsilon says (the paper's example "
            "does the same: budget at 0.8, answers at 0.124)"
        )
    if auc is not None and prevalence is not None and phi >= 2:
        target = suggested_noise_rate(auc, prevalence, phi)
        if not target / 2 <= sigma_a <= 2 * target:
            notes.append(
                f"answers are perturbed at {sigma_a:g}, but the paper's rule (Laplace FWHM = "
                f"width of the whole set's 95% CI of the AUC) gives {target:.3g} for AUC "
                f"{auc:g} at prevalence {prevalence:g}: "
                + (
                    "the answers carry little about the AUC"
                    if sigma_a > target
                    else "the noise is small beside the AUC's own uncertainty"
                )
            )
    elif sigma_a > 0.25:
        notes.append(
            f"answers are perturbed by Laplace noise of scale {sigma_a:g}: on an AUC in [0, 1] "
            "they carry little (the paper perturbs at 0.124; give auc and prevalence for its "
            "rule)"
        )
    return notes
