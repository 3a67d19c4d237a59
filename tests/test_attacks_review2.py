"""Attack review of main fde76b1: combinations and less-reviewed paths.

Each test plays the curious analyst with fedroc's public calls only (``Federation.call``,
``secure_sum``, the methods) and tries to learn what a site protects by combining
releases that each pass their own checks. A test asserts that the attack fails and says
what it recovered on main fde76b1, where it succeeded.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedroc.data import SiteData
from fedroc.exceptions import DisclosureError, FedrocError
from fedroc.federation import Federation, Site
from tests.test_attacks_review import _pool  # setup arguments that pool releases

LEAVES = 4096  # the default grid every exact secure count of a site is held to (R31)


# -- A1. ROC-GLM tables at a steered cutoff, inside a leaf of the bound grid ---------------------
@pytest.fixture
def replayed_site_noise(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Fresh noise at every release, as in production, drawn from a stream per site that
    restarts when the test clears the returned counters: two federations that differ in
    one site's rows and see the same calls get the same noise, so that what the analyst
    learns from them can be compared. Nothing reaches the product (the analyst sends no
    seed)."""
    from fedroc.federation.site import SiteContext

    calls: dict[str, int] = {}

    def noise_rng(self: SiteContext, stream: str) -> np.random.Generator:
        k = calls.get(self.site, 0)
        calls[self.site] = k + 1
        words = [int(b) for b in self.site.encode()]
        return np.random.default_rng(np.random.SeedSequence([2027, k, *words]))

    monkeypatch.setattr(SiteContext, "noise_rng", noise_rng)
    return calls


def _bulk(rng: np.random.Generator, n: int, leaf: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of both classes in [0.2, 0.69], none in ``leaf`` of the 4096-leaf grid."""
    y = rng.random(n) < 0.4
    s = np.clip(rng.normal(0.4 + 0.15 * y, 0.08), 0.2, 0.69)
    keep = np.floor(s * LEAVES).astype(int) != leaf
    return y[keep], s[keep]


def _leaf_pair(rng: np.random.Generator) -> tuple[list[dict], int, float]:
    """Three sites' rows; the victim holds two rows in one leaf k of the 4096-leaf grid, in
    the bulk of the scores: one at a score the analyst knows, s (its model's output on a
    patient it knows), one near the leaf's top. Returns the rows of the two federations
    that differ only in which of the two is the positive, k and s."""
    k = int(rng.integers(int(0.35 * LEAVES), int(0.55 * LEAVES)))
    s, other = (k + 0.05) / LEAVES, (k + 0.95) / LEAVES
    bulk = {name: _bulk(rng, n, k) for name, n in (("victim", 120), ("o0", 400), ("o1", 400))}
    feds = []
    for label in (True, False):
        rows = dict(bulk)
        y, x = bulk["victim"]
        rows["victim"] = (np.r_[y, label, not label], np.r_[x, s, other])
        feds.append(rows)
    return feds, k, s


def _federation(rows: dict) -> Federation:
    return Federation.from_sites([Site(n, SiteData.from_arrays(*yx)) for n, yx in rows.items()])


def _release(fed: Federation, name: str, epsilon: float) -> dict:
    import fedroc.methods.rocglm  # noqa: F401  (its site functions)

    return fed.call(
        "rocglm.noisy_scores",
        sites=[name],
        epsilon=epsilon,
        delta=1e-9,
        sensitivity=0.01,  # the floor of the default policy
        calibration="analytic",
    )[name]


def _in_unit(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values)
    return v[(v >= 0.0) & (v <= 1.0)]


def _blank(fed: Federation, name: str) -> dict:
    """A release at epsilon 1e-6 (noise sd about 5e3): no noisy score in [0, 1]."""
    while True:
        rel = _release(fed, name, 1e-6)
        if not any(_in_unit(rel[c]).size for c in ("negative", "positive")):
            return rel


def _steered_cutoff(
    fed: Federation, pos_leaves: np.ndarray, lo: float, hi: float, limit: int
) -> tuple[str, dict, int] | None:
    """Ask the partners for cheap releases (epsilon 0.006 each) until one has a noisy
    negative in [lo, hi) and every other noisy negative in [0, 1] in a leaf the tree shows
    without positives (whose count of positives above it the tree then gives)."""
    for k in range(limit):
        name = ("o0", "o1")[k % 2]
        rel = _release(fed, name, 0.006)
        inside = _in_unit(rel["negative"])
        gap = (inside >= lo) & (inside < hi)
        rest = np.minimum((inside[~gap] * LEAVES).astype(int), LEAVES - 1)
        if gap.sum() == 1 and not pos_leaves[rest].any():
            return name, rel, k + 1
    return None


def _positives_above(fed: Federation, helper: tuple[str, dict]) -> tuple[int, np.ndarray] | None:
    """Set every member up on one pooled set (blank releases of the others and the helper's
    release) and sum their grid tables: ``sum_v10 * N0`` is the count, over every pooled
    negative, of the members' positives above it. Returns it with the pooled negatives
    (None when a site refused)."""
    from fedroc.methods.rocglm._site import from_fixed_point
    from fedroc.secagg import secure_sum

    name, rel = helper
    members = ["victim", "o0", "o1"]
    own = {n: (rel if n == name else _blank(fed, n)) for n in members}
    pooled = _pool([(n, own[n]) for n in members])
    session, digest = "steered", None
    try:
        for n in members:
            r = fed.call("rocglm.setup", sites=[n], session=session,
                         release=own[n]["release"], bootstrap=2, **pooled)[n]  # fmt: skip
            digest = r["setup"]
        table = secure_sum(fed, "rocglm.table", sites=members, frac_bits=0, session=session,
                           setup=digest)  # fmt: skip
    except (DisclosureError, FedrocError):
        return None
    neg = pooled["negative"]
    sum_v10 = float(from_fixed_point(table["v10_whole"], table["v10_frac"])[0])
    return round(sum_v10 * neg.size), neg


def _upper_row_is_positive(rows: dict, k: int, s: float) -> tuple[int | None, int]:
    """The attack on one federation: the exact secure tree of the default grid, a steered
    cutoff c in (s, s + 0.85 / 4096), one table. Returns the class of the leaf's row above
    c as the table minus the tree tells it (None when refused), and the releases asked."""
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA
    from fedroc.secagg import secure_sum

    fed = _federation(rows)
    tree = secure_sum(fed, INPUT_NAME, mode=MODE_SA, branching=2, height=12, lo=0.0, hi=1.0)
    pos, neg = np.asarray(tree["pos"]), np.asarray(tree["neg"])
    assert (pos[k], neg[k]) == (1, 1)  # the tree alone does not tell which row is positive
    hi = s + 0.85 / LEAVES
    found = _steered_cutoff(fed, pos > 0, s, hi, limit=4000)
    assert found is not None
    name, rel, asked = found
    got = _positives_above(fed, (name, rel))
    if got is None:
        return None, asked
    total, pooled = got
    above_leaf = np.r_[np.cumsum(pos[::-1])[::-1][1:], 0]  # positives in the higher leaves
    known = 0
    for v in pooled:
        if v < 0.0:
            known += int(pos.sum())
        elif v <= 1.0 and not s <= v < hi:
            known += int(above_leaf[min(int(v * LEAVES), LEAVES - 1)])
    return total - known - int(above_leaf[k]), asked


def test_rocglm_tables_at_a_steered_cutoff_do_not_split_a_leaf_of_the_bound_grid(
    replayed_site_noise,
):
    """A1 (the R15/R16 remainder the docs left open, measured): each site answers the
    exact secure tree once, on one grid (4096 leaves by default, R31); a ROC-GLM grid table
    is an exact secure count of the members' positives above the pooled noisy negatives,
    which the analyst steers with cheap releases (no epsilon floor), once per setup and as
    often as it sets up a new release. Two federations differ only in which of two rows in
    one leaf, in the bulk of the scores, is the positive; the tree shows that leaf as one
    positive and one negative in both. One table whose only informative pooled negative lies
    just above the known score s (every other pooled negative in [0, 1] in a leaf the tree
    shows without positives) counts the positives above it; minus the tree's positives in
    the higher leaves, it is the class of the leaf's other row, hence of the row at s.
    Measured on main fde76b1: the two federations told apart in 3 of 3 pairs (the row at s
    read positive in the one where it is, negative in the other), after 296, 356 and 126
    partner releases at epsilon 0.006 (0.4 to 1.1 of each partner's budget of 10; a fourth
    seed ran out of both budgets).

    Now a site computes its grid table on its scores rounded to one value per cell of its
    one grid: the two federations give the same table, whose difference from the tree is
    the same number in both."""
    rng = np.random.default_rng(2027)
    told_apart = 0
    for _ in range(3):
        feds, k, s = _leaf_pair(rng)
        seen = []
        for rows in feds:
            replayed_site_noise.clear()  # both federations meet the same noise
            seen.append(_upper_row_is_positive(rows, k, s))
        (a, asked_a), (b, asked_b) = seen
        assert asked_a == asked_b  # the partners' releases were the same
        assert a is not None and b is not None  # the tables are answered
        told_apart += a != b
    assert told_apart == 0, f"two federations one label apart told apart in {told_apart} of 3"


def test_a_rocglm_setup_outside_the_bound_grid_is_refused_not_collapsed():
    """The grid tables round a site's scores to its bound grid (A1). A site whose grid was
    bound over another range (here a refused histogram over [0, 0.5]) would round every
    score above it into the last cell and fit nothing: its setup says so instead, and a
    site whose grid covers its scores answers."""
    import fedroc.methods.rocglm  # noqa: F401  (its site functions)
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA
    from fedroc.secagg import secure_sum

    rng = np.random.default_rng(5)
    rows = {name: _bulk(rng, 200, -1) for name in ("a", "b", "c")}
    fed = _federation(rows)
    with pytest.raises(FedrocError, match="outside the public score range"):
        secure_sum(fed, INPUT_NAME, mode=MODE_SA, branching=2, height=4, lo=0.0, hi=0.5)
    rel = _release(fed, "a", 1.0)
    with pytest.raises(FedrocError, match=r"outside the range \[0, 0.5\] of its one grid"):
        fed.call("rocglm.setup", sites=["a"], session="x", release=rel["release"],
                 bootstrap=2, **_pool([("a", rel)]))  # fmt: skip
    fresh = _federation(rows)
    rel = _release(fresh, "a", 1.0)
    r = fresh.call("rocglm.setup", sites=["a"], session="x", release=rel["release"],
                   bootstrap=2, **_pool([("a", rel)]))["a"]  # fmt: skip
    assert r["n_rows"] == 28


# -- A2. a site's seeded noise, replayed at another scale ------------------------------------------
def _recovered(site: Site) -> tuple[int, int]:
    """Two releases of ``rocglm.noisy_scores`` at epsilon 1 and 1.001 (2.001 of the default
    budget of 10). With the same standard normal draws z behind both, ``y1 - y2 = (sd1 -
    sd2) z`` row by row (the sorted lists pair up: a rescaling this small reorders almost no
    rows), and ``y1 - sd1 z`` is the row's exact score. Returns the rows whose score this
    gives to 1e-9, and the site's rows."""
    import fedroc.methods.rocglm  # noqa: F401  (its site functions)

    fed = Federation.from_sites([site])
    args = {"delta": 1e-6, "sensitivity": 0.01, "calibration": "analytic"}
    r1 = fed.call("rocglm.noisy_scores", epsilon=1.0, **args)[site.name]
    r2 = fed.call("rocglm.noisy_scores", epsilon=1.001, **args)[site.name]
    sd1, sd2 = float(r1["noise_sd"]), float(r2["noise_sd"])
    data, hit = site._data, 0
    for cls, truth in (("negative", data.score[~data.label]), ("positive", data.score[data.label])):
        y1, y2 = np.asarray(r1[cls]), np.asarray(r2[cls])
        z = (y1 - y2) / (sd1 - sd2)
        guess = y1 - sd1 * z
        hit += int(np.sum(np.min(np.abs(guess[:, None] - truth[None, :]), axis=1) < 1e-9))
    return hit, data.n


def test_a_seeded_sites_releases_at_two_scales_do_not_give_its_scores():
    """A2: a site configured with a ``noise_seed`` (simulations and tests; a node config's
    ``noise-seed`` is said in its log, and every release says ``sampler = "site-seed"``, so
    the analyst sees it) drew every release of a stream from the same seeded generator:
    the same standard normal draws, scaled by each release's noise sd. Two releases at
    epsilon 1 and 1.001 then difference to the draws and to every score, by class. Measured
    on main fde76b1: 599 of 605 rows' scores to 1e-9 (5 seeded sites of 121 rows; the other
    6 swapped ranks between the two releases), for 2.001 of the budget of 10. Now a seeded
    site's noise stream also counts the DP releases its ledger holds: a run is reproduced
    from the seed, call for call, and no two releases share their noise."""
    rng = np.random.default_rng(31)
    recovered = total = 0
    for seed in range(5):
        y, s = _bulk(rng, 121, -1)
        hit, n = _recovered(Site("seeded", SiteData.from_arrays(y, s), noise_seed=seed))
        recovered, total = recovered + hit, total + n
    assert recovered <= total // 100, f"{recovered} of {total} scores recovered exactly"


def test_a_refused_rocglm_setup_binds_the_grid_over_its_range():
    """A setup whose score range misses the site's scores (a mistyped ``--score-range``) is
    refused and spends its release. It used to bind nothing, so that a mistyped range would
    not bind the site's grid for good; but its refusal is a clear answer about where the
    scores lie ("some score outside [0, 0.5]"), and an unbound answer "outside" named the site
    of a pooled lone row in a secure tree over a wider range (H14-2 the other way,
    tests/test_attacks_review14.py: 20 of 20). Every such answer now binds the grid over the
    range asked, whatever the answer: the refusal says so and names the bound range, and a
    histogram over the scores' range [0, 1] is refused after it (naming the bound range and
    how to proceed), where it was answered before. The other sites, which answered nothing,
    are unbound."""
    import fedroc.methods.rocglm  # noqa: F401  (its site functions)
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA
    from fedroc.secagg import secure_sum

    rng = np.random.default_rng(6)
    fed = _federation({name: _bulk(rng, 200, -1) for name in ("a", "b", "c")})
    rel = _release(fed, "a", 1.0)
    with pytest.raises(FedrocError, match=r"outside the score range \[0, 0.5\].*grid of exact "
                       r"counts is bound to \[0, 0.5\]"):  # fmt: skip
        fed.call("rocglm.setup", sites=["a"], session="x", release=rel["release"],
                 bootstrap=2, score_range=[0.0, 0.5], **_pool([("a", rel)]))  # fmt: skip
    # Refused by site "a" alone: the others answered nothing and are unbound.
    words = r"by 1 site\(s\): site 'a'.*bound to \[0, 0.5\] by.*--score-range=0,0.5.*new ledger"
    with pytest.raises(FedrocError, match=words):
        secure_sum(fed, INPUT_NAME, mode=MODE_SA, branching=2, height=4, lo=0.0, hi=1.0)
