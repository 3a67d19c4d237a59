"""Site side of the federated clustered AUCs: two site functions, and what a site allows.

``fedroc.clustered.summary`` (round 1) returns a site's class counts in shared score bins
(for the clusters with both classes and for all rows) and sums over its clusters;
``fedroc.clustered.moments`` (round 2) returns sums over its clusters of the terms of
Corollary 6 and of Obuchowski's variance against the pooled histograms the analyst sends
back. Every per-cluster value is summed over the site's clusters before it leaves, and the
policy refuses a site with fewer than ``min_count`` usable clusters.

What a site allows (the analyst is untrusted and chooses the bin edges):

- **Through secure aggregation** (the default of the method, at least
  ``secagg_min_sites`` sites): both functions run as inputs of the protocol; the analyst
  sees only sums over the sites, never one site's histogram.
- **In the clear**: refused unless the site's policy sets ``clear_histograms``, because a
  per-site histogram over edges of the analyst's choosing can isolate single rows (a
  million edges place each score of the site to 1e-6; see ``tests/test_attacks.py``).
  When the policy allows it, (1) every non-empty bin must hold at least ``min_count`` rows
  of each class it counts, and (2) the site binds the edges of its first clear request,
  *before* it looks at its rows, for its lifetime: a second partition is refused (two
  partitions subtract to slivers), and so is a second try after a refusal (refusals
  would otherwise locate scores by bisection). In round 2 the site first applies the same
  per-bin rule to its own histograms (the check below compares them with what the analyst
  sends, and may only touch histograms the site would release), then binds the request:
  the analyst sends the pooled histograms, so a second, crafted request could difference
  the site's per-cluster sums. The same request again (the same analysis re-run) passes.
  Its first round-1 release is bound too (its digest, in the ledger): rows that changed
  under the same ledger (a cluster withdrawn, the node restarted on its updated table)
  would release again, and the two releases subtract to the rows that changed
  (tests/test_attacks_review5.py); the same release again passes.
- Both rounds check that the pooled histograms and totals the analyst sends contain the
  site's own (a pooled count can only add other sites' rows to the site's); round 2 also
  that every count and ``n_clusters`` are whole, ``n_clusters`` at least the site's own
  used clusters and at most ``big_m`` and ``big_n``, ``total_used`` at most ``big_m *
  big_n``.
- Through secure aggregation, round 2 also holds the pooled histograms to the
  federation's rows (C2): in round 1 each site signs its rows (what its all-rows
  histograms add up to; :func:`rows_message`, bound to its name, the edges, the round-1
  session and a domain tag) with its identity key and sends the signed count in its
  unmasking reply (a session id it signs in once, bound in its ledger); the
  analyst relays every site's (``row_sites``, ``row_counts``, ``row_signatures``;
  :func:`row_count_arguments`), and a site refuses, before it binds the request, unless
  the signers are exactly the sites its round-1 sum was over (the partners in its
  ledger), every signature verifies under its roster's key, the pooled all-rows
  histograms add up to the signed rows and no used count exceeds the all-rows count of
  its bin. A crafted request that added rows no site has (2^28 cases next to the
  federation's lowest negative) read that cluster's within-cluster AUC and positives; it
  is refused, and moving the true rows reads nothing (tests/test_attacks_review3.py).
- In the clear, round 2 holds the pooled histograms to the sites' releases (C2 in the
  clear): in round 1 each site signs everything it releases (:func:`release_message` over
  :func:`release_vector`: its name, the edges and the release, under a domain tag of its
  own) and sends the signature in its reply (``signature``); the analyst relays the
  releases of the run's sites (``release_sites``, ``release_values``,
  ``release_signatures``; :func:`release_arguments`), and a site refuses, before it binds
  the request, unless they name it, every signature verifies under its roster's key, its
  own release is what it releases now, every pooled histogram is the releases' sum, and
  ``n_clusters``, the totals, ``total_used`` and the three estimates are those the
  releases give. A crafted request that added 2^28 cases to a clear site's lowest bin of
  negatives read those clusters' sum c_i^2, mean within-cluster AUC and positives (16 of
  16 sites); it is refused (tests/test_attacks_review3.py). The set of sites is the
  analyst's choice, bound with the request (one round 2 per lifetime); a release is
  bound to the site, its edges and its content, not to a moment (see docs/privacy.md).
- Through secure aggregation too, the site binds the edges of its first request before it
  reads its rows, and binds its first round-2 request before it compares the pooled
  histograms with its own: whether a score lies outside the edges, or whether a pooled
  count falls below the site's own, is a fact about its rows that the analyst could
  otherwise ask again and again (bisecting a site's scores, or its count in a bin, with
  its histograms never released). Refusals name no count. Its first round-1 input is
  bound as in the clear (its digest): two sums around a change of one site's rows
  subtract to the rows that changed, the other sites' inputs cancelling.
- The within-cluster AUCs (``phi_sum`` in round 1, ``s12`` and ``s22`` in round 2) are
  computed on the site's scores rounded to one value per cell of its one grid (through
  secure aggregation the grid it bound, whose cell boundaries the edges are; in the clear
  the binary grid of the edges it bound): on the exact scores they ordered a cluster's two
  rows inside one cell, finer than any exact count the site sums (C1).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np
from numpy.typing import NDArray

from fedroc._docs import fill_doc
from fedroc.exceptions import DisclosureError, InputError
from fedroc.federation import schema as sch
from fedroc.federation.basic import (
    CLEAR_EDGES_KEY,
    apart_from_clear_calibration,
    apart_from_local_trees,
    bind_exact_counts,
    bind_tree,
    bound_grid,
    confusion_thresholds,
    cuts_apart,
    grid_representatives,
)
from fedroc.federation.records import Record
from fedroc.federation.roster import SIGNATURE_BYTES, Roster, split_signatures
from fedroc.federation.schema import ArgumentRefused
from fedroc.federation.site import Reply, SiteContext, bind_before_reading, site_function
from fedroc.methods.clustered._core import cluster_terms, sum_by
from fedroc.methods.clustered._pooled import encode_clusters
from fedroc.metrics import (
    EDGE_GRID_HEIGHT,
    ScoreCounts,
    beaten_counts,
    bin_index_edges,
    grid_edges,
)
from fedroc.privacy import keys

__all__ = [
    "FUNCTION_MOMENTS",
    "FUNCTION_SUMMARY",
    "bin_scores",
    "release_arguments",
    "release_message",
    "release_vector",
    "row_count_arguments",
    "rows_message",
    "score_bin_edges",
]

FUNCTION_SUMMARY = "fedroc.clustered.summary"
FUNCTION_MOMENTS = "fedroc.clustered.moments"

# Ledger keys of the bindings: of the clear path, and of inputs of secure aggregation.
BIND_EDGES = keys.CLUSTERED_EDGES
BIND_MOMENTS = keys.CLUSTERED_MOMENTS
BIND_SECURE_EDGES = keys.CLUSTERED_SECURE_EDGES
BIND_SECURE_MOMENTS = keys.CLUSTERED_SECURE_MOMENTS

FloatArray = NDArray[np.float64]

# What a site signs of its round-1 input through secure aggregation (C2): its rows.
_ROWS_DOMAIN = b"fedroc.clustered/v1 rows of the all-rows histograms\x00"
# Where a site keeps the session of its latest round-1 sum (its state), and the ledger
# prefix under which it binds every round-1 session it signed rows in (an id used once).
_ROWS_SESSION = "clustered-secure:rows-session"
# Where a site keeps what it signed of its latest round-1 release in the clear (its state).
_CLEAR_RELEASE = "clustered-clear:release"
BIND_ROWS_SESSION = keys.CLUSTERED_ROWS_SESSION
_COUNT_BYTES = 8
STATEMENT_BYTES = _COUNT_BYTES + SIGNATURE_BYTES
_MAX_SITES = 1024
_HEX = "0123456789abcdef"

# What a site signs of its round-1 release in the clear (C2 in the clear): all of it.
_RELEASE_DOMAIN = b"fedroc.clustered/v1 clear release of fedroc.clustered.summary\x00"
#: The key of a clear round-1 reply that carries the site's signature of its release.
KEY_SIGNATURE = "signature"
_HIST_KEYS = ("hist_pos_used", "hist_neg_used", "hist_pos_all", "hist_neg_all")
# The scalars of a round-1 summary, in the order a release vector holds them.
_SUMMARY_SCALARS = (
    "clusters_used",
    "clusters_all",
    "clusters_with_neg",
    "clusters_with_pos",
    "neg_used",
    "pos_used",
    "neg_all",
    "pos_all",
    "mn_used",
    "phi_sum",
    "within_binned_twice",
    "within_same_bin",
)


@fill_doc
def rows_message(site: str, edges: FloatArray, rows: int, session: str) -> bytes:
    """Return what a site signs of its round-1 summary: its name, the edges, its rows, the sum.

    ``rows`` is what the site's all-rows histograms (``hist_pos_all`` + ``hist_neg_all``)
    add up to: every row it holds, each in one bin of ``edges``. The domain tag keeps the
    signature from being taken for any other quantity; the edges' digest, for the rows of
    another binning; the round-1 session's id, for the rows of another round-1 sum (a site
    whose rows changed between two sums signed two counts; the older one relayed beside
    the others' newer ones let the analyst add as many rows as changed).

    Parameters
    ----------
    {clustered_signed}
    rows : int
        The site's rows in its all-rows histograms.
    session : str
        The id of the round-1 secure-aggregation session (:attr:`SiteContext.session`).

    Returns
    -------
    bytes
        The bytes the site's Ed25519 signature covers.
    """
    digest = hashlib.sha256(np.ascontiguousarray(edges, dtype="<f8").tobytes()).digest()
    count = int(rows).to_bytes(_COUNT_BYTES, "big")
    return _ROWS_DOMAIN + site.encode() + b"\x00" + session.encode() + b"\x00" + digest + count


def row_count_arguments(statements: dict[str, bytes]) -> dict[str, object]:
    """Turn the sites' round-1 statements into the round-2 arguments that relay them.

    Each statement (:attr:`fedroc.secagg.SecureSum.statements` of the round-1 secure sum)
    is a site's rows (8 bytes, big-endian) and its signature of :func:`rows_message`.

    Parameters
    ----------
    statements : dict of str to bytes
        Site name -> statement.

    Returns
    -------
    dict
        ``row_sites`` (names, sorted), ``row_counts`` (one per site) and ``row_signatures``
        (the signatures in that order, as hex).
    """
    names = sorted(statements)
    for name in names:
        if len(statements[name]) != STATEMENT_BYTES:
            raise InputError(
                f"site {name!r}: its round-1 statement has {len(statements[name])} bytes, "
                f"not {STATEMENT_BYTES}"
            )
    return {
        "row_sites": names,
        "row_counts": [int.from_bytes(statements[n][:_COUNT_BYTES], "big") for n in names],
        "row_signatures": "".join(statements[n][_COUNT_BYTES:].hex() for n in names),
    }


def release_vector(values: Record) -> FloatArray:
    """Return a round-1 summary as one vector: the four histograms, then its scalars.

    What a site signs in the clear (:func:`release_message`) and what the analyst relays
    for it in round 2 (:func:`release_arguments`): every value the summary released, in a
    fixed order (``hist_pos_used``, ``hist_neg_used``, ``hist_pos_all``, ``hist_neg_all``,
    then ``clusters_used`` ... ``within_same_bin``), as float64 (counts below 2^53 exactly).

    Parameters
    ----------
    values : Record
        The summary's released values (keys of :data:`FUNCTION_SUMMARY`'s reply).

    Returns
    -------
    ndarray of float64, shape (4 n_bins + 12,)
    """
    parts = [np.asarray(values[k], dtype=np.float64).ravel() for k in _HIST_KEYS]
    scalars = np.array([float(values[k]) for k in _SUMMARY_SCALARS], dtype=np.float64)
    return np.concatenate([*parts, scalars])


@fill_doc
def release_message(site: str, edges: FloatArray, vector: FloatArray) -> bytes:
    """Return what a site signs of its round-1 release in the clear.

    Its name, the edges' digest and the digest of everything it released
    (:func:`release_vector`), under a domain tag of its own (no other signed quantity, the
    secure path's rows of :func:`rows_message` included, reads as one). In the clear a site
    binds its edges for its lifetime, and its release at those edges is a function of its
    rows: a signature relayed later is the release the site made, for that round only.

    Parameters
    ----------
    {clustered_signed}
    vector : ndarray of float, shape (4 n_bins + 12,)
        The release, as :func:`release_vector` orders it.

    Returns
    -------
    bytes
        The bytes the site's Ed25519 signature covers.
    """
    digest = hashlib.sha256(np.ascontiguousarray(edges, dtype="<f8").tobytes()).digest()
    body = hashlib.sha256(np.ascontiguousarray(vector, dtype="<f8").tobytes()).digest()
    return _RELEASE_DOMAIN + site.encode() + b"\x00" + digest + body


def release_arguments(releases: dict[str, Record]) -> dict[str, object]:
    """Turn the sites' signed round-1 replies in the clear into the round-2 relay.

    Parameters
    ----------
    releases : dict of str to Record
        Site name -> its round-1 reply (:data:`FUNCTION_SUMMARY` in the clear), with its
        signature under ``"signature"``.

    Returns
    -------
    dict
        ``release_sites`` (names, sorted), ``release_values`` (one :func:`release_vector`
        per site, a row each, in that order) and ``release_signatures`` (the signatures in
        that order, as hex).

    Raises
    ------
    InputError
        A site released unsigned (it has no signing key) or its signature is malformed.
    """
    names = sorted(releases)
    for name in names:
        sig = releases[name].get(KEY_SIGNATURE, b"")
        if not isinstance(sig, bytes) or len(sig) != SIGNATURE_BYTES:
            raise InputError(
                f"site {name!r} did not sign its round-1 release in the clear (it has no "
                "signing key); in round 2 every site checks the pooled histograms against "
                "its partners' signed releases. Give the site a key and a roster "
                "(fedroc.federation.roster), or run the method through secure aggregation"
            )
    return {
        "release_sites": names,
        "release_values": np.stack([release_vector(releases[n]) for n in names]),
        "release_signatures": "".join(bytes(releases[n][KEY_SIGNATURE]).hex() for n in names),
    }


def grid_height(n_bins: int) -> int:
    """Height of the binary grid the shared edges of ``n_bins`` bins lie on (at least 12)."""
    return max(EDGE_GRID_HEIGHT, (int(n_bins) - 1).bit_length())


def score_bin_edges(n_bins: int, score_range: tuple[float, float] = (0.0, 1.0)) -> FloatArray:
    """``n_bins + 1`` shared edges over ``score_range``, equidistant on a binary grid.

    The edges ``k / n_bins`` of the range rounded to the nearest of ``2**h`` equal cells,
    ``h = grid_height(n_bins)`` (12, the histogram method's default tree, up to 4096 bins):
    a site sums its exact counts securely on one grid of cells only (R32,
    :func:`fedroc.federation.basic.bind_tree`). Over [0, 1] up to 4096 bins, these are
    :func:`fedroc.metrics.bin_edges`.

    Parameters
    ----------
    n_bins : int
        Number of shared score bins, at least 1.
    score_range : (float, float), default (0.0, 1.0)
        ``(low, high)``, finite with ``low < high``.

    Returns
    -------
    ndarray of float64, shape (n_bins + 1,)
        The edges, from ``low`` to ``high``.

    Raises
    ------
    InputError
        ``n_bins`` or ``score_range`` invalid.
    """
    if int(n_bins) != n_bins or n_bins < 1:
        raise InputError(f"n_bins must be a positive integer; got {n_bins!r}")
    if n_bins > MAX_BINS:  # before the edges are allocated (1e11 bins: a MemoryError)
        raise InputError(
            f"n_bins must be at most {MAX_BINS} (the bins the sites take); got {n_bins!r}"
        )
    lo, hi = (float(v) for v in score_range)
    # high - low finite too: the edges are low + (high - low) * k / n_bins.
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi and np.isfinite(hi - lo)):
        raise InputError(
            "score_range must be finite with low < high, high - low finite too; "
            f"got {score_range!r}"
        )
    return grid_edges(int(n_bins), lo, hi, grid_height(n_bins))


def bin_scores(score: FloatArray, edges: FloatArray, where: str = "the scores") -> NDArray[np.intp]:
    """Bin ``[e_l, e_(l+1))`` of each score, the last bin closed (fedroc's one binning rule).

    Refuses scores outside ``[edges[0], edges[-1]]``: clipping them would hide an error
    larger than the stated binning bound.

    Parameters
    ----------
    score : ndarray of float, shape (n,)
        The scores.
    edges : ndarray of float, shape (n_bins + 1,)
        Increasing shared edges (:func:`score_bin_edges`).
    where : str, default "the scores"
        Whose scores, for the error message.

    Returns
    -------
    ndarray of intp, shape (n,)
        Bin of each score, from 0 to ``n_bins - 1``.

    Raises
    ------
    InputError
        A score outside the edges (the message holds no count).
    """
    lo, hi = edges[0], edges[-1]
    if ((score < lo) | (score > hi)).any():
        # No count: at a site it would be a number computed from its rows.
        raise InputError(
            f"{where}: scores lie outside the shared score range [{lo:g}, {hi:g}]; pass a "
            "range that covers every site's scores (--score-range LO,HI, score_range=)"
        )
    return bin_index_edges(score, edges)


# -- what a site allows in the clear ------------------------------------------------------
def _digest(args: Record) -> str:
    """Hash a request canonically (arrays by their float64 bytes)."""
    h = hashlib.sha256()
    for key in sorted(args):
        value = args[key]
        h.update(key.encode())
        if isinstance(value, np.ndarray):
            h.update(np.ascontiguousarray(value, dtype=np.float64).tobytes())
        else:
            h.update(json.dumps(value, sort_keys=True, default=float).encode())
    return h.hexdigest()


def _bind(
    ctx: SiteContext, function: str, key: str, argument: str, value: str, clear: bool = True
) -> None:
    # Bound before the site reads its rows: a refusal below leaves the binding in place, so
    # that refusals cannot be used to search for a partition that isolates a row.
    bind_before_reading(ctx, key, value, lambda _: _bind_refused(ctx, function, argument, clear))


def _bind_refused(ctx: SiteContext, function: str, argument: str, clear: bool) -> ArgumentRefused:
    how, advice = (
        ("in the clear", "run the method through secure aggregation, or ")
        if clear
        else ("through secure aggregation", "")
    )
    return ArgumentRefused(
        f"site {ctx.site!r} refuses {function!r} {how}: its {argument} were bound by its "
        "first such request and may not change (two partitions of its rows, or two "
        f"crafted requests, could be subtracted); {advice}repeat the first request",
        site=ctx.site,
        function=function,
        argument=argument,
    )


def _clear_guard(ctx: SiteContext, function: str, args: Record) -> bool:
    """Apply the clear-path gate and bind the edges; True when this call is in the clear."""
    if ctx.sites is not None:
        # An input of secure aggregation: only sums over sites leave. The edges are bound
        # all the same, before the site reads its rows (refusals that depend on its rows
        # must not be asked again over other edges).
        # Every row's class counts per bin, as the histogram tree's leaves: on the site's
        # one grid of exact counts (R32), a binary grid over the edges' range if none is
        # bound. Checked first, so that edges off the grid are not bound for good.
        e = np.asarray(args["edges"], dtype=np.float64)
        bind_tree(ctx, function, float(e[0]), float(e[-1]), None,
                  (2, grid_height(e.size - 1)), edges=e)  # fmt: skip
        edges = _digest({"edges": args["edges"]})
        _bind(ctx, function, BIND_SECURE_EDGES, "bin edges", edges, clear=False)
        bind_exact_counts(ctx, function, "secure")
        return False
    if not ctx.policy.clear_histograms:
        raise DisclosureError(
            f"site {ctx.site!r} refuses {function!r} in the clear: it releases class counts "
            "per score bin, and over bins of the analyst's choosing a bin can hold a single "
            "row. The site releases them only through secure aggregation (secure=True, at "
            f"least {ctx.policy.secagg_min_sites} sites); its operator can allow them in "
            "the clear for smaller federations with clear_histograms = true in its policy "
            "(bins then bound for the site's lifetime and each holding at least min_count "
            "rows per class)",
            site=ctx.site,
            function=function,
        )
    _bind(ctx, function, BIND_EDGES, "bin edges", _digest({"edges": args["edges"]}))
    bind_exact_counts(ctx, function, "clear")
    _apart_from_other_clear_cuts(ctx, function, np.asarray(args["edges"], dtype=np.float64))
    return True


def _apart_from_other_clear_cuts(ctx: SiteContext, function: str, edges: FloatArray) -> None:
    """Refuse edges too close to the site's other clear cuts; record them for their checks.

    The other clear cuts: the calibration bins and confusion thresholds it released. A
    clustered bin's class counts minus the calibration bins above an edge, or a confusion
    table's, are the rows between the two cuts. The edges are bound already (before the
    rows are read), so this refusal is one answer per site lifetime.
    """
    inner = edges[1:-1]
    # One edge per group with no row between them: such edges cut the rows alike.
    _, first = np.unique(np.searchsorted(np.sort(ctx.data.score), inner), return_index=True)
    with ctx.ledger.transaction():
        kept = [float(v) for v in inner[np.sort(first)]]  # a function of the scores: sealed
        ctx.ledger.bind(CLEAR_EDGES_KEY, ctx.ledger.seal(CLEAR_EDGES_KEY, kept))
    q = ctx.policy.min_count
    apart = cuts_apart(ctx, inner, np.array(confusion_thresholds(ctx)))
    if not (apart and apart_from_clear_calibration(ctx, inner)):
        raise DisclosureError(
            f"site {ctx.site!r} refuses {function!r} in the clear: an edge lies too close to "
            "a calibration bin edge or confusion threshold it released (fewer than "
            f"{q} rows of a class between them), and the two would subtract to those rows",
            site=ctx.site,
            function=function,
        )
    if not apart_from_local_trees(ctx, inner):
        raise DisclosureError(
            f"site {ctx.site!r} refuses {function!r} in the clear: an edge splits a leaf of "
            "a local-DP histogram tree it released into parts of fewer than "
            f"{q} rows of a class, and the tree, exact in effect at a large epsilon, would "
            "subtract to them (R43)",
            site=ctx.site,
            function=function,
        )


def _bin_counts(**hists: NDArray[np.int64]) -> dict[str, NDArray[np.int64]]:
    """Each non-empty bin of each released histogram, as an aggregate the policy checks.

    With the four histograms of a summary, also their differences ``*_all - *_used``: the
    rows of the single-class clusters per bin and class, which the two released
    histograms subtract to. Each bin of each histogram held q rows, their difference 1 to
    q - 1: a patient with one image at a score the analyst knows, beside clusters of both
    classes, had its label in ``hist_pos_all - hist_pos_used`` (R12-1, review 12: 20 of 20
    on main b9c3982, tests/test_attacks_review12.py).
    """
    out = {f"{name} bin": h[h > 0] for name, h in hists.items()}
    for cls in ("pos", "neg"):
        used, every = hists.get(f"hist_{cls}_used"), hists.get(f"hist_{cls}_all")
        if used is not None and every is not None:
            rest = np.asarray(every) - np.asarray(used)
            out[f"hist_{cls}_all - hist_{cls}_used bin (rows of single-class clusters)"] = rest[
                rest > 0
            ]
    return out


# -- a site's rows ------------------------------------------------------------------------
@dataclass(frozen=True)
class _Local:
    """A site's rows split by cluster, with the shared bins (never leaves the site)."""

    label: NDArray[np.bool_]
    score: FloatArray
    bins: NDArray[np.intp]
    codes: NDArray[np.int64]
    n_clusters: int
    usable: NDArray[np.bool_]  # per cluster


def _local(ctx: SiteContext, args: Record) -> _Local:
    data = ctx.data
    if data.cluster is None:
        raise InputError(
            f"site {ctx.site!r} has no cluster column; clustered AUCs need one (--cluster "
            'COL, cluster = "COL" in a --sites file or a Flower node config, or '
            "Columns(cluster=...))"
        )
    edges = np.asarray(args["edges"], dtype=np.float64)
    if not (np.diff(edges) > 0).all():
        raise InputError(f"site {ctx.site!r}: the bin edges must increase")
    codes, ids = encode_clusters(data.cluster, data.n)
    n_case = np.bincount(codes, weights=data.label, minlength=ids.size)
    n_all = np.bincount(codes, minlength=ids.size)
    return _Local(
        label=data.label,
        score=data.score,
        bins=bin_scores(data.score, edges, f"site {ctx.site!r}"),
        codes=codes,
        n_clusters=int(ids.size),
        usable=(n_case > 0) & (n_case < n_all),
    )


def _cell_scores(ctx: SiteContext, args: Record, local: _Local, clear: bool) -> FloatArray:
    """Round the site's scores to one value per cell of its one grid, for ``phi_i``.

    The within-cluster AUCs ``phi_i``: round 1's ``phi_sum``, round 2's ``s12`` and ``s22``.
    On the exact scores they ordered two rows of one cluster inside one cell, which no
    other exact quantity the site sums securely tells (C1: a matched cluster's two rows in
    one cell of the 4096-cell grid, their order read from one secure summary at 4096 bins,
    16 of 16 federations on main b063985). On the representatives every ``phi_i`` is a
    function of the cluster's counts per cell: pairs sharing a cell count 1/2, as the bins
    count them. Through secure aggregation the grid is the site's bound one (the edges are
    its cell boundaries); in the clear, where no grid is bound, the binary grid the edges'
    range is cut into for ``n_bins`` bins (:func:`score_bin_edges`), fixed by the edges the
    site bound for its lifetime.
    """
    e = np.asarray(args["edges"], dtype=np.float64)
    lo, hi = float(e[0]), float(e[-1])
    if clear:
        grid: tuple[float, float, object, int] = (lo, hi, None, 2 ** grid_height(e.size - 1))
    else:
        grid = bound_grid(ctx, lo, hi)
    return grid_representatives(local.score, grid)


def _restricted(local: _Local) -> tuple[NDArray[np.bool_], NDArray[np.int64], int]:
    keep = local.usable[local.codes]
    new_code = np.cumsum(local.usable) - 1
    return keep, new_code[local.codes[keep]], int(np.count_nonzero(local.usable))


def _hist(mask: NDArray[np.bool_], bins: NDArray[np.intp], n_bins: int) -> NDArray[np.int64]:
    return np.bincount(bins[mask], minlength=n_bins).astype(np.int64)


_MAX_EDGES = 1_000_001
#: The most shared score bins (``n_bins``) a site takes: its edges are at most _MAX_EDGES.
MAX_BINS = _MAX_EDGES - 1
_EDGES = {"edges": sch.FloatArray((sch.Bound(2, _MAX_EDGES),))}
_HIST = sch.FloatArray((sch.Bound(1, _MAX_EDGES - 1),), lo=0.0)


# -- round 1 ------------------------------------------------------------------------------
def _summary(ctx: SiteContext, args: Record, local: _Local, clear: bool) -> dict[str, Any]:
    """Return the site's round-1 values: its histograms and its sums over its clusters."""
    n_bins = int(np.asarray(args["edges"]).size - 1)
    keep, codes, n_used = _restricted(local)
    y, b = local.label[keep], local.bins[keep]
    s = _cell_scores(ctx, args, local, clear)[keep]

    phi_sum = 0.0
    within_twice = 0
    same_bin = 0
    mn_sum = 0
    if n_used:
        exact = cluster_terms(y, s, codes, n_used)
        phi_sum = float(np.sum(exact.within / (exact.m * exact.n)))
        mn_sum = int(np.dot(exact.m, exact.n))
        # Within-cluster pairs on the bins, so that subtracting them from the pooled
        # histogram's pair count leaves exactly the between-cluster pairs of the bins.
        # Twice the count is an integer: exact in secure aggregation's ring.
        within_twice = round(2.0 * float(beaten_counts(y, b.astype(np.int64), codes)[y].sum()))
        # Pairs tied on the bins inside a cluster: counts at each distinct (cluster, bin).
        cell = (codes * n_bins + b).astype(np.float64)
        same_bin = round(ScoreCounts.from_scores(y, cell).tied_pairs())
    has_case = np.bincount(local.codes, weights=local.label, minlength=local.n_clusters) > 0
    has_control = np.bincount(local.codes, weights=~local.label, minlength=local.n_clusters) > 0
    return {
        **_own_histograms(local, keep, n_bins),
        "clusters_used": n_used,
        "clusters_all": local.n_clusters,
        "clusters_with_neg": int(has_control.sum()),
        "clusters_with_pos": int(has_case.sum()),
        "neg_used": int(np.count_nonzero(~y)),
        "pos_used": int(np.count_nonzero(y)),
        "neg_all": int(np.count_nonzero(~local.label)),
        "pos_all": int(np.count_nonzero(local.label)),
        "mn_used": mn_sum,
        "phi_sum": phi_sum,
        "within_binned_twice": within_twice,
        "within_same_bin": same_bin,
    }


def _session_reused(ctx: SiteContext, session: str) -> ArgumentRefused:
    return ArgumentRefused(
        f"site {ctx.site!r} refuses {FUNCTION_SUMMARY!r} through secure aggregation: it "
        f"signed its rows in session {session} already, and signs in a session once (a "
        "signed count of an earlier sum could be relayed for a later one)",
        site=ctx.site,
        function=FUNCTION_SUMMARY,
        argument="session",
    )


@site_function(FUNCTION_SUMMARY, schema=_EDGES, release="both")
def _site_summary(ctx: SiteContext, args: Record) -> Reply:
    clear = _clear_guard(ctx, FUNCTION_SUMMARY, args)
    if not clear:
        # The session its rows will be signed over: an id the site signs in once (its
        # ledger, across restarts), bound before it reads its rows.
        session = str(ctx.session)
        bind_before_reading(
            ctx,
            BIND_ROWS_SESSION + session,
            True,
            lambda _: _session_reused(ctx, session),
            accepts=lambda _: False,
        )
    # A site under q rows refuses in the policy's words before it bins a score: "outside
    # the shared score range" was a fact about the rows of a site that tells nothing else
    # (review 16, as H16-3).
    ctx.policy.check_release(site=ctx.site, function=FUNCTION_SUMMARY, kind="aggregate",
                             counts={"rows": ctx.data.n}, dp=(), ledger=ctx.ledger,
                             n_rows=ctx.data.n)  # fmt: skip
    local = _local(ctx, args)
    values = _summary(ctx, args, local, clear)
    edges = np.asarray(args["edges"], dtype=np.float64)
    counts: dict[str, object] = {"rows": ctx.data.n, "clusters": values["clusters_used"]}
    statement = b""
    message = release_message(ctx.site, edges, release_vector(values))
    if clear:
        counts.update(_bin_counts(**{k: values[k] for k in _HIST_KEYS}))
        # Everything it releases, signed, so that every partner can check in round 2 that
        # the pooled histograms and totals are the sum of the sites' releases and nothing
        # the analyst made up (C2 in the clear). A site without a signing key releases
        # unsigned: no round 2 will pool its release.
        values[KEY_SIGNATURE] = b"" if ctx.identity is None else ctx.identity.sign(message)
        ctx.state[_CLEAR_RELEASE] = {"message": message, "rows": ctx.data.digest}
    elif ctx.identity is not None:  # (secure aggregation has refused a site without one)
        # Its rows, signed, so that every partner can check in round 2 that the pooled
        # all-rows histograms hold the federation's rows and no more (C2); over the
        # session (bound above), kept as its latest: round 2 takes only that sum's counts.
        session = str(ctx.session)
        ctx.state[_ROWS_SESSION] = {"session": session, "rows": ctx.data.digest}
        rows = int(values["hist_pos_all"].sum() + values["hist_neg_all"].sum())
        statement = rows.to_bytes(_COUNT_BYTES, "big") + ctx.identity.sign(
            rows_message(ctx.site, edges, rows, session)
        )
    return Reply(values, counts=counts, statement=statement)


# -- round 2 ------------------------------------------------------------------------------
def _cross_sums(
    label: NDArray[np.bool_],
    bins: NDArray[np.intp],
    codes: NDArray[np.int64],
    n_clusters: int,
    hist_pos: FloatArray,
    hist_neg: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    # row_i and col_i of the site's clusters against the pooled histograms: a control in bin
    # b beats the cases above b and half of those in b; a case beats the controls below b.
    pos_wins, neg_wins = ScoreCounts.from_bins(hist_pos, hist_neg).twice_beats()
    level = hist_pos.size - 1 - bins  # the counts' levels run from the highest bin down
    beat = np.where(label, pos_wins[level], neg_wins[level]) / 2.0
    row = sum_by(codes[~label], beat[~label], n_clusters)
    col = sum_by(codes[label], beat[label], n_clusters)
    return row, col


def _own_histograms(
    local: _Local, keep: NDArray[np.bool_], n_bins: int
) -> dict[str, NDArray[np.int64]]:
    y, b = local.label[keep], local.bins[keep]
    return {
        "hist_pos_used": _hist(y, b, n_bins),
        "hist_neg_used": _hist(~y, b, n_bins),
        "hist_pos_all": _hist(local.label, local.bins, n_bins),
        "hist_neg_all": _hist(~local.label, local.bins, n_bins),
    }


def _check_pooled(
    ctx: SiteContext,
    args: Record,
    local: _Local,
    keep: NDArray[np.bool_],
    n_bins: int,
) -> None:
    """Refuse pooled histograms and totals that cannot contain the site's own rows."""
    own = _own_histograms(local, keep, n_bins)
    totals = {
        "hist_pos_used": "big_n",
        "hist_neg_used": "big_m",
        "hist_pos_all": "big_n_all",
        "hist_neg_all": "big_m_all",
    }
    for key, mine in own.items():
        pooled = np.asarray(args[key], dtype=np.float64)
        problem = None
        if pooled.size != n_bins:
            problem = f"has {pooled.size} bins, not the {n_bins} of the edges"
        elif (pooled < mine).any():
            problem = "holds fewer rows in a bin than this site alone"
        elif abs(pooled.sum() - float(args[totals[key]])) > 1e-6 * max(1.0, pooled.sum()):
            problem = f"does not add up to {totals[key]}"
        if problem is not None:
            raise ArgumentRefused(
                f"site {ctx.site!r} refuses {FUNCTION_MOMENTS!r}: argument {key!r} {problem}; "
                "a pooled histogram is the sum of the sites' round-1 histograms",
                site=ctx.site,
                function=FUNCTION_MOMENTS,
                argument=key,
            )


def _refuse_moments(ctx: SiteContext, argument: str, problem: str) -> NoReturn:
    raise ArgumentRefused(
        f"site {ctx.site!r} refuses {FUNCTION_MOMENTS!r}: argument {argument!r} {problem}; "
        "the round-2 totals and histograms are sums of the sites' round-1 counts",
        site=ctx.site,
        function=FUNCTION_MOMENTS,
        argument=argument,
    )


def _check_consistent(ctx: SiteContext, args: Record) -> None:
    """Refuse round-2 arguments that no sum of round-1 counts gives (C2, in part).

    Every pooled count is a whole number of rows, and ``n_clusters`` a whole number of
    clusters (:func:`_check_sizes` adds: at least the site's own, at most ``big_m`` and
    ``big_n`` as each has a case and a control among the used rows; ``total_used``, a
    number of pairs of those rows, at most ``big_m * big_n``). C2's request set
    ``n_clusters = 1e-6`` so that the size terms of ``s12`` vanished. These checks do not
    close C2 (an analyst keeps ``n_clusters`` true and adds controls far above every case
    instead; tests/test_attacks_review3.py).
    """
    for key in _HIST_KEYS:
        h = np.asarray(args[key], dtype=np.float64)
        if not (h == np.floor(h)).all():
            _refuse_moments(ctx, key, "holds a count that is not a whole number")
    n_i = float(args["n_clusters"])
    if n_i != np.floor(n_i) or n_i < 1.0:
        _refuse_moments(ctx, "n_clusters", f"is not a whole number of clusters (got {n_i!r})")


def _relay(
    ctx: SiteContext, args: Record, keys: tuple[str, str, str], need: str
) -> tuple[Any, Any, Any, Roster]:
    """Return a round-2 relay's three arguments and the site's roster, or refuse.

    ``keys`` names the relay's sites, values and signatures; ``need`` says why the site
    needs them. Refused, naming the first key, when one is missing or the site has no
    roster to verify the signatures with.
    """
    names, values, signatures = (args[k] for k in keys)
    if names is None or values is None or signatures is None:
        _refuse_moments(
            ctx,
            keys[0],
            f"is missing (with {keys[1]} and {keys[2]}): {need} to check the pooled histograms",
        )
    roster = None if ctx.identity is None else ctx.identity.roster
    if roster is None:
        _refuse_moments(
            ctx,
            keys[0],
            "cannot be checked: the site has no roster of sites (their signing keys); its "
            "operator configures one (see fedroc.federation.roster)",
        )
    return names, values, signatures, roster


def _check_rows(ctx: SiteContext, args: Record, local: _Local) -> None:
    """Refuse pooled histograms that hold more rows than the round-1 sites signed (C2).

    Through secure aggregation only, before the binding (nothing here depends on the
    site's rows, but whether they are those of its latest round-1 sum, which it keeps a
    digest of: on Flower the state travels with the run while the site is rebuilt from its
    data file): ``row_sites`` must be exactly the sites the site's round-1 sum was over
    (the partners bound in its ledger), each ``row_counts`` entry signed by its site
    (``row_signatures``, over :func:`rows_message` with these edges and the session of
    this site's latest round-1 sum, which it keeps in its state) under the key the
    site's roster holds, and the pooled all-rows histograms must add up to the sum of the
    counts, each used count at most the all-rows count of its bin. A crafted request
    added 2^28 rows next to the federation's lowest negative and read its cluster's
    within-cluster AUC and positives; with the rows pinned only the true rows can move,
    and moving them read nothing (tests/test_attacks_review3.py).
    """
    names, counts, signatures, roster = _relay(
        ctx,
        args,
        ("row_sites", "row_counts", "row_signatures"),
        "through secure aggregation a site needs every round-1 site's signed rows",
    )
    with ctx.ledger.transaction():
        partners = ctx.ledger.partners(FUNCTION_SUMMARY)
    if partners is None:
        _refuse_moments(ctx, "row_sites", "names no round-1 sum this site took part in")
    if sorted(names) != sorted(partners):
        _refuse_moments(ctx, "row_sites", "are not the sites this site's round-1 sum was over")
    counts = np.asarray(counts, dtype=np.int64)
    by_name = None if len(signatures) % 2 else split_signatures(bytes.fromhex(signatures), names)
    if counts.size != len(names) or by_name is None:
        _refuse_moments(ctx, "row_signatures", "needs one count and one signature per site")
    latest = ctx.state.get(_ROWS_SESSION)
    if latest is None:
        _refuse_moments(
            ctx,
            "row_signatures",
            "cannot be checked: this site signed no round-1 rows since it started (it keeps "
            "the session of its latest round-1 sum in memory); repeat round 1",
        )
    if latest.get("rows") != ctx.data.digest:
        # The state travels with a Flower run while the site is rebuilt from its data file:
        # round 2 on other rows than round 1 summed is not part of that sum.
        raise DisclosureError(
            f"site {ctx.site!r} refuses {FUNCTION_MOMENTS!r}: its rows changed since its "
            "latest round-1 sum, whose totals and histograms round 2 is computed against; "
            "the sites' round 2 must follow a round 1 over the same rows",
            site=ctx.site,
            function=FUNCTION_MOMENTS,
        )
    edges = np.asarray(args["edges"], dtype=np.float64)
    session = str(latest["session"])
    forged = roster.unverified(
        (name, rows_message(name, edges, rows, session), by_name[name])
        for name, rows in zip(names, counts.tolist(), strict=True)
    )
    if forged:
        _refuse_moments(
            ctx,
            "row_signatures",
            f"do not carry the signature of {forged} over their rows in this site's latest "
            "round-1 sum under the keys its roster holds",
        )
    hist = {k: np.asarray(args[k], dtype=np.float64) for k in _HIST_KEYS}
    if float(hist["hist_pos_all"].sum() + hist["hist_neg_all"].sum()) != float(counts.sum()):
        _refuse_moments(
            ctx,
            "hist_pos_all",
            "and 'hist_neg_all' do not add up to the rows the round-1 sites signed",
        )
    for cls in ("pos", "neg"):
        used, every = hist[f"hist_{cls}_used"], hist[f"hist_{cls}_all"]
        if used.size != every.size or (used > every).any():
            _refuse_moments(
                ctx, f"hist_{cls}_used", f"holds more rows in a bin than 'hist_{cls}_all'"
            )


def _near(value: float, want: float) -> bool:
    # The analyst sums the sites' floats in its own order; the site in release_sites' order.
    return bool(abs(value - want) <= 1e-12 * max(1.0, abs(want)))


def _check_releases(ctx: SiteContext, args: Record, local: _Local) -> None:
    """Refuse a clear round-2 request that is not the sum of its sites' signed releases.

    In the clear only (C2 in the clear): ``release_sites`` must name this site, one row of
    ``release_values`` per site must be its round-1 release (:func:`release_vector`),
    signed by that site (``release_signatures``, over :func:`release_message` at these
    edges) under the key this site's roster holds, and this site's own row exactly what it
    releases at these edges. Then every pooled histogram must be the sum of the releases'
    histograms, ``n_clusters``, ``big_m``, ``big_n``, ``big_m_all`` and ``big_n_all`` the sums
    of their counts, ``total_used`` the pooled used pairs, ``personalized`` the releases'
    ``phi_sum`` over ``n_clusters``, ``obuchowski`` the pooled all-rows AUC and
    ``population`` one of the three estimates of the population AUC the method offers.
    So every weight of the per-cluster sums is what the honest method sends for these
    sites. A crafted request that added 2^28 cases to a clear site's lowest bin of
    negatives read those clusters' sum c_i^2, mean within-cluster AUC and positives
    (16 of 16 sites); it is refused (tests/test_attacks_review3.py). The site's own values
    it compares with are those it releases in the clear anyway; the set of sites is bound
    with the request (one round 2 per lifetime).
    """
    names, values, signatures, roster = _relay(
        ctx,
        args,
        ("release_sites", "release_values", "release_signatures"),
        "in the clear a site needs every round-1 site's signed release",
    )
    if ctx.site not in names:
        _refuse_moments(ctx, "release_sites", "does not name this site")
    edges = np.asarray(args["edges"], dtype=np.float64)
    n_bins = edges.size - 1
    width = len(_HIST_KEYS) * n_bins + len(_SUMMARY_SCALARS)
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (len(names), width):
        _refuse_moments(
            ctx,
            "release_values",
            f"must hold one round-1 release ({width} values at these edges) per site of "
            f"'release_sites'; got shape {values.shape}",
        )
    by_name = None if len(signatures) % 2 else split_signatures(bytes.fromhex(signatures), names)
    if by_name is None:
        _refuse_moments(ctx, "release_signatures", "needs one signature per site")
    parts = dict(zip(names, values, strict=True))
    forged = roster.unverified(
        (name, release_message(name, edges, parts[name]), by_name[name]) for name in names
    )
    if forged:
        _refuse_moments(
            ctx,
            "release_signatures",
            f"do not carry the signature of {forged} over their round-1 releases at these "
            "edges under the keys its roster holds",
        )
    # Its own release must be what its rows give at these edges: the one it signed last
    # (kept since round 1) while its rows are those it signed it over, else (after a
    # restart, or on Flower, where the state travels with the run and the site is rebuilt
    # from its data file) the one its rows give now.
    kept = ctx.state.get(_CLEAR_RELEASE)
    if kept is not None and kept.get("rows") == ctx.data.digest:
        same = kept["message"] == release_message(ctx.site, edges, parts[ctx.site])
    else:
        same = np.array_equal(parts[ctx.site], release_vector(_summary(ctx, args, local, True)))
    if not same:
        _refuse_moments(
            ctx,
            "release_values",
            "holds under this site's name a release that is not what it releases at these edges",
        )
    total = values.sum(axis=0)
    for k, key in enumerate(_HIST_KEYS):
        if not np.array_equal(np.asarray(args[key]), total[k * n_bins : (k + 1) * n_bins]):
            _refuse_moments(
                ctx, key, "is not the sum of the signed round-1 releases of 'release_sites'"
            )
    sums = dict(zip(_SUMMARY_SCALARS, total[len(_HIST_KEYS) * n_bins :].tolist(), strict=True))
    for key, of in (
        ("n_clusters", "clusters_used"),
        ("big_m", "neg_used"),
        ("big_n", "pos_used"),
        ("big_m_all", "neg_all"),
        ("big_n_all", "pos_all"),
    ):
        if float(args[key]) != sums[of]:
            _refuse_moments(ctx, key, f"is not the sum of the signed releases' {of!r}")
    hist = {k: np.asarray(args[k], dtype=np.float64) for k in _HIST_KEYS}
    pairs = ScoreCounts.from_bins(hist["hist_pos_used"], hist["hist_neg_used"]).mann_whitney()
    pairs_all = ScoreCounts.from_bins(hist["hist_pos_all"], hist["hist_neg_all"]).mann_whitney()
    n_i, big_m, big_n = sums["clusters_used"], sums["neg_used"], sums["pos_used"]
    between = pairs - sums["within_binned_twice"] / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        eq5 = between / (big_m * big_n)
        estimates = (eq5, eq5 * n_i / (n_i - 1.0), between / (big_m * big_n - sums["mn_used"]))
    expected = (
        ("total_used", pairs, "the pooled used pairs"),
        ("personalized", sums["phi_sum"] / n_i, "the releases' phi_sum over n_clusters"),
        ("obuchowski", pairs_all / (sums["neg_all"] * sums["pos_all"]), "the pooled AUC"),
    )
    for key, want, what in expected:
        if not _near(float(args[key]), want):
            _refuse_moments(ctx, key, f"is not {what} of the signed releases")
    if not any(_near(float(args["population"]), e) for e in estimates if np.isfinite(e)):
        _refuse_moments(ctx, "population", "is none of the population AUCs of the signed releases")


def _check_sizes(ctx: SiteContext, args: Record, n_used: int) -> None:
    """Refuse ``n_clusters`` and ``total_used`` out of the range the pooled counts allow.

    After the check of the pooled histograms, whose refusal comes first; through secure
    aggregation after the binding too (whether the site alone uses more clusters than
    ``n_clusters`` is a fact about its rows; the text names no count).
    """
    n_i = float(args["n_clusters"])
    big_m, big_n = float(args["big_m"]), float(args["big_n"])
    if n_i < n_used:
        _refuse_moments(ctx, "n_clusters", "is below the clusters this site alone uses")
    if n_i > min(big_m, big_n):
        _refuse_moments(ctx, "n_clusters", "exceeds big_m or big_n (each cluster has both)")
    if float(args["total_used"]) > big_m * big_n:
        _refuse_moments(ctx, "total_used", "exceeds big_m * big_n pairs")


@site_function(
    FUNCTION_MOMENTS,
    schema={
        **_EDGES,
        "n_clusters": sch.Float(0.0),
        "big_m": sch.Float(0.0, open_lo=True),
        "big_n": sch.Float(0.0, open_lo=True),
        "total_used": sch.Float(0.0),
        "population": sch.Float(0.0, 2.0),
        "personalized": sch.Float(0.0, 1.0),
        "obuchowski": sch.Float(0.0, 1.0),
        "big_m_all": sch.Float(0.0, open_lo=True),
        "big_n_all": sch.Float(0.0, open_lo=True),
        "hist_pos_used": _HIST,
        "hist_neg_used": _HIST,
        "hist_pos_all": _HIST,
        "hist_neg_all": _HIST,
        # The round-1 sites' signed rows (secure aggregation only; row_count_arguments).
        "row_sites": sch.Names(_MAX_SITES, default=None),
        "row_counts": sch.IntArray((sch.Bound(1, _MAX_SITES),), lo=0, default=None),
        "row_signatures": sch.Text(2 * SIGNATURE_BYTES * _MAX_SITES, alphabet=_HEX, default=None),
        # The round-1 sites' signed releases (in the clear only; release_arguments).
        "release_sites": sch.Names(_MAX_SITES, default=None),
        "release_values": sch.FloatArray(
            (sch.Bound(1, _MAX_SITES), sch.Bound(1, 4 * (_MAX_EDGES - 1) + len(_SUMMARY_SCALARS))),
            lo=0.0,
            default=None,
        ),
        "release_signatures": sch.Text(
            2 * SIGNATURE_BYTES * _MAX_SITES, alphabet=_HEX, default=None
        ),
    },
    release="both",
)
def _site_moments(ctx: SiteContext, args: Record) -> Reply:
    clear = _clear_guard(ctx, FUNCTION_MOMENTS, args)
    # As round 1: a site under q rows refuses in the policy's words before it bins a score
    # (review 17, H17-2: "outside the shared score range" reached the analyst through the
    # secure sum's refusal when one of a site's 1 to 4 rows lay outside, 10 of 10).
    ctx.policy.check_release(site=ctx.site, function=FUNCTION_MOMENTS, kind="aggregate",
                             counts={"rows": ctx.data.n}, dp=(), ledger=ctx.ledger,
                             n_rows=ctx.data.n)  # fmt: skip
    local = _local(ctx, args)
    keep, codes, n_used = _restricted(local)
    n_bins = int(np.asarray(args["edges"]).size - 1)
    if clear:
        # The check of the pooled histograms below compares them with the site's own; in
        # the clear that comparison may only touch histograms the site would release.
        own = _own_histograms(local, keep, n_bins)
        for what, counts in _bin_counts(**own).items():
            if counts.size and counts.min() < ctx.policy.min_count:
                # No count in the text: it travels to the analyst.
                raise DisclosureError(
                    f"site {ctx.site!r} refuses {FUNCTION_MOMENTS!r}: a {what} count is below "
                    f"the minimum of {ctx.policy.min_count} rows per released aggregate",
                    site=ctx.site,
                    function=FUNCTION_MOMENTS,
                )
    # What the arguments must satisfy whatever the sites' rows: refused before the binding,
    # as the refusal tells nothing about the site.
    _check_consistent(ctx, args)
    if clear:
        # The pooled histograms and totals against the sites' signed releases (C2 in the
        # clear): the site's own values it compares with are those it releases anyway.
        _check_releases(ctx, args, local)
    else:
        # The pooled rows against the round-1 sites' signed rows (C2): arguments, the
        # site's roster and its ledger only, so refused before the binding too.
        _check_rows(ctx, args, local)
        # The site's histograms stay hidden, so whether the pooled ones contain them is a
        # fact about its rows: one round-2 request per lifetime, bound before the check.
        # Without the signatures: they name the latest round-1 session (a re-run of the
        # same analysis signs its same counts anew) and enter none of the sums.
        request = _digest({k: v for k, v in args.items() if k != "row_signatures"})
        _bind(ctx, FUNCTION_MOMENTS, BIND_SECURE_MOMENTS, "round-2 arguments", request, False)
    _check_pooled(ctx, args, local, keep, n_bins)
    _check_sizes(ctx, args, n_used)
    if clear:
        # One round-2 request per lifetime in the clear: the analyst chooses the pooled
        # histograms, and two requests could be differenced.
        _bind(ctx, FUNCTION_MOMENTS, BIND_MOMENTS, "round-2 arguments", _digest(args))
    y, b = local.label[keep], local.bins[keep]
    s = _cell_scores(ctx, args, local, clear)[keep]
    n_i = float(args["n_clusters"])
    big_m, big_n = float(args["big_m"]), float(args["big_n"])
    total = float(args["total_used"])
    theta12, theta11 = float(args["population"]), float(args["personalized"])
    s11 = s12 = s22 = 0.0
    if n_used:
        exact = cluster_terms(y, s, codes, n_used)
        phi = exact.within / (exact.m * exact.n)
        row, col = _cross_sums(
            y,
            b,
            codes,
            n_used,
            np.asarray(args["hist_pos_used"], dtype=np.float64),
            np.asarray(args["hist_neg_used"], dtype=np.float64),
        )
        # The summands of Corollary 6 (see fedroc.methods.clustered._estimators), centred
        # with the pooled estimates so that the sums add up across sites.
        size_term = n_i * (exact.m / big_m + exact.n / big_n)
        a = n_i * (row + col) / (big_m * big_n)
        s11 = float(np.sum((a - theta12 * size_term) ** 2))
        share = n_i * (row + col) / total if total > 0 else np.zeros_like(row)
        s12 = float(np.sum(phi * (share - size_term)))
        s22 = float(np.sum((phi - theta11) ** 2))
    # Obuchowski's sums run over every cluster, one-class ones included.
    m_all_i = np.bincount(local.codes[~local.label], minlength=local.n_clusters)
    n_all_i = np.bincount(local.codes[local.label], minlength=local.n_clusters)
    row_a, col_a = _cross_sums(
        local.label,
        local.bins,
        local.codes,
        local.n_clusters,
        np.asarray(args["hist_pos_all"], dtype=np.float64),
        np.asarray(args["hist_neg_all"], dtype=np.float64),
    )
    theta = float(args["obuchowski"])
    big_m_all, big_n_all = float(args["big_m_all"]), float(args["big_n_all"])
    x = row_a / big_n_all - m_all_i * theta
    z = col_a / big_m_all - n_all_i * theta
    return Reply(
        {
            "s11": s11,
            "s12": s12,
            "s22": s22,
            # Divided by M, N and sqrt(M N) (as in Obuchowski's S10, S01, S11) so that they
            # stay of the order of the cluster sizes in the fixed-point ring.
            "o10": float(np.sum(x * x)) / big_m_all,
            "o01": float(np.sum(z * z)) / big_n_all,
            "o11": float(np.sum(x * z)) / np.sqrt(big_m_all * big_n_all),
        },
        counts={"rows": ctx.data.n, "clusters": n_used},
    )
