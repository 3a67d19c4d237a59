"""The first federated computations (paper 1, section 4.1).

Distributed mean and variance, Brier score and calibration curve.

Threat model: honest-but-curious analyst. Each site releases sums over at least q rows
(its policy's ``min_count``); the analyst learns the per-site sums and counts, nothing
else. The calibration curve suppresses, at each site, any bin with fewer than q rows; the
analyst computes each bin's fractions only from the sites that released it (the reference
code kept suppressed bins in the denominator, which biased the curve).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedroc._docs import fill_doc
from fedroc._results import ResultMixin, format_table
from fedroc.exceptions import InputError
from fedroc.federation.federation import Federation
from fedroc.federation.records import Record
from fedroc.federation.schema import Choice, Float, Int
from fedroc.federation.site import Reply, SiteContext, site_function
from fedroc.metrics import CalibrationCurve, bin_edges, bin_index

__all__ = [
    "DistributedMoments",
    "SiteCalibration",
    "distributed_brier",
    "distributed_calibration",
    "distributed_mean",
    "distributed_variance",
    "site_probabilities",
    "site_sizes",
]

_COLUMNS = ("score", "label")
_SUBSETS = ("all", "positive", "negative")
FN_INFO = "fedroc.info"
FN_CLASS_COUNTS = "fedroc.class_counts"
FN_SUM = "fedroc.sum"
FN_CENTERED_SS = "fedroc.centered_ss"
FN_BRIER = "fedroc.brier"
FN_CALIBRATION = "fedroc.calibration"
FN_IS_PROBABILITY = "fedroc.is_probability"
MAX_CALIBRATION_BINS = 100
_COLUMN_ARGS = {
    "column": Choice(*_COLUMNS, default="score"),
    "subset": Choice(*_SUBSETS, default="all"),
}


def _values(ctx: SiteContext, args: Record) -> np.ndarray:
    column, subset = args["column"], args["subset"]
    values = ctx.data.score if column == "score" else ctx.data.label.astype(np.float64)
    if subset == "positive":
        return values[ctx.data.label]
    if subset == "negative":
        return values[~ctx.data.label]
    return values


def site_probabilities(ctx: SiteContext) -> np.ndarray:
    """Return the site's scores, refusing if any lies outside [0, 1].

    The message travels to the analyst, so it states the cause and no number computed
    from the rows (no count, no value, no index).

    Parameters
    ----------
    ctx : SiteContext
        The calling site function's context.

    Returns
    -------
    ndarray of float64, shape (n,)
        The site's scores (read-only), all in [0, 1].

    Raises
    ------
    InputError
        A score lies outside [0, 1].
    """
    s = ctx.data.score
    if ((s < 0.0) | (s > 1.0)).any():
        raise InputError(
            f"scores of site {ctx.site!r} lie outside [0, 1]; the Brier score and "
            "calibration need probabilities"
        )
    return s


@site_function(FN_INFO, schema={})
def _info(ctx: SiteContext, args: Record) -> Reply:
    return Reply({"n": ctx.data.n}, counts={"rows": ctx.data.n})


@site_function(FN_CLASS_COUNTS, schema={}, release="both")
def _class_counts(ctx: SiteContext, args: Record) -> Reply:
    d = ctx.data
    return Reply(
        {"n_pos": d.n_pos, "n_neg": d.n_neg}, counts={"positive": d.n_pos, "negative": d.n_neg}
    )


@site_function(FN_SUM, schema=_COLUMN_ARGS)
def _sum(ctx: SiteContext, args: Record) -> Reply:
    v = _values(ctx, args)
    return Reply({"n": v.size, "sum": float(v.sum())}, counts={"rows": v.size})


@site_function(FN_CENTERED_SS, schema={**_COLUMN_ARGS, "mean": Float()})
def _centered_ss(ctx: SiteContext, args: Record) -> Reply:
    v = _values(ctx, args)
    mean = float(args["mean"])
    return Reply({"n": v.size, "ss": float(np.sum((v - mean) ** 2))}, counts={"rows": v.size})


@site_function(FN_BRIER, schema={}, release="both")
def _brier(ctx: SiteContext, args: Record) -> Reply:
    p = site_probabilities(ctx)
    sse = float(np.sum((ctx.data.label - p) ** 2))
    return Reply({"n": p.size, "sse": sse}, counts={"rows": p.size})


# In the clear the number of bins is bound (one value per site lifetime): bins of two
# widths overlap in intervals that can hold fewer than q rows, which subtraction of the
# released sums would isolate despite the per-bin suppression.
@site_function(
    FN_CALIBRATION,
    schema={"n_bins": Int(2, MAX_CALIBRATION_BINS, default=10, bind=True)},
    release="both",
)
def _calibration(ctx: SiteContext, args: Record) -> Reply:
    n_bins = int(args["n_bins"])
    p = site_probabilities(ctx)
    idx = bin_index(p, n_bins)
    count = np.bincount(idx, minlength=n_bins)
    sum_pred = np.bincount(idx, weights=p, minlength=n_bins)
    sum_obs = np.bincount(idx, weights=ctx.data.label.astype(np.float64), minlength=n_bins)
    # Any bin below q rows (empty ones included) is withheld: its count is disclosive too.
    # Inside secure aggregation no site's bins are seen, so nothing is withheld.
    if ctx.sites is not None:
        return Reply(
            {"count": count.astype(np.int64), "sum_predicted": sum_pred, "sum_observed": sum_obs},
            counts={"rows": p.size},
        )
    suppressed = count < ctx.policy.min_count
    keep = ~suppressed
    return Reply(
        {
            "count": np.where(keep, count, 0).astype(np.int64),
            "sum_predicted": np.where(keep, sum_pred, 0.0),
            "sum_observed": np.where(keep, sum_obs, 0.0),
            "suppressed": suppressed,
        },
        counts={"bin": count[keep]},
    )


@dataclass(frozen=True, repr=False)
class DistributedMoments(ResultMixin):
    """Mean and sample variance (ddof 1) pooled over the sites (distrAVG / distrVAR).

    Attributes
    ----------
    mean : float
        The mean over all sites' rows.
    variance : float
        The sample variance (ddof 1) about that mean; NaN for fewer than two rows.
    n : int
        Rows over all sites.
    """

    mean: float
    variance: float
    n: int

    def summary(self) -> str:
        """Format n, mean and variance as a table."""
        return format_table(
            [("n", self.n), ("mean", self.mean), ("variance", self.variance)],
            title="Distributed moments",
        )


@fill_doc
def site_sizes(federation: Federation) -> dict[str, int]:
    """Ask every site for its number of rows.

    Parameters
    ----------
    {federation}

    Returns
    -------
    dict of str to int
        Rows of each site, by name.

    Raises
    ------
    {site_failure}
    """
    return {name: int(r["n"]) for name, r in federation.call(FN_INFO).items()}


@fill_doc
def distributed_mean(
    federation: Federation, *, column: str = "score", subset: str = "all"
) -> tuple[float, int]:
    """DistrAVG of paper 1: ``(sum of site sums) / (sum of site counts)``.

    Parameters
    ----------
    {federation}
    {column}
    {subset}

    Returns
    -------
    mean : float
        The mean of the column over the rows of every site.
    n : int
        Number of rows it is taken over.

    Raises
    ------
    {site_failure}
    """
    replies = federation.call(FN_SUM, column=column, subset=subset)
    n = sum(int(r["n"]) for r in replies.values())
    total = sum(float(r["sum"]) for r in replies.values())
    return total / n, n


@fill_doc
def distributed_variance(
    federation: Federation, *, column: str = "score", subset: str = "all"
) -> DistributedMoments:
    """DistrVAR of paper 1: the mean goes out first, then centred sums of squares come back.

    Two rounds, so the sample variance is computed about the global mean (numerically as
    stable as the pooled two-pass formula), not from per-site sums of squares.

    Parameters
    ----------
    {federation, column, subset}

    Returns
    -------
    DistributedMoments
        Mean, sample variance (ddof 1) and number of rows.

    Raises
    ------
    {site_failure}
    """
    mean, n = distributed_mean(federation, column=column, subset=subset)
    replies = federation.call(FN_CENTERED_SS, column=column, subset=subset, mean=mean)
    ss = sum(float(r["ss"]) for r in replies.values())
    variance = ss / (n - 1) if n > 1 else float("nan")
    return DistributedMoments(mean, variance, n)


@fill_doc
def distributed_brier(federation: Federation) -> tuple[float, int]:
    """Brier score from each site's sum of squared residuals (paper 1, eq. 5).

    :func:`fedroc.secagg.secure_brier` computes the same through secure aggregation, so
    that the analyst sees only the total over the sites.

    Parameters
    ----------
    {federation}

    Returns
    -------
    brier : float
        Mean squared difference between label and probability over every site's rows.
    n : int
        Number of rows.

    Raises
    ------
    {site_failure}
        A site whose scores are not probabilities in [0, 1] fails the call.
    """
    replies = federation.call(FN_BRIER)
    n = sum(int(r["n"]) for r in replies.values())
    return sum(float(r["sse"]) for r in replies.values()) / n, n


@dataclass(frozen=True, repr=False)
class SiteCalibration(ResultMixin):
    """The distributed calibration curve and which bins each site withheld.

    Attributes
    ----------
    curve : CalibrationCurve
        The curve from the bins the sites released; ``curve.suppressed`` flags the bins
        withheld by at least one site.
    suppressed_by_site : dict of str to list of int
        For each site, the indices of the bins it withheld (fewer than its ``min_count``
        rows).
    """

    curve: CalibrationCurve
    suppressed_by_site: dict[str, list[int]]

    def summary(self) -> str:
        """Format the curve's table and, per site, the bins it withheld."""
        lines = [self.curve.summary()]
        withheld = {s: b for s, b in self.suppressed_by_site.items() if b}
        if withheld:
            lines.append("bins withheld (fewer than q rows at the site):")
            lines += [f"  {site}: bins {bins}" for site, bins in withheld.items()]
        return "\n".join(lines)


@fill_doc
def distributed_calibration(federation: Federation, *, n_bins: int = 10) -> SiteCalibration:
    """Calibration curve from per-site bin sums (paper 1, section 4.1).

    A bin's predicted and observed fractions use only the sites that released it; a bin
    withheld by any site is flagged ``suppressed`` in the curve, and
    ``suppressed_by_site`` lists, per site, the bins it withheld.
    :func:`fedroc.secagg.secure_calibration` sums the bins through secure aggregation
    instead: no site's bins are seen, so none is withheld.

    Parameters
    ----------
    {federation}
    n_bins : int, default 10
        Number of equal-width probability bins on [0, 1], from 2 to 100 (the sites'
        limit); a site binds the first number it is asked for and refuses any other.

    Returns
    -------
    SiteCalibration
        The curve and, per site, the bins it withheld.

    Raises
    ------
    {site_failure}
    """
    edges = bin_edges(n_bins)
    replies = federation.call(FN_CALIBRATION, n_bins=int(n_bins))
    count = np.zeros(n_bins, np.int64)
    sum_pred = np.zeros(n_bins)
    sum_obs = np.zeros(n_bins)
    suppressed = np.zeros(n_bins, bool)
    per_site: dict[str, list[int]] = {}
    for name, r in replies.items():
        count += np.asarray(r["count"], np.int64)
        sum_pred += r["sum_predicted"]
        sum_obs += r["sum_observed"]
        sup = np.asarray(r["suppressed"], bool)
        suppressed |= sup
        per_site[name] = np.flatnonzero(sup).tolist()
    curve = CalibrationCurve.from_sums(edges, count, sum_pred, sum_obs, suppressed)
    return SiteCalibration(curve, per_site)


@site_function(FN_IS_PROBABILITY, schema={})
def _is_probability(ctx: SiteContext, args: Record) -> Reply:
    s = ctx.data.score
    ok = bool(np.all((s >= 0.0) & (s <= 1.0)))
    return Reply({"ok": ok}, counts={"rows": ctx.data.n})
