"""The pooled reference: every metric on all rows together (no privacy).

This is the ground truth the private methods are compared with. It needs the rows
themselves, so it only runs where the caller holds them (local files, tests).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedroc.exceptions import InputError
from fedroc.federation.federation import Released
from fedroc.methods import EvaluationInputs, EvaluationResult, register_method
from fedroc.metrics import (
    average_precision,
    brier_score,
    calibration_curve,
    delong,
    pr_auc,
)


@register_method("pooled", "all rows pooled: the reference, no privacy", needs_pooled=True)
def run_pooled(
    inputs: EvaluationInputs, *, site_sizes: dict[str, int] | None = None, n_bins: int = 10
) -> EvaluationResult:
    data = inputs.pooled
    if data is None:
        raise InputError("the pooled method needs the pooled rows")
    y, s = data.label, data.score
    res = delong(y, s, confidence_level=inputs.confidence_level)
    is_prob = bool(np.all((s >= 0) & (s <= 1)))
    sizes = site_sizes if site_sizes is not None else {"pooled": data.n}
    extra: dict[str, Any] = {
        "n": data.n,
        "n_pos": data.n_pos,
        "n_neg": data.n_neg,
        "auc_se": res.se,
        "auc_ci_wald": res.confidence_interval(method="wald"),
        "average_precision": average_precision(y, s),
        "pr_auc": pr_auc(y, s),
        "brier": brier_score(y, s) if is_prob else None,
        "calibration": calibration_curve(y, s, n_bins=n_bins) if is_prob else None,
    }
    return EvaluationResult(
        method="pooled",
        sites=[{"name": k, "n": v} for k, v in sizes.items()],
        auc=res.auc,
        auc_ci=res.confidence_interval(method="logit"),
        released=Released.pooled(data.n),
        extra=extra,
        confidence_level=inputs.confidence_level,
        details=res,
    )
