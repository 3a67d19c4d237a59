"""fedroc: validate binary classifiers on test data that cannot be pooled.

Pooled reference metrics live in :mod:`fedroc.metrics`; the federation runtime (sites,
disclosure policy, audit log, transports) in :mod:`fedroc.federation`; one module per
paper's method under :mod:`fedroc.methods`.
"""

from fedroc.clustered import ClusteredAUCResult, clustered_auc
from fedroc.data import Columns, SiteData
from fedroc.exceptions import (
    DisclosureError,
    FedrocError,
    FedrocWarning,
    InputError,
    SiteError,
    UndefinedMetricWarning,
)
from fedroc.federation import Federation, Site
from fedroc.methods import EvaluationResult, evaluate
from fedroc.metrics import (
    average_precision,
    brier_score,
    calibration_curve,
    delong,
    pr_auc,
    precision_recall_curve,
    roc_auc,
    roc_curve,
)
from fedroc.privacy import DisclosurePolicy

__version__ = "0.1.0"

__all__ = [
    "ClusteredAUCResult",
    "Columns",
    "DisclosureError",
    "DisclosurePolicy",
    "EvaluationResult",
    "Federation",
    "FedrocError",
    "FedrocWarning",
    "InputError",
    "Site",
    "SiteData",
    "SiteError",
    "UndefinedMetricWarning",
    "average_precision",
    "brier_score",
    "calibration_curve",
    "clustered_auc",
    "delong",
    "evaluate",
    "pr_auc",
    "precision_recall_curve",
    "roc_auc",
    "roc_curve",
]
