"""Analyst side of the distributed ROC-GLM and its confidence interval.

Protocol (paper 1, sections 4.2-4.4), one row per round:

1. (optional) ``rocglm.sensitivity``: each site's heuristic l2-sensitivity; the analyst
   takes the largest.
2. ``rocglm.noisy_scores``: each site adds Gaussian noise (classic or analytic
   calibration) to every row's score once and sends the sorted noisy scores by class with
   a release id and its signature of them. The analyst pools them into the noisy survivor
   functions S~0 (negatives) and S~1 (positives).
3. ``rocglm.setup``: S~0 and S~1 go back to every site, site by site with the signatures,
   and with its release id; each site checks that they hold its own release and the other
   sites' signed ones and nothing else, places its positives in S~0 (the paper) and in the
   deconvolved distribution of the negatives (the correction) and builds both grouped
   ROC-GLM tables. On the grid rule (the default) it replies nothing that depends on its
   rows (the grid's size and a digest of the setup).
4. Grid rule: ``rocglm.table`` through secure aggregation (:func:`fedroc.secagg.secure_sum`,
   once per setup): every site's tables live on the same grid ``x_j = Phi^-1(t_j)``, and the
   binomial log-likelihood, score and information are linear in (successes, trials), so
   the sum of the sites' Fisher parts is the Fisher part of the summed table. The sites
   send their tables and their placement sums and sums of squares; the analyst sees only
   the sums, fits them by Fisher scoring itself (R ``glm``'s relative deviance rule) and
   takes the means (distrAVG) and centred sums of squares (distrVAR) from them: the same
   numbers as the paper's per-site rounds, without a per-site count (those rounds pinned
   a site's exact count above a cutoff: R15-R18 in tests/test_attacks_review.py). It needs
   at least the sites' ``secagg_min_sites`` (default 3) and their rosters.
5. "Positives" rule (opted in by the sites; every site's thresholds differ): the paper's
   rounds, the sums of the placements in the setup's reply, ``rocglm.fisher`` repeated
   (each site's log-likelihood, score vector and Fisher information at the analyst's
   coefficients, added up) and ``rocglm.placement_ss`` (centred sums of squares about the
   global means).

The interval. The paper's (``correction="none"``): DeLong's variance (eq. 2) from the
placements in the noisy survivor functions, on the logit scale (eq. 3), around the ROC-GLM
AUC. It ignores the noise's bias and variance and undercovers (issue "Honest statistics by
default": 0.47 at n = 5000).

The default (``correction="deconvolution"``): the AUC is eq. 1 with the negatives'
survivor function deconvolved from S~0 (:mod:`._deconvolution`), ``AUC = mean_i F0^(p_i)``
over the true positive scores ``p_i`` (distrAVG). ``F0^`` is the bagged deconvolution
(:func:`._deconvolution.bagged`): the mean of the refits on ``bootstrap`` resamples of
S~0, drawn from a generator seeded by S~0 itself, so that every site places its
positives in the same distribution without taking one from the analyst. A single fit's
sparse weights jump between bins from sample to sample, and a bootstrap around that one
fit missed the jumps' variance (SE 0.0031 against an SD of 0.0035 at n = 50000 on the
rare design); bagging removes it. The variance has two independent parts:

- the positives': ``var_i(F0^(p_i)) / n1`` (DeLong's first term, by distrVAR);
- the negatives' and the noise's: the noisy negatives are a sample of ``N + E``; over the
  same resamples of S~0, the variance of ``sum_g w_g c_g`` of the refits, where ``c_g`` is
  the share of positives above bin ``g`` of the deconvolved distribution (the bootstrap
  SD of one fit, which bounds that of the bagged mean from above: Efron 2014). ``c``
  needs the positives' distribution, which the analyst knows only through S~1; the noisy
  positives' histogram in ten bins is close enough (what matters is the coarse shape; measured in
  ``scripts/results/rocglm_coverage.md``), so this costs the sites nothing.

The binormal ROC-GLM is fitted to the deconvolved placements too: its curve is the result's
curve and its area is ``auc_rocglm``. It is not the reported AUC, because a binormal fit to
the deconvolved placements (a distribution with few, narrow bins of mass) adds bias and
variance of its own (at n = 50000: bias -0.002, sd 0.0054 against 0.0036).
"""

from __future__ import annotations

import dataclasses
import math
import secrets
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import special

from fedroc._docs import fill_doc
from fedroc._results import ResultMixin, format_table
from fedroc.data import SiteData
from fedroc.exceptions import InputError, ProtocolError
from fedroc.federation.federation import Federation, Released
from fedroc.federation.roster import SIGNATURE_BYTES
from fedroc.methods import explain_class_count_refusals
from fedroc.methods.rocglm._core import (
    DEFAULT_N_THRESHOLDS,
    BinormalCurve,
    binormal_auc,
    check_rule,
    recommended_privacy,
    threshold_grid,
    warn_unconverged,
)
from fedroc.methods.rocglm._deconvolution import (
    DEFAULT_RESAMPLES,
    MAX_RESAMPLES,
    BinMixture,
    bagged,
    check_levels,
)
from fedroc.methods.rocglm._probit import (
    DEFAULT_MAX_ITER,
    DEFAULT_TOL,
    FisherParts,
    ScoringTrace,
    fisher_scoring,
    probit_parts,
)
from fedroc.methods.rocglm._site import (
    FITS,
    FN_FISHER,
    FN_NOISY,
    FN_PLACEMENT_SS,
    FN_SCALE,
    FN_SENSITIVITY,
    FN_SETUP,
    FN_TABLE,
    MAX_THRESHOLDS,
    MAX_UNDECLARED_LEVELS,
    from_fixed_point,
)
from fedroc.metrics import logit_ci, logit_test_greater
from fedroc.privacy import analytic_gaussian_sigma, classic_gaussian_sigma
from fedroc.privacy.policy import delta_fits, epsilon_fits, largest_fitting, shown_left
from fedroc.secagg import check_secure_sum, secure_sum

__all__ = [
    "CORRECTIONS",
    "DEFAULT_BOOTSTRAP",
    "DistributedRocGlm",
    "NoisyScores",
    "distributed_rocglm",
    "fit_release",
    "release_noisy_scores",
    "site_sensitivity",
]

FloatArray = NDArray[np.float64]
CORRECTIONS = ("deconvolution", "none")
CALIBRATIONS = ("classic", "analytic")
DEFAULT_BOOTSTRAP = DEFAULT_RESAMPLES
# Bins of the noisy positives' histogram that stands in for the positives' distribution in
# the variance of the correction (see the module docstring).
_PLUGIN_BINS = 10
_PAPER, _DECONVOLVED = FITS.index("paper"), FITS.index("deconvolved")


@dataclass(frozen=True, repr=False)
class DistributedRocGlm(BinormalCurve, ResultMixin):
    """Result of the distributed ROC-GLM with its confidence interval.

    Attributes
    ----------
    auc : float
        With ``correction="deconvolution"`` (the default): the area under the empirical ROC
        curve of the true positive scores against the deconvolved distribution of the
        negatives (paper 1 eq. 1, ties one half). With ``"none"``: the ROC-GLM's
        ``Phi(g1 / sqrt(1 + g2^2))`` as in the paper.
    ci : (float, float)
        Logit-scale interval (paper 1 eq. 3) around ``auc`` with :attr:`variance`.
    variance : float
        Deconvolution: ``variance_positives + variance_negatives``. None: DeLong's
        ``var(V10) / n_pos + var(V01) / n_neg`` (eq. 2) from the noisy survivor functions.
    variance_positives, variance_negatives : float
        The two parts (see the module docstring); the second includes the noise's.
    g1, g2 : float
        Binormal ROC-GLM coefficients, ``ROC(t) = Phi(g1 + g2 Phi^-1(t))``, fitted to the
        placements the AUC uses (deconvolved, or in the noisy negatives).
    auc_rocglm : float
        Area under that binormal curve.
    correction : {"deconvolution", "none"}
    paper : DistributedRocGlm or None
        The paper's uncorrected estimate of the same run (same release, same rounds).
    auc_placement : float
        Mean placement of the true positives in the noisy negatives (the paper's
        distrAVG): the naive empirical AUC.
    iterations, converged, deviance : int, bool, float
        Fisher scoring outcome of the reported fit (R ``glm``'s rule).
    n_pos, n_neg : int
        Positives and negatives over all sites.
    epsilon, delta, sensitivity, noise_sd : float
        The one noisy release: its guarantee, the sensitivity it was calibrated to and the
        noise standard deviation.
    sensitivity_source : str
        ``"given"`` or ``"estimated at the sites (heuristic)"``.
    sensitivity_is_heuristic : bool
        True when nobody vouched for the sensitivity: the (epsilon, delta) guarantee then
        holds only if the heuristic happens to bound it (see :attr:`guarantee`).
    guarantee : str
        The privacy guarantee in words.
    calibration : str
        ``"classic"`` or ``"analytic"`` Gaussian mechanism.
    thresholds : str
        Threshold rule.
    n_thresholds : int
        The number of grouped rows fitted: the grid's size with the grid rule (the sites'
        tables are summed), the rows of every site's table with the "positives" rule.
    score_range : (float, float)
        Support of the deconvolution.
    bootstrap : int
        Resamples of the noisy negatives behind ``variance_negatives`` (0 without).
    confidence_level : float
        Level of :attr:`ci`.
    sites : dict
        Per site: ``n_pos``, ``n_neg``, and the DP events it released.
    released : Released
        What left the sites (rounds, bytes, DP events, notes).
    deconvolved : BinMixture or None
        The deconvolved distribution of the negatives' true scores (None without the
        correction).
    a0 : float or None
        Reference value of the one-sided test H0: AUC <= a0, if one was asked for.
    """

    g1: float
    g2: float
    auc: float
    ci: tuple[float, float]
    variance: float
    variance_positives: float
    variance_negatives: float
    auc_rocglm: float
    correction: str
    auc_placement: float
    iterations: int
    converged: bool
    deviance: float
    n_pos: int
    n_neg: int
    epsilon: float
    delta: float
    sensitivity: float
    sensitivity_source: str
    noise_sd: float
    calibration: str
    thresholds: str
    n_thresholds: int
    score_range: tuple[float, float]
    bootstrap: int
    confidence_level: float
    sites: dict[str, dict[str, Any]] = field(repr=False)
    released: Released = field(repr=False)
    paper: DistributedRocGlm | None = field(default=None, repr=False)
    deconvolved: BinMixture | None = field(default=None, repr=False)
    a0: float | None = None

    @property
    def se(self) -> float:
        """Standard error of :attr:`auc`, ``sqrt(variance)`` (NaN if negative)."""
        return math.sqrt(self.variance) if self.variance >= 0 else float("nan")

    @property
    def sensitivity_is_heuristic(self) -> bool:
        """Whether the sensitivity was estimated at the sites rather than given (see the class)."""
        return self.sensitivity_source != "given"

    @property
    def guarantee(self) -> str:
        """The privacy guarantee in words, flagged loudly when the sensitivity is a heuristic."""
        text = (
            f"({self.epsilon:g}, {self.delta:.3g})-DP for each row's score, for an "
            f"l2-sensitivity of {self.sensitivity:.4g}"
        )
        if self.sensitivity_is_heuristic:
            return (
                text + " ESTIMATED BY A HEURISTIC, NOT A BOUND: the guarantee holds only if no "
                "row can move the score by more; give the sensitivity of the model"
            )
        return text + " (given)"

    def confidence_interval(self, confidence_level: float | None = None) -> tuple[float, float]:
        """Compute the logit-scale interval (paper 1, eq. 3) at another confidence level."""
        level = self.confidence_level if confidence_level is None else confidence_level
        return logit_ci(self.auc, self.se, level)

    def without_correction(self) -> DistributedRocGlm:
        """Return the paper's uncorrected estimate of the same run (itself when uncorrected)."""
        return self if self.paper is None else self.paper

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
        from fedroc.metrics import roc_curve

        if ax is None:
            from fedroc._plotting import new_figure, roc_axes

            fig = new_figure((5, 5))
            ax = fig.add_subplot()
            roc_axes(ax, "ROC-GLM", chance=False)
        fpr, tpr = self.roc_curve()
        label = f"distributed ROC-GLM (AUC {self.auc_rocglm:.3f})"
        if pooled is not None and 0 < pooled.n_pos < pooled.n:
            efpr, etpr, _ = roc_curve(pooled.label, pooled.score)
            # Straight segments, as the empirical AUC measures the curve (ties included).
            ax.plot(efpr, etpr, color="black", lw=1.2, label="pooled (empirical)")
        ax.plot(fpr, tpr, lw=1.5, label=label)
        ax.plot([0, 1], [0, 1], ls=":", color="grey", lw=0.8)
        ax.legend(loc="lower right", fontsize=8)
        return ax.figure

    def summary(self) -> str:
        """Format the AUC, its interval, the correction, the fit and the privacy spent as text."""
        level = f"{self.confidence_level:.0%}"
        rows: list[tuple[str, Any]] = [
            ("AUC", self.auc),
            (f"{level} CI (logit)", self.ci),
            ("SE", self.se),
            ("correction", self.correction),
        ]
        if self.correction != "none":
            rows += [
                ("  SE from the positives", math.sqrt(max(self.variance_positives, 0.0))),
                (
                    "  SE from the negatives and the noise",
                    math.sqrt(max(self.variance_negatives, 0.0)),
                ),
            ]
        if self.paper is not None:
            rows.append(("AUC of the paper (uncorrected)", self.paper.auc))
        rows += [
            ("ROC-GLM g1, g2", f"{self.g1:.4f}, {self.g2:.4f}"),
            ("ROC-GLM AUC", self.auc_rocglm),
            ("positives / negatives", f"{self.n_pos} / {self.n_neg}"),
            ("privacy", self.guarantee),
            ("noise sd", self.noise_sd),
            ("calibration", self.calibration),
            ("thresholds", f"{self.thresholds} ({self.n_thresholds} rows)"),
            ("Fisher iterations", self.iterations),
            ("converged", self.converged),
            ("rounds", self.released.rounds),
        ]
        if self.a0 is not None:
            z, p = self.test_greater(self.a0)
            rows.append((f"H0: AUC <= {self.a0:g}", f"z = {z:.3f}, p = {p:.4g}"))
        return format_table(rows, title="Distributed ROC-GLM")


@fill_doc
@dataclass(frozen=True)
class NoisyScores:
    """The pooled noisy scores the analyst received (sorted), and how they were made.

    ``per_site[name]`` holds the site's class sizes, its DP events and its ``release`` id
    (which the setup must name); ``parts[name]`` its noisy negatives and positives and its
    signature of them, which the setup passes on so that every site can check that the
    pooled scores are the sites' releases and nothing else.

    Attributes
    ----------
    negative, positive : ndarray of float64
        The noisy scores of all sites' negatives and positives, each sorted.
    {epsilon}
    {delta}
    {l2_sensitivity}
    noise_sd : float
        Standard deviation of the Gaussian noise the sites added.
    calibration : {"classic", "analytic"}
        The Gaussian mechanism's calibration.
    per_site : dict of str to dict
        Per site: ``n_pos``, ``n_neg``, ``release`` and ``dp`` (its DP events as dicts).
    parts : dict of str to (ndarray, ndarray, bytes)
        Per site: its noisy negatives, its noisy positives, and its signature of them.
    """

    negative: FloatArray
    positive: FloatArray
    epsilon: float
    delta: float
    sensitivity: float
    noise_sd: float
    calibration: str
    per_site: dict[str, dict[str, Any]]
    parts: dict[str, tuple[FloatArray, FloatArray, bytes]]


@fill_doc
def site_sensitivity(federation: Federation, *, n_breaks: int | None = None) -> float:
    """Largest heuristic l2-sensitivity over the sites (see ``score_sensitivity``).

    Parameters
    ----------
    {federation}
    {n_breaks}

    Returns
    -------
    float
        The largest of the sites' heuristic sensitivities (not a bound).

    Raises
    ------
    {site_failure}
    """
    args: dict[str, Any] = {} if n_breaks is None else {"n_breaks": int(n_breaks)}
    replies = federation.call(FN_SENSITIVITY, **args)
    return max(float(r["sensitivity"]) for r in replies.values())


def noise_sd(*, epsilon: float, delta: float, sensitivity: float, calibration: str) -> float:
    if calibration == "classic":
        return classic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    if calibration == "analytic":
        return analytic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    raise InputError(f"dp_calibration must be one of {CALIBRATIONS}; got {calibration!r}")


@fill_doc
def release_noisy_scores(
    federation: Federation,
    *,
    epsilon: float,
    delta: float,
    sensitivity: float,
    calibration: str = "classic",
    thresholds: str | None = None,
    score_levels: np.ndarray | None = None,
) -> NoisyScores:
    """Round 2: every site's noisy scores, pooled and sorted by class.

    The noise is each site's own: nothing sent here (no seed) can influence it. The noise
    sd is the sites' (they agree, since they computed it from the same parameters).

    Parameters
    ----------
    {federation}
    {epsilon}
    {delta}
    {l2_sensitivity}
    {calibration}
    thresholds : {{"grid", "positives"}}, optional
        The run's threshold rule, and
    score_levels : ndarray of float, optional
        its score levels: a site held to other levels refuses a grid-rule run before its
        release instead of at the setup after it.

    Returns
    -------
    NoisyScores
        The pooled noisy scores by class and how they were made.

    Raises
    ------
    {site_failure}
        A site with fewer rows of a class than its minimum count refuses, explained.
    InputError
        The sites report different noise standard deviations.
    """
    start = federation.mark()
    with explain_class_count_refusals(
        lambda: (
            "The ROC-GLM releases one noisy score per row, split by class, which tells "
            "how many rows of each class a site has: a site with fewer rows of a class than its "
            "minimum count cannot take part (leave it out, or merge its rows with another site's)"
        )
    ):
        replies = federation.call(
            FN_NOISY,
            epsilon=float(epsilon),
            delta=float(delta),
            sensitivity=float(sensitivity),
            calibration=calibration,
            **({} if thresholds is None else {"thresholds": thresholds}),
            **({} if score_levels is None else {"score_levels": np.asarray(score_levels)}),
        )
    call = federation.transcript[start]
    per_site = {
        name: {
            "n_pos": int(np.size(r["positive"])),
            "n_neg": int(np.size(r["negative"])),
            "release": str(r["release"]),
            "dp": [dataclasses.asdict(e) for e in call.dp.get(name, [])],
        }
        for name, r in replies.items()
    }
    sds = {float(r["noise_sd"]) for r in replies.values()}
    if len(sds) != 1:
        raise InputError(f"the sites released with different noise sd {sorted(sds)}")
    parts = {
        name: (
            np.asarray(r["negative"], np.float64),
            np.asarray(r["positive"], np.float64),
            bytes(r["signature"]),
        )
        for name, r in replies.items()
    }
    neg = np.sort(np.concatenate([p[0] for p in parts.values()]))
    pos = np.sort(np.concatenate([p[1] for p in parts.values()]))
    sd = sds.pop()
    return NoisyScores(neg, pos, epsilon, delta, sensitivity, sd, calibration, per_site, parts)


@dataclass(frozen=True)
class _FitOutcome:
    """Both fits of one setup: index 0 the paper's, 1 the deconvolved (see ``FITS``)."""

    gamma: FloatArray
    deviance: FloatArray
    iterations: NDArray[np.int64]
    converged: NDArray[np.bool_]
    mean_v10: FloatArray
    var_v10: FloatArray
    mean_v01: float
    var_v01: float
    n_pos: int
    n_neg: int
    n_rows: int


@fill_doc
def fit_release(
    federation: Federation,
    noisy: NoisyScores,
    *,
    thresholds: str = "grid",
    n_thresholds: int = DEFAULT_N_THRESHOLDS,
    score_range: tuple[float, float] = (0.0, 1.0),
    score_levels: FloatArray | None = None,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
) -> _FitOutcome:
    """Run rounds 3-5 on one release of noisy scores (each release serves one setup).

    Parameters
    ----------
    {federation}
    noisy : NoisyScores
        The release (:func:`release_noisy_scores`) the sites fit on.
    {rocglm_thresholds}
    {rocglm_n_thresholds}
    score_range : (float, float), default (0.0, 1.0)
        Public range of the scores, the support of the deconvolution.
    score_levels : ndarray of float, optional
        The public set of values the scores take, if any.
    bootstrap : int, default 50
        Resamples of the noisy negatives of the bagged deconvolution.
    {tol}
    {max_iter}

    Returns
    -------
    _FitOutcome
        Both fits (the paper's and the deconvolved), their Fisher-scoring outcome and the
        pooled placement moments and class sizes.

    Raises
    ------
    {site_failure}
    """
    check_rule(thresholds)
    session = secrets.token_hex(8)
    # The releases joined site by site, with their signatures: each site checks that the
    # pooled scores hold its own release and the other sites' signed ones, nothing else.
    released = list(noisy.parts.values())
    common: dict[str, Any] = {
        "session": session,
        "negative": np.concatenate([p[0] for p in released]),
        "positive": np.concatenate([p[1] for p in released]),
        "parts": list(noisy.parts),
        "part_sizes": np.array([[p[0].size, p[1].size] for p in released], np.int64),
        # An unsigned release (a site without a signing key) as zeros: its partners refuse
        # it by name.
        "part_signatures": b"".join(p[2] or bytes(SIGNATURE_BYTES) for p in released),
        "thresholds": thresholds,
        "n_thresholds": int(n_thresholds),
        "score_range": np.asarray(score_range, np.float64),
        "bootstrap": int(bootstrap),
    }
    if score_levels is not None:
        common["score_levels"] = np.asarray(score_levels, np.float64)
    if thresholds == "grid":
        _check_secure_table(list(noisy.per_site))
    sums = federation.call_each(
        FN_SETUP,
        {name: {**common, "release": info["release"]} for name, info in noisy.per_site.items()},
    )
    if thresholds == "grid":
        return _fit_pooled_table(federation, session, sums, tol=tol, max_iter=max_iter)
    n_pos = sum(int(r["n_pos"]) for r in sums.values())
    n_neg = sum(int(r["n_neg"]) for r in sums.values())
    mean_v10 = sum(np.asarray(r["sum_v10"], np.float64) for r in sums.values()) / n_pos
    mean_v01 = sum(float(r["sum_v01"]) for r in sums.values()) / n_neg
    n_rows = sum(int(r["n_rows"]) for r in sums.values())
    sites = list(sums)

    def parts(gamma: FloatArray, which: NDArray[np.int64]) -> FisherParts:
        replies = federation.call(FN_FISHER, sites=sites, session=session, gamma=gamma, fits=which)
        total = FisherParts.zeros(which.size)
        for r in replies.values():
            total = total + FisherParts(
                np.asarray(r["loglik"]), np.asarray(r["score"]), np.asarray(r["information"])
            )
        return total

    trace = fisher_scoring(parts, len(FITS), tol=tol, max_iter=max_iter)
    ss = federation.call(
        FN_PLACEMENT_SS, sites=sites, session=session, mean_v10=mean_v10, mean_v01=mean_v01
    )
    ss10 = sum(np.asarray(r["ss_v10"], np.float64) for r in ss.values())
    ss01 = sum(float(r["ss_v01"]) for r in ss.values())
    return _outcome(
        trace, np.asarray(mean_v10), np.asarray(ss10), mean_v01, ss01, n_pos, n_neg, n_rows
    )


def _outcome(
    trace: ScoringTrace,
    mean_v10: FloatArray,
    ss10: FloatArray,
    mean_v01: float,
    ss01: float,
    n_pos: int,
    n_neg: int,
    n_rows: int,
) -> _FitOutcome:
    """Both fits' outcome, with the placements' variances from their centred sums of squares."""
    var10 = ss10 / (n_pos - 1) if n_pos > 1 else np.full(len(FITS), np.nan)
    var01 = ss01 / (n_neg - 1) if n_neg > 1 else float("nan")
    return _FitOutcome(
        trace.gamma,
        trace.deviance,
        trace.iterations,
        trace.converged,
        np.asarray(mean_v10, np.float64),
        np.asarray(var10, np.float64),
        float(mean_v01),
        float(var01),
        n_pos,
        n_neg,
        n_rows,
    )


def _check_secure_table(sites: list[str]) -> None:
    """Refuse a grid run secure aggregation cannot serve, before anything is released.

    One site's summed table would be its own exact counts at the grid's cutoffs. Two sites
    pass here; their policies refuse secure sums over two unless they allow them
    (``secagg_min_sites``, default 3), which :func:`distributed_rocglm` asks before the
    noisy release (:func:`fedroc.secagg.check_secure_sum`).
    """
    if len(sites) < 2:
        raise InputError(
            "the ROC-GLM's grid table leaves the sites only through secure aggregation, "
            "which needs at least 2 sites (and their policies' secagg_min_sites, default 3); "
            f"got {len(sites)} site(s) {sites}"
        )


def _fit_pooled_table(
    federation: Federation,
    session: str,
    setups: dict[str, Any],
    *,
    tol: float,
    max_iter: int,
) -> _FitOutcome:
    """Run rounds 4-5 on the grid rule: one secure sum of the sites' tables, a local fit.

    Every site's table lives on the same grid ``x_j = Phi^-1(t_j)``, and the binomial
    log-likelihood, score and information are linear in (successes, trials): the sum of
    the sites' Fisher parts is the Fisher part of the summed table. So the sites send their
    tables and placement moments through secure aggregation (:data:`FN_TABLE`) and the
    analyst, who sees only the sums, fits and takes the variances on its own: the same
    numbers as the per-site rounds, without a per-site count.
    """
    digests = {str(r["setup"]) for r in setups.values()}
    rows = {int(r["n_rows"]) for r in setups.values()}
    if len(digests) != 1 or len(rows) != 1:
        raise ProtocolError(
            "the sites report different setups of the same pooled scores; no table was summed"
        )
    table = secure_sum(
        federation, FN_TABLE, sites=list(setups), frac_bits=0, session=session, setup=digests.pop()
    )
    if sorted(table.sites) != sorted(setups):
        raise ProtocolError(
            f"the secure sum of the ROC-GLM tables holds the sites {sorted(table.sites)}, "
            f"not all of {sorted(setups)}"
        )
    n_pos, n_neg = int(table["n_pos"]), int(table["n_neg"])
    successes = np.asarray(table["successes"], np.float64)
    t = threshold_grid(rows.pop())
    x = np.asarray(special.ndtri(t), np.float64)
    trials = np.full(t.size, float(n_pos))

    def parts(gamma: FloatArray, which: NDArray[np.int64]) -> FisherParts:
        return probit_parts(x, successes[which], trials, gamma)

    trace = fisher_scoring(parts, len(FITS), tol=tol, max_iter=max_iter)

    def moment(name: str) -> FloatArray:
        return from_fixed_point(table[name + "_whole"], table[name + "_frac"])

    sum10, sum01 = moment("v10"), float(moment("v01"))
    mean_v10, mean_v01 = sum10 / n_pos, sum01 / n_neg
    # Centred sums of squares from the raw ones: the placements lie in [0, 1] and their
    # variance is not small against their mean, so the difference loses little.
    ss10 = moment("v10_sq") - sum10 * mean_v10
    ss01 = float(moment("v01_sq")) - sum01 * mean_v01
    return _outcome(trace, mean_v10, ss10, mean_v01, ss01, n_pos, n_neg, int(t.size))


def _noisy_histogram_profile(
    mixture: BinMixture, positive: FloatArray, n_bins: int = _PLUGIN_BINS
) -> FloatArray:
    """``c_g``: the share of positives above bin ``g``'s value, from the noisy positives.

    The noisy positives (clipped into the score range) are counted in ``n_bins`` equal
    parts of it and spread uniformly inside each; ``c_g = E[P(U_g <= P)]``.
    """
    lo, hi = mixture.lo, mixture.hi
    part = np.minimum(
        ((np.clip(positive, lo, hi) - lo) / (hi - lo) * n_bins).astype(int), n_bins - 1
    )
    share = np.bincount(part, minlength=n_bins) / positive.size
    fine = 40 * n_bins  # points per part: the bins' CDFs are piecewise linear
    mids = lo + (np.arange(fine * n_bins) + 0.5) * (hi - lo) / (fine * n_bins)
    weight = np.repeat(share / fine, fine)
    return np.asarray(mixture.bin_cdf(mids).T @ weight)


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
    if sensitivity is None:
        sensitivity = site_sensitivity(federation, n_breaks=n_breaks)
        source = "estimated at the sites (heuristic)"
        notes.append(
            f"HEURISTIC SENSITIVITY: l2-sensitivity {sensitivity:.4g} estimated at the sites "
            "by the reference code's heuristic (largest score difference of rows in adjacent "
            "histogram cells); it is not a proven bound, so the DP guarantee is heuristic too"
        )
    else:
        source = "given"
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


def _check_privacy_arguments(
    epsilon: float | None, delta: float | None, sensitivity: float | None, privacy: str
) -> None:
    """Refuse privacy arguments that no site need be asked about (before any call)."""
    if privacy not in PRIVACY_SETTINGS:
        raise InputError(f"privacy must be one of {PRIVACY_SETTINGS}; got {privacy!r}")
    if sensitivity is not None and not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise InputError(f"sensitivity must be a positive number; got {sensitivity!r}")
    if (epsilon is None) != (delta is None):
        raise InputError("give both epsilon and delta, or neither (to use the default setting)")
    if privacy == "paper" and epsilon is not None:
        # The values replaced the paper's (epsilon, delta) and its classic calibration
        # stayed, without a word: neither the paper's setting nor the values alone. Here,
        # not only in the CLI: a Flower job reaches the method through evaluate().
        raise InputError(
            "privacy='paper' does not apply with epsilon and delta: it chooses the "
            "(epsilon, delta) of a run without them (paper 1's table); give one or the other "
            "(paper 1's Gaussian mechanism at your own values: dp_calibration='classic')"
        )
    # The sites check these too, but only when the noisy scores are asked for: after the
    # sensitivity and scale rounds, and as one refusal per site naming their keywords.
    if epsilon is not None and not (epsilon > 0 and math.isfinite(epsilon)):
        raise InputError(f"epsilon must be a positive number; got {epsilon!r}")
    if delta is not None and not 0 < delta < 1:
        raise InputError(f"delta must lie in (0, 1); got {delta!r}")


def _check_sites_allow(
    federation: Federation,
    epsilon: float,
    delta: float,
    sensitivity: float,
    calibration: str,
    privacy: str | None = None,
) -> None:
    """Refuse a release some site would refuse for its limits or floor, before any releases.

    Each site charges the noisy scores (epsilon, delta) and refuses a sensitivity under its
    ``rocglm_min_sensitivity``; one that refused did so only after the others had released
    theirs and been charged, for a run that gave nothing (as the histogram's local DP,
    97b1203). The sites say what their limits leave and their floor
    (``fedroc.epsilon_left``), releasing nothing.
    """
    from fedroc.federation.basic import site_limits
    from fedroc.privacy.mechanisms import analytic_gaussian_delta

    replies = site_limits(federation)
    floors = {k: r.get("rocglm_min_sensitivity", 0.0) for k, r in replies.items()}
    low = {k: v for k, v in sorted(floors.items()) if sensitivity < v - 1e-12}
    if low:
        named = "; ".join(f"site {k!r} (rocglm_min_sensitivity {v:g})" for k, v in low.items())
        raise InputError(
            f"sensitivity {sensitivity:g} is below the floor of {named}; nothing was "
            f"released; give sensitivity {max(low.values()):g} or more (the noise is "
            "calibrated to it), or ask the sites' operators to lower rocglm_min_sensitivity"
        )
    charged = delta
    if calibration == "classic":
        # What the sites charge: the classic noise's exact delta where it exceeds delta.
        sigma = noise_sd(
            epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration=calibration
        )
        exact = analytic_gaussian_delta(sigma, epsilon=epsilon, sensitivity=sensitivity)
        charged = max(delta, exact)
    for what, asked, key, fit in (
        ("epsilon", epsilon, "epsilon_left", epsilon_fits),
        ("delta", charged, "delta_left", delta_fits),
    ):
        left = {k: r[key] for k, r in replies.items() if key in r}
        short = {k: v for k, v in sorted(left.items()) if not fit(asked, v)}
        if not short:
            continue
        if len(short) == 1:
            ((name, value),) = short.items()
            # Rounded down: 12.34567 left read "(12.35)", more than is left.
            sites = f"site {name!r} has left of its {what} limit ({shown_left(value)})"
        else:
            # "is more than sites site 'a' (0.0025); site 'b' (...) have left of ..." read
            # as a garbled sentence.
            listed = "; ".join(f"site {k!r} {shown_left(v)}" for k, v in short.items())
            sites = f"what the sites have left of their {what} limits ({listed})"
        least = max(min(short.values()), 0.0)
        fits = largest_fitting(least, fits=fit)  # the sites' own comparison, as printed
        if privacy == "paper":
            # The analyst gave no epsilon or delta (they are refused with this setting):
            # "give delta 0.00333 or less" told them to give what they cannot.
            raise InputError(
                f"privacy 'paper' releases at {what} {asked:.4g} (paper 1's table; each "
                f"site's charge for its noisy scores), which is more than {sites}; nothing was "
                f"released; leave the paper's setting out (the default is epsilon 1, delta "
                f"1/(10 n) of the largest site), or ask the sites' operators to raise "
                f"{what}_limit"
            )
        instead = (
            f"give {what} {fits:g} or less, or ask the sites' operators to raise {what}_limit"
            if fits > 0
            else f"no {what} fits; the sites' operators would have to raise {what}_limit"
        )
        raise InputError(
            f"{what} {asked:.4g} (each site's charge for its noisy scores) is more than "
            f"{sites}; nothing was released; {instead}"
        )


def _check_range(score_range: Any) -> tuple[float, float]:
    if score_range is None:
        return (0.0, 1.0)
    try:
        lo, hi = (float(v) for v in score_range)
    except (TypeError, ValueError):
        raise InputError(f"score_range must be two numbers (lo, hi); got {score_range!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise InputError(f"score_range must be two finite numbers lo < hi; got {score_range!r}")
    return (lo, hi)


def check_scale(
    federation: Federation, support: tuple[float, float], levels: FloatArray | None
) -> None:
    """Refuse, before any release, a run whose scores the correction cannot serve."""
    args: dict[str, Any] = {"score_range": np.asarray(support, np.float64)}
    if levels is not None:
        args["score_levels"] = np.asarray(levels, np.float64)
    replies = federation.call(FN_SCALE, **args)
    outside = sorted(name for name, r in replies.items() if not r["in_range"])
    if outside and levels is None:
        raise InputError(
            f"site(s) {outside} have scores outside the score range [{support[0]:g}, "
            f"{support[1]:g}] or outside the range of their one grid of exact counts: the bias "
            "correction needs a public range that holds every site's scores; pass "
            "score_range=(lo, hi) (--score-range LO,HI), and for scores that are not "
            "probabilities their l2-sensitivity (sensitivity=, --sensitivity). A site's grid "
            "is bound by its first answer about a range (this question too, whatever its "
            "answer) or its first histogram, calibration or clustered request; a site whose "
            "scores lie outside it takes no part on its ledger (`fedroc privacy status` at the "
            "site shows the grid; its operator may start it on a new ledger)"
        )
    off = sorted(name for name, r in replies.items() if not r["on_levels"])
    if off:
        raise InputError(
            f"site(s) {off} have scores that are not among the declared score_levels; pass "
            "the levels of the scale every site's scores take"
        )
    rated = sorted(name for name, r in replies.items() if r["few_values"])
    if rated and levels is None:
        raise InputError(
            f"site(s) {rated} have at most {MAX_UNDECLARED_LEVELS} distinct scores (a rating "
            "scale): the deconvolution cannot count ties one half on a scale it does not "
            "know; pass score_levels= (--score-levels, the scale's values, public), or "
            "correction='none' (--correction none) for paper 1's uncorrected estimate"
        )


@fill_doc
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
    correction: str = "deconvolution",
    score_range: tuple[float, float] | None = None,
    score_levels: Any = None,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    confidence_level: float = 0.95,
    seed: int | None = None,
    a0: float | None = None,
    n_breaks: int | None = None,
    tol: float = DEFAULT_TOL,
    max_iter: int = DEFAULT_MAX_ITER,
) -> DistributedRocGlm:
    """Distributed ROC-GLM with differential privacy and a confidence interval that covers.

    Without ``sensitivity`` the sites first report the sensitivity heuristic
    (:func:`site_sensitivity`); every score is then released once with Gaussian noise
    (:func:`release_noisy_scores`), and the sites fit on that one release
    (:func:`fit_release`).

    Parameters
    ----------
    {federation}
    epsilon, delta : float, optional
        Privacy of the one noisy release of every score. Give both, or neither for the
        setting ``privacy`` names.
    sensitivity : float, optional
        l2-sensitivity of the model's score. None estimates it at the sites with the
        reference code's heuristic (not a bound; the result flags it), which needs
        probability scores: on another scale pass the sensitivity and ``score_range``.
    dp_calibration : {"classic", "analytic"}, optional
        Gaussian mechanism of the paper (proven for epsilon < 1) or Balle & Wang's analytic
        one (exact for every epsilon, less noise). Default: analytic, or classic with
        ``privacy="paper"``.
    privacy : {"default", "paper"}
        Without epsilon and delta: ``"default"`` releases at epsilon 1 and delta
        ``1/(10 n)`` for the largest site's n (analytic Gaussian), which ten runs keep
        within every site's default lifetime budget; ``"paper"`` uses paper 1's
        recommendation for the l2-sensitivity (:func:`recommended_privacy`), whose delta
        (0.1 to 0.5) sites refuse unless their policy raises ``delta_limit``. ``"paper"``
        with epsilon and delta is refused (paper 1's mechanism at other values:
        ``dp_calibration="classic"``).
    thresholds : {"grid", "positives"}, default "grid"
        Threshold rule (see ``fedroc.methods.rocglm._core``); "positives" runs only at
        sites whose policy opts in (it discloses the positives' scores).
    n_thresholds : int, default 28
        Size of the grid (2 to 64).
    correction : {"deconvolution", "none"}
        "deconvolution" (default) corrects the noise's bias and includes the noise in the
        interval (see the module docstring); "none" is the paper's estimate, which the
        result also carries as :attr:`DistributedRocGlm.paper`.
    score_range : (float, float), optional
        Public range of the scores, the support of the deconvolution; default ``(0, 1)``.
        Sites whose scores fall outside refuse.
    score_levels : array-like, optional
        The public, finite set of values the scores take (a rating scale). The
        deconvolution then puts point masses exactly there, so that ties count one half
        (bins cannot locate them that precisely). Sites with other scores refuse.
    bootstrap : int, default 50
        Resamples of the noisy negatives (2 to 500) the deconvolution is bagged over and
        the correction's variance is taken from; every site refits that many times.
    {confidence_level}
    seed : int, optional
        Unused by the ROC-GLM: its only resampling (the bagged deconvolution) is seeded
        by the released noisy values, so that the sites and the analyst draw the same
        resamples. The sites' DP noise is theirs: a seed for it can only come from a
        site's own configuration.
    a0 : float, optional
        Reference value of the one-sided test H0: AUC <= a0 reported in the summary.
    n_breaks : int, optional
        Histogram cells of the sites' sensitivity heuristic (only without
        ``sensitivity``); default a third of each site's rows.
    {tol}
    {max_iter}

    Returns
    -------
    DistributedRocGlm
        The AUC, its interval and variance, the binormal fit, the privacy release and what
        left the sites; ``paper`` holds the uncorrected estimate.

    Raises
    ------
    InputError
        An option out of range (messages name it).
    {site_failure}
    """
    if not 0.0 < confidence_level < 1.0:
        raise InputError(f"confidence_level must lie in (0, 1); got {confidence_level!r}")
    if a0 is not None and not 0.0 < a0 < 1.0:
        raise InputError(f"a0 must lie in (0, 1); got {a0!r}")
    check_rule(thresholds)
    if correction not in CORRECTIONS:
        raise InputError(f"correction must be one of {CORRECTIONS}; got {correction!r}")
    if dp_calibration is None:
        dp_calibration = "classic" if privacy == "paper" else "analytic"
    if dp_calibration not in CALIBRATIONS:
        raise InputError(f"dp_calibration must be one of {CALIBRATIONS}; got {dp_calibration!r}")
    if int(n_thresholds) != n_thresholds or not 2 <= n_thresholds <= MAX_THRESHOLDS:
        raise InputError(
            f"n_thresholds must be an integer in [2, {MAX_THRESHOLDS}]; got {n_thresholds!r}"
        )
    if int(bootstrap) != bootstrap or not 2 <= bootstrap <= MAX_RESAMPLES:
        raise InputError(f"bootstrap must be an integer in [2, {MAX_RESAMPLES}]; got {bootstrap!r}")
    levels = check_levels(score_levels)
    support = _check_range(score_range) if levels is None else (levels[0], levels[-1])
    threshold_grid(n_thresholds)  # validates
    _check_privacy_arguments(epsilon, delta, sensitivity, privacy)
    start = federation.mark()
    if thresholds == "grid":
        _check_secure_table(federation.site_names)
        # The sites' policies decide whether they sum their tables (secagg_min_sites, their
        # partners, exact counts released in the clear before): asked now, a refusal comes
        # before the release it would have wasted.
        check_secure_sum(federation, FN_TABLE, exact_counts=True)
    if correction == "deconvolution":
        check_scale(federation, support, levels)
    eps, dlt, sens, source, notes = _privacy_parameters(
        federation, epsilon, delta, sensitivity, n_breaks, privacy
    )
    _check_sites_allow(federation, eps, dlt, sens, dp_calibration, privacy)
    noisy = release_noisy_scores(
        federation,
        epsilon=eps,
        delta=dlt,
        sensitivity=sens,
        calibration=dp_calibration,
        thresholds=thresholds,
        score_levels=levels,
    )
    notes.append(
        f"each row's score released once with Gaussian noise (sd {noisy.noise_sd:.4g}, "
        f"{dp_calibration} calibration): ({eps:g}, {dlt:g})-DP per row"
    )
    if dp_calibration == "classic" and eps >= 1.0:
        # What the sites charged: the mechanism's exact delta where it exceeds the claimed one.
        charged = max(federation.released(start).delta.values(), default=dlt)
        notes.append(
            "the classic Gaussian calibration is proven only for epsilon < 1: at this epsilon "
            f"its noise is ({eps:g}, {charged:.3g})-DP per row, which each site charged; "
            "dp_calibration='analytic' gives the claimed delta with less noise"
        )
    outcome = fit_release(
        federation,
        noisy,
        thresholds=thresholds,
        n_thresholds=n_thresholds,
        score_range=support,
        score_levels=levels,
        bootstrap=bootstrap,
        tol=tol,
        max_iter=max_iter,
    )
    for k in range(len(FITS)):
        warn_unconverged(bool(outcome.converged[k]), max_iter)
    released = federation.released(start)
    common: dict[str, Any] = {
        "n_pos": outcome.n_pos,
        "n_neg": outcome.n_neg,
        "epsilon": eps,
        "delta": dlt,
        "sensitivity": sens,
        "sensitivity_source": source,
        "noise_sd": noisy.noise_sd,
        "calibration": dp_calibration,
        "thresholds": thresholds,
        "n_thresholds": outcome.n_rows,
        "score_range": (float(support[0]), float(support[1])),
        "confidence_level": confidence_level,
        "sites": noisy.per_site,
        "auc_placement": float(outcome.mean_v10[_PAPER]),
        "a0": a0,
    }

    def fit_fields(k: int) -> dict[str, Any]:
        g1, g2 = float(outcome.gamma[k, 0]), float(outcome.gamma[k, 1])
        return {
            "g1": g1,
            "g2": g2,
            "auc_rocglm": binormal_auc(g1, g2),
            "iterations": int(outcome.iterations[k]),
            "converged": bool(outcome.converged[k]),
            "deviance": float(outcome.deviance[k]),
        }

    var_paper = outcome.var_v10[_PAPER] / outcome.n_pos + outcome.var_v01 / outcome.n_neg
    paper_fields = fit_fields(_PAPER)
    paper = DistributedRocGlm(
        auc=paper_fields["auc_rocglm"],
        ci=logit_ci(paper_fields["auc_rocglm"], math.sqrt(var_paper), confidence_level),
        variance=float(var_paper),
        variance_positives=float(outcome.var_v10[_PAPER] / outcome.n_pos),
        variance_negatives=float(outcome.var_v01 / outcome.n_neg),
        correction="none",
        bootstrap=0,
        released=released.with_notes(
            *notes, "uncorrected (paper 1): the noise biases the AUC towards 1/2"
        ),
        **paper_fields,
        **common,
    )
    if correction == "none":
        return paper
    # The sites placed their positives in this bagged distribution (the same resamples:
    # their generator is seeded by S~0); the refits' spread is the noise's variance.
    mixture, weights = bagged(
        noisy.negative,
        noisy.noise_sd,
        score_range=support,
        levels=levels,
        replicates=bootstrap,
    )
    profile = _noisy_histogram_profile(mixture, noisy.positive)
    var_neg = float(np.var(weights @ profile, ddof=1))
    var_pos = float(outcome.var_v10[_DECONVOLVED] / outcome.n_pos)
    auc = float(outcome.mean_v10[_DECONVOLVED])
    variance = var_pos + var_neg
    where = (
        f"the score range [{support[0]:g}, {support[1]:g}]"
        if levels is None
        else f"the {levels.size} declared score levels"
    )
    notes.append(
        f"bias corrected by deconvolving the noisy negatives on {where}, bagged over "
        f"{bootstrap} resamples of them; the interval includes the noise (the resamples' "
        "spread)"
    )
    return DistributedRocGlm(
        auc=auc,
        ci=logit_ci(auc, math.sqrt(variance), confidence_level),
        variance=variance,
        variance_positives=var_pos,
        variance_negatives=var_neg,
        correction=correction,
        bootstrap=int(bootstrap),
        released=released.with_notes(*notes),
        paper=paper,
        deconvolved=mixture,
        **fit_fields(_DECONVOLVED),
        **common,
    )
