"""``fedroc flower superlink``: Flower's ``flower-superlink`` with fedroc's defaults.

It is the stock SuperLink (same flags, same APIs); the launcher only sets what a fedroc
deployment needs and is easy to forget: structured, timestamped logs (:mod:`._logs`), the
ServerApp task poll of 0.1 s (Flower's default adds up to a second per job), no runtime
dependency installation (fedroc is installed; Flower would otherwise build a fresh
environment per run without it), and, unless told otherwise, SuperNode authentication and
a database, so that a restarted SuperLink still knows its registered nodes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["main", "superlink_args"]


def superlink_args(args: Sequence[str]) -> list[str]:
    """``args`` completed with fedroc's defaults (explicit flags always win)."""
    out = list(args)
    given = {a.split("=", 1)[0] for a in out if a.startswith("--")}
    if "--disable-runtime-dependency-installation" not in given:
        out.append("--disable-runtime-dependency-installation")
    return out


def main(argv: Sequence[str] | None = None) -> None:
    from fedroc.federation.flower._logs import configure

    os.environ.setdefault("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", "0.1")
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")
    args = superlink_args(sys.argv[1:] if argv is None else argv)
    configure("superlink")
    from flwr.superlink.cli import flower_superlink

    sys.argv = ["flower-superlink", *args]
    flower_superlink()


if __name__ == "__main__":
    main()
