"""What the studies share when they write a result table: its provenance and its file.

A table's header names the command, the seed and the commit it was made with
(scripts/README.md); the studies build the command and the commit here and write the table
through :func:`write_result`. Import it as the scripts import each other, from ``scripts/``
(``from _results import git_commit``).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def git_commit() -> str:
    """The commit the script runs from, marked ``+dirty`` when tracked files differ."""
    here = Path(__file__).resolve().parent

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=here, capture_output=True, text=True)
        return out.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def command_line(script: str, argv: Sequence[str] | None) -> str:
    """The command a table's header names: ``python scripts/SCRIPT`` and its arguments.

    ``argv`` as ``main(argv)`` got it (None: the process's own arguments); an argument
    with a space is quoted, so that the command can be pasted back.
    """
    args = sys.argv[1:] if argv is None else argv
    return f"python scripts/{script} " + " ".join(f'"{a}"' if " " in a else a for a in args)


def write_result(path: Path, text: str) -> Path:
    """Write a result table to ``path``, creating its folder; return ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
