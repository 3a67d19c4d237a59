"""Per-site calibration curves beside the pooled one (paper 1, section 6.3, Figure 7).

The reference code (dsBinVal's ``dsCalibrationCurve``) returns the pooled curve and the
sites' own curves (``individuals``). fedroc's ``fedroc.calibration`` site function already
releases each site's bin sums (bins with fewer than q rows withheld); this module keeps
them per site instead of only adding them up, so the per-site curves cost no further
release. A withheld bin is missing from its site's curve and flagged in the pooled one,
whose fractions use only the sites that released it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedroc._docs import fill_doc
from fedroc._results import ResultMixin
from fedroc.federation.basic import FN_CALIBRATION
from fedroc.federation.federation import Federation, Released
from fedroc.metrics import CalibrationCurve, bin_edges

__all__ = ["SiteCalibrationCurves", "site_calibration_curves"]


@dataclass(frozen=True, repr=False)
class SiteCalibrationCurves(ResultMixin):
    """The pooled calibration curve and one curve per site, from one release.

    Attributes
    ----------
    pooled : CalibrationCurve
        The curve of the bins the sites released, added up.
    sites : dict of str to CalibrationCurve
        Each site's own curve (withheld bins flagged ``suppressed``).
    released : Released
        What left the sites.
    """

    pooled: CalibrationCurve
    sites: dict[str, CalibrationCurve]
    released: Released

    def summary(self) -> str:
        """Format the pooled curve, then each site's rows in released bins and bins withheld."""
        lines = ["pooled:", self.pooled.summary()]
        for name, curve in self.sites.items():
            withheld = np.flatnonzero(curve.suppressed).tolist()
            lines.append(
                f"site {name}: {int(curve.count.sum())} rows in released bins"
                + (f", bins {withheld} withheld" if withheld else "")
            )
        return "\n".join(lines)


@fill_doc
def site_calibration_curves(federation: Federation, *, n_bins: int = 10) -> SiteCalibrationCurves:
    """Pooled and per-site calibration curves over ``n_bins`` bins (one site call).

    A site's bin is in its curve only if it held at least q rows there (the site withholds
    it otherwise); the pooled curve adds the released bins, as
    :func:`fedroc.federation.basic.distributed_calibration` does.

    Parameters
    ----------
    {federation}
    n_bins : int, default 10
        Number of equal-width probability bins on [0, 1] (edges on the 1/4096 grid), from 2 to 100.

    Returns
    -------
    SiteCalibrationCurves
        The pooled curve and each site's.

    Raises
    ------
    {site_failure}
    """
    edges = bin_edges(n_bins)
    start = federation.mark()
    replies = federation.call(FN_CALIBRATION, n_bins=int(n_bins))
    count = np.zeros(n_bins, np.int64)
    sum_pred = np.zeros(n_bins)
    sum_obs = np.zeros(n_bins)
    suppressed = np.zeros(n_bins, bool)
    sites: dict[str, CalibrationCurve] = {}
    for name, r in replies.items():
        c = np.asarray(r["count"], np.int64)
        sup = np.asarray(r["suppressed"], bool)
        sites[name] = CalibrationCurve.from_sums(
            edges, c, r["sum_predicted"], r["sum_observed"], sup
        )
        count += c
        sum_pred += r["sum_predicted"]
        sum_obs += r["sum_observed"]
        suppressed |= sup
    pooled = CalibrationCurve.from_sums(edges, count, sum_pred, sum_obs, suppressed)
    return SiteCalibrationCurves(pooled, sites, federation.released(start))
