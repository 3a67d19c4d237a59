"""Site functions and a method used by the Flower tests (imported at the sites and by the
ServerApp through ``site-modules`` / the job's ``modules``, and by the tests themselves).

``flowertest.rounds`` is a multi-round method that uses what real methods use: site state
kept between calls (a session), DP noise drawn at the sites (seeded by the sites' own
``noise_seed``), per-site arguments and arrays both ways. Its in-process and Flower results
must agree exactly when the sites are configured with the same seed.
"""

from __future__ import annotations

import time

import numpy as np

from fedroc.federation.federation import Federation
from fedroc.federation.records import Record
from fedroc.federation.schema import Float, FloatArray, Int, Text
from fedroc.federation.site import Reply, SiteContext, site_function
from fedroc.methods import EvaluationInputs, EvaluationResult, register_method
from fedroc.privacy.mechanisms import gaussian_noise


@site_function("flowertest.slow", schema={"seconds": Float(0.0, 60.0, default=0.5)})
def _slow(ctx: SiteContext, args: Record) -> Reply:
    time.sleep(float(args["seconds"]))
    return Reply({"n": ctx.data.n}, counts={"rows": ctx.data.n})


@site_function("flowertest.tiny", schema={})
def _tiny(ctx: SiteContext, args: Record) -> Reply:
    return Reply({"sum": float(ctx.data.score[:2].sum())}, counts={"rows": 2})


@site_function("flowertest.boom", schema={})
def _boom(ctx: SiteContext, args: Record) -> Reply:
    raise RuntimeError(f"secret path /data/{ctx.site}.csv, first score {ctx.data.score[0]}")


@site_function("flowertest.open", schema={"session": Text(), "edges": FloatArray()})
def _open(ctx: SiteContext, args: Record) -> Reply:
    """Round 1 of a session: keep the site's histogram of scores in the site state."""
    edges = np.asarray(args["edges"], dtype=np.float64)
    counts = np.histogram(ctx.data.score, bins=edges)[0].astype(np.int64)
    ctx.state[str(args["session"])] = {"counts": counts, "calls": 1}
    return Reply({"bins": int(counts.size)}, counts={"rows": ctx.data.n})


@site_function(
    "flowertest.noisy",
    schema={
        "session": Text(),
        "round": Int(0, 1000),
        "epsilon": Float(0.0, 100.0, open_lo=True),
        "weight": Float(),
    },
)
def _noisy(ctx: SiteContext, args: Record) -> Reply:
    """Later rounds: noisy histogram from the state, scaled by a per-site weight."""
    state = ctx.state[str(args["session"])]
    state["calls"] = int(state["calls"]) + 1
    counts = np.asarray(state["counts"], dtype=np.float64)
    rng = ctx.noise_rng(f"round{args['round']}")
    noise, event = gaussian_noise(
        counts.size, epsilon=float(args["epsilon"]), delta=1e-6, sensitivity=1.0, rng=rng
    )
    values = {
        "hist": counts * float(args["weight"]) + noise,
        "calls": int(state["calls"]),
        "tag": [ctx.site, None, 1.5],
    }
    return Reply(values, kind="noisy", dp=(event,))


@register_method(
    "flowertest.rounds",
    "test method: several rounds with site state, per-site arguments and seeded DP noise",
    demo_options={"rounds": 3},
)
def run_rounds(
    inputs: EvaluationInputs, *, rounds: int = 3, epsilon: float = 1.0
) -> EvaluationResult:
    fed: Federation = inputs.federation
    start = fed.mark()
    edges = np.linspace(0.0, 1.0, 11)
    fed.call("flowertest.open", session="s1", edges=edges)
    total = np.zeros(10)
    calls = []
    for r in range(rounds):
        weights = {name: {"weight": 1.0 + k / 10} for k, name in enumerate(fed.site_names)}
        args = {
            name: {**w, "session": "s1", "round": r, "epsilon": epsilon}
            for name, w in weights.items()
        }
        replies = fed.call_each("flowertest.noisy", args)
        for reply in replies.values():
            total += reply["hist"]
            calls.append(int(reply["calls"]))
    centre = (edges[:-1] + edges[1:]) / 2
    pseudo_auc = float(np.clip((total * centre).sum() / max(total.sum(), 1e-9), 0, 1))
    return EvaluationResult(
        method="flowertest.rounds",
        sites=[{"name": n, "n": -1} for n in fed.site_names],
        auc=pseudo_auc,
        auc_ci=None,
        released=fed.released(start),
        extra={"total": total.tolist(), "calls": calls},
        confidence_level=inputs.confidence_level,
    )
