"""``fedroc flower superlink``: Flower's ``flower-superlink`` with fedroc's defaults.

It is the stock SuperLink (same flags, same APIs); the launcher only sets what a fedroc
deployment needs and is easy to forget: structured, timestamped logs (:mod:`._logs`), no
runtime dependency installation (fedroc is installed; Flower would otherwise build a fresh
environment per run, without it), a ServerApp task poll of 0.1 s, and fedroc's warm
ServerApp executor (:mod:`.serverexec`: the SuperLink runs with ``--isolation process`` and
a child process forks each job's ServerApp with fedroc already loaded).
``--serverapp-executor stock`` keeps Flower's own SuperExec (a new ``flwr-serverapp``
process per job); so does an explicit ``--isolation``, another Flower version, or a platform
without ``fork``. On Flower 1.41 requests also skip the HTTP middleware that has nothing to
do for them (:mod:`._middleware`), and the state is kept in memory with the node
registrations in the ``--database`` file (``--link-state memory``, :mod:`._linkstate`;
``--link-state sql``: Flower's SQL state in that file). ``FEDROC_FLOWER_TUNING=off`` keeps
Flower's stack and its SQL state.
"""

from __future__ import annotations

import argparse
import atexit
import difflib
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from fedroc.federation.flower._process import option_value

__all__ = ["check_flower_flags", "main", "requested_address", "superlink_args"]

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", "8000"  # Flower 1.41's defaults


def requested_address(args: Sequence[str]) -> tuple[str | None, str]:
    """Return the ``--port`` (None where not given) and ``--host`` that ``args`` ask for.

    The command line checks them before it hands ``args`` to Flower, whose parser answers a
    bad port with its whole usage text and a taken one with exit status 1.
    """
    return option_value(args, "--port"), option_value(args, "--host", DEFAULT_HOST)


#: The launcher's own flags (:func:`main`), taken out before Flower's parser reads the rest.
FEDROC_FLAGS = ("--serverapp-executor", "--link-state")


def check_flower_flags(args: Sequence[str]) -> None:
    """Refuse an option ``flower-superlink`` does not take, in one line naming it.

    The flags pass through to Flower (docs/flower.md), whose parser answered a misspelt one
    (``--prot 9093``) with its usage, 19 lines, and "flower-superlink: error: unrecognized
    arguments" after the launcher had started the warm executor, and took an abbreviation
    (``--po 9093`` for ``--port``) that the launcher's own reading of the flags (the port
    check, the warm executor's address, ``--database``) did not see. Flower's parser reads
    them here with abbreviations off, before anything starts; without it (another Flower
    version) Flower's own answer stands.

    Raises
    ------
    InputError
        Naming the unknown option (and the likeliest one meant), or an option whose value
        Flower refuses.
    """
    from fedroc.exceptions import InputError

    rest = list(args)
    for flag in FEDROC_FLAGS:
        while any(a == flag or a.startswith(flag + "=") for a in rest):
            if _pop_option(rest, flag) is None:
                raise InputError(f"{flag} needs a value")
    try:
        from flwr.superlink.cli.flower_superlink import _parse_args_run_superlink

        parser = _parse_args_run_superlink()
    except Exception:  # another Flower version: its parser answers
        return
    parser.allow_abbrev = False
    parser.exit_on_error = False
    try:
        _, unknown = parser.parse_known_args(rest)
    except argparse.ArgumentError as exc:
        raise InputError(f"{exc.argument_name or 'flower-superlink'}: {exc.message}") from None
    if not unknown:
        return
    first = unknown[0]
    if not first.startswith("-"):
        raise InputError(f"fedroc flower superlink takes no argument {first!r} (only flags)")
    name = first.split("=", 1)[0]
    known = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    near = difflib.get_close_matches(name, [*known, *FEDROC_FLAGS], n=1)
    hint = f"; did you mean {near[0]}?" if near else ""
    raise InputError(
        f"unknown option {name} for fedroc flower superlink (it takes flower-superlink's "
        f"flags and {', '.join(FEDROC_FLAGS)}){hint}"
    )


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
    secret = option_value(args, "--superexec-auth-secret-file")
    if secret is not None:
        cmd += ["--superexec-auth-secret-file", secret]
    return cmd


SECRET_NAME = "superexec.secret"


def superexec_secret_args(args: Sequence[str]) -> tuple[list[str], Path | None]:
    """``args`` with a SuperExec secret (Flower's ``--superexec-auth-secret-file``).

    The SuperLink serves its Runtime API on the port it serves the sites on. Without
    Flower's SuperExec authentication, anyone who can reach that port (any site holding the
    CA certificate) can call ``AcquireTask`` and take the analyst's ServerApp task: the job
    then fails, or the taker answers in its place. With a secret, only the holder (fedroc's
    executor) can; a fresh 32-byte secret is written next to the ``--database`` file (or in
    a private temporary directory, returned to be removed at exit) unless one is given.
    """
    out = list(args)
    if option_value(out, "--superexec-auth-secret-file") is not None:
        return out, None
    database = option_value(out, "--database")
    temporary = None
    if database and database not in (IN_MEMORY, ":memory:") and "://" not in database:
        path = Path(database).resolve().parent / SECRET_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
    else:
        temporary = Path(tempfile.mkdtemp(prefix="fedroc-superlink-"))
        path = temporary / SECRET_NAME
    path.touch(mode=0o600)
    os.chmod(path, 0o600)
    path.write_bytes(secrets.token_bytes(32))
    return [*out, "--superexec-auth-secret-file", str(path)], temporary


IN_MEMORY = ":flwr-in-memory:"  # Flower's name of its in-memory state


def link_state_args(args: Sequence[str], *, tunable: bool) -> list[str]:
    """``args`` with fedroc's ``--link-state`` applied (see :mod:`._linkstate`).

    ``memory`` (the default where fedroc may tune Flower): Flower's in-memory state, the
    node registrations in the ``--database`` file; ``sql``: Flower's SQL state in it.
    """
    out = list(args)
    choice = _pop_option(out, "--link-state") or ("memory" if tunable else "sql")
    if choice not in ("memory", "sql"):
        sys.exit(f"--link-state must be 'memory' or 'sql'; got {choice!r}")
    if choice == "sql":
        return out
    if not tunable:
        sys.exit(
            "--link-state memory needs Flower 1.41 and FEDROC_FLOWER_TUNING not 'off'; "
            "use --link-state sql"
        )
    database = _pop_option(out, "--database")
    if database is not None and "://" in database:
        sys.exit(
            f"--link-state memory keeps the node registrations in an SQLite file; got "
            f"--database {database!r} (use --link-state sql for database URLs)"
        )
    from fedroc.federation.flower._linkstate import use_registry_state

    use_registry_state(None if database in (None, IN_MEMORY, ":memory:") else database)
    return [*out, "--database", IN_MEMORY]


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``fedroc flower superlink``: Flower's SuperLink with fedroc's defaults (blocks)."""
    from fedroc.exceptions import InputError
    from fedroc.federation.flower._logs import configure
    from fedroc.federation.flower._middleware import tune_superlink_middleware, tuning_enabled
    from fedroc.federation.flower._process import die_with_parent
    from fedroc.federation.flower._tuning import tune_log_stream

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
    if warm:  # Flower checks the secret in process isolation only (the warm executor's)
        args, temporary = superexec_secret_args(args)
        if temporary is not None:
            atexit.register(shutil.rmtree, temporary, ignore_errors=True)
    tunable = tuning_enabled()
    if tunable:
        try:
            tune_superlink_middleware()
            tune_log_stream()
        except InputError as exc:  # another Flower version: its own stack, unchanged
            logging.getLogger("fedroc.flower").warning("%s", exc)
            tunable = False
    args = link_state_args(args, tunable=tunable)
    if warm:
        # It waits for the SuperLink's port by itself, and dies with this process.
        subprocess.Popen(executor_command(args), preexec_fn=die_with_parent)
    from flwr.superlink.cli import flower_superlink

    sys.argv = ["flower-superlink", *args]
    flower_superlink()


if __name__ == "__main__":
    main()
