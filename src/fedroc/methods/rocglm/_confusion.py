"""Distributed confusion matrix at a threshold (dsBinVal's ``dsConfusion``).

Each site counts its 2 x 2 table at the threshold (predicted positive when ``score >=
threshold``, the rule of paper 1, section 3; dsBinVal uses ``>``) and releases it only if
every cell holds at least q rows and no earlier threshold lies so close that the two tables
would subtract to fewer than q rows of a class (see ``rocglm.confusion``). The analyst adds
the tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fedroc._docs import fill_doc
from fedroc._results import ResultMixin, format_table
from fedroc.exceptions import InputError
from fedroc.federation.federation import Federation, Released
from fedroc.methods.rocglm._site import FN_CONFUSION
from fedroc.metrics import TwoByTwo

__all__ = ["ConfusionMatrix", "distributed_confusion"]


@dataclass(frozen=True, repr=False)
class ConfusionMatrix(TwoByTwo, ResultMixin):
    """The pooled 2 x 2 table at one threshold, the sites' tables and derived rates.

    ``tp``, ``fp``, ``fn``, ``tn`` are summed over the sites; ``by_site`` holds each
    site's cells.

    Attributes
    ----------
    threshold : float
        Rows with ``score >= threshold`` are predicted positive.
    tp, fp, fn, tn : int
        True positives, false positives, false negatives and true negatives over all sites.
    by_site : dict of str to dict
        Each site's ``{"tp", "fp", "fn", "tn"}``.
    released : Released
        What left the sites.
    """

    threshold: float
    tp: int
    fp: int
    fn: int
    tn: int
    by_site: dict[str, dict[str, int]]
    released: Released

    @property
    def n(self) -> int:
        """Rows counted, ``tp + fp + fn + tn``."""
        return self.tp + self.fp + self.fn + self.tn

    tpr = TwoByTwo.sensitivity  # the names of dsBinVal's table
    tnr = TwoByTwo.specificity

    @property
    def fpr(self) -> float:
        """False positive rate ``fp / (fp + tn)``; NaN without negatives."""
        return self._ratio(self.fp, self.fp + self.tn)

    @property
    def accuracy(self) -> float:
        """Share of rows classified correctly, ``(tp + tn) / n``."""
        return self._ratio(self.tp + self.tn, self.n)

    @property
    def f1(self) -> float:
        """F1 score ``2 tp / (2 tp + fp + fn)``; NaN when it is 0 / 0."""
        return self._ratio(2 * self.tp, 2 * self.tp + self.fp + self.fn)

    def matrix(self) -> list[list[int]]:
        """Return the matrix ``[[tn, fp], [fn, tp]]``.

        Rows the truth (0, 1), columns the prediction, as scikit-learn's
        ``confusion_matrix`` orders them.
        """
        return [[self.tn, self.fp], [self.fn, self.tp]]

    def summary(self) -> str:
        """Format the table, its rates and the number of sites as text."""
        return format_table(
            [
                ("threshold (predict positive if score >=)", self.threshold),
                ("TP / FP", f"{self.tp} / {self.fp}"),
                ("FN / TN", f"{self.fn} / {self.tn}"),
                ("sensitivity (TPR)", self.tpr),
                ("specificity (TNR)", self.tnr),
                ("PPV / NPV", f"{self.ppv:.4f} / {self.npv:.4f}"),
                ("accuracy", self.accuracy),
                ("F1", self.f1),
                ("sites", len(self.by_site)),
            ],
            title="Distributed confusion matrix",
        )


@fill_doc
def distributed_confusion(federation: Federation, threshold: float = 0.5) -> ConfusionMatrix:
    """Add up the confusion matrix over all sites at ``threshold`` (dsBinVal's ``dsConfusion``).

    Every site must release its table: one that refuses (a cell below q, or a threshold too
    close to one it released before) stops the computation with its reason.

    Parameters
    ----------
    {federation}
    threshold : float, default 0.5
        Predict positive for ``score >= threshold``; finite.

    Returns
    -------
    ConfusionMatrix
        The summed table, each site's table and the rates.

    Raises
    ------
    InputError
        ``threshold`` is not finite.
    {site_failure}

    Examples
    --------
    >>> import numpy as np
    >>> from fedroc.data import SiteData
    >>> from fedroc.federation import Federation, Site
    >>> rng = np.random.default_rng(0)
    >>> sites = [Site(f"s{k}", SiteData.from_arrays(rng.random(200) < 0.4, rng.random(200)))
    ...          for k in range(3)]
    >>> cm = distributed_confusion(Federation.from_sites(sites), 0.5)
    >>> cm.n
    600
    """
    if not math.isfinite(threshold):
        raise InputError(f"threshold must be a finite number; got {threshold!r}")
    start = federation.mark()
    replies = federation.call(FN_CONFUSION, threshold=float(threshold))
    by_site = {
        name: {k: int(r[k]) for k in ("tp", "fp", "fn", "tn")} for name, r in replies.items()
    }
    total = {k: sum(cells[k] for cells in by_site.values()) for k in ("tp", "fp", "fn", "tn")}
    return ConfusionMatrix(
        float(threshold),
        total["tp"],
        total["fp"],
        total["fn"],
        total["tn"],
        by_site,
        federation.released(start),
    )
