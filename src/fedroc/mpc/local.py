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

from fedroc._docs import fill_doc
from fedroc.mpc.auc import AucOutputs, AucSpec, auc_program, decode_outputs, owner_records
from fedroc.mpc.prg import Stream, derive_seed
from fedroc.mpc.ring import UArray
from fedroc.mpc.runtime import PartyStats, Recorder, run_local

__all__ = ["LocalAucResult", "random_shares", "secure_auc_local"]


def random_shares(x: UArray, seed: bytes | None = None) -> tuple[UArray, UArray]:
    """Two additive shares of ``x``: share 0 from ``secrets`` (or from ``seed``, for tests)."""
    if seed is None:
        share0 = np.frombuffer(secrets.token_bytes(8 * x.size), dtype=np.uint64).copy()
    else:
        share0 = Stream(seed).uint64(x.size)
    share0 = share0.reshape(x.shape)
    return share0, x - share0


@dataclass(frozen=True)
class LocalAucResult:
    """Outputs and per-party statistics of a job run in one process.

    Attributes
    ----------
    outputs : AucOutputs
        The opened values.
    stats : list of PartyStats
        Communication of each party (proxy 0, proxy 1, helper).
    """

    outputs: AucOutputs
    stats: list[PartyStats]

    @property
    def values(self) -> dict[str, float]:
        """The opened values by name (see :meth:`AucOutputs.values`)."""
        return self.outputs.values()


@fill_doc
def secure_auc_local(
    owners: Sequence[tuple[ArrayLike, ...]],
    *,
    sort: str = "oblivious",
    delta: int = 1,
    noties: bool = False,
    frac_bits: int | None = None,
    min_class_count: int | None = None,
    ci: bool = True,
    compare: bool = False,
    asks: str = "",
    master_seed: bytes | None = None,
    recorder: Recorder | None = None,
    timeout: float = 60.0,
    **kwargs: Any,
) -> LocalAucResult:
    """AUROC, AUPR and DeLong variance by the 3-party protocol, in one process.

    AUROC, AUPR and DeLong variance of the owners' pooled ``(labels, scores)`` by the 3-party
    protocol; with ``compare=True`` the owners give ``(labels, scores, scores_b)`` and the second
    model's values and the paired variance of the difference come too.

    ``master_seed`` (tests only) makes the run reproducible: it seeds the correlated
    randomness and the owners' shares instead of :mod:`secrets`. ``frac_bits`` and
    ``min_class_count`` default to those of :class:`~fedroc.mpc.auc.AucSpec`.

    Parameters
    ----------
    owners : sequence of tuple of array-like
        Each data owner's ``(labels, scores)``, or ``(labels, scores, scores_b)`` with
        ``compare=True``.
    {mpc_job_parameters}
    master_seed : bytes, optional
        Seed of the correlated randomness and the shares (tests only).
    recorder : callable, optional
        ``recorder(party, round, tag, value)``, called for every message (tests).
    timeout : float, default 60.0
        Seconds a party waits for a peer's message.
    **kwargs
        Passed to :func:`~fedroc.mpc.runtime.run_local` (``die_after_rounds``, fault
        injection for tests).

    Returns
    -------
    LocalAucResult
        The opened values (:class:`~fedroc.mpc.auc.AucOutputs`) and each party's traffic.

    Raises
    ------
    InputError
        A job parameter out of range, or owners' data the protocol cannot take.
    """
    records = [owner_records(*owner) for owner in owners]
    options: dict[str, Any] = {}
    if frac_bits is not None:
        options["frac_bits"] = frac_bits
    if min_class_count is not None:
        options["min_class_count"] = min_class_count
    spec = AucSpec(
        tuple(int(r.shape[0]) for r in records),
        sort=sort,
        delta=delta,
        noties=noties,
        ci=ci,
        compare=compare,
        asks=asks,
        **options,
    )
    shares = [
        random_shares(r, None if master_seed is None else derive_seed(master_seed, f"owner{i}"))
        for i, r in enumerate(records)
    ]
    lists = [[sh[i] for sh in shares] for i in range(2)]
    phantom = [np.zeros_like(r) for r in records]  # the helper holds no data
    programs = [
        lambda p: auc_program(p, lists[0], spec),
        lambda p: auc_program(p, lists[1], spec),
        lambda p: auc_program(p, phantom, spec),
    ]
    run = run_local(programs, master_seed=master_seed, recorder=recorder, timeout=timeout, **kwargs)
    opened = run.results[0] + run.results[1]
    return LocalAucResult(decode_outputs(opened, spec), run.stats)
