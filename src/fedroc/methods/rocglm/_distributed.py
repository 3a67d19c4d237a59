"""Analyst side of the distributed ROC-GLM and its DeLong confidence interval.

Protocol (paper 1, sections 4.2-4.4), one row per round:

1. (optional) ``rocglm.sensitivity``: each site's heuristic l2-sensitivity; the analyst
   takes the largest.
2. ``rocglm.noisy_scores``: each site adds Gaussian noise (classic or analytic
   calibration) to every row's score once and sends the sorted noisy scores by class.
   The analyst pools them into the noisy survivor functions S~0 (negatives) and S~1
   (positives).
3. ``rocglm.setup``: S~0 and S~1 go back to every site (for the grid rule also the
   score cutoffs that turn S~0 into the grouped response); each site builds its grouped
   ROC-GLM table and its DeLong placement values and replies with their sums (distrAVG).
4. ``rocglm.fisher`` (repeated): the analyst sends the coefficients, each site replies
   with its log-likelihood, score vector and Fisher information; the analyst adds them,
   takes a Fisher-scoring step and stops by R ``glm``'s relative deviance rule.
5. ``rocglm.placement_ss``: the global placement means go out, centred sums of squares
   come back (distrVAR); the DeLong variance gives the logit interval of eq. 3.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedroc._results import ResultMixin, format_table
from fedroc.data import SiteData
from fedroc.exceptions import InputError
from fedroc.federation.federation import Federation, Released
from fedroc.methods.rocglm._core import (
    DEFAULT_N_THRESHOLDS,
    BinormalCurve,
    _warn_unconverged,
    binormal_auc,
    check_rule,
    grid_cutoffs,
    recommended_privacy,
    threshold_grid,
)
from fedroc.methods.rocglm._probit import (
    DEFAULT_MAX_ITER,
    DEFAULT_TOL,
    FisherParts,
    fisher_scoring,
)
from fedroc.methods.rocglm._site import (
    FN_FISHER,
    FN_NOISY,
    FN_PLACEMENT_SS,
    FN_SENSITIVITY,
    FN_SETUP,
)
from fedroc.metrics import logit_ci, logit_test_greater
from fedroc.privacy import analytic_gaussian_sigma, classic_gaussian_sigma

__all__ = [
    "DEFAULT_SIMEX_LAMBDAS",
    "DEFAULT_SIMEX_REPLICATES",
    "DistributedRocGlm",
    "NoisyScores",
    "SimexFit",
    "distributed_rocglm",
    "fit_with_survivors",
    "release_noisy_scores",
    "site_sensitivity",
]

FloatArray = NDArray[np.float64]
DEFAULT_SIMEX_LAMBDAS = (0.5, 1.0, 1.5, 2.0)
DEFAULT_SIMEX_REPLICATES = 20
CALIBRATIONS = ("classic", "analytic")
EXTRAPOLANTS = ("linear", "quadratic")


@dataclass(frozen=True, repr=False)
class SimexFit(ResultMixin):
    """Simulation-extrapolation of the ROC-GLM against the noise on S~0.

    The analyst adds more Gaussian noise (variance ``lambda * sigma^2``) to the noisy
    negatives it already holds, refits at each level (``replicates`` draws per level),
    and extrapolates the mean coefficients to ``lambda = -1``, where the total noise
    variance ``(1 + lambda) sigma^2`` vanishes (Cook & Stefanski 1994). The extra noise is
    post-processing of released values, so it costs no privacy budget; the refits do make
    the sites release more aggregates over their positives (in the same rounds).

    The default extrapolant is linear in lambda: in fedroc's simulation (data of paper 1
    section 5.2, see scripts/rocglm_simulation.py) it removed most of the bias with less
    variance than the quadratic one, which removes all of it on average.

    Attributes
    ----------
    lambdas : ndarray
        0 (the naive fit) followed by the added noise levels.
    g1, g2 : ndarray
        Mean coefficients at each level.
    auc : ndarray
        Mean binormal AUC at each level.
    replicates : int
    extrapolant : {"linear", "quadratic"}
    naive : (float, float)
        The uncorrected coefficients (level 0).
    """

    lambdas: FloatArray
    g1: FloatArray
    g2: FloatArray
    auc: FloatArray
    replicates: int
    extrapolant: str
    naive: tuple[float, float]

    def extrapolate(self, values: ArrayLike) -> float:
        degree = 1 if self.extrapolant == "linear" else 2
        coef = np.polyfit(self.lambdas, np.asarray(values, np.float64), degree)
        return float(np.polyval(coef, -1.0))

    @property
    def params(self) -> tuple[float, float]:
        return (self.extrapolate(self.g1), self.extrapolate(self.g2))

    def summary(self) -> str:
        rows: list[tuple[str, Any]] = [
            (f"lambda = {lam:g}", f"AUC {a:.4f}")
            for lam, a in zip(self.lambdas, self.auc, strict=True)
        ]
        rows.append(
            (
                f"{self.extrapolant} extrapolation to lambda = -1",
                f"AUC {binormal_auc(*self.params):.4f}",
            )
        )
        return format_table(rows, title="SIMEX")


@dataclass(frozen=True, repr=False)
class DistributedRocGlm(BinormalCurve, ResultMixin):
    """Result of the distributed ROC-GLM with its DeLong confidence interval.

    Attributes
    ----------
    g1, g2 : float
        Binormal ROC-GLM coefficients, ``ROC(t) = Phi(g1 + g2 Phi^-1(t))`` (after SIMEX
        when it was requested; the uncorrected ones are in ``simex.naive``).
    auc : float
        Closed form ``Phi(g1 / sqrt(1 + g2^2))``; :attr:`auc_integral` integrates the curve.
    ci : (float, float)
        Logit-scale interval (paper 1 eq. 3) around ``auc`` with the DeLong variance from
        the noisy survivor functions (distrAVG / distrVAR).
    variance : float
        ``var(V10) / n_pos + var(V01) / n_neg`` (paper 1 eq. 2).
    auc_placement : float
        Mean placement value of the positives against S~0: the empirical AUC of the true
        positive scores against the noisy negatives (a by-product of distrAVG).
    iterations, converged, deviance :
        Fisher scoring outcome (R ``glm``'s rule, weights included in the deviance).
    epsilon, delta, sensitivity, noise_sd : float or None
        Privacy parameters of the one noisy release and the noise standard deviation
        (None for a fit on given survivor functions).
    sensitivity_source : str
        ``"given"``, ``"estimated at the sites (heuristic)"`` or ``"none"``.
    calibration : str
        ``"classic"`` or ``"analytic"`` Gaussian mechanism.
    thresholds : str
        Threshold rule; ``n_thresholds`` is the number of grouped rows over all sites.
    sites : dict
        Per site: ``n_pos``, ``n_neg``, and the DP events it released.
    released : Released
        What left the sites (rounds, bytes, DP events, notes).
    simex : SimexFit or None
    """

    g1: float
    g2: float
    auc: float
    ci: tuple[float, float]
    variance: float
    auc_placement: float
    iterations: int
    converged: bool
    deviance: float
    n_pos: int
    n_neg: int
    epsilon: float | None
    delta: float | None
    sensitivity: float | None
    sensitivity_source: str
    noise_sd: float | None
    calibration: str
    thresholds: str
    n_thresholds: int
    confidence_level: float
    sites: dict[str, dict[str, Any]] = field(repr=False)
    released: Released = field(repr=False)
    simex: SimexFit | None = field(default=None, repr=False)
    a0: float | None = None

    @property
    def se(self) -> float:
        return math.sqrt(self.variance) if self.variance >= 0 else float("nan")

    def confidence_interval(self, confidence_level: float | None = None) -> tuple[float, float]:
        level = self.confidence_level if confidence_level is None else confidence_level
        return logit_ci(self.auc, self.se, level)

    def without_simex(self) -> DistributedRocGlm:
        """The uncorrected fit of the same run (itself when SIMEX was not used).

        Same release, same DeLong variance; the interval is centred on the plain AUC.
        """
        if self.simex is None:
            return self
        g1, g2 = self.simex.naive
        auc = binormal_auc(g1, g2)
        return dataclasses.replace(
            self,
            g1=g1,
            g2=g2,
            auc=auc,
            ci=logit_ci(auc, self.se, self.confidence_level),
            simex=None,
        )

    def test_greater(self, a0: float) -> tuple[float, float]:
        """One-sided test of H0: AUC <= a0 on the logit scale (paper 1, sections 3.3, 6).

        Returns ``(z, p)``; rejecting when ``p < alpha / 2`` is the paper's rule that
        ``logit(a0)`` lies below the whole two-sided (1 - alpha) interval.
        """
        return logit_test_greater(self.auc, self.se, a0)

    def plot(self, pooled: SiteData | None = None, ax: Any = None) -> Any:
        """Fitted ROC curve over the pooled empirical one (when the caller holds the rows).

        Returns the matplotlib figure.
        """
        from fedroc.report import roc_figure

        fpr, tpr = self.roc_curve()
        label = f"distributed ROC-GLM (AUC {self.auc:.3f})"
        if ax is None:
            return roc_figure(pooled, [(label, fpr, tpr)], title="ROC-GLM")
        from fedroc.metrics import roc_curve

        if pooled is not None:
            efpr, etpr, _ = roc_curve(pooled.label, pooled.score)
            ax.step(efpr, etpr, where="post", color="black", lw=1.2, label="pooled (empirical)")
        ax.plot(fpr, tpr, lw=1.5, label=label)
        ax.plot([0, 1], [0, 1], ls=":", color="grey", lw=0.8)
        ax.legend(loc="lower right", fontsize=8)
        return ax.figure

    def summary(self) -> str:
        level = f"{self.confidence_level:.0%}"
        rows: list[tuple[str, Any]] = [
            ("g1", self.g1),
            ("g2", self.g2),
            ("AUC (ROC-GLM)", self.auc),
            (f"{level} CI (logit, DeLong)", self.ci),
            ("SE", self.se),
            ("positives / negatives", f"{self.n_pos} / {self.n_neg}"),
            ("epsilon", self.epsilon),
            ("delta", self.delta),
            ("l2-sensitivity", self.sensitivity),
            ("sensitivity from", self.sensitivity_source),
            ("noise sd", self.noise_sd),
            ("calibration", self.calibration),
            ("thresholds", f"{self.thresholds} ({self.n_thresholds} rows)"),
            ("Fisher iterations", self.iterations),
            ("converged", self.converged),
            ("rounds", self.released.rounds),
        ]
        if self.simex is not None:
            rows.append(("AUC without SIMEX", binormal_auc(*self.simex.naive)))
        if self.a0 is not None:
            z, p = self.test_greater(self.a0)
            rows.append((f"H0: AUC <= {self.a0:g}", f"z = {z:.3f}, p = {p:.4g}"))
        return format_table(rows, title="Distributed ROC-GLM")


@dataclass(frozen=True)
class NoisyScores:
    """The pooled noisy scores the analyst received (sorted), and how they were made."""

    negative: FloatArray
    positive: FloatArray
    epsilon: float
    delta: float
    sensitivity: float
    noise_sd: float
    calibration: str
    per_site: dict[str, dict[str, Any]]


def site_sensitivity(federation: Federation, *, n_breaks: int | None = None) -> float:
    """Largest heuristic l2-sensitivity over the sites (see ``score_sensitivity``)."""
    args: dict[str, Any] = {} if n_breaks is None else {"n_breaks": int(n_breaks)}
    replies = federation.call(FN_SENSITIVITY, **args)
    return max(float(r["sensitivity"]) for r in replies.values())


def noise_sd(*, epsilon: float, delta: float, sensitivity: float, calibration: str) -> float:
    if calibration == "classic":
        return classic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    if calibration == "analytic":
        return analytic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    raise InputError(f"dp_calibration must be one of {CALIBRATIONS}; got {calibration!r}")


def release_noisy_scores(
    federation: Federation,
    *,
    epsilon: float,
    delta: float,
    sensitivity: float,
    calibration: str = "classic",
) -> NoisyScores:
    """Round 2: every site's noisy scores, pooled and sorted by class.

    The noise is each site's own: nothing sent here (no seed) can influence it.
    """
    sigma = noise_sd(epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration=calibration)
    start = federation.mark()
    replies = federation.call(
        FN_NOISY,
        epsilon=float(epsilon),
        delta=float(delta),
        sensitivity=float(sensitivity),
        calibration=calibration,
    )
    call = federation.transcript[start]
    per_site = {
        name: {
            "n_pos": int(np.size(r["positive"])),
            "n_neg": int(np.size(r["negative"])),
            "dp": [dataclasses.asdict(e) for e in call.dp.get(name, [])],
        }
        for name, r in replies.items()
    }
    neg = np.sort(np.concatenate([np.asarray(r["negative"]) for r in replies.values()]))
    pos = np.sort(np.concatenate([np.asarray(r["positive"]) for r in replies.values()]))
    return NoisyScores(neg, pos, epsilon, delta, sensitivity, sigma, calibration, per_site)


@dataclass(frozen=True)
class _FitOutcome:
    gamma: FloatArray
    deviance: FloatArray
    iterations: NDArray[np.int64]
    converged: NDArray[np.bool_]
    variance: float
    auc_placement: float
    n_pos: int
    n_neg: int
    n_rows: int


def _simex_negatives(
    neg: FloatArray, sigma: float, lambdas: Sequence[float], replicates: int, rng: Any
) -> list[FloatArray]:
    out = []
    for lam in lambdas:
        for _ in range(replicates):
            out.append(neg + rng.normal(0.0, math.sqrt(lam) * sigma, neg.size))
    return out


def _cutoffs_unsorted(values: FloatArray, t: FloatArray) -> FloatArray:
    """``grid_cutoffs`` of unsorted values: only the n_T order statistics are selected."""
    n = values.size
    base = np.floor(t * n).astype(np.int64)
    probe = np.concatenate([base - 1, base, base + 1])
    idx = np.unique(np.clip(n - np.clip(probe, 0, n) - 1, 0, n - 1))
    part = np.partition(values, idx.astype(np.intp))
    # Positions other than idx hold arbitrary values, but grid_cutoffs reads only n - K - 1
    # for the K it derives, which lies in idx.
    return grid_cutoffs(part, t)


def fit_with_survivors(
    federation: Federation,
    negative: ArrayLike,
    positive: ArrayLike,
    *,
    thresholds: str = "grid",
    n_thresholds: int = DEFAULT_N_THRESHOLDS,
    extra_negatives: Sequence[FloatArray] = (),
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
) -> _FitOutcome:
    """Rounds 3-5 given the pooled (noisy) scores of each class.

    ``extra_negatives`` are further versions of the negatives (SIMEX), fitted in the same
    rounds (grid rule only). The first fit uses ``negative``.
    """
    check_rule(thresholds)
    neg = np.sort(np.asarray(negative, np.float64))
    pos = np.sort(np.asarray(positive, np.float64))
    session = secrets.token_hex(8)
    args: dict[str, Any] = {
        "session": session,
        "thresholds": thresholds,
        "negative": neg,
        "positive": pos,
    }
    n_fits = 1 + len(extra_negatives)
    if thresholds == "grid":
        t = threshold_grid(n_thresholds)
        cut = [grid_cutoffs(neg, t)] + [_cutoffs_unsorted(z, t) for z in extra_negatives]
        args["t"] = t
        args["cutoffs"] = np.vstack(cut)
    elif extra_negatives:
        raise InputError("SIMEX needs thresholds='grid' (the positives rule refits per site)")
    sums = federation.call(FN_SETUP, **args)
    n_pos = sum(int(r["n_pos"]) for r in sums.values())
    n_neg = sum(int(r["n_neg"]) for r in sums.values())
    mean_v10 = sum(float(r["sum_v10"]) for r in sums.values()) / n_pos
    mean_v01 = sum(float(r["sum_v01"]) for r in sums.values()) / n_neg
    n_rows = sum(int(r["n_rows"]) for r in sums.values())

    def parts(gamma: FloatArray, which: NDArray[np.int64]) -> FisherParts:
        replies = federation.call(FN_FISHER, session=session, gamma=gamma, fits=which)
        total = FisherParts.zeros(which.size)
        for r in replies.values():
            total = total + FisherParts(
                np.asarray(r["loglik"]), np.asarray(r["score"]), np.asarray(r["information"])
            )
        return total

    trace = fisher_scoring(parts, n_fits, tol=tol, max_iter=max_iter)
    ss = federation.call(
        FN_PLACEMENT_SS, session=session, mean_v10=mean_v10, mean_v01=mean_v01, finish=True
    )
    ss10 = sum(float(r["ss_v10"]) for r in ss.values())
    ss01 = sum(float(r["ss_v01"]) for r in ss.values())
    if n_pos < 2 or n_neg < 2:
        variance = float("nan")
    else:
        variance = ss10 / (n_pos - 1) / n_pos + ss01 / (n_neg - 1) / n_neg
    return _FitOutcome(
        trace.gamma,
        trace.deviance,
        trace.iterations,
        trace.converged,
        variance,
        mean_v10,
        n_pos,
        n_neg,
        n_rows,
    )


PRIVACY_SETTINGS = ("default", "paper")
# The default release: epsilon 1 per run (a site's default lifetime budget of 10 allows ten
# runs) and a delta a tenth of 1/n of the largest site (so ten runs stay within every
# site's default lifetime delta of 1/n), with the analytic Gaussian calibration.
DEFAULT_EPSILON = 1.0
DEFAULT_DELTA_RUNS = 10


def _privacy_parameters(
    federation: Federation,
    epsilon: float | None,
    delta: float | None,
    sensitivity: float | None,
    n_breaks: int | None,
    privacy: str = "default",
) -> tuple[float, float, float, str, list[str]]:
    notes: list[str] = []
    if privacy not in PRIVACY_SETTINGS:
        raise InputError(f"privacy must be one of {PRIVACY_SETTINGS}; got {privacy!r}")
    if sensitivity is None:
        sensitivity = site_sensitivity(federation, n_breaks=n_breaks)
        source = "estimated at the sites (heuristic)"
        notes.append(
            f"l2-sensitivity {sensitivity:.4g} estimated at the sites by the reference "
            "code's heuristic (largest score difference of rows in adjacent histogram "
            "cells); it is not a proven bound, so the DP guarantee below is heuristic too"
        )
    else:
        if not (sensitivity > 0 and math.isfinite(sensitivity)):
            raise InputError(f"sensitivity must be a positive number; got {sensitivity!r}")
        source = "given"
    if (epsilon is None) != (delta is None):
        raise InputError("give both epsilon and delta, or neither (to use the default setting)")
    if epsilon is None or delta is None:
        if privacy == "paper":
            epsilon, delta = recommended_privacy(sensitivity)
            notes.append(
                f"(epsilon, delta) = ({epsilon:g}, {delta:g}) recommended by paper 1 for "
                f"l2-sensitivity {sensitivity:.4g}; a delta this large protects little, and "
                "a site's default budget refuses it"
            )
        else:
            from fedroc.federation.basic import site_sizes

            n_max = max(site_sizes(federation).values())
            epsilon, delta = DEFAULT_EPSILON, 1.0 / (DEFAULT_DELTA_RUNS * n_max)
            notes.append(
                f"(epsilon, delta) = ({epsilon:g}, {delta:.3g}): fedroc's default, delta = "
                f"1/({DEFAULT_DELTA_RUNS} n) for the largest site (n = {n_max})"
            )
    return float(epsilon), float(delta), float(sensitivity), source, notes


def distributed_rocglm(
    federation: Federation,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    sensitivity: float | None = None,
    dp_calibration: str | None = None,
    privacy: str = "default",
    thresholds: str = "grid",
    n_thresholds: int = DEFAULT_N_THRESHOLDS,
    simex: bool = False,
    simex_lambdas: Sequence[float] = DEFAULT_SIMEX_LAMBDAS,
    simex_replicates: int = DEFAULT_SIMEX_REPLICATES,
    simex_extrapolant: str = "linear",
    confidence_level: float = 0.95,
    seed: int | None = None,
    a0: float | None = None,
    n_breaks: int | None = None,
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
) -> DistributedRocGlm:
    """Distributed ROC-GLM with differential privacy and the distributed DeLong CI.

    Parameters
    ----------
    federation : Federation
    epsilon, delta : float, optional
        Privacy of the one noisy release of every score. Give both, or neither for the
        setting ``privacy`` names.
    sensitivity : float, optional
        l2-sensitivity of the model's score. None estimates it at the sites with the
        reference code's heuristic (not a bound; see ``score_sensitivity``).
    dp_calibration : {"classic", "analytic"}, optional
        Gaussian mechanism of the paper (proven for epsilon < 1) or Balle & Wang's analytic
        one (exact for every epsilon, less noise). Default: analytic, or classic with
        ``privacy="paper"``.
    privacy : {"default", "paper"}
        Without epsilon and delta: ``"default"`` releases at epsilon 1 and delta
        ``1/(10 n)`` for the largest site's n (analytic Gaussian), which ten runs keep
        within every site's default lifetime budget; ``"paper"`` uses paper 1's
        recommendation for the l2-sensitivity (:func:`recommended_privacy`), whose delta
        (0.1 to 0.5) sites refuse unless their policy raises ``delta_limit``.
    thresholds : {"grid", "positives"}
        Threshold rule (see ``fedroc.methods.rocglm._core``).
    n_thresholds : int
        Size of the grid.
    simex : bool
        Correct the noise's downward bias by simulation-extrapolation (grid rule only;
        see :class:`SimexFit`).
    simex_lambdas, simex_replicates, simex_extrapolant :
        Added noise levels (multiples of the noise variance), refits per level, and
        ``"linear"`` or ``"quadratic"`` extrapolation.
    confidence_level : float
    seed : int, optional
        Seed of the analyst's own randomness (SIMEX's added noise). The sites' DP noise is
        theirs: a seed for it can only come from a site's own configuration.
    a0 : float, optional
        Reference value of the one-sided test H0: AUC <= a0 reported in the summary.
    """
    if not 0.0 < confidence_level < 1.0:
        raise InputError(f"confidence_level must lie in (0, 1); got {confidence_level!r}")
    if a0 is not None and not 0.0 < a0 < 1.0:
        raise InputError(f"a0 must lie in (0, 1); got {a0!r}")
    check_rule(thresholds)
    if dp_calibration is None:
        dp_calibration = "classic" if privacy == "paper" else "analytic"
    if dp_calibration not in CALIBRATIONS:
        raise InputError(f"dp_calibration must be one of {CALIBRATIONS}; got {dp_calibration!r}")
    if simex and thresholds != "grid":
        raise InputError("simex needs thresholds='grid'")
    if simex_extrapolant not in EXTRAPOLANTS:
        raise InputError(
            f"simex_extrapolant must be one of {EXTRAPOLANTS}; got {simex_extrapolant!r}"
        )
    if simex and (int(simex_replicates) != simex_replicates or simex_replicates < 1):
        raise InputError(f"simex_replicates must be a positive integer; got {simex_replicates!r}")
    if thresholds == "grid":
        threshold_grid(n_thresholds)  # validates
    start = federation.mark()
    eps, dlt, sens, source, notes = _privacy_parameters(
        federation, epsilon, delta, sensitivity, n_breaks, privacy
    )
    noisy = release_noisy_scores(
        federation,
        epsilon=eps,
        delta=dlt,
        sensitivity=sens,
        calibration=dp_calibration,
    )
    notes.append(
        f"each row's score released once with Gaussian noise (sd {noisy.noise_sd:.4g}, "
        f"{dp_calibration} calibration): ({eps:g}, {dlt:g})-DP per row"
    )
    if dp_calibration == "classic" and eps >= 1.0:
        notes.append(
            "the classic Gaussian calibration is proven only for epsilon < 1; use "
            "dp_calibration='analytic' for a guarantee at this epsilon"
        )
    extra: list[FloatArray] = []
    lambdas = np.asarray(simex_lambdas, np.float64) if simex else np.zeros(0)
    if simex:
        if lambdas.size < 2 or (lambdas <= 0).any():
            raise InputError("simex_lambdas must hold at least two positive noise levels")
        rng = np.random.default_rng(None if seed is None else [int(seed), 0x5E1E])
        extra = _simex_negatives(
            noisy.negative, noisy.noise_sd, lambdas.tolist(), int(simex_replicates), rng
        )
    outcome = fit_with_survivors(
        federation,
        noisy.negative,
        noisy.positive,
        thresholds=thresholds,
        n_thresholds=n_thresholds,
        extra_negatives=extra,
        tol=tol,
        max_iter=max_iter,
    )
    gamma = outcome.gamma
    simex_fit = None
    if simex:
        b = int(simex_replicates)
        levels = np.concatenate([[0.0], lambdas])
        groups = [gamma[:1]] + [gamma[1 + k * b : 1 + (k + 1) * b] for k in range(lambdas.size)]
        aucs = [np.mean([binormal_auc(*g) for g in grp]) for grp in groups]
        simex_fit = SimexFit(
            levels,
            np.array([grp[:, 0].mean() for grp in groups]),
            np.array([grp[:, 1].mean() for grp in groups]),
            np.asarray(aucs),
            b,
            simex_extrapolant,
            (float(gamma[0, 0]), float(gamma[0, 1])),
        )
        g1, g2 = simex_fit.params
        notes.append(
            f"SIMEX: {lambdas.size} noise levels x {b} refits of the released noisy "
            "negatives (no privacy cost; more Fisher-scoring aggregates from the sites)"
        )
    else:
        g1, g2 = float(gamma[0, 0]), float(gamma[0, 1])
    converged = bool(outcome.converged[0])
    _warn_unconverged(converged, max_iter)
    auc = binormal_auc(g1, g2)
    se = math.sqrt(outcome.variance) if outcome.variance >= 0 else float("nan")
    released = federation.released(start).with_notes(*notes)
    return DistributedRocGlm(
        g1=g1,
        g2=g2,
        auc=auc,
        ci=logit_ci(auc, se, confidence_level),
        variance=outcome.variance,
        auc_placement=outcome.auc_placement,
        iterations=int(outcome.iterations[0]),
        converged=converged,
        deviance=float(outcome.deviance[0]),
        n_pos=outcome.n_pos,
        n_neg=outcome.n_neg,
        epsilon=eps,
        delta=dlt,
        sensitivity=sens,
        sensitivity_source=source,
        noise_sd=noisy.noise_sd,
        calibration=dp_calibration,
        thresholds=thresholds,
        n_thresholds=outcome.n_rows,
        confidence_level=confidence_level,
        sites=noisy.per_site,
        released=released,
        simex=simex_fit,
        a0=a0,
    )
