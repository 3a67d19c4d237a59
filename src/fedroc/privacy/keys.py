"""The keys of a site's ledger bindings, named once.

A binding holds a site to the first value of something it released or read (a set of
partners, a grid, its rows' digest; :meth:`fedroc.privacy.BudgetLedger.bind`). The code
that binds (the federation, secure aggregation, the methods' site functions) and the code
that reads a ledger back (``fedroc privacy status``) both take the keys from here (the
MPC owners' one key from :mod:`fedroc.mpc.owner`), so that a key renamed where it is bound
is not left behind where it is described. Keys ending in ``:`` are prefixes (a session id,
a function, a value follows). Their values must not change: a site's ledger outlives the
code that wrote it.

Each key is marked here as :data:`SHOWN` (its values are the analyst's or the operator's
choices, or the protocol's: partners, grids, thresholds, configuration) or :data:`KEPT`
(its values are functions of the site's rows: its ledger keeps them, ``fedroc privacy
status`` does not show them). The status shows the value of a key marked shown only
(:func:`value_shown`): a key added without a mark, or one a newer version wrote, is shown
as :data:`VALUE_NOT_SHOWN` (fail-closed; a test fails on a key left unmarked). Such a key's
name is not shown either (:func:`key_not_shown`): a key may be built from a value (as the
thresholds and scales here are), and one this version does not know (a newer version's, a
site module's) may be built from a function of the rows.
"""

from __future__ import annotations

__all__ = [
    "ARGUMENT",
    "CLEAR_EDGES",
    "CLUSTERED_EDGES",
    "CLUSTERED_MOMENTS",
    "CLUSTERED_ROWS_SESSION",
    "CLUSTERED_SECURE_EDGES",
    "CLUSTERED_SECURE_MOMENTS",
    "CONFUSION_ASKED",
    "CONFUSION_THRESHOLD",
    "EXACT_COUNTS",
    "HISTOGRAM_RANGE",
    "HISTOGRAM_TREE",
    "JOINT_GRID",
    "KEPT",
    "LOCAL_TREE",
    "MPC_JOB",
    "PARTNERS",
    "RANGE_ROWS",
    "ROCGLM_SCALE",
    "ROCGLM_SCALE_RANGE",
    "ROCGLM_SCALE_RANGE_LEVELS",
    "ROWS",
    "SCORE_LEVELS",
    "SEALED_KEYS",
    "SECAGG_MASKED",
    "SECAGG_ONE_SET",
    "SECAGG_UNMASKED",
    "SHOWN",
    "VALUE_NOT_SHOWN",
    "key_not_shown",
    "value_shown",
]

# The federation (fedroc.federation.site): the rows' digests ("rows", "rows+cluster", ...),
# those the DP histograms' range check read, and arguments declared ``bind``
# ("argument:FUNCTION:NAME").
ROWS = "rows"
RANGE_ROWS = "histogram.range_rows"
ARGUMENT = "argument:"
# Secure aggregation: the partners of a quantity ("*": of all of them; the ledger's
# partners_key), and the set a session's masked input went over and that it was unmasked
# (+ the session id; fedroc.secagg.protocol).
PARTNERS = "secagg-partners:"
SECAGG_MASKED = "secagg-masked:"
SECAGG_UNMASKED = "secagg-unmasked:"
# That the site signed, in a secure session, that it sums each quantity over one set of
# sites: its policy's secagg_rebind no longer undoes it on this ledger (H18-1).
SECAGG_ONE_SET = "secagg-one-set"
# The foundation's statistics (fedroc.federation.basic): the one way of exact binned counts,
# the thresholds of clear confusion tables (+ threshold), the clear clustered cuts, the one
# grid of secure trees, and the local-DP trees released (+ leaves).
EXACT_COUNTS = "fedroc.calibration:release"
CONFUSION_THRESHOLD = "rocglm.confusion-threshold:"
# The thresholds of confusion tables asked in the clear, bound before the rows are read
# (+ threshold; fedroc.methods.rocglm._site).
CONFUSION_ASKED = "rocglm.confusion-asked:"
CLEAR_EDGES = "clustered:clear-edges"
HISTOGRAM_RANGE = "histogram-tree:range"
HISTOGRAM_TREE = "histogram-tree:tree"
# The score levels a site answered a question about (rocglm.scale's on_levels, the ROC-GLM
# setup's check): its exact counts are held to them (H15-1; fedroc.federation.basic).
SCORE_LEVELS = "histogram-tree:levels"
LOCAL_TREE = "histogram-local:leaves:"
# The methods: the histogram's joint grid, the ROC-GLM's score scales (+ the scale), the
# clustered method's clear and secure bindings and the secure round-1 sessions it signed
# rows in (+ session id). (The MPC owners' jobs (+ job id) are fedroc.mpc.owner.JOB_BINDING,
# spelt there again: the MPC engine stays free of the privacy package's imports; a test
# holds the two equal.)
JOINT_GRID = "histogram-joint:grid"
ROCGLM_SCALE = "rocglm.scale:"
ROCGLM_SCALE_RANGE = ROCGLM_SCALE + "range:"
ROCGLM_SCALE_RANGE_LEVELS = ROCGLM_SCALE + "range+levels:"
CLUSTERED_EDGES = "clustered-clear:edges"
CLUSTERED_MOMENTS = "clustered-clear:moments"
CLUSTERED_SECURE_EDGES = "clustered-secure:edges"
CLUSTERED_SECURE_MOMENTS = "clustered-secure:moments"
CLUSTERED_ROWS_SESSION = "clustered-secure:rows-session:"
MPC_JOB = "mpc-job:"

#: The keys whose values ``fedroc privacy status`` shows: what the analyst asked for or the
#: operator set (arguments, grids, ranges, thresholds, edges or their digests, the way of
#: exact counts), the partners and sessions of secure aggregation, MPC jobs' terms digests.
#: None of them is computed from the rows. A key ending in ``:`` marks every key it starts.
SHOWN = frozenset(
    {
        ARGUMENT,
        PARTNERS,
        SECAGG_MASKED,
        SECAGG_UNMASKED,
        SECAGG_ONE_SET,
        EXACT_COUNTS,
        CONFUSION_THRESHOLD,
        CONFUSION_ASKED,
        HISTOGRAM_RANGE,
        HISTOGRAM_TREE,
        SCORE_LEVELS,
        LOCAL_TREE,
        JOINT_GRID,
        ROCGLM_SCALE,
        ROCGLM_SCALE_RANGE,
        ROCGLM_SCALE_RANGE_LEVELS,
        CLUSTERED_EDGES,
        CLUSTERED_MOMENTS,
        CLUSTERED_SECURE_EDGES,
        CLUSTERED_SECURE_MOMENTS,
        CLUSTERED_ROWS_SESSION,
        MPC_JOB,
    }
)
#: The keys whose values are functions of the rows, kept in the ledger and never shown: the
#: rows' digests (with their "+column" suffixes) and the clear clustered cuts kept (the
#: first edge above each group of scores; review 13, H13-3).
KEPT = frozenset({ROWS, RANGE_ROWS, CLEAR_EDGES})
#: The keys whose values the site seals in its ledger file under the ledger's salt
#: (:meth:`fedroc.privacy.ledger.BudgetLedger.seal`): values it reads back for its own checks
#: that are functions of its rows. Only these are opened, and only these make a missing salt
#: file stop the site: a value the analyst chose (an argument bound as given) may be any text.
SEALED_KEYS = frozenset({CLEAR_EDGES})
#: What the status shows in place of a value not marked :data:`SHOWN`.
VALUE_NOT_SHOWN = "(a value not marked safe to show, kept in its ledger, not shown)"


def key_not_shown(number: int) -> str:
    """Return what the status shows in place of the name of its ``number``-th unknown key.

    Parameters
    ----------
    number : int
        The key's place among the site's bindings not marked here (1, 2, ...), so that
        each has its own name in the status's ``bindings``.
    """
    return f"(key {number}: a key not marked safe to show, kept in its ledger, not shown)"


def value_shown(key: str) -> bool:
    """Whether ``fedroc privacy status`` may show the value bound under ``key``.

    Parameters
    ----------
    key : str
        A ledger binding's key.

    Returns
    -------
    bool
        True when ``key`` is marked :data:`SHOWN`, itself or (a prefix ending in ``:``) by
        its start; False for any other key, one unknown to this version included.
    """
    return key in SHOWN or any(p.endswith(":") and key.startswith(p) for p in SHOWN)
