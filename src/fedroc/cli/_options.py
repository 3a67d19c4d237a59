"""Options that several commands declare alike, declared once (``Annotated`` aliases).

A command gives its own default: ``label: LabelOption = "label"``. Imported by
``fedroc --help``: typer only, nothing heavy.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, TypeVar

import typer

MaxFprOption = Annotated[
    float | None,
    typer.Option(help="Partial AUC up to this false positive rate (McClish-standardised)."),
]
AtSpecificityOption = Annotated[
    list[float] | None,
    typer.Option(
        metavar="FLOAT", help="Operating point: best sensitivity at this specificity; repeatable."
    ),
]
AtSensitivityOption = Annotated[
    list[float] | None,
    typer.Option(
        metavar="FLOAT", help="Operating point: best specificity at this sensitivity; repeatable."
    ),
]
# metavar "": typer >= 0.21 (which `pip install fedroc` gets; flwr pins 0.20) shows a flag's
# type, "--json <bool>", and users typed "--json true".
YoudenOption = Annotated[
    bool, typer.Option("--youden", metavar="", help="Operating point: Youden's threshold.")
]
JsonOption = Annotated[bool, typer.Option("--json", metavar="", help="Print one JSON object.")]
LabelOption = Annotated[str, typer.Option(help="Label column (binary).")]
ScoreOption = Annotated[str, typer.Option(help="Score column (higher = more likely positive).")]
PosLabelOption = Annotated[
    str | None, typer.Option(help="Label value of the positive class (default 1).")
]
CompareScoreOption = Annotated[
    str | None,
    typer.Option(
        help="A second model's score column of the same rows: the paired comparison "
        "(AUC of --score minus AUC of this, paired DeLong), its CI and p-value."
    ),
]
MinCountOption = Annotated[
    int, typer.Option(help="Disclosure policy: minimum rows per released aggregate (q).")
]


def _confidence_level(value: float) -> float:
    # Checked here so that the message names --confidence, not the API's confidence_level.
    if not 0.0 < value < 1.0:
        raise typer.BadParameter(f"must lie strictly between 0 and 1 (e.g. 0.95); got {value:g}")
    return value


ConfidenceOption = Annotated[
    float,
    typer.Option(help="Confidence level of the intervals, in (0, 1).", callback=_confidence_level),
]
#: Calibration bins where --bins is not given.
DEFAULT_CALIBRATION_BINS = 10
# None: not given (the default, DEFAULT_CALIBRATION_BINS, then applies where a curve is made),
# so that a command can tell `--bins 10` given to a method that makes no curve.
CalibrationBinsOption = Annotated[
    int | None,
    typer.Option("--bins", min=1, help=f"Calibration bins (default {DEFAULT_CALIBRATION_BINS})."),
]
ClusterFileOption = Annotated[Path, typer.Option(help="Cluster file of the running parties.")]
RootCertificatesOption = Annotated[
    Path | None, typer.Option(help="CA certificate of the SuperLink (PEM).")
]

# --- the methods' own options: `fedroc evaluate` and `fedroc flower run` (same help) ---
# A help beginning "METHOD: " puts the option in the panel "Options of --method METHOD"
# (fedroc.cli._method_panels). The methods check the values (flower run first checks them
# itself, fedroc.cli._method_options, before it connects).


def _method_option(kind: type, help: str) -> Any:
    """Declare a method option: a ``kind``, or None where not given, with this help."""
    return Annotated[kind | None, typer.Option(help=help)]


#: The method options ``fedroc evaluate`` and ``fedroc flower run`` both take (papers 1, 5
#: and 3), in the order of their help; every one defaults to None (not given).
SHARED_METHOD_OPTIONS: Mapping[str, Any] = MappingProxyType(
    {
        # rocglm (paper 1)
        "epsilon": _method_option(float, "rocglm: DP epsilon of the noisy scores (default 1)."),
        "delta": _method_option(
            float,
            "rocglm: DP delta of the noisy scores (default 1/(10 n), n the largest site's rows).",
        ),
        "sensitivity": _method_option(
            float, "rocglm: l2-sensitivity of the score (default: site heuristic)."
        ),
        "dp_calibration": _method_option(
            str,
            "rocglm: Gaussian mechanism, classic or analytic (default analytic; classic with "
            "--privacy paper).",
        ),
        "privacy": _method_option(
            str,
            "rocglm: Instead of --epsilon/--delta, 'default' (epsilon 1, delta 1/(10 n)) "
            "or 'paper' (paper 1's table; sites refuse its delta unless their policy allows).",
        ),
        "thresholds": _method_option(str, "rocglm: Threshold rule, grid (default) or positives."),
        "n_thresholds": _method_option(int, "rocglm: Size of the grid (default 28, at most 64)."),
        "correction": _method_option(
            str,
            "rocglm: 'deconvolution' (default: corrects the noise bias and includes the "
            "noise in the CI) or 'none' (paper 1's estimate).",
        ),
        "bootstrap": _method_option(
            int,
            "rocglm: resamples of the noisy negatives the deconvolution is bagged over "
            "and the CI's noise part comes from (default 50, at most 500); pooled: "
            "stratified bootstrap CI of the AUC with this many samples (seeded by --seed).",
        ),
        "score_levels": _method_option(
            str,
            "rocglm: The public levels of rated scores, e.g. 1,2,3,4,5 (default: none, "
            "continuous scores).",
        ),
        "a0": _method_option(float, "rocglm: One-sided test of H0: AUC <= A0 (default: no test)."),
        # histogram (paper 5)
        "quantiles": _method_option(int, "histogram: Quantiles per class (Q, default 1024)."),
        "dp_epsilon": _method_option(
            float,
            "histogram: Distributed DP with this total epsilon per site, of a row added "
            "or removed (the paper's); each site's ledger is charged twice it, as a moved row "
            "changes two counts (default: no DP, exact sums by secure aggregation).",
        ),
        "dp_noise": _method_option(
            str, "histogram: DP noise shares, discrete (default) or continuous."
        ),
        "dp_mode": _method_option(
            str,
            "histogram: With --dp-epsilon, 'distributed' (default: noise shares summed by "
            "secure aggregation) or 'local' (each site's tree fully noised, sent in the clear).",
        ),
        "interpolation": _method_option(
            str, "histogram: Between quantiles: pchip (the paper's, default), linear or midpoint."
        ),
        "branching": _method_option(int, "histogram: Branching factor of the tree (default 2)."),
        "height": _method_option(int, "histogram: Levels of the tree (default ceil(log_b Q) + 2)."),
        "score_range": _method_option(
            str, "histogram, rocglm, clustered: Public score range LO,HI (default 0,1)."
        ),
        "score_transform": _method_option(
            str,
            "histogram: Logistic or arctan map of unbounded scores onto (0, 1) (default: "
            "none, scores in --score-range).",
        ),
        # clustered (paper 3)
        "cluster_bins": _method_option(int, "clustered: Shared score bins (default 1000)."),
        "population_estimator": _method_option(
            str, "clustered: Population AUC estimator, corrected (default), eq5 or between."
        ),
        "sigma11": _method_option(
            str, "clustered: Sigma11 divisor, corollary6 (default) or authors."
        ),
        "cluster_interval": _method_option(
            str, "clustered: Interval, logit (default: t on I-1 df on the logit scale), t or wald."
        ),
        "plain": Annotated[
            bool | None,
            typer.Option(
                "--plain",
                help="clustered: Sums in the clear (one or two sites whose policy sets "
                "clear_histograms) instead of secure aggregation.",
            ),
        ],
    }
)
#: The options beyond the AUC that ``fedroc metrics``, ``fedroc evaluate`` and ``fedroc
#: flower run`` take (their keywords are those of :func:`fedroc.methods.evaluate`).
ASK_OPTIONS: Mapping[str, Any] = MappingProxyType(
    {
        "max_fpr": MaxFprOption,
        "at_specificity": AtSpecificityOption,
        "at_sensitivity": AtSensitivityOption,
        "youden": YoudenOption,
    }
)
# A command's parameter of this name stands for these options (takes_options).
_GROUPS = {"method_options": SHARED_METHOD_OPTIONS, "asks": ASK_OPTIONS}
_DEFAULTS = {"youden": False}
#: The default of a command's ``method_options`` or ``asks`` parameter (typer never sees it).
NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})

_R = TypeVar("_R")


def takes_options(command: Callable[..., _R]) -> Callable[..., _R]:
    """Let a command's parameters ``method_options`` and ``asks`` stand for shared options.

    Typer reads a command's options from its signature: the command declares, where the
    options go in its help, ``method_options: Mapping[str, Any] = NO_OPTIONS`` for
    :data:`SHARED_METHOD_OPTIONS` or ``asks: Mapping[str, Any] = NO_OPTIONS`` for
    :data:`ASK_OPTIONS`, and typer sees each option of the group there instead. The command
    gets the group's values as one mapping (None, or False for ``youden``, where not
    given). So the options several commands share, and their help, are declared once.

    Parameters
    ----------
    command : callable
        A typer command with a parameter ``method_options`` or ``asks``.

    Returns
    -------
    callable
        The command as typer should register it.
    """
    signature = inspect.signature(command, eval_str=True)
    parameters = []
    groups = {}
    for parameter in signature.parameters.values():
        options = _GROUPS.get(parameter.name)
        if options is None:
            parameters.append(parameter)
            continue
        groups[parameter.name] = options
        parameters += [
            inspect.Parameter(name, parameter.kind, annotation=option, default=_DEFAULTS.get(name))
            for name, option in options.items()
        ]
    if not groups:
        raise TypeError(f"{command.__name__} has no parameter {' or '.join(_GROUPS)}")

    @functools.wraps(command)
    def with_options(**given: Any) -> _R:
        for group, options in groups.items():
            given[group] = {name: given.pop(name) for name in options}
        return command(**given)

    with_options.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return with_options
