"""Pooled, plaintext reference metrics: the ground truth of every private method.

Numpy (and scipy's distributions) only. One counting representation,
:class:`ScoreCounts` (class counts at decreasing thresholds, which add up across sites),
carries every ranking metric: the curve and area functions below validate their input,
count, and ask the counts (the layout of scikit-learn's ``_ranking.py``).
"""

from fedroc.metrics._calibration import (
    CalibrationCurve,
    bin_edges,
    bin_index,
    brier_score,
    calibration_curve,
    calibration_sums,
)
from fedroc.metrics._counts import (
    BootstrapAUCResult,
    OperatingPoint,
    PlacementSums,
    ScoreCounts,
    beaten_counts,
    bin_index_edges,
    proportion_ci,
)
from fedroc.metrics._delong import (
    DeLongResult,
    PairedDeLongResult,
    PlacementValues,
    auc_ci,
    delong,
    delong_from_counts,
    delong_paired,
    logit_ci,
    logit_test_greater,
    placement_values,
    wald_ci,
)
from fedroc.metrics._operating import (
    operating_point,
    sensitivity_at_specificity,
    specificity_at_sensitivity,
    youden_threshold,
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
    partial_auc,
    pr_auc,
    precision_recall_curve,
    roc_auc,
    roc_curve,
)

__all__ = [
    "BootstrapAUCResult",
    "CalibrationCurve",
    "DeLongResult",
    "OperatingPoint",
    "PairedDeLongResult",
    "PlacementSums",
    "PlacementValues",
    "SampleSize",
    "ScoreCounts",
    "auc_ci",
    "auc_power",
    "auc_sample_size",
    "average_precision",
    "beaten_counts",
    "bin_edges",
    "bin_index",
    "bin_index_edges",
    "brier_score",
    "calibration_curve",
    "calibration_sums",
    "clf_curve_counts",
    "delong",
    "delong_from_counts",
    "delong_paired",
    "hanley_mcneil_se",
    "logit_ci",
    "logit_test_greater",
    "obuchowski_variance",
    "operating_point",
    "partial_auc",
    "placement_values",
    "pr_auc",
    "precision_recall_curve",
    "proportion_ci",
    "roc_auc",
    "roc_curve",
    "sensitivity_at_specificity",
    "specificity_at_sensitivity",
    "wald_ci",
    "youden_threshold",
]
