"""Per-cluster pair counts in O(N log N): the one computation every clustered AUC needs.

For the AUC kernel ``psi(x, y) = 1{x < y} + 1/2 1{x = y}`` (x a control, y a case) the
estimators of Michael & Tian need, for every cluster i,

- ``m_i``, ``n_i``: its controls (negatives) and cases (positives);
- ``psi_ii``: the kernel summed over its own (control, case) pairs;
- ``row_i = sum_j psi_ij``: its controls against every case of the sample;
- ``col_i = sum_j psi_ji``: every control of the sample against its cases.

All four come from one rule: for each observation, count the observations of the other
class in the same *group* that it beats, ties counting 1/2
(:func:`fedroc.metrics.beaten_counts`, the pair counting of fedroc's counting core). With the
group set to the cluster this gives ``psi_ii``; with the group set to the whole sample (or
to a simulation replicate) it gives ``row_i`` and ``col_i``. ``np.bincount`` then sums them
per cluster: no loop over pairs of observations or of clusters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fedroc.metrics import beaten_counts

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def dense_rank(score: FloatArray) -> IntArray:
    """0-based rank of each score among the distinct scores (equal scores share a rank)."""
    _, inverse = np.unique(score, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64)


def sum_by(codes: NDArray[np.int64], weights: FloatArray, n_codes: int) -> FloatArray:
    """``out[c] = sum of weights[codes == c]`` for ``c`` in ``range(n_codes)``."""
    return np.asarray(np.bincount(codes, weights=weights, minlength=n_codes), dtype=np.float64)


@dataclass(frozen=True)
class ClusterTerms:
    """Per-cluster sums behind the clustered AUCs (arrays of length n_clusters).

    Attributes
    ----------
    m, n : ndarray of float
        Controls and cases of each cluster.
    within : ndarray of float
        ``psi_ii``: kernel summed over the cluster's own (control, case) pairs.
    row : ndarray of float
        ``sum_j psi_ij``: the cluster's controls against every case of the cluster's group.
    col : ndarray of float
        ``sum_j psi_ji``: every control of the group against the cluster's cases.
    """

    m: FloatArray
    n: FloatArray
    within: FloatArray
    row: FloatArray
    col: FloatArray


def cluster_terms(
    label: NDArray[np.bool_],
    score: FloatArray,
    cluster: IntArray,
    n_clusters: int,
    *,
    group: IntArray | None = None,
    rank: IntArray | None = None,
) -> ClusterTerms:
    """Per-cluster counts and kernel sums in O(N log N).

    Parameters
    ----------
    label, score : arrays of shape (N,)
    cluster : ndarray of int, shape (N,)
        Cluster code of each observation, in ``range(n_clusters)``.
    n_clusters : int
    group : ndarray of int, shape (N,), optional
        Group (simulation replicate) of each observation; ``row`` and ``col`` only pair
        observations of one group. Every cluster must lie inside one group. None: one group.
    rank : ndarray of int, optional
        Dense ranks of ``score`` if already known.
    """
    if rank is None:
        rank = dense_rank(score)
    within_counts = beaten_counts(label, rank, cluster)
    cross_counts = (
        within_counts if _one_group(cluster, group) else beaten_counts(label, rank, group)
    )
    pos = label
    neg = ~label
    cases = cluster[pos]
    controls = cluster[neg]
    return ClusterTerms(
        m=np.bincount(controls, minlength=n_clusters).astype(np.float64),
        n=np.bincount(cases, minlength=n_clusters).astype(np.float64),
        within=sum_by(cases, within_counts[pos], n_clusters),
        row=sum_by(controls, cross_counts[neg], n_clusters),
        col=sum_by(cases, cross_counts[pos], n_clusters),
    )


def weighted_beats(label: NDArray[np.bool_], rank: IntArray, weight: FloatArray) -> FloatArray:
    """For each observation, the summed weight of the other-class observations it beats.

    Like :func:`beaten_counts` over one group, but each observation counts with its weight
    (ties 1/2): a case gets ``sum_k w_k psi(x_k, y)`` over the controls k, a control
    ``sum_l w_l psi(x, y_l)`` over the cases l (the counting core's weighted pair counts).
    """
    return beaten_counts(label, rank, weight=weight)


def equal_weight_terms(
    label: NDArray[np.bool_], rank: IntArray, cluster: IntArray, terms: ClusterTerms
) -> tuple[FloatArray, FloatArray]:
    """Per-cluster sums behind theta'12 (eq. 6), each cluster pair weighted equally.

    With every control of cluster i weighted ``1 / m_i`` and every case ``1 / n_i``:
    ``wrow_i = sum_j psi_ij / n_j`` (the cluster's controls against every cluster's cases)
    and ``wcol_i = sum_j psi_ji / m_j``, both including ``j = i``. Every cluster must hold
    both classes.
    """
    weight = np.where(label, 1.0 / terms.n[cluster], 1.0 / terms.m[cluster])
    beats = weighted_beats(label, rank, weight)
    n_clusters = terms.m.size
    wrow = sum_by(cluster[~label], beats[~label], n_clusters)
    wcol = sum_by(cluster[label], beats[label], n_clusters)
    return wrow, wcol


def _one_group(cluster: IntArray, group: IntArray | None) -> bool:
    # Only a single cluster per group makes the within and cross counts coincide.
    if group is None:
        return bool(cluster.size == 0 or (cluster == cluster[0]).all())
    return bool(np.array_equal(cluster, group))
