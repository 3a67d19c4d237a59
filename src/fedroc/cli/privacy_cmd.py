"""``fedroc privacy``: what the sites have spent of their privacy budgets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fedroc.cli._common import emit_json, err, grid_table, out
from fedroc.cli._options import JsonOption
from fedroc.exceptions import InputError

# What each site function that spends budget released, in the words of `fedroc evaluate`.
RELEASE_LABELS = {
    "fedroc.histogram.class_counts": "histogram, noisy class counts (secure sum)",
    "fedroc.histogram.tree": "histogram, noisy tree (secure sum)",
    "fedroc.histogram.joint": "histogram --compare-score, noisy joint counts (secure sum)",
    "fedroc.histogram.class_counts_local": "histogram (local DP), noisy class counts",
    "fedroc.histogram.tree_local": "histogram (local DP), noisy tree",
    "rocglm.noisy_scores": "rocglm, noisy scores",
}
_SECAGG_STAGE = "fedroc.secagg."
_HEX = frozenset("0123456789abcdef")


# The status table's columns; its two "limit" columns did not say which was epsilon's.
_STATUS_HEADER = ("site", "DP releases", "epsilon", "epsilon limit", "delta", "delta limit",
                  "min count", "bindings")  # fmt: skip


def release_label(source: str, function: str, note: str) -> str:
    """Say what a spending was for: the method and release, not the function's name.

    ``source`` is the function whose values were released (a secure sum's input, where the
    ledger recorded it), ``function`` the one that released them. A ledger written before
    inputs were recorded lists a secure sum's spending under its first stage only
    (``fedroc.secagg.advertise_keys``): its events' note says what they were.
    """
    if source in RELEASE_LABELS:
        return RELEASE_LABELS[source]
    if source.startswith(_SECAGG_STAGE):
        what = note.split(";")[0].strip()
        return f"a secure sum ({what})" if what else "a secure sum (its input not recorded)"
    return source if source == function else f"{source} (by {function})"


def _shown(value: Any) -> str:
    """Show a value as an operator reads it: a digest as its first 12 hex digits."""
    if isinstance(value, str) and len(value) >= 32 and set(value) <= _HEX:
        return f"fingerprint {value[:12]}..."
    if isinstance(value, list):
        return ", ".join(_shown(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _short_id(text: str) -> str:
    """Show an id inside a ledger key (a session's, 32 hex digits or more) by its start."""
    return _shown(text).removeprefix("fingerprint ")


# What the status shows for a digest of the rows. The digest is a fixed function of the
# rows (SiteData.projection_digests): an analyst shown it (12 digits were enough) who knows
# every row but one label finds the label among two candidates' digests (H13-3, review 13:
# 20 of 20). The ledger file keeps it; the status, which an operator may show, does not.
ROWS_DIGEST_SHOWN = "(a digest of its rows, kept in its ledger, not shown)"


def _rows_binding(key: str) -> bool:
    from fedroc.privacy import keys

    return key == keys.ROWS or key.startswith((keys.ROWS + "+", keys.RANGE_ROWS))


# What it shows for the clear clustered cuts. The site keeps one of the analyst's inner
# edges per group of edges with no row between them (its checks against its other clear
# cuts need no more), so the list kept is the first edge above each group of its scores:
# shown, it gave every score to the edges' spacing (1/4096 in 20 of 20 sites; review
# diffrev2, tests/test_attacks_review13.py). The ledger file keeps it.
CLEAR_EDGES_SHOWN = "(the edges that split its rows, kept in its ledger, not shown)"


def _shown_binding(key: str, value: Any) -> Any:
    """Return a binding's value as the status shows it: nothing that is a function of rows.

    Fail-closed: the value of a key marked safe to show in :mod:`fedroc.privacy.keys`
    (:func:`~fedroc.privacy.keys.value_shown`) as it is, any other key's a placeholder (the
    rows' digests and the clear cuts their own; a key unknown to this version,
    :data:`~fedroc.privacy.keys.VALUE_NOT_SHOWN`). Before, a deny list of the two: a key
    added later whose value depended on the rows would have been shown.
    """
    from fedroc.privacy import keys

    if _rows_binding(key):
        return ROWS_DIGEST_SHOWN
    if key == keys.CLEAR_EDGES:
        return CLEAR_EDGES_SHOWN
    if keys.value_shown(key):  # the MPC owners' JOB_BINDING is keys.MPC_JOB
        return value
    return keys.VALUE_NOT_SHOWN


def _key_known(key: str) -> bool:
    """Whether ``key`` is one :mod:`fedroc.privacy.keys` marks (shown or kept)."""
    from fedroc.privacy import keys

    return _rows_binding(key) or key == keys.CLEAR_EDGES or keys.value_shown(key)


def public_key_names(bindings: dict[str, Any]) -> dict[str, str]:
    """Return each binding's key as the status shows it: a key not marked, by a placeholder.

    A key may be built from a value (a threshold, a scale); one this version does not mark
    (a newer version's, a site module's own) may be built from a function of the rows, and
    its name was shown as it is while its value was hidden. Each gets its own placeholder
    (:func:`fedroc.privacy.keys.key_not_shown`), numbered in the ledger's order.
    """
    from fedroc.privacy import keys

    names: dict[str, str] = {}
    for key in bindings:
        names[key] = (
            key
            if _key_known(key)
            else keys.key_not_shown(sum(1 for k in names if not _key_known(k)) + 1)
        )
    return names


def public_bindings(bindings: dict[str, Any]) -> dict[str, Any]:
    """Return the bindings as the status shows them, only keys and values marked safe to show.

    The other values (the rows' digests, the clear clustered cuts kept, any key not marked
    in :mod:`fedroc.privacy.keys`) are placeholders, and so are the keys not marked
    (:func:`public_key_names`).
    """
    names = public_key_names(bindings)
    return {names[k]: _shown_binding(k, v) for k, v in bindings.items()}


def binding_notes(bindings: dict[str, Any]) -> dict[str, str]:
    """Return each binding's sentence (:func:`describe_binding`) under its shown key."""
    names = public_key_names(bindings)
    return {names[k]: describe_binding(k, v, shown_key=names[k]) for k, v in bindings.items()}


def _describe_grid_binding(key: str, value: Any) -> str | None:
    """Say what a binding of the site's grid of exact counts holds it to (None: not one)."""
    from fedroc.privacy import keys

    if key == keys.HISTOGRAM_RANGE and isinstance(value, list) and len(value) == 3:
        lo, hi, transform = value
        after = f" after the {transform} transform" if transform else ""
        return f"histogram trees only over scores in [{lo:g}, {hi:g}]{after}"
    if key == keys.HISTOGRAM_TREE and isinstance(value, list) and len(value) == 2:
        return f"histogram trees only of branching {value[0]} and height {value[1]}"
    if key == keys.SCORE_LEVELS:
        return (
            f"answered whether its scores lie on the levels {_shown(value)}: its exact binned "
            "counts only on a grid each of whose cells holds one of them, or in a rocglm setup "
            "on those levels"
        )
    if key.startswith(keys.LOCAL_TREE):
        # Bound before the site checks the tree against its clear cuts, so a refused tree
        # holds later cuts apart too (R43): "released" said so of trees it refused.
        return (
            f"was asked for a local-DP histogram tree of {value} leaves in the clear (released "
            "or refused; its spending says which): its later clear cuts are held apart from "
            "those leaves"
        )
    return None


def describe_binding(key: str, value: Any, *, shown_key: str | None = None) -> str:
    """Say in a sentence what a ledger binding holds the site to.

    The pair is in --json. Neither shows a value not marked safe to show
    (:func:`public_bindings`; the rows' digests, H13-3): the sentence is of the value
    the status shows; nor the name of a key not marked (``shown_key``, its placeholder from
    :func:`public_key_names`; by default the first one).
    """
    # Imported here: `fedroc --help` and the other commands load no privacy layer.
    from fedroc.mpc.owner import JOB_BINDING
    from fedroc.privacy import keys
    from fedroc.privacy.ledger import ANY_QUANTITY, BudgetLedger

    value = _shown_binding(key, value)
    if not _key_known(key):  # before the prefixes: "rowsx" is no digest of the rows
        return f"{shown_key or keys.key_not_shown(1)} = {_shown(value)}"
    if key == keys.ROWS or key.startswith(keys.ROWS + "+"):
        columns = key.split("+")[1:]
        with_columns = f" (with column(s) {', '.join(columns)})" if columns else ""
        return (
            f"holds its exact releases to one version of its rows{with_columns} (its "
            "ledger keeps their digest): exact releases of changed rows need a new ledger"
        )
    if key.startswith(keys.RANGE_ROWS):
        return (
            "read its rows for a DP histogram's range check (its ledger keeps their "
            "digest): exact releases of other rows are refused"
        )
    if key == BudgetLedger.partners_key(ANY_QUANTITY):
        return f"secure sums only with {_shown(value)}"
    if key.startswith(keys.PARTNERS):
        fn = key[len(keys.PARTNERS) :]
        what = RELEASE_LABELS.get(fn, fn).removesuffix(" (secure sum)")
        return f"secure sums of {what} only with {_shown(value)}"
    if key == keys.EXACT_COUNTS:
        way = {"secure": "through secure aggregation", "clear": "in the clear"}.get(
            str(value), str(value)
        )
        return (
            f"releases exact binned counts (calibration bins, confusion tables, exact trees) "
            f"only {way}"
        )
    grid = _describe_grid_binding(key, value)
    if grid is not None:
        return grid
    # R12-2 (fedroc.secagg.protocol.MASKED_KEY, UNMASKED_KEY): the set a secure session's
    # masked input went over, recorded before it left, and that the session was unmasked.
    if key.startswith(keys.SECAGG_MASKED):
        session = _short_id(key[len(keys.SECAGG_MASKED) :])
        return (
            f"sent its masked input over {_shown(value)} in secure session {session} (until "
            "that session is unmasked or the site's partners are bound, it sends none over "
            "another set)"
        )
    if key.startswith(keys.SECAGG_UNMASKED):
        session = _short_id(key[len(keys.SECAGG_UNMASKED) :])
        return f"unmasked secure session {session}"
    if key == keys.SECAGG_ONE_SET:  # H18-1
        return (
            "signed in a secure session that it sums each quantity over one set of sites: "
            "secagg_rebind in its policy does not undo that on this ledger"
        )
    if key.startswith(JOB_BINDING) and isinstance(value, dict):
        owners = value.get("owners")  # recorded since review 16 (H16-1): the set it binds
        over = f" over co-owners {_shown(owners)}" if isinstance(owners, list) else ""
        return f"authorised MPC job {value.get('job')}{over} ({_shown(value.get('terms'))})"
    if key.startswith(keys.CONFUSION_THRESHOLD):
        return f"released a rocglm confusion table at threshold {_shown(value)} in the clear"
    if key.startswith(keys.CONFUSION_ASKED):
        return (
            f"was asked for a rocglm confusion table at threshold {_shown(value)} in the clear "
            "(answered or refused, it counts among the thresholds it answers)"
        )
    return _describe_other(key, value)


def _other_bindings() -> tuple[tuple[str, str], ...]:
    """Return the other bindings by key prefix: the sentence (with the key's rest, the value)."""
    from fedroc.privacy import keys

    return (
        (keys.ARGUMENT, "answers {rest} {value} only (it may not change)"),
        (keys.ROCGLM_SCALE_RANGE_LEVELS, "rocglm noisy scores only on the score scale {rest}"),
        (keys.ROCGLM_SCALE_RANGE, "rocglm noisy scores only on the score range {rest}"),
        (keys.CLUSTERED_EDGES, "clustered summaries in the clear only on bin edges {value}"),
        (keys.CLUSTERED_MOMENTS, "clustered round 2 in the clear only with arguments {value}"),
        (keys.CLUSTERED_SECURE_EDGES, "secure clustered summaries only on bin edges {value}"),
        (keys.CLUSTERED_SECURE_MOMENTS, "secure clustered round 2 only with arguments {value}"),
        (keys.CLUSTERED_ROWS_SESSION, "read its rows for secure clustered session {rest}"),
        (
            keys.CLEAR_EDGES,
            "cut its scores in the clear at clustered bin edges (which of them split its "
            "rows, a function of its scores, its ledger keeps)",
        ),
        (keys.JOINT_GRID, "two-score histograms only on the grid {value}"),
    )


def _describe_other(key: str, value: Any) -> str:
    """Say the bindings of the methods in a sentence; another key as ``key = value``."""
    from fedroc.privacy import keys

    for prefix, sentence in _other_bindings():
        if key.startswith(prefix):
            rest = _short_id(key[len(prefix) :])
            if prefix == keys.ARGUMENT:
                function, _, argument = rest.rpartition(":")
                rest = f"{function} with {argument} =" if function else rest
            return sentence.format(rest=rest, value=_shown(value))
    return f"{key} = {_shown(value)}"


privacy_app = typer.Typer(
    name="privacy",
    help="The sites' privacy ledgers: budget spent, limits, secure-aggregation partners.",
    no_args_is_help=True,
)


@privacy_app.command("status")
def status(
    audit_dir: Annotated[
        Path,
        typer.Option(
            "--audit-dir",
            help="Directory of the sites' audit logs; each site's ledger lies beside its log "
            "(<site>.ledger.jsonl). A `fedroc flower up --dir` directory too (its "
            "nodes/<site>/audit.ledger.jsonl).",
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Each site's privacy spending (basic composition) against its limits."""
    from fedroc.privacy.ledger import LEDGER_SUFFIX, read_ledger_status

    if not audit_dir.exists():  # "is not a directory" read as if it were a file
        raise InputError(
            f"--audit-dir {str(audit_dir)!r} does not exist; give the directory the sites "
            "wrote their audit logs to (evaluate --audit-dir)"
        )
    if not audit_dir.is_dir():
        raise InputError(f"--audit-dir {str(audit_dir)!r} is a file, not a directory")
    # A `fedroc flower up --dir` deployment keeps each site's ledger in nodes/<site>/.
    paths = sorted(audit_dir.glob(f"*{LEDGER_SUFFIX}")) or sorted(
        audit_dir.glob(f"nodes/*/*{LEDGER_SUFFIX}")
    )
    if not paths:
        raise InputError(
            f"no privacy ledger (*{LEDGER_SUFFIX}) in {str(audit_dir)!r} nor in its "
            "nodes/<site>/ (a `fedroc flower up --dir` deployment); sites keep theirs "
            "beside their audit logs"
        )
    statuses = [read_ledger_status(p) for p in paths]
    if as_json:
        emit_json(
            {
                "sites": [
                    {
                        "site": s.site,
                        "ledger": str(s.path),
                        "releases": s.releases,
                        "epsilon": s.epsilon,
                        "delta": s.delta,
                        "epsilon_limit": s.epsilon_limit,
                        "delta_limit": s.delta_limit,
                        "min_count": s.min_count,
                        "epsilon_by_function": s.by_function,
                        "spending": [
                            {
                                "for": release_label(source, row["function"], row["note"]),
                                "function": source,
                                "released_by": row["function"],
                                "epsilon": row["epsilon"],
                                "delta": row["delta"],
                                "releases": row["releases"],
                            }
                            for source, row in s.by_source.items()
                        ],
                        "bindings": public_bindings(s.bindings),
                        "binding_notes": binding_notes(s.bindings),
                        "last_entry": s.last,
                        "unreadable_lines": s.unreadable,
                    }
                    for s in statuses
                ]
            }
        )
        return
    rows = [
        [
            s.site,
            s.releases,
            s.epsilon,
            s.epsilon_limit,
            f"{s.delta:.3g}",
            "-" if s.delta_limit is None else f"{s.delta_limit:.3g}",
            s.min_count,
            len(s.bindings),
        ]
        for s in statuses
    ]
    out.print(
        grid_table(
            "Privacy spent (basic composition)",
            _STATUS_HEADER,
            rows,
        )
    )
    for s in statuses:  # what the budget went to, then what the site is bound to
        for source, row in s.by_source.items():
            what = release_label(source, row["function"], row["note"])
            delta = f", delta {row['delta']:.3g}" if row["delta"] else ""
            out.print(
                f"{s.site}: epsilon {row['epsilon']:.4g}{delta} for {what} "
                f"({row['releases']} release(s))",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        for note in binding_notes(s.bindings).values():
            out.print(f"{s.site}: {note}", markup=False, highlight=False, soft_wrap=True)
    for s in statuses:
        if s.unreadable:
            err.print(
                f"warning: {s.unreadable} line(s) of {str(s.path)!r} are not ledger entries: "
                "a write torn by a crash (nothing was released then) or damage (the spending "
                "such a line recorded is not counted above); compare with a copy",
                markup=False,
                highlight=False,
            )
