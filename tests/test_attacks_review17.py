"""Review 17: an adversarial reading of main ea248ae (2026-12-07), where reviews 1-16 did not look.

The analyst is curious and uses fedroc's public calls only (``Federation.call`` of the
registered site functions, the secure sum, the MPC job's bundle request); what it sends a
site (a mean, edges, a range) is untrusted. Each attack was run on ea248ae first.

Closed: H17-1 (``fedroc.centered_ss`` centred the scores on the analyst's ``mean`` and
refused an overflowing sum in its own words before the policy checked its counts: with
mean^2 just under float64's largest / (k + 1/2), the sum over the positives overflowed
exactly when they were more than k, a class count under q told at 20 of 20 sites of 1 to 4
positives -> 0 of 20: the site checks its counts first); H17-2 (as H16-3, through the
clustered round 2, ``fedroc.clustered.moments``, which binned the scores before any count
check: "scores lie outside the shared score range" at a site of 1 to 4 rows with a row
above 1, 10 of 10 -> 0 of 10); H17-3 (as H16-3, the histograms' range check: at a site of
1 to 4 rows the DP class counts over [0, 1], answered at no charge when refused, said
"scores lie outside" exactly when a row lay above 1, 10 of 10 -> 0 of 10: a site under q
rows clips its scores to the range, as a site whose rows changed does).

Tried and held (tests below):

- A declared ``score_range`` at a small site (5 to 8 rows): the same answers and refusals
  to every question about where its scores lie (``fedroc.is_probability``, Brier,
  calibration, the sensitivity heuristic, ``rocglm.scale``, DP class counts over [0, 1]
  and over the declared range) whether its rows lie in [0, 1] or one lies at 5.
- ROC-GLM's levels pre-check at ``rocglm.noisy_scores`` (74acd31) reads the ledger only:
  the same refusal at a site held to levels whether its scores lie on them or not, and
  no budget spent.
- MPC co-owners (H16-1): the set is bound as a set (another order of the same owners
  runs), and a job over a superset is refused as a subset is.
"""

from __future__ import annotations

import numpy as np
import pytest

import fedroc.apps.application  # noqa: F401  (registers every site function)
from fedroc.data import SiteData
from fedroc.exceptions import FedrocError
from fedroc.federation import Federation
from fedroc.federation.site import Site
from tests._refusals import lone_small_site, refusal, small_site_secure_refusals

TRIALS = 20
LARGEST = float(np.finfo(np.float64).max)


# -- H17-1. an overflow at the analyst's mean counts the rows of a class ----------------------


def _positives_told(seed: int) -> tuple[int, int, set[str]]:
    """A site of 200 rows and 1 to 4 positives (q = 5, so its class counts are refused).

    The analyst asks ``fedroc.centered_ss`` of the positives' scores at means m_k with
    m_k^2 = LARGEST / (k + 1/2), k = 1..4: the sum of the squares overflows exactly when
    the site holds more than k positives. Returns the site's positives, the analyst's
    guess (1 + the overflows) and the refusals' words.
    """
    rng = np.random.default_rng([1701, seed])
    positives = 1 + seed % 4
    y = np.zeros(200, dtype=bool)
    y[rng.choice(200, positives, replace=False)] = True
    fed = Federation.from_sites([Site("v", SiteData.from_arrays(y, rng.random(200)))])
    means = [float(np.sqrt(LARGEST / (k + 0.5))) for k in range(1, 5)]
    said = [
        refusal(fed, "fedroc.centered_ss", column="score", subset="positive", mean=m) for m in means
    ]
    return positives, 1 + sum("overflows" in s for s in said), set(said)


def test_an_overflow_at_the_analysts_mean_does_not_count_a_class_under_q():
    """H17-1. ``fedroc.centered_ss`` takes the mean from the analyst and refused an
    overflowing sum of squares ("overflows float64") before the policy checked the class
    counts the sum declares: four means gave the count of positives at a site of 1 to 4,
    which ``fedroc.class_counts`` refuses. On ea248ae: 20 of 20 sites. Now the site checks
    its counts first, and every such site reads the policy's one refusal (0 of 20; the
    constant guess 1 is right at the 5 sites of one positive)."""
    results = [_positives_told(seed) for seed in range(TRIALS)]
    right = sum(guess == n for n, guess, _ in results)
    told = sum(guess == n and n > 1 for n, guess, _ in results)  # beyond the guess 1
    words = set().union(*(said for _, _, said in results))
    assert told == 0, f"the positives right at {right} of {TRIALS} sites ({told} beyond 1)"
    assert len(words) == 1 and "below the minimum of 5" in next(iter(words)), words


def test_a_sum_over_one_class_is_refused_in_the_words_of_the_class_counts():
    """(Review of main d235462.) A sum over one class declares its rows (that class's count)
    and the site's class counts; the policy names the first count under q, and "rows" came
    first: at a site of 8 rows (public, fedroc.info), where ``fedroc.class_counts`` refuses
    1 to 4 positives in one set of words, a sum over the negatives said "the rows count ...
    too few rows for this method" exactly when they were under q too, that is at 4
    positives (measured: 4 told from 1, 2 and 3). The class counts come first now: the
    same words as ``fedroc.class_counts``, whatever the count under q."""
    words = set()
    for positives in range(1, 5):
        y = np.zeros(8, dtype=bool)
        y[:positives] = True
        fed = Federation.from_sites([Site("v", SiteData.from_arrays(y, np.linspace(0, 1, 8)))])
        said = {refusal(fed, "fedroc.class_counts")}
        for function, extra in (("fedroc.sum", {}), ("fedroc.centered_ss", {"mean": 0.5})):
            for subset in ("positive", "negative"):
                said.add(refusal(fed, function, column="score", subset=subset, **extra))
        words |= {text.replace("fedroc.centered_ss", "F").replace("fedroc.sum", "F")
                  .replace("fedroc.class_counts", "F") for text in said}  # fmt: skip
    assert len(words) == 1 and "the positive count is below" in words.pop()


# -- H17-2. the clustered round 2 bins the scores of a site under q rows ----------------------


def _moments_args(bins: int = 4) -> dict:
    """A round-2 request over [0, 1] (its totals and histograms the analyst's own)."""
    ones = np.ones(bins)
    return {
        "edges": np.linspace(0, 1, bins + 1), "n_clusters": 10.0, "big_m": 10.0,
        "big_n": 10.0, "total_used": 10.0, "population": 0.5, "personalized": 0.5,
        "obuchowski": 0.5, "big_m_all": 10.0, "big_n_all": 10.0, "hist_pos_used": ones,
        "hist_neg_used": ones, "hist_pos_all": ones, "hist_neg_all": ones,
    }  # fmt: skip


def test_the_clustered_round_2_does_not_say_whether_a_small_sites_scores_lie_in_its_edges():
    """H17-2 (as H16-3, review 16, which closed it for round 1). A site of 1 to 4 rows beside
    two of 60 is asked the secure round 2 over [0, 1]: it binned its scores before any
    count check, and the secure sum's refusal carried "scores lie outside the shared score
    range" when one of its rows lay above 1, another site's refusal otherwise: 10 of 10
    sites with a row above 1 on ea248ae, never for the others. Now the site refuses under
    q rows first, in the policy's words: 0 of 10."""
    told, said = small_site_secure_refusals(
        "fedroc.clustered.moments", _moments_args(), 1702, TRIALS
    )
    assert told == 0, f"told {told} of {TRIALS // 2}: {said}"
    assert said[True] == said[False] and len(said[False]) == 1, said


# -- H17-3. the histograms' range check at a site under q rows --------------------------------


def _range_told(function: str, args: dict) -> tuple[int, int, dict[bool, set[str]]]:
    """``function`` over [0, 1] at 20 sites of 1 to 4 rows (q = 5), half with a row above 1."""
    said: dict[bool, set[str]] = {False: set(), True: set()}
    told = wrong = 0
    for seed in range(TRIALS):
        fed, wider = lone_small_site(1703, seed)
        words = refusal(fed, function, lo=0.0, hi=1.0, **args)
        said[wider].add("answered" if words == "answered" else words)
        told += wider and "outside" in words
        wrong += (not wider) and "outside" in words
    return told, wrong, said


@pytest.mark.parametrize(
    ("function", "args"),
    [
        ("fedroc.histogram.class_counts_local", {"epsilon": 1.0}),
        ("fedroc.histogram.tree_local", {"epsilon": 1.0, "branching": 2, "height": 2}),
    ],
)
def test_a_dp_histogram_at_a_site_under_q_rows_does_not_say_whether_its_scores_lie_in_range(
    function, args
):
    """H17-3 (as H16-3). The DP histograms answer a site of fewer than q rows (a DP release
    declares no count, A8-1) and refuse a score outside the range before their noise and
    charge: at 20 sites of 1 to 4 rows over [0, 1], "scores lie outside" exactly at the 10
    with a row above 1 (a site of one row: whether its score lies in [0, 1]), free of
    budget, on ea248ae; the Brier score and the calibration curve no longer say it there
    (H16-3). Now such a site clips its scores to the range, as a site whose rows changed
    does (R9-2), and answers: 0 of 10, every site answered."""
    told, wrong, said = _range_told(function, args)
    assert wrong == 0
    assert told == 0, f"told {told} of {TRIALS // 2}: {said}"
    assert said == {False: {"answered"}, True: {"answered"}}, said


# -- tried and held ----------------------------------------------------------------------------


def _declared_site_answers(seed: int, inside: bool) -> list[object]:
    """What a site of 5 to 8 rows declaring [-10, 10] says to the questions about where its
    scores lie, its rows in [0, 1] or one of them at 5: the refusals' words, and the
    answers' bits (``ok``, ``in_range``) or "answered" for the noisy ones."""
    from fedroc.privacy import DisclosurePolicy

    rng = np.random.default_rng([1704, seed])
    n = 5 + seed % 4
    y, s = rng.random(n) < 0.5, rng.random(n)
    if not inside:
        s[0] = 5.0
    policy = DisclosurePolicy(score_range=(-10.0, 10.0))
    fed = Federation.from_sites([Site("v", SiteData.from_arrays(y, s), policy=policy)])

    def bit(function: str, key: str, **args) -> object:
        try:
            return fed.call(function, **args)["v"][key]
        except FedrocError as exc:
            return str(exc)

    said: list[object] = [
        bit("fedroc.is_probability", "ok"),
        refusal(fed, "fedroc.brier"),
        refusal(fed, "fedroc.calibration", n_bins=10),
        refusal(fed, "rocglm.sensitivity"),
    ]
    for lo, hi in ((0.0, 1.0), (-10.0, 10.0), (-20.0, 20.0)):
        said.append(bit("rocglm.scale", "in_range", score_range=np.array([lo, hi])))
    for lo, hi in ((0.0, 1.0), (-10.0, 10.0)):
        said.append(refusal(fed, "fedroc.histogram.class_counts_local", lo=lo, hi=hi,
                             epsilon=1.0))  # fmt: skip
    return said


def test_held_a_small_declared_site_says_the_same_wherever_its_rows_lie():
    """A site of 5 to 8 rows (a class under q = 5 at most of them) that declares [-10, 10]:
    ``fedroc.is_probability``, the Brier score, the calibration curve, the sensitivity
    heuristic, ``rocglm.scale`` over three ranges (the first one narrower, refused) and DP
    class counts over [0, 1] (refused: the declared grid) and over the declared range say
    the same whether its rows lie in [0, 1] or one lies at 5 (20 sites each): what they
    tell is the declaration. (A declaration that did not bind the grid first, checked:
    DP class counts over [0, 1] were answered on rows in [0, 1] and refused otherwise.)"""
    for seed in range(TRIALS):
        inside = _declared_site_answers(seed, inside=True)
        outside = _declared_site_answers(seed, inside=False)
        assert inside == outside, (seed, inside, outside)


def test_held_the_rocglm_levels_pre_check_reads_no_row():
    """``rocglm.noisy_scores`` refuses, before its release, a grid-rule run without the levels
    a site is held to (74acd31). Its refusal reads the ledger only: a site whose scores lie
    on the levels and one with a score off them, each held to the levels by one
    ``rocglm.scale`` question, refuse in the same words, and neither spends budget."""
    levels = np.round(np.arange(0.0, 1.0, 0.1), 1)
    said = []
    for off in (False, True):
        rng = np.random.default_rng([1705, int(off)])
        y, s = rng.random(200) < 0.4, rng.choice(levels, 200)
        if off:
            s[0] = 0.95
        site = Site("v", SiteData.from_arrays(y, s))
        fed = Federation.from_sites([site])
        answer = fed.call("rocglm.scale", score_range=np.array([0.0, 1.0]), score_levels=levels)
        assert answer["v"]["on_levels"] is (not off)
        said.append(refusal(fed, "rocglm.noisy_scores", epsilon=1.0, delta=1e-6,
                             sensitivity=0.1, thresholds="grid"))  # fmt: skip
        left = fed.call("fedroc.epsilon_left")["v"]["epsilon_left"]
        assert left == site.policy.epsilon_limit, left  # nothing spent
    assert said[0] == said[1] and "levels" in said[0], said


def test_held_mpc_co_owners_are_bound_as_a_set():
    """H16-1's binding: owners allowing three jobs run a second job over the same co-owners
    in another order (the same set), and refuse a job over a superset as over a subset."""
    from fedroc.methods.mpc import request_bundles
    from fedroc.mpc import JobTerms
    from fedroc.privacy import DisclosurePolicy

    rng = np.random.default_rng(1706)
    policy = DisclosurePolicy(mpc_max_jobs=3)
    sites = [
        Site(n, SiteData.from_arrays(rng.random(40) < 0.4, rng.random(40)), policy=policy)
        for n in "ABCD"
    ]

    def ask(owners: str) -> str:
        terms = JobTerms.create(list(owners), (bytes(range(32)), bytes(range(1, 33))))
        fed = Federation.from_sites([s for s in sites if s.name in owners])
        try:
            request_bundles(fed, terms)
        except FedrocError as exc:
            return str(exc)
        return "answered"

    assert ask("ABC") == "answered"
    assert ask("CBA") == "answered"
    assert "co-owners ['A', 'B', 'C']" in ask("ABCD")
    assert "co-owners ['A', 'B', 'C']" in ask("AB")
