"""Distributed ROC-GLM with differential privacy and the distributed DeLong CI.

Paper 1: Schalk, Hoffmann, Bischl & Mansmann, "Distributed non-disclosive validation of
predictive models by a modified ROC-GLM" (../shared/papers/rocglm-distributed-schalk.md,
sections 3.4 and 4; NOTES.md section 1).

- :mod:`._core`: the pooled ROC-GLM (grouped binomial probit fit, threshold rules,
  placement values, the binormal curve and AUC), paper 1's recommended privacy settings
  and the reference code's sensitivity heuristic.
- :mod:`._probit`: Fisher scoring with R ``glm``'s stopping rule, for a batch of fits.
- :mod:`._site`: the site functions (``rocglm.*``).
- :mod:`._distributed`: the analyst side, the result object and SIMEX.
- :mod:`.gbsg2`: the use case of section 6 on the GBSG2 data.

Threat model
------------
Honest-but-curious analyst and sites; no collusion assumptions are needed because no
site sees another's data. What leaves a site:

1. Every row's score plus Gaussian noise, once, sorted and split by class (principle
   A2). Under the paper's definition each row's score is (epsilon, delta)-DP given the
   l2-sensitivity; the guarantee is only as good as that sensitivity, and the site
   heuristic (``score_sensitivity``) is not a bound. The class sizes are revealed.
   Paper 1's recommended settings use delta between 0.1 and 0.5, which is weak privacy.
2. Sums over at least q rows (principle A1): placement-value sums and centred sums of
   squares (distrAVG / distrVAR), and for each Fisher-scoring round the site's
   log-likelihood, score vector and Fisher information. These are not DP: a curious
   analyst who chooses the survivor function and coefficients freely could, over many
   rounds, learn counts of positives above chosen cutoffs. SIMEX refits make the
   sites release more such aggregates (they cost no DP budget).
3. With no sensitivity given, each site's heuristic sensitivity: a difference of two of
   its rows' scores.

The analyst sends S~0 and S~1 (the pooled noisy scores) back to every site, so every
site learns the other sites' noisy scores too.
"""

from __future__ import annotations

from typing import Any

from fedroc.methods import EvaluationInputs, EvaluationResult, register_method
from fedroc.methods.rocglm._core import (
    DEFAULT_N_THRESHOLDS,
    THRESHOLD_RULES,
    GroupedTable,
    PrivacyCautionWarning,
    RocGlmFit,
    binormal_auc,
    binormal_auc_integral,
    binormal_roc,
    recommended_privacy,
    rocglm,
    rocglm_from_scores,
    score_sensitivity,
)
from fedroc.methods.rocglm._distributed import (
    DistributedRocGlm,
    NoisyScores,
    SimexFit,
    distributed_rocglm,
    fit_with_survivors,
    release_noisy_scores,
    site_sensitivity,
)

__all__ = [
    "DEFAULT_N_THRESHOLDS",
    "THRESHOLD_RULES",
    "DistributedRocGlm",
    "GroupedTable",
    "NoisyScores",
    "PrivacyCautionWarning",
    "RocGlmFit",
    "SimexFit",
    "binormal_auc",
    "binormal_auc_integral",
    "binormal_roc",
    "distributed_rocglm",
    "fit_with_survivors",
    "recommended_privacy",
    "release_noisy_scores",
    "rocglm",
    "rocglm_from_scores",
    "run_rocglm",
    "score_sensitivity",
    "site_sensitivity",
]


@register_method(
    "rocglm",
    "distributed ROC-GLM with DP noisy survivor function and DeLong CI (paper 1)",
    demo_options={"sensitivity": 0.01},
)
def run_rocglm(
    inputs: EvaluationInputs,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    sensitivity: float | None = None,
    dp_calibration: str | None = None,
    privacy: str = "default",
    thresholds: str = "grid",
    n_thresholds: int = DEFAULT_N_THRESHOLDS,
    simex: bool = False,
    a0: float | None = None,
) -> EvaluationResult:
    """``fedroc evaluate --method rocglm``: see :func:`distributed_rocglm`."""
    res = distributed_rocglm(
        inputs.federation,
        epsilon=epsilon,
        delta=delta,
        sensitivity=sensitivity,
        dp_calibration=dp_calibration,
        privacy=privacy,
        thresholds=thresholds,
        n_thresholds=n_thresholds,
        simex=simex,
        confidence_level=inputs.confidence_level,
        seed=inputs.seed,
        a0=a0,
    )
    extra: dict[str, Any] = {
        "rocglm_params": [res.g1, res.g2],
        "epsilon": res.epsilon,
        "delta": res.delta,
        "sensitivity": res.sensitivity,
        "sensitivity_source": res.sensitivity_source,
        "dp_calibration": res.calibration,
        "noise_sd": res.noise_sd,
        "thresholds": res.thresholds,
        "auc_se": res.se,
        "iterations": res.iterations,
        "converged": res.converged,
    }
    if res.simex is not None:
        extra["auc_without_simex"] = binormal_auc(*res.simex.naive)
    if a0 is not None:
        z, p = res.test_greater(a0)
        extra["auc_test"] = {"a0": a0, "z": z, "p_value": p}
    return EvaluationResult(
        method="rocglm",
        sites=[{"name": k, "n": v["n_pos"] + v["n_neg"]} for k, v in res.sites.items()],
        auc=res.auc,
        auc_ci=res.ci,
        released=res.released,
        extra=extra,
        confidence_level=inputs.confidence_level,
        details=res,
    )
