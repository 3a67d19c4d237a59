"""Analyst side of paper 5, the tree: consistency, its noise, leaf masses and quantiles.

A released tree holds levels 1..h of a hierarchical histogram (``b ** l`` bins at level
l; the root is not released). Under DP every node carries independent noise of one
variance (:func:`node_noise_variance`). Hay et al.'s consistency step
(:func:`consistent_tree`) is linear, so the noise of anything linear computed from its
output follows exactly from its adjoint (:func:`consistent_tree_adjoint`): the variance of
a linear statistic (:func:`linear_noise_variance`) and the covariance of one level
(:func:`level_noise_covariance`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedroc._docs import fill_doc
from fedroc._validation import FloatArray
from fedroc.exceptions import InputError
from fedroc.privacy import discrete_laplace_variance

ArrayLikeF = NDArray[Any] | Sequence[float]


def node_noise_variance(noise: str, eps_level: float, draws: float = 1.0) -> float:
    """Variance of the noise on one released node.

    ``draws`` is the number of full noise draws the node holds: 1 for distributed DP
    with every site in the sum, (sites in the sum) / (shares per draw) after dropouts,
    the number of sites under local DP (each adds a full draw).
    """
    if noise == "discrete":
        return draws * discrete_laplace_variance(epsilon=eps_level)
    return draws * 2.0 / eps_level**2


def _weights(height: int, branching: int) -> list[float]:
    # Weight of a node's own noisy count against its children's sum, for a node whose
    # subtree has i levels: (b^i - b^(i-1)) / (b^i - 1) (Hay et al. 2010, section 4).
    b = branching
    sizes = [b ** (height - j) for j in range(height)]  # b^i for the subtree under level j
    return [(size - size // b) / (size - 1) for size in sizes]


@fill_doc
def consistent_tree(levels: Sequence[ArrayLikeF], branching: int) -> list[FloatArray]:
    """Hay et al.'s consistent estimate of a noisy hierarchical histogram.

    ``levels[j]`` holds the ``branching ** (j + 1)`` noisy counts of level j + 1 (the root
    is not released). Bottom-up weighted averaging, then top-down mean consistency; the
    result is consistent (each node equals the sum of its children) and, for consistent
    input, equal to it. Linear in the input: it is the least-squares fit of leaf counts to
    the released levels.

    Parameters
    ----------
    {tree_levels}
    {branching}

    Returns
    -------
    list of ndarray of float64
        The consistent levels, shaped as ``levels``.
    """
    b = branching
    h = len(levels)
    a = _weights(h, b)
    z = [np.asarray(level, dtype=np.float64).copy() for level in levels]
    for j in range(h - 2, -1, -1):
        z[j] = a[j] * z[j] + (1.0 - a[j]) * z[j + 1].reshape(-1, b).sum(axis=1)
    x = [z[0]]
    for j in range(1, h):
        gap = (x[j - 1] - z[j].reshape(-1, b).sum(axis=1)) / b
        x.append(z[j] + np.repeat(gap, b))
    return x


@fill_doc
def consistent_tree_adjoint(
    grads: Sequence[NDArray[Any]], branching: int, height: int | None = None
) -> list[FloatArray]:
    """Apply the transpose of :func:`consistent_tree` to a batch of cotangents.

    ``grads[j]`` has shape ``(batch, b ** (j + 1))``: weights on the consistent level
    j + 1. Returns, per released level, the weights of each noisy node in the weighted
    sums ``sum_j grads[j] . x[j]``, so that their noise variance is ``sigma^2`` times the
    sum of squares of the result.

    With ``height`` greater than ``len(grads)`` the tree is cut below level
    ``len(grads)``: the last returned level is then the weight of the bottom-up estimate
    ``z`` of that level (the weighted average of its whole subtree), whose nodes are
    independent with variance ``sigma^2 * subtree_variance_factor(...)``.

    Parameters
    ----------
    grads : sequence of ndarray
        ``grads[j]`` of shape ``(batch, branching ** (j + 1))``.
    {branching}
    height : int, optional
        Height of the whole tree; default ``len(grads)``.

    Returns
    -------
    list of ndarray of float64
        Per released level, shape ``(batch, branching ** (j + 1))``.
    """
    b = branching
    d = len(grads)
    a = _weights(d if height is None else height, b)
    gx = [np.array(g, dtype=np.float64, copy=True) for g in grads]
    gz = [np.zeros_like(g) for g in gx]
    for j in range(d - 1, 0, -1):
        # x[j] = z[j] + R((x[j-1] - S z[j]) / b); the adjoint of R (repeat) is S (sum).
        g = gx[j]
        gz[j] += g
        sg = g.reshape(g.shape[0], -1, b).sum(axis=2) / b
        gx[j - 1] += sg
        gz[j] -= np.repeat(sg, b, axis=1)
    gz[0] += gx[0]
    gy = [np.zeros_like(g) for g in gx]
    for j in range(d - 1):
        # z[j] = a y[j] + (1 - a) S z[j+1], done top level last in the forward pass.
        gy[j] += a[j] * gz[j]
        gz[j + 1] += (1.0 - a[j]) * np.repeat(gz[j], b, axis=1)
    gy[d - 1] += gz[d - 1]
    return gy


def subtree_variance_factor(height: int, branching: int, level: int) -> float:
    """Variance / sigma^2 of a node's bottom-up estimate ``z`` at ``level`` (1-based)."""
    a = _weights(height, branching)
    w = 1.0
    for j in range(height - 2, level - 2, -1):
        w = a[j] ** 2 + (1.0 - a[j]) ** 2 * branching * w
    return w


@fill_doc
def linear_noise_variance(
    leaf_weights: NDArray[Any], branching: int, height: int, *, post_processing: bool = True
) -> FloatArray:
    """Noise variance / sigma^2 of ``leaf_weights @ leaves`` (one row per statistic).

    ``leaves`` are the consistent leaves (or, without post-processing, the noisy leaves
    themselves).

    Parameters
    ----------
    leaf_weights : ndarray of shape (n_statistics, n_leaves) or (n_leaves,)
        Weights of each statistic on the leaves.
    {branching}
    height : int
        Levels of the released tree.
    post_processing : bool, default True
        The leaves are the consistent estimate (:func:`consistent_tree`) of the noisy tree.

    Returns
    -------
    ndarray of float64, shape (n_statistics,)
        Each statistic's noise variance divided by the per-node noise variance.
    """
    w = np.atleast_2d(np.asarray(leaf_weights, dtype=np.float64))
    if not post_processing:
        return np.asarray((w**2).sum(axis=1))
    grads = [np.zeros((w.shape[0], branching**level)) for level in range(1, height + 1)]
    grads[-1] = w
    out = consistent_tree_adjoint(grads, branching)
    return np.asarray(sum((g**2).sum(axis=1) for g in out))


@functools.lru_cache(maxsize=64)
def level_noise_covariance(
    branching: int, height: int, level: int, *, post_processing: bool = True
) -> FloatArray:
    """Noise covariance / sigma^2 of the ``b ** level`` consistent counts of one level.

    Computed on the tree cut at ``level`` (the subtrees below enter through their
    bottom-up estimates), so it costs ``O(b ** (2 level))`` whatever the height.
    """
    size = branching**level
    if not post_processing:
        return np.eye(size)
    grads = [np.zeros((size, branching**j)) for j in range(1, level + 1)]
    grads[-1] = np.eye(size)
    g = consistent_tree_adjoint(grads, branching, height)
    cov = sum(gj @ gj.T for gj in g[:-1]) if level > 1 else np.zeros((size, size))
    w = subtree_variance_factor(height, branching, level)
    out = np.asarray(cov + w * (g[-1] @ g[-1].T))
    out.flags.writeable = False  # cached: shared by every caller
    return out


@fill_doc
def tree_leaf_masses(levels: Sequence[NDArray[Any]], branching: int) -> FloatArray:
    """Non-negative leaf masses of a (noisy) tree, split top-down.

    The total is the sum of level 1 (the estimated class size); each node's mass is split
    among its children in proportion to their counts clipped at 0 (evenly if all are
    empty). For an exact tree these are the leaf counts. Under DP this keeps the totals of
    the coarse, reliable levels: clipping the noisy leaves themselves at 0 would add
    roughly ``0.4 sd`` of noise per empty leaf to the class size.

    Parameters
    ----------
    {tree_levels, branching}

    Returns
    -------
    ndarray of float64, shape (branching ** h,)
        Non-negative leaf masses summing to the (clipped) level-1 total.
    """
    b = branching
    first = np.asarray(levels[0], dtype=np.float64)
    mass = np.array([max(float(first.sum()), 0.0)])
    for level in levels:
        children = np.maximum(np.asarray(level, dtype=np.float64), 0.0).reshape(-1, b)
        total = children.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(total > 0, children / total, 1.0 / b)
        mass = (mass[:, None] * share).ravel()
    return mass


@fill_doc
def tree_quantiles(
    levels: Sequence[NDArray[Any]],
    branching: int,
    fractions: FloatArray,
    lo: float = 0.0,
    hi: float = 1.0,
) -> FloatArray:
    """Quantiles at ``fractions`` from the tree (all fractions at once).

    Descends the tree to the leaf holding each target fraction (the leaf masses of
    :func:`tree_leaf_masses`, so every level's children share their parent's mass), then
    interpolates linearly inside the leaf (scores uniform within a leaf; the reference
    code returned the leaf's left edge). The 0- and 1-quantiles are the lower edge of the
    first and the upper edge of the last non-empty leaf.

    Parameters
    ----------
    {tree_levels}
    {branching}
    {quantile_fractions}
    lo, hi : float, default 0.0 and 1.0
        The public score range ``[lo, hi]``, divided into leaves of equal width.

    Returns
    -------
    ndarray of float64, shape of ``fractions``
        The quantiles, in ``[lo, hi]``.

    Raises
    ------
    InputError
        The tree holds no mass (no quantile exists).
    """
    mass = tree_leaf_masses(levels, branching)
    total = mass.sum()
    if not total > 0:
        raise InputError("the aggregated histogram is empty: no quantile exists")
    frac = mass / total
    cdf = np.cumsum(frac)
    nonempty = np.flatnonzero(frac > 0)
    tau = np.asarray(fractions, dtype=np.float64)
    k = np.searchsorted(cdf, tau, side="left")
    k = np.clip(k, nonempty[0], nonempty[-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        within = np.where(frac[k] > 0, (tau - (cdf[k] - frac[k])) / frac[k], 0.0)
    width = (hi - lo) / mass.size
    return lo + width * (k + np.clip(within, 0.0, 1.0))


def split_levels(vector: NDArray[Any], branching: int, height: int) -> list[FloatArray]:
    """Split the released vector (levels 1..h concatenated) into a list of levels."""
    out, offset = [], 0
    for level in range(1, height + 1):
        size = branching**level
        out.append(np.asarray(vector[offset : offset + size], dtype=np.float64))
        offset += size
    return out


def total_noise_sd(branching: int, height: int, sigma2: float, post_processing: bool) -> float:
    """Noise SD of a class total (the sum of the consistent level 1)."""
    ones = np.ones((1, branching))
    if not post_processing:
        return math.sqrt(sigma2 * branching)
    grads = [ones] + [np.zeros((1, branching**j)) for j in range(2, height + 1)]
    g = consistent_tree_adjoint(grads, branching)
    return math.sqrt(sigma2 * float(sum((x**2).sum() for x in g)))
