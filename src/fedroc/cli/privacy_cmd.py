"""``fedroc privacy``: what the sites have spent of their privacy budgets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedroc.cli._common import emit_json, err, grid_table, out
from fedroc.cli._options import JsonOption
from fedroc.exceptions import InputError

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
            "(<site>.ledger.jsonl).",
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
    paths = sorted(audit_dir.glob(f"*{LEDGER_SUFFIX}"))
    if not paths:
        raise InputError(
            f"no privacy ledger (*{LEDGER_SUFFIX}) in {str(audit_dir)!r}; sites keep theirs "
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
                        "bindings": s.bindings,
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
            ["site", "DP releases", "epsilon", "limit", "delta", "limit", "min count", "bindings"],
            rows,
        )
    )
    for s in statuses:
        for key, value in s.bindings.items():
            out.print(f"{s.site}: {key} = {value}", markup=False, highlight=False)
    for s in statuses:
        if s.unreadable:
            err.print(
                f"warning: {s.unreadable} line(s) of {str(s.path)!r} are not ledger entries: "
                "a write torn by a crash (nothing was released then) or damage (the spending "
                "such a line recorded is not counted above); compare with a copy",
                markup=False,
                highlight=False,
            )
