"""Brute-force O(N^2) reference of the clustered AUCs, shared by the clustered tests."""

from __future__ import annotations

import numpy as np


def brute_force(y, s, c, *, pair_correction=True, s_population=None):
    """The paper's formulas on the explicit cluster-by-cluster kernel matrix.

    ``s_population`` (default ``s``) are the scores used for the between-cluster terms
    (theta12^, Sigma11, psi_i. in Sigma12, Obuchowski); the within-cluster AUCs phi_i always
    use ``s``. The federated computation is this with binned population scores.
    """
    y = np.asarray(y, dtype=bool)
    s = np.asarray(s, dtype=float)
    sp = s if s_population is None else np.asarray(s_population, dtype=float)
    c = np.asarray(c)
    ids = np.unique(c)

    def kernel_matrix(score):
        x, v = score[~y], score[y]
        k = (x[:, None] < v[None, :]) + 0.5 * (x[:, None] == v[None, :])
        one_neg = (c[~y][:, None] == ids[None, :]).astype(float)
        one_pos = (c[y][:, None] == ids[None, :]).astype(float)
        return one_neg.T @ k @ one_pos, one_neg.sum(0), one_pos.sum(0), k, one_neg, one_pos

    psi, m, n, k, one_neg, one_pos = kernel_matrix(sp)
    psi_own = kernel_matrix(s)[0]

    # Obuchowski (1997), every cluster: placement values and per-cluster sums.
    big_m, big_n = m.sum(), n.sum()
    theta = k.sum() / (big_m * big_n)
    v_ctrl = k.sum(1) / big_n  # each control: fraction of cases above it
    v_case = k.sum(0) / big_m  # each case: fraction of controls below it
    xi = one_neg.T @ v_ctrl
    yi = one_pos.T @ v_case
    i10, i01, n_clu = (m > 0).sum(), (n > 0).sum(), ids.size
    s10 = i10 / ((i10 - 1) * big_m) * np.sum((xi - m * theta) ** 2)
    s01 = i01 / ((i01 - 1) * big_n) * np.sum((yi - n * theta) ** 2)
    s11 = n_clu / (n_clu - 1) * np.sum((xi - m * theta) * (yi - n * theta))
    obu_var = s10 / big_m + s01 / big_n + 2 * s11 / (big_m * big_n)

    u = (m > 0) & (n > 0)
    pu = psi[np.ix_(u, u)]
    mu, nu = m[u], n[u]
    n_i = int(u.sum())
    phi = np.diag(psi_own[np.ix_(u, u)]) / (mu * nu)
    th11 = phi.mean()
    th12 = (pu.sum() - np.trace(pu)) / (mu.sum() * nu.sum())
    if pair_correction:
        th12 *= n_i / (n_i - 1)
    row_mean, col_mean, all_mean = pu.mean(1), pu.mean(0), pu.mean()
    mbar, nbar = mu.mean(), nu.mean()
    sig11 = np.sum(((row_mean + col_mean) / (mbar * nbar) - th12 * (mu / mbar + nu / nbar)) ** 2)
    sig11 /= n_i - 1
    sig22 = np.var(phi, ddof=1)
    sig12 = th12 * np.mean(phi * ((row_mean + col_mean) / all_mean - mu / mbar - nu / nbar))
    sigma = np.array([[sig11, sig12], [sig12, sig22]])

    # theta'12 (eq. 6): every ordered pair of distinct clusters weighted equally, and the
    # Hoeffding variance from each cluster's mean kernel with the others.
    h = pu / (mu[:, None] * nu[None, :])
    off = ~np.eye(n_i, dtype=bool)
    equal_weight = h[off].mean()
    g = ((h * off).sum(1) + (h * off).sum(0)) / (n_i - 1)
    # The authors' R code (auc.cluster), written as it is there: var.12.hat.
    th12_c = (pu.sum() - np.trace(pu)) / (mu.sum() * nu.sum()) * n_i / (n_i - 1)
    big_m_u, big_n_u = mu.sum(), nu.sum()
    authors_var12 = (
        th12_c**2
        * n_i
        * np.sum(
            (
                1 / th12_c / big_m_u / big_n_u * (pu.sum(0) + pu.sum(1))
                - (mu / big_m_u + nu / big_n_u)
            )
            ** 2
        )
        * (n_i / (n_i - 1)) ** 2
    )
    return {
        "population": th12,
        "personalized": th11,
        "obuchowski": theta,
        "obuchowski_var": obu_var,
        "covariance": sigma / n_i,
        "n_clusters": n_i,
        "excluded": tuple(ids[~u].tolist()),
        "between": (pu.sum() - np.trace(pu)) / (mu.sum() * nu.sum() - np.sum(mu * nu)),
        "equal_weight": equal_weight,
        "equal_weight_var": np.var(g, ddof=1) / n_i,
        "authors_var12": authors_var12,
        # Obuchowski's variance with the population AUC's own Sigma11 formula (below).
        "sigma11_at_obuchowski": np.sum(
            (
                (row_mean + col_mean) / (mbar * nbar)
                - pu.sum() / (mu.sum() * nu.sum()) * (mu / mbar + nu / nbar)
            )
            ** 2
        )
        / (n_i - 1),
    }
