"""The keys of a site's ledger bindings, named once.

A binding holds a site to the first value of something it released or read (a set of
partners, a grid, its rows' digest; :meth:`fedroc.privacy.BudgetLedger.bind`). The code
that binds (the federation, secure aggregation, the methods' site functions) and the code
that reads a ledger back (``fedroc privacy status``) both take the keys from here (the
MPC owners' one key from :mod:`fedroc.mpc.owner`), so that a key renamed where it is bound
is not left behind where it is described. Keys ending in ``:`` are prefixes (a session id,
a function, a value follows). Their values must not change: a site's ledger outlives the
code that wrote it.
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
    "CONFUSION_THRESHOLD",
    "EXACT_COUNTS",
    "HISTOGRAM_RANGE",
    "HISTOGRAM_TREE",
    "JOINT_GRID",
    "LOCAL_TREE",
    "PARTNERS",
    "RANGE_ROWS",
    "ROCGLM_SCALE",
    "ROCGLM_SCALE_RANGE",
    "ROCGLM_SCALE_RANGE_LEVELS",
    "ROWS",
    "SECAGG_MASKED",
    "SECAGG_UNMASKED",
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
# The foundation's statistics (fedroc.federation.basic): the one way of exact binned counts,
# the thresholds of clear confusion tables (+ threshold), the clear clustered cuts, the one
# grid of secure trees, and the local-DP trees released (+ leaves).
EXACT_COUNTS = "fedroc.calibration:release"
CONFUSION_THRESHOLD = "rocglm.confusion-threshold:"
CLEAR_EDGES = "clustered:clear-edges"
HISTOGRAM_RANGE = "histogram-tree:range"
HISTOGRAM_TREE = "histogram-tree:tree"
LOCAL_TREE = "histogram-local:leaves:"
# The methods: the histogram's joint grid, the ROC-GLM's score scales (+ the scale), the
# clustered method's clear and secure bindings and the secure round-1 sessions it signed
# rows in (+ session id). (The MPC owners' jobs are fedroc.mpc.owner.JOB_BINDING: the MPC
# engine stays free of the privacy package's imports.)
JOINT_GRID = "histogram-joint:grid"
ROCGLM_SCALE = "rocglm.scale:"
ROCGLM_SCALE_RANGE = ROCGLM_SCALE + "range:"
ROCGLM_SCALE_RANGE_LEVELS = ROCGLM_SCALE + "range+levels:"
CLUSTERED_EDGES = "clustered-clear:edges"
CLUSTERED_MOMENTS = "clustered-clear:moments"
CLUSTERED_SECURE_EDGES = "clustered-secure:edges"
CLUSTERED_SECURE_MOMENTS = "clustered-secure:moments"
CLUSTERED_ROWS_SESSION = "clustered-secure:rows-session:"
