"""Federated ROC and PR curves from hierarchical histograms (paper 5, Xu & Cormode 2025).

Method (paper sections "Quantiles estimation via histograms" and "Curve approximation via
quantiles"; details from NOTES.md section 5):

1. Each site builds a hierarchical histogram of its positive and of its negative scores
   over a public score range (default [0, 1]; a user range, or a public monotone
   transform for unbounded scores): level l has b^l equal-width bins, l = 1..h, with
   branching b (default 2) and height ``h = ceil(log_b Q) + 2`` for Q quantiles.
2. The analyst aggregates the histograms. Mode "secure aggregation": the sites send their
   leaf counts through :mod:`fedroc.secagg` and the analyst builds the upper levels. Mode
   "distributed DP": each site adds its share of noise to every level, with budget
   epsilon / h per level (sensitivity 1; fedroc: epsilon / (h + 1), the last share going
   to the class counts released first): discrete Laplace shares (difference of two
   negative-binomial NB(1/n, 1 - e^(-epsilon/h)) variables; Goryczka & Xiong 2015) or, as
   the continuous variant, Laplace shares (difference of two Gamma(1/n, h/epsilon)); the
   sum goes through secure aggregation. Mode "local DP" (the reference code's ``LDP``):
   each site adds a full draw to every node and sends its tree in the clear. Each site
   draws from its own generator (the reference code's shared seed made all shares
   equal). A noisy tree is then made consistent (Hay et al. 2010: weighted averaging
   bottom-up, mean consistency top-down).
3. Q quantiles per class at fractions linspace(0, 1, Q), found by descending the tree to
   the bin holding each fraction (within the final leaf the position is interpolated
   linearly, where the reference code returned the bin's left edge).
4. Survival functions ``1 - Phi(s)`` through (quantile_k, 1 - k / (Q - 1)), by PCHIP (the
   paper), straight lines or midpoint steps (the reference code's alternatives), clipped
   to [0, 1]; ROC ``(F(s), T(s))`` and PR ``(T(s), T n+ / (T n+ + F n-))`` (eqs. 1-3).
5. AUROC and AUPR by trapezoids along the approximated curves; the area errors of
   Definition 1 (eqs. 4-5), and the errors of AUROC, AUPR and average precision, against
   a pooled curve when the caller holds one.

Beyond the paper: an AUC confidence interval. Under secure aggregation: DeLong's variance
of the leaf-binned scores (:func:`fedroc.metrics.delong_from_counts`). Under DP the area
under the noisy curves is biased (clipped noise smears the classes into each other), so
the AUC is the noise-unbiased AUC of one level of the consistent tree, with the exact
variance of the noise (:mod:`._dp`) and an interval by test inversion (Fieller's,
:class:`._dp.RatioTest`); the Brier score and calibration curve come with their noise SD.
Whether the tree can support an AUC is decided before it is released, from class counts
with noise of their own (:data:`MIN_TOTAL_SNR`), so that the decision selects nothing in
the tree's noise; a run it stops spends only the counts' budget and gives a result that
says so, as does a tree whose noise leaves the AUC's interval wider than 0.5.

Parts, as in every method package: :mod:`._site` (what a site computes: leaf counts, the
site functions), :mod:`._protocol` (checked options, the rounds of class counts and trees),
:mod:`._tree` (consistency, noise propagation, quantiles), :mod:`._curves` (ECDFs and
curves, their errors), :mod:`._dp` (statistics with their noise), :mod:`._result`,
:mod:`.baselines` (the paper's exact-quantile and DP-ECDF baselines). Paper 5's figures are
reproduced by :mod:`fedroc.experiments.histogram`.

Threat model: honest-but-curious analyst and sites (that of :mod:`fedroc.secagg`). In the
secure-aggregation mode the analyst learns the pooled leaf histograms of each class (the
pooled scores rounded to a leaf width) and nothing about any single site; a site with
fewer than q positives or negatives refuses. In the distributed-DP mode what the analyst
learns is epsilon-differentially private with respect to adding or removing one row
(each row adds 1 to one bin per level and to one class count; basic composition over the
class counts and the h levels, each at epsilon / (h + 1)), and 2 epsilon with respect to
moving one row, which is what the sites' ledgers charge: the sites' row and class counts
are public, so the data sets to tell apart differ in where a row is (H1), provided
the sites add their noise honestly; sites that collude with the analyst and reveal their
shares weaken the noise of the others. In the local-DP mode every site's own tree is
epsilon-DP whoever sees it (no secure aggregation, no trust in the analyst or the other
sites), at the price of one full noise draw per site in the sum. Per-site row counts are
not released in any mode.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fedroc._validation import FloatArray
from fedroc.exceptions import InputError
from fedroc.methods import (
    EvaluationInputs,
    EvaluationResult,
    explain_class_count_refusals,
    register_method,
)
from fedroc.methods.asks import binned_asks, check_targets
from fedroc.metrics import delong_from_counts

from ._compare import (
    DEFAULT_DP_JOINT_BINS,
    DEFAULT_JOINT_BINS,
    JOINT_NAME,
    collect_joint,
    comparison_extra,
    dp_comparison_extra,
    joint_bins,
)
from ._curves import (
    INTERPOLATIONS,
    CurveErrors,
    Curves,
    approximate_curves,
    curve_errors,
    pr_area_error,
    roc_area_error,
    survival_function,
)
from ._dp import DPAuc, dp_auc, dp_brier, dp_calibration, dp_interval
from ._protocol import (
    FRAC_BITS,
    AggregatedTree,
    HistogramOptions,
    NoisyCounts,
    check_budget,
    check_options,
    collect_counts,
    collect_tree,
)
from ._result import HistogramCurves
from ._site import (
    COUNT_LOCAL_NAME,
    COUNT_NAME,
    INPUT_NAME,
    LOCAL_NAME,
    MAX_LEAVES,
    MODE_DDP,
    MODE_LDP,
    MODE_SA,
    MODES,
    NOISES,
    TRANSFORMS,
    count_leaves,
    leaf_index,
    levels_from_leaves,
    site_leaves,
    tree_height,
)
from ._tree import (
    consistent_tree,
    consistent_tree_adjoint,
    level_noise_covariance,
    linear_noise_variance,
    node_noise_variance,
    total_noise_sd,
    tree_leaf_masses,
    tree_quantiles,
)

__all__ = [
    "COUNT_LOCAL_NAME",
    "COUNT_NAME",
    "COUNT_Z",
    "INPUT_NAME",
    "INTERPOLATIONS",
    "JOINT_NAME",
    "LOCAL_NAME",
    "MAX_DP_INTERVAL_WIDTH",
    "MAX_LEAVES",
    "MIN_TOTAL_SNR",
    "MODES",
    "MODE_DDP",
    "MODE_LDP",
    "MODE_SA",
    "NOISES",
    "TRANSFORMS",
    "CurveErrors",
    "Curves",
    "HistogramCurves",
    "approximate_curves",
    "consistent_tree",
    "consistent_tree_adjoint",
    "count_leaves",
    "curve_errors",
    "leaf_index",
    "level_noise_covariance",
    "levels_from_leaves",
    "linear_noise_variance",
    "pr_area_error",
    "roc_area_error",
    "run_histogram",
    "site_leaves",
    "survival_function",
    "tree_height",
    "tree_leaf_masses",
    "tree_quantiles",
]

#: Under DP the sites first release their class counts with noise of their own (at the
#: budget of one level, ``epsilon / (h + 1)``), and the tree only if those counts show
#: both classes large enough for an AUC: the smaller noisy count, less
#: :data:`COUNT_Z` of its noise SDs (a one-sided 97.7% lower bound of the class size),
#: must reach this many noise SDs of a class total of the tree. The decision reads no
#: noise of the tree, so it selects nothing in the estimate (the earlier rule read the
#: tree's own totals: the released runs were those whose noise had raised a class total,
#: pulling their AUC towards chance, bias -0.0076 at AUC 0.96 and 1500 rows), and a run
#: it withholds spends only the counts' budget. The value is measured in
#: scripts/results/histogram_dp_bias.md.
MIN_TOTAL_SNR = 6.0
COUNT_Z = 2.0
# The comparison under DP: a class total of the noisy joint counts (noise on 2 B^2 cells)
# at least this many noise SDs from 0 (scripts/results/coverage_paired_histogram_dp.md).
MIN_JOINT_SNR = 4.0

#: A DP AUC whose interval (Fieller's, :class:`._dp.RatioTest`) is wider than this is
#: withheld: a number printed with such an interval would be quoted without it.
MAX_DP_INTERVAL_WIDTH = 0.5


def _noise_phrase(opts: HistogramOptions, sigma2: float) -> str:
    mode = "local" if opts.mode == MODE_LDP else "distributed"
    return (
        f"the {mode} DP noise (epsilon {opts.epsilon:g} split over the class counts and "
        f"{opts.height} levels: noise SD {math.sqrt(sigma2):.3g} on every count)"
    )


def _counts_withheld(counts: NoisyCounts, opts: HistogramOptions) -> str | None:
    """Why the tree is not released after the noisy class counts (None: release it).

    The rule of :data:`MIN_TOTAL_SNR`. Each count's noise has the variance of a node of
    the tree (the same budget), hence the tree's class total SD below.
    """
    total_sd = total_noise_sd(opts.branching, opts.height, counts.sd**2, opts.post_processing)
    low = min(counts.totals)
    bound = low - COUNT_Z * counts.sd
    need = MIN_TOTAL_SNR * total_sd
    if bound >= need:
        return None
    return (
        f"no AUC, curve or interval: the class counts released first with "
        f"{_noise_phrase(opts, counts.sd**2)} put the smaller class at {low:.1f}, at least "
        f"{bound:.1f} ({COUNT_Z:g} noise SDs below), fewer than the {need:.1f} rows "
        f"({MIN_TOTAL_SNR:g} noise SDs of a class total of the tree) an AUC needs; the "
        f"tree was not released: each site spent epsilon {counts.epsilon:.3g} of "
        f"{opts.epsilon:g} (charged twice in its ledger). Use a larger epsilon, a smaller Q "
        "or more rows"
    )


def _run_fields(
    opts: HistogramOptions, sigma2: float, sites: list[str], dropped: dict[str, str]
) -> dict[str, Any]:
    """Collect the fields of :class:`HistogramCurves` that describe the run, not estimates."""
    return {
        "mode": opts.mode,
        "quantiles": opts.quantiles,
        "oversampling": opts.oversampling,
        "branching": opts.branching,
        "height": opts.height,
        "score_range": (opts.lo, opts.hi),
        "transform": opts.transform,
        "epsilon": opts.epsilon,
        "noise": opts.noise if opts.dp else None,
        "interpolation": opts.interpolation,
        "noise_sd": math.sqrt(sigma2),
        "sites": sites,
        "dropped": dropped,
    }


def _curve_fields(curves: Curves) -> dict[str, Any]:
    """Copy the traced curves and their areas into the fields of :class:`HistogramCurves`."""
    return {
        "scores": curves.scores,
        "fpr": curves.fpr,
        "tpr": curves.tpr,
        "precision": curves.precision,
        "curve_auc": curves.auc,
        "pr_auc": curves.pr_auc,
        "average_precision": curves.average_precision,
    }


def _empty_curves(
    opts: HistogramOptions,
    sigma2: float,
    sites: list[str],
    dropped: dict[str, str],
    n_pos: float,
    n_neg: float,
    confidence_level: float,
    caveats: Sequence[str],
) -> HistogramCurves:
    empty = np.zeros(0)
    return HistogramCurves(
        **_run_fields(opts, sigma2, sites, dropped),
        **_curve_fields(Curves.empty(n_pos, n_neg)),
        n_pos=n_pos,
        n_neg=n_neg,
        quantiles_pos=empty,
        quantiles_neg=empty,
        leaves_pos=empty,
        leaves_neg=empty,
        auc=float("nan"),
        delong=None,
        noise_variance=float("nan"),
        confidence_level=confidence_level,
        ci_withheld=caveats[0],
        caveats=tuple(caveats),
    )


def _no_class_left(totals: tuple[float, float], cause: str, total_sd: float) -> list[str]:
    """Why nothing can be estimated: a class whose noisy total is not positive."""
    return [
        f"after {cause}, the estimated number of {name} is {total:.1f} "
        f"(noise SD {total_sd:.3g}): no AUC or curve can be estimated; the "
        "budget is spent. Use a larger epsilon, a smaller Q (fewer levels) or "
        "more rows"
        for name, total in zip(("positives", "negatives"), totals, strict=True)
        if not total > 0
    ]


def _dp_withheld(est: DPAuc, cause: str, confidence_level: float) -> str | None:
    """Why the DP AUC is withheld although the tree was released (None: released).

    In order: a level so coarse that ties within its bins could move the AUC by more than
    its SE; an interval that is not bounded or wider than :data:`MAX_DP_INTERVAL_WIDTH`.
    """
    se = math.sqrt(est.noise_variance + est.delong.variance)
    bound = est.ties / 2.0
    if bound > se:
        return (
            f"no AUC and no interval: {cause} allows only tree level {est.level} "
            f"({est.bins} bins), where ties within a bin could move the AUC by up to "
            f"{bound:.3f}, more than its standard error {se:.3f}. Use a larger "
            "epsilon or more rows"
        )
    interval = dp_interval(est.test, bound, confidence_level)
    if interval is None or interval[1] - interval[0] > MAX_DP_INTERVAL_WIDTH:
        where = (
            "is not bounded" if interval is None else f"is [{interval[0]:.3f}, {interval[1]:.3f}]"
        )
        return (
            f"no AUC and no interval: after {cause}, the AUC's {confidence_level:.0%} "
            f"interval (which accounts for the noise) {where}: wider than "
            f"{MAX_DP_INTERVAL_WIDTH:g}, so the estimate ({est.auc:.3f}) would say nothing "
            "about the model. Use a larger epsilon, a smaller Q or more rows"
        )
    return None


def estimate(
    tree: AggregatedTree,
    opts: HistogramOptions,
    *,
    confidence_level: float = 0.95,
    pooled: tuple[np.ndarray, np.ndarray] | None = None,
) -> HistogramCurves:
    """Curves, AUC and calibration from an aggregated tree (everything after the round).

    ``pooled`` = (label, score) of the pooled rows, when the caller holds them, for the
    errors against the empirical curves.
    """
    b = opts.branching
    pos_levels, neg_levels = tree.pos_levels, tree.neg_levels
    if opts.dp and opts.post_processing:
        pos_levels, neg_levels = consistent_tree(pos_levels, b), consistent_tree(neg_levels, b)
    totals = float(pos_levels[0].sum()), float(neg_levels[0].sum())
    if opts.dp:
        cause = _noise_phrase(opts, tree.sigma2)
        total_sd = total_noise_sd(b, opts.height, tree.sigma2, opts.post_processing)
        no_class = _no_class_left(totals, cause, total_sd)
        if no_class:
            return _empty_curves(
                opts, tree.sigma2, tree.sites, tree.dropped, *totals, confidence_level, no_class
            )
    pos_mass = tree_leaf_masses(pos_levels, b)
    neg_mass = tree_leaf_masses(neg_levels, b)
    n_pos, n_neg = float(pos_mass.sum()), float(neg_mass.sum())
    if not (n_pos > 0 and n_neg > 0):
        raise InputError(
            f"the aggregated histograms hold {n_pos:g} positive and {n_neg:g} negative rows; "
            "both classes are needed"
        )
    fractions = opts.fractions()
    q_pos = tree_quantiles(pos_levels, b, fractions, opts.lo, opts.hi)
    q_neg = tree_quantiles(neg_levels, b, fractions, opts.lo, opts.hi)
    curves = approximate_curves(
        q_pos, q_neg, fractions, n_pos, n_neg, opts.lo, opts.hi, opts.interpolation
    )
    auc_fields: dict[str, Any]
    auc_caveats: list[str] = []
    if not opts.dp:
        auc_fields = {
            "auc": curves.auc,
            "noise_variance": 0.0,
            "delong": delong_from_counts(pos_mass, neg_mass, confidence_level=confidence_level),
        }
        leaves = pos_mass, neg_mass
    else:
        auc_fields, auc_caveats = _dp_auc_fields(
            tree, opts, (pos_levels, neg_levels), curves, confidence_level
        )
        leaves = pos_levels[-1], neg_levels[-1]
    calibration_fields, calibration_caveats = _calibration_fields(tree, opts, leaves)
    errors = None
    if pooled is not None:
        y, s = pooled
        if 0 < int(np.sum(y)) < len(y):
            errors = curve_errors(y, s, curves)
    return HistogramCurves(
        **_run_fields(opts, tree.sigma2, tree.sites, tree.dropped),
        **_curve_fields(curves),
        **auc_fields,
        **calibration_fields,
        n_pos=n_pos,
        n_neg=n_neg,
        quantiles_pos=q_pos,
        quantiles_neg=q_neg,
        leaves_pos=pos_mass,
        leaves_neg=neg_mass,
        confidence_level=confidence_level,
        errors=errors,
        caveats=(*auc_caveats, *calibration_caveats),
    )


def _dp_auc_fields(
    tree: AggregatedTree,
    opts: HistogramOptions,
    levels: tuple[list[FloatArray], list[FloatArray]],
    curves: Curves,
    confidence_level: float,
) -> tuple[dict[str, Any], list[str]]:
    """Estimate the AUC fields of :class:`HistogramCurves` under DP, and their caveats.

    The AUC is the noise-unbiased AUC of one level of the (consistent) tree, not the area
    under the noisy curves, which the noise biases; it is withheld for the reasons of
    :func:`_dp_withheld`.
    """
    cause = _noise_phrase(opts, tree.sigma2)
    est = dp_auc(
        *levels,
        branching=opts.branching,
        sigma2=tree.sigma2,
        post_processing=opts.post_processing,
        confidence_level=confidence_level,
    )
    assert est is not None  # both totals are positive
    caveats = [
        f"the AUC is the noise-unbiased AUC of tree level {est.level} "
        f"({est.bins} bins); the area under the noisy curves ({curves.auc:.4f}) is "
        f"biased by {cause}"
    ]
    auc = est.auc
    ci_withheld = _dp_withheld(est, cause, confidence_level)
    if ci_withheld is not None:
        caveats.append(ci_withheld)
        auc = float("nan")
    if math.isfinite(auc) and not 0.0 <= auc <= 1.0:
        caveats.append(
            f"the AUC estimate {auc:.4f} lies outside [0, 1] because of {cause}; it is "
            "left unclipped so that it stays unbiased; the interval is clipped"
        )
    caveats.append(
        f"the PR curve, AUPR ({curves.pr_auc:.4f}) and average precision are read from "
        f"the noisy curves and carry no interval ({cause})"
    )
    fields = {
        "auc": auc,
        "noise_variance": est.noise_variance,
        "delong": est.delong,
        "auc_level": est.level,
        "auc_test": est.test,
        "binning_bound": est.ties / 2.0,
        "ci_withheld": ci_withheld,
    }
    return fields, caveats


def _calibration_fields(
    tree: AggregatedTree,
    opts: HistogramOptions,
    leaves: tuple[np.ndarray, np.ndarray],
) -> tuple[dict[str, Any], list[str]]:
    """Estimate the Brier score and calibration curve of :class:`HistogramCurves`.

    Only for probability scores (range [0, 1], no transform) and ``calibration_bins``;
    under DP with their noise SD and caveats (the fields, then the caveats).
    """
    if (
        opts.calibration_bins is None
        or (opts.lo, opts.hi) != (0.0, 1.0)
        or opts.transform is not None
    ):
        return {}, []
    kw: dict[str, Any] = dict(
        branching=opts.branching,
        height=opts.height,
        sigma2=tree.sigma2,
        post_processing=opts.post_processing,
    )
    nb = dp_brier(*leaves, **kw)
    cal = dp_calibration(*leaves, opts.calibration_bins, **kw)
    caveats = []
    if opts.dp:
        cause = _noise_phrase(opts, tree.sigma2)
        caveats.append(
            f"the Brier score {nb.value:.4f} carries noise SD {nb.noise_sd:.2g} from {cause}"
        )
        if cal.withheld:
            # Named by their ranges, as the calibration table names them: "bins [3, 6, 7]"
            # were 0-based indices the table shows nowhere.
            n = opts.calibration_bins
            ranges = ", ".join(
                f"[{k / n:g}, {(k + 1) / n:g}{']' if k == n - 1 else ')'}" for k in cal.withheld
            )
            caveats.append(
                f"calibration bins {ranges} are withheld: their noisy counts are "
                f"within three noise SDs of 0 ({cause})"
            )
    fields = {
        "brier": nb.value,
        "brier_noise_sd": nb.noise_sd,
        "calibration": cal.curve,
        "calibration_noise_sd": cal.observed_sd,
        "calibration_count_noise_sd": cal.count_sd,
    }
    return fields, caveats


@register_method(
    "histogram",
    "ROC/PR curves from hierarchical histograms: secure aggregation, distributed or local DP "
    "(paper 5)",
)
def run_histogram(
    inputs: EvaluationInputs,
    *,
    quantiles: int = 1024,
    dp_epsilon: float | None = None,
    dp_mode: str = "distributed",
    dp_noise: str = "discrete",
    branching: int = 2,
    height: int | None = None,
    score_range: tuple[float, float] | Sequence[float] | None = None,
    score_transform: str | None = None,
    interpolation: str = "pchip",
    post_processing: bool = True,
    threshold: int | None = None,
    allow_dropouts: bool = False,
    calibration_bins: int | None = 10,
    oversampling: int | None = None,
    max_fpr: float | None = None,
    at_specificity: Sequence[float] = (),
    at_sensitivity: Sequence[float] = (),
    youden: bool = False,
    compare: bool = False,
    compare_bins: int | None = None,
) -> EvaluationResult:
    """Approximate the pooled ROC and PR curves from aggregated hierarchical histograms.

    Parameters
    ----------
    inputs : EvaluationInputs
    quantiles : int, default 1024
        Q, the number of quantiles per class.
    dp_epsilon : float, optional
        Total epsilon per site for DP, of a row added or removed (the paper's); each site's
        ledger is charged twice it, a row moved (its counts are public). None for secure
        aggregation alone.
    dp_mode : {"distributed", "local"}, default "distributed"
        With ``dp_epsilon``: noise shares summed by secure aggregation (one draw per node
        in total), or a full draw per site on a tree sent in the clear (local DP).
    dp_noise : {"discrete", "continuous"}
        Discrete Laplace (exact in integers) or continuous Laplace noise.
    branching : int, default 2
    height : int, optional
        Default ``ceil(log_b Q) + 2``.
    score_range : (lo, hi), optional
        Public score range, default [0, 1]. Every score must lie in it.
    score_transform : {"logistic", "arctan"}, optional
        Public monotone map of unbounded scores onto (0, 1) (instead of a range).
    interpolation : {"pchip", "linear", "midpoint"}, default "pchip"
        How the survival functions run between quantiles (the paper: PCHIP).
    post_processing : bool, default True
        Hay et al.'s consistency step for DP trees.
    threshold : int, optional
        Secure-aggregation threshold (default: a majority of the sites).
    allow_dropouts : bool, default False
        Go on without sites that drop out (down to ``threshold``); under DP each site
        then adds the noise share of ``threshold`` sites, so that any set of survivors
        holds the full noise.
    calibration_bins : int or None, default 10
        Bins of the calibration curve computed from the leaves (None to skip).
    oversampling : int, optional
        The curves go through ``oversampling * Q`` quantiles read from the same tree.
        Default 8 under secure aggregation (post-processing, nothing more is released)
        and 1 under DP (the paper's setting).
    max_fpr, at_specificity, at_sensitivity, youden
        Partial AUC and operating points from the aggregated leaf counts (post-processing,
        nothing more is released): exact 2x2 tables at thresholds restricted to the leaf
        edges under secure aggregation, with a stated error bound for the partial AUC
        (:func:`fedroc.methods.asks.binned_asks`).
    compare : bool, default False
        Compare the sites' second score (``SiteData.score_b``) with the first: a second
        round of secure aggregation sums the sites' joint class histograms of the two
        scores, and ``extra["comparison"]`` is the paired DeLong comparison of the binned
        scores (:mod:`._compare`). Under distributed DP the joint counts carry noise of
        their own (the sites spend ``dp_epsilon`` again on them) and the interval adds the
        noise's variance; refused under local DP.
    compare_bins : int, optional
        Bins per score of the joint grid, a level ``branching ** l`` of the tree (default
        the largest with at most 64 bins, 16 under DP). Each site binds the grid of its
        first joint histogram for its lifetime.

    Returns
    -------
    EvaluationResult
        ``details`` is a :class:`HistogramCurves`. Under DP, class counts too small for
        an AUC (the noisy counts released first, :data:`MIN_TOTAL_SNR`) give ``auc`` NaN
        and ``auc_ci`` None with the reason in ``extra["caveats"]``, and the tree is not
        released (only the counts' budget is spent: ``released.epsilon``); so does a
        released tree whose noise leaves no usable interval.
    """
    opts = check_options(
        quantiles=quantiles,
        dp_epsilon=dp_epsilon,
        dp_mode=dp_mode,
        dp_noise=dp_noise,
        branching=branching,
        height=height,
        score_range=score_range,
        score_transform=score_transform,
        post_processing=post_processing,
        threshold=threshold,
        allow_dropouts=allow_dropouts,
        calibration_bins=calibration_bins,
        oversampling=oversampling,
        interpolation=interpolation,
    )
    check_targets(max_fpr, at_specificity, at_sensitivity)
    bins = None
    if compare:
        if opts.mode == MODE_LDP:
            raise InputError(
                "--method histogram compares two models (--compare-score) under secure "
                "aggregation or distributed DP; under local DP the joint histogram would go "
                "out in the clear (use --dp-mode distributed)"
            )
        default = DEFAULT_DP_JOINT_BINS if opts.dp else DEFAULT_JOINT_BINS
        bins = joint_bins(compare_bins, opts.branching, opts.height, default)
    elif compare_bins is not None:
        raise InputError("compare_bins applies only with compare=True (--compare-score)")
    federation = inputs.federation
    start = federation.mark()
    joint = None

    def meaning() -> str:
        spent = federation.released(start).dp
        return (
            "The histogram method counts each class at every site, so a site with fewer rows "
            "of a class than its minimum count takes part in no aggregate of them (leave it "
            "out, or merge its rows with another site's)"
            + ("; no DP budget was spent" if not spent else "")
        )

    check_budget(federation, opts, compare=bins is not None)
    with explain_class_count_refusals(meaning):
        if bins is not None:  # first: a site without a second score refuses before any release
            joint = collect_joint(
                federation,
                bins=bins,
                lo=opts.lo,
                hi=opts.hi,
                transform=opts.transform,
                threshold=opts.threshold,
                allow_dropouts=opts.allow_dropouts,
                epsilon=opts.epsilon if opts.dp else None,
                noise=opts.noise,
                frac_bits=FRAC_BITS,
                tree=(opts.branching, opts.height),
            )
        counts = collect_counts(federation, opts) if opts.dp else None
        tree = None if opts.dp else collect_tree(federation, opts)
    withheld = None if counts is None else _counts_withheld(counts, opts)
    if counts is not None and withheld is not None:
        # The counts cannot support an AUC: the tree stays at the sites, unspent.
        details = _empty_curves(
            opts,
            counts.sd**2,
            counts.sites,
            counts.dropped,
            *counts.totals,
            inputs.confidence_level,
            [withheld],
        )
        notes = [_count_note(opts, counts), "the tree was not released (see the caveat)"]
    else:
        if tree is None:
            tree = collect_tree(federation, opts)
        pooled = None
        if inputs.pooled is not None:
            pooled = (inputs.pooled.label, inputs.pooled.score)
        details = estimate(tree, opts, confidence_level=inputs.confidence_level, pooled=pooled)
        notes = [_release_note(opts, tree)]
        if counts is not None:
            notes.insert(0, _count_note(opts, counts))
    if joint is not None:
        notes.append(
            f"secure aggregation over {len(joint[2])} sites: the analyst saw only the sums of "
            f"2 x {bins} x {bins} joint counts of the two scores"
            + (
                f", with distributed DP noise ({opts.noise} Laplace shares, epsilon "
                f"{opts.epsilon:g} of its own, in addition to the tree's)"
                if opts.dp
                else ""
            )
        )
    if opts.dp:
        # The epsilons above are the paper's (a row added or removed); released.epsilon
        # holds what the ledgers charged (H1): the notes say so, lest they read as the spend.
        notes.append(
            "each site's ledger charges twice every epsilon above, the guarantee for a row "
            "that moves (its row and class counts are public): the epsilon spent"
        )
    released = federation.released(start).with_notes(
        *notes, "per-site row counts were not released"
    )
    result = details.to_evaluation(released)
    if joint is not None and bins is not None and not opts.dp:
        result = result.with_extra(
            comparison=comparison_extra(joint[0], joint[1], bins, inputs.confidence_level)
        )
    elif joint is not None and bins is not None:
        assert opts.epsilon is not None
        sigma2 = node_noise_variance(opts.noise, opts.epsilon, joint[3])
        result = result.with_extra(
            comparison=dp_comparison_extra(
                joint[0],
                joint[1],
                bins,
                inputs.confidence_level,
                sigma2,
                opts.epsilon,
                MIN_JOINT_SNR,
            )
        )
    asked = max_fpr is not None or at_specificity or at_sensitivity or youden
    if asked and details.leaves_pos.size and details.n_pos > 0 and details.n_neg > 0:
        edges = np.linspace(opts.lo, opts.hi, details.leaves_pos.size + 1)
        result = result.with_extra(
            **binned_asks(
                details.leaves_pos,
                details.leaves_neg,
                edges,
                exact=opts.mode == MODE_SA,
                max_fpr=max_fpr,
                at_specificity=at_specificity,
                at_sensitivity=at_sensitivity,
                youden=youden,
                confidence_level=inputs.confidence_level,
                seed=inputs.seed,
                transform=opts.transform,
            )
        )
    return result


def _count_note(opts: HistogramOptions, counts: NoisyCounts) -> str:
    how = "each site's in the clear" if opts.mode == MODE_LDP else "summed by secure aggregation"
    return (
        f"first the two class counts with noise of their own ({opts.noise} Laplace, epsilon "
        f"{counts.epsilon:.3g} of {opts.epsilon:g}, noise SD {counts.sd:.3g}; {how}): the "
        "tree is released only if they show both classes large enough for an AUC"
    )


def _release_note(opts: HistogramOptions, tree: AggregatedTree) -> str:
    leaves = opts.branching**opts.height
    nodes = sum(opts.branching**level for level in range(1, opts.height + 1))
    if opts.mode == MODE_SA:
        return (
            f"secure aggregation over {len(tree.sites)} sites: the analyst saw only the sums "
            f"of 2 x {leaves} leaf counts"
        )
    if opts.mode == MODE_DDP:
        return (
            f"distributed DP ({opts.noise} Laplace shares, epsilon {opts.tree_epsilon:.3g} split "
            f"over {opts.height} levels): the analyst saw only the noisy sums of 2 x {nodes} "
            "counts"
        )
    return (
        f"local DP ({opts.noise} Laplace, epsilon {opts.tree_epsilon:.3g} split over "
        f"{opts.height} levels): each site's own 2 x {nodes} noisy counts, in the clear"
    )
