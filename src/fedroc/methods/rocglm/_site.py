"""Site functions of the distributed ROC-GLM (paper 1, section 4).

Each function runs at a site on its own rows and returns noisy values (A2) or sums over
at least q rows (A1); the site's disclosure policy checks the declared counts and the DP
events, and its audit log records every reply. State between calls (the grouped ROC-GLM
table, the placement values) stays at the site under a session id chosen by the analyst.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from fedroc.exceptions import InputError
from fedroc.federation.records import Record
from fedroc.federation.schema import Bool, Bound, Choice, Float, FloatArray, Int, IntArray, Text
from fedroc.federation.site import Reply, SiteContext, site_function
from fedroc.methods.rocglm._core import (
    GroupedTable,
    check_rule,
    delong_placements,
    grouped_from_cutoffs,
    positive_thresholds,
    score_sensitivity,
    survivor,
)
from fedroc.methods.rocglm._probit import probit_parts
from fedroc.privacy import gaussian_mechanism

__all__ = [
    "FN_FISHER",
    "FN_NOISY",
    "FN_PLACEMENT_SS",
    "FN_SENSITIVITY",
    "FN_SETUP",
]

FN_SENSITIVITY = "rocglm.sensitivity"
FN_NOISY = "rocglm.noisy_scores"
FN_SETUP = "rocglm.setup"
FN_FISHER = "rocglm.fisher"
FN_PLACEMENT_SS = "rocglm.placement_ss"

_STATE_PREFIX = "rocglm:"
# Fits per session (1 + SIMEX's levels x replicates) and Fisher-scoring coefficients per
# call: bounds on what one session can ask of a site's positives.
MAX_FITS = 101
MAX_THRESHOLDS = 200
_SESSION = {"session": Text(64)}


def _session(ctx: SiteContext, args: Record) -> tuple[str, Record]:
    key = _STATE_PREFIX + str(args["session"])
    state = ctx.state.get(key)
    if state is None:
        raise InputError(
            f"site {ctx.site!r} has no ROC-GLM session {args['session']!r}; call {FN_SETUP!r} first"
        )
    return key, state


def _class_counts(ctx: SiteContext) -> dict[str, int]:
    return {"positive": ctx.data.n_pos, "negative": ctx.data.n_neg}


@site_function(FN_SENSITIVITY, schema={"n_breaks": Int(2, 10_000, default=None)})
def _sensitivity(ctx: SiteContext, args: Record) -> Reply:
    """Heuristic l2-sensitivity of this site's scores (see ``score_sensitivity``)."""
    n_breaks = args["n_breaks"]
    value, distance = score_sensitivity(ctx.data.score, None if n_breaks is None else int(n_breaks))
    return Reply({"sensitivity": value, "cell_distance": distance}, counts={"rows": ctx.data.n})


@site_function(
    FN_NOISY,
    schema={
        "epsilon": Float(0.0, 100.0, open_lo=True),
        "delta": Float(0.0, 1.0, open_lo=True),
        "sensitivity": Float(0.0, 1e6, open_lo=True),
        "calibration": Choice("classic", "analytic", default="classic"),
    },
)
def _noisy_scores(ctx: SiteContext, args: Record) -> Reply:
    """Every row's score plus Gaussian noise, released once, sorted, split by class.

    One event covers all rows: each row's score is perturbed exactly once, so each row is
    protected at (epsilon, delta) (the classes are disjoint sets of rows). Sorting removes
    the row order. Counts are declared so that a site with fewer than q positives or
    negatives refuses. The noise is the site's own (OpenDP, or its configured seed).
    """
    d = ctx.data
    noisy, event = gaussian_mechanism(
        d.score,
        epsilon=float(args["epsilon"]),
        delta=float(args["delta"]),
        sensitivity=float(args["sensitivity"]),
        calibration=str(args["calibration"]),
        rng=ctx.noise_rng("rocglm.noise"),
    )
    event = dataclasses.replace(
        event,
        note=(
            f"noisy scores of all {d.n} rows, each once ({d.n_neg} negatives for S0, "
            f"{d.n_pos} positives for S1)"
        ),
    )
    return Reply(
        {"negative": np.sort(noisy[~d.label]), "positive": np.sort(noisy[d.label])},
        kind="noisy",
        counts=_class_counts(ctx),
        dp=(event,),
    )


@site_function(
    FN_SETUP,
    schema={
        **_SESSION,
        "thresholds": Choice("grid", "positives"),
        "negative": FloatArray((Bound(1, 1 << 26),)),
        "positive": FloatArray((Bound(1, 1 << 26),)),
        "t": FloatArray((Bound(1, MAX_THRESHOLDS),), lo=0.0, hi=1.0, default=None),
        "cutoffs": FloatArray(
            (Bound(1, MAX_FITS), Bound(1, MAX_THRESHOLDS)),
            max_size=MAX_FITS * MAX_THRESHOLDS,
            default=None,
        ),
    },
)
def _setup(ctx: SiteContext, args: Record) -> Reply:
    """Receive the noisy survivor functions and build the site's ROC-GLM table.

    Arguments: ``session``; ``negative`` and ``positive``, the pooled sorted noisy scores
    (S~0 and S~1); ``thresholds`` (the rule); for the grid rule ``t`` (the grid) and
    ``cutoffs`` (shape (R, n_T): R fits, see ``grid_cutoffs``).

    Replies with the sums of the DeLong placement values of this site's rows against the
    noisy survivor function of the other class (distrAVG's first step).
    """
    rule = check_rule(str(args["thresholds"]))
    neg = np.asarray(args["negative"], np.float64)
    pos_ref = np.asarray(args["positive"], np.float64)
    if neg.size == 0 or pos_ref.size == 0:
        raise InputError("the noisy survivor functions must not be empty")
    d = ctx.data
    pos = np.sort(d.score[d.label])
    negs = d.score[~d.label]
    state: dict[str, Any] = {"rule": rule, "n_pos": pos.size}
    if rule == "grid":
        if args["cutoffs"] is None or args["t"] is None:
            raise InputError("the grid rule needs t and cutoffs")
        cutoffs = np.atleast_2d(np.asarray(args["cutoffs"], np.float64))
        t = np.asarray(args["t"], np.float64)
        if cutoffs.shape[1] != t.size:
            raise InputError(f"cutoffs have {cutoffs.shape[1]} columns for {t.size} thresholds")
        state["t"] = t
        state["successes"] = grouped_from_cutoffs(pos, cutoffs)
        state["trials"] = np.full(t.size, float(pos.size))
    else:
        table = GroupedTable.from_positives_rule(
            survivor(neg, pos), positive_thresholds(pos, f"site {ctx.site!r}")
        )
        if table.t.size == 0:
            raise InputError(
                f"site {ctx.site!r} has no positive score strictly inside (0, 1) to use as "
                "threshold"
            )
        state["t"] = table.t
        state["successes"] = table.successes[None, :]
        state["trials"] = table.trials
    v10 = delong_placements(neg, pos, below=True)
    v01 = delong_placements(pos_ref, negs, below=False)
    state["v10"] = v10
    state["v01"] = v01
    ctx.state[_STATE_PREFIX + str(args["session"])] = state
    return Reply(
        {
            "n_pos": int(v10.size),
            "sum_v10": float(v10.sum()),
            "n_neg": int(v01.size),
            "sum_v01": float(v01.sum()),
            "n_rows": int(np.asarray(state["t"]).size),
        },
        counts=_class_counts(ctx),
    )


@site_function(
    FN_FISHER,
    schema={
        **_SESSION,
        "gamma": FloatArray((Bound(1, MAX_FITS), 2), lo=-1e6, hi=1e6),
        "fits": IntArray((Bound(1, MAX_FITS),), lo=0, hi=MAX_FITS - 1),
    },
)
def _fisher(ctx: SiteContext, args: Record) -> Reply:
    """Log-likelihood, score vector and Fisher information at the analyst's coefficients.

    ``gamma`` has shape (k, 2) and ``fits`` (k,) says which of the session's tables each
    row belongs to. These are sums over the site's positives (paper 1, eq. 6-7).
    """
    _, state = _session(ctx, args)
    gamma = np.atleast_2d(np.asarray(args["gamma"], np.float64))
    fits = np.asarray(args["fits"], np.int64)
    n_fits = np.asarray(state["successes"]).shape[0]
    if fits.size != gamma.shape[0] or (fits >= n_fits).any():
        raise InputError(f"fits must name one of the session's {n_fits} fits per gamma row")
    succ = state["successes"][fits]
    parts = probit_parts(np.asarray(_probit_x(state)), succ, state["trials"], gamma)
    return Reply(
        {"loglik": parts.loglik, "score": parts.score, "information": parts.information},
        counts={"positive": int(state["n_pos"])},
    )


def _probit_x(state: Record) -> np.ndarray:
    x = state.get("x")
    if x is None:
        from scipy import special

        x = special.ndtri(state["t"])
        state["x"] = x
    return np.asarray(x)


@site_function(
    FN_PLACEMENT_SS,
    schema={
        **_SESSION,
        "mean_v10": Float(0.0, 1.0),
        "mean_v01": Float(0.0, 1.0),
        "finish": Bool(default=True),
    },
)
def _placement_ss(ctx: SiteContext, args: Record) -> Reply:
    """Centred sums of squares of the placement values about the global means (distrVAR).

    With ``finish`` true the session's state is dropped afterwards.
    """
    key, state = _session(ctx, args)
    v10, v01 = state["v10"], state["v01"]
    ss10 = float(np.sum((v10 - float(args["mean_v10"])) ** 2))
    ss01 = float(np.sum((v01 - float(args["mean_v01"])) ** 2))
    if args["finish"]:
        ctx.state.pop(key, None)
    return Reply(
        {"n_pos": int(v10.size), "ss_v10": ss10, "n_neg": int(v01.size), "ss_v01": ss01},
        counts=_class_counts(ctx),
    )
