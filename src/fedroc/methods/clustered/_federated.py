"""Federated population and personalized AUCs when clusters live inside sites (paper 3).

Method
------
Each cluster (patient) is held by one site. The estimators of Michael & Tian split into

- *within-cluster* terms, ``psi_ii``, ``phi_i = psi_ii / (m_i n_i)``, ``m_i``, ``n_i``,
  which a site computes exactly from its own rows, and
- *cross-site* terms, the kernel sums ``row_i = sum_j psi_ij`` and ``col_i = sum_j psi_ji``
  of a cluster against every cluster of every site, which no site can compute alone.

The cross-site terms use the histogram representation of paper 5: every site counts its
controls and cases in shared score bins; the counts add up across sites into the pooled
class histograms ``G_neg``, ``G_pos``. The population AUC is then

    theta12^ = (sum_b G_neg[b] (G_pos[>b] + G_pos[b] / 2) - sum_i psi_ii^bin) / (M N),

the all-pairs count of the pooled histogram minus the within-cluster pairs, which each site
counts exactly *on the same bins* (so that the difference is exactly eq. 5 applied to the
bin indices). In round two the analyst sends the pooled histograms back and each site
computes ``row_i`` and ``col_i`` of its clusters against them, and returns the centred
sums over its clusters that Corollary 6 (and Obuchowski's variance) need. The personalized
AUC and its variance ``Sigma22`` are those of the scores rounded to the site's one grid of
exact counts (4096 cells over the score range up to 4096 bins, ``2**h`` beyond; a
positive and a negative of one cluster in one cell count 1/2, as the bins count them, so
that no release orders two rows inside a cell); ``theta12^`` and ``Sigma11`` are those of
the binned scores.

Why this method rather than MPC: every quantity the analyst needs is a sum over sites of
per-site values, so the whole protocol is two secure sums (:func:`secure_site_sum`, the
default, built on :mod:`fedroc.secagg`; :func:`plain_sum` sums in the clear), cheap for
10^6 rows. The exact MPC sort of paper 4 would remove the binning error at a far higher
cost; the per-cluster sums would still be needed.

Binning error. Pairs of different clusters in different bins are ordered as their scores
are; a pair in one bin counts 1/2 where the exact kernel gives 0, 1/2 or 1. So

    |theta12^(bins) - theta12^(exact)| <= (sum_b G_neg[b] G_pos[b] - W) / (2 M N),

W the within-cluster pairs sharing a bin (sites release their sum). The result reports this
bound, and the same bound without W for Obuchowski's estimator. With 1000 bins on [0, 1]
and smooth scores it is of the order of 1e-3 or below.

Threat model
------------
Curious analyst; sites that follow the protocol; with secure aggregation, the analyst may
collude with fewer than its threshold of sites (see :mod:`fedroc.secagg`). What each site
allows is stated in :mod:`fedroc.methods.clustered._site`.

- Raw rows and per-cluster values never leave a site. Every per-cluster quantity is summed
  over the site's clusters before release, and the site declares the number of clusters in
  the sum (and its rows), so its disclosure policy refuses any site with fewer than q usable
  clusters. The round-2 weights are the analyst's, though: pooled histograms crafted to
  hold the sites' own plus a large mass next to an extreme score made one cluster
  dominate the sums (C2: the cluster of the lowest negative, its within-cluster AUC and
  number of positives from one request, 7 of 8 federations). Through secure aggregation
  this is closed: each site signs its rows in round 1 (its unmasking reply), the analyst
  relays every site's signed rows in round 2, and a site refuses pooled all-rows
  histograms that do not add up to them (or used counts above the all-rows ones), from
  signers other than its round-1 partners, or signatures its roster does not verify;
  moving the true rows read nothing (0 of 7). In the clear (:func:`plain_sum`) each site
  signs its whole round-1 release, the analyst relays the sites' signed releases in round
  2, and a site refuses pooled histograms or totals (and estimates) that are not what
  those releases give, releases its roster does not verify, or a release under its own
  name that is not its own; the crafted request that read a clear bin's clusters (16 of
  16 sites) is refused.
- What the analyst learns: the class counts in each shared bin (for the clusters with both
  classes and for all rows), the numbers of clusters used, excluded and holding each
  class, and the sums over clusters of the terms above. With secure aggregation (default)
  only their sums over all sites (>= 3 by the default policy). The pooled histograms
  locate scores to bins without naming the site; they are not protected by q (bins may
  hold fewer than q rows). Protecting them needs differential privacy on the counts
  (paper 5), not implemented here.
- In the clear (:func:`plain_sum`, for one or two sites) each site's values: a site
  refuses this unless its policy sets ``clear_histograms``, and then releases only bins
  holding at least q rows of each class, over the one partition it binds at the first
  request.
- Sent to every site in round two: the pooled histograms and pooled scalars (I, M, N and
  the point estimates), i.e. the other sites' combined score distribution at bin
  resolution, and (through secure aggregation) every site's signed number of rows, which
  the analyst learns too (``fedroc.info`` reports it anyway); in the clear every site's
  signed round-1 release, which the analyst holds anyway.
- The method assumes that no cluster spans two sites; the analyst cannot check it without
  learning cluster ids. A split cluster counts as two clusters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedroc._docs import fill, fill_doc, parameters_of
from fedroc._results import ResultMixin, format_table, jsonable
from fedroc._validation import check_confidence
from fedroc.exceptions import DisclosureError, InputError
from fedroc.federation.federation import Federation, Released
from fedroc.federation.records import Record
from fedroc.methods import EvaluationInputs, EvaluationResult, register_method
from fedroc.methods.clustered._estimators import (
    JointEstimates,
    PopulationEstimator,
    Sigma11Divisor,
    check_sigma11,
)
from fedroc.methods.clustered._pooled import clustered_auc, resolve_estimator
from fedroc.methods.clustered._result import ClusteredAUCResult, Interval, check_interval
from fedroc.methods.clustered._site import (
    FUNCTION_MOMENTS,
    FUNCTION_SUMMARY,
    KEY_SIGNATURE,
    bin_scores,
    release_arguments,
    row_count_arguments,
    score_bin_edges,
)
from fedroc.metrics import ScoreCounts, delong_from_counts
from fedroc.secagg import secure_sum
from fedroc.secagg.protocol import MAX_INPUT_ARGS, input_args_text

__all__ = [
    "FUNCTION_MOMENTS",
    "FUNCTION_SUMMARY",
    "FederatedClusteredResult",
    "SiteSum",
    "bin_scores",
    "federated_clustered_auc",
    "plain_sum",
    "run_clustered",
    "score_bin_edges",
    "secure_site_sum",
]

FloatArray = NDArray[np.float64]

# A function that runs a site function on every site and returns, for each released key,
# the sum over sites (a secure sum adds the sites' statements under STATEMENTS). The
# protocol needs nothing else from the sites.
SiteSum = Callable[[Federation, str, Record], dict[str, Any]]
#: Where a secure sum returns the statements the sites made in the clear (name -> bytes).
STATEMENTS = "__statements__"
#: Where a plain sum returns the sites' signed replies (name -> record), to be relayed.
RELEASES = "__releases__"


@fill_doc
def plain_sum(federation: Federation, function: str, args: Record) -> dict[str, Any]:
    """Sum every released value over the sites, in the clear.

    SECURE-AGGREGATION HOOK. Everything the clustered protocol takes from the sites is a sum
    over sites, so a :data:`SiteSum` is the single place where per-site values could reach
    the analyst. :func:`secure_site_sum` (the default of :func:`federated_clustered_auc`)
    replaces this plain sum by secure aggregation, so that the analyst learns only the
    sums; this one is for federations too small for secure aggregation, and each site
    answers it only if its policy sets ``clear_histograms``.

    Parameters
    ----------
    {site_sum}
    """
    replies = federation.call(function, **args)
    keys = sorted(k for k in next(iter(replies.values())) if k != KEY_SIGNATURE)
    sums: dict[str, Any] = {}
    for key in keys:
        sums[key] = np.sum([np.asarray(r[key], dtype=np.float64) for r in replies.values()], 0)
    if any(KEY_SIGNATURE in r for r in replies.values()):
        # Round 1's signed releases, which round 2 relays to every site (C2 in the clear).
        sums[RELEASES] = dict(replies)
    return sums


def _summary_refusal_meaning(text: str, n_bins: int) -> str | None:
    """Say what a site's refusal of round 1 means for the method, or None.

    Where the policy's words alone (a count below the minimum) do not say which count or
    what to do.
    """
    if "the clusters count is below the minimum" in text:
        return (
            "The clustered method counts, at every site, the clusters that hold both "
            "classes; a site with fewer of them than its minimum count (a site whose rows "
            "are all of one class has none) takes part in no aggregate of them (leave it "
            "out, or merge its clusters with another site's)"
        )
    if "bin count is below the minimum" in text:
        return (
            f"In the clear a site releases its {n_bins} bins only if each class has no row "
            "or at least its min_count rows in each bin: ask for fewer bins (n_bins, "
            "--cluster-bins) or sum by secure aggregation (3 or more sites)"
        )
    return None


@fill_doc
def secure_site_sum(federation: Federation, function: str, args: Record) -> dict[str, Any]:
    """Sum over sites by secure aggregation (:func:`fedroc.secagg.secure_sum`).

    Each site evaluates the same computation as the plain site function, as a secure input:
    its values are masked and only their sum over the sites is revealed to the analyst.
    Floats travel in 64-bit fixed point with 32 fraction bits (rounding about 2e-10 per
    value); counts exactly. Needs as many sites as their policies ask (3 by default).

    Parameters
    ----------
    {site_sum}
    """
    summed = secure_sum(federation, function, **{k: jsonable(v) for k, v in args.items()})
    out: dict[str, Any] = {k: np.asarray(v, dtype=np.float64) for k, v in summed.values.items()}
    if summed.statements:
        # Round 1's signed rows, which round 2 relays to every site (C2).
        out[STATEMENTS] = dict(summed.statements)
    return out


def _check_secure_arguments(n_bins: int, edges: FloatArray, sites: list[str]) -> None:
    """Refuse, naming ``n_bins``, bins whose edges and histograms overflow secagg's arguments.

    Checked before the first sum, which binds the edges at the sites: the second input's
    arguments hold the edges and four pooled histograms, counted here at 10^12 rows a bin,
    and each site's signed rows (its name, count and signature in hex).
    """
    per_bin = len(input_args_text({"edges": edges})) / edges.size + 4 * len("1000000000000.0,")
    signed = sum(len(input_args_text({"n": name})) + 20 + 128 for name in sites)
    need = int(per_bin * edges.size) + 200 + signed
    if need > MAX_INPUT_ARGS:
        raise InputError(
            f"n_bins {n_bins} needs up to {need} characters in the secure aggregation's "
            f"arguments (its edges and four histograms), which carry at most "
            f"{MAX_INPUT_ARGS}; use at most {int((MAX_INPUT_ARGS - 200 - signed) / per_bin) - 2}"
            " bins"
        )


# -- analyst side -----------------------------------------------------------------------
@dataclass(frozen=True, repr=False)
class FederatedClusteredResult(ResultMixin):
    """Clustered AUCs computed across sites, with what the computation released.

    Attributes
    ----------
    estimate : ClusteredAUCResult
        The estimates (``excluded_clusters`` is None: only their number is known).
    sites : list of str
    n_bins : int
    score_range : (float, float)
    population_binning_bound : float
        Upper bound on ``|population_auc - exact pooled population_auc|`` due to binning.
    obuchowski_binning_bound : float
        The same for ``obuchowski_auc``.
    released : Released
        Rounds, functions, bytes per site, release kinds.
    method : str
    """

    estimate: ClusteredAUCResult
    sites: list[str]
    n_bins: int
    score_range: tuple[float, float]
    population_binning_bound: float
    obuchowski_binning_bound: float
    released: Released
    method: str = "shared-bin histograms + per-cluster sums"

    def __getattr__(self, name: str) -> Any:
        """Read the estimate's attributes (``population_auc``, ``covariance``, ...) through."""
        # population_auc, covariance, ... read through to the estimate.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.estimate, name)

    def to_dict(self) -> dict[str, Any]:
        """Return the estimate's keys, then the federation's (sites, bins, bounds, released)."""
        return {
            **self.estimate.to_dict(),
            "method": self.method,
            "sites": list(self.sites),
            "n_bins": self.n_bins,
            "score_range": list(self.score_range),
            "population_binning_bound": jsonable(self.population_binning_bound),
            "obuchowski_binning_bound": jsonable(self.obuchowski_binning_bound),
            "released": self.released.to_dict(),
        }

    def summary(self) -> str:
        """Format the estimate's summary, then the federated computation's."""
        extra = format_table(
            [
                ("sites", ", ".join(self.sites)),
                ("method", self.method),
                ("bins", f"{self.n_bins} on [{self.score_range[0]:g}, {self.score_range[1]:g}]"),
                ("binning bound, population AUC", self.population_binning_bound),
                ("binning bound, Obuchowski AUC", self.obuchowski_binning_bound),
                ("rounds", self.released.rounds),
                ("bytes from sites", sum(self.released.bytes_received.values())),
            ],
            title="Federated computation",
        )
        return self.estimate.summary() + "\n\n" + extra


def _pairs(hist_neg: FloatArray, hist_pos: FloatArray) -> float:
    """(control, case) pairs of the pooled histograms in order, ties 1/2."""
    return ScoreCounts.from_bins(hist_pos, hist_neg).mann_whitney()


def _tied(hist_neg: FloatArray, hist_pos: FloatArray) -> float:
    """(control, case) pairs sharing a bin."""
    return ScoreCounts.from_bins(hist_pos, hist_neg).tied_pairs()


def federated_clustered_auc(
    federation: Federation,
    *,
    n_bins: int = 1000,
    score_range: tuple[float, float] = (0.0, 1.0),
    confidence_level: float = 0.95,
    pair_correction: bool = True,
    population_estimator: PopulationEstimator | None = None,
    sigma11: Sigma11Divisor = "corollary6",
    interval: Interval = "logit",
    secure: bool = True,
    aggregate: SiteSum | None = None,
) -> FederatedClusteredResult:
    """Estimate clustered AUCs over sites that each hold whole clusters.

    Two rounds (see the module docstring): shared-bin class counts and per-site sums over
    clusters, then centred per-site sums against the pooled histograms.

    Parameters
    ----------
    federation : Federation
        Sites whose data has a cluster column; no cluster may span two sites.
    n_bins : int, default 1000
        Shared score bins for the between-cluster pairs.
    score_range : (float, float), default (0, 1)
        Range the bins cover; every score of every site must lie in it.
    confidence_level : float, default 0.95
    pair_correction, population_estimator, sigma11, interval
        As in :func:`fedroc.methods.clustered.clustered_auc`.
    secure : bool, default True
        Sum over sites by secure aggregation (:func:`secure_site_sum`, as many sites as
        their policies ask, 3 by default) rather than in the clear (:func:`plain_sum`,
        which each site answers only if its policy sets ``clear_histograms``).
    aggregate : SiteSum, optional
        Any other way of forming the sums over sites (overrides ``secure``).

    Returns
    -------
    FederatedClusteredResult
        Its estimate carries the same caveats as :func:`clustered_auc` (issued as
        :class:`~fedroc.methods.clustered._result.ClusteredAUCWarning`); ``equal_weight_auc``
        (theta'12) is not computed across sites (NaN).
    """
    level = check_confidence(confidence_level)
    estimator = resolve_estimator(pair_correction, population_estimator)
    check_sigma11(sigma11)
    check_interval(interval)
    if interval == "jackknife":
        raise InputError(
            "interval='jackknife' (--cluster-interval jackknife) is offered by the pooled "
            "analysis only (`fedroc clustered FILE`, fedroc.clustered_auc): the "
            "leave-one-cluster-out estimates need sums the sites do not "
            "release; the federated default 'logit' is the closest"
        )
    edges = score_bin_edges(n_bins, score_range)
    if aggregate is None:
        aggregate = secure_site_sum if secure else plain_sum
    if aggregate is secure_site_sum:
        _check_secure_arguments(n_bins, edges, list(federation.site_names))
    mark = federation.mark()
    try:
        first = aggregate(federation, FUNCTION_SUMMARY, {"edges": edges})
    except DisclosureError as exc:
        meaning = _summary_refusal_meaning(str(exc), n_bins)
        if meaning is None:
            raise
        raise DisclosureError(f"{exc}. {meaning}", site=exc.site, function=exc.function) from exc
    # Through secure aggregation every site signed its rows, in the clear its release;
    # relayed so that each site can check that the pooled histograms of round 2 hold those
    # rows and no more (C2), in the clear that they are the sum of the releases.
    statements = first.pop(STATEMENTS, None)
    releases = first.pop(RELEASES, None)
    relayed = row_count_arguments(statements) if statements else {}
    if releases:
        relayed = release_arguments(releases)
    n_used = round(float(first["clusters_used"]))
    n_total = round(float(first["clusters_all"]))
    if n_used < 2:
        raise InputError(
            f"clustered AUCs need at least 2 clusters with both classes; the sites hold "
            f"{n_used} (of {n_total} cluster(s))"
        )
    big_m, big_n = float(first["neg_used"]), float(first["pos_used"])
    big_m_all, big_n_all = float(first["neg_all"]), float(first["pos_all"])
    g_pos, g_neg = first["hist_pos_used"], first["hist_neg_used"]
    g_pos_all, g_neg_all = first["hist_pos_all"], first["hist_neg_all"]
    total_used = _pairs(g_neg, g_pos)
    within = float(first["within_binned_twice"]) / 2.0
    between_pairs = total_used - within
    estimates = {
        "eq5": between_pairs / (big_m * big_n),
        "corrected": between_pairs / (big_m * big_n) * (n_used / (n_used - 1)),
        "between": between_pairs / (big_m * big_n - float(first["mn_used"])),
    }
    population = estimates[estimator]
    personalized = float(first["phi_sum"]) / n_used
    obu_auc = _pairs(g_neg_all, g_pos_all) / (big_m_all * big_n_all)

    second = aggregate(
        federation,
        FUNCTION_MOMENTS,
        {
            "edges": edges,
            "hist_pos_used": g_pos,
            "hist_neg_used": g_neg,
            "hist_pos_all": g_pos_all,
            "hist_neg_all": g_neg_all,
            "n_clusters": n_used,
            "big_m": big_m,
            "big_n": big_n,
            "total_used": total_used,
            "population": population,
            "personalized": personalized,
            "big_m_all": big_m_all,
            "big_n_all": big_n_all,
            "obuchowski": obu_auc,
            **relayed,
        },
    )
    divisor = n_used - 1 if sigma11 == "corollary6" else (n_used - 1) ** 2 / n_used
    s11 = float(second["s11"]) / divisor
    s22 = float(second["s22"]) / (n_used - 1)
    s12 = population * float(second["s12"]) / n_used
    # The same estimates as the pooled joint_estimates, from sums over sites.
    joint = JointEstimates(
        np.asarray(population), np.asarray(personalized), np.array([[s11, s12], [s12, s22]]), n_used
    )

    i10 = float(first["clusters_with_neg"])
    i01 = float(first["clusters_with_pos"])
    with np.errstate(divide="ignore", invalid="ignore"):
        obu_var = (
            i10 / ((i10 - 1) * big_m_all) * float(second["o10"])
            + i01 / ((i01 - 1) * big_n_all) * float(second["o01"])
            + 2.0
            * n_total
            / (n_total - 1)
            * float(second["o11"])
            / math.sqrt(big_m_all * big_n_all)
        )
    # DeLong's SE of the all-pairs AUC on the same bins: the yardstick of the few-cluster
    # caveat, from the pooled histograms the analyst already holds.
    delong_se = delong_from_counts(g_pos_all, g_neg_all).se
    same_bin = _tied(g_neg, g_pos) - float(first["within_same_bin"])
    estimate = ClusteredAUCResult.from_estimates(
        joint,
        obuchowski_auc=obu_auc,
        obuchowski_variance=float(obu_var),
        n_clusters_total=n_total,
        excluded_clusters=None,
        n_excluded=n_total - n_used,
        n_neg=round(big_m),
        n_pos=round(big_n),
        confidence_level=level,
        population_estimator=estimator,
        sigma11=sigma11,
        delong_se=delong_se,
        population_between=estimates["between"],
        interval=interval,
    )
    if aggregate is secure_site_sum:
        how = "secure aggregation: the analyst saw only sums over all sites"
    elif aggregate is plain_sum:
        how = "plain sums: the analyst saw each site's values"
    else:
        how = f"sums over sites formed by {getattr(aggregate, '__name__', aggregate)}"
    released = federation.released(mark).with_notes(
        how,
        f"class counts in {int(n_bins)} shared score bins (used clusters and all rows)",
        "sums over clusters (never one cluster's values); counts of clusters",
        "pooled histograms and estimates sent back to every site in round 2",
    )
    lo, hi = (float(v) for v in score_range)
    # The binning bound scales with the estimator's denominator.
    scale = population / estimates["eq5"] if estimates["eq5"] > 0 else 1.0
    return FederatedClusteredResult(
        estimate=estimate,
        sites=list(federation.site_names),
        n_bins=int(n_bins),
        score_range=(lo, hi),
        population_binning_bound=max(0.0, same_bin) / (2.0 * big_m * big_n) * scale,
        obuchowski_binning_bound=_tied(g_neg_all, g_pos_all) / (2.0 * big_m_all * big_n_all),
        released=released,
    )


@register_method(
    "clustered",
    "population AUC of clustered data (clusters inside sites), with the personalized AUC "
    "and their equality test (paper 3)",
    needs_clusters=True,
)
def run_clustered(
    inputs: EvaluationInputs,
    *,
    n_bins: int = 1000,
    score_range: tuple[float, float] | None = None,
    secure: bool = True,
    population_estimator: PopulationEstimator | None = None,
    sigma11: Sigma11Divisor = "corollary6",
    interval: Interval = "logit",
) -> EvaluationResult:
    """``fedroc evaluate --method clustered --cluster COL``: the common result of paper 3.

    ``auc`` and ``auc_ci`` are the population AUC theta12 and its interval: the AUC of
    pairs from different clusters, which equals the ordinary AUC when every cluster holds
    one observation of each class and is what every other method of ``evaluate``
    estimates (the AUC of the pooled population). The personalized AUC (the mean
    within-cluster AUC), the test of their equality, Obuchowski's AUC and the caveats are
    extra keys.

    Parameters
    ----------
    {inputs, options}

    Returns
    -------
    {evaluation_result}
    """
    fed_result = federated_clustered_auc(
        inputs.federation,
        n_bins=n_bins,
        score_range=(0.0, 1.0) if score_range is None else tuple(score_range),  # type: ignore[arg-type]
        confidence_level=inputs.confidence_level,
        population_estimator=population_estimator,
        sigma11=sigma11,
        secure=secure,
        interval=interval,
    )
    est = fed_result.estimate
    extra = {
        # The keys every method gives (n, n_pos, n_neg, auc_se), then those of `fedroc
        # clustered --json` for the same quantities: one name per quantity in both commands.
        "n": est.n_neg + est.n_pos,
        "n_pos": est.n_pos,
        "n_neg": est.n_neg,
        "auc_se": est.population_se,
        "population_auc": est.population_auc,
        "population_ci": list(est.population_ci),
        "population_se": est.population_se,
        "population_estimator": est.population_estimator,
        "personalized_auc": est.personalized_auc,
        "personalized_ci": list(est.personalized_ci),
        "personalized_se": est.personalized_se,
        "covariance": est.covariance,
        "equality_z": est.equality_z,
        "equality_p": est.equality_p,
        "obuchowski_auc": est.obuchowski_auc,
        "obuchowski_se": est.obuchowski_se,
        "obuchowski_ci": list(est.obuchowski_ci),
        "delong_se": est.delong_se,
        "n_clusters": est.n_clusters,
        "n_clusters_total": est.n_clusters_total,
        "n_excluded": est.n_excluded,
        "sigma11": est.sigma11,
        "interval": est.interval,
        "n_bins": fed_result.n_bins,
        "population_binning_bound": fed_result.population_binning_bound,
        "obuchowski_binning_bound": fed_result.obuchowski_binning_bound,
        "caveats": list(est.caveats),
        "notes": list(est.notes),
    }
    return EvaluationResult(
        method="clustered",
        sites=[{"name": name, "n": None} for name in fed_result.sites],
        auc=est.population_auc,
        auc_ci=est.population_ci,
        released=fed_result.released,
        extra=extra,
        confidence_level=inputs.confidence_level,
        details=fed_result,
    )


run_clustered.__doc__ = fill(
    run_clustered.__doc__ or "",
    options="\n".join(
        [
            parameters_of(federated_clustered_auc, ["n_bins", "score_range", "secure"]),
            parameters_of(clustered_auc, ["population_estimator", "sigma11", "interval"]),
        ]
    ),
)
