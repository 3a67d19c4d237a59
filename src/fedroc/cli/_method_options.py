"""The methods' own options on the command line: their keywords, and the checks of their values.

``fedroc evaluate`` and ``fedroc flower run`` turn the options given into the methods'
keywords with :func:`method_keywords` and :func:`ask_keywords` (the same dict goes to
:func:`fedroc.methods.evaluate`, in process or in the ServerApp's ``evaluate`` job). The
methods check the values. ``flower run`` checks them before it connects too
(:func:`check_values`): a bad value was refused only by the ServerApp, after a run's
start-up, and loading the methods here to ask them would cost ``flower run`` the imports it
avoids (pandas, scipy: 1-5 s, docs/flower.md). The checks mirror the methods' own; the
tests hold the two together (tests/test_flower_options.py).

Imported by ``fedroc --help``: nothing heavy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from fedroc.exceptions import InputError

# Method keyword -> flag of the options that ask for more than the AUC.
ASK_OPTIONS = {
    "max_fpr": "--max-fpr",
    "at_specificity": "--at-specificity",
    "at_sensitivity": "--at-sensitivity",
    "youden": "--youden",
    "compare": "--compare-score",
}

# Methods that draw no random numbers of the analyst's, and why: --seed (``seed``) would
# change nothing in them (tests/test_cli_usability.py runs rocglm and clustered with two
# seeds and compares), so it is refused rather than taken and ignored.
UNSEEDED_METHODS = {
    "rocglm": "its one resampling (the bagged deconvolution) is seeded by the released noisy "
    "values, so that the sites and the analyst draw the same resamples, and the sites' DP "
    "noise is their own",
    "mpc": "its randomness (shares, masks) is cryptographic, drawn by the parties and the "
    "sites, never from a seed",
    "clustered": "its estimates and intervals are computed in closed form from the sums the "
    "sites release; it draws no random numbers",
}


def check_seed(method: str, seed: int | None) -> None:
    """Refuse ``--seed`` for a method that draws no random numbers of the analyst's."""
    why = UNSEEDED_METHODS.get(method)
    if seed is not None and why is not None:
        raise InputError(
            f"--seed {seed} does not apply to --method {method}: {why}; leave --seed out"
        )


# The methods' keywords that have an option of their own, so that a method's message about
# one ("quantiles must be an integer >= 2; got 0") names what the user typed.
KEYWORD_OPTIONS = {
    **ASK_OPTIONS,
    "quantiles": "--quantiles",
    "dp_epsilon": "--dp-epsilon",
    "dp_noise": "--dp-noise",
    "dp_mode": "--dp-mode",
    "interpolation": "--interpolation",
    "branching": "--branching",
    "height": "--height",
    "score_range": "--score-range",
    "score_transform": "--score-transform",
    "epsilon": "--epsilon",
    "delta": "--delta",
    "sensitivity": "--sensitivity",
    "dp_calibration": "--dp-calibration",
    "privacy": "--privacy",
    "thresholds": "--thresholds",
    "n_thresholds": "--n-thresholds",
    "correction": "--correction",
    "bootstrap": "--bootstrap",
    "score_levels": "--score-levels",
    "a0": "--a0",
    "mpc_sort": "--mpc-sort",
    "mpc_delta": "--mpc-delta",
    "mpc_precision": "--mpc-precision",
    "frac_bits": "--mpc-precision",  # the MPC engine's name for it
    "mpc_min_class_count": "--mpc-min-class-count",
    "population_estimator": "--population-estimator",
    "sigma11": "--sigma11",
    "interval": "--cluster-interval",
    "calibration_bins": "--bins",
}


def option_names(method: str) -> dict[str, str]:
    """Map the method's keywords to the options that set them (for ``name_options``).

    ``n_bins`` is ``--cluster-bins`` for the clustered method, ``--bins`` for the others.
    """
    return {**KEYWORD_OPTIONS, "n_bins": "--cluster-bins" if method == "clustered" else "--bins"}


def _parse_range(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise InputError(f"--score-range must be LO,HI (two numbers); got {text!r}") from None
    return lo, hi


def _parse_levels(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise InputError(
            f"--score-levels must be numbers separated by commas; got {text!r}"
        ) from None


def method_keywords(
    *,
    quantiles: int | None = None,
    dp_epsilon: float | None = None,
    dp_noise: str | None = None,
    dp_mode: str | None = None,
    interpolation: str | None = None,
    branching: int | None = None,
    height: int | None = None,
    score_range: str | None = None,
    score_transform: str | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    sensitivity: float | None = None,
    dp_calibration: str | None = None,
    privacy: str | None = None,
    thresholds: str | None = None,
    n_thresholds: int | None = None,
    correction: str | None = None,
    bootstrap: int | None = None,
    score_levels: str | None = None,
    a0: float | None = None,
    mpc_cluster: str | None = None,
    mpc_sort: str | None = None,
    mpc_delta: int | None = None,
    mpc_precision: int | None = None,
    mpc_min_class_count: int | None = None,
    mpc_calibration: bool = False,
    cluster_bins: int | None = None,
    population_estimator: str | None = None,
    sigma11: str | None = None,
    cluster_interval: str | None = None,
    plain: bool | None = None,
) -> dict[str, Any]:
    """Return the method options given (None: the method's default) under the methods' keywords.

    The arguments are the options' values as typed (``score_range`` "LO,HI",
    ``score_levels`` "1,2,3"); the result is JSON-ready.
    """
    given = {
        # histogram (paper 5)
        "quantiles": quantiles,
        "dp_epsilon": dp_epsilon,
        "dp_noise": dp_noise,
        "dp_mode": dp_mode,
        "interpolation": interpolation,
        "branching": branching,
        "height": height,
        "score_range": None if score_range is None else _parse_range(score_range),
        "score_transform": score_transform,
        # rocglm (paper 1)
        "epsilon": epsilon,
        "delta": delta,
        "sensitivity": sensitivity,
        "dp_calibration": dp_calibration,
        "privacy": privacy,
        "thresholds": thresholds,
        "n_thresholds": n_thresholds,
        "correction": correction,
        "bootstrap": bootstrap,
        "score_levels": None if score_levels is None else _parse_levels(score_levels),
        "a0": a0,
        # mpc (paper 4)
        "mpc_cluster": mpc_cluster,
        "mpc_sort": mpc_sort,
        "mpc_delta": mpc_delta,
        "mpc_precision": mpc_precision,
        "mpc_min_class_count": mpc_min_class_count,
        "mpc_calibration": True if mpc_calibration else None,
        # clustered (paper 3)
        "n_bins": cluster_bins,
        "population_estimator": population_estimator,
        "sigma11": sigma11,
        "interval": cluster_interval,
        "secure": None if plain is None else not plain,
    }
    return {k: v for k, v in given.items() if v is not None}


def ask_keywords(
    *,
    max_fpr: float | None = None,
    at_specificity: Sequence[float] | None = None,
    at_sensitivity: Sequence[float] | None = None,
    youden: bool = False,
    compare_score: str | None = None,
) -> dict[str, Any]:
    """Collect the method keywords of the options beyond the AUC that were given.

    The methods check their ranges.
    """
    asks: dict[str, Any] = {}
    if max_fpr is not None:
        asks["max_fpr"] = max_fpr
    if at_specificity:
        asks["at_specificity"] = list(at_specificity)
    if at_sensitivity:
        asks["at_sensitivity"] = list(at_sensitivity)
    if youden:
        asks["youden"] = True
    if compare_score is not None:
        asks["compare"] = True
    return asks


# -- the checks of `flower run`, before it connects -----------------------------------------
_ASKS = frozenset({"max_fpr", "at_specificity", "at_sensitivity", "youden"})

#: The keywords each method takes of those ``flower run`` gives (the methods' runners' own
#: signatures, tests/test_flower_options.py; `fedroc evaluate` reads the signatures).
FLOWER_TAKES: dict[str, frozenset[str]] = {
    "histogram": frozenset(
        {
            "quantiles",
            "dp_epsilon",
            "dp_noise",
            "dp_mode",
            "interpolation",
            "branching",
            "height",
            "score_range",
            "score_transform",
            *_ASKS,
        }
    ),
    "rocglm": frozenset(
        {
            "epsilon",
            "delta",
            "sensitivity",
            "dp_calibration",
            "privacy",
            "thresholds",
            "n_thresholds",
            "correction",
            "bootstrap",
            "score_levels",
            "a0",
            "score_range",
        }
    ),
    "clustered": frozenset(
        {"n_bins", "population_estimator", "sigma11", "interval", "secure", "score_range"}
    ),
    "mpc": _ASKS | {"mpc_min_class_count"},
}

#: The values the methods take (their constants: tests/test_flower_options.py). The
#: clustered method across sites has no jackknife interval (the pooled analysis has).
CHOICES: dict[str, tuple[str, ...]] = {
    "dp_noise": ("discrete", "continuous"),
    "dp_mode": ("distributed", "local"),
    "interpolation": ("pchip", "linear", "midpoint"),
    "score_transform": ("logistic", "arctan"),
    "dp_calibration": ("classic", "analytic"),
    "privacy": ("default", "paper"),
    "thresholds": ("grid", "positives"),
    "correction": ("deconvolution", "none"),
    "population_estimator": ("corrected", "eq5", "between"),
    "sigma11": ("corollary6", "authors"),
    "interval": ("logit", "t", "wald"),
}
#: Integers: (least, greatest or None).
INTEGERS: dict[str, tuple[int, int | None]] = {
    "quantiles": (2, None),
    "branching": (2, None),
    "height": (1, None),
    "n_thresholds": (2, 64),  # rocglm's MAX_THRESHOLDS
    "bootstrap": (2, 500),  # rocglm's MAX_RESAMPLES
    "n_bins": (1, 1_000_000),  # clustered's MAX_BINS
    # From 2: the MPC job of `flower run` always computes the AUC's CI (it has no
    # --no-mpc-ci), whose DeLong variance divides by P - 1; 1 was refused by the ServerApp
    # after the run's start-up. To the MPC engine's MAX_N.
    "mpc_min_class_count": (2, (1 << 28) - 1),
}
_POSITIVE = ("dp_epsilon", "epsilon", "sensitivity")
_OPEN_UNIT = ("delta", "a0")


def check_values(options: Mapping[str, Any]) -> None:
    """Refuse a value the methods refuse, naming the option and the value.

    ``options`` are keywords of :func:`method_keywords` and :func:`ask_keywords`. What
    depends on the sites' data, or on several options together in ways the methods work out
    (the tree's size, DP noise too wide for 64-bit counts), the method refuses in the run.
    """
    names = option_names("clustered")
    for key, choices in CHOICES.items():
        if key in options and options[key] not in choices:
            raise InputError(f"{names[key]} must be one of {list(choices)}; got {options[key]!r}")
    for key, (least, most) in INTEGERS.items():
        value = options.get(key)
        if value is not None and not (least <= value and (most is None or value <= most)):
            bound = f">= {least}" if most is None else f"in [{least}, {most}]"
            raise InputError(f"{names[key]} must be an integer {bound}; got {value}")
    _check_numbers(options, names)
    if "score_range" in options:
        if "score_transform" in options:
            raise InputError("give --score-range or --score-transform, not both")
        lo, hi = options["score_range"]
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi and math.isfinite(hi - lo)):
            raise InputError(
                "--score-range must be two finite numbers lo < hi, hi - lo finite too; "
                f"got {lo:g},{hi:g}"
            )
    levels = options.get("score_levels")
    if levels is not None and (not all(map(math.isfinite, levels)) or len(set(levels)) < 2):
        raise InputError(f"--score-levels must be at least two finite numbers; got {levels}")
    if options.get("dp_mode", "distributed") != "distributed" and "dp_epsilon" not in options:
        raise InputError(f"--dp-mode {options['dp_mode']!r} needs --dp-epsilon")


def _check_numbers(options: Mapping[str, Any], names: Mapping[str, str]) -> None:
    for key in _POSITIVE:
        value = options.get(key)
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise InputError(f"{names[key]} must be a positive number; got {value:g}")
    for key in _OPEN_UNIT:
        value = options.get(key)
        if value is not None and not 0 < value < 1:
            raise InputError(f"{names[key]} must lie in (0, 1); got {value:g}")
    if "max_fpr" in options and not 0 < options["max_fpr"] <= 1:
        raise InputError(f"--max-fpr must lie in (0, 1]; got {options['max_fpr']:g}")
    for key in ("at_specificity", "at_sensitivity"):
        for value in options.get(key, ()):
            if not 0 <= value <= 1:
                raise InputError(f"{names[key]} must lie in [0, 1]; got {value:g}")
