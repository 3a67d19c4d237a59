"""``fedroc flower superlink``: Flower's ``flower-superlink`` with fedroc's defaults.

It is the stock SuperLink (same flags, same APIs); the launcher only sets what a fedroc
deployment needs and is easy to forget: structured, timestamped logs (:mod:`._logs`), no
runtime dependency installation (fedroc is installed; Flower would otherwise build a fresh
environment per run, without it), a ServerApp task poll of 0.1 s, and fedroc's warm
ServerApp executor (:mod:`.serverexec`: the SuperLink runs with ``--isolation process`` and
a child process forks each job's ServerApp with fedroc already loaded).
``--serverapp-executor stock`` keeps Flower's own SuperExec (a new ``flwr-serverapp``
process per job); so does an explicit ``--isolation``, another Flower version, or a platform
without ``fork``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

from fedroc.federation.flower._process import option_value

__all__ = ["main", "superlink_args"]

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", "8000"  # Flower 1.41's defaults


def _pop_option(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
            del args[i : i + 2]
            return value
        if arg.startswith(name + "="):
            del args[i]
            return arg.split("=", 1)[1]
    return None


def warm_executor_possible() -> bool:
    """Whether fedroc's ServerApp executor can run here (Flower 1.41, ``os.fork``)."""
    if not hasattr(os, "fork"):
        return False
    try:
        from fedroc.federation.flower._tuning import check_flower_version

        check_flower_version()
    except Exception:
        return False
    return True


def superlink_args(args: Sequence[str], *, warm: bool) -> list[str]:
    """``args`` completed with fedroc's defaults (explicit flags always win)."""
    out = list(args)
    given = {a.split("=", 1)[0] for a in out if a.startswith("--")}
    if "--disable-runtime-dependency-installation" not in given:
        out.append("--disable-runtime-dependency-installation")
    if warm and "--isolation" not in given:
        out += ["--isolation", "process"]
    return out


def executor_command(args: Sequence[str]) -> list[str]:
    """Return the command of fedroc's ServerApp executor for a SuperLink started with ``args``."""
    host = option_value(args, "--host") or DEFAULT_HOST
    port = option_value(args, "--port") or DEFAULT_PORT
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    cmd = [sys.executable, "-m", "fedroc.federation.flower.serverexec"]
    cmd += ["--runtime-api-address", address]
    ca = option_value(args, "--ssl-ca-certfile")
    if "--insecure" in args or ca is None:
        cmd.append("--insecure")
    else:
        cmd += ["--root-certificates", ca]
    return cmd


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``fedroc flower superlink``: Flower's SuperLink with fedroc's defaults (blocks)."""
    from fedroc.federation.flower._logs import configure
    from fedroc.federation.flower._process import die_with_parent

    os.environ.setdefault("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", "0.1")
    os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
    os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")
    args = list(sys.argv[1:] if argv is None else argv)
    choice = _pop_option(args, "--serverapp-executor") or "warm"
    if choice not in ("warm", "stock"):
        sys.exit(f"--serverapp-executor must be 'warm' or 'stock'; got {choice!r}")
    warm = (
        choice == "warm"
        and option_value(args, "--isolation") is None
        and "--simulation" not in args
        and warm_executor_possible()
    )
    args = superlink_args(args, warm=warm)
    configure("superlink")
    if warm:
        # It waits for the SuperLink's port by itself, and dies with this process.
        subprocess.Popen(executor_command(args), preexec_fn=die_with_parent)
    from flwr.superlink.cli import flower_superlink

    sys.argv = ["flower-superlink", *args]
    flower_superlink()


if __name__ == "__main__":
    main()
