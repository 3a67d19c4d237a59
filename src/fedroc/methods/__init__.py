"""Evaluation methods behind one API and one result type.

Each method (one module per paper) registers a runner with :func:`register_method`; the
runner takes :class:`EvaluationInputs` and the method's own keyword options and returns an
:class:`EvaluationResult`. :func:`evaluate` runs one method and adds, for probability
scores, the distributed Brier score and calibration curve unless the method gave its own.
"""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fedroc._results import ResultMixin, format_table, jsonable
from fedroc.data import SiteData
from fedroc.exceptions import DisclosureError, InputError
from fedroc.federation.federation import Federation, Released
from fedroc.privacy import is_class_count_refusal

if TYPE_CHECKING:
    from fedroc.federation.basic import SiteCalibration

__all__ = [
    "ALIAS_KEYS",
    "EvaluationInputs",
    "EvaluationResult",
    "Method",
    "evaluate",
    "explain_class_count_refusals",
    "get_method",
    "interval_caveat",
    "method_names",
    "pool_site_data",
    "register_method",
    "sites_calibration",
]


#: Keys a method's JSON repeats under a second name (docs/json.md), by method: tables and
#: reports show them once (clustered's population AUC is its ``auc``).
ALIAS_KEYS: dict[str, frozenset[str]] = {
    "clustered": frozenset({"population_auc", "population_ci", "population_se"}),
}


@dataclass(frozen=True)
class EvaluationInputs:
    """What a method runs on.

    Attributes
    ----------
    federation : Federation
        The sites, reached only through site functions.
    pooled : SiteData or None
        The pooled rows, only when the caller holds them (tests, experiments, the pooled
        reference). Private methods never use it for their result; they may use it to
        report the error against the pooled curve.
    seed : int or None
        Seed of the analyst's statistical randomness (SIMEX, bootstrap, simulation); None
        draws from OS entropy. It never reaches a site: DP noise is the sites' own.
    confidence_level : float
    """

    federation: Federation
    pooled: SiteData | None = None
    seed: int | None = None
    confidence_level: float = 0.95


@dataclass(frozen=True, repr=False)
class EvaluationResult(ResultMixin):
    """The common result of every method.

    ``to_dict()`` gives the JSON object of ``fedroc evaluate --json``: ``method``, ``sites``
    (list of ``{name, n}``), ``auc``, ``auc_ci`` (None where the method has none),
    ``released``, then the method's own keys from ``extra``.

    Attributes
    ----------
    method : str
        Name of the method that ran (a name of :func:`method_names`).
    sites : list of dict
        One ``{"name": str, "n": int}`` per site, ``n`` (rows) is None where the
        method does not learn it.
    auc : float
        The method's AUC estimate.
    auc_ci : tuple of float (low, high) or None
        Its confidence interval at ``confidence_level``; None where the method has none.
    released : Released
        What left the sites: rounds, functions called, bytes, DP events and privacy spent.
    extra : dict, default {}
        The method's own JSON-ready keys (curves, variances, calibration, ...).
    confidence_level : float, default 0.95
        Level of ``auc_ci``.
    details : object, optional
        The method's own result object (e.g. :class:`~fedroc.metrics.DeLongResult`), for
        Python callers; not part of ``to_dict()`` and not compared by ``==``.
    """

    method: str
    sites: list[dict[str, Any]]
    auc: float
    auc_ci: tuple[float, float] | None
    released: Released
    extra: dict[str, Any] = field(default_factory=dict)
    confidence_level: float = 0.95
    details: Any = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON object of ``fedroc evaluate --json`` (see the class)."""
        out: dict[str, Any] = {
            "method": self.method,
            "sites": jsonable(self.sites),
            "auc": jsonable(self.auc),
            "auc_ci": None if self.auc_ci is None else jsonable(list(self.auc_ci)),
            "released": self.released.to_dict(),
        }
        for key, value in self.extra.items():
            out[key] = jsonable(value)
        return out

    def with_extra(self, **extra: Any) -> EvaluationResult:
        """Return a copy with ``extra`` keys added (or replaced) among the method's own keys."""
        return EvaluationResult(
            self.method,
            self.sites,
            self.auc,
            self.auc_ci,
            self.released,
            {**self.extra, **extra},
            self.confidence_level,
            self.details,
        )

    def with_caveat(self, why: str) -> EvaluationResult:
        """Return a copy with ``why`` added to the ``caveats`` of ``extra``."""
        return self.with_extra(caveats=[*(self.extra.get("caveats") or []), why])

    def summary(self) -> str:
        """Format the AUC, its interval, the method's scalar keys and the traffic as a table."""
        rows: list[tuple[str, Any]] = [("method", self.method), ("AUC", self.auc)]
        if self.auc_ci is not None:
            rows.append((f"{self.confidence_level:.0%} CI", tuple(self.auc_ci)))
        for key, value in self.extra.items():
            if isinstance(value, (int, float, str)) or value is None:
                rows.append((key, value))
        rows.append(("rounds", self.released.rounds))
        rows.append(("bytes from sites", sum(self.released.bytes_received.values())))
        return format_table(rows, title=f"Evaluation ({self.method})")


Runner = Callable[..., EvaluationResult]


@dataclass(frozen=True)
class Method:
    """A registered method (see :func:`register_method`).

    Attributes
    ----------
    name : str
        The name ``evaluate`` and ``fedroc evaluate --method`` take.
    run : callable
        ``run(inputs: EvaluationInputs, **options) -> EvaluationResult``.
    description : str
        One line saying what the method computes.
    needs_pooled : bool
        The method needs the pooled rows (the pooled reference only).
    demo_options : dict
        Options ``fedroc demo`` runs the method with.
    needs_clusters : bool
        The method needs a cluster column at every site.
    """

    name: str
    run: Runner
    description: str
    needs_pooled: bool = False
    demo_options: dict[str, Any] = field(default_factory=dict)
    needs_clusters: bool = False

    @property
    def parameters(self) -> Mapping[str, inspect.Parameter]:
        """The runner's parameters by name: the options the method takes."""
        return inspect.signature(self.run).parameters


_METHODS: dict[str, Method] = {}
_LOADED = False


def register_method(
    name: str,
    description: str,
    *,
    needs_pooled: bool = False,
    demo_options: Mapping[str, Any] | None = None,
    needs_clusters: bool = False,
) -> Callable[[Runner], Runner]:
    """Register ``run(inputs: EvaluationInputs, **options) -> EvaluationResult``.

    ``demo_options`` are the options ``fedroc demo`` runs the method with;
    ``needs_clusters`` marks a method that needs a cluster column at every site.

    Parameters
    ----------
    name : str
        The method's name for :func:`evaluate` and ``fedroc evaluate --method``; a second
        registration under the same name replaces the first.
    description : str
        One line for ``fedroc evaluate --help`` and the method list.
    needs_pooled : bool, default False
        True for the pooled reference: :func:`evaluate` refuses to run it without rows.
    demo_options : mapping, optional
        Keyword options ``fedroc demo`` passes to the runner (copied).
    needs_clusters : bool, default False
        True where a cluster column must be given at every site.

    Returns
    -------
    callable
        A decorator that registers the runner (a :class:`Method`) and returns it unchanged.
    """

    def register(fn: Runner) -> Runner:
        _METHODS[name] = Method(
            name, fn, description, needs_pooled, dict(demo_options or {}), needs_clusters
        )
        return fn

    return register


def _load() -> None:
    global _LOADED
    if not _LOADED:
        for info in pkgutil.iter_modules(__path__, __name__ + "."):
            importlib.import_module(info.name)
        _LOADED = True


def method_names() -> list[str]:
    """List the registered methods, in registration order (loading every method module).

    Returns
    -------
    list of str
        The names :func:`evaluate` accepts.
    """
    _load()
    return list(_METHODS)


def get_method(name: str) -> Method:
    """Return the method registered as ``name``.

    Parameters
    ----------
    name : str
        A name of :func:`method_names`.

    Returns
    -------
    Method
        Its runner, description and needs.

    Raises
    ------
    InputError
        Naming the unknown method and the available ones.
    """
    _load()
    try:
        return _METHODS[name]
    except KeyError:
        raise InputError(f"unknown method {name!r}; available: {sorted(_METHODS)}") from None


def pool_site_data(parts: Mapping[str, SiteData]) -> SiteData:
    """Concatenate sites' rows (for the pooled reference only).

    Parameters
    ----------
    parts : mapping of str to SiteData
        Each site's rows, by site name, in the order to concatenate.

    Returns
    -------
    SiteData
        All rows. Cluster ids are prefixed ``"<site>:"`` (a site's ids are its own) and
        kept only when every site has them; likewise ``score_b`` and ``weight``.
    """
    cluster = None
    if all(p.cluster is not None for p in parts.values()):
        # Cluster ids are local to a site: prefix them so two sites' ids never merge.
        prefixed = [f"{name}:{c}" for name, p in parts.items() for c in p.cluster]  # type: ignore[union-attr]
        cluster = np.asarray(prefixed, dtype=np.str_)
    score_b = None
    if parts and all(p.score_b is not None for p in parts.values()):
        score_b = np.concatenate([p.score_b for p in parts.values()])
    weight = None
    if parts and all(p.weight is not None for p in parts.values()):
        weight = np.concatenate([p.weight for p in parts.values()])
    return SiteData(
        np.concatenate([p.label for p in parts.values()]),
        np.concatenate([p.score for p in parts.values()]),
        cluster,
        score_b,
        weight,
    )


def evaluate(
    federation: Federation,
    method: str = "pooled",
    *,
    pooled: SiteData | None = None,
    seed: int | None = None,
    confidence_level: float = 0.95,
    calibration_bins: int | None = 10,
    **options: Any,
) -> EvaluationResult:
    """Run one method on a federation and return its common result.

    For probability scores (all sites report scores in [0, 1]) the result also carries the
    distributed Brier score and calibration curve (``calibration_bins`` bins; None to skip),
    unless the method reported its own.

    Parameters
    ----------
    federation : Federation
        The sites, reached only through their site functions.
    method : str, default "pooled"
        A registered method (:func:`method_names`): ``"pooled"`` (needs ``pooled``),
        ``"rocglm"``, ``"histogram"``, ``"mpc"``, ``"clustered"``.
    pooled : SiteData, optional
        The pooled rows, for the pooled reference (or to report a private method's error
        against it); private methods never compute their result from it.
    seed : int, optional
        Seed of the analyst's statistical randomness (bootstrap, SIMEX, simulation); it never
        reaches a site. ``"rocglm"``, ``"mpc"`` and ``"clustered"`` draw none and ignore it,
        so that one loop can run every method (``fedroc evaluate`` refuses ``--seed`` for
        them, where it could only mislead).
    confidence_level : float, default 0.95
    calibration_bins : int or None, default 10
    **options
        The method's own options (see its runner, e.g. :func:`fedroc.methods.pooled.run_pooled`).

    Returns
    -------
    EvaluationResult
        ``to_dict()`` is the JSON object of ``fedroc evaluate --json``. An interval that is
        undefined (an AUC of 0 or 1, fewer than two rows of a class) is None, with the
        reason in ``extra["caveats"]``.

    Raises
    ------
    InputError
        For an unknown method, or one that needs the pooled rows without them; methods raise it
        too for options they refuse.

    Examples
    --------
    Three sites; the histogram method sums their class histograms by secure aggregation and
    gets the AUC of the pooled rows without pooling them:

    >>> import pandas as pd
    >>> from fedroc.federation import Federation
    >>> from fedroc.metrics import roc_auc
    >>> rng = np.random.default_rng(0)
    >>> frames = {}
    >>> for name in ("north", "south", "east"):
    ...     y = rng.random(200) < 0.4
    ...     s = 1 / (1 + np.exp(-(rng.normal(size=200) + 1.5 * y)))
    ...     frames[name] = pd.DataFrame({"label": y.astype(int), "score": s})
    >>> result = evaluate(Federation.from_frames(frames), "histogram")
    >>> rows = pd.concat(frames.values())
    >>> result.method, abs(result.auc - roc_auc(rows["label"], rows["score"])) < 1e-4
    ('histogram', True)
    """
    from fedroc.federation import basic

    spec = get_method(method)
    if spec.needs_pooled and pooled is None:
        raise InputError(f"method {method!r} needs the pooled rows (pass pooled=...)")
    if pooled is not None and not isinstance(pooled, SiteData):
        raise InputError(
            f"pooled must be a SiteData (SiteData.from_frame(frame) for a table); got "
            f"{type(pooled).__name__}"
        )
    _check_options(method, spec, options)
    inputs = EvaluationInputs(federation, pooled, seed, confidence_level)
    if "calibration_bins" not in options and "calibration_bins" in spec.parameters:
        # A method that draws its own curve (the histogram's, from its tree) gets the bins
        # asked for: it was left at its default 10 whatever --bins said.
        options = {**options, "calibration_bins": calibration_bins}
    elif calibration_bins is not None and not spec.needs_pooled:
        # The curve below is the sites' (fedroc.calibration takes 2 to 100 bins): refused
        # after the run, the method's releases (the ROC-GLM's noisy scores) were spent.
        _check_site_calibration_bins(calibration_bins)
    result = _small_class_caveat(_withhold_undefined_interval(spec.run(inputs, **options)))
    if calibration_bins is None or "brier" in result.extra or method == "pooled":
        return result
    start = federation.mark()
    with federation.progress_phase("Brier and calibration"):
        if not basic.all_probabilities(federation):  # a site with a wider grid: no (H15-2)
            return result.with_extra(brier=None, calibration=None)
        brier, _ = basic.distributed_brier(federation)
        cal, note = sites_calibration(federation, n_bins=calibration_bins)
    if note:
        result = replace(result, released=result.released.with_notes(note))
    if cal is None:
        return result.with_extra(brier=brier, calibration=None)
    extra_released = federation.released(start)
    return result.with_extra(
        brier=brier,
        calibration=cal.curve,
        calibration_released={"rounds": extra_released.rounds},
    )


def _check_options(method: str, spec: Method, options: Mapping[str, Any]) -> None:
    """Refuse an option the method's runner does not take, by evaluate's name for it.

    ``evaluate(fed, "histogram", quantile=64)`` raised "run_histogram() got an unexpected
    keyword argument 'quantile'", naming a function the caller never called, where the CLI
    says "Did you mean --quantiles?".
    """
    import difflib

    params = spec.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    takes = [
        name for name in list(params)[1:] if params[name].kind is not params[name].VAR_POSITIONAL
    ]
    for name in options:
        if name not in takes:
            close = difflib.get_close_matches(name, takes, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(
                f"evaluate(..., {method!r}) got an unexpected option {name!r}{hint} "
                f"(the {method} method takes {', '.join(takes) or 'no options'})"
            )


def _check_site_calibration_bins(bins: Any) -> None:
    from fedroc.federation.basic import check_calibration_bins

    try:
        check_calibration_bins(bins)
    except InputError as exc:
        raise InputError(f"{exc} (the sites' calibration curve)") from None


def interval_caveat(
    auc: float, ci: Sequence[float] | None, *, precision_bits: int | None = None
) -> str | None:
    """Say why an AUC interval is undefined or a single point, or None when it is neither.

    DeLong's logit interval (pooled, histogram, MPC, ``fedroc metrics``) is undefined at an
    AUC of 0 or 1 (the classes perfectly separated: the variance is 0 and the logit
    infinite), and its variance below two rows of a class. DeLong's variance is also 0 when
    every score ties (the only case with an AUC strictly between 0 and 1: one score for all
    positives and the same for all negatives), and then every interval is the point 0.5,
    as pROC's ``ci.auc`` gives it too (0.5-0.5): right for a score that is constant
    everywhere, but a sample whose scores happen to tie says nothing of how a model ranks
    other rows. Either was shown without a word (a ``[null, null]`` or ``[0.5, 0.5]``).

    Parameters
    ----------
    auc : float
        The AUC estimate.
    ci : sequence of two floats, or None
        Its interval (NaN where undefined); None: no interval to explain.
    precision_bits : int, optional
        The AUC was opened rounded to ``2^-precision_bits`` (the MPC job): an AUC of 0 or
        1 may then be one a few pairs away from it.

    Returns
    -------
    str or None
        One sentence for ``caveats``, or None when the interval needs none.
    """
    if ci is None:
        return None
    if all(math.isfinite(v) for v in ci):
        if ci[0] != ci[1] or not math.isfinite(auc) or auc in (0.0, 1.0):
            return None
        if auc != 0.5:  # not ties (they give 0.5): a variance rounded to 0 (MPC opens 2^-28)
            return (
                f"the interval is the point {auc:g}: the variance it was computed from is 0 "
                "at the precision it was released to, which understates the uncertainty"
            )
        return (
            f"the interval is the point {auc:g}: every score ties (the same score for every "
            "row), so the AUC is 0.5 from ties alone and DeLong's variance is 0; the rows "
            "show nothing of how the model ranks other rows (give scores that vary)"
        )
    if not math.isfinite(auc):
        return "no interval: there is no AUC"
    if auc in (0.0, 1.0):
        side = "above" if auc == 1.0 else "below"
        ranks = (
            f"every positive ranks {side} every negative"
            if precision_bits is None
            else f"as opened, rounded to 2^-{precision_bits}: every positive ranks {side} "
            "every negative, or all but a fraction of the pairs below that"
        )
        return (
            f"no interval: the AUC is {auc:g} ({ranks}), where DeLong's variance is 0 and the "
            "logit interval is undefined"
        )
    return "no interval: its variance is undefined (fewer than two rows of a class)"


def _withhold_undefined_interval(result: EvaluationResult) -> EvaluationResult:
    """Withhold an interval that is not two finite numbers, saying why in ``caveats``.

    Such an interval was returned as ``(nan, nan)`` (``[null, null]`` in JSON) without a
    word; it is None with the reason instead, as every method that withholds its interval
    does. A point interval (every score tied) is kept, with its reason
    (:func:`interval_caveat`).
    """
    ci = result.auc_ci
    mpc = result.extra.get("mpc")
    bits = mpc.get("precision_bits") if isinstance(mpc, dict) else None
    why = interval_caveat(result.auc, ci, precision_bits=bits)
    if ci is None or why is None:
        return result
    if all(math.isfinite(v) for v in ci):
        return result.with_caveat(why)
    return replace(result, auc_ci=None).with_caveat(why)


# Where fedroc's audit measured DeLong's logit interval below its level by more than 3 Monte
# Carlo SEs (scripts/results/coverage_audit_pooled.md): under 10 rows in the smaller class,
# or at most 50 with an AUC of 0.8 or more (0.2 or less).
_FEW_ROWS, _FEW_ROWS_HIGH_AUC, _HIGH_AUC = 10, 50, 0.8


def _small_class_caveat(result: EvaluationResult) -> EvaluationResult:
    """Say where DeLong's logit interval covers less than its level (few rows of a class).

    fedroc's audit (``scripts/coverage_audit.py``, 1000 runs a cell) measured the logit
    interval at 0.81 to 0.91 for a nominal 0.95 with 5 to 50 rows of the smaller class at a
    high AUC: the placements of a small class miss its rare extreme rows, which makes the
    AUC high and its SE small together. The pooled method and the histogram under secure
    aggregation give fedroc's default instead (:func:`fedroc.metrics.small_sample_ci`,
    which covers there, scripts/results/delong_small_sample.md); the MPC method keeps the
    logit interval (the default needs the class counts and the tie pattern, which the MPC
    job keeps secret), and the histogram under DP has an interval of its own.
    """
    n_pos, n_neg = result.extra.get("n_pos"), result.extra.get("n_neg")
    without_default = result.method == "mpc" or (
        result.method == "histogram" and result.extra.get("mode") != "secure-aggregation"
    )
    if result.auc_ci is None or not without_default:
        return result
    if not math.isfinite(result.auc):
        return result
    far = max(result.auc, 1.0 - result.auc) >= _HIGH_AUC
    if n_pos is None or n_neg is None:
        n_pos, n_neg = _class_counts_of_curve(result.extra.get("calibration"))
    if n_pos is None or n_neg is None:
        return _secret_class_caveat(result, far)
    m = min(float(n_pos), float(n_neg))
    if not (m < _FEW_ROWS or (m <= _FEW_ROWS_HIGH_AUC and far)):
        return result
    why = (
        f"the interval may be too narrow: with {m:.0f} rows in the smaller class"
        + (f" and an AUC of {result.auc:.2f}" if far else "")
        + ", DeLong's logit interval covered 81% to 91% of the time instead of 95% in "
        "fedroc's coverage audit (scripts/results/coverage_audit_pooled.md)"
    )
    return result.with_caveat(why)


def _class_counts_of_curve(curve: Any) -> tuple[int | None, int | None]:
    """Return the class counts a secure calibration curve gives (every row counted), or None.

    The MPC job with its calibration curve (``--mpc-calibration``) keeps P and N secret in
    its own outputs, but the curve's counts and observed fractions give them; the caveat
    goes by them then. Unknown (None) when a non-empty bin's fraction is withheld.
    """
    count = getattr(curve, "count", None)
    frac = getattr(curve, "observed_fraction", None)
    if count is None or frac is None:
        return None, None
    k = np.asarray(count, dtype=np.float64)
    f = np.asarray(frac, dtype=np.float64)
    if k.shape != f.shape or not np.isfinite(f[k > 0]).all():
        return None, None
    n_pos = round(float(np.sum(k[k > 0] * f[k > 0])))
    return n_pos, round(float(k.sum())) - n_pos


def _secret_class_caveat(result: EvaluationResult, far: bool) -> EvaluationResult:
    """Give the caveat of :func:`_small_class_caveat` where the class counts are secret (MPC).

    The job opens only that each class has at least its ``min_class_count`` rows (and the
    total, from the list lengths): the caveat is said wherever the smaller class may lie in
    the audit's low-coverage region, as a condition on the count the analyst cannot see.
    """
    mpc = result.extra.get("mpc")
    at_least = int(mpc["min_class_count"]) if isinstance(mpc, dict) else 1
    limit = _FEW_ROWS_HIGH_AUC if far else _FEW_ROWS - 1
    if at_least > limit:
        return result
    why = (
        f"the interval may be too narrow: if the smaller class has {limit} rows or fewer "
        f"(the job keeps the class counts secret; it opened that each has at least "
        f"{at_least})"
        + (f" at an AUC of {result.auc:.2f}" if far else "")
        + ", DeLong's logit interval covered 81% to 91% of the time instead of 95% in "
        "fedroc's coverage audit (scripts/results/coverage_audit_pooled.md; 0.90 for the MPC "
        "method with 50 positives at an AUC of 0.96 in scripts/results/coverage_all.md)"
    )
    return result.with_caveat(why)


def sites_calibration(
    federation: Federation, *, n_bins: int = 10
) -> tuple[SiteCalibration | None, str]:
    """Compute the sites' calibration curve, through secure aggregation where they allow it.

    A site releases exact binned counts one way, clear or secure, for its lifetime
    (:func:`fedroc.federation.basic.bind_exact_counts`), so the curve a method adds goes
    the way that leaves every method free to follow: through secure aggregation (the
    analyst sees only the sums; a site's bins under q rows stay out of them, as in the
    clear). In the clear (paper 1, section 4.1,
    bins under q rows withheld at each site) where secure aggregation is refused, for
    example below the sites' ``secagg_min_sites`` or at sites that released their counts
    in the clear before. Where neither way is answered the curve is withheld.

    Parameters
    ----------
    federation : Federation
        The sites.
    n_bins : int, default 10
        Number of equal-width probability bins on [0, 1] (edges on the 1/4096 grid).

    Returns
    -------
    calibration : SiteCalibration or None
        The curve, or None where it is withheld.
    note : str
        Empty for the secure curve; else why it is in the clear, or why it is withheld.
    """
    from fedroc.federation import basic
    from fedroc.secagg import check_secure_sum
    from fedroc.secagg.statistics import secure_calibration

    try:
        # Asked first, so that sites that would refuse the sum (too few, bound to the clear
        # way) refuse it before the others bind their counts to the secure way: that left
        # them bound to two ways, and the curve withheld for good.
        check_secure_sum(federation, basic.FN_CALIBRATION, exact_counts=True)
        return secure_calibration(federation, n_bins=n_bins), ""
    except (DisclosureError, InputError) as exc:
        secure_refusal = exc
    try:
        return basic.distributed_calibration(federation, n_bins=n_bins), (
            f"calibration in the clear (secure aggregation refused: {secure_refusal})"
        )
    except DisclosureError as exc:
        if basic.EXACT_COUNTS_ONE_WAY not in str(exc):
            raise
        return None, f"calibration curve withheld: {secure_refusal}; in the clear: {exc}"


@contextmanager
def explain_class_count_refusals(meaning: Callable[[], str]) -> Iterator[None]:
    """Add to a site's refusal for a small class what it means for the method.

    The policy's words are generic; ``meaning()`` (called when a site refuses) says what the
    refusal means for this method. The refusal stays a :class:`DisclosureError`: it is the
    user's to fix (exit 2 on the command line), not a result. Other errors pass unchanged.

    Parameters
    ----------
    meaning : callable
        ``meaning() -> str``: what the refusal means for this method, appended to the
        site's message.

    Yields
    ------
    None
        The body runs inside; a class-count refusal it raises is raised again, explained.

    Raises
    ------
    DisclosureError
        The site's class-count refusal, with ``meaning()`` added.
    """
    try:
        yield
    except DisclosureError as exc:
        if not is_class_count_refusal(exc):
            raise
        raise DisclosureError(f"{exc}. {meaning()}", site=exc.site, function=exc.function) from exc
