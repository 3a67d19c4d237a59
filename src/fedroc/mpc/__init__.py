"""Exact AUROC, AUPR and DeLong CI by secure three-party computation.

The protocol of ppAURORA (Unal et al. 2021).

Parties
-------
Data owners (any number) each sort their own (score, label) list, split it into two
additive shares in Z_2^64, seal one share for each *proxy* (parties 0 and 1) and sign the
bundle for one job (:mod:`fedroc.mpc.owner`, :mod:`fedroc.mpc.bundle`). The proxies and a
*helper* (party 2) compute; the helper deals correlated randomness (Beaver triples, the
random value and bit shares of private compare) and runs the reconstruction step of
private compare. Only the results are opened, to the analyst who submitted the job, as two
result shares sealed for a one-time key of the analyst's.

Threat model
------------
Semi-honest (passive) computing parties, honest majority: at most one of the three is
corrupted, together with any number of data owners and the analyst; the corrupted parties
follow the protocol but try to learn from what they see. The analyst is *not* trusted to
follow anything: it chooses the jobs, carries the bundles and may submit any request.

What each one learns
--------------------
* **The analyst** learns, for each job it was authorised to run: the owners' names and
  list lengths ``n_i`` (public, as in the paper); the flag "both classes have at least
  ``m`` samples" (``m`` the job's minimum class count, checked under MPC); and, only if that
  flag is set, the opened values, each rounded half up to a multiple of ``2**-b`` (``b`` the
  job's precision, 14 bits by default, at most 52): the AUROC ``U2 / (2 P N)`` (``U2`` twice
  the tie-corrected pair count), the AUPR, optionally the paper's no-tie AUROC, and DeLong's
  variance of the AUROC rounded to ``2**-min(2b, 60)`` (its square root is the SE, from
  which the logit CI of paper 1 eq. 3 is computed); when the job compares two models
  (``compare``), the same for the second model and the variance of the difference of the
  two AUROCs (paired DeLong); when the job asks (``asks``, :mod:`fedroc.mpc.asks`), the
  partial AUC and, per operating point, its threshold (the exact score value of one row,
  or "none": the cut predicts nothing positive), whether it predicts every row positive,
  and its sensitivity, specificity, PPV and NPV. Nothing else: not ``P`` or ``N``, no
  numerator or denominator, no per-owner value. What these values imply: the AUROC is a
  rational with denominator ``2 P N``, so at full precision it pins the class counts
  ``{P, N}`` in most cases (95% of random pooled datasets of ``n = 1000`` in
  ``scripts/results/mpc_precision.md``); at 14 bits no case with ``n >= 200`` was narrowed
  below 131 candidates for ``P`` (small federations, ``n = 60``, still were in 12% of cases:
  lower the precision there). The variance, like any CI, tells roughly how balanced and how
  large the classes are (it scales like ``1 / min(P, N)``), not the counts. An operating
  point's four proportions, four fractions of ``TP``, ``FP``, ``P`` and ``N`` with ``P + N``
  public, do pin ``P`` and ``N`` at 14 bits (open, H18-2 of review 18: one Youden point, 20
  of 20 federations of 3 x 70 rows): the owners' opt-in to points gives them. Job after job, an
  owner's bundle cannot be reused: each owner signs one job (its id, the exact co-owners,
  the proxies and every parameter above), each proxy runs a job id once and accepts only
  owners registered in the cluster file, and a fedroc site authorises one job over its
  lifetime by default (recorded in its persistent ledger). So the differencing attacks of
  issue 16 (a bundle alone, or mixed with crafted bundles) are refused
  (``tests/test_mpc_attacks.py``).
* **Each proxy** learns the job's terms (owners, their keys, parameters), the list lengths,
  and values masked by uniform randomness only: its own shares, the other proxy's parts of
  Beaver openings ``x - a``, the masked ``d + r`` of private compare, and fresh shares dealt
  by the helper. Its share of the result is uniform; it is sealed for the analyst.
* **The helper** learns the public spec (list lengths and parameters; not the owners'
  names) and private-compare vectors blinded by a random bit (SecureNN with the blinding
  bit the reference code omits), with both proxies' parts re-randomized by a common mask
  (as printed, SecureNN's Algorithm 3 lets the helper divide one proxy's message by the
  other's) and carries and extra bits masked by the proxies' common random bits: not a
  single comparison result, not the tie pattern, not the class counts.
* **Everyone** sees the number of rounds and bytes, which depend only on the list lengths
  and the parameters (the default merge is data-oblivious).

``tests/test_mpc_security.py`` checks every party's whole received view, protocol by
protocol, for independence from the inputs (and shows that removing a mask is caught).

Not covered: a malicious party (no MACs; a cheating party can change the result), two
colluding computing parties (they can reconstruct everything), data owners that lie about
their data, traffic analysis, and a *local* cluster (:class:`~fedroc.mpc.cluster.LocalCluster`,
the default of ``fedroc evaluate --method mpc``), whose keys are all held by whoever
started it: it protects the owners from no one but outsiders. ``sort="delta"`` (the paper's
merge, for fidelity) opens selection comparisons to both proxies and tells the helper the
list lengths step by step (see :mod:`fedroc.mpc.sort`).

Randomness and channels
-----------------------
Pairwise 32-byte seeds from :mod:`secrets`, exchanged over the TLS links at the start of
each job and expanded with AES-256-CTR (:mod:`fedroc.mpc.prg`); Z_67 values by exact
rejection sampling; never numpy's or libc's generators. Parties talk over TCP with mutual
TLS (certificates from the cluster's CA, :mod:`fedroc.mpc.net`), or over in-memory queues
in one process for tests (:func:`fedroc.mpc.runtime.run_local`); the protocol code is the
same. Messages are typed records of fedroc's one record codec
(:mod:`fedroc.mpc.messages`); frame lengths are checked before anything is allocated.

Encodings
---------
Ring ``Z_2^64`` (numpy uint64). Fixed point: ``round(x 2**f)`` in two's complement,
products truncated exactly (:func:`~fedroc.mpc.protocols.trunc`). Scores: the
order-preserving bit map of float64 to uint64 (:func:`~fedroc.mpc.ring.float_key`), kept as
its top bit and its low 63 bits, so ties and order are exact for every finite float. At
full precision the opened AUROC and DeLong variance are within 1e-15 of
:func:`fedroc.metrics.roc_auc` and :func:`fedroc.metrics.delong` (ties counted one half;
:mod:`fedroc.mpc.auc`), the AUPR within about ``2**-40`` of :func:`fedroc.metrics.pr_auc`
(``n`` up to 10**5).

Modules
-------
:mod:`~fedroc.mpc.ring` (pure share arithmetic), :mod:`~fedroc.mpc.prg`,
:mod:`~fedroc.mpc.runtime` (parties, steps, channels), :mod:`~fedroc.mpc.messages` (the
wire), :mod:`~fedroc.mpc.protocols`, :mod:`~fedroc.mpc.sort`, :mod:`~fedroc.mpc.auc`,
:mod:`~fedroc.mpc.seal`, :mod:`~fedroc.mpc.owner` (keys, terms, a site's settings),
:mod:`~fedroc.mpc.bundle` (owners' sealed, signed shares), :mod:`~fedroc.mpc.jobs` (what
a proxy checks), :mod:`~fedroc.mpc.ledger` (jobs run), :mod:`~fedroc.mpc.net` (TLS cluster),
:mod:`~fedroc.mpc.cluster` (local processes), :mod:`~fedroc.mpc.local` (one process).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedroc._lazy import attach

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


__getattr__, __dir__ = attach(__name__, _LAZY, globals())
