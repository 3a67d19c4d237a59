"""``clustered_auc``: population, personalized and Obuchowski AUCs of one clustered table."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedroc._docs import fill_doc
from fedroc._validation import as_1d, check_binary, check_confidence, missing_mask
from fedroc.exceptions import InputError
from fedroc.methods.clustered._core import (
    cluster_terms,
    dense_rank,
    equal_weight_terms,
)
from fedroc.methods.clustered._estimators import (
    PopulationEstimator,
    Sigma11Divisor,
    check_population_estimator,
    check_sigma11,
    equal_weight_estimate,
    jackknife_population,
    joint_estimates,
    obuchowski,
    population_estimates,
)
from fedroc.methods.clustered._result import (
    Alternative,
    ClusteredAUCResult,
    Interval,
    ObuchowskiResult,
    check_interval,
    cluster_ci,
    issue_warnings,
)
from fedroc.metrics import delong

__all__ = [
    "Alternative",
    "ClusteredAUCResult",
    "clustered_auc",
    "encode_clusters",
    "obuchowski_auc",
    "resolve_estimator",
]


def encode_clusters(cluster: ArrayLike, n: int) -> tuple[NDArray[np.int64], NDArray[Any]]:
    """Codes ``0..K-1`` for the cluster ids and the sorted distinct ids.

    Refuses a length other than ``n``, missing values and ids that cannot be ordered.
    """
    if cluster is None:  # was "cluster must be one-dimensional; got an array of shape ()"
        raise InputError("cluster is None; give one cluster id per row (the patient of each row)")
    c = as_1d(cluster, "cluster")
    if c.shape[0] != n:
        raise InputError(
            f"cluster has {c.shape[0]} elements but y_true has {n}; they must have the same length"
        )
    if c.dtype.kind == "f" and np.isnan(c).any():
        bad = int(np.flatnonzero(np.isnan(c))[0])
        raise InputError(f"cluster contains NaN; first at index {bad}")
    if c.dtype.kind == "O":
        # pandas reads an empty id among strings as NaN (pd.NA in a nullable column): it was
        # refused as "cluster mixes id types that cannot be compared".
        missing = missing_mask(c)
        if missing.any():
            bad = int(np.flatnonzero(missing)[0])
            n_missing = int(missing.sum())
            what = "a missing value" if n_missing == 1 else f"{n_missing} missing values"
            raise InputError(f"cluster contains {what}; first at index {bad}: {c[bad]!r}")
    try:
        ids, codes = np.unique(c, return_inverse=True)
    except TypeError:
        raise InputError("cluster mixes id types that cannot be compared") from None
    return codes.reshape(-1).astype(np.int64), ids


def resolve_estimator(pair_correction: bool, population_estimator: str | None) -> str:
    """Resolve the population estimator from the two ways of naming it (refusing contradictions)."""
    if population_estimator is None:
        return "corrected" if pair_correction else "eq5"
    check_population_estimator(population_estimator)
    if not pair_correction and population_estimator != "eq5":
        raise InputError(
            f"pair_correction=False means population_estimator='eq5'; got "
            f"population_estimator={population_estimator!r} with it"
        )
    return population_estimator


def clustered_auc(
    y_true: ArrayLike,
    y_score: ArrayLike,
    cluster: ArrayLike,
    *,
    pos_label: Any = None,
    confidence_level: float = 0.95,
    pair_correction: bool = True,
    population_estimator: PopulationEstimator | None = None,
    sigma11: Sigma11Divisor = "corollary6",
    interval: Interval = "logit",
) -> ClusteredAUCResult:
    """Estimate population, personalized and Obuchowski AUCs of clustered data, with inference.

    Implements Michael & Tian, "The population and personalized AUCs": the estimators of
    section 2 (eq. 5 and theta11^), Sigma^ of Corollary 6, intervals (t on I - 1 df on the
    logit scale by default, or the paper's Wald; ``interval``), the confidence ellipse (14)
    and the z-test
    of H0: theta12 = theta11 (section 6.3); the alternative population AUC theta'12 of
    eq. 6 (each pair of clusters weighted equally) with its SE; and Obuchowski's (1997)
    estimator (eq. 7) with his variance, beside DeLong's SE of the same AUC. O(N log N)
    for N observations.

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
    population_estimator : {"corrected", "eq5", "between"}, optional
        Names the estimator of theta12 directly (where ``pair_correction`` is a parameter
        too, this one wins over it):
        ``"corrected"`` (eq. 5 x I/(I-1), the default), ``"eq5"``, or ``"between"``, the
        fraction of concordant pairs among pairs of different clusters, which always lies
        in [0, 1] (the corrected estimator can exceed 1 with few clusters: the result then
        warns and gives this one). See
        :func:`~fedroc.methods.clustered._estimators.population_estimates`.
    sigma11 : {"corollary6", "authors"}, default "corollary6"
        Sigma11 divided by ``I - 1`` as Corollary 6 prints it, or by ``(I - 1)^2 / I`` as
        the authors' R code and their Table 1 (``I / (I - 1)`` times larger).
    interval : {"logit", "t", "wald", "jackknife"}, default "logit"
        The intervals: t on ``I - 1`` degrees of freedom (the variances are sums over
        ``I`` clusters) on the logit scale (``"logit"``), or on the AUC scale clipped to
        [0, 1] (``"t"``, the default before 2026-12-07), or the normal quantile (Wald, as
        the paper). ``"jackknife"``: as ``"logit"``, the population AUC's with the
        leave-one-cluster-out jackknife SE (``population_jackknife_se``, always
        reported), which covers best with few clusters; the federated method does not
        offer it (its sites would have to release two more sums). See
        :func:`~fedroc.methods.clustered._result.cluster_ci` and
        scripts/results/clustered_small_sample.md for the coverage of each.

    Returns
    -------
    ClusteredAUCResult
        With ``caveats`` (also issued as :class:`ClusteredAUCWarning`) when the population
        AUC exceeds 1 or fewer than 10 clusters hold both classes.

    Raises
    ------
    InputError
        If fewer than two clusters have both classes (:func:`obuchowski_auc` needs none).
        Clusters with one class are left out of the joint analysis and listed in
        ``excluded_clusters``; Obuchowski's estimator uses them.

    Examples
    --------
    >>> r = clustered_auc([0, 1, 0, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.2, 0.9], [1, 1, 2, 2, 3, 3])
    >>> round(r.personalized_auc, 3), round(r.population_auc, 3)
    (1.0, 1.0)
    >>> round(clustered_auc([0, 1, 0, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.2, 0.9], [1, 1, 2, 2, 3, 3],
    ...                     pair_correction=False).population_auc, 3)
    0.667
    """
    estimator = resolve_estimator(pair_correction, population_estimator)
    check_sigma11(sigma11)
    check_interval(interval)
    y, s = check_binary(y_true, y_score, pos_label=pos_label)
    codes, ids = encode_clusters(cluster, y.size)
    level = check_confidence(confidence_level)
    n_total = ids.size
    usable = _usable(y, codes, n_total)
    n_usable = int(np.count_nonzero(usable))
    if n_usable < 2:
        raise InputError(
            f"clustered AUCs need at least 2 clusters with both classes; got {n_usable} "
            f"(of {n_total} cluster(s)"
            + (", each of one row" if n_total == y.size else "")
            + "). Obuchowski's estimator needs none: "
            "obuchowski_auc(...) or fedroc clustered --estimator obuchowski"
        )
    rank = dense_rank(s)
    all_terms = cluster_terms(y, s, codes, n_total, rank=rank)
    if n_usable == n_total:
        terms, y_u, rank_u, codes_u = all_terms, y, rank, codes
    else:
        keep = usable[codes]
        new_code = np.cumsum(usable) - 1
        y_u, rank_u, codes_u = y[keep], rank[keep], new_code[codes[keep]]
        terms = cluster_terms(y_u, s[keep], codes_u, n_usable, rank=rank_u)
    wrow, wcol = equal_weight_terms(y_u, rank_u, codes_u, terms)
    equal = equal_weight_estimate(terms.m, terms.n, terms.within, wrow, wcol)
    with np.errstate(all="ignore"):
        delong_se = delong(y, s).se
    joint = joint_estimates(
        terms.m,
        terms.n,
        terms.within,
        terms.row,
        terms.col,
        population_estimator=estimator,  # type: ignore[arg-type]
        sigma11=sigma11,
    )
    obu_auc, obu_var = obuchowski(all_terms.m, all_terms.n, all_terms.row, all_terms.col)
    between = population_estimates(terms.m, terms.n, terms.within, terms.row)["between"]
    return ClusteredAUCResult.from_estimates(
        joint,
        obuchowski_auc=float(obu_auc),
        obuchowski_variance=float(obu_var),
        n_clusters_total=n_total,
        excluded_clusters=tuple(v.item() if hasattr(v, "item") else v for v in ids[~usable]),
        n_excluded=n_total - joint.n_clusters,
        n_neg=int(terms.m.sum()),
        n_pos=int(terms.n.sum()),
        confidence_level=level,
        population_estimator=estimator,
        sigma11=sigma11,
        equal_weight=(float(equal[0]), float(equal[1])),
        delong_se=float(delong_se),
        population_between=float(between),
        interval=interval,
        population_jackknife_variance=float(
            jackknife_population(
                terms.m,
                terms.n,
                terms.within,
                terms.row,
                terms.col,
                estimator,  # type: ignore[arg-type]
            )
        ),
    )


def _usable(y: NDArray[np.bool_], codes: NDArray[np.int64], n_total: int) -> NDArray[np.bool_]:
    n_case = np.bincount(codes, weights=y, minlength=n_total)
    n_all = np.bincount(codes, minlength=n_total)
    return (n_case > 0) & (n_case < n_all)


@fill_doc
def obuchowski_auc(
    y_true: ArrayLike,
    y_score: ArrayLike,
    cluster: ArrayLike,
    *,
    pos_label: Any = None,
    confidence_level: float = 0.95,
    interval: Interval = "logit",
) -> ObuchowskiResult:
    """Obuchowski's (1997) clustered AUC (paper eq. 7) with his variance, every cluster used.

    Unlike the population and personalized AUCs of :func:`clustered_auc`, it needs no
    cluster holding both classes: a cluster of controls only (a patient without disease)
    still contributes its controls. It is the pooled AUC of all (control, case) pairs, with
    a variance that accounts for the clustering (NOTES.md, section 3).

    Parameters
    ----------
    {y_true}
    {y_score}
    cluster : array-like of shape (n_samples,)
        Cluster id of each row (e.g. the patient); rows of a cluster are correlated.
    {pos_label}
    {confidence_level}
    interval : {{"logit", "t", "wald", "jackknife"}}, default "logit"
        t on ``I - 1`` degrees of freedom for ``I`` clusters on the logit scale, on the
        AUC scale, or the normal quantile, as in :func:`clustered_auc` (``"jackknife"`` is
        ``"logit"`` here: Obuchowski's variance is kept).

    Returns
    -------
    ObuchowskiResult
        The AUC, Obuchowski's variance and interval, and the numbers of clusters with
        controls and with cases.

    Raises
    ------
    InputError
        If fewer than two clusters hold controls or fewer than two hold cases (the
        variance divides by ``I10 - 1`` and ``I01 - 1``), or if there are fewer than two
        clusters.

    Examples
    --------
    >>> r = obuchowski_auc([0, 0, 1, 1, 0, 1], [0.1, 0.3, 0.6, 0.8, 0.2, 0.7], [1, 1, 2, 2, 3, 3])
    >>> r.auc, r.n_clusters_with_neg, r.n_clusters_with_pos
    (1.0, 2, 2)
    """
    y, s = check_binary(y_true, y_score, pos_label=pos_label)
    codes, ids = encode_clusters(cluster, y.size)
    level = check_confidence(confidence_level)
    check_interval(interval)
    terms = cluster_terms(y, s, codes, ids.size)
    i10 = int(np.count_nonzero(terms.m > 0))
    i01 = int(np.count_nonzero(terms.n > 0))
    if ids.size < 2 or i10 < 2 or i01 < 2:
        raise InputError(
            "Obuchowski's variance needs at least 2 clusters holding controls and 2 holding "
            f"cases; got {i10} and {i01} (of {ids.size} cluster(s))"
        )
    auc, var = obuchowski(terms.m, terms.n, terms.row, terms.col)
    se = float(np.sqrt(var)) if var >= 0 else float("nan")
    with np.errstate(all="ignore"):
        delong_se = delong(y, s).se
    caveats: tuple[str, ...] = ()
    if ids.size < 10:
        caveats = (
            f"only {ids.size} clusters: Obuchowski's variance rests on {ids.size - 1} degrees "
            f"of freedom and is unreliable (SE {se:.4f}; DeLong's, clusters ignored, "
            f"{delong_se:.4f}); see clustered_auc's caveat on few clusters",
        )
        issue_warnings(caveats)
    return ObuchowskiResult(
        auc=float(auc),
        se=se,
        ci=cluster_ci(float(auc), se, level, int(ids.size), interval),
        delong_se=float(delong_se),
        n_clusters=int(ids.size),
        n_clusters_with_neg=i10,
        n_clusters_with_pos=i01,
        n_neg=int(terms.m.sum()),
        n_pos=int(terms.n.sum()),
        confidence_level=level,
        caveats=caveats,
        interval=interval,
    )
