"""Exact AUROC and AUPR by secure three-party computation (paper 4, ppAURORA).

Threat model: that of :mod:`fedroc.mpc` (semi-honest, at most one of the three computing
parties corrupted; the analyst learns the AUCs and the sites' sizes only).

How the shares travel. The analyst asks every site for its shares with the site function
``fedroc.mpc.share``, passing a fresh job context and the two proxies' X25519 public keys.
The site sorts its rows by score, splits them into two additive shares and seals each share
for its proxy (:mod:`fedroc.mpc.bundle`); its reply (kind ``"shares"``) holds the list length
and two ciphertexts. The analyst relays the ciphertexts to proxy 0 with the job, and proxy 0
forwards proxy 1's. So the sites need no connection to the computing parties (any fedroc
transport carries the reply), and no one but each proxy can open its share: the analyst,
who sees both ciphertexts, sees neither share. The same bundles can be made offline with
``fedroc mpc share`` and submitted with ``fedroc mpc run``. The list length is released in
the clear (as in the paper), so the site's disclosure policy applies to it: a site with fewer
than ``min_count`` rows, or whose policy forbids shares, refuses.

Where the parties run. By default the method starts three local processes talking TLS on
127.0.0.1 (certificates made for the run) and stops them afterwards; with ``mpc_cluster``
it uses a running cluster described by its TOML file (``fedroc mpc party`` on each machine).

The result reports no confidence interval, and no Brier score or calibration curve: those
would need plaintext aggregates beyond the two opened AUCs.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedroc.exceptions import InputError
from fedroc.federation import Reply, SiteContext, site_function
from fedroc.federation.records import Record
from fedroc.federation.schema import Bytes, Text
from fedroc.methods import EvaluationInputs, EvaluationResult, register_method

__all__ = ["MpcDetails", "run_mpc"]

SHARE_FUNCTION = "fedroc.mpc.share"


@site_function(
    SHARE_FUNCTION,
    schema={"context": Text(256), "proxy0_key": Bytes(64), "proxy1_key": Bytes(64)},
)
def share_site(ctx: SiteContext, args: Record) -> Reply:
    """This site's sorted records, split into two shares, each sealed for its proxy."""
    from fedroc.mpc.bundle import make_bundle
    from fedroc.mpc.seal import public_from_bytes

    try:
        context = str(args["context"])
        keys = (
            public_from_bytes(bytes(args["proxy0_key"])),
            public_from_bytes(bytes(args["proxy1_key"])),
        )
    except (KeyError, TypeError) as exc:
        raise InputError(
            f"{SHARE_FUNCTION} needs context, proxy0_key and proxy1_key: {exc}"
        ) from None
    bundle = make_bundle(ctx.site, ctx.data.label, ctx.data.score, keys, context)
    return Reply(
        {
            "n": bundle.n,
            "context": context,
            "box0": np.frombuffer(bundle.box0, dtype=np.uint8),
            "box1": np.frombuffer(bundle.box1, dtype=np.uint8),
        },
        kind="shares",
        counts={"rows": bundle.n},
    )


@dataclass(frozen=True)
class MpcDetails:
    """What the MPC run produced: the opened values and each party's traffic."""

    values: dict[str, float]
    parties: list[dict[str, Any]]
    sort: str
    delta: int | None
    cluster: str
    seconds: float
    spec: dict[str, Any] = field(default_factory=dict)


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


@register_method(
    "mpc",
    "exact AUROC and AUPR by secure 3-party computation (ppAURORA; nothing but the AUCs opened)",
)
def run_mpc(
    inputs: EvaluationInputs,
    *,
    mpc_cluster: str | None = None,
    mpc_sort: str = "oblivious",
    mpc_delta: int = 1,
    mpc_noties: bool = False,
    mpc_timeout: float = 60.0,
) -> EvaluationResult:
    """Run the MPC AUC over the federation's sites.

    Parameters
    ----------
    mpc_cluster : path, optional
        Cluster file of running parties; by default three local processes are started.
    mpc_sort : {"oblivious", "delta"}
        Bitonic merge (nothing opened) or the paper's merge with ``mpc_delta``.
    mpc_delta : int
        The paper's delta (odd), used with ``mpc_sort="delta"``.
    mpc_noties : bool
        Also open the paper's no-tie AUROC (Algorithm 5), for comparison.
    mpc_timeout : float
        Seconds a local party waits for a peer before it gives up.
    """
    from fedroc.mpc.auc import AucSpec
    from fedroc.mpc.bundle import Bundle
    from fedroc.mpc.cluster import Cluster, LocalCluster, RemoteCluster
    from fedroc.mpc.runtime import ROLE
    from fedroc.mpc.seal import public_bytes

    if mpc_sort not in ("oblivious", "delta"):
        raise InputError(f"--mpc-sort must be 'oblivious' or 'delta'; got {mpc_sort!r}")
    if mpc_sort == "delta" and (mpc_delta < 1 or mpc_delta % 2 == 0):
        raise InputError(f"--mpc-delta must be a positive odd integer; got {mpc_delta!r}")
    fed = inputs.federation
    cluster: Cluster = (
        LocalCluster(timeout=mpc_timeout) if mpc_cluster is None else RemoteCluster(mpc_cluster)
    )
    with cluster:
        k0, k1 = cluster.proxy_keys()
        context = secrets.token_hex(16)
        start = fed.mark()
        replies = fed.call(
            SHARE_FUNCTION,
            context=context,
            proxy0_key=public_bytes(k0),
            proxy1_key=public_bytes(k1),
        )
        bundles = [
            Bundle(name, int(r["n"]), str(r["context"]), r["box0"].tobytes(), r["box1"].tobytes())
            for name, r in replies.items()
        ]
        spec = AucSpec(
            tuple(b.n for b in bundles), sort=mpc_sort, delta=mpc_delta, noties=mpc_noties
        )
        outcome = cluster.run(spec, bundles)
        description = cluster.description  # type: ignore[attr-defined]
    parties = [
        {"party": pid, "role": ROLE[pid], **stats.to_dict()}
        for pid, stats in enumerate(outcome.stats)
    ]
    notes = [
        "shares sealed by each site for its proxy (X25519 + ChaCha20-Poly1305); the analyst "
        "relayed ciphertext only",
        f"opened to the analyst only: {', '.join(sorted(outcome.values))} "
        "(class counts stay secret)",
        f"computed by {description}; sort: {mpc_sort}"
        + (
            f" (delta = {mpc_delta}; proxies saw selection comparisons)"
            if mpc_sort == "delta"
            else ""
        ),
    ]
    notes += [
        f"MPC party {p['party']} ({p['role']}): {p['rounds']} rounds, "
        f"{_megabytes(p['bytes_sent'])} sent, {_megabytes(p['bytes_received'])} received"
        for p in parties
    ]
    released = fed.released(start).with_notes(*notes)
    extra: dict[str, Any] = {"pr_auc": outcome.values["pr_auc"]}
    if mpc_noties:
        extra["auc_noties"] = outcome.values["auc_noties"]
    extra["mpc"] = {
        "sort": mpc_sort,
        "delta": mpc_delta if mpc_sort == "delta" else None,
        "seconds": outcome.seconds,
        "parties": parties,
    }
    # The method opens nothing else: no plaintext Brier score or calibration aggregates.
    extra["brier"] = None
    extra["calibration"] = None
    details = MpcDetails(
        dict(outcome.values),
        parties,
        mpc_sort,
        mpc_delta if mpc_sort == "delta" else None,
        description,
        outcome.seconds,
        spec.to_dict(),
    )
    return EvaluationResult(
        method="mpc",
        sites=[{"name": b.owner, "n": b.n} for b in bundles],
        auc=outcome.values["auc"],
        auc_ci=None,
        released=released,
        extra=extra,
        confidence_level=inputs.confidence_level,
        details=details,
    )
