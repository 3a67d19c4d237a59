"""Distributed ROC-GLM with differential privacy and the distributed DeLong CI.

Paper 1: Schalk, Hoffmann, Bischl & Mansmann, "Distributed non-disclosive validation of
predictive models by a modified ROC-GLM" (../shared/papers/rocglm-distributed-schalk.md,
sections 3.4 and 4; NOTES.md section 1).

- :mod:`._core`: the pooled ROC-GLM (grouped binomial probit fit, threshold rules,
  placement values, the binormal curve and AUC), paper 1's recommended privacy settings
  and the reference code's sensitivity heuristic.
- :mod:`._probit`: Fisher scoring with R ``glm``'s stopping rule, for a batch of fits.
- :mod:`._site`: the site functions (``rocglm.*``).
- :mod:`._deconvolution`: the noisy negatives' distribution, deconvolved on the known
  score range (the bias correction).
- :mod:`._distributed`: the analyst side, the result object and its interval.
- :mod:`._confusion`: the distributed confusion matrix (dsBinVal's ``dsConfusion``).
- :mod:`._sensitivity`: the sensitivity heuristic on a model's features (section 4.2).

The paper's simulation, figures and GBSG2 use case are experiments on top of the method:
:mod:`fedroc.experiments.rocglm_simulation`, :mod:`fedroc.experiments.rocglm` (``fedroc
figures --paper 1``) and :mod:`fedroc.experiments.gbsg2` (``fedroc demo``).

Threat model
------------
A curious analyst who uses fedroc's public calls with arguments of its choosing (it may
deviate from the protocol: craft survivor functions, replay, ask again); honest sites that
do not collude with it. What leaves a site, and what the site decides:

1. Every row's score plus Gaussian noise, once per release, sorted and split by class
   (principle A2). Each row's score is (epsilon, delta)-DP for the given l2-sensitivity;
   the noise is the site's own (OpenDP, or a seed in its configuration) and its ledger
   refuses releases beyond its budget. The class sizes are revealed. With no sensitivity
   given, the sites' heuristic (``score_sensitivity``, on probability scores only) is not
   a bound, and the result, the CLI table and the report say so. Paper 1's recommended
   settings (delta 0.1 to 0.5) protect little; sites refuse them unless configured.
2. Per release, one setup (the site refuses a second), whose pooled noisy scores must be
   the site's own release and other sites' signed releases (point 3). The site computes
   everything else itself from them and the public rule: the grid of at most 64
   thresholds, the placements of its positives in the noisy negatives and in their
   deconvolution, two grouped tables. It then releases
   sums over its positives (at least q): the placement sums and sums of squares
   (distrAVG, distrVAR) and, for at most 60 Fisher-scoring calls, log-likelihoods, score
   vectors and Fisher informations of the two tables. These are not DP. Over many calls
   they can reveal the two tables, i.e. the number of the site's positives above each of
   at most 2 x 64 cutoffs that are functions of the pooled noisy negatives.
3. What the analyst can no longer steer: the pooled noisy scores it sends. Fabricated
   values beside the site's own release (padding) let it move those cutoffs where it
   liked (128 counts of its choosing per release, measured on main f7f2024). Now every
   site signs its release with its signing key, and a setup pools signed releases only:
   the site's own part must be what it released, every other part must carry the
   signature of the site it is named for under the key of its operator's roster
   (:mod:`fedroc.federation.roster`). The cutoffs are then the sites' noisy scores. A site
   without a roster sets up on its own release alone. Which releases to pool is still the
   analyst's choice, and cheap releases place a pooled value where it likes: so on the grid
   rule a site computes on its scores rounded to the cells of its one grid of exact secure
   counts (:func:`fedroc.federation.basic.grid_representatives`), and its tables tell
   nothing finer than that grid's exact tree, however many setups (A1).
4. The reference code's "positives" threshold rule uses each positive's score as a
   threshold. The Fisher information at chosen coefficients then discloses those scores,
   so a site runs it only if its policy opts in (``opt_in = ["rocglm.positives_rule"]``).
5. The confusion matrix (``rocglm.confusion``) releases four cells of at least q rows, at
   thresholds spaced so that no two released tables subtract to fewer than q rows of a
   class (the site keeps its released thresholds in its ledger).

The analyst sends S~0 and S~1 (the pooled noisy scores) back to every site, so every
site learns the other sites' noisy scores too.
"""

from __future__ import annotations

import inspect
from typing import Any

from fedroc._docs import fill, parameters_of
from fedroc.methods import EvaluationInputs, EvaluationResult, register_method
from fedroc.methods.rocglm._calibration import SiteCalibrationCurves, site_calibration_curves
from fedroc.methods.rocglm._confusion import ConfusionMatrix, distributed_confusion
from fedroc.methods.rocglm._core import (
    DEFAULT_N_THRESHOLDS,
    THRESHOLD_RULES,
    GroupedTable,
    PrivacyCautionWarning,
    RocGlmFit,
    binormal_auc,
    binormal_auc_integral,
    binormal_roc,
    delong_placements,
    recommended_privacy,
    rocglm,
    rocglm_from_scores,
    score_sensitivity,
)
from fedroc.methods.rocglm._deconvolution import BinMixture, deconvolve
from fedroc.methods.rocglm._distributed import (
    CORRECTIONS,
    DEFAULT_BOOTSTRAP,
    DistributedRocGlm,
    NoisyScores,
    distributed_rocglm,
    fit_release,
    release_noisy_scores,
    site_sensitivity,
)
from fedroc.methods.rocglm._sensitivity import FeatureSensitivity, feature_sensitivity

__all__ = [
    "CORRECTIONS",
    "DEFAULT_BOOTSTRAP",
    "DEFAULT_N_THRESHOLDS",
    "THRESHOLD_RULES",
    "BinMixture",
    "ConfusionMatrix",
    "DistributedRocGlm",
    "FeatureSensitivity",
    "GroupedTable",
    "NoisyScores",
    "PrivacyCautionWarning",
    "RocGlmFit",
    "SiteCalibrationCurves",
    "binormal_auc",
    "binormal_auc_integral",
    "binormal_roc",
    "deconvolve",
    "delong_placements",
    "distributed_confusion",
    "distributed_rocglm",
    "feature_sensitivity",
    "fit_release",
    "recommended_privacy",
    "release_noisy_scores",
    "rocglm",
    "rocglm_from_scores",
    "run_rocglm",
    "score_sensitivity",
    "site_calibration_curves",
    "site_sensitivity",
]


@register_method(
    "rocglm",
    "distributed ROC-GLM with DP noisy survivor function and a CI that covers (paper 1)",
    demo_options={"sensitivity": 0.01},
)
def run_rocglm(inputs: EvaluationInputs, **options: Any) -> EvaluationResult:
    """``fedroc evaluate --method rocglm``: see :func:`distributed_rocglm`.

    The options are those of :func:`distributed_rocglm` but the ones evaluate sets itself
    (the confidence level and the seed, from ``inputs``) and the fit's internals
    (``n_breaks``, ``tol``, ``max_iter``): the signature says which, and another is refused.

    Parameters
    ----------
    {inputs}
    {options}

    Returns
    -------
    {evaluation_result}
    """
    _RUN_SIGNATURE.bind(inputs, **options)  # TypeError naming an option it does not take
    res = distributed_rocglm(
        inputs.federation,
        confidence_level=inputs.confidence_level,
        seed=inputs.seed,
        **options,
    )
    a0 = options.get("a0")
    extra: dict[str, Any] = {
        # The sums of the class sizes each site released with its noisy scores (the
        # "sites" list gives them per site), under the pooled reference's keys.
        "n": res.n_pos + res.n_neg,
        "n_pos": res.n_pos,
        "n_neg": res.n_neg,
        "rocglm_params": [res.g1, res.g2],
        "auc_rocglm": res.auc_rocglm,
        "correction": res.correction,
        "epsilon": res.epsilon,
        "delta": res.delta,
        "sensitivity": res.sensitivity,
        "sensitivity_source": res.sensitivity_source,
        "sensitivity_is_heuristic": res.sensitivity_is_heuristic,
        "privacy_guarantee": res.guarantee,
        "dp_calibration": res.calibration,
        "noise_sd": res.noise_sd,
        "thresholds": res.thresholds,
        "auc_se": res.se,
        "iterations": res.iterations,
        "converged": res.converged,
    }
    if res.paper is not None:
        extra["auc_uncorrected"] = res.paper.auc
        extra["auc_ci_uncorrected"] = list(res.paper.ci)
    if a0 is not None:
        z, p = res.test_greater(a0)
        extra["auc_test"] = {"a0": a0, "z": z, "p_value": p}
    return EvaluationResult(
        method="rocglm",
        sites=[
            # Each site released its noisy scores per class, so its class sizes are known.
            {"name": k, "n": v["n_pos"] + v["n_neg"], "n_pos": v["n_pos"]}
            for k, v in res.sites.items()
        ],
        auc=res.auc,
        auc_ci=res.ci,
        released=res.released,
        extra=extra,
        confidence_level=inputs.confidence_level,
        details=res,
    )


def _run_signature() -> inspect.Signature:
    own = inspect.signature(distributed_rocglm).parameters.values()
    inputs = inspect.Parameter(
        "inputs", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="EvaluationInputs"
    )
    internal = ("federation", "confidence_level", "seed", "n_breaks", "tol", "max_iter")
    return inspect.Signature(
        [inputs, *(p for p in own if p.name not in internal)],
        return_annotation="EvaluationResult",
    )


#: What :func:`run_rocglm` takes (``fedroc evaluate`` reads it to refuse other options).
_RUN_SIGNATURE = _run_signature()
run_rocglm.__signature__ = _RUN_SIGNATURE  # type: ignore[attr-defined]
run_rocglm.__doc__ = fill(
    run_rocglm.__doc__ or "",
    options=parameters_of(distributed_rocglm, list(_RUN_SIGNATURE.parameters)[1:]),
)
