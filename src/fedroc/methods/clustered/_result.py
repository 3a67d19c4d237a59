"""Results of the clustered AUCs (pooled and federated share them) and their caveats."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats

from fedroc._results import ResultMixin, format_table, jsonable
from fedroc._validation import check_confidence
from fedroc.exceptions import FedrocWarning, InputError, warn_user
from fedroc.methods.clustered._estimators import (
    JointEstimates,
    ellipse_radius2,
    ellipse_statistic,
)
from fedroc.metrics import wald_ci

__all__ = [
    "INTERVALS",
    "MIN_CLUSTERS",
    "Alternative",
    "ClusteredAUCResult",
    "ClusteredAUCWarning",
    "ObuchowskiResult",
    "check_interval",
    "cluster_ci",
    "clustered_caveats",
]

Alternative = Literal["two-sided", "less", "greater"]
_ALTERNATIVES = ("two-sided", "less", "greater")
Interval = Literal["logit", "t", "wald", "jackknife"]
INTERVALS = ("logit", "t", "wald", "jackknife")


def _kind(interval: str, clusters: int, estimate: float) -> str:
    """Name the interval :func:`cluster_ci` gives ``estimate`` (logit only inside (0, 1))."""
    if interval == "wald" or clusters < 2:
        return "Wald"
    logit = interval != "t" and 0.0 < estimate < 1.0
    return f"t, {clusters - 1} df" + (", logit scale" if logit else "")


def check_interval(interval: Any) -> str:
    """Return ``interval`` if it is one of :data:`INTERVALS`, else an InputError naming it."""
    if interval not in INTERVALS:
        raise InputError(f"interval must be one of {list(INTERVALS)}; got {interval!r}")
    return str(interval)


def cluster_ci(
    estimate: float, se: float, confidence_level: float, clusters: int, interval: str = "logit"
) -> tuple[float, float]:
    """Return the interval of an AUC from a cluster-level SE: t on ``clusters - 1`` df.

    - ``"logit"`` (default): ``expit(logit(estimate) +- q se / (estimate (1 - estimate)))``,
      q of t on ``I - 1`` df: the t interval on the logit scale (the delta method, as
      paper 1 eq. 3 for DeLong's variance). It stays inside (0, 1) and is longer on the
      side of 1/2, where the misses of the symmetric interval fall. An estimate outside
      (0, 1) (the corrected population AUC can exceed 1) has no logit: then ``"t"``.
    - ``"t"``: ``estimate +- q se`` clipped to [0, 1] (fedroc's default before 2026-12-07).
    - ``"wald"``: the same with the normal quantile (the paper's).
    - ``"jackknife"``: as ``"logit"`` here; :class:`ClusteredAUCResult` gives the population
      AUC this interval with the leave-one-cluster-out jackknife SE (pooled analysis only).

    The cluster-level variances (Corollary 6, Obuchowski's) are sums over the clusters
    with ``I - 1`` degrees of freedom, and with few clusters they are too small and the
    estimate is skewed (the misses have the truth below the interval). At 95%, population
    AUCs 0.6, 0.7 and 0.85 (paper 3's allocation, 10,000 replicates a cell;
    scripts/results/clustered_small_sample.md), the population AUC's interval covered
    at 10 / 18 / 30 clusters: normal 0.85-0.87 / 0.88-0.91 / 0.91-0.93, t 0.88-0.91 /
    0.90-0.93 / 0.92-0.94, logit 0.93-0.97 / 0.94 / 0.94, logit with the jackknife SE
    (:class:`ClusteredAUCResult` with ``interval="jackknife"``) 0.96-0.98 / 0.95-0.96 /
    0.95; at 60 and 120 clusters logit 0.94-0.95, within 1% of t's width (3% at a
    population AUC of 0.95, where t covered 0.91-0.93). The personalized
    and Obuchowski's intervals gain alike (personalized at 10 clusters: t 0.87-0.94, logit
    0.95-0.97). Where the within-cluster AUCs are near 1 (population 0.95, personalized
    0.97) every interval of the personalized AUC undercovers below 30 clusters (logit
    0.74 at 10).

    Parameters
    ----------
    estimate, se : float
        The estimate and its standard error.
    confidence_level : float
        In (0, 1).
    clusters : int
        The clusters the SE rests on (I); t needs at least 2, else the normal quantile.
    interval : {"logit", "t", "wald", "jackknife"}, default "logit"

    Returns
    -------
    low, high : float
        NaN when ``estimate`` or ``se`` is not finite.

    Examples
    --------
    >>> [round(v, 4) for v in cluster_ci(0.7, 0.05, 0.95, 11)]
    [0.5785, 0.7986]
    >>> [round(v, 4) for v in cluster_ci(0.7, 0.05, 0.95, 11, "t")]
    [0.5886, 0.8114]
    >>> [round(v, 4) for v in cluster_ci(0.7, 0.05, 0.95, 11, "wald")]
    [0.602, 0.798]
    """
    if interval == "wald" or clusters < 2:
        return wald_ci(estimate, se, confidence_level)
    if not math.isfinite(estimate) or not math.isfinite(se):
        return (float("nan"), float("nan"))
    q = float(stats.t.ppf(0.5 + confidence_level / 2, clusters - 1))
    if interval in ("logit", "jackknife") and 0.0 < estimate < 1.0:
        centre = math.log(estimate / (1.0 - estimate))
        half = q * se / (estimate * (1.0 - estimate))
        return (float(special.expit(centre - half)), float(special.expit(centre + half)))
    return (max(0.0, estimate - q * se), min(1.0, estimate + q * se))


# Below this many clusters with both classes the cluster-level variances are unreliable:
# in scripts/results/clustered_coverage.md ("few clusters") the 95% intervals built on them
# cover 0.80-0.89 at 4 to 6 clusters and 0.88-0.93 at 10.
MIN_CLUSTERS = 10
# Below this many, a note with the coverage of the population AUC's interval at 18 and 30
# clusters (population AUCs 0.6, 0.7 and 0.85; 10,000 replicates each,
# scripts/results/clustered_small_sample.md).
FEW_CLUSTERS = 50
_FEW_CLUSTERS_COVERAGE = {
    "logit": ("t on I - 1 df, logit scale", "0.937-0.941", "0.943-0.944"),
    "t": ("t on I - 1 df", "0.900-0.927", "0.920-0.936"),
    "wald": ("normal quantile", "0.880-0.907", "0.907-0.925"),
    "jackknife": ("t on I - 1 df, logit scale, jackknife SE", "0.954-0.957", "0.953"),
}


class ClusteredAUCWarning(FedrocWarning):
    """A clustered AUC that needs a caveat (out of [0, 1], too few clusters)."""


def clustered_caveats(result: ClusteredAUCResult) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Collect what a reader of ``result`` must know, as (warnings, notes).

    Warnings are also issued as :class:`ClusteredAUCWarning`; notes are only listed.
    """
    population, n_clusters = result.population_auc, result.n_clusters
    obuchowski_auc, obuchowski_se = result.obuchowski_auc, result.obuchowski_se
    delong_se, n_excluded = result.delong_se, result.n_excluded
    estimator = result.population_estimator
    warn: list[str] = []
    note: list[str] = []
    if population > 1.0:
        warn.append(
            f"the population AUC {population:.4f} exceeds 1: it is eq. 5 times I/(I-1) = "
            f"{n_clusters}/{n_clusters - 1} (population_estimator={estimator!r}), "
            "a correction of eq. 5's bias of about -theta12/I that is not bounded by 1 when "
            "the clusters are few and well separated. The fraction of concordant pairs "
            f"among the pairs of different clusters (population_estimator='between', always "
            f"in [0, 1]) is {result.population_between:.4f}; the interval is clipped to [0, 1]."
        )
    if n_clusters < MIN_CLUSTERS:
        z = float(stats.norm.ppf(0.5 + result.confidence_level / 2))
        wider = max(obuchowski_se, delong_se) if math.isfinite(obuchowski_se) else delong_se
        low, high = obuchowski_auc - z * wider, obuchowski_auc + z * wider
        warn.append(
            f"only {n_clusters} clusters hold both classes (fewer than {MIN_CLUSTERS}): the "
            "cluster-level variances (Corollary 6 and Obuchowski's) rest on "
            f"{n_clusters - 1} degrees of freedom and are unreliable (Obuchowski's SE here "
            f"{obuchowski_se:.4f}, DeLong's, which ignores the clusters, {delong_se:.4f}). "
            "Trust the point estimates as descriptions of these clusters, not the intervals "
            "built on cluster-level SEs (95% intervals covered 0.80-0.89 in simulation at "
            "4-6 clusters with the normal quantile; at 10 the population AUC's default, t on "
            "I - 1 df on the logit scale, 0.89-0.97, with t on the AUC scale 0.81-0.91). "
            "Less wrong: Obuchowski's AUC with the larger of the two SEs, "
            f"[{max(0.0, low):.4f}, {min(1.0, high):.4f}] (it covered 0.89-0.93 there); "
            "better: more clusters (scripts/results/clustered_coverage.md, 'few clusters')."
        )
    elif n_clusters < FEW_CLUSTERS:
        # The coverage of the interval the result was built with.
        kind, at18, at30 = _FEW_CLUSTERS_COVERAGE.get(result.interval, _FEW_CLUSTERS_COVERAGE["t"])
        note.append(
            f"{n_clusters} clusters hold both classes (fewer than {FEW_CLUSTERS}): the 95% "
            f"intervals on cluster-level SEs ({kind}) covered {at18} at 18 clusters and "
            f"{at30} at 30 in fedroc's simulation (population AUC 0.6-0.85; "
            "scripts/results/clustered_small_sample.md), "
            + (
                "close to the nominal 0.95 there"
                if result.interval == "jackknife"
                else "so they may be too narrow"
            )
        )
    if n_excluded:
        note.append(
            f"{n_excluded} cluster(s) hold one class only and are left out of the population "
            "and personalized AUCs (theta11 needs both classes in a cluster); Obuchowski's "
            f"estimator (eq. 7) uses every cluster: {obuchowski_auc:.4f} (SE "
            f"{obuchowski_se:.4f})."
        )
    return tuple(warn), tuple(note)


def issue_warnings(messages: Sequence[str]) -> None:
    for message in messages:
        warn_user(message, ClusteredAUCWarning)


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
        Intervals at ``confidence_level`` (see ``interval``), clipped to [0, 1].
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
    population_estimator : {"corrected", "eq5", "between"}
        Which estimator of theta12 ``population_auc`` is.
    sigma11 : {"corollary6", "authors"}
        Divisor of Sigma11: ``I - 1`` (Corollary 6) or ``(I - 1)^2 / I`` (authors' code).
    equal_weight_auc, equal_weight_se : float
        theta'12 of eq. 6 (each pair of clusters weighted equally, whatever their sizes) and
        its standard error; NaN where not computed (federated).
    delong_se : float
        DeLong's SE of the all-pairs AUC (= Obuchowski's estimate), which ignores the
        clusters: a yardstick for the cluster-level SEs when clusters are few.
    population_between : float
        The bounded estimator (population_estimator "between"), whatever the one chosen.
    caveats : tuple of str
        What the numbers cannot be trusted for (also issued as ClusteredAUCWarning).
    notes : tuple of str
        What else a reader should know (clusters left out, ...).
    interval : {"logit", "t", "wald", "jackknife"}
        The intervals: t on ``I - 1`` df for ``I`` clusters on the logit scale (the
        default), on the AUC scale, or normal (Wald, as the paper); see :func:`cluster_ci`.
        ``"jackknife"`` (pooled only): as ``"logit"``, the population AUC's with
        :attr:`population_jackknife_se` in place of Corollary 6's SE.
    population_jackknife_se : float
        Leave-one-cluster-out jackknife SE of the population AUC (NaN where not computed:
        federated, or fewer than 3 clusters).
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
    population_estimator: str = "corrected"
    sigma11: str = "corollary6"
    equal_weight_auc: float = float("nan")
    equal_weight_se: float = float("nan")
    delong_se: float = float("nan")
    population_between: float = float("nan")
    caveats: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    interval: str = "logit"
    population_jackknife_se: float = float("nan")

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_estimates(
        cls,
        joint: JointEstimates,
        *,
        obuchowski_auc: float,
        obuchowski_variance: float,
        n_clusters_total: int,
        excluded_clusters: tuple[Any, ...] | None,
        n_excluded: int,
        n_neg: int,
        n_pos: int,
        confidence_level: float = 0.95,
        population_estimator: str = "corrected",
        sigma11: str = "corollary6",
        equal_weight: tuple[float, float] = (float("nan"), float("nan")),
        delong_se: float = float("nan"),
        population_between: float = float("nan"),
        warn: bool = True,
        interval: str = "logit",
        population_jackknife_variance: float = float("nan"),
    ) -> ClusteredAUCResult:
        """Derive intervals, the equality test and the caveats from estimates and Sigma^.

        ``joint`` holds (theta12^, theta11^), Sigma^ and the clusters used (one replicate);
        ``pair_correction`` is whether the estimator is not ``"eq5"``. With ``warn`` the
        caveats are also issued as :class:`ClusteredAUCWarning`.
        """
        level = check_confidence(confidence_level)
        interval = check_interval(interval)
        population, personalized = float(joint.population), float(joint.personalized)
        cov = np.array(joint.covariance, dtype=np.float64).reshape(2, 2)
        cov.setflags(write=False)
        jk_se = _sqrt(population_jackknife_variance)
        se_pop = jk_se if interval == "jackknife" else _sqrt(cov[0, 0])
        se_pers = _sqrt(cov[1, 1])
        z = _equality_z(population, personalized, cov)
        obu_se = _sqrt(obuchowski_variance)
        result = cls(
            population_auc=population,
            personalized_auc=personalized,
            obuchowski_auc=float(obuchowski_auc),
            obuchowski_se=obu_se,
            covariance=cov,
            population_ci=cluster_ci(population, se_pop, level, joint.n_clusters, interval),
            personalized_ci=cluster_ci(personalized, se_pers, level, joint.n_clusters, interval),
            equality_z=z,
            equality_p=_p_value(z, "two-sided"),
            n_clusters=int(joint.n_clusters),
            n_clusters_total=int(n_clusters_total),
            excluded_clusters=excluded_clusters,
            n_excluded=int(n_excluded),
            n_neg=int(n_neg),
            n_pos=int(n_pos),
            confidence_level=level,
            pair_correction=population_estimator != "eq5",
            population_estimator=population_estimator,
            sigma11=sigma11,
            equal_weight_auc=float(equal_weight[0]),
            equal_weight_se=_sqrt(equal_weight[1]),
            delong_se=float(delong_se),
            population_between=float(population_between),
            interval=interval,
            population_jackknife_se=jk_se,
        )
        caveats, notes = clustered_caveats(result)
        if warn:
            issue_warnings(caveats)
        return replace(result, caveats=caveats, notes=notes)

    # -- standard errors and intervals ----------------------------------------------------
    @property
    def population_se(self) -> float:
        """Standard error of the population AUC (from :attr:`covariance`; NaN if negative)."""
        return _sqrt(self.covariance[0, 0])

    @property
    def personalized_se(self) -> float:
        """Standard error of the personalized AUC (from :attr:`covariance`; NaN if negative)."""
        return _sqrt(self.covariance[1, 1])

    @property
    def _population_interval_se(self) -> float:
        """The SE the population AUC's interval rests on (the jackknife's if asked for)."""
        if self.interval == "jackknife":
            return self.population_jackknife_se
        return self.population_se

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

    @property
    def obuchowski_ci(self) -> tuple[float, float]:
        """Interval of the Obuchowski AUC at :attr:`confidence_level`, clipped to [0, 1]."""
        return self.confidence_interval("obuchowski")

    @property
    def equal_weight_ci(self) -> tuple[float, float]:
        """Interval of the equal-weight AUC at :attr:`confidence_level`, clipped to [0, 1]."""
        return self.confidence_interval("equal_weight")

    def confidence_interval(
        self,
        which: Literal["population", "personalized", "obuchowski", "equal_weight"] = "population",
        confidence_level: float | None = None,
    ) -> tuple[float, float]:
        """Interval ``estimate +- q se`` clipped to [0, 1] (:attr:`interval`: t or normal q).

        Obuchowski's rests on all clusters, the others on the clusters used.
        """
        level = self.confidence_level if confidence_level is None else confidence_level
        pairs = {
            "population": (self.population_auc, self._population_interval_se, self.n_clusters),
            "personalized": (self.personalized_auc, self.personalized_se, self.n_clusters),
            "obuchowski": (self.obuchowski_auc, self.obuchowski_se, self.n_clusters_total),
            "equal_weight": (self.equal_weight_auc, self.equal_weight_se, self.n_clusters),
        }
        if which not in pairs:
            raise InputError(f"which must be one of {sorted(pairs)}; got {which!r}")
        return cluster_ci(*pairs[which][:2], level, pairs[which][2], self.interval)

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
        """Compute statistic (14) at ``point = (theta12, theta11)``; chi-squared(2) under H0."""
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
        """Confidence ellipses of (personalized, population) AUC, as the paper's Figure 5.

        The personalized AUC theta11 is on the x-axis and the population AUC theta12 on
        the y-axis, as in the authors' ``plot.auc.cluster``. Returns the matplotlib Figure;
        with ``path`` it is also saved there.
        """
        from fedroc.methods.clustered.plots import ellipse_figure

        return ellipse_figure(self, path=path, ax=ax, levels=levels, title=title)

    def with_confidence_level(self, confidence_level: float) -> ClusteredAUCResult:
        """Return the same estimates with intervals at another level."""
        level = check_confidence(confidence_level)
        return replace(
            self,
            confidence_level=level,
            population_ci=cluster_ci(
                self.population_auc,
                self._population_interval_se,
                level,
                self.n_clusters,
                self.interval,
            ),
            personalized_ci=cluster_ci(
                self.personalized_auc, self.personalized_se, level, self.n_clusters, self.interval
            ),
        )

    # -- output -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Return the keys of ``fedroc clustered --json`` (docs/json.md).

        ``auc``, ``auc_ci``, ``auc_se`` and ``n`` repeat the population AUC, its interval,
        its SE and ``n_pos + n_neg`` under the names ``fedroc evaluate`` gives them (the
        population AUC is ``auc`` of ``--method clustered``).
        """
        return {
            "auc": jsonable(self.population_auc),
            "auc_ci": jsonable(self.population_ci),
            "auc_se": jsonable(self.population_se),
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
            "n": self.n_neg + self.n_pos,
            "n_neg": self.n_neg,
            "n_pos": self.n_pos,
            "pair_correction": self.pair_correction,
            "population_estimator": self.population_estimator,
            "sigma11": self.sigma11,
            "interval": self.interval,
            "population_se": jsonable(self.population_se),
            "population_jackknife_se": jsonable(self.population_jackknife_se),
            "personalized_se": jsonable(self.personalized_se),
            "obuchowski_ci": jsonable(self.obuchowski_ci),
            "equal_weight_auc": jsonable(self.equal_weight_auc),
            "equal_weight_se": jsonable(self.equal_weight_se),
            "equal_weight_ci": jsonable(self.equal_weight_ci),
            "delong_se": jsonable(self.delong_se),
            "population_between": jsonable(self.population_between),
            "caveats": list(self.caveats),
            "notes": list(self.notes),
        }

    SUMMARY_TITLE = "Population and personalized AUCs (Michael & Tian)"

    def summary_rows(self) -> list[tuple[str, Any]]:
        """Give the ``(quantity, value)`` rows of :meth:`summary` and of ``fedroc clustered``."""
        level = f"{self.confidence_level:.0%}"
        kind = _kind(self.interval, self.n_clusters, self.population_auc)
        jk = ", jackknife SE" if self.interval == "jackknife" else ""
        excluded = str(self.n_excluded)
        if self.excluded_clusters:
            shown = ", ".join(map(str, self.excluded_clusters[:5]))
            more = ", ..." if len(self.excluded_clusters) > 5 else ""
            excluded += f" ({shown}{more})"
        rows: list[tuple[str, Any]] = [
            ("population AUC (theta12)", self.population_auc),
            ("  SE", self.population_se),
            *(
                [("  SE (jackknife over clusters)", self.population_jackknife_se)]
                if math.isfinite(self.population_jackknife_se)
                else []
            ),
            (f"  {level} CI ({kind}{jk})", self.population_ci),
            ("  estimator", _ESTIMATOR_NAMES.get(self.population_estimator, "?")),
            ("personalized AUC (theta11)", self.personalized_auc),
            ("  SE", self.personalized_se),
            (
                f"  {level} CI ({_kind(self.interval, self.n_clusters, self.personalized_auc)})",
                self.personalized_ci,
            ),
            ("correlation of the two estimates", self.correlation),
            ("H0 theta12 = theta11: z", self.equality_z),
            ("  p two-sided", self.equality_p),
            ("  p (H1 theta12 < theta11)", self.equality_test("less")[1]),
            ("  p (H1 theta12 > theta11)", self.equality_test("greater")[1]),
        ]
        if math.isfinite(self.equal_weight_auc):
            rows += [
                ("equal-weight population AUC (theta'12, eq. 6)", self.equal_weight_auc),
                ("  SE", self.equal_weight_se),
            ]
        return [
            *rows,
            ("Obuchowski AUC (eq. 7)", self.obuchowski_auc),
            ("  SE (Obuchowski 1997)", self.obuchowski_se),
            ("  SE (DeLong, clusters ignored)", self.delong_se),
            ("clusters used", self.n_clusters),
            ("clusters with one class (excluded)", excluded),
            ("controls, cases used", f"{self.n_neg}, {self.n_pos}"),
            ("Sigma11 divisor", "I-1" if self.sigma11 == "corollary6" else "(I-1)^2/I"),
        ]

    def summary(self) -> str:
        """Format both AUCs with their intervals, the equality test and Obuchowski's AUC as text."""
        text = format_table(self.summary_rows(), title=self.SUMMARY_TITLE)
        for message in self.caveats:
            text += f"\nCAVEAT: {message}"
        for message in self.notes:
            text += f"\nnote: {message}"
        return text


_ESTIMATOR_NAMES = {
    "corrected": "eq. 5 x I/(I-1)",
    "eq5": "eq. 5",
    "between": "between-cluster pairs",
}


@dataclass(frozen=True, repr=False)
class ObuchowskiResult(ResultMixin):
    """Obuchowski's (1997) clustered AUC (paper eq. 7) and his variance.

    Every cluster counts, also those holding one class only, which the population and
    personalized AUCs of Michael & Tian leave out.

    Attributes
    ----------
    auc, se : float
    ci : (float, float)
        Interval (see ``interval``), clipped to [0, 1].
    delong_se : float
        DeLong's SE of the same AUC, ignoring the clusters.
    n_clusters : int
    n_clusters_with_neg, n_clusters_with_pos : int
        I10 and I01 of Obuchowski's variance.
    n_neg, n_pos : int
    confidence_level : float
    caveats : tuple of str
    interval : {"logit", "t", "wald", "jackknife"}
        The interval: t on ``I - 1`` df on the logit scale (default), on the AUC scale,
        or normal; ``"jackknife"`` is ``"logit"`` here (Obuchowski's variance is kept).
    """

    auc: float
    se: float
    ci: tuple[float, float]
    delong_se: float
    n_clusters: int
    n_clusters_with_neg: int
    n_clusters_with_pos: int
    n_neg: int
    n_pos: int
    confidence_level: float = 0.95
    caveats: tuple[str, ...] = ()
    interval: str = "logit"

    SUMMARY_TITLE = "Obuchowski's clustered AUC"

    def to_dict(self) -> dict[str, Any]:
        """Return the keys of ``fedroc clustered --estimator obuchowski --json``.

        The fields, then the same values under the names the other commands give them:
        ``auc_se``, ``auc_ci`` (``se``, ``ci``), ``n`` (``n_pos + n_neg``) and
        ``obuchowski_auc``, ``obuchowski_se``, ``obuchowski_ci`` (as in the joint analysis).
        """
        out = super().to_dict()
        out["auc_se"], out["auc_ci"] = out["se"], out["ci"]
        out["n"] = self.n_neg + self.n_pos
        out["obuchowski_auc"], out["obuchowski_se"] = out["auc"], out["se"]
        out["obuchowski_ci"] = out["ci"]
        return out

    def summary_rows(self) -> list[tuple[str, Any]]:
        """Give the ``(quantity, value)`` rows of :meth:`summary` and of ``fedroc clustered``."""
        return [
            ("Obuchowski AUC (eq. 7)", self.auc),
            ("  SE (Obuchowski 1997)", self.se),
            (
                f"  {self.confidence_level:.0%} CI "
                f"({_kind(self.interval, self.n_clusters, self.auc)})",
                self.ci,
            ),
            ("  SE (DeLong, clusters ignored)", self.delong_se),
            ("clusters", self.n_clusters),
            (
                "  with controls, with cases",
                f"{self.n_clusters_with_neg}, {self.n_clusters_with_pos}",
            ),
            ("controls, cases", f"{self.n_neg}, {self.n_pos}"),
        ]

    def summary(self) -> str:
        """Format the Obuchowski AUC, its SEs and interval, the cluster counts and caveats."""
        text = format_table(self.summary_rows(), title=self.SUMMARY_TITLE)
        for message in self.caveats:
            text += f"\nCAVEAT: {message}"
        return text


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
