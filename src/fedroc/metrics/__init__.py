"""Pooled, plaintext reference metrics: the ground truth of every private method.

Numpy (and scipy's normal quantiles) only; every function sorts once and is vectorized.
"""

from fedroc.metrics._calibration import (
    CalibrationCurve,
    bin_edges,
    bin_index,
    brier_score,
    calibration_curve,
)
from fedroc.metrics._delong import (
    DeLongResult,
    PairedDeLongResult,
    PlacementValues,
    delong,
    delong_from_counts,
    delong_paired,
    logit_ci,
    logit_test_greater,
    placement_values,
    wald_ci,
)
from fedroc.metrics._power import (
    SampleSize,
    auc_power,
    auc_sample_size,
    hanley_mcneil_se,
    obuchowski_variance,
)
from fedroc.metrics._ranking import (
    average_precision,
    clf_curve_counts,
    pr_auc,
    precision_recall_curve,
    roc_auc,
    roc_curve,
)

__all__ = [
    "CalibrationCurve",
    "DeLongResult",
    "PairedDeLongResult",
    "PlacementValues",
    "SampleSize",
    "auc_power",
    "auc_sample_size",
    "average_precision",
    "bin_edges",
    "bin_index",
    "brier_score",
    "calibration_curve",
    "clf_curve_counts",
    "delong",
    "delong_from_counts",
    "delong_paired",
    "hanley_mcneil_se",
    "logit_ci",
    "logit_test_greater",
    "obuchowski_variance",
    "placement_values",
    "pr_auc",
    "precision_recall_curve",
    "roc_auc",
    "roc_curve",
    "wald_ci",
]
