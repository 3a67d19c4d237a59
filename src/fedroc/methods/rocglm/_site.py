"""Site functions of the distributed ROC-GLM (paper 1, section 4) and of dsBinVal.

Each function runs at a site on its own rows and returns noisy values (A2) or sums over
at least q rows (A1); the site's disclosure policy checks the declared counts and the DP
events, and its audit log records every reply.

What the site decides, not the analyst (the analyst is untrusted):

- the noise of its one release of noisy scores (:data:`FN_NOISY`), drawn from its own
  randomness; it remembers what it released under a random release id;
- whether a setup (:data:`FN_SETUP`) belongs to that release: the pooled noisy negatives
  and positives must be releases of noisy scores and nothing else, its own under its name
  and each other part signed by the site that released it (:func:`release_message`, under
  the key its operator's roster holds for that site), so that the analyst cannot pad them
  with values of its choosing; and each release serves one setup only (the release is
  spent before the site reads its rows, so that a refusal about its scores, which names no
  count, is one answer per release);
- the thresholds: the site builds the ROC-GLM table itself, from the pooled noisy
  survivor function and the public threshold rule (the paper's equidistant grid of at most
  :data:`MAX_THRESHOLDS` false-positive rates). No cutoff, no threshold vector and no noise
  level is accepted from the analyst;
- the bias correction: it deconvolves the pooled noisy negatives itself
  (:mod:`._deconvolution`, with the noise sd of its own release and the public score
  range), so one setup holds exactly two fits, the paper's and the corrected one;
- how its counts leave: on the grid rule its tables and placement moments leave it only
  summed with the other sites' (:data:`FN_TABLE`, an input of secure aggregation, once per
  setup, for members that all set up on the same pooled scores), and it refuses
  :data:`FN_FISHER` and :data:`FN_PLACEMENT_SS` for such a session: per site, 20 Fisher
  replies pinned its exact counts at the grid's cutoffs, which the analyst knows;
- how often it answers: at most :data:`MAX_FISHER_CALLS` Fisher-scoring calls and one
  variance call per setup ("positives" rule); about at most :data:`MAX_SCALES` score
  scales (ranges, levels) in its lifetime, asked by :data:`FN_SCALE` or checked by a setup;
- the reference code's threshold rule (each positive's score as a threshold), which
  discloses the positives' scores through the Fisher information, only when its policy
  opts in to :data:`OPT_IN_POSITIVES`;
- which thresholds its confusion matrices may be cut at (:data:`FN_CONFUSION`): every
  interval between two thresholds it has released must hold at least q rows of each class,
  so that no difference of two matrices isolates fewer rows; at most
  :data:`MAX_CONFUSION_THRESHOLDS` distinct thresholds, refusals included, in its lifetime;
- the floor of its noise: no release at a sensitivity below its policy's
  ``rocglm_min_sensitivity``; and one ``n_breaks`` for its sensitivity heuristic.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets

import numpy as np
from scipy import special

from fedroc.exceptions import DisclosureError, InputError
from fedroc.federation.basic import (
    CONFUSION_THRESHOLD_KEY,
    SCORE_LEVELS_KEY,
    apart_from_clear_calibration,
    apart_from_local_trees,
    bind_exact_counts,
    bind_probability_grid,
    bound_grid,
    bound_grid_or_none,
    clear_calibration_bins,
    clustered_clear_edges,
    confusion_thresholds,
    cuts_apart,
    declared_range,
    grid_range_text,
    grid_representatives,
    in_grid_range,
    levels_fill_grid,
    levels_hold_grid,
    levels_text,
    range_holds_grid,
)
from fedroc.federation.records import Record
from fedroc.federation.roster import SIGNATURE_BYTES, split_signatures
from fedroc.federation.schema import (
    ArgumentRefused,
    Bound,
    Bytes,
    Choice,
    Float,
    FloatArray,
    Int,
    IntArray,
    Names,
    Text,
)
from fedroc.federation.site import Reply, SiteContext, site_function
from fedroc.methods.rocglm._core import (
    DEFAULT_N_THRESHOLDS,
    GroupedTable,
    check_rule,
    delong_placements,
    grouped_from_placements,
    positive_thresholds,
    score_sensitivity,
    threshold_grid,
)
from fedroc.methods.rocglm._deconvolution import (
    DEFAULT_RESAMPLES,
    MAX_RESAMPLES,
    bagged,
    check_levels,
)
from fedroc.methods.rocglm._probit import probit_parts
from fedroc.privacy import gaussian_mechanism, keys

__all__ = [
    "FITS",
    "FN_CONFUSION",
    "FN_FISHER",
    "FN_NOISY",
    "FN_PLACEMENT_SS",
    "FN_SCALE",
    "FN_SENSITIVITY",
    "FN_SETUP",
    "FN_TABLE",
    "MAX_CONFUSION_THRESHOLDS",
    "MAX_FISHER_CALLS",
    "MAX_SCALES",
    "MAX_THRESHOLDS",
    "MAX_UNDECLARED_LEVELS",
    "OPT_IN_POSITIVES",
    "fixed_point",
    "from_fixed_point",
    "release_message",
]

FN_SENSITIVITY = "rocglm.sensitivity"
FN_NOISY = "rocglm.noisy_scores"
FN_SETUP = "rocglm.setup"
FN_FISHER = "rocglm.fisher"
FN_PLACEMENT_SS = "rocglm.placement_ss"
FN_CONFUSION = "rocglm.confusion"
FN_SCALE = "rocglm.scale"
FN_TABLE = "rocglm.table"
# A site with at most this many distinct scores is on a rating scale: the deconvolution
# needs that scale declared (score_levels) to count ties one half.
MAX_UNDECLARED_LEVELS = 20
# Distinct scales (ranges, level sets) a site answers FN_SCALE about over its lifetime: each
# answer is one bit about its extreme scores, and unlimited answers bisect them.
MAX_SCALES = 4
# Distinct thresholds a site answers FN_CONFUSION at (released or refused) in its lifetime:
# unlimited, its refusals would bisect the q-th largest and smallest score of each class.
MAX_CONFUSION_THRESHOLDS = 10

# The two fits of a setup: the paper's (placements in the noisy negatives) and the
# corrected one (placements in their deconvolved distribution).
FITS = ("paper", "deconvolved")
MAX_THRESHOLDS = 64
# R glm's 25 iterations, their first evaluation, and room for step halvings.
MAX_FISHER_CALLS = 60
OPT_IN_POSITIVES = "rocglm.positives_rule"

_RELEASE = "rocglm:release:"
_SESSION_KEY = "rocglm:session:"
_CONFUSION_KEY = CONFUSION_THRESHOLD_KEY
_CONFUSION_ASKED = keys.CONFUSION_ASKED
_SCALE_KEY = keys.ROCGLM_SCALE
_HEX = "0123456789abcdef"
_SESSION = {"session": Text(64)}
_MAX_VALUES = 1 << 26
# Sites whose releases one setup may pool (the parts of the pooled noisy scores).
_MAX_PARTS = 1024
_RELEASE_DOMAIN = b"fedroc.rocglm.noisy_scores/1\x00"
_SETUP_DOMAIN = b"fedroc.rocglm.setup/1\x00"
# The placement sums of FN_TABLE go through secure aggregation as two integers each, the
# whole part and the fraction in units of 2^-50: 2^11 sites fit the 64-bit ring, and the
# sums keep about float64's precision (the ring's own fixed point keeps 2^-32 at most).
_FRACTION_BITS = 50


def fixed_point(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split non-negative floats into whole parts and fractions in units of 2^-50 (int64)."""
    v = np.asarray(values, np.float64)
    whole = np.floor(v)
    return whole.astype(np.int64), np.rint((v - whole) * 2.0**_FRACTION_BITS).astype(np.int64)


def from_fixed_point(whole: object, fraction: object) -> np.ndarray:
    """Join summed whole parts and fractions of :func:`fixed_point` into floats."""
    w = np.asarray(whole, np.int64).astype(np.float64)
    return w + np.asarray(fraction, np.int64).astype(np.float64) * 2.0**-_FRACTION_BITS


def release_message(site: str, negative: np.ndarray, positive: np.ndarray) -> bytes:
    """Return what a site signs when it releases noisy scores: its name and the values.

    Parameters
    ----------
    site : str
        The releasing site.
    negative, positive : ndarray of float64
        Its noisy scores of each class (sorted here, so that the order does not matter).

    Returns
    -------
    bytes
        A domain tag, the site's name and the SHA-256 of each class's sorted values.
    """
    digests = [
        hashlib.sha256(np.sort(np.asarray(v, "<f8")).tobytes()).digest()
        for v in (negative, positive)
    ]
    return _RELEASE_DOMAIN + site.encode() + b"\x00" + b"".join(digests)


def _session(ctx: SiteContext, args: Record) -> tuple[str, Record]:
    key = _SESSION_KEY + str(args["session"])
    state = ctx.state.get(key)
    if state is None:
        raise InputError(
            f"site {ctx.site!r} has no ROC-GLM session {args['session']!r} (a session ends "
            f"with {FN_TABLE!r} or {FN_PLACEMENT_SS!r}); call {FN_SETUP!r} first"
        )
    return key, state


def _outside(ctx: SiteContext, lo: float, hi: float) -> int:
    s = ctx.data.score
    return int(np.count_nonzero((s < lo) | (s > hi)))


@site_function(FN_SENSITIVITY, schema={"n_breaks": Int(2, 10_000, default=None, bind=True)})
def _sensitivity(ctx: SiteContext, args: Record) -> Reply:
    """Heuristic l2-sensitivity of this site's scores (see ``score_sensitivity``).

    Only for probability scores: on an unbounded scale a difference of two scores says
    nothing about how far one row can move the score, and the analyst must bring a bound.
    The answer is never below the site's ``rocglm_min_sensitivity``, the floor its noise
    release accepts. Each answer is an exact difference of two rows' scores, so the site
    answers one ``n_breaks`` in its lifetime (declared ``bind``; its default, None for a third
    of its rows, counts as a value). It binds with the first answer: no refusal after
    reading the rows depends on ``n_breaks`` (at least two cells are occupied for any
    ``n_breaks >= 2``), so a refused request cannot be used to search for one. Its refusal of
    scores outside [0, 1] says where they lie: the site's grid is bound to [0, 1] first
    (:func:`~fedroc.federation.basic.bind_probability_grid`), and the function is refused
    where the grid is wider.
    """
    # Its rows' count first, before the refusals below read the rows: a site under q rows
    # refused with "needs at least two scores" at one row and "found one occupied cell" at
    # 2 to 4 (review 16, H16-3: a count under q told, 20 of 20 sites), where the policy's
    # refusal names no count.
    ctx.policy.check_release(site=ctx.site, function=FN_SENSITIVITY, kind="aggregate",
                             counts={"rows": ctx.data.n}, dp=(), ledger=ctx.ledger,
                             n_rows=ctx.data.n)  # fmt: skip
    n_breaks = args["n_breaks"]
    breaks = max(1, ctx.data.n // 3) if n_breaks is None else int(n_breaks)
    # Answered or refused, it says whether every score lies in [0, 1]: the grid is held to
    # [0, 1] first, as for fedroc.is_probability (H15-2).
    bind_probability_grid(
        ctx,
        FN_SENSITIVITY,
        "; the sensitivity heuristic is only defined for probabilities: pass sensitivity= "
        "(--sensitivity: a bound on how much one row can change the score, on its own scale)",
    )
    # A declared range inside [0, 1] (else refused above) holds every score: no row read.
    if declared_range(ctx) is None and _outside(ctx, 0.0, 1.0):
        raise InputError(
            f"scores of site {ctx.site!r} lie outside [0, 1]: the sensitivity "
            "heuristic is only defined for probabilities. Pass sensitivity= (--sensitivity: "
            "a bound on how much one row can change the score, on its own scale) and "
            "score_range=(lo, hi) (--score-range LO,HI: a public range that holds every "
            "site's scores)"
        )
    value, distance = score_sensitivity(ctx.data.score, breaks)
    value = max(value, float(ctx.policy.rocglm_min_sensitivity))
    return Reply({"sensitivity": value, "cell_distance": distance}, counts={"rows": ctx.data.n})


def _bind_scale(
    ctx: SiteContext, function: str, args: Record
) -> tuple[float, float, np.ndarray | None]:
    """Count the scale of ``args`` against :data:`MAX_SCALES`; return its range and levels.

    The scale is ``score_range`` (default [0, 1]) and ``score_levels``, counted before the
    site reads its rows. Each distinct scale answered is a bit about the extreme scores
    (whether they lie inside, on the levels): by :data:`FN_SCALE`, and by :data:`FN_SETUP`,
    which refuses a scale that misses a score. The site answers at most MAX_SCALES of them
    in its lifetime, both functions together (bound in its ledger, which survives
    restarts). The key holds everything the answer depends on: the range as well as the
    levels (with the levels alone, one key answered in_range for any number of ranges).

    Every answer about where the scores lie binds the site's grid of exact counts, before
    the site reads its rows and whatever the answer: the default grid over the range when
    none is bound (:func:`~fedroc.federation.basic.bound_grid`), and the levels, one set
    for the site's lifetime, to which its exact counts are then held
    (:func:`~fedroc.federation.basic.levels_hold_grid`). Unbound, an answer "outside" and
    a secure tree over a wider range gave a pooled lone row's site and class (H14-2 the
    other way), and the partners' "on the levels" the victim's rows off them (H15-1).
    """
    score_range = args["score_range"]
    lo, hi = (0.0, 1.0) if score_range is None else (float(score_range[0]), float(score_range[1]))
    levels = check_levels(args["score_levels"])
    scale: list[float] | dict[str, list[float]] = [lo, hi]
    key = keys.ROCGLM_SCALE_RANGE + repr(scale)
    if levels is not None:
        scale = {"range": [lo, hi], "levels": [float(v) for v in levels]}
        key = keys.ROCGLM_SCALE_RANGE_LEVELS + repr(scale["range"]) + repr(scale["levels"])
    # Held from the checks against the grid to its binding, so that no other process of the
    # site binds a grid or levels they do not hold in between.
    with ctx.ledger.transaction():
        # Only over a range that holds the site's grid, if one is bound (H14-2): an answer
        # over a narrower one said which cells of it the site adds no row to, and the pooled
        # secure cells there were the other sites' own.
        range_holds_grid(ctx, function, lo, hi)
        if levels is not None:
            _levels_hold(ctx, function, levels)
        if key not in ctx.ledger.bindings:
            asked = sum(1 for k in ctx.ledger.bindings if k.startswith(_SCALE_KEY))
            if asked >= MAX_SCALES:
                raise DisclosureError(
                    f"site {ctx.site!r} refuses {function!r}: it answers about at most "
                    f"{MAX_SCALES} score scales (each answer, by {FN_SCALE!r} or by the score "
                    f"check of {FN_SETUP!r}, tells whether its extreme scores lie inside), "
                    "and has answered that many; ask again about one of them",
                    site=ctx.site,
                    function=function,
                )
            ctx.ledger.bind(key, scale)
        bound_grid(ctx, lo, hi)
        if levels is not None and SCORE_LEVELS_KEY not in ctx.ledger.bindings:
            ctx.ledger.bind(SCORE_LEVELS_KEY, [float(v) for v in levels])
    return lo, hi, levels


def _levels_hold(ctx: SiteContext, function: str, levels: np.ndarray) -> None:
    """Refuse, before the rows are read, a levels question the site's bindings do not hold.

    One set of levels per lifetime: two answered sets said where the rows lie between them
    (all on both: on their common levels). And, when none is bound yet, only on a bound grid
    each cell of which holds a level (as a range must hold the grid, H14-2): on a finer grid
    the answer said which cells the site adds no row to (H15-1).
    """
    bound = ctx.ledger.bindings.get(SCORE_LEVELS_KEY)
    if bound is not None:
        if not np.array_equal(np.asarray(bound, np.float64), levels):
            raise ArgumentRefused(
                f"site {ctx.site!r} refuses {function!r}: argument 'score_levels' "
                f"{levels_text(levels)} is not the set of levels it answered about before, "
                f"{levels_text(bound)}; it answers about one set of levels in its lifetime "
                "(two would say where its rows lie between them). Ask on those levels",
                site=ctx.site,
                function=function,
                argument="score_levels",
            )
        return
    grid = bound_grid_or_none(ctx)
    if grid is not None and not levels_fill_grid(levels, grid):
        raise ArgumentRefused(
            f"site {ctx.site!r} refuses {function!r}: argument 'score_levels' "
            f"{levels_text(levels)}: some cells of its one grid of exact counts ({grid[3]} "
            f"cells over {grid_range_text(grid)}, bound by its first histogram, calibration, "
            "clustered or ROC-GLM request) hold none of these levels, and whether its scores "
            "all lie on them would say which cells it adds no row to. A ROC-GLM on score "
            "levels runs at a site before its grid is bound (or on a new ledger)",
            site=ctx.site,
            function=function,
            argument="score_levels",
        )


@site_function(
    FN_SCALE,
    schema={
        "score_range": FloatArray((2,), lo=-1e9, hi=1e9, default=None),
        "score_levels": FloatArray((Bound(2, 256),), lo=-1e9, hi=1e9, default=None),
    },
)
def _scale(ctx: SiteContext, args: Record) -> Reply:
    """Whether the site's scores fit the public scale the correction assumes (no rows).

    ``in_range``: every score in ``score_range`` (default [0, 1]) and in the range of the
    site's one grid of exact counts, which the answer binds over ``score_range`` when none is
    bound (whatever the answer; the levels too, see :func:`_bind_scale`); ``on_levels``: every
    score one of ``score_levels`` (true when none are declared); ``few_values``: at most
    :data:`MAX_UNDECLARED_LEVELS` distinct scores (a rating scale). Asked before the noisy
    release, so that a run the correction cannot serve stops before it spends budget. At
    most :data:`MAX_SCALES` distinct scales per site lifetime: unlimited, the bits would
    bisect the site's smallest and largest score.
    """
    s = ctx.data.score
    # The grid (and the levels) are bound before the rows are read, whatever the answer.
    lo, hi, levels = _bind_scale(ctx, FN_SCALE, args)
    # Inside the range and inside the bound grid's range, which the range holds: a site
    # whose scores lie outside its grid (bound narrower by an earlier answer "outside" or a
    # request over a mistyped range) says no here, before the ROC-GLM's release, rather than
    # refusing the setup after it. The bit is the one the grid's binding already told (and
    # any grid release at the site tells again): nothing of the grid's cells.
    grid = bound_grid(ctx, lo, hi)
    # A site that declares its range answers from it, no row read: the asked range holds
    # it (else refused above), and every score lies in it (checked when the site was built).
    in_range = declared_range(ctx) is not None or bool(
        _outside(ctx, lo, hi) == 0 and in_grid_range(s, grid)
    )
    return Reply(
        {
            "in_range": in_range,
            "on_levels": bool(levels is None or np.isin(s, levels).all()),
            "few_values": bool(np.unique(s).size <= min(MAX_UNDECLARED_LEVELS, s.size / 2)),
        },
        counts={"rows": ctx.data.n},
    )


# Noisy, but split by class: the lengths are the exact class sizes, so not registered noisy
# (its DP replies bind the rows as exact releases do).
@site_function(
    FN_NOISY,
    schema={
        "epsilon": Float(0.0, 100.0, open_lo=True),
        "delta": Float(0.0, 1.0, open_lo=True),
        "sensitivity": Float(0.0, 1e6, open_lo=True),
        "calibration": Choice("classic", "analytic", default="classic"),
        # The run's threshold rule and score levels, for a pre-check only (see below).
        "thresholds": Choice("grid", "positives", default=None),
        "score_levels": FloatArray((Bound(2, 256),), lo=-1e9, hi=1e9, default=None),
    },
)
def _noisy_scores(ctx: SiteContext, args: Record) -> Reply:
    """Every row's score plus Gaussian noise, released once, sorted, split by class.

    The noise is calibrated to the analyst's ``sensitivity``, which the site refuses below
    its policy's ``rocglm_min_sensitivity`` (default 0.01, for probability scores).

    One event covers all rows: each row's score is perturbed exactly once, so each row is
    protected at (epsilon, delta) (the classes are disjoint sets of rows). Sorting removes
    the row order. Counts are declared so that a site with fewer than q positives or
    negatives refuses. The noise is the site's own (OpenDP, or its configured seed).

    The site keeps what it released under a random ``release`` id (returned), so that a
    later :data:`FN_SETUP` can be checked against it and used once, and signs the values
    (``signature``, over :func:`release_message`; empty for a site without a signing key),
    so that the other sites' setups can check that they pool its release.

    ``thresholds`` and ``score_levels``, when given, are the run's: a site held to score
    levels (:func:`~fedroc.federation.basic.levels_hold_grid`) refuses here, before it spends
    the release, a grid-rule run whose setup it would refuse after it (one without those
    levels). Read from the ledger only; an analyst who states other levels here than at
    the setup only wastes the release.
    """
    if args["thresholds"] == "grid":
        levels_hold_grid(ctx, FN_NOISY, on_levels=check_levels(args["score_levels"]))
    floor = ctx.policy.rocglm_min_sensitivity
    if float(args["sensitivity"]) < floor:
        # The noise follows the sensitivity: at 1e-12 it was 6e-9 and every score came back.
        raise ArgumentRefused(
            f"site {ctx.site!r} refuses {FN_NOISY!r}: argument 'sensitivity' is "
            f"{float(args['sensitivity']):g}, below the floor of {floor:g} of its policy "
            "(rocglm_min_sensitivity); noise calibrated to less would hide little of each score",
            site=ctx.site,
            function=FN_NOISY,
            argument="sensitivity",
        )
    d = ctx.data
    noisy, event = gaussian_mechanism(
        d.score,
        epsilon=float(args["epsilon"]),
        delta=float(args["delta"]),
        sensitivity=float(args["sensitivity"]),
        calibration=str(args["calibration"]),
        rng=ctx.noise_rng("rocglm.noise"),
    )
    event = dataclasses.replace(
        event,
        note=(
            f"noisy scores of all {d.n} rows, each once ({d.n_neg} negatives for S0, "
            f"{d.n_pos} positives for S1)"
        ),
    )
    negative, positive = np.sort(noisy[~d.label]), np.sort(noisy[d.label])
    release = secrets.token_hex(16)
    # Signed, so that the other sites can tell this release from values the analyst made up
    # (a site without a signing key releases unsigned: no partner will pool its values).
    signature = (
        b""
        if ctx.identity is None
        else ctx.identity.sign(release_message(ctx.site, negative, positive))
    )
    ctx.state[_RELEASE + release] = {
        "negative": negative,
        "positive": positive,
        "sigma": float(event.noise_scale),
        "used": False,
    }
    return Reply(
        {
            "negative": negative,
            "positive": positive,
            "release": release,
            "signature": signature,
            "noise_sd": float(event.noise_scale),
        },
        kind="noisy",
        counts=ctx.class_counts(),
        dp=(event,),
    )


def _split(values: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
    return np.split(values, np.cumsum(sizes)[:-1])


def _pooled(ctx: SiteContext, args: Record, release: Record) -> tuple[np.ndarray, np.ndarray]:
    """Return the pooled noisy negatives and positives (sorted) once each part is a release.

    ``negative`` and ``positive`` join the releases of the sites ``parts`` names, in that
    order, with ``part_sizes`` (negatives, positives) values each; without ``parts``, they
    are this site's own release alone. This site's part must be exactly what it released;
    every other part must carry the signature of the site it is named for, under the key
    the site's roster holds for it. So every value is a noisy score some site released,
    and none is the analyst's (padding placed the cutoffs of a setup where it chose).
    """
    neg, pos = (np.asarray(args[k], np.float64) for k in ("negative", "positive"))
    names = args["parts"]
    if names is None:
        names, sizes = [ctx.site], np.array([[neg.size, pos.size]])
    else:
        sizes = args["part_sizes"]
        if sizes is None or len(sizes) != len(names):
            raise _refuse(ctx, "part_sizes", "needs one row (negatives, positives) per part")
        sizes = np.asarray(sizes, np.int64)
        if int(sizes[:, 0].sum()) != neg.size or int(sizes[:, 1].sum()) != pos.size:
            raise _refuse(
                ctx, "part_sizes", "the parts' sizes do not add up to the pooled noisy scores"
            )
    if ctx.site not in names:
        raise _refuse(ctx, "parts", "the pooled noisy scores hold no part of this site")
    split = zip(_split(neg, sizes[:, 0]), _split(pos, sizes[:, 1]), strict=True)
    parts = dict(zip(names, split, strict=True))
    for argument, k in (("negative", 0), ("positive", 1)):
        mine, released = np.sort(parts[ctx.site][k]), np.asarray(release[argument])
        if mine.shape != released.shape or not np.array_equal(mine, released):
            raise _refuse(
                ctx,
                argument,
                f"the pooled noisy {argument}s do not contain, under its name, exactly the "
                f"noisy {argument}s it released",
            )
    others = [n for n in names if n != ctx.site]
    if others:
        roster = None if ctx.identity is None else ctx.identity.roster
        if roster is None:
            raise _refuse(
                ctx,
                "parts",
                "it has no roster of sites (their signing keys), so it cannot tell their "
                "releases from values made up for them; its operator configures one (see "
                "fedroc.federation.roster)",
            )
        signatures = args["part_signatures"]
        by_name = None if signatures is None else split_signatures(signatures, names)
        if by_name is None:
            raise _refuse(ctx, "part_signatures", f"needs {SIGNATURE_BYTES} bytes per part")
        forged = roster.unverified((n, release_message(n, *parts[n]), by_name[n]) for n in others)
        if forged:
            raise _refuse(
                ctx,
                "part_signatures",
                f"the parts named {forged} do not carry the signature of that site's release "
                "under the key its roster holds (values not released by a site it knows)",
            )
    return np.sort(neg), np.sort(pos)


def _refuse(ctx: SiteContext, argument: str, reason: str) -> ArgumentRefused:
    return ArgumentRefused(
        f"site {ctx.site!r} refuses {FN_SETUP!r}: argument {argument!r}: {reason}",
        site=ctx.site,
        function=FN_SETUP,
        argument=argument,
    )


@site_function(
    FN_SETUP,
    schema={
        **_SESSION,
        "release": Text(32, alphabet=_HEX),
        "negative": FloatArray((Bound(1, _MAX_VALUES),)),
        "positive": FloatArray((Bound(1, _MAX_VALUES),)),
        "parts": Names(_MAX_PARTS, default=None),
        "part_sizes": IntArray((Bound(1, _MAX_PARTS), 2), lo=0, hi=_MAX_VALUES, default=None),
        "part_signatures": Bytes(SIGNATURE_BYTES * _MAX_PARTS, default=None),
        "thresholds": Choice("grid", "positives", default="grid"),
        "n_thresholds": Int(2, MAX_THRESHOLDS, default=DEFAULT_N_THRESHOLDS),
        "score_range": FloatArray((2,), lo=-1e9, hi=1e9, default=None),
        "score_levels": FloatArray((Bound(2, 256),), lo=-1e9, hi=1e9, default=None),
        "bootstrap": Int(2, MAX_RESAMPLES, default=DEFAULT_RESAMPLES),
    },
)
def _setup(ctx: SiteContext, args: Record) -> Reply:
    """Receive the pooled noisy scores of one release and build the site's ROC-GLM tables.

    Arguments: ``session``; ``release``, this site's release id from :data:`FN_NOISY`;
    ``negative`` and ``positive``, the pooled noisy scores of every site (S~0, S~1): the
    releases of the sites ``parts`` names joined in that order, ``part_sizes`` values each,
    this site's own among them and every other signed by its site (``part_signatures``,
    :data:`~fedroc.federation.roster.SIGNATURE_BYTES` each; see :func:`_pooled`), or
    without ``parts`` this site's own release alone; the threshold rule and the grid size;
    the public ``score_range`` of the scores (default ``[0, 1]``), the support of the
    deconvolution, or the public ``score_levels`` of scores on a finite scale (ratings);
    ``bootstrap``, the number of resamples of S~0 the deconvolution is bagged over (drawn
    from a generator seeded by S~0 itself, so that every site and the analyst get the same
    distribution, :func:`._deconvolution.bagged`).

    The site computes, for its positives, their DeLong placements (ties 1/2) in S~0 (the
    paper's) and their placements in the deconvolved distribution of the negatives (the
    correction), groups each into the ROC-GLM table over its own thresholds, and keeps both
    tables for :data:`FN_TABLE` (grid rule) or :data:`FN_FISHER` ("positives" rule). On the
    grid rule it replies the grid's size and :func:`setup_digest`, nothing that depends on
    its rows; on the "positives" rule also the sums of the placements (distrAVG).
    """
    rule = check_rule(str(args["thresholds"]))
    release_key = _RELEASE + str(args["release"])
    release = ctx.state.get(release_key)
    if release is None:
        raise _refuse(
            ctx,
            "release",
            f"it has no release {args['release']!r} of noisy scores (call {FN_NOISY!r} "
            "first; a restarted site has forgotten its releases)",
        )
    if release["used"]:
        raise _refuse(
            ctx,
            "release",
            "its release was set up before; each release of noisy scores serves one setup "
            "(a second setup on other pooled scores would disclose counts at other cutoffs)",
        )
    neg, pos_ref = _pooled(ctx, args, release)
    score_range = args["score_range"]
    lo, hi = (0.0, 1.0) if score_range is None else (float(score_range[0]), float(score_range[1]))
    if not lo < hi:
        raise _refuse(ctx, "score_range", f"the score range needs lo < hi; got [{lo}, {hi}]")
    if rule == "positives" and not ctx.policy.allows(OPT_IN_POSITIVES):
        raise _refuse(
            ctx,
            "thresholds",
            "the 'positives' threshold rule uses each positive's score as a threshold and "
            "discloses those scores through the Fisher information; its policy must opt in "
            f"(opt_in = [{OPT_IN_POSITIVES!r}])",
        )
    sigma = float(release["sigma"])
    # The check below of its scores against the scale answers what FN_SCALE answers: it
    # counts against the same MAX_SCALES (one bit per release was unlimited, since a release
    # at a negligible epsilon costs nothing: 40 bisected the largest score to 1e-12).
    lo, hi, levels = _bind_scale(ctx, FN_SETUP, args)
    # The release is spent before the site reads its rows: a refusal below answers one
    # question about them per release, and names no count (unspent, it answered a count of
    # the scores below any cutoff again and again).
    ctx.state[release_key] = {"used": True}
    if levels is not None:
        if not np.isin(ctx.data.score, levels).all():
            raise InputError(
                f"scores of site {ctx.site!r} are not among the declared score_levels; pass "
                "the levels of the scale every site's scores take (the release is spent)"
            )
        lo, hi = float(levels[0]), float(levels[-1])
    if _outside(ctx, lo, hi):
        raise InputError(
            f"scores of site {ctx.site!r} lie outside the score range [{lo:g}, {hi:g}]; the "
            "bias correction needs a public range that holds every site's scores: pass "
            "score_range=(lo, hi) (and an explicit sensitivity for scores that are not "
            "probabilities; the release is spent, and the site's one grid of exact counts "
            f"is bound to {grid_range_text(bound_grid(ctx, lo, hi))}, as every answer about "
            "where its scores lie binds it)"
        )
    # On the grid rule the tables are exact secure counts at cutoffs the analyst steers (the
    # pooled noisy values), one table per setup and as many setups as releases: on the exact
    # scores, a cutoff inside a cell of the site's one grid split it (A1 in
    # tests/test_attacks_review2.py). So the site's scores enter by their cell of that grid,
    # as every exact count the site sums securely does (R31): the grid _bind_scale bound
    # before the checks above, whatever their answer (a mistyped range binds it too: an
    # answer "outside" that bound nothing named the site of a pooled lone row, H14-2 the
    # other way). On the "positives" rule too, which rounds nothing to it: its check says
    # where the scores lie, as rocglm.scale's answer.
    bound = bound_grid(ctx, lo, hi)
    grid = bound if rule == "grid" else None
    d = ctx.data
    if grid is not None:
        # Held to its levels (H15-1): on the levels it checked every score against above,
        # a cell without a level is empty at every site of the sum.
        levels_hold_grid(ctx, FN_SETUP, on_levels=levels)
    if grid is not None and not in_grid_range(d.score, grid):
        # Rounded to the grid, every score outside would collapse into an end cell: a fit
        # of nothing, silently. (The same answer as a histogram over the bound range, and
        # as rocglm.scale's in_range, which the analyst's run asks before the release.)
        raise InputError(
            f"scores of site {ctx.site!r} lie outside the range {grid_range_text(grid)}"
            " of its one grid of exact counts, bound by its first histogram, calibration, "
            "clustered or ROC-GLM request or score range question; its grid-rule tables are "
            "computed on that grid, so on this ledger it takes no part in them (the release "
            "is spent; its operator may start it on a new ledger)"
        )
    pos = np.sort(d.score[d.label])
    negs = d.score[~d.label]
    if grid is not None:
        pos = grid_representatives(pos, grid, levels)  # nondecreasing: still sorted
        negs = grid_representatives(negs, grid, levels)
    mixture, _ = bagged(
        neg, sigma, score_range=(lo, hi), levels=levels, replicates=int(args["bootstrap"])
    )
    v10 = np.vstack([delong_placements(neg, pos, below=True), mixture.cdf(pos)])
    v01 = delong_placements(pos_ref, negs, below=False)
    if rule == "grid":
        t = threshold_grid(int(args["n_thresholds"]))
        successes = np.vstack([grouped_from_placements(1.0 - v, t) for v in v10])
        trials = np.full(t.size, float(pos.size))
    else:
        thresholds = positive_thresholds(pos, f"site {ctx.site!r}")
        if thresholds.size == 0:
            raise InputError(
                f"site {ctx.site!r} has no positive score strictly inside (0, 1) to use as "
                "threshold"
            )
        tables = [GroupedTable.from_positives_rule(1.0 - v, thresholds) for v in v10]
        t, trials = tables[0].t, tables[0].trials
        successes = np.vstack([tab.successes for tab in tables])
    digest = setup_digest(
        neg, pos_ref, rule, int(args["n_thresholds"]), (lo, hi), levels, int(args["bootstrap"])
    )
    ctx.state[_SESSION_KEY + str(args["session"])] = {
        "rule": rule,
        "setup": digest,
        "t": t,
        "x": special.ndtri(t),
        "successes": successes,
        "trials": trials,
        "v10": v10,
        "v01": v01,
        "calls": 0,
    }
    if rule == "grid":
        # Every site's table lives on the same grid: its counts leave only summed with the
        # other sites' (FN_TABLE, secure aggregation). Nothing here depends on its rows.
        return Reply({"n_rows": int(t.size), "setup": digest}, counts=ctx.class_counts())
    return Reply(
        {
            "n_pos": int(pos.size),
            "sum_v10": v10.sum(axis=1),
            "n_neg": int(v01.size),
            "sum_v01": float(v01.sum()),
            "n_rows": int(t.size),
            "setup": digest,
        },
        counts=ctx.class_counts(),
    )


def setup_digest(
    negative: np.ndarray,
    positive: np.ndarray,
    rule: str,
    n_thresholds: int,
    score_range: tuple[float, float],
    levels: np.ndarray | None,
    bootstrap: int,
) -> str:
    """Return the SHA-256 (hex) of what a setup's tables depend on besides the site's rows.

    The pooled noisy scores (sorted), the threshold rule and grid size, the score range or
    levels and the resamples of the deconvolution. :data:`FN_TABLE` takes it as an argument,
    which secure aggregation gives every member alike (it is signed with the session's
    parameters): so every site of a sum set up on the same scores and cutoffs.
    """
    h = hashlib.sha256(_SETUP_DOMAIN)
    for values in (negative, positive):
        v = np.sort(np.asarray(values, "<f8"))
        h.update(np.int64(v.size).tobytes() + v.tobytes())
    lv = [] if levels is None else [float(v) for v in levels]
    params = [rule, int(n_thresholds), float(score_range[0]), float(score_range[1]), lv]
    h.update(repr([params, int(bootstrap)]).encode())
    return h.hexdigest()


@site_function(
    FN_FISHER,
    schema={
        **_SESSION,
        "gamma": FloatArray((Bound(1, len(FITS)), 2), lo=-1e6, hi=1e6),
        "fits": IntArray((Bound(1, len(FITS)),), lo=0, hi=len(FITS) - 1),
    },
)
def _fisher(ctx: SiteContext, args: Record) -> Reply:
    """Log-likelihood, score vector and Fisher information at the analyst's coefficients.

    ``gamma`` has shape (k, 2) and ``fits`` (k,) says which of the session's two tables
    (:data:`FITS`) each row belongs to. These are sums over the site's positives (paper 1,
    eq. 6-7). At most :data:`MAX_FISHER_CALLS` calls per session.
    """
    _, state = _session(ctx, args)
    _refuse_grid(ctx, FN_FISHER, state)
    calls = int(state["calls"]) + 1
    if calls > MAX_FISHER_CALLS:
        raise DisclosureError(
            f"site {ctx.site!r} refuses {FN_FISHER!r}: a ROC-GLM session gets at most "
            f"{MAX_FISHER_CALLS} Fisher-scoring calls (R glm needs at most 26)",
            site=ctx.site,
            function=FN_FISHER,
        )
    state["calls"] = calls
    gamma = np.atleast_2d(np.asarray(args["gamma"], np.float64))
    fits = np.asarray(args["fits"], np.int64)
    if fits.size != gamma.shape[0]:
        raise InputError(f"fits must name one of the session's {len(FITS)} fits per gamma row")
    succ = np.asarray(state["successes"])[fits]
    parts = probit_parts(np.asarray(state["x"]), succ, np.asarray(state["trials"]), gamma)
    return Reply(
        {"loglik": parts.loglik, "score": parts.score, "information": parts.information},
        counts={"positive": int(np.asarray(state["v10"]).shape[1])},
    )


@site_function(
    FN_PLACEMENT_SS,
    schema={
        **_SESSION,
        "mean_v10": FloatArray((len(FITS),), lo=0.0, hi=1.0),
        "mean_v01": Float(0.0, 1.0),
    },
)
def _placement_ss(ctx: SiteContext, args: Record) -> Reply:
    """Centred sums of squares of the placement values about the global means (distrVAR).

    ``mean_v10`` holds the global mean of each fit's positive placements. The session ends
    here: its state is dropped.
    """
    key, state = _session(ctx, args)
    _refuse_grid(ctx, FN_PLACEMENT_SS, state)
    v10, v01 = np.asarray(state["v10"]), np.asarray(state["v01"])
    mean10 = np.asarray(args["mean_v10"], np.float64)
    ss10 = np.sum((v10 - mean10[:, None]) ** 2, axis=1)
    ss01 = float(np.sum((v01 - float(args["mean_v01"])) ** 2))
    ctx.state.pop(key, None)
    return Reply(
        {"n_pos": int(v10.shape[1]), "ss_v10": ss10, "n_neg": int(v01.size), "ss_v01": ss01},
        counts=ctx.class_counts(),
    )


def _refuse_grid(ctx: SiteContext, function: str, state: Record) -> None:
    if state["rule"] == "grid":
        raise DisclosureError(
            f"site {ctx.site!r} refuses {function!r}: its session uses the grid threshold "
            f"rule, whose table and placement sums leave it only summed with the other "
            f"sites' through secure aggregation ({FN_TABLE!r}); per-site Fisher parts and "
            "sums of squares would pin its exact counts at the grid's cutoffs",
            site=ctx.site,
            function=function,
        )


@site_function(
    FN_TABLE,
    schema={**_SESSION, "setup": Text(64, alphabet=_HEX)},
    release="secure",
)
def _table(ctx: SiteContext, args: Record) -> Reply:
    """Return the session's grid table and placement moments, input of secure aggregation.

    For a setup on the grid rule: the successes of each fit at the grid's thresholds
    (shape (2, n_T)), ``n_pos`` (the trials of every row) and ``n_neg``, and for the
    placements of each fit and of the negatives their sums and sums of squares (each as
    :func:`fixed_point` parts ``*_whole`` and ``*_frac``). All of them add up over sites
    into the pooled table and moments, from which the analyst fits and takes the variance
    on its own (the grid is the same at every site). Released only summed: per site, the
    counts at the grid's cutoffs, which the analyst knows, were a site's exact counts above
    cutoffs of its choice (R15-R18 in tests/test_attacks_review.py).

    ``setup`` must be the digest of this session's setup (:func:`setup_digest`, returned by
    :data:`FN_SETUP`): the protocol gives every member the same arguments, so all the
    sites of a sum set up on the same pooled scores; else the analyst could set up the
    other members on scores whose placements it knows and subtract them. The table is
    answered once: the session ends here. Its counts are exact binned counts released
    securely, one way for the site's lifetime (:func:`bind_exact_counts`).
    """
    key, state = _session(ctx, args)
    if state["rule"] != "grid":
        raise InputError(
            f"site {ctx.site!r}: {FN_TABLE!r} sums tables on the grid threshold rule; session "
            f"{args['session']!r} uses {state['rule']!r} (its thresholds differ from site to "
            f"site): use {FN_FISHER!r}"
        )
    if str(args["setup"]) != state["setup"]:
        raise ArgumentRefused(
            f"site {ctx.site!r} refuses {FN_TABLE!r}: argument 'setup' is not the digest of "
            "its session's setup (the sites of one sum must set up on the same pooled "
            "scores and parameters)",
            site=ctx.site,
            function=FN_TABLE,
            argument="setup",
        )
    bind_exact_counts(ctx, FN_TABLE, "secure")
    ctx.state.pop(key, None)
    v10, v01 = np.asarray(state["v10"], np.float64), np.asarray(state["v01"], np.float64)
    values: dict[str, np.ndarray] = {
        "successes": np.rint(np.asarray(state["successes"])).astype(np.int64),
        "n_pos": np.array(v10.shape[1], np.int64),
        "n_neg": np.array(v01.size, np.int64),
    }
    moments = {
        "v10": v10.sum(axis=1),
        "v10_sq": (v10**2).sum(axis=1),
        "v01": np.array(v01.sum()),
        "v01_sq": np.array((v01**2).sum()),
    }
    for name, value in moments.items():
        values[name + "_whole"], values[name + "_frac"] = fixed_point(value)
    return Reply(values, counts=ctx.class_counts())


# --- confusion matrix at a threshold (dsBinVal's dsConfusion) ------------------------------


@site_function(FN_CONFUSION, schema={"threshold": Float(-1e9, 1e9)})
def _confusion(ctx: SiteContext, args: Record) -> Reply:
    """Count the 2 x 2 table at ``threshold`` (predicted positive: ``score >= threshold``).

    As dsBinVal's ``confusion``, every cell must hold at least q rows. A minimum count does
    not stop differencing: the tables at two thresholds subtract to the rows of each class
    between them. So the site keeps every threshold it has released in its ledger (it
    survives restarts) and refuses a new one that would leave fewer than q rows of either
    class between it and a released neighbour.

    A refusal answers a question about the rows too (is a cell small at this threshold?):
    it names no cell, and every distinct threshold, answered or refused, is counted in the
    ledger before the site reads its rows, at most :data:`MAX_CONFUSION_THRESHOLDS` in its
    lifetime; a threshold asked before is answered as before.
    """
    threshold = float(args["threshold"])
    bind_exact_counts(ctx, FN_CONFUSION, "clear")
    # One hold of the ledger from the count to the binding of a released threshold: the
    # checks against the site's other clear cuts read them under it, so that a second
    # process of the site releasing a cut at the same moment is seen or sees this one (Q3:
    # both released, 13 of 40 trials with a calibration curve, when the threshold was bound
    # after the hold).
    with ctx.ledger.transaction():
        asked = {
            float(v)
            for k, v in ctx.ledger.bindings.items()
            if k.startswith((_CONFUSION_KEY, _CONFUSION_ASKED))
        }
        if threshold not in asked:
            if len(asked) >= MAX_CONFUSION_THRESHOLDS:
                raise DisclosureError(
                    f"site {ctx.site!r} refuses {FN_CONFUSION!r} at threshold {threshold:g}: "
                    f"it answers at most {MAX_CONFUSION_THRESHOLDS} thresholds in its lifetime "
                    "(released or refused, each answer tells something about its scores) and "
                    "has answered that many; ask again at one of them",
                    site=ctx.site,
                    function=FN_CONFUSION,
                )
            ctx.ledger.bind(_CONFUSION_ASKED + repr(threshold), threshold)
        d = ctx.data
        q = ctx.policy.min_count
        predicted = d.score >= threshold
        cells = {
            "tp": int(np.count_nonzero(predicted & d.label)),
            "fp": int(np.count_nonzero(predicted & ~d.label)),
            "fn": int(np.count_nonzero(~predicted & d.label)),
            "tn": int(np.count_nonzero(~predicted & ~d.label)),
        }
        if min(cells.values()) < q:
            raise DisclosureError(
                f"site {ctx.site!r} refuses {FN_CONFUSION!r} at threshold {threshold:g}: a cell "
                f"would hold fewer than the minimum of {q} rows",
                site=ctx.site,
                function=FN_CONFUSION,
            )
        released = confusion_thresholds(ctx)
        if threshold not in released:
            # The calibration bins released in the clear cut the scores too: a table at a
            # threshold near one of their edges subtracts to the rows between.
            if not apart_from_clear_calibration(ctx, np.array([threshold])):
                raise DisclosureError(
                    f"site {ctx.site!r} refuses {FN_CONFUSION!r} at threshold {threshold:g}: "
                    f"its calibration curve at {clear_calibration_bins(ctx)} bins was released, "
                    f"and the two would subtract to fewer than {q} rows of a class",
                    site=ctx.site,
                    function=FN_CONFUSION,
                )
            if not cuts_apart(ctx, np.array([threshold]), np.array(clustered_clear_edges(ctx))):
                # The clustered histograms released in the clear cut the scores as well.
                raise DisclosureError(
                    f"site {ctx.site!r} refuses {FN_CONFUSION!r} at threshold {threshold:g}: its "
                    "clustered histograms were released in the clear, and the two would subtract "
                    f"to fewer than {q} rows of a class",
                    site=ctx.site,
                    function=FN_CONFUSION,
                )
            if not apart_from_local_trees(ctx, np.array([threshold])):
                # So do the leaves of a local-DP tree, exact in effect at a large epsilon (R43).
                raise DisclosureError(
                    f"site {ctx.site!r} refuses {FN_CONFUSION!r} at threshold {threshold:g}: it "
                    "splits a leaf of a local-DP histogram tree the site released into parts of "
                    f"fewer than {q} rows of a class, and the two would subtract to them",
                    site=ctx.site,
                    function=FN_CONFUSION,
                )
            for other in released:
                if not cuts_apart(ctx, np.array([threshold]), np.array([other])):
                    raise DisclosureError(
                        f"site {ctx.site!r} refuses {FN_CONFUSION!r} at threshold {threshold:g}: "
                        f"its table at {other:g} was released, and the two would subtract to "
                        f"fewer than {q} rows of a class between them",
                        site=ctx.site,
                        function=FN_CONFUSION,
                    )
            ctx.ledger.bind(_CONFUSION_KEY + repr(threshold), threshold)
    return Reply(cells, counts={"cell": np.array(list(cells.values()))})
