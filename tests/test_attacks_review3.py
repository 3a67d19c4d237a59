"""Attack review of the clustered method (paper 3): what its cluster sums tell below the grid.

Each test plays the curious analyst with fedroc's public calls only (``secure_sum``,
the methods) and tries to learn what a site protects. A test asserts that the attack
fails and says what it recovered before the fix, where it succeeded.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fedroc.data import SiteData
from fedroc.federation import Federation, Site
from fedroc.privacy import BudgetLedger

LEAVES = 4096  # the default grid every exact secure count of a site is held to (R31)


# -- C1. the within-cluster AUCs order two rows of one cluster inside one grid cell -----------
def _matched_pairs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` matched clusters (one positive, one negative each, as a paired design) and a few
    one-class clusters; no cluster's two rows share a cell of the 4096-cell grid, and no
    row lies in cells [2000, 2100)."""
    neg = rng.beta(2.0, 3.0, n)
    pos = rng.beta(3.0, 2.0, n)
    for s in (neg, pos):
        cell = np.floor(s * LEAVES)
        s[(cell >= 2000) & (cell < 2100)] -= 0.05  # nobody near the victim's cell
    same = np.floor(neg * LEAVES) == np.floor(pos * LEAVES)
    pos[same] = np.minimum(pos[same] + 2.0 / LEAVES, 1.0)
    lone = rng.random(4)  # clusters of one row: not used by the within-cluster terms
    y = np.r_[np.zeros(n), np.ones(n), rng.random(4) < 0.5].astype(int)
    s = np.r_[neg, pos, lone]
    c = np.r_[np.arange(n), np.arange(n), n + np.arange(4)]
    return y, s, c


def _cell_order_federation(rng: np.random.Generator, positive_above: bool) -> Federation:
    """Three sites of matched clusters; the victim's cluster 0 holds its two rows in cell
    2048 of the 4096-cell grid ([0.5, 0.500244)), at 0.50005 and 0.50020: its positive is
    the upper one when ``positive_above``. The two federations of one seed have the same
    counts in every cell of every grid (the site's tree, histograms and counts agree)."""
    sites = []
    for k in range(3):
        y, s, c = _matched_pairs(rng, 30)
        if k == 0:
            lo, hi = 0.5 + 0.2 / LEAVES, 0.5 + 0.8 / LEAVES
            s[0], s[30] = (lo, hi) if positive_above else (hi, lo)  # rows 0 (neg), 30 (pos)
        sites.append(Site(f"s{k}", SiteData.from_arrays(y, s, c)))
    return Federation.from_sites(sites)


def _read_cell_order(fed: Federation) -> bool | None:
    """The analyst's attack: round 1 of the clustered method at the grid's 4096 bins, as
    an input of secure aggregation (only sums over the three sites). ``mn_used`` equal to
    ``clusters_used`` says every used cluster is one positive and one negative, so the
    within-cluster AUCs ``phi_sum`` minus the same pairs counted on the bins
    (``within_binned_twice / 2``) is the sum over the pairs tied in a bin of 1/2 (positive
    above) or -1/2; ``within_same_bin`` says how many there are. One: the positive of the
    one cluster whose rows share a cell is above (True) or below (False) its negative.
    The cell is one of those the pooled histograms show with both classes (the only one
    in some seeds). None when the releases do not allow the reading."""
    from fedroc.methods.clustered._site import FUNCTION_SUMMARY, score_bin_edges
    from fedroc.secagg import secure_sum

    first = secure_sum(fed, FUNCTION_SUMMARY, edges=score_bin_edges(LEAVES))
    used = round(float(first["clusters_used"]))
    if round(float(first["mn_used"])) != used or round(float(first["within_same_bin"])) != 1:
        return None
    both = (np.asarray(first["hist_pos_used"]) > 0) & (np.asarray(first["hist_neg_used"]) > 0)
    assert both[2048]  # the victim's cell (the analyst may know the patient's score)
    diff = float(first["phi_sum"]) - float(first["within_binned_twice"]) / 2.0
    if abs(abs(diff) - 0.5) > 1e-6:
        return None
    return diff > 0


def _tree(fed: Federation) -> tuple[list[int], list[int]]:
    """The pooled 4096-leaf exact tree: what the site's one grid tells of its rows."""
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA
    from fedroc.secagg import secure_sum

    t = secure_sum(fed, INPUT_NAME, mode=MODE_SA, branching=2, height=12, lo=0.0, hi=1.0)
    return [round(v) for v in t["pos"]], [round(v) for v in t["neg"]]


def test_the_within_cluster_aucs_do_not_order_two_rows_of_one_grid_cell():
    """The clustered method's round-1 ``phi_sum`` (and round 2's ``s12``, ``s22``) were
    computed on a site's exact scores, while every other exact quantity a site sums
    securely is a function of its counts per cell of its one grid (R31, R32, A1). Here the
    victim's matched cluster (one positive, one negative) has both rows in one cell of the
    4096-cell grid, at 0.50005 and 0.50020; the two federations of a seed differ only in
    which of the two is the positive, so the pooled tree at the grid's 4096 leaves is the
    same for both (checked). One secure round-1 summary at 4096 bins: ``phi_sum -
    within_binned_twice / 2`` is +-1/2, the sign the order of the two rows inside the cell.
    Measured on main b063985: 16 of 16 federations (8 seeds, both orders). Now a site
    computes ``phi_i`` on its scores rounded to one value per cell of its bound grid
    (``grid_representatives``): the pair counts 1/2, as on the bins, and the difference is
    0 for both orders."""
    read = 0
    for seed in range(8):
        trees = []
        for above in (True, False):
            fed = _cell_order_federation(np.random.default_rng([3301, seed]), above)
            trees.append(_tree(fed))
            read += _read_cell_order(fed) is above
        assert trees[0] == trees[1]  # the grid tells the two federations apart in no cell
    assert read == 0, f"the order of two rows inside one grid cell read in {read} of 16"


def test_the_within_cluster_aucs_in_the_clear_do_not_order_two_rows_of_one_cell():
    """C1 at one site whose operator allows its histograms in the clear
    (``clear_histograms``, here with min_count 1 so that 4096 bins pass): its own summary
    at 4096 bins, the same reading. Measured on main b063985: 16 of 16. Now the clear
    path computes ``phi_i`` on the binary grid of the edges it bound for its lifetime."""
    from fedroc.methods.clustered._site import FUNCTION_SUMMARY, score_bin_edges
    from fedroc.privacy import DisclosurePolicy

    policy = DisclosurePolicy(min_count=1, clear_histograms=True)
    read = 0
    for seed in range(8):
        for above in (True, False):
            y, s, c = _matched_pairs(np.random.default_rng([3302, seed]), 30)
            lo, hi = 0.5 + 0.2 / LEAVES, 0.5 + 0.8 / LEAVES
            s[0], s[30] = (lo, hi) if above else (hi, lo)
            site = Site("victim", SiteData.from_arrays(y, s, c), policy=policy)
            fed = Federation.from_sites([site])
            r = fed.call(FUNCTION_SUMMARY, edges=score_bin_edges(LEAVES))["victim"]
            if int(r["mn_used"]) != int(r["clusters_used"]) or int(r["within_same_bin"]) != 1:
                continue
            diff = float(r["phi_sum"]) - float(r["within_binned_twice"]) / 2.0
            read += abs(abs(diff) - 0.5) < 1e-9 and (diff > 0) is above
    assert read == 0, f"the order of two rows inside one grid cell read in {read} of 16"


# -- C2. crafted round-2 histograms isolate the cluster of the lowest negative -----------------
def _extreme_federation(rng: np.random.Generator) -> tuple[Federation, int, float]:
    """Three sites of 30 clusters each (paper 3's allocation, 2 to 5 rows a cluster, both
    classes mostly); returns the federation and, for the cluster that holds the lowest
    negative of the federation, its number of positives and its within-cluster AUC on the
    4096-cell grid (the secret)."""
    from fedroc.methods.clustered.models import sample_allocation, sample_binormal

    rows = []
    for _ in range(3):
        m, n = sample_allocation(30, 0.4, rng=rng)
        smp = sample_binormal(m, n, delta=0.9, rho=0.5, rng=rng)
        s = 1.0 / (1.0 + np.exp(-smp.y_score))
        rows.append((smp.y_true.astype(bool), s, smp.cluster))
    sites = [Site(f"s{k}", SiteData.from_arrays(y, s, c)) for k, (y, s, c) in enumerate(rows)]
    # The truth: the lowest negative's cluster.
    k, j = min(
        ((k, int(np.argmin(np.where(y, np.inf, s)))) for k, (y, s, _) in enumerate(rows)),
        key=lambda kj: rows[kj[0]][1][kj[1]],
    )
    y, s, c = rows[k]
    mine = c == c[j]
    cell = np.floor(s[mine] * LEAVES)
    pos, neg = cell[y[mine]], cell[~y[mine]]
    ordered = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    phi = float(ordered / max(pos.size * neg.size, 1))
    fed = Federation.from_sites(sites)
    _OWN[id(fed)] = [_own_histograms(*r) for r in rows]
    return fed, int(pos.size), phi


# Each site's own round-1 histograms, for the analyst who knows them (an upper bound on what
# an analyst can do without being refused), by the id of the federation.
_OWN: dict[int, list[dict[str, np.ndarray]]] = {}


def _own_histograms(y: np.ndarray, s: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    from fedroc.methods.clustered._site import bin_scores, score_bin_edges

    b = bin_scores(s, score_bin_edges(LEAVES))
    _, code = np.unique(c, return_inverse=True)
    used = (np.bincount(code, weights=y) > 0) & (np.bincount(code, weights=~y) > 0)
    keep = used[code]
    return {
        "hist_pos_used": np.bincount(b[y & keep], minlength=LEAVES).astype(float),
        "hist_neg_used": np.bincount(b[~y & keep], minlength=LEAVES).astype(float),
        "hist_pos_all": np.bincount(b[y], minlength=LEAVES).astype(float),
        "hist_neg_all": np.bincount(b[~y], minlength=LEAVES).astype(float),
    }


def _pairs(pos: np.ndarray, neg: np.ndarray) -> float:
    """Pairs (positive, negative) ordered correctly in two histograms, ties 1/2."""
    from fedroc.metrics import ScoreCounts

    return ScoreCounts.from_bins(pos, neg).mann_whitney()


def _round_two_args(summed, edges: np.ndarray) -> dict:
    """Round-2 arguments from a secure round-1 sum: its histograms and totals, the estimates
    at 1/2 where the check does not pin them (no relay of the signed rows)."""
    g = {k: np.asarray(summed[k], dtype=np.float64) for k in summed.values}
    n_used = float(round(float(g["clusters_used"])))
    return {
        "edges": edges,
        **{k: g[k] for k in ("hist_pos_used", "hist_neg_used", "hist_pos_all", "hist_neg_all")},
        "n_clusters": n_used,
        "big_m": float(g["neg_used"]),
        "big_n": float(g["pos_used"]),
        "total_used": _pairs(g["hist_pos_used"], g["hist_neg_used"]),
        "population": 0.5,
        "personalized": float(g["phi_sum"]) / n_used,
        "big_m_all": float(g["hist_neg_all"].sum()),
        "big_n_all": float(g["hist_pos_all"].sum()),
        "obuchowski": 0.5,
    }


def _without_three_rows(d: SiteData) -> SiteData:
    """The rows without 3 of the first cluster of more than 5 rows (a site's updated table)."""
    _, code = np.unique(d.cluster, return_inverse=True)
    big = np.flatnonzero(np.bincount(code) > 5)[0]
    keep = ~np.isin(np.arange(d.n), np.flatnonzero(code == big)[:3])
    return SiteData.from_arrays(d.label[keep], d.score[keep], d.cluster[keep])


def _respects_argument_checks(args: dict, obuchowski_pinned: bool) -> bool:
    """Whether a round-2 request passes every check of its arguments alone a site could make
    without knowing the other sites' rows: whole counts, each used count at most the
    all-rows count of its bin, the totals the sums of the histograms, ``n_clusters`` whole
    and at most ``big_m`` and ``big_n``, ``total_used`` the pairs of the used histograms
    (what the analyst's own code computes, :mod:`fedroc.methods.clustered._federated`), and
    (``obuchowski_pinned``) Obuchowski's AUC that of the all-rows histograms."""
    h = {k: np.asarray(args[k], dtype=np.float64) for k in args if k.startswith("hist_")}
    whole = all((v == np.floor(v)).all() and (v >= 0).all() for v in h.values())
    whole = whole and float(args["n_clusters"]) == np.floor(float(args["n_clusters"]))
    nested = (h["hist_pos_used"] <= h["hist_pos_all"]).all()
    nested = nested and (h["hist_neg_used"] <= h["hist_neg_all"]).all()
    sums = (
        args["big_m"] == h["hist_neg_used"].sum()
        and args["big_n"] == h["hist_pos_used"].sum()
        and args["big_m_all"] == h["hist_neg_all"].sum()
        and args["big_n_all"] == h["hist_pos_all"].sum()
    )
    sizes = 1 <= args["n_clusters"] <= min(args["big_m"], args["big_n"])
    pairs = args["total_used"] == _pairs(h["hist_pos_used"], h["hist_neg_used"])
    obu = _pairs(h["hist_pos_all"], h["hist_neg_all"]) / (args["big_m_all"] * args["big_n_all"])
    obu_ok = not obuchowski_pinned or args["obuchowski"] == obu
    return bool(whole and nested and sums and sizes and pairs and obu_ok)


def _relayed(first, edges: np.ndarray, relay: str, total: float) -> dict:
    """The round-1 sites' signed rows as the analyst relays them in round 2: "true" as
    signed (what the method sends), "inflated" with one count raised so that the sum is
    ``total`` and signed again with a key of the analyst's, "partial" without one site's,
    "none" left out."""
    from fedroc.federation.roster import new_signing_key
    from fedroc.methods.clustered._site import row_count_arguments, rows_message

    if relay == "none":
        return {}
    statements = dict(first.statements)
    if relay == "partial":
        statements.pop(sorted(statements)[-1])
    args = row_count_arguments(statements)
    if relay == "inflated":
        name = args["row_sites"][0]
        args["row_counts"][0] += int(total) - sum(args["row_counts"])
        message = rows_message(name, edges, args["row_counts"][0], first.session)
        forged = new_signing_key().sign(message)
        args["row_signatures"] = forged.hex() + args["row_signatures"][128:]
    return args


def _read_extreme_cluster(
    fed: Federation, variant: str = "adapted", relay: str = "true"
) -> tuple[int, float] | None:
    """The analyst's attack: round 1 honestly at 4096 bins, then its one round-2 request
    with crafted pooled histograms (each still holds every site's own, and adds up to the
    totals sent). K positives placed in the bin just above the lowest negative's bin make
    that negative's ``row_i`` K and every other ``row_i`` small against it.

    ``variant`` "c2" is the request of the C2 review: ``total_used = n_clusters * K`` with
    ``n_clusters = 1e-6`` (the analyst's numbers), so that the size terms vanish and
    ``s12`` is that cluster's ``phi_i``. The same K positives in the all-rows histogram,
    and K2 negatives in bin 0 (no positive there), make Obuchowski's ``x_i`` 1 for that
    cluster only and ``z_i`` each cluster's number of positives (``obuchowski = 0``):
    ``o11 * sqrt(M N)`` is the cluster's positives.

    "adapted" keeps ``n_clusters`` the true number of clusters (whole, at least any site's
    own) and ``total_used`` the pairs of its crafted used histograms; the size terms vanish
    instead under K controls added in the top bin (above every case: no pair, no
    ``col_i``), also in the all-rows histogram (each used count at most the all-rows
    count). ``s12 / n_clusters`` is the cluster's ``phi_i``; Obuchowski's sums as in "c2",
    scaled by the added controls. "pinned" is "adapted" with ``obuchowski`` the AUC of the
    crafted all-rows histograms (which a site could recompute), so ``z_i`` is centred.
    "used" is "adapted" with the all-rows histograms as round 1 summed them (the crafted
    mass in the used histograms only, which is all ``s12`` reads).

    ``relay`` says how the round-1 sites' signed rows go along (:func:`_relayed`)."""
    from fedroc.methods.clustered._site import FUNCTION_MOMENTS, FUNCTION_SUMMARY, score_bin_edges
    from fedroc.secagg import secure_sum

    edges = score_bin_edges(LEAVES)
    first = secure_sum(fed, FUNCTION_SUMMARY, edges=edges)
    g = {k: np.asarray(first[k], dtype=np.float64) for k in first.values}
    low = int(np.flatnonzero(g["hist_neg_used"])[0])
    top = LEAVES - 1
    if (
        g["hist_neg_used"][low] != 1
        or int(np.flatnonzero(g["hist_neg_all"])[0]) != low
        or g["hist_neg_all"][low] != 1
        or g["hist_pos_all"][0] > 0
        or low + 1 >= LEAVES
        or (variant != "c2" and g["hist_pos_all"][top] > 0)
    ):
        return None  # the lowest negative is not alone in its bin, or not in a used cluster
    if variant in ("rows", "rows-total"):
        return _read_by_moving_rows(fed, first, g, low, edges, variant == "rows-total")
    big_k, big_k2 = 2.0**28, 2.0**20
    h = {k: g[k].copy() for k in ("hist_pos_used", "hist_neg_used", "hist_pos_all", "hist_neg_all")}
    h["hist_pos_used"][low + 1] += big_k
    if variant != "used":
        h["hist_pos_all"][low + 1] += big_k
        h["hist_neg_all"][0] += big_k2
    if variant == "c2":
        n_i, total = 1e-6, 1e-6 * big_k
    else:
        # Controls enough for the size terms to vanish, not so many that o11 falls below
        # the fixed-point ring's resolution.
        h["hist_neg_used"][top] += 2.0**22
        if variant != "used":
            h["hist_neg_all"][top] += 2.0**22
        n_i = float(round(float(first["clusters_used"])))
        total = _pairs(h["hist_pos_used"], h["hist_neg_used"])
    big_m_all, big_n_all = float(h["hist_neg_all"].sum()), float(h["hist_pos_all"].sum())
    obu = 0.0
    if variant == "pinned":
        obu = _pairs(h["hist_pos_all"], h["hist_neg_all"]) / (big_m_all * big_n_all)
    args = {
        "edges": edges,
        **h,
        "n_clusters": n_i,
        "big_m": float(h["hist_neg_used"].sum()),
        "big_n": float(h["hist_pos_used"].sum()),
        "total_used": total,
        "population": 0.5,
        "personalized": 0.5,
        "big_m_all": big_m_all,
        "big_n_all": big_n_all,
        "obuchowski": obu,
    }
    assert variant in ("c2", "used") or _respects_argument_checks(args, variant == "pinned")
    args.update(_relayed(first, edges, relay, big_m_all + big_n_all))
    second = secure_sum(fed, FUNCTION_MOMENTS, **args)
    # z_i of the cluster is its positives times K2 / M_all (the controls below every case).
    positives = float(second["o11"]) * np.sqrt(big_m_all * big_n_all) * big_m_all / big_k2
    # The cluster's share of the pairs is n_clusters * row_i / total_used.
    return round(positives), float(second["s12"]) * total / (n_i * big_k)


def _read_by_moving_rows(fed, first, g, low, edges, convert: bool) -> tuple[int, float]:
    """ "rows": what is left if the sites knew the federation's rows per class (the totals
    pinned: no row added, only the true pooled rows moved between bins). The analyst here
    knows every site's own histograms (no real one does), so it moves every row it can
    without any site's refusal: in each bin all but the largest site's own count, the cases
    to the bin above the lowest negative, the controls to the top bin; the used histograms
    are the all-rows ones (each used count at most the all-rows count, at least each
    site's own); ``total_used`` and ``obuchowski`` those of the crafted histograms."""
    from fedroc.methods.clustered._site import FUNCTION_MOMENTS
    from fedroc.secagg import secure_sum

    own = _OWN[id(fed)]
    h, moved = {}, {}
    for cls in ("pos", "neg"):
        key = f"hist_{cls}_all"
        keepers = np.max([o[key] for o in own], axis=0)
        keepers[low] = g[key][low]  # the lowest negative stays where it is
        moved[cls] = float((g[key] - keepers).sum())
        assert (g[key] >= keepers).all() and (keepers >= 0).all()
        h[key] = keepers.copy()
    h["hist_pos_all"][low + 1] += moved["pos"] + (moved["neg"] if convert else 0.0)
    h["hist_neg_all"][LEAVES - 1] += 0.0 if convert else moved["neg"]
    h["hist_pos_used"], h["hist_neg_used"] = h["hist_pos_all"].copy(), h["hist_neg_all"].copy()
    for o in own:
        assert all((h[k] >= o[k]).all() for k in o)  # no site refuses
    big_m_all, big_n_all = float(h["hist_neg_all"].sum()), float(h["hist_pos_all"].sum())
    assert big_m_all + big_n_all == g["hist_neg_all"].sum() + g["hist_pos_all"].sum()
    assert convert or big_n_all == g["hist_pos_all"].sum()
    n_i = float(round(float(first["clusters_used"])))
    args = {
        "edges": edges,
        **h,
        "n_clusters": n_i,
        "big_m": float(h["hist_neg_used"].sum()),
        "big_n": float(h["hist_pos_used"].sum()),
        "total_used": _pairs(h["hist_pos_used"], h["hist_neg_used"]),
        "population": 0.5,
        "personalized": 0.5,
        "big_m_all": big_m_all,
        "big_n_all": big_n_all,
        "obuchowski": _pairs(h["hist_pos_all"], h["hist_neg_all"]) / (big_m_all * big_n_all),
        # The sites' signed rows, as signed: the crafted histograms hold exactly those rows.
        **_relayed(first, edges, "true", big_m_all + big_n_all),
    }
    assert _respects_argument_checks(args, obuchowski_pinned=True)
    second = secure_sum(fed, FUNCTION_MOMENTS, **args)
    positives = float(second["o11"]) * np.sqrt(big_m_all * big_n_all)
    # The cluster's share if its control beats every case: n_clusters * big_n / total_used.
    return round(positives), float(second["s12"]) * float(args["total_used"]) / (
        n_i * args["big_n"]
    )


def test_the_c2_request_with_a_fractional_cluster_count_is_refused():
    """C2's request (``n_clusters = 1e-6``, ``total_used = n_clusters * 2**28``) read the
    lowest negative's cluster in 7 of 8 federations on main 897c623. A site now refuses
    an ``n_clusters`` that is not a whole number of clusters, at least the site's own
    used clusters and at most ``big_m`` and ``big_n``: every site refuses it, before it
    binds the request (the check tells nothing about its rows)."""
    from fedroc.exceptions import DisclosureError

    refused = 0
    for seed in range(8):
        fed, _, _ = _extreme_federation(np.random.default_rng([3303, seed]))
        try:
            _read_extreme_cluster(fed, "c2")
        except DisclosureError as exc:
            refused += "n_clusters" in str(exc)
    assert refused == 7, refused  # the 8th is skipped by the analyst (its negative not alone)


# What a site's refusal names, for each way the analyst relays the round-1 signed rows.
_C2_REFUSAL = {
    "true": "do not add up to the rows the round-1 sites signed",
    "inflated": "do not carry the signature of",
    "partial": "are not the sites this site's round-1 sum was over",
    "none": "'row_sites' is missing",
}


def test_crafted_round_two_histograms_do_not_isolate_the_cluster_of_the_lowest_negative():
    """Round 2 of the clustered method takes the pooled histograms and totals from the
    analyst. A site checked that each pooled histogram holds its own counts bin by bin and
    adds up to the total sent, that every count is whole, that ``n_clusters`` is a whole
    number, at least its own used clusters and at most ``big_m`` and ``big_n``, and that
    ``total_used`` is at most ``big_m * big_n``; it binds the request once per lifetime
    (before the checks that read its rows). Every site gets the same arguments (secure
    aggregation signs their digest), and only the sums over the sites leave, but the
    weights a crafted histogram puts on a cluster, though monotone in its scores, isolate a
    cluster at an extreme: the one holding the federation's lowest negative, whose bin
    (alone, count 1) the honest round-1 pooled histograms at 4096 bins show.

    C2's request (``n_clusters = 1e-6``) is refused
    (:func:`test_the_c2_request_with_a_fractional_cluster_count_is_refused`); the adapted
    one (``_read_extreme_cluster``, "adapted") keeps ``n_clusters`` true: 2**28 positives
    added in the bin above the lowest negative make its ``row_i`` 2**28 and every other
    cluster's at most a few thousand; ``total_used`` is the pairs of the crafted
    histograms (about 2**28, so the cluster's share is 1); 2**22 controls added in the top
    bin (no case there: no pair) make the size terms vanish; ``s12 / n_clusters`` is that
    cluster's ``phi_i`` to 2e-4. With 2**20 controls in bin 0 of the all-rows histogram
    and ``obuchowski = 0``, ``o11 * sqrt(M N) * M / 2**20`` is its number of positives.
    The request passes every check of the arguments alone that a site could make without
    the federation's rows (``_respects_argument_checks``). With ``obuchowski`` pinned to
    the crafted all-rows AUC ("pinned") the positives are not read, ``s12`` is unchanged.
    Measured on main f6e2328 (3 sites of 30 clusters, 2 to 5 rows each; 8 federations, the
    8th skipped by the analyst, its lowest negative not alone in its bin): "adapted" read
    the AUC and the positives in 7 of 8, "pinned" the AUC in 7 of 8.

    Now every site signs its rows (what its all-rows histograms add up to) in its round-1
    unmasking reply, and in round 2 refuses, before it binds the request, unless the
    signed rows of exactly the sites its round-1 sum was over (its ledger's partners)
    verify under its roster's keys, the pooled all-rows histograms add up to their sum,
    and no used count exceeds the all-rows count of its bin. The adapted and pinned
    requests with the signed rows relayed as signed ("true") are refused (they add rows);
    so are the same requests with one count raised to cover the added rows and signed
    with a key of the analyst's ("inflated"), with one site's signed rows left out
    ("partial"), or without them ("none"); and "used", the crafted mass in the used
    histograms only (all that ``s12`` reads), the all-rows ones as round 1 summed them.
    What is left, moving the true rows, reads nothing
    (:func:`test_moving_the_federations_rows_does_not_isolate_the_cluster`)."""
    from fedroc.exceptions import DisclosureError

    got, refused, skipped = 0, 0, 0
    for seed in range(8):
        for variant in ("adapted", "pinned", "used"):
            for relay in ("true", "inflated", "partial", "none"):
                fed, positives, phi = _extreme_federation(np.random.default_rng([3303, seed]))
                try:
                    read = _read_extreme_cluster(fed, variant, relay)
                except DisclosureError as exc:
                    assert _C2_REFUSAL[relay] in str(exc) or (
                        variant == "used" and relay == "true" and "more rows in a bin" in str(exc)
                    ), (variant, relay, str(exc))
                    refused += 1
                    continue
                skipped += read is None
                got += read is not None and (read[0] == positives or abs(read[1] - phi) < 2e-3)
    assert got == 0, f"the extreme cluster's positives or AUC read in {got} of 96"
    assert (refused, skipped) == (84, 12), (refused, skipped)  # 7 of 8 seeds, 12 ways each


def test_moving_the_federations_rows_does_not_isolate_the_cluster():
    """What is left of C2 now that every site checks the pooled rows against the round-1
    sites' signed rows: the pooled totals pinned, the analyst can only move the true rows
    between bins. Even one that knows every site's own histograms, and so moves every row
    no site would miss (all but the largest site's own count in each bin: cases to the bin
    above the lowest negative, controls to the top bin or, "rows-total", turned into such
    cases), reads neither the AUC (``s12`` scaled by the cluster's largest share gave 10
    to 18 where the AUC is 0.6 to 1: the other clusters dominate the sum) nor the
    positives of the lowest negative's cluster: 0 of 7 each way."""
    got = 0
    for seed in range(8):
        for variant in ("rows", "rows-total"):
            fed, positives, phi = _extreme_federation(np.random.default_rng([3303, seed]))
            read = _read_extreme_cluster(fed, variant)
            got += read is not None and (read[0] == positives or abs(read[1] - phi) < 2e-3)
    assert got == 0, f"the extreme cluster's positives or AUC read in {got} of 16"


def test_signed_rows_are_bound_to_the_edges_and_the_quantity_and_refusals_bind_nothing():
    """The signature over a site's rows covers a domain tag, its name and the edges'
    digest: the sites' own keys signing the same counts for other edges, or the bare
    count, are refused like a forgery. The check reads no row, so a refused request binds
    nothing: the honest round 2 is answered after them, and equals the method's own."""
    from fedroc.exceptions import DisclosureError
    from fedroc.methods.clustered import federated_clustered_auc
    from fedroc.methods.clustered._site import (
        FUNCTION_MOMENTS,
        FUNCTION_SUMMARY,
        row_count_arguments,
        rows_message,
        score_bin_edges,
    )
    from fedroc.metrics import ScoreCounts
    from fedroc.secagg import secure_sum

    rng_seed = [3304, 0]
    fed, _, _ = _extreme_federation(np.random.default_rng(rng_seed))
    sites = fed.transport._sites  # the sites' own keys, as a stand-in for a replay
    edges = score_bin_edges(64)
    first = secure_sum(fed, FUNCTION_SUMMARY, edges=edges)
    g = {k: np.asarray(first[k], dtype=np.float64) for k in first.values}
    n_used = float(round(float(first["clusters_used"])))
    big_m, big_n = float(first["neg_used"]), float(first["pos_used"])
    args = {
        "edges": edges,
        **{k: g[k] for k in ("hist_pos_used", "hist_neg_used", "hist_pos_all", "hist_neg_all")},
        "n_clusters": n_used,
        "big_m": big_m,
        "big_n": big_n,
        "total_used": ScoreCounts.from_bins(g["hist_pos_used"], g["hist_neg_used"]).mann_whitney(),
        "population": 0.5,
        "personalized": float(first["phi_sum"]) / n_used,  # as the method sends it
        "big_m_all": float(first["neg_all"]),
        "big_n_all": float(first["pos_all"]),
        "obuchowski": 0.5,
    }
    honest = row_count_arguments(first.statements)
    names, counts = honest["row_sites"], honest["row_counts"]
    other_edges = score_bin_edges(32)
    for message in (
        lambda name, rows: rows_message(name, other_edges, rows, first.session),
        lambda name, rows: int(rows).to_bytes(8, "big"),
        lambda name, rows: rows_message(name, edges, rows, "0" * 32),  # another session's
    ):
        replayed = "".join(
            sites[n].identity.sign(message(n, c)).hex() for n, c in zip(names, counts, strict=True)
        )
        with pytest.raises(DisclosureError, match="do not carry the signature of"):
            secure_sum(fed, FUNCTION_MOMENTS, **{**args, **honest, "row_signatures": replayed})
    # Nothing bound: the honest request is answered, as the method's own round 2 is.
    second = secure_sum(fed, FUNCTION_MOMENTS, **args, **honest)
    assert np.isfinite(float(second["s22"]))
    fresh, _, _ = _extreme_federation(np.random.default_rng(rng_seed))
    result = federated_clustered_auc(fresh, n_bins=64, population_estimator="eq5")
    # Sigma22 / I = s22 / ((I - 1) I), I the used clusters.
    want = result.covariance[1, 1] * n_used * (n_used - 1)
    assert float(second["s22"]) == pytest.approx(want, rel=1e-9)


def test_a_sites_older_signed_rows_are_not_relayed_after_its_rows_changed():
    """Secure C2, what the signed rows did not bind: a site's signed count was bound to its
    name, the edges and the quantity, not to a round-1 sum. A site whose rows changed
    between two round-1 sums over its lifetime-bound edges (here s1 reloaded with 3 rows
    fewer, its ledger and key kept) signed both counts, and the analyst could relay the
    older one beside the others' newer ones: the pooled all-rows histograms then had to
    hold 3 rows more than the federation, which the analyst placed where it chose (3
    positives in the lowest bin), and every site answered round 2 (main 5914c42). Now the
    count is signed over the round-1 session too, each site checks the relayed counts
    against the session of its own latest round-1 sum, and a session id a site has summed
    in is refused again (its ledger): the older count is refused, naming the site.

    Since the review of main f3f6822 (tests/test_attacks_review5.py) the reloaded site
    refuses the second sum itself (its first input is bound: two sums around a change of
    its rows subtracted to the rows that changed), so no newer count exists; the session
    binding is checked here on two sums of the same rows, an older count beside the newer
    ones refused all the same."""
    from fedroc.exceptions import DisclosureError
    from fedroc.methods.clustered._site import (
        FUNCTION_MOMENTS,
        FUNCTION_SUMMARY,
        row_count_arguments,
        score_bin_edges,
    )
    from fedroc.secagg import secure_sum

    fed, _, _ = _extreme_federation(np.random.default_rng([3307, 0]))
    sites = dict(fed.transport._sites)
    edges = score_bin_edges(64)
    before = secure_sum(fed, FUNCTION_SUMMARY, edges=edges)
    # s1 reloaded without 3 rows of a cluster of more than 3 rows of both classes.
    old = sites["s1"]
    sites["s1"] = Site(
        "s1", _without_three_rows(old._data), policy=old.policy, ledger=old.ledger,
        identity=old.identity,
    )  # fmt: skip
    with pytest.raises(DisclosureError, match="site 's1' refuses .* its rows changed since"):
        secure_sum(Federation.from_sites(sites.values()), FUNCTION_SUMMARY, edges=edges)
    after = secure_sum(fed, FUNCTION_SUMMARY, edges=edges)
    assert after.session != before.session
    relay = row_count_arguments({**after.statements, "s1": before.statements["s1"]})
    assert relay == {**row_count_arguments(after.statements), "row_signatures": relay[
        "row_signatures"]}  # fmt: skip
    args = _round_two_args(after, edges)
    with pytest.raises(DisclosureError, match=r"'row_signatures' do not carry the signature of "
                       r"\['s1'\]"):  # fmt: skip
        secure_sum(fed, FUNCTION_MOMENTS, **args, **relay)


def test_a_secure_round_two_refuses_when_the_sites_rows_changed_since_its_round_one():
    """The session a site keeps from its latest round-1 sum (its state) describes the rows
    it summed then. On Flower the state travels with the run while the site is rebuilt from
    its data file at each message: s1 reloaded with 3 rows fewer between the rounds took
    the round-1 relay (its older signed count) and answered round 2 on the new rows, which
    the round-1 sums do not hold. Refused now, naming the site, before anything is bound."""
    from fedroc.exceptions import DisclosureError
    from fedroc.methods.clustered._site import (
        FUNCTION_MOMENTS,
        FUNCTION_SUMMARY,
        row_count_arguments,
        score_bin_edges,
    )
    from fedroc.secagg import secure_sum

    fed, _, _ = _extreme_federation(np.random.default_rng([3307, 2]))
    sites = dict(fed.transport._sites)
    edges = score_bin_edges(64)
    g0 = secure_sum(fed, FUNCTION_SUMMARY, edges=edges)
    args = {**_round_two_args(g0, edges), **row_count_arguments(g0.statements)}
    old = sites["s1"]
    d = old._data
    reloaded = Site(
        "s1", _without_three_rows(d), policy=old.policy, ledger=old.ledger, identity=old.identity
    )
    reloaded.state = dict(old.state)
    with pytest.raises(DisclosureError, match="site 's1' refuses .*its rows changed since"):
        secure_sum(Federation.from_sites({**sites, "s1": reloaded}.values()), FUNCTION_MOMENTS,
                   **args)  # fmt: skip
    # The same rows (the site rebuilt on them) answer the same request.
    same = Site("s1", d, policy=old.policy, ledger=old.ledger, identity=old.identity)
    same.state = dict(old.state)
    second = secure_sum(Federation.from_sites({**sites, "s1": same}.values()), FUNCTION_MOMENTS,
                        **args)  # fmt: skip
    assert np.isfinite(float(second["s22"]))


def test_a_site_signs_its_rows_in_a_round_one_session_once_across_restarts():
    """The session binding above needs session ids a site signs in once: the analyst picks
    them, and a site keeps its latest in memory. Its sites restarted (fresh state, the same
    ledgers and keys), a round-1 sum under the id of an earlier one is refused, naming the
    site and the session (its ledger bound the id), before any row is read or signed;
    under a fresh id it is answered. Counts signed over another session are refused in
    round 2 like a forgery."""
    from fedroc.exceptions import DisclosureError
    from fedroc.methods.clustered._site import FUNCTION_SUMMARY, score_bin_edges
    from fedroc.secagg import SecAggServer, secure_sum

    fed, _, _ = _extreme_federation(np.random.default_rng([3307, 1]))
    edges = score_bin_edges(64)
    first = secure_sum(fed, FUNCTION_SUMMARY, edges=edges)

    def restarted() -> Federation:
        return Federation.from_sites(
            Site(s.name, s._data, policy=s.policy, ledger=s.ledger, identity=s.identity)
            for s in fed.transport._sites.values()
        )

    server = SecAggServer(restarted(), FUNCTION_SUMMARY, {"edges": edges})
    server.state.session = first.session
    with pytest.raises(DisclosureError, match=f"signed its rows in session {first.session} "
                       "already") as exc:  # fmt: skip
        server.run()
    assert exc.value.site in {"s0", "s1", "s2"}
    again = secure_sum(restarted(), FUNCTION_SUMMARY, edges=edges)
    assert again.session != first.session and set(again.statements) == {"s0", "s1", "s2"}


# -- C2 in the clear: a crafted round-2 request weights the clusters of one clear bin ---------
_CLEAR_G = 4096  # the binary grid the clear path rounds scores to for phi_i (6 bins: 4096)


def _clear_site(seed: int, sizes: tuple[int, ...], n_clusters: int) -> tuple[Federation, SiteData]:
    """One site of paper 3's allocation (``sizes`` + 2 rows a cluster, at least one of each
    class) whose operator allows its histograms in the clear, at the default min_count 5."""
    from fedroc.methods.clustered.models import sample_allocation, sample_binormal
    from fedroc.privacy import DisclosurePolicy

    rng = np.random.default_rng([3305, seed])
    m, n = sample_allocation(n_clusters, 0.4, rng=rng, sizes=sizes)
    smp = sample_binormal(m, n, delta=0.9, rho=0.5, rng=rng)
    data = SiteData.from_arrays(smp.y_true, 1.0 / (1.0 + np.exp(-smp.y_score)), smp.cluster)
    site = Site("v", data, policy=DisclosurePolicy(clear_histograms=True))
    return Federation.from_sites([site]), data


def _clear_truth(data: SiteData, edges: np.ndarray, b0: int) -> dict[str, float]:
    """What the attack below reads, from the site's rows: over the used clusters, with
    ``c_i`` the cluster's negatives in bin ``b0``, ``n_i`` its positives and ``phi_i`` its
    within-cluster AUC on the grid: sum c_i^2, sum c_i phi_i / sum c_i, sum c_i n_i."""
    y, s = data.label, data.score
    _, code = np.unique(data.cluster, return_inverse=True)
    b = np.searchsorted(edges, s, side="right") - 1
    c = np.bincount(code[~y & (b == b0)], minlength=code.max() + 1)
    n = np.bincount(code[y], minlength=code.max() + 1)
    cell = np.floor(s * _CLEAR_G)
    phi = np.zeros(c.size)
    for i in np.flatnonzero(c):
        pos, neg = cell[(code == i) & y], cell[(code == i) & ~y]
        ordered = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
        phi[i] = ordered / (pos.size * neg.size)
    return {
        "squares": float((c * c).sum()),
        "phi": float((c * phi).sum() / c.sum()),
        "positives": float((c * n).sum()),
        "one": float(np.count_nonzero(c) == 1),
    }


def _read_clear_bin(fed: Federation) -> dict[str, Any] | None:
    """The analyst's attack on a clear site: round 1 (as the method runs it in the clear)
    at edges of its choosing: an empty-looking sliver at each end (one grid cell), a low
    bin [2^-12, sigmoid(-1.5)) meant to hold a few negatives, then 0.5 and 0.7 (chosen
    from the public model, before any reply: a refusal binds the site for its lifetime).
    It sees the site's clear histograms; if the slivers are empty and bin 1 holds
    negatives (at least 5, by the site's rule), its one round-2 request adds, in the used
    and all-rows histograms, K = 2^28 positives in bin 1 (each of the bin's used negatives
    gets ``row_i`` K / 2, every other at most the site's few hundred) and 2^22 negatives
    in the top sliver (above every positive: no pair; the size terms vanish), and in the
    all-rows histogram only 2^20 negatives in the bottom sliver (below every positive:
    each positive's ``col_i`` is 2^20). Every pooled count holds the site's own, the
    totals are the histograms' sums, ``n_clusters`` the true used clusters and
    ``total_used`` the crafted pairs (``_respects_argument_checks``); ``population`` and
    ``obuchowski`` 0. Then ``s11 (M N / I)^2 / (K/2)^2`` is sum c_i^2, ``s12 / I`` the
    negatives' mean ``phi_i``, and ``o11 sqrt(M N) / ((K/2) / N * 2^20 / M)`` sum c_i n_i
    (:func:`_clear_truth`). None when the analyst cannot run it (a refusal in round 1,
    or a sliver or bin 1 not as hoped).

    Since each clear site signs its round-1 release, the analyst sends along what it can:
    the site's own signed release (:func:`release_arguments`), then, refused, the crafted
    histograms in its place under the site's signature. NaN readings (and the refusals,
    under ``"refused"``) when the site refused both."""
    from fedroc.exceptions import DisclosureError
    from fedroc.methods.clustered._site import (
        FUNCTION_MOMENTS,
        FUNCTION_SUMMARY,
        release_arguments,
        release_vector,
    )

    g_cell = 1.0 / _CLEAR_G
    edges = np.array([0.0, g_cell, 1.0 / (1.0 + np.exp(1.5)), 0.5, 0.7, 1.0 - g_cell, 1.0])
    try:
        first = fed.call(FUNCTION_SUMMARY, edges=edges)["v"]
    except DisclosureError:
        return None
    keys = ("hist_pos_used", "hist_neg_used", "hist_pos_all", "hist_neg_all")
    g = {k: np.asarray(first[k], dtype=np.float64) for k in keys}
    if any(g[k][0] or g[k][-1] for k in keys) or g["hist_neg_used"][1] == 0:
        return None
    big_k, low, top = 2.0**28, 2.0**20, 2.0**22
    h = {k: g[k].copy() for k in keys}
    for k in ("hist_pos_used", "hist_pos_all"):
        h[k][1] += big_k
    for k in ("hist_neg_used", "hist_neg_all"):
        h[k][-1] += top
    h["hist_neg_all"][0] += low
    n_i = float(first["clusters_used"])
    big_m, big_n = float(h["hist_neg_used"].sum()), float(h["hist_pos_used"].sum())
    big_m_all, big_n_all = float(h["hist_neg_all"].sum()), float(h["hist_pos_all"].sum())
    args = {
        "edges": edges,
        **h,
        "n_clusters": n_i,
        "big_m": big_m,
        "big_n": big_n,
        "total_used": _pairs(h["hist_pos_used"], h["hist_neg_used"]),
        "population": 0.0,
        "personalized": 0.5,
        "big_m_all": big_m_all,
        "big_n_all": big_n_all,
        "obuchowski": 0.0,
    }
    assert _respects_argument_checks(args, obuchowski_pinned=False)
    honest = release_arguments({"v": first})
    crafted = {**first, **h, "clusters_used": n_i, "neg_used": big_m, "pos_used": big_n}
    crafted.update(neg_all=big_m_all, pos_all=big_n_all)
    relays = (honest, {**honest, "release_values": release_vector(crafted)[None, :]})
    refused = []
    for relay in relays:
        try:
            second = fed.call(FUNCTION_MOMENTS, **args, **relay)["v"]
            break
        except DisclosureError as exc:
            refused.append(exc)
    else:
        nan = float("nan")
        return {"negatives": nan, "squares": nan, "phi": nan, "positives": nan,
                "refused": refused}  # fmt: skip
    half = big_k / 2.0
    return {
        "negatives": float(g["hist_neg_used"][1]),
        "squares": float(second["s11"]) * (big_m * big_n / n_i) ** 2 / half**2,
        "phi": float(second["s12"]) / n_i,
        "positives": float(second["o11"])
        * np.sqrt(big_m_all * big_n_all)
        / (half / big_n_all * low / big_m_all),
    }


def test_a_crafted_clear_round_two_request_reads_nothing_finer_than_the_clear_bins():
    """C2 in the clear (``clear_histograms``, min_count 5): nothing was signed, and round 2
    checked the pooled histograms only against the site's own (each pooled count at least
    its own, the totals their sums) and the arguments alone. The analyst sees the site's
    clear histograms anyway (class counts per bin, at least 5 of a class in each non-empty
    bin) and its round-1 sums (``phi_sum`` over all clusters, ``mn_used``, the within-
    cluster pairs on the bins). What one crafted request adds (:func:`_read_clear_bin`):
    over the clusters with negatives in one bin of the analyst's choosing (here its lowest
    bin of negatives; the weights are monotone in the bins, so a step from below), with
    c_i the cluster's negatives in that bin, (a) sum c_i^2, how the bin's negatives split
    into clusters; (b) the bin's negatives' mean within-cluster AUC, sum c_i phi_i / sum
    c_i, which orders their clusters' rows on the 4096-cell grid, inside bins and in bins
    above; (c) sum c_i n_i, their clusters' positives wherever they lie. None of these is a
    function of the clear bins. When sum c_i^2 = (sum c_i)^2 the analyst knows one cluster
    holds all the bin's negatives, and (b) and (c) are that cluster's within-cluster AUC
    and number of positives.

    Measured on main 9ca5559 (seeds [3305, 0..19], one clear site each, 20 sites per
    allocation): with paper 3's allocation (30 clusters of 4 to 7 rows), 8 of 20 sites
    answered round 1 at these edges with the slivers empty (12 refused it: a bin with 1 to
    4 rows of a class; the analyst loses those sites for their lifetime), and the request
    read (a) and (c) exactly and (b) to 1e-3 in 8 of 8; no bin's negatives were one
    cluster's (0 of 8: the bin held 5 to 10 negatives of 2 or more clusters). With 15
    clusters of 10 to 14 rows: 8 of 20 answered (11 refused, 1 with no negative in bin 1),
    read in 8 of 8, and in 2 of 8 the bin's negatives were all one cluster's (8 and 5
    negatives; sum c_i^2 = (sum c_i)^2 told the analyst so): its within-cluster AUC (0.9167,
    0.875) and positives (2, 4) read exactly. The same on main 5914c42: read in 16 of 16,
    one cluster's in 2.

    Now each clear site signs its round-1 release (its histograms and sums, at its bound
    edges), the analyst relays the signed releases of the run's sites, and round 2 refuses
    pooled histograms or totals that are not their sum (``_check_releases``): both relays
    the analyst has (the site's own signed release beside the crafted histograms, or the
    crafted histograms under the site's signature) are refused, naming the argument, in
    16 of 16 sites that answered round 1 (measured on branch c2clear)."""
    read, single, ran, refused = 0, 0, 0, 0
    for sizes, n_clusters in (((2, 3, 4, 5), 30), ((8, 10, 12), 15)):
        for seed in range(20):
            fed, data = _clear_site(seed, sizes, n_clusters)
            got = _read_clear_bin(fed)
            if got is None:
                continue
            ran += 1
            edges = np.array(
                [0.0, 1 / _CLEAR_G, 1 / (1 + np.exp(1.5)), 0.5, 0.7, 1 - 1 / _CLEAR_G, 1.0]
            )
            want = _clear_truth(data, edges, 1)
            if "refused" in got:  # nothing read: the site named the argument it refused
                refused += 1
                first, second = (str(exc) for exc in got["refused"])
                assert "site 'v' refuses" in first and "'hist_pos_used' is not the sum" in first
                assert "'release_signatures' do not carry the signature of ['v']" in second
                continue
            hit = (
                round(got["squares"]) == want["squares"]
                and abs(got["phi"] - want["phi"]) < 1e-3
                and round(got["positives"]) == want["positives"]
            )
            read += hit
            # One cluster's, and the analyst knows it: sum c_i^2 is (sum c_i)^2.
            single += hit and round(got["squares"]) == got["negatives"] ** 2 == want["squares"]
    assert ran > 0
    assert (read, single) == (0, 0), f"a clear bin read in {read} of {ran}, one cluster in {single}"
    assert refused == ran


def _clear_pair(seed: int = 3306) -> list[Site]:
    """Two sites of 20 clusters whose operators allow clustered histograms in the clear."""
    from fedroc.methods.clustered.models import sample_allocation, sample_binormal
    from fedroc.privacy import DisclosurePolicy

    rng = np.random.default_rng(seed)
    sites = []
    for name in ("a", "b"):
        m, n = sample_allocation(20, 0.4, rng=rng)
        smp = sample_binormal(m, n, delta=0.9, rho=0.5, rng=rng)
        data = SiteData.from_arrays(smp.y_true, 1.0 / (1.0 + np.exp(-smp.y_score)), smp.cluster)
        policy = DisclosurePolicy(min_count=1, clear_histograms=True)
        sites.append(Site(name, data, policy=policy))
    return sites


def test_a_clear_round_two_refuses_its_kept_release_when_its_rows_changed():
    """The release a clear site keeps from round 1 (its state) describes the rows it had
    then. On Flower the state travels with the run while the site is rebuilt from its data
    file at each message: rows changed between the rounds (one row withdrawn) took the
    round-1 relay and answered round 2 on the new rows, which the round-1 totals and
    histograms do not hold. Refused as after a restart (its rows no longer give it)."""
    from fedroc.exceptions import DisclosureError
    from fedroc.methods.clustered import federated_clustered_auc, plain_sum
    from fedroc.methods.clustered._site import FUNCTION_MOMENTS

    sites = _clear_pair()
    fed = Federation.from_sites(sites)
    captured: dict[str, dict] = {}

    def recording(federation, function, args):
        captured[function] = dict(args)
        return plain_sum(federation, function, args)

    federated_clustered_auc(fed, n_bins=50, aggregate=recording)
    honest = captured[FUNCTION_MOMENTS]
    a = sites[0]
    data = a._data

    def rebuilt(rows: SiteData, ledger: BudgetLedger | None = None) -> Site:
        # The node's site rebuilt from its file, with its ledger and the run's state.
        ledger = a.ledger if ledger is None else ledger
        site = Site("a", rows, policy=a.policy, ledger=ledger, identity=a.identity)
        site.state = dict(a.state)
        return site

    # The same rows: the kept release is what they give, and the request is answered again.
    assert set(rebuilt(data).handle(FUNCTION_MOMENTS, honest)) >= {"s11", "s12", "s22"}
    keep = np.arange(data.n) != int(np.flatnonzero(~data.label)[0])
    fewer = SiteData.from_arrays(data.label[keep], data.score[keep], data.cluster[keep])
    # Under its ledger the rows binding refuses first, before the function reads the rows
    # (review 8); under a new ledger the kept release is refused by the function itself.
    with pytest.raises(DisclosureError, match="its rows changed since its first exact"):
        rebuilt(fewer).handle(FUNCTION_MOMENTS, honest)
    with pytest.raises(DisclosureError, match="holds under this site's name a release that is"):
        rebuilt(fewer, BudgetLedger()).handle(FUNCTION_MOMENTS, honest)


def test_a_clear_round_two_refuses_a_relay_that_is_not_the_sites_signed_releases():
    """C2 in the clear, the check itself: the honest run's round-2 request (captured from
    the method) passes, and so does the same request again; every change below is refused
    by site a, the message naming the site and the argument: no relay; a partner's release
    unsigned, altered, or signed at other edges; two sites' signatures swapped; a's own
    release from a copy of a (same key, same edges) that holds one row fewer; a relay of
    b alone or of a alone against pooled histograms of both; and any scalar (n_clusters,
    total_used, population, personalized, obuchowski) that is not what the signed releases
    give. The analyst learns nothing from a refusal that it does not know (every check
    reads the arguments, the roster and what the site releases in the clear)."""
    from fedroc.exceptions import DisclosureError, InputError
    from fedroc.methods.clustered import federated_clustered_auc, plain_sum
    from fedroc.methods.clustered._site import (
        FUNCTION_MOMENTS,
        FUNCTION_SUMMARY,
        release_arguments,
        release_vector,
        score_bin_edges,
    )

    sites = _clear_pair()
    fed = Federation.from_sites(sites)
    captured: dict[str, dict] = {}

    def recording(federation, function, args):
        captured[function] = dict(args)
        return plain_sum(federation, function, args)

    federated_clustered_auc(fed, n_bins=50, aggregate=recording)
    honest = captured[FUNCTION_MOMENTS]
    edges = honest["edges"]
    first = fed.call(FUNCTION_SUMMARY, edges=edges)
    n_bins = edges.size - 1

    def refused(argument: str, what: str, **change) -> None:
        request = {**honest, **change}
        for key in [k for k, v in change.items() if v is None]:
            del request[key]
        with pytest.raises(DisclosureError) as exc:
            fed.call(FUNCTION_MOMENTS, sites=["a"], **request)
        text = str(exc.value)
        assert exc.value.site == "a", text
        assert f"site 'a' refuses 'fedroc.clustered.moments': argument '{argument}' {what}" in text

    refused("release_sites", "is missing", release_sites=None, release_values=None,
            release_signatures=None)  # fmt: skip
    sigs = honest["release_signatures"]
    refused("release_signatures", "do not carry the signature of ['b']",
            release_signatures=sigs[:128] + "00" * 64)  # fmt: skip
    refused("release_signatures", "do not carry the signature of ['a', 'b']",
            release_signatures=sigs[128:] + sigs[:128])  # fmt: skip
    # b's release altered: one negative moved up a bin (the pooled histograms follow it).
    values = honest["release_values"].copy()
    k = n_bins + int(np.flatnonzero(values[1, n_bins : 2 * n_bins - 1])[0])
    values[1, k] -= 1.0
    values[1, k + 1] += 1.0
    moved = np.asarray(honest["hist_neg_used"]).copy()
    moved[k - n_bins] -= 1.0
    moved[k - n_bins + 1] += 1.0
    refused("release_signatures", "do not carry the signature of ['b']", release_values=values,
            hist_neg_used=moved)  # fmt: skip
    # Unsigned: the analyst's own helper refuses to relay it, naming the site.
    with pytest.raises(InputError, match="site 'b' did not sign its round-1 release"):
        release_arguments({"a": first["a"], "b": {**first["b"], "signature": b""}})

    # Replayed: b's release at other edges (a copy of b, its key, a fresh ledger).
    b_copy = Site("b", sites[1]._data, policy=sites[1].policy, identity=sites[1].identity)
    other = score_bin_edges(n_bins, (-0.5, 1.0))
    elsewhere = b_copy.handle(FUNCTION_SUMMARY, {"edges": other})
    values = honest["release_values"].copy()
    values[1] = release_vector(elsewhere)
    pooled = {k: values[:, i * n_bins : (i + 1) * n_bins].sum(0) for i, k in enumerate(
        ("hist_pos_used", "hist_neg_used", "hist_pos_all", "hist_neg_all"))}  # fmt: skip
    sig = bytes(elsewhere["signature"]).hex()
    refused("release_signatures", "do not carry the signature of ['b']", release_values=values,
            release_signatures=sigs[:128] + sig, **pooled)  # fmt: skip
    # a's own release from a copy of a that holds one row fewer (its key, the same edges):
    # signed by a's key, but not what a releases now.
    data = sites[0]._data
    keep = np.arange(data.n) != int(np.flatnonzero(~data.label)[0])
    fewer = SiteData.from_arrays(data.label[keep], data.score[keep], data.cluster[keep])
    a_copy = Site("a", fewer, policy=sites[0].policy, identity=sites[0].identity)
    stale = a_copy.handle(FUNCTION_SUMMARY, {"edges": edges})
    values = honest["release_values"].copy()
    values[0] = release_vector(stale)
    refused("release_values", "holds under this site's name a release that is not what",
            release_values=values, release_signatures=bytes(stale["signature"]).hex()
            + sigs[128:])  # fmt: skip
    # The same after a restart, when a keeps nothing of its release: it compares with what
    # its rows give now, and takes the honest relay.
    stale_sigs = bytes(stale["signature"]).hex() + sigs[128:]
    stale_request = {**honest, "release_values": values, "release_signatures": stale_sigs}
    with pytest.raises(DisclosureError, match="holds under this site's name a release that is"):
        Site("a", data, policy=sites[0].policy, identity=sites[0].identity).handle(
            FUNCTION_MOMENTS, stale_request
        )
    restarted = Site("a", data, policy=sites[0].policy, identity=sites[0].identity)
    assert set(restarted.handle(FUNCTION_MOMENTS, honest)) >= {"s11", "s12", "s22"}

    # Subsets against the pooled histograms of both: b alone, a alone.
    b_only = release_arguments({"b": first["b"]})
    refused("release_sites", "does not name this site", **b_only)
    refused("hist_pos_used", "is not the sum of the signed round-1 releases",
            **release_arguments({"a": first["a"]}))  # fmt: skip
    # Scalars the signed releases fix.
    for key, value, what in (
        ("n_clusters", honest["n_clusters"] + 1, "is not the sum of the signed releases'"),
        ("total_used", honest["total_used"] + 0.5, "is not the pooled used pairs"),
        ("population", 0.0, "is none of the population AUCs"),
        ("personalized", 0.5, "is not the releases' phi_sum over n_clusters"),
        ("obuchowski", 0.0, "is not the pooled AUC"),
    ):
        refused(key, what, **{key: value})
    # The honest request again: answered (the same analysis re-run).
    again = fed.call(FUNCTION_MOMENTS, **honest)
    assert set(again) == {"a", "b"}
