"""The engine in one process: three parties as threads over in-memory channels.

Used by the tests and for quick experiments; the same protocol code runs between three OS
processes over TLS in :mod:`fedroc.mpc.net`.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from fedroc.mpc.auc import AucSpec, auc_program, decode_outputs, owner_records
from fedroc.mpc.ring import UArray
from fedroc.mpc.runtime import PartyStats, Recorder, run_local

__all__ = ["LocalAucResult", "random_shares", "secure_auc_local"]


def random_shares(x: UArray) -> tuple[UArray, UArray]:
    """Two additive shares of ``x`` (share 0 from ``secrets``)."""
    share0 = np.frombuffer(secrets.token_bytes(8 * x.size), dtype=np.uint64).reshape(x.shape)
    return share0.copy(), x - share0


@dataclass(frozen=True)
class LocalAucResult:
    values: dict[str, float]
    stats: list[PartyStats]


def secure_auc_local(
    owners: Sequence[tuple[ArrayLike, ArrayLike]],
    *,
    sort: str = "oblivious",
    delta: int = 1,
    noties: bool = False,
    master_seed: bytes | None = None,
    recorder: Recorder | None = None,
    timeout: float = 60.0,
    **kwargs: Any,
) -> LocalAucResult:
    """AUROC and AUPR of the owners' pooled ``(labels, scores)`` by the 3-party protocol."""
    records = [owner_records(y, s) for y, s in owners]
    spec = AucSpec(tuple(r.shape[0] for r in records), sort=sort, delta=delta, noties=noties)
    shares = [random_shares(r) for r in records]
    lists = [[sh[i] for sh in shares] for i in range(2)]
    phantom = [np.zeros_like(r) for r in records]
    programs = [
        lambda p: auc_program(p, lists[0], spec),
        lambda p: auc_program(p, lists[1], spec),
        lambda p: auc_program(p, phantom, spec),
    ]
    run = run_local(programs, master_seed=master_seed, recorder=recorder, timeout=timeout, **kwargs)
    opened = run.results[0] + run.results[1]
    return LocalAucResult(decode_outputs(opened, spec), run.stats)
