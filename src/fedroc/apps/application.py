"""The application: fedroc's layers wired together in one process.

Each layer registers its own site functions when it is imported: the foundation's in
:mod:`fedroc.federation.basic`, secure aggregation's stages in :mod:`fedroc.secagg`, each
method's in its package under :mod:`fedroc.methods`. The federation layer names none of
them (lower layers never import higher ones), so a process that serves sites or runs the
analyst's jobs imports this module, which imports them all and registers the jobs that need
the methods (the Flower job ``evaluate``). :mod:`fedroc.apps.flower` hands Flower its apps
after that.
"""

from __future__ import annotations

from typing import Any

import fedroc.federation.basic
import fedroc.secagg.protocol  # noqa: F401  (the stages of secure aggregation)
from fedroc.exceptions import InputError
from fedroc.federation.federation import Federation
from fedroc.federation.flower.jobs import flower_job, take_options
from fedroc.federation.site import registered_site_functions
from fedroc.methods import evaluate, get_method, method_names

__all__ = ["evaluate_job", "site_functions"]

method_names()  # imports every method package, which registers its site functions


def site_functions() -> list[str]:
    """Every site function this application serves."""
    return registered_site_functions()


@flower_job("evaluate")
def evaluate_job(federation: Federation, options: dict[str, Any]) -> dict[str, Any]:
    """Run one registered method (the Flower job ``evaluate``).

    Parameters
    ----------
    federation : Federation
    options : dict
        ``method``, ``seed``, ``confidence_level``, ``calibration_bins`` and ``options``
        (the method's own keyword options).

    Returns
    -------
    dict
        ``EvaluationResult.to_dict()``.
    """
    take_options(
        options, {"method", "seed", "confidence_level", "calibration_bins", "options"}, "evaluate"
    )
    method = str(options.get("method", ""))
    if not method:
        raise InputError("job 'evaluate' needs a 'method'")
    if get_method(method).needs_pooled:
        raise InputError(
            f"method {method!r} needs the pooled rows, which never leave the sites on Flower"
        )
    seed = options.get("seed")
    bins = options.get("calibration_bins", 10)
    result = evaluate(
        federation,
        method,
        seed=None if seed is None else int(seed),
        confidence_level=float(options.get("confidence_level", 0.95)),
        calibration_bins=None if bins is None else int(bins),
        **dict(options.get("options") or {}),
    )
    out: dict[str, Any] = result.to_dict()
    return out
