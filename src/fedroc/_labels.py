"""Words for the keys of results: what a reader sees where the JSON has ``auc_se``.

The HTML report (:mod:`fedroc.report`) and the command line's tables
(:mod:`fedroc.cli`) label a result's values with these; the JSON keys themselves are a
contract (docs/json.md) and do not change. Imported by ``fedroc --help``: no imports.
"""

from __future__ import annotations

#: Human labels of result keys (anything else goes through :func:`human_label`'s rules).
LABELS: dict[str, str] = {
    "auc": "AUC",
    "auc_ci": "AUC confidence interval",
    "auc_se": "Standard error of the AUC",
    "auc_ci_wald": "AUC confidence interval (Wald)",
    "auc_ci_logit": "AUC confidence interval (logit)",
    "auc_ci_bootstrap": "AUC confidence interval (stratified bootstrap)",
    "weighted": "Rows weighted (--sample-weight)",
    "weight_pos": "Total weight of the positives",
    "weight_neg": "Total weight of the negatives",
    "auc_variance": "Variance of the AUC",
    "average_precision": "Average precision (step-wise)",
    "pr_auc": "Area under the PR curve (trapezoids)",
    "brier": "Brier score",
    "brier_ci": "Brier score confidence interval",
    "n": "Rows",
    "n_pos": "Positives",
    "n_neg": "Negatives",
    "max_fpr": "Partial AUC: largest false positive rate",
    "partial_auc": "Partial AUC (McClish-standardised)",
    "epsilon": "Differential privacy: epsilon",
    "delta": "Differential privacy: delta",
    "rocglm_params": "ROC-GLM parameters (intercept, slope)",
    "quantiles": "Quantiles per class",
    "curve_auc": "Area under the released curve",
    "auc_binned": "AUC of the binned scores",
    "noise_sd": "Noise standard deviation",
    "auc_noise_sd": "Noise standard deviation of the AUC",
    "ci_withheld": "Confidence interval withheld because",
    "simex": "SIMEX correction",
    "method": "Method",
    "caveats": "Caveat",
    "dropped": "Sites dropped",
    # The histogram's errors need the pooled rows, which only a caller holding them has
    # (the CLI, which reads the --site files); "AUC error" alone read as an estimate.
    # "(paper 5, Definition 1)" made them wrap at 120 columns: the reference is in the
    # note under the evaluate table.
    "roc_area_error": "ROC area error against the pooled rows",
    "pr_area_error": "PR area error against the pooled rows",
    "auc_error": "AUC error against the pooled rows",
    "pr_auc_error": "PR-AUC error against the pooled rows",
    "ap_error": "Average precision error against the pooled rows",
    "delong_se": "SE of the AUC by DeLong (clusters ignored)",
    "n_clusters": "Clusters used (both classes)",
    "n_clusters_total": "Clusters in all",
    "n_excluded": "Clusters with one class (left out)",
    "equality_z": "Equality test (population = personalized AUC): z",
    "equality_p": "Equality test: p (two-sided)",
    "sigma11": "Sigma11 divisor",
    # Keys whose words alone ("AUC rocglm", "Sensitivity is heuristic", "AUC noties",
    # "Number of bins") said too little to a reader who never sees the JSON.
    "auc_rocglm": "AUC of the binormal ROC-GLM curve",
    "correction": "Bias correction",
    "sensitivity": "l2-sensitivity of a score",
    "sensitivity_source": "Sensitivity from",
    "sensitivity_is_heuristic": "Sensitivity only a heuristic (no bound)",
    "privacy_guarantee": "Privacy guarantee",
    "dp_calibration": "Gaussian mechanism",
    "thresholds": "Threshold rule",
    "iterations": "Probit fit: iterations",
    "converged": "Probit fit: converged",
    "auc_uncorrected": "AUC without the correction (paper 1's estimate)",
    "auc_ci_uncorrected": "AUC confidence interval without the correction",
    "oversampling": "Quantiles read per quantile asked for",
    "mode": "Privacy mode",
    "interpolation": "Interpolation between quantiles",
    "branching": "Tree branching factor",
    "height": "Tree levels",
    "auc_level": "Tree level of the AUC",
    "auc_binning_bound": "Most the binning can move the AUC",
    "partial_auc_error_bound": "Most the binning can move the partial AUC",
    "partial_auc_note": "Partial AUC note",
    "auc_noties": "AUC without ties (paper 4, Algorithm 5)",
    "personalized_auc": "Personalized AUC (theta11)",
    "personalized_ci": "Personalized AUC confidence interval",
    "personalized_se": "Standard error of the personalized AUC",
    "obuchowski_auc": "Obuchowski AUC (eq. 7)",
    "obuchowski_se": "SE of Obuchowski's AUC (Obuchowski 1997)",
    "obuchowski_ci": "Obuchowski AUC confidence interval",
    "interval": "Intervals",
    "n_bins": "Shared score bins",
    "population_binning_bound": "Most the binning can move the population AUC",
    "obuchowski_binning_bound": "Most the binning can move Obuchowski's AUC",
    "notes": "Note",
}

#: Labels of keys whose meaning depends on the method (the clustered method counts only the
#: rows of the clusters it uses; "Rows 754" read as every row of the sites).
METHOD_LABELS: dict[tuple[str, str], str] = {
    ("clustered", "n"): "Rows in the clusters used",
    ("clustered", "n_pos"): "Positives in the clusters used",
    ("clustered", "n_neg"): "Negatives in the clusters used",
    # One release per row's score (paper 1) against one tree per site (paper 5).
    ("rocglm", "epsilon"): "Differential privacy: epsilon of each noisy score",
    ("rocglm", "delta"): "Differential privacy: delta of each noisy score",
    ("rocglm", "noise_sd"): "Noise standard deviation of each score",
    ("histogram", "noise_sd"): "Noise standard deviation of each released count",
}

_WORDS = {
    "auc": "AUC",
    "ci": "CI",
    "se": "SE",
    "sd": "SD",
    "dp": "DP",
    "pr": "PR",
    "roc": "ROC",
    "mpc": "MPC",
    "ppv": "PPV",
    "npv": "NPV",
    "fpr": "FPR",
    "tpr": "TPR",
    "glm": "GLM",
    "n": "number of",
}


def human_label(key: str) -> str:
    """Turn a result key into a reader's label: ``auc_se`` -> "Standard error of the AUC".

    Parameters
    ----------
    key : str
        A key of a result's JSON object (``EvaluationResult.to_dict()``).

    Returns
    -------
    str
        The label of :data:`LABELS` for a known key; otherwise the key's words, known
        abbreviations spelled out, with a capital first letter.
    """
    if key in LABELS:
        return LABELS[key]
    words = [_WORDS.get(w, w) for w in key.split("_") if w]
    text = " ".join(words)
    return text[:1].upper() + text[1:] if text else key


def method_label(key: str, method: str | None = None) -> str:
    """Label ``key`` of a ``method``'s result: its meaning there, else :func:`human_label`."""
    return METHOD_LABELS.get((method or "", key)) or human_label(key)
