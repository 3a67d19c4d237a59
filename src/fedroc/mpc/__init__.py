"""Exact AUROC and AUPR by secure three-party computation (ppAURORA, Unal et al. 2021).

Parties
-------
Data owners (any number) each sort their own (score, label) list, split it into two
additive shares in Z_2^64 and seal one share for each *proxy* (parties 0 and 1). The proxies
and a *helper* (party 2) compute; the helper deals correlated randomness (Beaver triples,
the random value and bit shares of private compare) and runs the reconstruction step of
private compare. Only the requested results (AUROC, AUPR and whether each is defined) are
opened, to the analyst who submitted the job, as two result shares sealed for a one-time
key of the analyst's.

Threat model
------------
Semi-honest (passive) adversaries, honest majority: at most one of the three computing
parties is corrupted, together with any number of data owners and the analyst; the
corrupted parties follow the protocol but try to learn from what they see. Under this
model, in the default (oblivious) mode:

* each proxy sees only values masked by uniform randomness (Beaver's ``x - a``, the
  ``d + r`` of private compare) and fresh shares from the helper;
* the helper sees only private-compare vectors blinded by a random bit (SecureNN with the
  blinding bit the reference code omits) and with both proxies' parts re-randomized (as
  printed, SecureNN's Algorithm 3 lets the helper, who dealt the bit shares, divide one
  proxy's message by the other's), so not a single comparison result, not the tie
  pattern, nor the class counts; and bits masked by the proxies' common randomness;
* the analyst sees the owners' list lengths (public, as in the paper), the two AUCs and
  nothing else: the class counts and the numerators of the AUCs stay secret (the final
  division happens under MPC);
* everyone learns the list lengths and the number of rounds and bytes.

Not covered: a malicious party (no MACs; a cheating party can change the result, though
by the paper's argument it still learns nothing), two colluding computing parties (they
can reconstruct everything), data owners that lie about their data, and traffic or timing
analysis. ``sort="delta"`` (the paper's merge, for fidelity) opens selection comparisons to
both proxies and tells the helper the list lengths step by step (see
:mod:`fedroc.mpc.sort`).

Randomness and channels
-----------------------
Pairwise 32-byte seeds from :mod:`secrets`, exchanged over the TLS links at the start of
each job and expanded with AES-256-CTR (:mod:`fedroc.mpc.prg`); never numpy's or libc's
generators. Parties talk over TCP with mutual TLS (certificates from the cluster's CA,
:mod:`fedroc.mpc.net`), or over in-memory queues in one process for tests
(:func:`fedroc.mpc.runtime.run_local`); the protocol code is the same.

Encodings
---------
Ring ``Z_2^64`` (numpy uint64). Fixed point: ``round(x 2**f)`` in two's complement,
products truncated exactly (:func:`~fedroc.mpc.protocols.trunc`). Scores: the
order-preserving bit map of float64 to uint64 (:func:`~fedroc.mpc.ring.float_key`), kept as
its top bit and its low 63 bits, so ties and order are exact for every finite float. The
opened AUCs are ``floor(value 2**52) / 2**52`` of the exact ratio (AUROC) or of a sum of
precisions each rounded to about ``2**-40`` (AUPR, ``n`` up to 10**5): both within 1e-12 of
:func:`fedroc.metrics.roc_auc` and :func:`fedroc.metrics.pr_auc`.

Modules
-------
:mod:`~fedroc.mpc.ring` (pure share arithmetic), :mod:`~fedroc.mpc.prg`,
:mod:`~fedroc.mpc.runtime` (parties, steps, channels), :mod:`~fedroc.mpc.protocols`,
:mod:`~fedroc.mpc.sort`, :mod:`~fedroc.mpc.auc`, :mod:`~fedroc.mpc.seal`,
:mod:`~fedroc.mpc.bundle` (owners' sealed shares), :mod:`~fedroc.mpc.net` (TLS cluster),
:mod:`~fedroc.mpc.cluster` (local processes), :mod:`~fedroc.mpc.local` (one process).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Loaded on first use (PEP 562): a party process imports only what it runs.
_LAZY = {
    "AucOutputs": "fedroc.mpc.auc",
    "AucSpec": "fedroc.mpc.auc",
    "owner_records": "fedroc.mpc.auc",
    "Bundle": "fedroc.mpc.bundle",
    "make_bundle": "fedroc.mpc.bundle",
    "open_bundle": "fedroc.mpc.bundle",
    "read_bundle": "fedroc.mpc.bundle",
    "write_bundle": "fedroc.mpc.bundle",
    "LocalCluster": "fedroc.mpc.cluster",
    "RemoteCluster": "fedroc.mpc.cluster",
    "LocalAucResult": "fedroc.mpc.local",
    "secure_auc_local": "fedroc.mpc.local",
    "ClusterClient": "fedroc.mpc.net",
    "ClusterConfig": "fedroc.mpc.net",
    "ClusterResult": "fedroc.mpc.net",
    "PartyServer": "fedroc.mpc.net",
    "JobTerms": "fedroc.mpc.owner",
    "configure_owner": "fedroc.mpc.owner",
    "new_owner_key": "fedroc.mpc.owner",
    "owner_public_key": "fedroc.mpc.owner",
}

__all__ = [
    "AucOutputs",
    "AucSpec",
    "Bundle",
    "ClusterClient",
    "ClusterConfig",
    "ClusterResult",
    "JobTerms",
    "LocalAucResult",
    "LocalCluster",
    "PartyServer",
    "RemoteCluster",
    "configure_owner",
    "make_bundle",
    "new_owner_key",
    "open_bundle",
    "owner_public_key",
    "owner_records",
    "read_bundle",
    "secure_auc_local",
    "write_bundle",
]

if TYPE_CHECKING:  # pragma: no cover
    from fedroc.mpc.auc import AucOutputs, AucSpec, owner_records
    from fedroc.mpc.bundle import Bundle, make_bundle, open_bundle, read_bundle, write_bundle
    from fedroc.mpc.cluster import LocalCluster, RemoteCluster
    from fedroc.mpc.local import LocalAucResult, secure_auc_local
    from fedroc.mpc.net import ClusterClient, ClusterConfig, ClusterResult, PartyServer
    from fedroc.mpc.owner import JobTerms, configure_owner, new_owner_key, owner_public_key


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fedroc.mpc' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
