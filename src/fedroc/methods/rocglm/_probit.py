"""Probit regression on grouped binomial data by Fisher scoring (R ``glm``'s IRLS).

The ROC-GLM response ``U_ij`` is binary with one covariate row per threshold ``t_j``, so
the rows sharing a threshold collapse into one binomial row (successes, trials): the
log-likelihood, its score vector and the Fisher information are sums over thresholds,
O(n_T) per iteration whatever the number of positives. The same sums add up over sites
(paper 1, eq. 6-7), which is what the distributed fit sends.

Every function here takes a *batch* of fits: ``gamma`` has shape (R, 2) and
``successes``/``trials`` shape (R, n_T) (or broadcast to it), so that the analyst can run
several fits (the simulation-extrapolation refits) in the same communication rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

__all__ = ["FisherParts", "ScoringTrace", "fisher_scoring", "probit_parts"]

FloatArray = NDArray[np.float64]

# R glm.control(): epsilon = 1e-8, maxit = 25.
DEFAULT_TOL = 1e-8
DEFAULT_MAX_ITER = 25
# R glm.fit halves a step whose deviance is not finite; it gives up after this many halvings.
_MAX_HALVINGS = 30


@dataclass(frozen=True)
class FisherParts:
    """Log-likelihood, score vector and expected Fisher information of a batch of fits.

    Shapes: ``loglik`` (R,), ``score`` (R, 2), ``information`` (R, 2, 2). The log-likelihood
    is that of the expanded binary table (one Bernoulli row per positive and threshold), so
    ``-2 * loglik`` is the deviance R's ``glm`` reports for the reference code's weighted
    data frame (weights included).
    """

    loglik: FloatArray
    score: FloatArray
    information: FloatArray

    def __add__(self, other: FisherParts) -> FisherParts:
        return FisherParts(
            self.loglik + other.loglik,
            self.score + other.score,
            self.information + other.information,
        )

    @classmethod
    def zeros(cls, n_fits: int) -> FisherParts:
        return cls(np.zeros(n_fits), np.zeros((n_fits, 2)), np.zeros((n_fits, 2, 2)))


def _log_ndtr_pair(eta: FloatArray) -> tuple[FloatArray, FloatArray]:
    return special.log_ndtr(eta), special.log_ndtr(-eta)


def probit_parts(
    x: FloatArray, successes: FloatArray, trials: FloatArray, gamma: FloatArray
) -> FisherParts:
    """Parts of probit Fisher scoring for ``P(U = 1) = Phi(g1 + g2 x)``.

    Parameters
    ----------
    x : ndarray, shape (n_T,) or (R, n_T)
        Covariate ``Phi^-1(t_j)`` of each row.
    successes, trials : ndarray, shape (n_T,) or (R, n_T)
        Binomial counts per row (rows with zero trials contribute nothing).
    gamma : ndarray, shape (R, 2)
        Coefficients at which to evaluate.
    """
    g = np.atleast_2d(np.asarray(gamma, dtype=np.float64))
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(successes, dtype=np.float64)
    m = np.asarray(trials, dtype=np.float64)
    eta = g[:, :1] + g[:, 1:2] * x
    log_mu, log_mu_c = _log_ndtr_pair(eta)
    log_phi = -0.5 * eta**2 - 0.5 * np.log(2.0 * np.pi)
    # phi / Phi and phi / (1 - Phi) from logs: exact in the tails where Phi underflows.
    r1 = np.exp(log_phi - log_mu)
    r0 = np.exp(log_phi - log_mu_c)
    fail = m - y
    # 0 * log(tiny) is 0 here; np.where keeps 0 * (-inf) out should a log underflow.
    loglik_rows = np.where(y > 0, y * log_mu, 0.0) + np.where(fail > 0, fail * log_mu_c, 0.0)
    d_eta = y * r1 - fail * r0  # d loglik / d eta
    w = m * r1 * r0  # expected information per unit eta: m phi^2 / (Phi (1 - Phi))
    xb = np.broadcast_to(x, eta.shape)
    score = np.stack([d_eta.sum(axis=1), (d_eta * xb).sum(axis=1)], axis=1)
    i00 = w.sum(axis=1)
    i01 = (w * xb).sum(axis=1)
    i11 = (w * xb * xb).sum(axis=1)
    info = np.stack([np.stack([i00, i01], axis=1), np.stack([i01, i11], axis=1)], axis=1)
    return FisherParts(loglik_rows.sum(axis=1), score, info)


@dataclass(frozen=True)
class ScoringTrace:
    """Outcome of Fisher scoring for a batch of fits.

    Attributes
    ----------
    gamma : ndarray, shape (R, 2)
    deviance : ndarray, shape (R,)
        ``-2 loglik`` at ``gamma``.
    information : ndarray, shape (R, 2, 2)
        Fisher information at ``gamma`` (its inverse estimates the coefficients'
        covariance under the binomial model).
    iterations : ndarray of int, shape (R,)
        Updates made before the relative deviance change fell below the tolerance.
    converged : ndarray of bool, shape (R,)
    evaluations : int
        Calls of the parts function (communication rounds in the distributed fit).
    """

    gamma: FloatArray
    deviance: FloatArray
    information: FloatArray
    iterations: NDArray[np.int64]
    converged: NDArray[np.bool_]
    evaluations: int


PartsFn = Callable[[FloatArray, NDArray[np.int64]], FisherParts]


def fisher_scoring(
    parts: PartsFn,
    n_fits: int,
    *,
    start: FloatArray | None = None,
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
) -> ScoringTrace:
    """Fisher scoring with R ``glm``'s stopping rule, for a batch of fits.

    ``parts(gamma, which)`` returns the summed :class:`FisherParts` of fits ``which`` (an
    index array) at coefficients ``gamma`` (shape (len(which), 2)); locally it evaluates
    :func:`probit_parts`, in the distributed fit it asks every site and adds the replies.
    A fit stops when ``|dev_m - dev_(m-1)| / (|dev_m| + 0.1) < tol`` (R ``glm.fit``) or
    after ``max_iter`` updates; a step whose deviance is not finite is halved, as R does.
    """
    gamma = np.zeros((n_fits, 2)) if start is None else np.array(start, dtype=np.float64)
    gamma = np.atleast_2d(gamma).reshape(n_fits, 2)
    every = np.arange(n_fits)
    p = parts(gamma, every)
    evaluations = 1
    dev = -2.0 * p.loglik
    score, info = p.score.copy(), p.information.copy()
    iterations = np.zeros(n_fits, np.int64)
    converged = np.zeros(n_fits, bool)
    if not np.isfinite(dev).all():
        raise FloatingPointError("the deviance at the starting coefficients is not finite")
    for _ in range(max_iter):
        active = np.flatnonzero(~converged)
        if active.size == 0:
            break
        step = _solve(info[active], score[active])
        new = gamma[active] + step
        q = parts(new, active)
        evaluations += 1
        new_dev = -2.0 * q.loglik
        halvings = 0
        while not np.isfinite(new_dev).all() and halvings < _MAX_HALVINGS:
            bad = ~np.isfinite(new_dev)
            step[bad] /= 2.0
            new[bad] = gamma[active][bad] + step[bad]
            q_bad = parts(new[bad], active[bad])
            evaluations += 1
            new_dev[bad] = -2.0 * q_bad.loglik
            q = FisherParts(
                _merge(q.loglik, q_bad.loglik, bad),
                _merge(q.score, q_bad.score, bad),
                _merge(q.information, q_bad.information, bad),
            )
            halvings += 1
        if not np.isfinite(new_dev).all():
            raise FloatingPointError("Fisher scoring: no finite deviance after step halving")
        change = np.abs(new_dev - dev[active]) / (np.abs(new_dev) + 0.1)
        gamma[active] = new
        dev[active] = new_dev
        score[active] = q.score
        info[active] = q.information
        iterations[active] += 1
        converged[active] = change < tol
    return ScoringTrace(gamma, dev, info, iterations, converged, evaluations)


def _merge(full: FloatArray, part: FloatArray, bad: NDArray[np.bool_]) -> FloatArray:
    out = full.copy()
    out[bad] = part
    return out


def _solve(info: FloatArray, score: FloatArray) -> FloatArray:
    """``I^-1 V`` per fit; a singular information (no spread in x) gets a pseudo-inverse."""
    try:
        step = np.linalg.solve(info, score[..., None])[..., 0]
    except np.linalg.LinAlgError:
        step = np.einsum("rij,rj->ri", np.linalg.pinv(info), score)
    return np.asarray(step, dtype=np.float64)
