"""Secure versions of the foundation's distributed statistics (paper 1, section 4.1).

The site functions are those of :mod:`fedroc.federation.basic` (registered for both plain
and secure release); here they go through secure aggregation instead of being released
per site, so the analyst learns only their totals over the sites. Threat model: that of
:mod:`fedroc.secagg.protocol` (honest-but-curious). Each site still refuses to take part
with fewer than q rows (its policy's ``min_count``), and, in the Brier sum and the
calibration curve, with fewer than q rows of a class: the other sites' parts of those
totals are public (their clear class counts and Brier sums), and the total minus them was
a site's positive count (review 13, H13-1). Bins are not suppressed per site, because no
site's bin counts are seen.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedroc._docs import fill_doc
from fedroc.federation import basic  # registers the site functions summed here
from fedroc.federation.basic import SiteCalibration
from fedroc.federation.federation import Federation
from fedroc.metrics import CalibrationCurve, bin_edges
from fedroc.secagg.protocol import secure_sum

__all__ = ["secure_brier", "secure_calibration", "secure_class_counts"]


@fill_doc
def secure_class_counts(federation: Federation, **kwargs: Any) -> tuple[int, int]:
    """Total positives and negatives over the sites, by secure aggregation.

    Parameters
    ----------
    {federation}
    {secagg_kwargs}

    Returns
    -------
    n_pos, n_neg : int
        Positives and negatives over the surviving sites.

    Raises
    ------
    {secagg_failure}
    """
    result = secure_sum(federation, basic.FN_CLASS_COUNTS, **kwargs)
    return int(result["n_pos"]), int(result["n_neg"])


@fill_doc
def secure_brier(federation: Federation, **kwargs: Any) -> tuple[float, int]:
    """Brier score from the securely aggregated sums of squared residuals.

    The sums are fixed-point with 32 fraction bits in Z_2^64, so the total is exact to
    about ``n 2^-33`` and holds up to 2^31 squared residuals.

    Parameters
    ----------
    {federation, secagg_kwargs}

    Returns
    -------
    brier : float
        Mean squared difference between label and probability over the surviving sites.
    n : int
        Number of rows.

    Raises
    ------
    {secagg_failure}
    """
    result = secure_sum(federation, basic.FN_BRIER, **kwargs)
    n = int(result["n"])
    return float(result["sse"]) / n, n


@fill_doc
def secure_calibration(
    federation: Federation, *, n_bins: int = 10, **kwargs: Any
) -> SiteCalibration:
    """Calibration curve from securely aggregated per-bin counts and sums.

    The sites' bins are masked and the analyst sees only their totals. Every row's count
    and label are summed, as in the exact tree's pooled leaves; each site leaves out of the
    sum of predictions the scores of the bins it would withhold in the clear (under q rows,
    with the secondary suppression of :func:`fedroc.federation.basic.withheld_bins`), else
    a pooled bin of one row gave that row's score, and puts their rows in at the bin's
    middle (a count of them summed apart was a site's own count under q wherever the other
    sites withheld nothing, H13-2). ``curve.suppressed`` flags the bins some site withheld
    (its clear curve's flag, empty bins included): their mean prediction holds every row,
    the withheld ones at the middle, at most half a bin off in their share of the bin;
    ``curve.count`` and ``curve.observed_fraction`` hold every row exactly. Which site
    withheld them is not seen (``suppressed_by_site`` is empty).

    Parameters
    ----------
    {federation}
    n_bins : int, default 10
        Number of equal-width probability bins on [0, 1] (edges on the 1/4096 grid), from 2 to 100.
    {secagg_kwargs}

    Returns
    -------
    SiteCalibration
        The curve of the summed bins; a bin some site withheld is flagged.

    Raises
    ------
    {secagg_failure}
    """
    edges = bin_edges(n_bins)
    result = secure_sum(federation, basic.FN_CALIBRATION, n_bins=int(n_bins), **kwargs)
    withheld = np.asarray(result["withheld"], np.int64)  # sites that withheld each bin
    count = np.asarray(result["count"], np.int64)
    # predicted_count: every row's prediction is in the sums (a withheld one at its bin's
    # middle); the table says so of a flagged bin.
    curve = CalibrationCurve.from_sums(
        edges,
        count,
        result["sum_predicted"],
        result["sum_observed"],
        withheld > 0,
        predicted_count=count,
    )
    # Which site withheld a bin is masked like the rest: only the totals are seen.
    return SiteCalibration(curve, {name: [] for name in result.sites})
