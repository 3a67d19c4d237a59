"""``clustered_auc``: population, personalized and Obuchowski AUCs of clustered data."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from fedroc._results import ResultMixin, format_table, jsonable
from fedroc._validation import as_1d, check_binary, check_confidence
from fedroc.clustered._core import ClusterTerms, cluster_terms, dense_rank
from fedroc.clustered._estimators import (
    ellipse_radius2,
    ellipse_statistic,
    joint_estimates,
    obuchowski,
)
from fedroc.exceptions import InputError
from fedroc.metrics import wald_ci

__all__ = ["Alternative", "ClusteredAUCResult", "clustered_auc", "encode_clusters"]

Alternative = Literal["two-sided", "less", "greater"]
_ALTERNATIVES = ("two-sided", "less", "greater")


@dataclass(frozen=True, repr=False)
class ClusteredAUCResult(ResultMixin):
    """Population and personalized AUCs with their joint covariance (Michael & Tian).

    The population AUC ``theta12`` pairs controls and cases of different clusters (paper
    eq. 5); the personalized AUC ``theta11`` averages the within-cluster AUCs; Obuchowski's
    (1997) estimator pairs all controls with all cases (eq. 7). The joint analysis of
    (theta12, theta11) uses the clusters that have both classes; Obuchowski's uses all.

    Attributes
    ----------
    population_auc, personalized_auc : float
    obuchowski_auc, obuchowski_se : float
        Obuchowski's estimator over all clusters and the square root of his variance.
    covariance : ndarray, shape (2, 2)
        Estimated covariance of (population_auc, personalized_auc): Sigma^ of Corollary 6
        divided by the number of clusters used.
    population_ci, personalized_ci : (float, float)
        Wald intervals at ``confidence_level``, clipped to [0, 1].
    equality_z, equality_p : float
        z-statistic ``(theta12^ - theta11^) / se`` and two-sided p-value of
        H0: theta12 = theta11 (section 6.3); see :meth:`equality_test` for one-sided ones.
    n_clusters : int
        Clusters with both classes (used for the joint analysis).
    n_clusters_total : int
    excluded_clusters : tuple or None
        Ids of the clusters with one class only, left out of the joint analysis (None when
        the ids are not known, as in the federated computation).
    n_excluded : int
    n_neg, n_pos : int
        Controls (M) and cases (N) in the clusters used.
    confidence_level : float
    pair_correction : bool
        Whether theta12^ carries the ``I / (I - 1)`` factor (see :func:`clustered_auc`).
    """

    population_auc: float
    personalized_auc: float
    obuchowski_auc: float
    obuchowski_se: float
    covariance: NDArray[np.float64]
    population_ci: tuple[float, float]
    personalized_ci: tuple[float, float]
    equality_z: float
    equality_p: float
    n_clusters: int
    n_clusters_total: int
    excluded_clusters: tuple[Any, ...] | None
    n_excluded: int
    n_neg: int
    n_pos: int
    confidence_level: float = 0.95
    pair_correction: bool = True

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_estimates(
        cls,
        *,
        population: float,
        personalized: float,
        covariance: NDArray[np.float64],
        obuchowski_auc: float,
        obuchowski_variance: float,
        n_clusters: int,
        n_clusters_total: int,
        excluded_clusters: tuple[Any, ...] | None,
        n_excluded: int,
        n_neg: int,
        n_pos: int,
        confidence_level: float = 0.95,
        pair_correction: bool = True,
    ) -> ClusteredAUCResult:
        """Derive the intervals and the equality test from the point estimates and Sigma^."""
        level = check_confidence(confidence_level)
        cov = np.array(covariance, dtype=np.float64).reshape(2, 2)
        cov.setflags(write=False)
        se_pop = _sqrt(cov[0, 0])
        se_pers = _sqrt(cov[1, 1])
        z = _equality_z(population, personalized, cov)
        return cls(
            population_auc=float(population),
            personalized_auc=float(personalized),
            obuchowski_auc=float(obuchowski_auc),
            obuchowski_se=_sqrt(obuchowski_variance),
            covariance=cov,
            population_ci=wald_ci(float(population), se_pop, level),
            personalized_ci=wald_ci(float(personalized), se_pers, level),
            equality_z=z,
            equality_p=_p_value(z, "two-sided"),
            n_clusters=int(n_clusters),
            n_clusters_total=int(n_clusters_total),
            excluded_clusters=excluded_clusters,
            n_excluded=int(n_excluded),
            n_neg=int(n_neg),
            n_pos=int(n_pos),
            confidence_level=level,
            pair_correction=bool(pair_correction),
        )

    # -- standard errors and intervals ----------------------------------------------------
    @property
    def population_se(self) -> float:
        return _sqrt(self.covariance[0, 0])

    @property
    def personalized_se(self) -> float:
        return _sqrt(self.covariance[1, 1])

    @property
    def correlation(self) -> float:
        """Estimated correlation of the two estimates."""
        c = self.covariance
        denom = math.sqrt(c[0, 0] * c[1, 1]) if c[0, 0] > 0 and c[1, 1] > 0 else float("nan")
        return float(c[0, 1] / denom)

    @property
    def sigma(self) -> NDArray[np.float64]:
        """Sigma^ of Corollary 6 (the asymptotic covariance of sqrt(I) times the estimates)."""
        return self.covariance * self.n_clusters

    def confidence_interval(
        self,
        which: Literal["population", "personalized", "obuchowski"] = "population",
        confidence_level: float | None = None,
    ) -> tuple[float, float]:
        """Wald interval ``estimate +- z se`` clipped to [0, 1]."""
        level = self.confidence_level if confidence_level is None else confidence_level
        if which == "population":
            return wald_ci(self.population_auc, self.population_se, level)
        if which == "personalized":
            return wald_ci(self.personalized_auc, self.personalized_se, level)
        if which == "obuchowski":
            return wald_ci(self.obuchowski_auc, self.obuchowski_se, level)
        raise InputError(
            f"which must be 'population', 'personalized' or 'obuchowski'; got {which!r}"
        )

    # -- the test of section 6.3 and the ellipse of eq. 14 -------------------------------
    def equality_test(self, alternative: Alternative = "two-sided") -> tuple[float, float]:
        """z-test of H0: theta12 = theta11.

        ``alternative="less"`` is H1: theta12 < theta11 (the personalized AUC discriminates
        more; the alternative of section 6.3), ``"greater"`` is H1: theta12 > theta11.

        Returns
        -------
        z, p_value : float
        """
        if alternative not in _ALTERNATIVES:
            raise InputError(f"alternative must be one of {_ALTERNATIVES}; got {alternative!r}")
        return self.equality_z, _p_value(self.equality_z, alternative)

    @property
    def estimate(self) -> NDArray[np.float64]:
        """``(population_auc, personalized_auc)``."""
        return np.array([self.population_auc, self.personalized_auc])

    def ellipse_statistic(self, point: ArrayLike) -> float:
        """The quantity (14) at ``point = (theta12, theta11)``: chi-squared(2) under H0."""
        p = np.asarray(point, dtype=np.float64)
        if p.shape != (2,):
            raise InputError(f"point must be (population, personalized); got shape {p.shape}")
        return float(ellipse_statistic(self.estimate, self.covariance, p))

    def ellipse_contains(self, point: ArrayLike, confidence_level: float | None = None) -> bool:
        """Whether the confidence ellipse at ``confidence_level`` covers ``point``."""
        level = self.confidence_level if confidence_level is None else confidence_level
        return self.ellipse_statistic(point) < ellipse_radius2(check_confidence(level))

    def ellipse(
        self, confidence_level: float | None = None, n_points: int = 200
    ) -> NDArray[np.float64]:
        """Boundary of the confidence ellipse (eq. 14) as an ``(n_points, 2)`` array.

        Points ``estimate + L sqrt(q) (cos t, sin t)`` with ``L L' = covariance`` and q the
        chi-squared(2) quantile; columns are (population, personalized).
        """
        level = check_confidence(
            self.confidence_level if confidence_level is None else confidence_level
        )
        q = ellipse_radius2(level)
        vals, vecs = np.linalg.eigh(self.covariance)
        root = vecs @ np.diag(np.sqrt(np.clip(vals, 0.0, None))) @ vecs.T
        t = np.linspace(0.0, 2.0 * np.pi, int(n_points))
        circle = np.stack([np.cos(t), np.sin(t)])
        return (self.estimate[:, None] + math.sqrt(q) * root @ circle).T

    def plot(
        self,
        path: str | None = None,
        *,
        ax: Any = None,
        levels: tuple[float, ...] = (0.95, 0.99),
        title: str | None = None,
    ) -> Any:
        """Confidence ellipses of (population, personalized) AUC (matplotlib, Agg).

        Returns the matplotlib Figure; with ``path`` it is also saved there.
        """
        from fedroc.clustered._plot import ellipse_figure

        return ellipse_figure(self, path=path, ax=ax, levels=levels, title=title)

    def with_confidence_level(self, confidence_level: float) -> ClusteredAUCResult:
        """The same estimates with intervals at another level."""
        level = check_confidence(confidence_level)
        return replace(
            self,
            confidence_level=level,
            population_ci=wald_ci(self.population_auc, self.population_se, level),
            personalized_ci=wald_ci(self.personalized_auc, self.personalized_se, level),
        )

    # -- output -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The keys of ``fedroc clustered --json`` (DESIGN.md) followed by context."""
        return {
            "population_auc": jsonable(self.population_auc),
            "personalized_auc": jsonable(self.personalized_auc),
            "obuchowski_auc": jsonable(self.obuchowski_auc),
            "obuchowski_se": jsonable(self.obuchowski_se),
            "covariance": jsonable(self.covariance),
            "population_ci": jsonable(self.population_ci),
            "personalized_ci": jsonable(self.personalized_ci),
            "equality_z": jsonable(self.equality_z),
            "equality_p": jsonable(self.equality_p),
            "confidence_level": self.confidence_level,
            "n_clusters": self.n_clusters,
            "n_clusters_total": self.n_clusters_total,
            "n_excluded": self.n_excluded,
            "excluded_clusters": jsonable(self.excluded_clusters),
            "n_neg": self.n_neg,
            "n_pos": self.n_pos,
            "pair_correction": self.pair_correction,
        }

    def summary(self) -> str:
        level = f"{self.confidence_level:.0%}"
        z_less = self.equality_test("less")[1]
        z_greater = self.equality_test("greater")[1]
        excluded = str(self.n_excluded)
        if self.excluded_clusters:
            shown = ", ".join(map(str, self.excluded_clusters[:5]))
            more = ", ..." if len(self.excluded_clusters) > 5 else ""
            excluded += f" ({shown}{more})"
        return format_table(
            [
                ("population AUC (theta12)", self.population_auc),
                (f"  SE, {level} CI", f"{self.population_se:.4f}  {_ci(self.population_ci)}"),
                ("personalized AUC (theta11)", self.personalized_auc),
                (f"  SE, {level} CI", f"{self.personalized_se:.4f}  {_ci(self.personalized_ci)}"),
                ("correlation of the estimates", self.correlation),
                ("H0 theta12 = theta11: z", self.equality_z),
                ("  p two-sided", self.equality_p),
                ("  p theta12 < theta11", z_less),
                ("  p theta12 > theta11", z_greater),
                ("Obuchowski AUC", self.obuchowski_auc),
                ("  SE (Obuchowski 1997)", self.obuchowski_se),
                ("clusters used", self.n_clusters),
                ("clusters with one class (excluded)", excluded),
                ("controls, cases used", f"{self.n_neg}, {self.n_pos}"),
            ],
            title="Population and personalized AUCs (Michael & Tian)",
        )


def _ci(ci: tuple[float, float]) -> str:
    return f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def _sqrt(v: float) -> float:
    v = float(v)
    return math.sqrt(v) if v >= 0 else float("nan")


def _equality_z(population: float, personalized: float, cov: NDArray[np.float64]) -> float:
    var = float(cov[0, 0] + cov[1, 1] - 2.0 * cov[0, 1])
    if not var > 0:
        return float("nan")
    return (float(population) - float(personalized)) / math.sqrt(var)


def _p_value(z: float, alternative: str) -> float:
    if not math.isfinite(z):
        return float("nan")
    if alternative == "two-sided":
        return float(2.0 * stats.norm.sf(abs(z)))
    if alternative == "less":
        return float(stats.norm.cdf(z))
    return float(stats.norm.sf(z))


def encode_clusters(cluster: ArrayLike, n: int) -> tuple[NDArray[np.int64], NDArray[Any]]:
    """Codes ``0..K-1`` for the cluster ids and the sorted distinct ids.

    Refuses a length other than ``n``, missing values and ids that cannot be ordered.
    """
    c = as_1d(cluster, "cluster")
    if c.shape[0] != n:
        raise InputError(
            f"cluster has {c.shape[0]} elements but y_true has {n}; they must have the same length"
        )
    if c.dtype.kind == "f" and np.isnan(c).any():
        bad = int(np.flatnonzero(np.isnan(c))[0])
        raise InputError(f"cluster contains NaN; first at index {bad}")
    if c.dtype.kind == "O" and any(v is None for v in c):
        raise InputError("cluster contains missing values (None)")
    try:
        ids, codes = np.unique(c, return_inverse=True)
    except TypeError:
        raise InputError("cluster mixes id types that cannot be compared") from None
    return codes.reshape(-1).astype(np.int64), ids


def clustered_auc(
    y_true: ArrayLike,
    y_score: ArrayLike,
    cluster: ArrayLike,
    *,
    pos_label: Any = None,
    confidence_level: float = 0.95,
    pair_correction: bool = True,
) -> ClusteredAUCResult:
    """Population, personalized and Obuchowski AUCs of clustered data, with inference.

    Implements Michael & Tian, "The population and personalized AUCs": the estimators of
    section 2 (eq. 5 and theta11^), Sigma^ of Corollary 6, Wald intervals, the confidence
    ellipse (14) and the z-test of H0: theta12 = theta11 (section 6.3); and Obuchowski's
    (1997) estimator (eq. 7) with his variance. O(N log N) for N observations.

    Parameters
    ----------
    y_true : array-like, shape (N,)
        Binary labels; cases (positives) are the paper's Y, controls its X.
    y_score : array-like, shape (N,)
        Scores, higher meaning more likely a case.
    cluster : array-like, shape (N,)
        Cluster id of each observation (any sortable values).
    pos_label : optional
        Label value of the positive class (default 1 / True).
    confidence_level : float, default 0.95
    pair_correction : bool, default True
        Multiply eq. 5 by ``I / (I - 1)``: ``theta12^ = (I)_2^-1 sum_{i != j} psi_ij /
        (I^-2 M N)``, the ratio of U-statistics analysed in the proof of Theorem 5 and
        computed by the authors' R code (their Table 1 shows its bias, 0.00). Eq. 5 as
        printed (``False``) divides the ``I (I - 1)`` cluster pairs by all ``I^2``: it is
        biased by about ``-theta12 / I`` (-0.012 at I = 60), lowers the ellipse coverage to
        0.88 in places, and at I = 10 makes the one-sided equality test reject 11-23% of
        the time at level 5% (``scripts/clustered_coverage.py``).

    Returns
    -------
    ClusteredAUCResult

    Raises
    ------
    InputError
        If fewer than two clusters have both classes. Clusters with one class are left out
        of the joint analysis and listed in ``excluded_clusters``.

    Examples
    --------
    >>> r = clustered_auc([0, 1, 0, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.2, 0.9], [1, 1, 2, 2, 3, 3])
    >>> round(r.personalized_auc, 3), round(r.population_auc, 3)
    (1.0, 1.0)
    >>> round(clustered_auc([0, 1, 0, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.2, 0.9], [1, 1, 2, 2, 3, 3],
    ...                     pair_correction=False).population_auc, 3)
    0.667
    """
    y, s = check_binary(y_true, y_score, pos_label=pos_label)
    codes, ids = encode_clusters(cluster, y.size)
    level = check_confidence(confidence_level)
    n_total = ids.size
    n_case = np.bincount(codes, weights=y, minlength=n_total)
    n_all = np.bincount(codes, minlength=n_total)
    usable = (n_case > 0) & (n_case < n_all)
    n_usable = int(np.count_nonzero(usable))
    if n_usable < 2:
        raise InputError(
            f"clustered AUCs need at least 2 clusters with both classes; got {n_usable} "
            f"(of {n_total} cluster(s) in cluster)"
        )
    rank = dense_rank(s)
    all_terms = cluster_terms(y, s, codes, n_total, rank=rank)
    if n_usable == n_total:
        terms = all_terms
    else:
        keep = usable[codes]
        new_code = np.cumsum(usable) - 1
        terms = cluster_terms(y[keep], s[keep], new_code[codes[keep]], n_usable, rank=rank[keep])
    return _result_from_terms(
        terms,
        all_terms,
        excluded=tuple(v.item() if hasattr(v, "item") else v for v in ids[~usable]),
        confidence_level=level,
        pair_correction=pair_correction,
    )


def _result_from_terms(
    terms: ClusterTerms,
    all_terms: ClusterTerms,
    *,
    excluded: tuple[Any, ...] | None,
    confidence_level: float,
    pair_correction: bool,
) -> ClusteredAUCResult:
    joint = joint_estimates(
        terms.m, terms.n, terms.within, terms.row, terms.col, pair_correction=pair_correction
    )
    obu_auc, obu_var = obuchowski(all_terms.m, all_terms.n, all_terms.row, all_terms.col)
    return ClusteredAUCResult.from_estimates(
        population=float(joint.population),
        personalized=float(joint.personalized),
        covariance=joint.covariance,
        obuchowski_auc=float(obu_auc),
        obuchowski_variance=float(obu_var),
        n_clusters=joint.n_clusters,
        n_clusters_total=all_terms.m.size,
        excluded_clusters=excluded,
        n_excluded=all_terms.m.size - joint.n_clusters,
        n_neg=int(terms.m.sum()),
        n_pos=int(terms.n.sum()),
        confidence_level=confidence_level,
        pair_correction=pair_correction,
    )
