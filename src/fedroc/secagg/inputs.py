"""Secure versions of the foundation's distributed statistics (paper 1, section 4.1).

The sites' class counts, Brier sums and calibration-bin sums go through secure
aggregation instead of being released per site: the analyst learns only their totals over
the sites. Threat model: that of :mod:`fedroc.secagg.protocol` (honest-but-curious). Each
site still refuses to take part with fewer than q rows (its policy's ``min_count``); bins
are not suppressed per site, because no site's bin counts are seen.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedroc.federation.basic import SiteCalibration, site_probabilities
from fedroc.federation.federation import Federation
from fedroc.federation.site import Reply, SiteContext
from fedroc.metrics._calibration import CalibrationCurve, bin_edges, bin_index
from fedroc.secagg.protocol import secure_input, secure_sum

__all__ = ["secure_brier", "secure_calibration", "secure_class_counts"]


@secure_input("fedroc.class_counts")
def _class_counts(ctx: SiteContext, args: dict[str, Any]) -> Reply:
    d = ctx.data
    return Reply(
        {"n_pos": d.n_pos, "n_neg": d.n_neg}, counts={"positive": d.n_pos, "negative": d.n_neg}
    )


@secure_input("fedroc.brier")
def _brier(ctx: SiteContext, args: dict[str, Any]) -> Reply:
    p = site_probabilities(ctx)
    sse = float(np.sum((ctx.data.label - p) ** 2))
    return Reply({"n": p.size, "sse": sse}, counts={"rows": p.size})


@secure_input("fedroc.calibration")
def _calibration(ctx: SiteContext, args: dict[str, Any]) -> Reply:
    n_bins = int(args.get("n_bins", 10))
    p = site_probabilities(ctx)
    idx = bin_index(p, n_bins)
    observed = ctx.data.label.astype(np.float64)
    return Reply(
        {
            "count": np.bincount(idx, minlength=n_bins).astype(np.int64),
            "sum_predicted": np.bincount(idx, weights=p, minlength=n_bins),
            "sum_observed": np.bincount(idx, weights=observed, minlength=n_bins),
        },
        counts={"rows": p.size},
    )


def secure_class_counts(federation: Federation, **kwargs: Any) -> tuple[int, int]:
    """Total positives and negatives over the sites, by secure aggregation."""
    result = secure_sum(federation, "fedroc.class_counts", **kwargs)
    return int(result["n_pos"]), int(result["n_neg"])


def secure_brier(federation: Federation, **kwargs: Any) -> tuple[float, int]:
    """Brier score from the securely aggregated sums of squared residuals.

    The sums are fixed-point with 32 fraction bits in Z_2^64, so the total is exact to
    about ``n 2^-33`` and holds up to 2^31 squared residuals.
    """
    result = secure_sum(federation, "fedroc.brier", **kwargs)
    n = int(result["n"])
    return float(result["sse"]) / n, n


def secure_calibration(
    federation: Federation, *, n_bins: int = 10, **kwargs: Any
) -> SiteCalibration:
    """Calibration curve from securely aggregated per-bin counts and sums.

    No bin is withheld: the sites' bins are masked, and the analyst sees only their
    totals, so ``suppressed_by_site`` is empty for every site.
    """
    edges = bin_edges(n_bins)
    result = secure_sum(federation, "fedroc.calibration", n_bins=int(n_bins), **kwargs)
    curve = CalibrationCurve.from_sums(
        edges, result["count"], result["sum_predicted"], result["sum_observed"]
    )
    return SiteCalibration(curve, {name: [] for name in result.sites})
