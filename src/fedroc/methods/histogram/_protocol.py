"""Analyst side of paper 5, the protocol: checked options, one round of trees, their sum.

:func:`check_options` validates every option before anything is sent (each refusal names
the option and repeats its value). :func:`collect_tree` asks the sites for their trees
in the chosen mode and returns the pooled tree as the analyst sees it, with the variance
of the noise on each node. Under DP :func:`collect_counts` first asks for the noisy class
counts, at the budget of one level (:attr:`HistogramOptions.count_epsilon`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedroc._validation import FloatArray
from fedroc.exceptions import InputError
from fedroc.federation import Federation
from fedroc.federation.basic import site_limits
from fedroc.privacy import MIN_DISCRETE_EPSILON
from fedroc.privacy.policy import epsilon_fits, largest_fitting, shown_left
from fedroc.secagg import SecureSum, check_secure_sum, secure_sum

from ._curves import INTERPOLATIONS
from ._site import (
    COUNT_LOCAL_NAME,
    COUNT_NAME,
    INPUT_NAME,
    LOCAL_NAME,
    MAX_LEAVES,
    MAX_RELEASE_EPSILON,
    MODE_DDP,
    MODE_LDP,
    MODE_SA,
    MOVED_ROW_CHARGE,
    NOISES,
    TRANSFORMS,
    check_int,
    levels_from_leaves,
    tree_height,
)
from ._tree import node_noise_variance, split_levels

FRAC_BITS = 24  # fixed-point scale of the continuous noise shares in Z_2^64
DP_MODES = {"distributed": MODE_DDP, "local": MODE_LDP}


@dataclass(frozen=True)
class HistogramOptions:
    """The method's options after validation."""

    quantiles: int
    branching: int
    height: int
    lo: float
    hi: float
    transform: str | None
    mode: str
    epsilon: float | None
    noise: str
    post_processing: bool
    threshold: int | None
    allow_dropouts: bool
    oversampling: int
    interpolation: str
    calibration_bins: int | None

    @property
    def dp(self) -> bool:
        return self.mode != MODE_SA

    @property
    def count_epsilon(self) -> float:
        """Under DP, the budget of the class counts released before the tree.

        One level's share: epsilon / (h + 1), the tree's h levels the rest.
        """
        assert self.epsilon is not None
        return self.epsilon / (self.height + 1)

    @property
    def tree_epsilon(self) -> float:
        assert self.epsilon is not None
        return self.epsilon - self.count_epsilon

    @property
    def eps_level(self) -> float:
        return self.tree_epsilon / self.height

    def fractions(self) -> FloatArray:
        return np.linspace(0.0, 1.0, self.quantiles * self.oversampling)


def _check_dp(dp_epsilon: Any, dp_noise: Any, dp_mode: Any, height: int) -> None:
    if dp_epsilon is not None and not (
        isinstance(dp_epsilon, (int, float)) and dp_epsilon > 0 and math.isfinite(dp_epsilon)
    ):
        raise InputError(f"dp_epsilon must be a positive number; got {dp_epsilon!r}")
    if dp_noise not in NOISES:
        raise InputError(f"dp_noise must be one of {NOISES}; got {dp_noise!r}")
    if dp_mode not in DP_MODES:
        raise InputError(f"dp_mode must be one of {sorted(DP_MODES)}; got {dp_mode!r}")
    if dp_epsilon is not None and float(dp_epsilon) / (height + 1) > MAX_RELEASE_EPSILON:
        # Asked, every site refused "argument 'epsilon' must lie in [0.0, 1000.0]".
        raise InputError(
            f"dp_epsilon {dp_epsilon:g} gives each of the tree's {height} levels and the class "
            f"counts epsilon {float(dp_epsilon) / (height + 1):.3g}, above "
            f"{MAX_RELEASE_EPSILON:g}, the most a site takes for one release"
        )
    if dp_epsilon is not None and dp_noise == "discrete":
        per_level = float(dp_epsilon) / (height + 1)  # each level's share, the class counts'
        if per_level < MIN_DISCRETE_EPSILON:
            raise InputError(
                f"dp_epsilon {dp_epsilon:g} gives each of the tree's {height} levels and the "
                f"class counts epsilon {per_level:.3g}, below {MIN_DISCRETE_EPSILON:g}: "
                "discrete noise that wide overflows 64-bit counts; give a larger dp_epsilon"
            )


def check_options(
    *,
    quantiles: Any,
    dp_epsilon: Any,
    dp_mode: Any,
    dp_noise: Any,
    branching: Any,
    height: Any,
    score_range: Any,
    score_transform: Any,
    post_processing: Any,
    threshold: Any,
    allow_dropouts: Any,
    calibration_bins: Any,
    oversampling: Any,
    interpolation: Any,
) -> HistogramOptions:
    """Validate the options of :func:`run_histogram`; refusals name the option."""
    q = check_int(quantiles, "quantiles", 2)
    b = check_int(branching, "branching", 2)
    h = tree_height(q, b) if height is None else check_int(height, "height", 1)
    if b**h > MAX_LEAVES and height is None:
        # The tree follows from quantiles: name it, and the most quantiles that fit (the
        # message named a branching and a height the caller had not given).
        most = max((k for k in range(1, 23) if b ** (k + 2) <= MAX_LEAVES), default=0)
        raise InputError(
            f"quantiles {q} needs a tree of {b}^{h} = {b**h} leaves (branching {b}, height "
            f"{h}); at most 2^22 allowed: ask for at most {b**most} quantiles"
        )
    if b**h > MAX_LEAVES:
        raise InputError(f"branching {b} and height {h} give {b**h} leaves; at most 2^22 allowed")
    if score_transform is not None:
        if score_transform not in TRANSFORMS:
            raise InputError(
                f"score_transform must be one of {sorted(TRANSFORMS)}; got {score_transform!r}"
            )
        if score_range is not None:
            raise InputError("give score_range or score_transform, not both")
        lo, hi = 0.0, 1.0
    else:
        try:
            lo, hi = (0.0, 1.0) if score_range is None else (float(v) for v in score_range)
        except (TypeError, ValueError):
            raise InputError(
                f"score_range must be two finite numbers lo < hi; got {score_range!r}"
            ) from None
        # hi - lo finite too: the leaves' edges are lo + (hi - lo) * k / n.
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi and math.isfinite(hi - lo)):
            raise InputError(
                "score_range must be two finite numbers lo < hi, hi - lo finite too; "
                f"got {score_range!r}"
            )
    _check_dp(dp_epsilon, dp_noise, dp_mode, h)
    if interpolation not in INTERPOLATIONS:
        raise InputError(f"interpolation must be one of {INTERPOLATIONS}; got {interpolation!r}")
    if dp_epsilon is None and dp_mode != "distributed":
        raise InputError(f"dp_mode {dp_mode!r} needs dp_epsilon")
    mode = MODE_SA if dp_epsilon is None else DP_MODES[dp_mode]
    if mode == MODE_LDP and allow_dropouts:
        raise InputError("allow_dropouts applies to secure aggregation; the local-DP mode has none")
    if calibration_bins is not None:
        calibration_bins = check_int(calibration_bins, "calibration_bins", 2)
    # 8Q quantiles under secure aggregation: the 4Q exact leaves hold more than Q quantiles
    # tell (on flchain at Q = 1024 the PR area error drops from 1.5e-3 to 4.5e-4;
    # post-processing, nothing more is released); under DP the paper's setting.
    factor = (1 if mode != MODE_SA else 8) if oversampling is None else oversampling
    return HistogramOptions(
        quantiles=q,
        branching=b,
        height=h,
        lo=float(lo),
        hi=float(hi),
        transform=score_transform,
        mode=mode,
        epsilon=None if dp_epsilon is None else float(dp_epsilon),
        noise=dp_noise,
        post_processing=bool(post_processing),
        threshold=None if threshold is None else check_int(threshold, "threshold", 1),
        allow_dropouts=bool(allow_dropouts),
        oversampling=check_int(factor, "oversampling", 1),
        interpolation=interpolation,
        calibration_bins=calibration_bins,
    )


@dataclass(frozen=True)
class AggregatedTree:
    """The pooled tree as the analyst received it.

    Attributes
    ----------
    pos_levels, neg_levels : list of ndarray
        Levels 1..h of each class (exact under secure aggregation, noisy under DP, not yet
        made consistent).
    sigma2 : float
        Variance of the noise on each node (0 without DP).
    draws : float
        Full noise draws per node (1 for distributed DP with every site, more under
        local DP: one per site).
    sites, dropped : list and dict
    """

    pos_levels: list[FloatArray]
    neg_levels: list[FloatArray]
    sigma2: float
    draws: float
    sites: list[str]
    dropped: dict[str, str] = field(default_factory=dict)


def _sum_levels(replies: Sequence[dict[str, Any]], key: str, b: int, h: int) -> list[FloatArray]:
    total = sum(np.asarray(r[key], dtype=np.float64) for r in replies)
    return split_levels(np.asarray(total), b, h)


@dataclass(frozen=True)
class NoisyCounts:
    """The pooled noisy class counts released before a DP tree.

    Attributes
    ----------
    totals : (float, float)
        Positives and negatives, each with noise of SD ``sd``.
    sd : float
    epsilon : float
        What each site spent on them.
    sites, dropped : list and dict
    """

    totals: tuple[float, float]
    sd: float
    epsilon: float
    sites: list[str]
    dropped: dict[str, str] = field(default_factory=dict)


def secagg_threshold(n_sites: int, threshold: int | None, *, dp: bool, allow_dropouts: bool) -> int:
    """Return the threshold of a secure sum over ``n_sites``: ``threshold``, or the default.

    Under DP each site splits its noise into t shares (t = the threshold, as the site reads
    it from the protocol); without dropouts t = n keeps the total at one draw. Otherwise a
    majority of the sites, and at least 2.
    """
    if threshold is not None:
        return threshold
    return max(2, n_sites if dp and not allow_dropouts else n_sites // 2 + 1)


def _secure_sum(
    federation: Federation, function: str, opts: HistogramOptions, **args: Any
) -> SecureSum:
    t = secagg_threshold(
        len(federation.site_names),
        opts.threshold,
        dp=opts.mode == MODE_DDP,
        allow_dropouts=opts.allow_dropouts,
    )
    return secure_sum(
        federation,
        function,
        threshold=t,
        allow_dropouts=opts.allow_dropouts,
        frac_bits=FRAC_BITS,
        **args,
    )


def _round_up(x: float) -> float:
    """``x`` rounded up to 3 significant digits (an epsilon that still reaches a floor)."""
    step = 10.0 ** (math.floor(math.log10(x)) - 2)
    return math.ceil(x / step * (1 - 1e-12)) * step


def _check_local_tree_floor(opts: HistogramOptions, floors: dict[str, float]) -> None:
    """Under local DP, refuse a tree some site's ``histogram_min_epsilon`` refuses, first.

    A site refuses a local-DP tree below its floor; the refusal came after every site's
    class counts, and after the other sites' trees, all charged for a run that gave nothing.
    """
    low = {k: v for k, v in sorted(floors.items()) if opts.tree_epsilon < v - 1e-12}
    if not low:
        return
    h = opts.height
    by_floor: dict[str, list[str]] = {}
    for k, v in low.items():
        by_floor.setdefault(f"{v:g}", []).append(repr(k))
    sites = "; ".join(f"{', '.join(names)}: {v}" for v, names in by_floor.items())
    fits = _round_up(max(low.values()) * (h + 1) / h)
    raise InputError(
        f"dp_epsilon {opts.epsilon:g} releases the local-DP tree at epsilon "
        f"{opts.tree_epsilon:.4g} ({h}/{h + 1} of dp_epsilon {opts.epsilon:g}), below the "
        f"floor of site(s) {sites} (histogram_min_epsilon); nothing was released; give "
        f"dp_epsilon {fits:g} or more, or ask the sites' operators to lower "
        "histogram_min_epsilon"
    )


def check_budget(federation: Federation, opts: HistogramOptions, *, compare: bool) -> None:
    """Under DP, refuse a run that some site's epsilon limit cannot hold, first.

    A run releases the class counts, then the tree (and with ``compare`` the joint counts of
    the two scores); each site's ledger is charged twice the paper's epsilon of each (a row
    moves). A site asked for the tree once its counts were spent refused only then, with
    "this release needs 11.08 more", and what the counts had taken was gone, at every site.
    The sites say what their limits leave, releasing nothing (under distributed DP through
    the check of secure aggregation, which also asks whether they would join the sum; under
    local DP, which runs with fewer sites than a secure sum takes, through
    ``fedroc.epsilon_left``), so the whole charge is compared before anything is released,
    and the refusal names the sites short and which ``dp_epsilon`` would fit. Under local
    DP the answer also holds each site's floor of a local tree's epsilon
    (``histogram_min_epsilon``): a tree under some site's floor is refused first too. Nothing
    to check without DP.
    """
    if opts.mode not in (MODE_DDP, MODE_LDP) or opts.epsilon is None:
        return
    releases = 2 if compare else 1
    charge = MOVED_ROW_CHARGE * releases  # times dp_epsilon, on each site's ledger
    need = charge * opts.epsilon
    if opts.mode == MODE_LDP:
        limits = site_limits(federation)
        left = {k: r["epsilon_left"] for k, r in limits.items()}
        floors = {k: r.get("histogram_min_epsilon", 0.0) for k, r in limits.items()}
        _check_local_tree_floor(opts, floors)
    else:
        t = secagg_threshold(
            len(federation.site_names), opts.threshold, dp=True, allow_dropouts=opts.allow_dropouts
        )
        left = check_secure_sum(
            federation, COUNT_NAME, threshold=t, budget=True, allow_dropouts=opts.allow_dropouts
        )
    short = {k: v for k, v in left.items() if not epsilon_fits(need, v)}
    if not short:
        return
    counts, tree = (MOVED_ROW_CHARGE * e for e in (opts.count_epsilon, opts.tree_epsilon))
    what = f"the class counts {counts:.3g} and the tree {tree:.3g}"
    if compare:
        what += f", and the two scores' joint counts {MOVED_ROW_CHARGE * opts.epsilon:.3g}"
    by_left: dict[str, list[str]] = {}
    for k, v in sorted(short.items()):
        # Rounded down: what is left must not read as more than it is (12.34567: "12.34").
        by_left.setdefault(shown_left(v), []).append(repr(k))
    sites = "; ".join(f"{', '.join(names)}: {v}" for v, names in by_left.items())
    least = min(short.values())
    fits = largest_fitting(least, charge)  # the sites' own comparison, as printed
    instead = (
        f"give dp_epsilon {fits:g} or less, or ask the sites' operators to raise epsilon_limit"
        if fits > 0
        else "no dp_epsilon fits; the sites' operators would have to raise epsilon_limit"
    )
    raise InputError(
        f"dp_epsilon {opts.epsilon:g} charges each site's privacy ledger epsilon {need:.4g} "
        f"in all ({charge:g} x {opts.epsilon:g}, twice the epsilon of a row added or "
        f"removed: {what}), more than the epsilon left at site(s) {sites}; nothing was "
        f"released; {instead}"
    )


def collect_counts(federation: Federation, opts: HistogramOptions) -> NoisyCounts:
    """Under DP, the round before the tree: the sites' noisy class counts, summed.

    Their noise is their own (at :attr:`HistogramOptions.count_epsilon`), independent of
    the tree's, so that deciding from them whether to release the tree selects nothing
    in the tree's noise.
    """
    args: dict[str, Any] = dict(
        lo=opts.lo,
        hi=opts.hi,
        transform=opts.transform,
        epsilon=opts.count_epsilon,
        noise=opts.noise,
    )
    if opts.mode == MODE_LDP:
        replies = federation.call(COUNT_LOCAL_NAME, **args)
        total = np.sum([np.asarray(r["counts"], np.float64) for r in replies.values()], axis=0)
        draws, sites, dropped = float(len(replies)), list(replies), {}
    else:
        summed = _secure_sum(federation, COUNT_NAME, opts, **args)
        total = np.asarray(summed["counts"], dtype=np.float64)
        draws = len(summed.sites) / summed.threshold
        sites, dropped = list(summed.sites), dict(summed.dropped)
    sd = math.sqrt(node_noise_variance(opts.noise, opts.count_epsilon, draws))
    return NoisyCounts((float(total[0]), float(total[1])), sd, opts.count_epsilon, sites, dropped)


def collect_tree(federation: Federation, opts: HistogramOptions) -> AggregatedTree:
    """One round: every site's tree, summed (secure aggregation, or in the clear for LDP)."""
    b, h = opts.branching, opts.height
    args: dict[str, Any] = dict(
        branching=b,
        height=h,
        lo=opts.lo,
        hi=opts.hi,
        transform=opts.transform,
        epsilon=opts.tree_epsilon if opts.dp else None,
        noise=opts.noise,
    )
    if opts.mode == MODE_LDP:
        replies = federation.call(LOCAL_NAME, **args)
        sites = list(replies)
        draws = float(len(sites))  # each site added a full draw
        return AggregatedTree(
            _sum_levels(list(replies.values()), "pos", b, h),
            _sum_levels(list(replies.values()), "neg", b, h),
            node_noise_variance(opts.noise, opts.eps_level, draws),
            draws,
            sites,
        )
    summed = _secure_sum(federation, INPUT_NAME, opts, mode=opts.mode, **args)
    if opts.mode == MODE_SA:
        pos = levels_from_leaves(np.asarray(summed["pos"], np.float64), b)
        neg = levels_from_leaves(np.asarray(summed["neg"], np.float64), b)
        return AggregatedTree(pos, neg, 0.0, 0.0, list(summed.sites), dict(summed.dropped))
    # Each included site added the share of 1 / t of a full noise draw.
    draws = len(summed.sites) / summed.threshold
    return AggregatedTree(
        split_levels(summed["pos"], b, h),
        split_levels(summed["neg"], b, h),
        node_noise_variance(opts.noise, opts.eps_level, draws),
        draws,
        list(summed.sites),
        dict(summed.dropped),
    )
