"""The ``fedroc`` command line.

Every command prints a readable table by default and exactly one JSON object on stdout with
``--json``; logs and progress go to stderr. Errors print one line naming what was wrong
(with ``--json``: one JSON object ``{"error": ...}`` on stdout) and exit with status 2; see
:func:`fedroc.cli._common.error_exit_code`.

``fedroc --help`` imports every command module to list the commands, so the command modules
import numpy, pandas, scipy and the optional extras inside their functions, not at the top
(``tests/test_cli_errors.py`` checks it).
"""

from __future__ import annotations

import functools
import re
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import typer

from fedroc.cli._common import (
    COMMAND_LINE,
    INTERRUPT_SAID,
    INTERRUPTED,
    err,
    error_exit_code,
    needs_extra,
    redeliver_dropped_interrupts,
    show_warning,
)
from fedroc.cli.clustered_cmd import clustered
from fedroc.cli.demo_cmd import demo
from fedroc.cli.evaluate_cmd import evaluate_command
from fedroc.cli.figures_cmd import figures
from fedroc.cli.flower_cmd import flower_app
from fedroc.cli.metrics_cmd import metrics
from fedroc.cli.mpc_cmd import mpc_app
from fedroc.cli.privacy_cmd import privacy_app
from fedroc.cli.sequester_cmd import sequester_app

app = typer.Typer(
    name="fedroc",
    help="Validate binary classifiers on test data that cannot be pooled.\n\n"
    "Exit status: 0 on success; 2 for an error you can fix (bad option or value, missing "
    "file or column, a site's refusal, a missing optional extra: one line on stderr, or one "
    'JSON object {"error": ...} on stdout with --json); 1 for a bug in fedroc; 130 when '
    "stopped by Ctrl-C (flower up, which runs until Ctrl-C: 0).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Commands of other modules that need an optional extra, checked before they start (rather
# than halfway, e.g. after `flower up` has written certificates). Any other command that
# imports a missing extra is reported the same way by error_exit_code.
COMMAND_EXTRAS: dict[tuple[typer.Typer, str], str] = {
    (flower_app, "up"): "flower",
    (flower_app, "run"): "flower",
    (flower_app, "supernode"): "flower",
    (flower_app, "executor"): "flower",
    (sequester_app, "serve"): "service",
}
for (_group, _name), _extra in COMMAND_EXTRAS.items():
    for _info in _group.registered_commands:  # a renamed command is caught by the tests
        if _info.name == _name and _info.callback is not None:
            _path = f"fedroc {_group.info.name} {_name}"
            _info.callback = needs_extra(_extra, _path)(_info.callback)


def _print_version(value: bool) -> None:
    if value:
        from fedroc._version import __version__

        typer.echo(f"fedroc {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print fedroc's version and exit.",
    ),
) -> None:
    """Validate binary classifiers on test data that cannot be pooled."""


app.command("metrics")(metrics)
app.command("evaluate")(evaluate_command)
app.command("demo")(demo)
app.add_typer(sequester_app)
app.command("clustered")(clustered)
app.add_typer(mpc_app, name="mpc")
app.add_typer(flower_app, name="flower")
app.add_typer(privacy_app, name="privacy")
app.command("figures")(figures)


@functools.cache
def click_command() -> Any:
    """Return the click command of :data:`app`, built once per process.

    Calling the typer app builds it anew every time (every command's signature and type
    hints: 0.2 s per call, a quarter of a quick command's run in process); the command is
    what typer would build, and click makes a fresh context for every run of it. Errors
    reach :func:`main` as from the typer app (which adds only its traceback hook, unused:
    :func:`main` reports every error itself).
    """
    command = typer.main.get_command(app)
    _plain_help(command)
    _plain_metavars(command)
    commands = getattr(command, "commands", {})
    _method_panels(commands.get("evaluate"))
    _method_panels(getattr(commands.get("flower"), "commands", {}).get("run"))
    _negations_in_help(command)
    _note_repeats(command)
    return command


def _with_negation(flag: Any, escape: Any) -> str:
    """Return the help of ``flag`` saying what its negation does (unless it says so)."""
    negation = ", ".join(flag.secondary_opts)
    text = flag.help or ""
    if all(opt in text for opt in flag.secondary_opts):
        return text
    if flag.default is True:
        note = f"(Default: on; {negation} turns it off.)"
    elif flag.default is False:
        note = f"(Default: off, as {negation}.)"
    else:
        note = f"({negation} turns it off.)"
    return f"{text} {escape(note)}".strip()


def _negations_in_help(command: Any) -> None:
    """Name a flag's negation (``--no-insecure``) in its help text, not in a column of its own.

    typer's option table gives negations a column beside the names; where the table did
    not fit (80 columns), rich narrowed the name columns with the help and cut the names:
    ``fedroc clustered --help`` showed ``--population-estim…`` and ``--no-pair-correcti…``,
    ``flower executor --help`` ``--superexec-auth-secret…``. While a command's help is
    formatted, its flags have no secondary names and their help says the negation
    instead of ``[default: ...]``; parsing is untouched.
    """
    from rich.markup import escape

    for sub in getattr(command, "commands", {}).values():
        _negations_in_help(sub)
    flags = [p for p in command.params if getattr(p, "secondary_opts", None)]
    if not flags:
        return
    shown = {flag: _with_negation(flag, escape) for flag in flags}
    format_help = command.format_help

    def format_with_negations_in_help(ctx: Any, formatter: Any) -> Any:
        saved = [(f, f.secondary_opts, f.help, f.show_default) for f in flags]
        for flag in flags:
            flag.secondary_opts, flag.help, flag.show_default = [], shown[flag], False
        try:
            return format_help(ctx, formatter)
        finally:
            for flag, secondary, text, show_default in saved:
                flag.secondary_opts, flag.help, flag.show_default = secondary, text, show_default

    command.format_help = format_with_negations_in_help


def _note_repeats(command: Any) -> None:
    """Make every command say on stderr when an option that takes one value is given twice.

    click keeps the last value, as most command lines do (a later option overrides one in
    an alias or a script), but silently: ``fedroc metrics f.csv --label y --label z`` used
    'z' and then said only that 'z' was not binary. Repeatable options (``--site``,
    ``--at-specificity``) and flags are not affected.
    """
    subs = getattr(command, "commands", None)
    if subs:
        for sub in subs.values():
            _note_repeats(sub)
        return
    # By duck type: typer >= 0.21 carries its own copy of click, and no `click` to import.
    single = {
        opt: param
        for param in command.params
        if getattr(param, "param_type_name", None) == "option"
        and not any(getattr(param, a, False) for a in ("multiple", "count", "is_flag"))
        for opt in param.opts
    }
    parse = command.parse_args

    def parse_args(ctx: Any, args: list[str]) -> list[str]:
        given: dict[str, list[str]] = {}
        i = 0
        while i < len(args) and args[i] != "--":
            name, eq, value = args[i].partition("=")
            param = single.get(name)
            if param is None:
                i += 1
                continue
            if not eq:  # "--label y": the value is the next word (which may look like an option)
                value = args[i + 1] if i + 1 < len(args) else ""
                i += 1
            given.setdefault(param.opts[0], []).append(value)
            i += 1
        for opt, values in given.items():
            if len(values) > 1:
                shown = ", ".join(repr(v) for v in values)
                err.print(
                    f"note: {opt} given {len(values)} times ({shown}); the last, "
                    f"{values[-1]!r}, applies",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
        return parse(ctx, args)

    command.parse_args = parse_args


# typer >= 0.21's type labels -> the names click gives the same types (typer < 0.21).
_TYPE_NAMES = {
    "str": "TEXT",
    "float": "FLOAT",
    "int": "INTEGER",
    "path": "PATH",
    "file": "FILE",
    "directory": "DIRECTORY",
    "int range": "INTEGER RANGE",
    "float range": "FLOAT RANGE",
}


def _plain_metavar(param: Any) -> None:
    """Give a parameter of typer >= 0.21 the value name click gives it, a flag none."""
    if getattr(param, "type", None) is not None or not hasattr(param, "display_type"):
        return  # click's own types (typer < 0.21) already read TEXT, FLOAT, ...
    option = getattr(param, "param_type_name", "") == "option"
    if option and param.metavar is not None:
        return
    if option and (getattr(param, "is_flag", False) or getattr(param, "is_bool_flag", False)):
        param.metavar = ""
        return
    try:
        label = str(param.display_type(None)).strip("<>")
    except Exception:  # a type that needs the context (choices): leave typer's label
        return
    listed = re.fullmatch(r"list\[(.+)\]", label, flags=re.IGNORECASE)
    name = _TYPE_NAMES.get((listed.group(1) if listed else label).lower())
    if name is None:
        return
    if option:
        param.metavar = name
    else:  # an argument's metavar is its name: only the type column changes
        param.display_type_rich = lambda ctx: name


def _plain_metavars(command: Any) -> None:
    """Name option values as click does (TEXT, FLOAT, PATH) on every typer; flags take none.

    typer >= 0.21, which a plain ``pip install fedroc`` gets (flwr pins 0.20), labels values
    by their Python types and flags as taking one: ``fedroc mpc certs --help`` showed
    ``--host <list[str]>``, ``--timeout <float>`` and ``--help <bool>``, which read as
    ``--help true``. Options that name their value (``--site NAME=PATH``) keep it.
    """
    for sub in getattr(command, "commands", {}).values():
        _plain_metavars(sub)
    for param in command.params:
        _plain_metavar(param)
    get_help_option = command.get_help_option

    def help_option_without_value(ctx: Any) -> Any:
        option = get_help_option(ctx)
        if option is not None:
            _plain_metavar(option)
        return option

    command.get_help_option = help_option_without_value


_METHOD_PREFIX = re.compile(r"\b(pooled|rocglm|histogram|mpc|clustered): (.*)", re.DOTALL)


def _method_panels(command: Any) -> None:
    """Group the options that one method takes under a panel of their own.

    ``fedroc evaluate --help`` listed its 60 options in one panel (``fedroc flower run --help``
    its 45), the common ones among those of single methods (whose help began with "rocglm: ",
    "mpc: ", ...): a reader looking for what applies to their method read them all. An
    option's help that names one method moves to the panel "Options of --method NAME",
    without the prefix.
    """
    for param in [] if command is None else command.params:
        found = _METHOD_PREFIX.fullmatch(getattr(param, "help", None) or "")
        # --bootstrap's "rocglm: ...; pooled: ..." serves two methods: it stays in Options.
        if found is not None and not _METHOD_PREFIX.search(found.group(2)):
            param.rich_help_panel = f"Options of --method {found.group(1)}"
            param.help = found.group(2)


def _plain_help(command: Any) -> None:
    """Make the help texts of ``command`` and its subcommands read as they were written.

    typer renders help as rich markup and keeps the single line breaks of every paragraph
    after the first, so a docstring wrapped at 92 columns came out in ragged half-lines
    (``fedroc evaluate --help``), and a word in square brackets vanished as a markup tag
    (``fedroc mpc owner-key --help``: "the line to add under ."). Paragraphs are joined
    into lines (rich wraps them to the terminal) and brackets are escaped.
    """
    from rich.markup import escape

    def clean(text: str) -> str:
        paragraphs = text.split("\n\n")
        return "\n\n".join(escape(" ".join(p.split("\n"))) for p in paragraphs)

    if command.help:
        command.help = clean(command.help)
    for param in command.params:
        if getattr(param, "help", None):
            param.help = clean(param.help)
    for sub in getattr(command, "commands", {}).values():
        _plain_help(sub)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run one command; every error ends as the CLI contract says."""
    args = list(sys.argv[1:] if argv is None else argv)
    COMMAND_LINE[:] = args  # for the provenance of reports
    INTERRUPT_SAID.clear()
    try:
        with warnings.catch_warnings(), redeliver_dropped_interrupts():
            # catch_warnings restores Python's format when the command ends.
            warnings.showwarning = show_warning  # one line each, not typer's file and line
            # standalone_mode=False: errors reach us instead of click's multi-line usage box.
            code = click_command().main(args=args, prog_name="fedroc", standalone_mode=False)
    except SystemExit:
        raise
    except BaseException as exc:  # every other way out is reported as the contract says
        sys.exit(error_exit_code(exc, args))
    # Without standalone mode, click returns the status of typer.Exit / ctx.exit instead of
    # exiting; commands themselves return None.
    if code == INTERRUPTED and not INTERRUPT_SAID.is_set():
        # typer turns Ctrl-C into Exit(130), which click hands back as a status: every
        # command stopped so ended without a word (the MPC walkthrough's find).
        sys.exit(error_exit_code(KeyboardInterrupt(), args))
    if isinstance(code, int) and code != 0:
        sys.exit(code)
