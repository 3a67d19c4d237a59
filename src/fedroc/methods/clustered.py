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
AUC and its variance ``Sigma22`` are exact; ``theta12^`` and ``Sigma11`` are those of the
binned scores.

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
Honest-but-curious analyst and sites that follow the protocol; with secure aggregation, the
analyst may collude with fewer than its threshold of sites (see :mod:`fedroc.secagg`).

- Raw rows and per-cluster values never leave a site. Every per-cluster quantity is summed
  over the site's clusters before release, and the site declares the number of clusters in
  the sum (and its rows), so its disclosure policy refuses any site with fewer than q usable
  clusters.
- What the analyst learns: the class counts in each shared bin (for the clusters with both
  classes and for all rows), the numbers of clusters used, excluded and holding each
  class, and the sums over clusters of the terms above. With secure aggregation (default)
  only their sums over all sites; with :func:`plain_sum` each site's values. The pooled
  histograms locate scores to bins without naming the site; they are not protected by q
  (bins may hold fewer than q rows). Protecting them needs differential privacy on the
  counts (paper 5), not implemented here.
- Sent to every site in round two: the pooled histograms and pooled scalars (I, M, N and
  the point estimates), i.e. the other sites' combined score distribution at bin
  resolution.
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

from fedroc._results import ResultMixin, format_table, jsonable
from fedroc._validation import check_confidence
from fedroc.clustered._auc import ClusteredAUCResult, encode_clusters
from fedroc.clustered._core import beaten_counts, cluster_terms, sum_by
from fedroc.exceptions import InputError
from fedroc.federation import schema as sch
from fedroc.federation.federation import Federation, Released
from fedroc.federation.records import Record
from fedroc.federation.site import Reply, SiteContext, site_function
from fedroc.secagg import secure_sum

__all__ = [
    "FUNCTION_MOMENTS",
    "FUNCTION_SUMMARY",
    "FederatedClusteredResult",
    "SiteSum",
    "bin_scores",
    "federated_clustered_auc",
    "plain_sum",
    "score_bin_edges",
    "secure_site_sum",
]

FUNCTION_SUMMARY = "fedroc.clustered.summary"
FUNCTION_MOMENTS = "fedroc.clustered.moments"

FloatArray = NDArray[np.float64]

# A function that runs a site function on every site and returns, for each released key,
# the sum over sites. The protocol needs nothing else from the sites.
SiteSum = Callable[[Federation, str, Record], dict[str, FloatArray]]


def plain_sum(federation: Federation, function: str, args: Record) -> dict[str, FloatArray]:
    """Sum every released value over the sites, in the clear.

    SECURE-AGGREGATION HOOK. Everything the clustered protocol takes from the sites is a sum
    over sites, so a :data:`SiteSum` is the single place where per-site values could reach
    the analyst. :func:`secure_site_sum` (the default of :func:`federated_clustered_auc`)
    replaces this plain sum by secure aggregation, so that the analyst learns only the
    sums; this one is for a single site, exact comparisons and debugging.
    """
    replies = federation.call(function, **args)
    keys = sorted(next(iter(replies.values())))
    sums: dict[str, FloatArray] = {}
    for key in keys:
        sums[key] = np.sum([np.asarray(r[key], dtype=np.float64) for r in replies.values()], 0)
    return sums


def secure_site_sum(federation: Federation, function: str, args: Record) -> dict[str, FloatArray]:
    """Sum over sites by secure aggregation (:func:`fedroc.secagg.secure_sum`).

    Each site evaluates the same computation as the plain site function, as a secure input:
    its values are masked and only their sum over the sites is revealed to the analyst.
    Floats travel in 64-bit fixed point with 32 fraction bits (rounding about 2e-10 per
    value); counts exactly. Needs at least two sites.
    """
    summed = secure_sum(federation, function, **{k: jsonable(v) for k, v in args.items()})
    return {k: np.asarray(v, dtype=np.float64) for k, v in summed.values.items()}


def score_bin_edges(n_bins: int, score_range: tuple[float, float] = (0.0, 1.0)) -> FloatArray:
    """``n_bins + 1`` equidistant shared edges over ``score_range``."""
    if int(n_bins) != n_bins or n_bins < 1:
        raise InputError(f"n_bins must be a positive integer; got {n_bins!r}")
    lo, hi = (float(v) for v in score_range)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise InputError(f"score_range must be finite with low < high; got {score_range!r}")
    return np.linspace(lo, hi, int(n_bins) + 1)


def bin_scores(score: FloatArray, edges: FloatArray, where: str = "the scores") -> NDArray[np.intp]:
    """Bin ``[e_l, e_(l+1))`` of each score, the last bin closed (fedroc's one binning rule).

    Refuses scores outside ``[edges[0], edges[-1]]``: clipping them would hide an error
    larger than the stated binning bound.
    """
    lo, hi = edges[0], edges[-1]
    outside = (score < lo) | (score > hi)
    if outside.any():
        raise InputError(
            f"{where}: {int(outside.sum())} score(s) lie outside the shared score range "
            f"[{lo:g}, {hi:g}]; pass a score_range that covers every site's scores"
        )
    return np.minimum(np.searchsorted(edges, score, side="right") - 1, edges.size - 2)


# -- site side --------------------------------------------------------------------------
@dataclass(frozen=True)
class _Local:
    """A site's rows split by cluster, with the shared bins (never leaves the site)."""

    label: NDArray[np.bool_]
    score: FloatArray
    bins: NDArray[np.intp]
    codes: NDArray[np.int64]
    n_clusters: int
    usable: NDArray[np.bool_]  # per cluster


def _local(ctx: SiteContext, args: Record) -> _Local:
    data = ctx.data
    if data.cluster is None:
        raise InputError(
            f"site {ctx.site!r} has no cluster column; clustered AUCs need one "
            "(Columns(cluster=...))"
        )
    edges = np.asarray(args["edges"], dtype=np.float64)
    if not (np.diff(edges) > 0).all():
        raise InputError(f"site {ctx.site!r}: the bin edges must increase")
    codes, ids = encode_clusters(data.cluster, data.n)
    n_case = np.bincount(codes, weights=data.label, minlength=ids.size)
    n_all = np.bincount(codes, minlength=ids.size)
    return _Local(
        label=data.label,
        score=data.score,
        bins=bin_scores(data.score, edges, f"site {ctx.site!r}"),
        codes=codes,
        n_clusters=int(ids.size),
        usable=(n_case > 0) & (n_case < n_all),
    )


def _restricted(local: _Local) -> tuple[NDArray[np.bool_], NDArray[np.int64], int]:
    keep = local.usable[local.codes]
    new_code = np.cumsum(local.usable) - 1
    return keep, new_code[local.codes[keep]], int(np.count_nonzero(local.usable))


_MAX_EDGES = 1_000_001
_EDGES = {"edges": sch.FloatArray((sch.Bound(2, _MAX_EDGES),))}
_HIST = sch.FloatArray((sch.Bound(1, _MAX_EDGES - 1),), lo=0.0)


@site_function(FUNCTION_SUMMARY, schema=_EDGES, release="both")
def _site_summary(ctx: SiteContext, args: Record) -> Reply:
    local = _local(ctx, args)
    n_bins = int(np.asarray(args["edges"]).size - 1)
    keep, codes, n_used = _restricted(local)
    y, s, b = local.label[keep], local.score[keep], local.bins[keep]

    def hist(mask: NDArray[np.bool_], bins: NDArray[np.intp]) -> NDArray[np.int64]:
        return np.bincount(bins[mask], minlength=n_bins).astype(np.int64)

    phi_sum = 0.0
    within_twice = 0
    same_bin = 0
    if n_used:
        exact = cluster_terms(y, s, codes, n_used)
        phi_sum = float(np.sum(exact.within / (exact.m * exact.n)))
        # Within-cluster pairs on the bins, so that subtracting them from the pooled
        # histogram's pair count leaves exactly the between-cluster pairs of the bins.
        # Twice the count is an integer: exact in secure aggregation's ring.
        within_twice = round(2.0 * float(beaten_counts(y, b.astype(np.int64), codes)[y].sum()))
        _, cell = np.unique(codes * n_bins + b, return_inverse=True)
        cell = cell.reshape(-1)
        same_bin = int(np.dot(np.bincount(cell, y.astype(np.int64)), np.bincount(cell, ~y)))
    has_case = np.bincount(local.codes, weights=local.label, minlength=local.n_clusters) > 0
    has_control = np.bincount(local.codes, weights=~local.label, minlength=local.n_clusters) > 0
    return Reply(
        {
            "hist_pos_used": hist(y, b),
            "hist_neg_used": hist(~y, b),
            "hist_pos_all": hist(local.label, local.bins),
            "hist_neg_all": hist(~local.label, local.bins),
            "clusters_used": n_used,
            "clusters_all": local.n_clusters,
            "clusters_with_neg": int(has_control.sum()),
            "clusters_with_pos": int(has_case.sum()),
            "neg_used": int(np.count_nonzero(~y)),
            "pos_used": int(np.count_nonzero(y)),
            "neg_all": int(np.count_nonzero(~local.label)),
            "pos_all": int(np.count_nonzero(local.label)),
            "phi_sum": phi_sum,
            "within_binned_twice": within_twice,
            "within_same_bin": same_bin,
        },
        counts={"rows": ctx.data.n, "clusters": n_used},
    )


def _cross_sums(
    label: NDArray[np.bool_],
    bins: NDArray[np.intp],
    codes: NDArray[np.int64],
    n_clusters: int,
    hist_pos: FloatArray,
    hist_neg: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    # row_i and col_i of the site's clusters against the pooled histograms: a control in bin
    # b beats the cases above b and half of those in b; a case beats the controls below b.
    pos_above = hist_pos.sum() - np.cumsum(hist_pos)
    neg_below = np.cumsum(hist_neg) - hist_neg
    beat = np.where(
        label, neg_below[bins] + 0.5 * hist_neg[bins], pos_above[bins] + 0.5 * hist_pos[bins]
    )
    row = sum_by(codes[~label], beat[~label], n_clusters)
    col = sum_by(codes[label], beat[label], n_clusters)
    return row, col


@site_function(
    FUNCTION_MOMENTS,
    schema={
        **_EDGES,
        "n_clusters": sch.Float(0.0),
        "big_m": sch.Float(0.0, open_lo=True),
        "big_n": sch.Float(0.0, open_lo=True),
        "total_used": sch.Float(0.0),
        "population": sch.Float(0.0, 2.0),
        "personalized": sch.Float(0.0, 1.0),
        "obuchowski": sch.Float(0.0, 1.0),
        "big_m_all": sch.Float(0.0, open_lo=True),
        "big_n_all": sch.Float(0.0, open_lo=True),
        "hist_pos_used": _HIST,
        "hist_neg_used": _HIST,
        "hist_pos_all": _HIST,
        "hist_neg_all": _HIST,
    },
    release="both",
)
def _site_moments(ctx: SiteContext, args: Record) -> Reply:
    local = _local(ctx, args)
    keep, codes, n_used = _restricted(local)
    y, s, b = local.label[keep], local.score[keep], local.bins[keep]
    n_i = float(args["n_clusters"])
    big_m, big_n = float(args["big_m"]), float(args["big_n"])
    total = float(args["total_used"])
    theta12, theta11 = float(args["population"]), float(args["personalized"])
    s11 = s12 = s22 = 0.0
    if n_used:
        exact = cluster_terms(y, s, codes, n_used)
        phi = exact.within / (exact.m * exact.n)
        row, col = _cross_sums(
            y,
            b,
            codes,
            n_used,
            np.asarray(args["hist_pos_used"], dtype=np.float64),
            np.asarray(args["hist_neg_used"], dtype=np.float64),
        )
        # The summands of Corollary 6 (see fedroc.clustered._estimators.joint_estimates),
        # centred with the pooled estimates so that the sums add up across sites.
        size_term = n_i * (exact.m / big_m + exact.n / big_n)
        a = n_i * (row + col) / (big_m * big_n)
        s11 = float(np.sum((a - theta12 * size_term) ** 2))
        share = n_i * (row + col) / total if total > 0 else np.zeros_like(row)
        s12 = float(np.sum(phi * (share - size_term)))
        s22 = float(np.sum((phi - theta11) ** 2))
    # Obuchowski's sums run over every cluster, one-class ones included.
    m_all_i = np.bincount(local.codes[~local.label], minlength=local.n_clusters)
    n_all_i = np.bincount(local.codes[local.label], minlength=local.n_clusters)
    row_a, col_a = _cross_sums(
        local.label,
        local.bins,
        local.codes,
        local.n_clusters,
        np.asarray(args["hist_pos_all"], dtype=np.float64),
        np.asarray(args["hist_neg_all"], dtype=np.float64),
    )
    theta = float(args["obuchowski"])
    big_m_all, big_n_all = float(args["big_m_all"]), float(args["big_n_all"])
    x = row_a / big_n_all - m_all_i * theta
    z = col_a / big_m_all - n_all_i * theta
    return Reply(
        {
            "s11": s11,
            "s12": s12,
            "s22": s22,
            # Divided by M, N and sqrt(M N) (as in Obuchowski's S10, S01, S11) so that they
            # stay of the order of the cluster sizes in the fixed-point ring.
            "o10": float(np.sum(x * x)) / big_m_all,
            "o01": float(np.sum(z * z)) / big_n_all,
            "o11": float(np.sum(x * z)) / math.sqrt(big_m_all * big_n_all),
        },
        counts={"rows": ctx.data.n, "clusters": n_used},
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
        # population_auc, covariance, ... read through to the estimate.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.estimate, name)

    def to_dict(self) -> dict[str, Any]:
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
    pos_above = hist_pos.sum() - np.cumsum(hist_pos)
    return float(np.dot(hist_neg, pos_above + 0.5 * hist_pos))


def federated_clustered_auc(
    federation: Federation,
    *,
    n_bins: int = 1000,
    score_range: tuple[float, float] = (0.0, 1.0),
    confidence_level: float = 0.95,
    pair_correction: bool = True,
    secure: bool = True,
    aggregate: SiteSum | None = None,
) -> FederatedClusteredResult:
    """Population, personalized and Obuchowski AUCs over sites that each hold whole clusters.

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
    pair_correction : bool, default True
        As in :func:`fedroc.clustered.clustered_auc`.
    secure : bool, default True
        Sum over sites by secure aggregation (:func:`secure_site_sum`, needs two or more
        sites) rather than in the clear (:func:`plain_sum`).
    aggregate : SiteSum, optional
        Any other way of forming the sums over sites (overrides ``secure``).

    Returns
    -------
    FederatedClusteredResult
    """
    level = check_confidence(confidence_level)
    edges = score_bin_edges(n_bins, score_range)
    if aggregate is None:
        aggregate = secure_site_sum if secure else plain_sum
    mark = federation.mark()
    first = aggregate(federation, FUNCTION_SUMMARY, {"edges": edges})
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
    correction = n_used / (n_used - 1) if pair_correction else 1.0
    within = float(first["within_binned_twice"]) / 2.0
    population = (total_used - within) / (big_m * big_n) * correction
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
        },
    )
    s11 = float(second["s11"]) / (n_used - 1)
    s22 = float(second["s22"]) / (n_used - 1)
    s12 = population * float(second["s12"]) / n_used
    covariance = np.array([[s11, s12], [s12, s22]]) / n_used

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
    same_bin = float(np.dot(g_neg, g_pos)) - float(first["within_same_bin"])
    estimate = ClusteredAUCResult.from_estimates(
        population=population,
        personalized=personalized,
        covariance=covariance,
        obuchowski_auc=obu_auc,
        obuchowski_variance=float(obu_var),
        n_clusters=n_used,
        n_clusters_total=n_total,
        excluded_clusters=None,
        n_excluded=n_total - n_used,
        n_neg=round(big_m),
        n_pos=round(big_n),
        confidence_level=level,
        pair_correction=pair_correction,
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
    return FederatedClusteredResult(
        estimate=estimate,
        sites=list(federation.site_names),
        n_bins=int(n_bins),
        score_range=(lo, hi),
        population_binning_bound=max(0.0, same_bin) / (2.0 * big_m * big_n) * correction,
        obuchowski_binning_bound=float(np.dot(g_neg_all, g_pos_all))
        / (2.0 * big_m_all * big_n_all),
        released=released,
    )
