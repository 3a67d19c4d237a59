"""A site's disclosure policy: what it may release, checked on every reply.

The minimum cell count ``min_count`` (q) follows DataSHIELD's privacy level: no aggregate
computed over fewer than q rows leaves a site. Noisy values (differential privacy) and
secret shares are not aggregates in this sense; the policy decides whether they may leave
at all and caps the privacy budget they spend.

A minimum count does not stop differencing (two aggregates over sets of rows that differ by
one row reveal that row); what does is composition: the site's persistent
:class:`~fedroc.privacy.BudgetLedger` sums every DP release and the policy refuses one that
would exceed the site's lifetime limits, which are finite by default
(:data:`DEFAULT_EPSILON_LIMIT`, and a total delta of ``1/n`` for a site of n rows), and a site
takes part in secure aggregation of a quantity only over sessions of at least
``secagg_min_sites`` sites and only ever over one set of sites (so that sums over
different sets cannot be subtracted).
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from fedroc.exceptions import DisclosureError, InputError
from fedroc.privacy import keys
from fedroc.privacy.ledger import ANY_QUANTITY, BudgetLedger, DPEvent

__all__ = [
    "DEFAULT_EPSILON_LIMIT",
    "DEFAULT_HISTOGRAM_MIN_EPSILON",
    "DEFAULT_ROCGLM_MIN_SENSITIVITY",
    "DEFAULT_SECAGG_MIN_SITES",
    "DisclosurePolicy",
    "ReleaseKind",
    "delta_fits",
    "epsilon_fits",
    "is_class_count_refusal",
    "largest_fitting",
    "shown_left",
]

# The refusal of a reply whose declared class count is below the minimum (check_release).
_CLASS_COUNT_REFUSAL = re.compile(r"the (positive|negative) count is below the minimum")


def is_class_count_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is a site's refusal because one class has fewer rows than its minimum.

    Such a refusal says that the data cannot support a method at that site, before anything
    was released; methods explain it, and the coverage study counts it as withheld.

    Parameters
    ----------
    exc : BaseException
        An error raised by a call of a site function.

    Returns
    -------
    bool
        True for a :class:`~fedroc.exceptions.DisclosureError` whose message is the
        class-count refusal.
    """
    return isinstance(exc, DisclosureError) and bool(_CLASS_COUNT_REFUSAL.search(str(exc)))


# A site's lifetime privacy budget unless its configuration says otherwise (basic
# composition): ten releases at epsilon = 1, e.g. ten histogram runs in DP mode.
DEFAULT_EPSILON_LIMIT = 10.0
# Fewest sites a site aggregates with: with two, each site's partner could subtract its own
# input from a published sum.
DEFAULT_SECAGG_MIN_SITES = 3
#: What a refusal of secure aggregation over too few sites suggests (the MPC method's own
#: notes leave it out: that method is the one in use).
MPC_INSTEAD = "With fewer sites, the MPC method (--method mpc) needs no secure aggregation"
# Smallest l2-sensitivity a site calibrates its ROC-GLM noise to, for probability scores: a
# claimed 1e-12 would release every score to 1e-8 "at epsilon 1". 0.01 is the smallest of
# paper 1's settings; a site whose scores span a wider range sets a larger floor.
DEFAULT_ROCGLM_MIN_SENSITIVITY = 0.01
# Smallest epsilon of a histogram tree a site releases in the clear (local DP): a release at
# a negligible charge is an almost free answer about the site's rows.
DEFAULT_HISTOGRAM_MIN_EPSILON = 0.01

# What a data owner of an MPC job serves unless its operator says otherwise (mpc_only): the
# job's shares and what fedroc's MPC method asks besides (the sites' sizes, which the job
# opens anyway; whether the scores are probabilities; the Brier score's n and sum of squared
# errors), and secure aggregation's own stages (their inputs pass this check again).
MPC_OWNER_FUNCTIONS = frozenset(
    {"fedroc.mpc.share", "fedroc.info", "fedroc.is_probability", "fedroc.brier"}
)
_SECAGG_STAGES = "fedroc.secagg."

ReleaseKind = Literal["aggregate", "noisy", "shares"]
RELEASE_KINDS: tuple[str, ...] = ("aggregate", "noisy", "shares")


def _is_number(value: Any) -> bool:
    """Whether ``value`` is a real number (True and False are not)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def policy_paths_relative_to(values: Mapping[str, Any], base: str | Path) -> dict[str, Any]:
    """Return a policy table whose relative file paths are taken from ``base``.

    ``mpc_proxies`` (unless ``"any"`` or ``"none"``) and ``mpc_owner_key`` name files that are
    read when a job comes, from whatever the working directory is then; a configuration
    file's paths mean its own folder, as its other paths do. Values that are not strings are
    left for the policy's checks.
    """
    out = dict(values)
    proxies = out.get("mpc_proxies")
    if isinstance(proxies, str) and proxies.strip() and proxies not in ("any", "none"):
        out["mpc_proxies"] = str(Path(base).absolute() / proxies)
    key = out.get("mpc_owner_key")
    if isinstance(key, str) and key.strip():
        out["mpc_owner_key"] = str(Path(base).absolute() / key)
    return out


#: What a spent epsilon limit leaves by the rounding of its charges' sum: nothing.
_SPENT_REST = 1e-9
#: The slack of every comparison of an epsilon against what a limit leaves (the rounding of
#: a sum of charges): the site's own check (:meth:`DisclosurePolicy.check_release`) and the
#: runs' pre-checks of what the sites have left take the same (:func:`epsilon_fits`).
EPSILON_SLACK = 1e-12
#: The same of a delta, relative: deltas are small (1e-12 would be 1e-7 of a delta of 1e-5).
DELTA_SLACK = 1e-12
#: The significant digits of a value a pre-check's refusal offers ("give ... X or less").
OFFERED_DIGITS = 3


def epsilon_fits(charge: float, left: float) -> bool:
    """Whether an epsilon ``charge`` fits in the ``left`` of a limit (or in the limit).

    The one comparison of a site's check and of the runs' pre-checks, so that a run a
    pre-check passes is not refused by a site, nor a value it offers by itself.

    Parameters
    ----------
    charge : float
        The epsilon to charge (or the spend with it).
    left : float
        What the limit leaves (or the limit).

    Returns
    -------
    bool
        True when ``charge <= left + EPSILON_SLACK``.
    """
    return charge <= left + EPSILON_SLACK


def delta_fits(charge: float, left: float) -> bool:
    """Whether a delta ``charge`` fits in the ``left`` of a limit (as :func:`epsilon_fits`).

    Parameters
    ----------
    charge : float
        The delta to charge (or the spend with it).
    left : float
        What the limit leaves (or the limit).

    Returns
    -------
    bool
        True when ``charge <= left * (1 + DELTA_SLACK)``.
    """
    return charge <= left * (1 + DELTA_SLACK)


def largest_fitting(left: float, per_unit: float = 1.0, *, fits: Any = epsilon_fits) -> float:
    """Return the largest value a pre-check offers: it fits, as the user types it back.

    The largest value of :data:`OFFERED_DIGITS` significant digits whose charge (the value
    times ``per_unit``) ``fits`` in ``left``, checked on the value as printed: a refusal
    that says "give X or less" prints it with ``:g`` exactly, and X is accepted. The
    histogram's local-DP pre-check and the ROC-GLM's each rounded on their own and could
    offer a value they refused (12.35 with 12.34567 left; 300 at 2 per unit with
    599.9999999996 left).

    Parameters
    ----------
    left : float
        What the tightest limit leaves.
    per_unit : float, default 1
        The charge of one unit of the value (a histogram run charges twice its epsilon).
    fits : callable, default :func:`epsilon_fits`
        The comparison (:func:`delta_fits` for a delta).

    Returns
    -------
    float
        The value, or 0 where none fits.

    Examples
    --------
    >>> largest_fitting(12.34567)
    12.3
    >>> largest_fitting(599.9999999996, 2.0)
    299.0
    """
    if not (left > 0 and per_unit > 0 and math.isfinite(left)):
        return 0.0
    exponent = math.floor(math.log10(left / per_unit)) - (OFFERED_DIGITS - 1)
    k = math.floor(left / per_unit / 10.0**exponent) + 1
    while k > 0:
        value = float(f"{k}e{exponent}")
        if fits(value * per_unit, left):
            return value
        k -= 1
    return 0.0


def shown_left(left: float, digits: int = 4) -> str:
    """Write what a limit leaves to ``digits`` significant digits, rounded *down*.

    A refusal that shows what a site has left must never show more than is left: with
    ``:.4g``, 12.34567 read "12.35" and 0.99996 read "1", so a user could give that back
    and be refused again. Rounded down, as :func:`largest_fitting` offers; a negative
    ``left`` (a ledger over its limit) reads 0.

    Parameters
    ----------
    left : float
        What the limit leaves.
    digits : int, default 4
        Significant digits shown.

    Returns
    -------
    str
        The value rounded down, in ``:g`` notation.

    Examples
    --------
    >>> shown_left(12.34567)
    '12.34'
    >>> shown_left(0.99996)
    '0.9999'
    >>> shown_left(-1e-12)
    '0'
    """
    from decimal import ROUND_FLOOR, Decimal

    if not left > 0:
        return "0"
    if not math.isfinite(left):
        return f"{left:g}"
    exact = Decimal(repr(left))  # the value as Python writes it, not its binary expansion
    step = Decimal(1).scaleb(exact.adjusted() - (digits - 1))
    return f"{float(exact.quantize(step, rounding=ROUND_FLOOR)):.{digits}g}"


# The functions a run asks every site before its first release, so that a run a site cannot
# hold is refused with nothing spent. An allow-list without them refused the run with no word
# of why the function was wanted (the diff review of 2026-12-07). Spelled here, not imported:
# the federation and secure-aggregation layers that define them sit above this one.
_PRE_CHECKS = {
    "fedroc.epsilon_left": "a DP run asks it first, releasing nothing but what a budget "
    "refusal tells, so that a run the site's limits cannot hold is refused before anything "
    "is spent",
    "fedroc.secagg.check": "a secure sum asks it first, releasing nothing, so that a sum the "
    "site would refuse, or its budget could not hold, is refused before anything is spent",
}


@dataclass(frozen=True)
class DisclosurePolicy:
    """What a site may release.

    Parameters
    ----------
    min_count : int, default 5
        Smallest number of rows an aggregate may be computed from (q).
    allow_noisy : bool, default True
        Whether differentially private noisy values may leave the site.
    allow_shares : bool, default True
        Whether secret shares or masked vectors may leave the site.
    allow_exact : bool, default True
        Whether exact aggregates of its rows may leave the site: in the clear, summed by
        secure aggregation, or as MPC shares (every release that binds its rows,
        :func:`fedroc.federation.site.bind_rows`). False: only DP releases (and its number
        of rows); of the methods, the histogram under distributed or local DP.
    epsilon_limit : float, default 10
        Total epsilon the site will spend over its lifetime (basic composition, kept in
        its ledger). ``math.inf`` (TOML ``inf``) removes the limit: do so only for
        simulations.
    delta_limit : float or None
        Total delta over the site's lifetime; None (the default) means ``1/n`` for a site
        of n rows (0 under ``min_count`` rows, whose count its refusals keep back).
    allowed_functions : frozenset of str or None
        If given, the only site functions the site will run.
    secagg_min_sites : int, default 3
        Fewest sites (survivors included) the site takes part in a secure aggregation with.
    secagg_rebind : bool, default False
        Whether the site aggregates a quantity (a site function) over a different set of
        sites than the first time. False refuses it: sums over two different sets of sites
        subtract to the inputs of the sites in only one of them. Each site states, signed, in
        every secure session whether it rebinds, and a site that does not refuses a session
        with a member that does (H16-2): such a member could sum the quantity again without
        it. Once a site stated that it does not, its ledger holds it to that and True no
        longer applies there (:meth:`rebinds`, H18-1).
    opt_in : frozenset of str, default empty
        Modes of site functions that disclose more than their default and run only when
        listed here (see :meth:`allows`), e.g. ``"rocglm.positives_rule"``.
    clear_histograms : bool, default False
        Whether class counts per score bin may leave the site in the clear, not only as
        input of secure aggregation. With bins chosen by the analyst a bin can hold one row,
        so False (the default) keeps them inside secure aggregation. True allows them for
        federations too small for secure aggregation, under two rules the site functions
        enforce: every non-empty bin holds at least ``min_count`` rows of each class it
        counts, and the site binds the bins of its first such request for its lifetime.
    rocglm_min_sensitivity : float, default 0.01
        Smallest l2-sensitivity the site calibrates the noise of its ROC-GLM release to (the
        analyst's ``sensitivity`` is refused below it, and the site's heuristic answers no
        less). 0.01 suits probability scores; on a wider scale set it on that scale.
    histogram_min_epsilon : float, default 0.01
        Smallest epsilon of a histogram tree the site releases in the clear (local DP).
    mpc_proxies : str, default "any"
        Whom the site seals its MPC shares for (``fedroc.mpc.share``): the path of a
        cluster file (``fedroc mpc certs``) whose two proxies' public keys the site pins;
        ``"none"``, no MPC job; ``"any"``, the proxies the job names. Whoever holds both
        proxies' keys opens every share, so ``"any"`` trusts the analyst: it suits a site
        in the analyst's own process (the analyst holds its rows anyway), and it is the
        default there. A Flower node's default is ``"none"`` (``mpc-proxies`` in its node
        config).
    mpc_only : bool or None, default None
        Whether the site serves only what an MPC job needs (:data:`MPC_OWNER_FUNCTIONS` and
        secure aggregation's stages). The MPC job keeps the class counts P and N secret,
        and nearly every other site function gives or narrows them (class counts, sums of
        the label, calibration bins, per-class noisy scores, histograms), in the clear or
        summed. None (unset): on where ``mpc_proxies`` pins a cluster file and
        ``allowed_functions`` is not given, off elsewhere; ``False`` lets an MPC owner serve
        the other methods too (their results give P and N).
    mpc_owner_key : str or None, default None
        The path of the site's MPC owner key (PEM, ``fedroc mpc owner-key``), registered
        with the cluster (``[owners]``); its jobs are signed with it. None: the key set by
        :func:`fedroc.mpc.configure_owner`, else one generated for the site's state (on a
        Flower node, for the run only: not a key a cluster can register).
    mpc_max_jobs : int or None, default None
        MPC jobs the site authorises over its lifetime (counted in its ledger); None: the
        owner settings' (default 1). Every job is over the co-owners of its first: jobs
        over two sets would subtract to the rows of the owners in one of them only.
    score_range : (float, float) or None, default None
        A public range ``[lo, hi]`` that holds every score of the site, declared by its
        operator (TOML ``score_range = [lo, hi]``). The site checks its rows against it when
        it is built, and then answers from the declaration, not from its rows, whether its
        scores are probabilities (``fedroc.is_probability``: the range lies in [0, 1]; the
        Brier score and the sensitivity heuristic are refused otherwise) and whether they
        lie in an asked range (``rocglm.scale``); its one grid of exact counts is over this
        range (no transform), bound at its first grid request whatever range the analyst
        asks. None: those answers come from the rows and bind the grid (H14-2).
    """

    min_count: int = 5
    allow_noisy: bool = True
    allow_shares: bool = True
    allow_exact: bool = True
    epsilon_limit: float = DEFAULT_EPSILON_LIMIT
    delta_limit: float | None = None
    allowed_functions: frozenset[str] | None = field(default=None)
    secagg_min_sites: int = DEFAULT_SECAGG_MIN_SITES
    secagg_rebind: bool = False
    opt_in: frozenset[str] = field(default_factory=frozenset)
    clear_histograms: bool = False
    rocglm_min_sensitivity: float = DEFAULT_ROCGLM_MIN_SENSITIVITY
    histogram_min_epsilon: float = DEFAULT_HISTOGRAM_MIN_EPSILON
    mpc_proxies: str = "any"
    mpc_only: bool | None = None
    mpc_owner_key: str | None = None
    mpc_max_jobs: int | None = None
    score_range: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        """Validate the settings.

        Raises
        ------
        InputError
            When ``min_count`` is not a positive integer, a limit is negative (or NaN), or
            ``secagg_min_sites`` is not an integer >= 2.
        """
        # Types first: a TOML value such as min_count = "ten" or allow_noisy = "false" (a
        # string, which Python reads as true) is refused by name, never half-applied.
        for name in ("min_count", "secagg_min_sites"):
            if not _is_number(getattr(self, name)):
                raise InputError(f"{name} must be an integer; got {getattr(self, name)!r}")
        for name in ("epsilon_limit", "rocglm_min_sensitivity", "histogram_min_epsilon"):
            if not _is_number(getattr(self, name)):
                raise InputError(f"{name} must be a number; got {getattr(self, name)!r}")
        if self.delta_limit is not None and not _is_number(self.delta_limit):
            raise InputError(f"delta_limit must be a number; got {self.delta_limit!r}")
        for name in (
            "allow_noisy",
            "allow_shares",
            "allow_exact",
            "secagg_rebind",
            "clear_histograms",
        ):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise InputError(f"{name} must be true or false; got {getattr(self, name)!r}")
        if (
            not np.isfinite(self.min_count)
            or int(self.min_count) != self.min_count
            or self.min_count < 1
        ):
            raise InputError(f"min_count must be a positive integer; got {self.min_count!r}")
        for name in (
            "epsilon_limit",
            "delta_limit",
            "rocglm_min_sensitivity",
            "histogram_min_epsilon",
        ):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise InputError(f"{name} must be >= 0; got {value!r}")
        if (
            not np.isfinite(self.secagg_min_sites)
            or int(self.secagg_min_sites) != self.secagg_min_sites
            or self.secagg_min_sites < 2
        ):
            raise InputError(
                f"secagg_min_sites must be an integer >= 2; got {self.secagg_min_sites!r}"
            )
        self._check_mpc()
        self._check_score_range()

    def _check_score_range(self) -> None:
        """Check ``score_range``: two finite numbers, lo < hi (stored as a tuple of floats)."""
        value = self.score_range
        if value is None:
            return
        pair = (
            list(value)
            if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))
            else []
        )
        if not (
            len(pair) == 2
            and all(_is_number(v) and math.isfinite(float(v)) for v in pair)
            and float(pair[0]) < float(pair[1])
        ):
            raise InputError(
                f"score_range must be two finite numbers [lo, hi] with lo < hi; got {value!r}"
            )
        object.__setattr__(self, "score_range", (float(pair[0]), float(pair[1])))

    def _check_mpc(self) -> None:
        """Check the MPC settings (``mpc_*``)."""
        if self.mpc_only is not None and not isinstance(self.mpc_only, bool):
            raise InputError(f"mpc_only must be true or false; got {self.mpc_only!r}")
        if self.mpc_owner_key is not None and (
            not isinstance(self.mpc_owner_key, str) or not self.mpc_owner_key.strip()
        ):
            raise InputError(
                f"mpc_owner_key must be the path of a key file; got {self.mpc_owner_key!r}"
            )
        if self.mpc_max_jobs is not None and (
            isinstance(self.mpc_max_jobs, bool)
            or not isinstance(self.mpc_max_jobs, int)
            or self.mpc_max_jobs < 0
        ):
            raise InputError(
                f"mpc_max_jobs must be a non-negative integer; got {self.mpc_max_jobs!r}"
            )
        if not isinstance(self.mpc_proxies, str) or not self.mpc_proxies.strip():
            raise InputError(
                "mpc_proxies must be 'any', 'none' or the path of a cluster file; got "
                f"{self.mpc_proxies!r}"
            )

    def allows(self, option: str) -> bool:
        """Whether the site opted in to a disclosive mode ``option`` (see ``opt_in``)."""
        return option in self.opt_in

    def warnings(
        self, *, n_rows: int | None = None, ledger: BudgetLedger | None = None
    ) -> list[str]:
        """Say which settings protect the rows less than the defaults, and how.

        For an operator starting a site (a SuperNode logs them, ``fedroc flower supernode``
        prints them): each names its setting, its value and what it lets leave. A site in
        the analyst's own process protects nothing anyway, so in-process federations do not
        show them.

        Parameters
        ----------
        n_rows : int, optional
            The site's number of rows, to compare ``delta_limit`` with ``1/n``.
        ledger : BudgetLedger, optional
            The site's ledger: where it holds the site to one set of sites (:meth:`rebinds`),
            ``secagg_rebind``'s warning says that instead of what the setting allows.

        Returns
        -------
        list of str
            Empty for the defaults of a node (``mpc_proxies = "none"``).
        """
        out = []
        if self.min_count < 3:
            out.append(
                f"min_count = {self.min_count}: aggregates of {self.min_count} row(s) leave, "
                "so one row's value by itself (DataSHIELD's smallest is 3; the default is 5)"
            )
        if self.epsilon_limit > DEFAULT_EPSILON_LIMIT:
            out.append(
                f"epsilon_limit = {self.epsilon_limit:g}: over its lifetime the site's DP "
                "releases may change an analyst's odds about a row by up to a factor of "
                f"e^{self.epsilon_limit:g} (the default, e^{DEFAULT_EPSILON_LIMIT:g}, is "
                f"about {math.exp(DEFAULT_EPSILON_LIMIT):.0f})"
            )
        if self.delta_limit is not None and n_rows is not None and self.delta_limit > 1 / n_rows:
            out.append(
                f"delta_limit = {self.delta_limit:g} is above 1/n = {1 / n_rows:.3g}: a "
                "mechanism within it may release some row outright"
            )
        if self.secagg_min_sites < DEFAULT_SECAGG_MIN_SITES:
            out.append(
                f"secagg_min_sites = {self.secagg_min_sites}: in a secure sum of two sites, "
                "each site's input is the sum minus the other's"
            )
        if self.secagg_rebind and ledger is not None and not self.rebinds(ledger):
            # H18-1: what the site signed to its partners holds on its ledger, not the
            # setting; the setting's own warning below said the opposite (one message).
            out.append(
                "secagg_rebind is set, but the site signed in a secure session that it sums "
                "each quantity over one set of sites, and its ledger holds it to that: the "
                "setting has no effect (sites that keep the default still sum with this site; "
                "a new ledger would rebind)"
            )
        elif self.secagg_rebind:
            out.append(
                "secagg_rebind = true: a quantity summed over two sets of sites subtracts to "
                "the inputs of the sites in one set and not the other (sites that keep the "
                "default refuse secure sums with this site)"
            )
        if self.clear_histograms:
            out.append(
                "clear_histograms = true: the site's class counts per score bin leave in the "
                "clear, each bin of at least min_count rows"
            )
        if self.rocglm_min_sensitivity < DEFAULT_ROCGLM_MIN_SENSITIVITY:
            out.append(
                f"rocglm_min_sensitivity = {self.rocglm_min_sensitivity:g}: an analyst may "
                "ask for ROC-GLM noise calibrated to a sensitivity this small, below the "
                "scores' real one"
            )
        if self.histogram_min_epsilon < DEFAULT_HISTOGRAM_MIN_EPSILON:
            out.append(
                f"histogram_min_epsilon = {self.histogram_min_epsilon:g}: an analyst may ask "
                "for local-DP trees charged almost nothing"
            )
        if self.mpc_proxies == "any":
            out.append(
                "mpc_proxies = 'any': the site seals its MPC shares for whichever proxies the "
                "job names, so whoever holds both proxies' keys (the analyst, if it runs "
                "them) opens every row"
            )
        if self.mpc_max_jobs is not None and self.mpc_max_jobs > 1:
            out.append(
                f"mpc_max_jobs = {self.mpc_max_jobs}: the site's rows go into up to "
                f"{self.mpc_max_jobs} MPC jobs (over the co-owners of its first), whose "
                "results together tell more of them than one job's"
            )
        if self.mpc_only is False and self.mpc_proxies not in ("any", "none"):
            out.append(
                "mpc_only = false: a data owner of MPC jobs also serves the other site "
                "functions, whose answers give or narrow the class counts P and N its jobs "
                "keep secret"
            )
        out += [
            f"opt_in includes {name!r}: a mode that discloses more than the default "
            "(docs/privacy.md)"
            for name in sorted(self.opt_in)
        ]
        return out

    def epsilon_left(self, ledger: BudgetLedger) -> float:
        """Return the epsilon this policy's limit leaves after what ``ledger`` has charged.

        ``inf`` without a limit. What a budget refusal tells (the limit and the spend), and
        no more: a site answers it before a run of several releases (the secure-sum check,
        ``fedroc.epsilon_left``), so that a run that would not fit is refused before its first.
        A spent limit leaves only the rounding of the charges' sum (8.9e-15 after charges of
        8 and 2 against 10), which is 0: it was offered as "give dp_epsilon 4.44e-15 or less".
        """
        spent, _ = ledger.spent()
        left = float(self.epsilon_limit - spent)
        return 0.0 if left < _SPENT_REST else left

    def delta_limit_for(self, n_rows: int) -> float:
        """Return the site's lifetime delta: the configured one, or ``1/n``.

        ``1/n`` only from ``min_count`` rows up: under it the site has no delta (0). Its
        row count under q is what its refusals keep back ("the count is below the
        minimum", no value), and ``1/n`` told it, in ``fedroc.epsilon_left`` and in
        ``fedroc privacy status`` (H14-1, review 14: n of a site of 1 to 4 rows in 20 of
        20). Nothing is lost: the one release with a delta (the ROC-GLM's noisy scores)
        declares the site's class counts, which such a site refuses first.
        """
        if self.delta_limit is not None:
            return float(self.delta_limit)
        n = int(n_rows)
        return 1.0 / n if n >= max(self.min_count, 1) else 0.0

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> DisclosurePolicy:
        """Build a policy from a site's configuration table.

        Parameters
        ----------
        values : mapping
            The ``[policy]`` table: keys are the field names; lists become frozensets.

        Raises
        ------
        InputError
            On an unknown key, or an ``epsilon_limit`` given as null (use ``inf`` for no limit).
        """
        known = {
            "min_count",
            "allow_noisy",
            "allow_shares",
            "allow_exact",
            "epsilon_limit",
            "delta_limit",
            "allowed_functions",
            "secagg_min_sites",
            "secagg_rebind",
            "opt_in",
            "clear_histograms",
            "rocglm_min_sensitivity",
            "histogram_min_epsilon",
            "mpc_proxies",
            "mpc_only",
            "mpc_owner_key",
            "mpc_max_jobs",
            "score_range",
        }
        unknown = set(values) - known
        if unknown:
            raise InputError(f"unknown policy setting(s) {sorted(unknown)}; known: {sorted(known)}")
        kwargs = dict(values)
        if kwargs.get("epsilon_limit", DEFAULT_EPSILON_LIMIT) is None:
            raise InputError(
                "epsilon_limit must be a number (use inf to remove the limit, for simulations only)"
            )
        for name in ("allowed_functions", "opt_in"):  # a bare string is not a list of names
            if isinstance(kwargs.get(name), str):
                raise InputError(
                    f"{name} must be a list of names, e.g. [{kwargs[name]!r}]; got {kwargs[name]!r}"
                )
            # A table would be taken as its keys, a list of numbers as numbers: neither is
            # what the operator meant by a list of names.
            value = kwargs.get(name)
            if value is not None and (
                not isinstance(value, (list, tuple, set, frozenset))
                or not all(isinstance(v, str) and v.strip() for v in value)
            ):
                raise InputError(f"{name} must be a list of names; got {value!r}")
        if kwargs.get("allowed_functions") is not None:
            kwargs["allowed_functions"] = frozenset(kwargs["allowed_functions"])
        if "opt_in" in kwargs:
            kwargs["opt_in"] = frozenset(kwargs["opt_in"] or ())
        return cls(**kwargs)

    @classmethod
    def from_toml(
        cls, path: str | Path, *, defaults: Mapping[str, Any] | None = None
    ) -> DisclosurePolicy:
        """Read a policy from a TOML file: its ``[policy]`` table, or the whole file.

        Relative ``mpc_proxies`` and ``mpc_owner_key`` paths are taken from the file's folder.

        ``defaults`` are settings (field names) that apply where the file gives none, in
        place of the class's defaults (a Flower node's ``mpc_proxies``, for one).

        Raises
        ------
        InputError
            Naming the file: when it cannot be read or is not TOML, when it has a ``[policy]``
            table and settings outside it (they would be ignored), or on a bad setting.
        """
        where = f"policy file {str(path)!r}"
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise InputError(f"{where} does not exist") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{where} is not valid TOML: {exc}") from None
        except OSError as exc:  # a directory, no permission
            raise InputError(f"cannot read {where}: {exc.strerror or exc}") from None
        table = data
        if "policy" in data:
            table = data["policy"]
            if not isinstance(table, dict):
                raise InputError(f"{where}: policy must be a table ([policy]); got {table!r}")
            # Settings above the table would otherwise be dropped: min_count = 20 written
            # before [policy] left the site at the default of 5.
            outside = sorted(set(data) - {"policy"})
            if outside:
                raise InputError(
                    f"{where} has settings outside its [policy] table: {outside}; put them "
                    "in the table (or write the file without one)"
                )
        try:
            table = policy_paths_relative_to(table, Path(path).parent)
            return cls.from_mapping({**(defaults or {}), **table})
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None

    def check_function(self, site: str, function: str) -> None:
        """Refuse a site function that is not in ``allowed_functions``.

        Raises
        ------
        DisclosureError
            Naming the site and the function, when the policy lists the functions it allows and
            ``function`` is not among them, or when the site serves only what an MPC job
            needs (``mpc_only``) and ``function`` is not among that.
        """
        if self.allowed_functions is not None and function not in self.allowed_functions:
            why = _PRE_CHECKS.get(function, "")
            raise DisclosureError(
                f"site {site!r} refuses {function!r}: not among the functions its policy allows"
                + (f" ({why}; add it to the site's allowed_functions)" if why else ""),
                site=site,
                function=function,
            )
        if (
            self.serves_mpc_only
            and function not in MPC_OWNER_FUNCTIONS
            and not function.startswith(_SECAGG_STAGES)
        ):
            raise DisclosureError(
                f"site {site!r} refuses {function!r}: it is a data owner of MPC jobs (its "
                "policy pins the proxies of an MPC cluster), which keep its class counts "
                "secret, and this function's answer would give or narrow them; its operator "
                "lets it serve other methods with mpc_only = false (node config "
                "mpc-only = false, fedroc flower supernode --no-mpc-only)",
                site=site,
                function=function,
            )

    @property
    def serves_mpc_only(self) -> bool:
        """Whether the site serves only what an MPC job needs (see ``mpc_only``)."""
        if self.mpc_only is not None:
            return bool(self.mpc_only)
        return self.allowed_functions is None and self.mpc_proxies not in ("any", "none")

    def check_release(
        self,
        *,
        site: str,
        function: str,
        kind: str,
        counts: Mapping[str, Any],
        dp: Iterable[DPEvent],
        ledger: BudgetLedger,
        n_rows: int,
    ) -> None:
        """Raise :class:`DisclosureError` if this reply may not leave the site."""
        if kind not in RELEASE_KINDS:
            raise DisclosureError(
                f"site {site!r} refuses the reply of {function!r}: unknown release kind {kind!r}",
                site=site,
                function=function,
            )
        for what, count in counts.items():
            arr = np.atleast_1d(np.asarray(count))
            if arr.size and (arr < self.min_count).any():
                # The message names the count, not its value: that is a number of the rows.
                # A site of 3 rows was told only this, where a site short of a class is told
                # what to do (the methods' refusal meanings); the advice tells no more.
                todo = (
                    ": the site has too few rows for this method (leave it out, or merge its "
                    "rows with another site's)"
                    if what == "rows" and arr.size == 1
                    else ""
                )
                raise DisclosureError(
                    f"site {site!r} refuses {function!r}: the {what} count is below the "
                    f"minimum of {self.min_count} rows per released aggregate{todo}",
                    site=site,
                    function=function,
                )
        events = list(dp)
        if kind == "noisy":
            if not self.allow_noisy:
                raise DisclosureError(
                    f"site {site!r} refuses {function!r}: its policy forbids releasing noisy "
                    "values",
                    site=site,
                    function=function,
                )
            if not events:
                raise DisclosureError(
                    f"site {site!r} refuses {function!r}: a noisy release must state its "
                    "differential-privacy mechanism",
                    site=site,
                    function=function,
                )
        if kind == "shares" and not self.allow_shares:
            raise DisclosureError(
                f"site {site!r} refuses {function!r}: its policy forbids releasing shares",
                site=site,
                function=function,
            )
        if events:
            spent_eps, spent_delta = ledger.spent()
            eps, delta = ledger.spent_with(events)
            delta_limit = self.delta_limit_for(n_rows)
            if not epsilon_fits(eps, self.epsilon_limit):
                raise DisclosureError(
                    f"site {site!r} refuses {function!r}: its privacy budget is epsilon "
                    f"{self.epsilon_limit:.4g}, it has spent {spent_eps:.4g} and this release "
                    f"needs {eps - spent_eps:.4g} more (raise epsilon_limit in the site's "
                    "policy to allow it)",
                    site=site,
                    function=function,
                )
            if not delta_fits(delta, delta_limit):
                raise DisclosureError(
                    f"site {site!r} refuses {function!r}: its privacy budget is delta "
                    f"{delta_limit:.4g}, it has spent {spent_delta:.4g} and this release needs "
                    f"{delta - spent_delta:.4g} more (raise delta_limit in the site's policy to "
                    "allow it)",
                    site=site,
                    function=function,
                )

    def rebinds(self, ledger: BudgetLedger) -> bool:
        """Whether the site may aggregate a quantity over a second set of sites.

        Its ``secagg_rebind``, unless it has signed to the members of a secure session that
        it does not (:data:`fedroc.privacy.keys.SECAGG_ONE_SET` in its ledger): they joined
        on that statement, and a site whose operator set ``secagg_rebind`` afterwards summed
        the quantity again over the set without one of them, whose input the two sums
        subtracted to (review 18, H18-1: 20 of 20).
        """
        return self.secagg_rebind and keys.SECAGG_ONE_SET not in ledger.bindings

    def check_aggregation(
        self,
        *,
        site: str,
        function: str,
        quantity: str,
        sites: Iterable[str],
        ledger: BudgetLedger,
        survivors: bool = False,
    ) -> None:
        """Refuse a secure aggregation of ``quantity`` over ``sites`` that this policy forbids.

        Two rules stop differencing of sums: at least ``secagg_min_sites`` sites, and the
        same set of sites as the first aggregation of that quantity (kept in the ledger),
        unless ``secagg_rebind``. With ``survivors`` (``sites`` is the set the sum is over,
        checked before the site reveals any share), the same set as the first aggregation of
        any quantity too: two input functions can sum the same counts.
        """
        members = sorted(set(sites))
        if len(members) < self.secagg_min_sites:
            # The MPC method gives the ordinary AUC: no way out for the clustered AUCs.
            instead = (
                "; it computes the ordinary AUC, not the clustered AUCs"
                if quantity.startswith("fedroc.clustered")
                else ""
            )
            raise DisclosureError(
                f"site {site!r} refuses {function!r}: a secure aggregation of {quantity!r} "
                f"over {len(members)} site(s) {members}; its policy needs at least "
                f"{self.secagg_min_sites} (secagg_min_sites). {MPC_INSTEAD}{instead}",
                site=site,
                function=function,
            )
        if self.rebinds(ledger):
            return
        # The set of this quantity, then the set of any quantity: two input functions can
        # sum the same counts (calibration bins and a histogram tree's leaves), and their
        # sums over two sets subtract as well as two sums of one function.
        keys = [(quantity, repr(quantity))] + ([(ANY_QUANTITY, "its inputs")] if survivors else [])
        for key, what in keys:
            bound = ledger.partners(key)
            if bound is not None and bound != members:
                raise DisclosureError(
                    f"site {site!r} refuses {function!r}: it aggregated {what} over the sites "
                    f"{bound} before and will not over a different set {members} (sums over "
                    "two sets subtract to the inputs of the sites in one of them, also sums of "
                    "two functions that count the same rows; "
                    + (
                        "it signed to its partners that it sums over one set, and its ledger "
                        "holds it: secagg_rebind does not undo that, a new ledger does)"
                        if self.secagg_rebind
                        else "set secagg_rebind in its policy to allow it)"
                    ),
                    site=site,
                    function=function,
                )
