"""Jobs the fedroc ServerApp runs: the analyst's code, unchanged, on a Flower federation.

A job takes a :class:`~fedroc.federation.Federation` (here backed by
:class:`~fedroc.federation.flower.FlowerTransport`) and JSON options and returns a
JSON-ready dict. The same functions run on an in-process federation, which is how the
tests compare the two transports.

* ``evaluate`` (registered by :mod:`fedroc.apps.application`): one registered method via
  :func:`fedroc.methods.evaluate`; options
  ``method``, ``seed``, ``confidence_level``, ``calibration_bins``, ``options`` (the
  method's own); returns ``EvaluationResult.to_dict()``.
* ``moments``: distributed mean and variance of a column (paper 1, distrAVG/distrVAR) and,
  for probability scores, the Brier score and (with ``calibration_bins``) the calibration
  curve.
* ``sites``: the sites and their sizes.
* ``calls``: a script of site-function calls (``[{"function", "args", "repeat"}]``);
  returns every reply. Replies are what the sites release to the analyst anyway.
* ``batch``: several of the above in one Flower run (``{"jobs": [{"job", "options"}]}``),
  which saves the start-up of a run per job; each job has its own transcript.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fedroc._results import jsonable
from fedroc.exceptions import DisclosureError, InputError
from fedroc.federation import basic
from fedroc.federation.federation import Federation
from fedroc.privacy import is_class_count_refusal

__all__ = ["flower_job", "job_names", "run_job", "take_options"]

JobFn = Callable[[Federation, dict[str, Any]], dict[str, Any]]
_JOBS: dict[str, JobFn] = {}


def flower_job(name: str) -> Callable[[JobFn], JobFn]:
    """Register ``fn(federation, options) -> dict`` as a job the ServerApp can run."""

    def register(fn: JobFn) -> JobFn:
        _JOBS[name] = fn
        return fn

    return register


def job_names() -> list[str]:
    """List the names of the registered jobs."""
    return sorted(_JOBS)


def run_job(name: str, federation: Federation, options: dict[str, Any]) -> dict[str, Any]:
    """Run a job and return its JSON-ready result."""
    try:
        fn = _JOBS[name]
    except KeyError:
        raise InputError(f"unknown Flower job {name!r}; jobs: {job_names()}") from None
    out: dict[str, Any] = jsonable(fn(federation, dict(options)))
    return out


def take_options(options: dict[str, Any], allowed: set[str], job: str) -> None:
    """Refuse options a job does not take.

    Raises
    ------
    InputError
        Naming the job, the unknown options and the ones it takes.
    """
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise InputError(
            f"job {job!r} does not take option(s) {unknown}; it takes {sorted(allowed)}"
        )


def _clear_calibration(federation: Federation, bins: int, notes: list[str]) -> Any:
    """Return the moments job's clear calibration curve, or None with a note where refused.

    A site that answered binned counts the other way before (an evaluate job's secure
    histogram) refuses the clear curve for its lifetime; that failed the whole job, the
    mean, variance and Brier score the sites had released already included (the docs
    audit). A refusal of a class under q goes on to the caller's note, as before.
    """
    try:
        return basic.distributed_calibration(federation, n_bins=bins)
    except DisclosureError as exc:
        if is_class_count_refusal(exc):
            raise
        notes.append(f"calibration curve withheld: {exc}")
        return None


@flower_job("moments")
def moments_job(federation: Federation, options: dict[str, Any]) -> dict[str, Any]:
    take_options(options, {"column", "subset", "calibration_bins"}, "moments")
    bins = options.get("calibration_bins")
    if bins is not None:
        # Before any call: the sites refuse such n_bins, after the moments were released.
        basic.check_calibration_bins(bins)
    start = federation.mark()
    moments = basic.distributed_variance(
        federation,
        column=str(options.get("column", "score")),
        subset=str(options.get("subset", "all")),
    )
    out: dict[str, Any] = moments.to_dict()
    out["brier"] = out["calibration"] = None
    notes: list[str] = []
    if basic.all_probabilities(federation):  # a site with a wider grid: no (H15-2)
        try:
            out["brier"], _ = basic.distributed_brier(federation)
            if bins is not None:
                out["calibration"] = _clear_calibration(federation, int(bins), notes)
        except DisclosureError as exc:
            # In the clear each is a class aggregate (R12-3), held to q in each class; the
            # mean and variance over all rows, released already, are not: they stand.
            if not is_class_count_refusal(exc):
                raise
            notes.append(f"Brier score and calibration withheld: {exc}")
    released = federation.released(start)
    out["released"] = (released.with_notes(*notes) if notes else released).to_dict()
    return out


@flower_job("sites")
def sites_job(federation: Federation, options: dict[str, Any]) -> dict[str, Any]:
    take_options(options, set(), "sites")
    return {"sites": [{"name": k, "n": v} for k, v in basic.site_sizes(federation).items()]}


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    return jsonable(value)


def _steps(options: dict[str, Any], job: str, key: str, item: str) -> list[Any]:
    """Return the one option of a job that runs a list of steps, checked to be a non-empty list."""
    take_options(options, {key}, job)
    steps = options.get(key)
    if not isinstance(steps, list) or not steps:
        raise InputError(f"job {job!r} needs {key!r}: a list of {item}")
    return steps


@flower_job("calls")
def calls_job(federation: Federation, options: dict[str, Any]) -> dict[str, Any]:
    script = _steps(options, "calls", "calls", "{function, args, repeat}")
    start = federation.mark()
    replies: list[dict[str, Any]] = []
    for step in script:
        function = str(step["function"])
        for _ in range(int(step.get("repeat", 1))):
            got = federation.call(function, **dict(step.get("args") or {}))
            replies.append(
                {
                    "function": function,
                    "replies": {s: {k: _plain(v) for k, v in r.items()} for s, r in got.items()},
                }
            )
    return {"calls": replies, "released": federation.released(start).to_dict()}


@flower_job("batch")
def batch_job(federation: Federation, options: dict[str, Any]) -> dict[str, Any]:
    jobs = _steps(options, "batch", "jobs", "{job, options}")
    results = []
    for item in jobs:
        name = str(item.get("job"))
        if name == "batch":
            raise InputError("a batch cannot contain another batch")
        # A fresh transcript per job, so that each result reports only its own releases.
        single = Federation(
            federation.transport, requester=federation.requester, timeout=federation.timeout
        )
        results.append(run_job(name, single, dict(item.get("options") or {})))
    return {"results": results}
