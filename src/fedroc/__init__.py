"""fedroc: validate binary classifiers on test data that cannot be pooled.

Pooled reference metrics live in :mod:`fedroc.metrics`; the federation runtime (sites,
disclosure policy, audit log, transports) in :mod:`fedroc.federation`; one module per
paper's method under :mod:`fedroc.methods`.

The names below are loaded on first use (PEP 562): ``import fedroc`` stays cheap, so that
``fedroc --help`` and the Flower and MPC processes that only need a submodule do not pay for
pandas and scipy.stats.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from fedroc._version import __version__ as __version__

# Public name -> module that defines it.
_LAZY = {
    "ClusteredAUCResult": "fedroc.methods.clustered",
    "clustered_auc": "fedroc.methods.clustered",
    "Columns": "fedroc.data",
    "SiteData": "fedroc.data",
    "DisclosureError": "fedroc.exceptions",
    "FedrocError": "fedroc.exceptions",
    "FedrocWarning": "fedroc.exceptions",
    "InputError": "fedroc.exceptions",
    "SiteError": "fedroc.exceptions",
    "UndefinedMetricWarning": "fedroc.exceptions",
    "Federation": "fedroc.federation",
    "Site": "fedroc.federation",
    "EvaluationResult": "fedroc.methods",
    "evaluate": "fedroc.methods",
    "average_precision": "fedroc.metrics",
    "brier_score": "fedroc.metrics",
    "calibration_curve": "fedroc.metrics",
    "delong": "fedroc.metrics",
    "pr_auc": "fedroc.metrics",
    "precision_recall_curve": "fedroc.metrics",
    "roc_auc": "fedroc.metrics",
    "roc_curve": "fedroc.metrics",
    "DisclosurePolicy": "fedroc.privacy",
}

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

# Submodules reachable as attributes after a bare ``import fedroc`` (as they were when this
# file imported them eagerly).
_SUBMODULES = frozenset(
    {
        "clustered",
        "data",
        "datasets",
        "exceptions",
        "federation",
        "methods",
        "metrics",
        "mpc",
        "privacy",
        "report",
        "secagg",
        "sequester",
    }
)

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads these
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
    from fedroc.methods.clustered import ClusteredAUCResult, clustered_auc
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


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"fedroc.{name}")  # the import binds it here too
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fedroc' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_SUBMODULES})
