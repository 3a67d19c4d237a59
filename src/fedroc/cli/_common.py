"""Output helpers shared by the commands.

One JSON object on stdout with --json, readable tables otherwise; logs and progress on stderr.

Also the error contract of every command (:func:`error_exit_code`): fedroc's own errors,
usage errors, missing optional extras and operating-system errors become one line on
stderr, or with ``--json`` one JSON object ``{"error": ...}`` on stdout, and exit status 2.

This module is imported by ``fedroc --help``: nothing heavy (numpy, pandas, scipy) at the
top; those are imported inside the functions that need them.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import typer
from rich.console import Console
from rich.text import Text

from fedroc.exceptions import DisclosureError, FedrocError, InputError, SiteError, warn_user

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table

    from fedroc.data import Columns, SiteData
    from fedroc.metrics import CalibrationCurve

F = TypeVar("F", bound=Callable[..., Any])

out = Console()
if not out.is_terminal:  # piped or captured: do not squeeze tables into 80 columns
    out = Console(width=120)
# Lines on stderr stay whole (soft wrap): a warning, a key to copy or a path is one line,
# not cut at 80 columns when stderr is a pipe or a log file.
err = Console(stderr=True, soft_wrap=True)

#: The arguments of the running command (set by :func:`fedroc.cli.main`), for provenance.
COMMAND_LINE: list[str] = []


def command_line() -> str:
    """Return the running command as a shell line (``fedroc evaluate ...``)."""
    import shlex

    return "fedroc " + shlex.join(COMMAND_LINE or sys.argv[1:])


#: Exit status of every error a user can act on (bad input, usage, missing extra, OS error).
USER_ERROR = 2
#: Exit status of a bug in fedroc (the traceback goes to stderr).
INTERNAL_ERROR = 1
#: Exit status of a command stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
INTERRUPTED = 130
#: Set by a command that said in its own words that Ctrl-C stopped it (``fedroc mpc party``
#: names the job it interrupted), so that :func:`fedroc.cli.main` adds no second line.
INTERRUPT_SAID = threading.Event()


@contextmanager
def redeliver_dropped_interrupts() -> Iterator[None]:
    """Deliver again a Ctrl-C that CPython dropped, for as long as the block runs.

    Python raises Ctrl-C's KeyboardInterrupt wherever the main thread happens to be. When
    that is a finaliser or a garbage collector's weakref callback, CPython prints "Exception
    ignored in ..." and drops it, and the command ran on as if never interrupted
    (``fedroc figures --paper 5`` stopped during Figure 4 ran 60 s more and exited 0, 1 time
    in 3 under load). ``sys.unraisablehook`` is where CPython hands such an exception; a
    KeyboardInterrupt found there is delivered to the main thread again, as if Ctrl-C had been
    pressed once more, and lands in ordinary code, where the command's own handling (or
    :func:`fedroc.cli.main`'s one line) takes it. Other unraisable exceptions go to the hook
    that was in place. A command that catches Ctrl-C itself gets no second one: only a dropped
    interrupt is delivered again.
    """
    import _thread
    import signal

    previous = sys.unraisablehook
    running = threading.Event()
    running.set()

    def deliver() -> None:
        if running.is_set():  # not after the block has ended (outside fedroc's handling)
            _thread.interrupt_main(signal.SIGINT)

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            # From another thread, a moment later: an interrupt delivered at once would be
            # raised inside this hook, where CPython drops it again without calling the hook.
            timer = threading.Timer(0.05, deliver)
            timer.daemon = True
            timer.start()
        else:
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        running.clear()
        sys.unraisablehook = previous


# Module -> (distribution, extra of pyproject.toml that installs it). An ImportError of one
# of these modules means "install this extra", not a bug; tests/test_cli_errors.py checks the
# table against pyproject.toml.
EXTRA_MODULES: dict[str, tuple[str, str]] = {
    "flwr": ("flwr", "flower"),
    "fastapi": ("fastapi", "service"),
    "uvicorn": ("uvicorn", "service"),
    "sqlalchemy": ("sqlalchemy", "service"),
    "httpx": ("httpx", "service"),
    "alembic": ("alembic", "service"),
    "fastapi_offline": ("fastapi-offline", "service"),
    "psycopg": ("psycopg", "postgres"),
    "sklearn": ("scikit-learn", "examples"),
    "sksurv": ("scikit-survival", "examples"),
}


class MissingExtraError(FedrocError):
    """A command needs an optional extra of fedroc that is not installed."""

    def __init__(
        self, extra: str, module: str, *, installed: bool = False, command: str | None = None
    ) -> None:
        self.extra = extra
        self.module = module
        self.install = f"pip install 'fedroc[{extra}]'"
        if installed:  # present but too old or too new: an import inside it failed
            why = f"the installed {module} does not fit this fedroc"
        else:
            why = f"{module} is not installed"
        who = command or "this command"
        super().__init__(f"{who} needs fedroc's {extra!r} extra ({why}): {self.install}")


def require_extra_known(extra: str) -> None:
    known = {dist_extra for _, dist_extra in EXTRA_MODULES.values()}
    if extra not in known:
        raise ValueError(f"unknown extra {extra!r}; known: {sorted(known)}")


def require_extra(extra: str, *, command: str | None = None) -> None:
    """Fail with :class:`MissingExtraError` unless every module of ``extra`` is importable.

    Commands call it first (or use :func:`needs_extra`), so that a missing extra is
    reported before any work starts. An ImportError raised later is mapped by
    :func:`error_exit_code` in the same way.
    """
    require_extra_known(extra)
    for module, (_, owner) in EXTRA_MODULES.items():
        if owner == extra and importlib.util.find_spec(module) is None:
            raise MissingExtraError(extra, module, command=command)


def needs_extra(extra: str, command: str) -> Callable[[F], F]:
    """Decorate a command so that it checks ``extra`` (:func:`require_extra`) before it runs.

    ``--help`` still works without the extra: the check runs when the command is invoked.
    """
    require_extra_known(extra)

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            require_extra(extra, command=command)
            return func(*args, **kwargs)

        return cast(F, wrapper)

    return decorate


def missing_extra(exc: ImportError) -> MissingExtraError | None:
    """Name the optional extra an ImportError asks for, or None when it is about no extra."""
    name = exc.name or ""
    top = name.partition(".")[0]
    if top not in EXTRA_MODULES:
        return None
    installed = importlib.util.find_spec(top) is not None
    return MissingExtraError(EXTRA_MODULES[top][1], top, installed=installed)


def json_requested(args: Sequence[str]) -> bool:
    """Whether the command line asks for --json (read before parsing, which may fail)."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


def _usage_error_class() -> type[Any]:
    # typer >= 0.21 ships its own copy of click and exports the base of its usage errors as
    # TyperException; older typer (the one flwr pins) re-exports click, which it requires.
    base: type[Any] | None = getattr(typer, "TyperException", None)
    if base is None:
        import click

        base = click.ClickException
    return base


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def _os_message(exc: OSError) -> str:
    """Say what an OSError means where Python's text does not.

    A directory option given a file (``flower certs x.csv``, ``flower keys --node-dir
    x.csv``) failed in ``mkdir(exist_ok=True)`` as "[Errno 17] File exists: 'x.csv'".
    """
    name = exc.filename
    if isinstance(exc, FileExistsError) and name is not None and Path(name).is_file():
        return f"{str(name)!r} is a file; a directory was expected there"
    return str(exc)


def _usage_message(exc: Exception) -> str:
    """Return a usage error's text, an unknown option's in one wording whatever click's.

    click 8.1 and typer's own click print "No such option: --x", click 8.2-8.4 "No such
    option '--x'."; the README and scripts that read the JSON see one wording.
    """
    name = getattr(exc, "option_name", None)
    if type(exc).__name__ == "NoSuchOption" and isinstance(name, str):
        possible = sorted(getattr(exc, "possibilities", None) or ())
        ctx = getattr(exc, "ctx", None)
        elsewhere = ELSEWHERE.get((getattr(ctx, "command_path", ""), name), "")
        # Where the option is known elsewhere, that says it; click's close spellings of
        # `evaluate --plot` were "--epsilon or --mpc-sort or --report".
        hint = f" Did you mean {' or '.join(possible)}?" if possible and not elsewhere else ""
        return f"No such option: {name}.{hint}{elsewhere}"
    return str(exc.format_message())  # type: ignore[attr-defined]


# Options a user looks for on a command whose sibling has them: `fedroc clustered --method
# histogram` was told only "No such option: --method".
_CLUSTERED_ACROSS_SITES = (
    " fedroc clustered analyses one file; over several sites run fedroc evaluate "
    "--method clustered --cluster COL."
)
ELSEWHERE: Mapping[tuple[str, str], str] = {
    ("fedroc clustered", "--method"): _CLUSTERED_ACROSS_SITES,
    ("fedroc clustered", "--site"): _CLUSTERED_ACROSS_SITES,
    # metrics and clustered take --plot; evaluate's figures are in its report.
    ("fedroc evaluate", "--plot"): (
        " fedroc evaluate draws its figures (ROC, PR, calibration) in the HTML report: "
        "--report FILE.html."
    ),
    # and the other way round: the HTML report is evaluate's.
    ("fedroc metrics", "--report"): (
        " fedroc metrics draws its figure with --plot FILE.png; the HTML report of one file "
        "is fedroc evaluate --site NAME=FILE --method pooled --report FILE.html."
    ),
    ("fedroc clustered", "--report"): (
        " fedroc clustered draws its figures with --plot and --rug; the HTML report is "
        "fedroc evaluate --method clustered --cluster COL --report FILE.html, over 3 or "
        "more sites."
    ),
}


# Options whose one value lists numbers joined by commas (``--score-range 0,1``).
COMMA_OPTIONS = frozenset({"--score-range", "--score-levels"})
# click says "argument (x)" / "arguments (x y)"; the click inside typer >= 0.21 "argument(s) (x)".
_EXTRA_ARGUMENTS = re.compile(r"unexpected extra argument(?:s|\(s\))? \((?P<extra>[^)]*)\)")
#: Endings of the data files fedroc reads (fedroc.data.load_table), as Path.suffix gives them.
DATA_SUFFIXES = frozenset({".csv", ".parquet", ".pq", ".tsv"})


def _extra_argument_hint(message: str, args: Sequence[str], ctx: Any) -> str:
    """Say what an unexpected argument was probably meant as, or ``""``.

    ``--score-range -6 7`` (the range as two words) and ``evaluate a.csv b.csv`` (sites
    without ``--site``) were told only "Got unexpected extra argument(s)".
    """
    match = _EXTRA_ARGUMENTS.search(message)
    if match is None or ctx is None:
        return ""
    extra = match.group("extra").split()
    first = extra[0] if extra else ""
    words = list(args)
    at = words.index(first) if first in words else -1
    if at >= 2 and words[at - 2] in COMMA_OPTIONS:
        option, value = words[at - 2], words[at - 1]
        return (
            f" {option} takes one value, its numbers joined by commas: "
            f"{option}={','.join([value, *extra])}."
        )
    site = next((p for p in ctx.command.params if "--site" in getattr(p, "opts", ())), None)
    if site is not None and "NAME=PATH" in (getattr(site, "help", None) or ""):
        files = [w for w in extra if Path(w).suffix.lower() in DATA_SUFFIXES or Path(w).is_file()]
        if files:
            example = " ".join(f"--site {Path(f).stem}={f}" for f in files)
            return f" Give each site as --site NAME=PATH: {example}."
    return ""


def _misplaced_option_message(exc: Exception, args: Sequence[str], ctx: Any) -> str | None:
    """Say where an option given before its command goes, or None.

    ``fedroc --json metrics x.csv`` was told "No such option: --json. Did you mean
    --version?": the option is the command's, given before it.
    """
    name = getattr(exc, "option_name", None)
    group = getattr(ctx, "command", None)
    if type(exc).__name__ != "NoSuchOption" or not isinstance(name, str) or name not in args:
        return None
    command, path = group, [str(ctx.command_path)]
    for word in args[list(args).index(name) + 1 :]:
        subs = getattr(command, "commands", None)
        if not subs:
            break
        if word in subs:
            command = subs[word]
            path.append(word)
    if command is None or command is group or getattr(command, "commands", None):
        return None
    if not any(name in getattr(p, "opts", ()) for p in command.params):
        return None
    where = " ".join(path)
    return (
        f"No such option: {name} before the command; {name} is an option of '{where}': "
        f"give it after the command ({where} ... {name})"
    )


def error_exit_code(exc: BaseException, args: Sequence[str]) -> int:
    """Report ``exc`` as the CLI contract says and return the exit status.

    One line on stderr (``error: ...``), or with ``--json`` in ``args`` exactly one JSON
    object on stdout: ``{"error": message, "type": ..., "exit_code": ...}`` plus ``site``,
    ``function``, ``extra``, ``install`` or ``command`` when known. Errors a user can act on
    exit with 2; anything else is a bug in fedroc: its traceback goes to stderr (with
    ``--json`` too, after the JSON object) and the exit status is 1.
    """
    as_json = json_requested(args)
    payload: dict[str, Any] = {}
    code = USER_ERROR
    if isinstance(exc, ImportError) and (extra := missing_extra(exc)) is not None:
        exc = extra
    if isinstance(exc, _usage_error_class()):
        if type(exc).__name__ == "NoArgsIsHelpError":  # `fedroc flower`: show the help
            text = exc.format_message().strip()  # empty where typer already printed it
            if text:
                err.print(text, soft_wrap=True, highlight=False, markup=False)
            return USER_ERROR
        ctx = getattr(exc, "ctx", None)
        message = _misplaced_option_message(exc, args, ctx) or _usage_message(exc)
        kind = "UsageError"
        if ctx is not None:
            payload["command"] = ctx.command_path
            message = message.rstrip()
            stop = "" if message.endswith((".", "?", "!")) else "."
            hint = _extra_argument_hint(message, args, ctx)
            message = f"{message}{stop}{hint} See '{ctx.command_path} --help'."
    elif isinstance(exc, FedrocError):
        message, kind = str(exc), type(exc).__name__
        if isinstance(exc, (SiteError, DisclosureError)):
            payload["site"], payload["function"] = exc.site, exc.function
        if isinstance(exc, MissingExtraError):
            payload["extra"], payload["install"] = exc.extra, exc.install
    elif isinstance(exc, OSError):  # a file, a port, a peer: the user's to fix
        message, kind = _os_message(exc), type(exc).__name__
    elif isinstance(exc, KeyboardInterrupt):
        message, kind, code = "interrupted", "KeyboardInterrupt", INTERRUPTED
    elif isinstance(exc, typer.Abort):
        message, kind, code = "aborted", "Abort", INTERNAL_ERROR
    else:
        message = f"internal error, please report it: {type(exc).__name__}: {exc}"
        kind, code = "InternalError", INTERNAL_ERROR
    message = _one_line(message) or kind
    if as_json:  # plain json: reporting an error must not depend on numpy importing
        obj = {"error": message, "type": kind, "exit_code": code, **payload}
        sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
        sys.stdout.flush()
    else:
        err.print(Text.assemble(("error:", "bold red"), " ", message), soft_wrap=True)
    if code == INTERNAL_ERROR and kind == "InternalError":
        traceback.print_exception(exc, file=sys.stderr)
    return code


def show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """Print a warning as one line ``warning: ...`` on stderr (``warnings.showwarning``).

    Python's own format names the line that called fedroc, which on the command line is
    inside typer, and adds a second line of its source; neither helps a user of the CLI.
    fedroc's warnings are printed by their message alone, others with their category.
    """
    from fedroc.exceptions import FedrocWarning

    # The metrics' own name for the labels; a user of the CLI gave --label COL.
    text = re.sub(r"\bin y_true\b", "in the label column", _one_line(str(message)))
    if not issubclass(category, FedrocWarning):
        text = f"{category.__name__}: {text}"
    err.print(Text.assemble(("warning:", "bold yellow"), " ", text))


class CallStep(Protocol):
    """A call to the sites as a progress display sees it.

    :class:`fedroc.federation.CallProgress` in process, a relayed call of the ServerApp's log
    on Flower.
    """

    @property
    def round(self) -> int: ...
    @property
    def function(self) -> str: ...
    @property
    def sites(self) -> tuple[str, ...]: ...
    @property
    def site(self) -> str | None: ...
    @property
    def done(self) -> bool: ...


class ProgressLine:
    """The status line of a running job: its last call to the sites and the time so far.

    rich renders it at every refresh of the spinner, so the clock moves between calls.
    """

    def __init__(self, label: str, text: str) -> None:
        self.label = label
        self.start = time.monotonic()
        self.text = f"{label}: {text}"

    def update(self, step: CallStep | str) -> None:
        """Show ``step``: the round, the site function and the site reached (or a text)."""
        if isinstance(step, str):
            self.text = f"{self.label}: {step}"
            return
        phase = getattr(step, "phase", None)  # the Brier score and calibration after a method
        head = f"{self.label}: {phase + ', ' if phase else ''}round {step.round}, {step.function}"
        if step.done:
            self.text = f"{head} answered by {len(step.sites)} site(s); analyst computing"
        elif step.site is None:
            self.text = f"{head} at {len(step.sites)} site(s)"
        else:
            k = step.sites.index(step.site) + 1
            self.text = f"{head} at site {step.site!r} ({k} of {len(step.sites)})"

    def __rich__(self) -> Text:
        """Draw the line as plain text (a site name is not markup), cut to one line."""
        line = f"{self.text}  {time.monotonic() - self.start:.0f} s"
        return Text(line, no_wrap=True, overflow="ellipsis")


def sites_table(sites: Sequence[Mapping[str, Any]]) -> RenderableType:
    """Return the table of a result's sites and their sizes (``n`` None: not released)."""
    from rich.console import Group

    table = grid_table("Sites", ["site", "n"], [(s["name"], s["n"]) for s in sites])
    if any(s["n"] is None for s in sites):  # a bare "-" read as a missing value
        # A line under the table: as its caption, the table was stretched to the caption's
        # width (a site column of 37 characters for names of 5).
        return Group(table, Text("n -: this method does not release the site's row count"))
    return table


def calibration_rounds(result: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Return the table row of the calls ``evaluate`` made after the method (or none).

    The progress line numbers them apart ("Brier and calibration, round 3"), so the table
    gives both counts: a method's ``rounds`` left out 7 of ROC-GLM's 17 calls.
    """
    after = result.get("calibration_released")
    if not isinstance(after, Mapping):
        return []
    return [("rounds of Brier and calibration", after.get("rounds"))]


@contextmanager
def live_progress(console: Console, line: ProgressLine) -> Iterator[Callable[[Any], None] | None]:
    """Show ``line`` with a spinner on ``console`` while the block runs, if it is a terminal.

    Yields the function that moves the line to a new call (:meth:`ProgressLine.update`; it
    may be called from another thread), or None when ``console`` is not a terminal (a pipe
    or a log): then nothing is written.
    """
    if not console.is_terminal:
        yield None
        return
    from rich.live import Live
    from rich.spinner import Spinner

    spinner = Spinner("dots", text=line, style="status.spinner")
    with Live(spinner, console=console, transient=True, refresh_per_second=12.5) as live:

        def show(step: Any) -> None:
            line.update(step)
            live.refresh()  # draw each step now, not only at the next tick

        yield show


def name_options(exc: InputError, options: Mapping[str, str]) -> InputError:
    """Return ``exc`` with the API keywords it names written as the options that set them.

    An API function names its parameters (``noise_rate must be a positive number``); on the
    command line the message names the option (``--noise-rate must ...``). ``options`` maps
    keywords to options. A keyword is replaced as the message's first word, or anywhere when
    it has an underscore (a plain word such as ``budget`` may be English). Errors of other
    types, subclasses of InputError included (they carry more than a message), are kept.
    """
    if type(exc) is not InputError:
        return exc
    message = option_words(str(exc), options)
    return exc if message == str(exc) else InputError(message)


def option_words(message: str, options: Mapping[str, str]) -> str:
    """Return ``message`` with the API keywords it names written as options (:func:`name_options`).

    For the messages that are not errors: the warnings a command prints.
    """
    word, sep, rest = message.partition(" ")
    if word in options and rest:
        message = options[word] + sep + rest
    joined = [k for k in options if "_" in k]
    if joined:
        pattern = r"\b(" + "|".join(map(re.escape, joined)) + r")\b"
        message = re.sub(pattern, lambda m: options[m.group(1)], message)
        # "score_range=(lo, hi) (--score-range LO,HI)" gives both forms: the option's alone
        # ("pass --score-range=(lo, hi) (--score-range LO,HI)" read as a third syntax).
        message = re.sub(r"(--[\w-]+)=\([^)]*\) \((\1\b[^):]*)\)", r"\2", message)
    return message


def emit_json(obj: Any) -> None:
    """Write exactly one JSON object to stdout."""
    from fedroc._results import jsonable

    sys.stdout.write(json.dumps(jsonable(obj), indent=2, allow_nan=False) + "\n")
    sys.stdout.flush()


def figure_output(option: str, path: Path) -> Path:
    """Check a figure's output path before any work; return the file that will be written.

    Matplotlib writes ``NAME`` as ``NAME.png``, fails with a ValueError on a suffix it has no
    writer for and with FileNotFoundError in a missing folder; each came after the whole
    computation, and the message named neither the option nor (for ``NAME``) the file.
    """
    from matplotlib.backend_bases import FigureCanvasBase

    if path.is_dir():
        raise InputError(
            f"{option} {str(path)!r} is a directory; give a file name, e.g. "
            f"{str(path / 'figure.png')!r}"
        )
    if not path.suffix:
        path = path.with_name(path.name + ".png")  # what matplotlib writes
    kinds = FigureCanvasBase.get_supported_filetypes()
    if path.suffix.lower().lstrip(".") not in kinds:
        raise InputError(
            f"{option} {str(path)!r}: no figure format {path.suffix!r}; use one of "
            + ", ".join(f".{k}" for k in sorted(kinds))
        )
    make_dir(option, path.parent, path)
    return path


def make_dir(option: str, path: Path, given: Path | None = None) -> Path:
    """Create the directory ``path`` an option needs, before any work; say so if it was new.

    ``fedroc figures --out FILE`` or ``--out FILE/sub`` failed with "[Errno 20] Not a
    directory: 'FILE/sub'" (and a missing parent with "[Errno 2] ..."), naming no option,
    after the banner. ``given`` is what the user wrote, where ``path`` is derived from it.
    """
    shown = str(path if given is None else given)
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                raise InputError(f"{option} {shown!r}: {str(folder)!r} is a file, not a directory")
            break
    missing = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        where = f" ({str(exc.filename)!r})" if exc.filename and str(exc.filename) != shown else ""
        raise InputError(
            f"{option} {shown!r}: cannot create the directory: {reason.lower()}{where}"
        ) from None
    if missing:  # made silently before: a mistyped folder went unnoticed
        err.print(
            f"note: {option}: created the directory {str(path)!r}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    return path


def report_output(option: str, path: Path) -> Path:
    """Check a report's output path before any work, and make its folder.

    A directory, or a folder that is a file (``data.csv/r.html``), failed only when the
    report was written, after the sites had answered (and spent their privacy budget).
    """
    if path.is_dir():
        raise InputError(
            f"{option} {str(path)!r} is a directory; give a file name, e.g. "
            f"{str(path / 'report.html')!r}"
        )
    if path.suffix and path.suffix.lower() not in (".html", ".htm"):
        # r.pdf received the HTML text, which a PDF viewer cannot open.
        raise InputError(
            f"{option} {str(path)!r}: the report is one HTML file; name it .html, e.g. "
            f"{str(path.with_suffix('.html'))!r} (a browser prints it to PDF)"
        )
    make_dir(option, path.parent, path)
    return path


def fmt(value: Any, digits: int = 4) -> str:
    """Format a table cell: a missing value (None, NaN: null in the JSON) as ``-``."""
    if value is None:
        return "-"
    if isinstance(value, bool):  # "True" is Python's word, not the reader's
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value:
            return "-"
        from fedroc._results import format_number  # here: `fedroc --help` imports no numpy

        return format_number(value, digits)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        lo, hi = fmt(value[0], digits), fmt(value[1], digits)
        return "-" if lo == hi == "-" else f"[{lo}, {hi}]"
    return str(value)


# First words a row label keeps capitalised: names, not the start of a sentence.
_NAMES = ("Brier", "Obuchowski", "DeLong", "Youden", "Wald", "Sigma11", "Gaussian", "McClish")


def row_label(key: str, method: str | None = None, level: str | None = None) -> str:
    """Label a result's key as a table row, in words: ``auc_se`` -> "standard error of the AUC".

    The words are the HTML report's (:func:`fedroc._labels.method_label`), lower case as
    the tables' other rows ("rounds", "released") unless the first word is an abbreviation
    or a name; with ``level`` ("95%"), an interval's label says its level. The tables showed
    the JSON keys themselves (``n_pos``, ``auc_ci_logit``, ``sensitivity_is_heuristic``).
    """
    from fedroc._labels import method_label

    text = method_label(key, method)
    if level is not None:
        text = text.replace("confidence interval", f"{level} CI", 1)
    first = text.split(" ", 1)[0]
    if first[1:] == first[1:].lower() and not first.startswith(_NAMES):
        text = text[:1].lower() + text[1:]
    return text


#: Keys of kv_table rows that hold sentences.
_PROSE = frozenset({"released", "caveat", "caveats", "note", "notes"})


def kv_table(title: str, rows: Sequence[tuple[str, Any]]) -> Table:
    from rich.table import Table

    table = Table(title=title, show_header=False, title_justify="left", min_width=len(title))
    table.add_column("key", style="bold")
    table.add_column("value", justify="right")
    for key, value in rows:  # Text: a value such as "[nan, nan]" is data, not rich markup
        # Numbers line up on the right; a sentence (a note, what was released) reads from the
        # left: wrapped and right-justified, its lines started at ragged columns.
        # A row of sentences (released, caveat, note) reads from the left however short:
        # "per-site row counts were not released" stood flush right under the others.
        prose = isinstance(value, str) and " " in value and (len(value) > 40 or key in _PROSE)
        table.add_row(Text(key), Text(fmt(value), justify="left" if prose else None))
    return table


def _is_prose(cell: Any) -> bool:
    """Whether a table cell holds words (a note, a method), not a number or an interval."""
    return isinstance(cell, str) and " " in cell.strip() and any(c.isalpha() for c in cell)


def grid_table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    from rich.table import Table

    # A title wider than the columns was wrapped over lines: "Sites (synthetic, seed 2024)"
    # of fedroc demo took three. Not past the terminal: rich caps min_width at its width.
    table = Table(title=title, title_justify="left", min_width=len(title))
    for i, h in enumerate(header):
        # Numbers line up on the right; a column of sentences (a calibration bin's note, a
        # comparison's method) reads from the left: right-justified, each wrapped line of
        # "withheld at a site: its rows predicted ..." began at another column.
        # The first column names its row, unless it is a number (a comparison's difference).
        cells = [row[i] for row in rows if i < len(row)]
        prose = any(_is_prose(c) for c in cells)
        name = i == 0 and not all(isinstance(c, (int, float)) or c is None for c in cells)
        table.add_column(h, justify="left" if name or prose else "right")
    for row in rows:
        table.add_row(*[Text(fmt(c)) for c in row])
    return table


def calibration_table(
    title: str,
    curve: CalibrationCurve,
    noise_sd: Sequence[float] | None = None,
    *,
    count_sd: Sequence[float] | None = None,
) -> Table:
    """Render the calibration bins, with the noise SDs of DP counts when given.

    ``noise_sd``: each bin's observed fraction's; ``count_sd``: a withheld bin's count's.
    """
    import numpy as np

    from fedroc.metrics import bin_edges

    rows = []
    n = curve.n_bins
    # fedroc's edges are k / n_bins on the 1/4096 grid (bin_edges): named by k / n_bins, and
    # the caption says so where they differ.
    nominal = np.array_equal(np.asarray(curve.edges), bin_edges(n))
    for k in range(n):
        close = "]" if k == n - 1 else ")"
        lo, hi = (k / n, (k + 1) / n) if nominal else (curve.edges[k], curve.edges[k + 1])
        label = f"[{lo:.4g}, {hi:.4g}{close}"
        if noise_sd is None:
            # A bin withheld at some sites still pools the others' rows (as the report's
            # figure says); say so, or its n and fractions read as the whole bin's.
            note = ""
            # A secure curve's empty bin is flagged (a site flags every bin under q rows, 0
            # too) but holds no row anywhere: it said "predicted withheld (scores withheld at
            # a site)" of scores no site has.
            if curve.withheld[k] and curve.predicted_count is not None:
                shown = int(curve.predicted_count[k])  # a secure curve: n and observed whole
                if shown and shown == int(curve.count[k]):
                    # Since H13-2 a site's withheld scores enter at the bin's middle.
                    note = "withheld at a site: its rows predicted at the bin's middle"
                else:
                    note = (
                        f"predicted over {shown} rows (scores withheld at a site)"
                        if shown
                        else "predicted withheld (scores withheld at a site)"
                    )
            elif curve.withheld[k]:
                note = (
                    "other sites only (withheld at a site)"
                    if curve.count[k]
                    else "withheld at a site (no rows at the others)"
                )
        else:  # under DP a bin is withheld for its noise, never at a site
            # A withheld bin's n is its noisy count (228, say): without the count's SD the
            # note read as a contradiction.
            sd = "" if count_sd is None else f" (SD {float(count_sd[k]):.3g})"
            note = (
                f"withheld: noisy count within 3 noise SDs of 0{sd}"
                if curve.suppressed[k]
                else f"noise SD {float(noise_sd[k]):.3f}"
            )
        rows.append(
            (label, int(curve.count[k]), curve.mean_predicted[k], curve.observed_fraction[k], note)
        )
    if any(row[-1] for row in rows):
        table = grid_table(title, ["bin", "n", "predicted", "observed", "note"], rows)
    else:  # no empty column under an empty header
        table = grid_table(title, ["bin", "n", "predicted", "observed"], [r[:-1] for r in rows])
    if nominal and not np.array_equal(np.linspace(0.0, 1.0, n + 1), bin_edges(n)):
        table.caption = "bin edges k/n rounded to the nearest 1/4096"
        table.caption_justify = "left"
        table.min_width = len(table.caption)  # one line under the narrow table
    return table


def operating_points_table(points: Sequence[dict[str, Any]], level: str) -> Table:
    """Tabulate a result's ``operating_points``: one row per point, CIs where released."""

    def cell(point: dict[str, Any], name: str) -> str:
        # The interval on a line of its own under the value: side by side, seven columns of
        # "0.5652 [0.448, 0.676]" overflowed 120 characters and rich broke them mid-interval.
        value, ci = point.get(name), point.get(f"{name}_ci")
        return fmt(value) + ("" if ci is None else f"\n{fmt(ci, 3)}")

    rows = [
        (
            _CRITERIA.get(p["criterion"], p["criterion"]),
            p["threshold"],
            cell(p, "sensitivity"),
            cell(p, "specificity"),
            cell(p, "ppv"),
            cell(p, "npv"),
            fmt(p.get("selection_ci"), 3),
        )
        for p in points
    ]
    # "CI with choice" said nothing of what the interval is: the bootstrap interval of the
    # proportion the target leaves free, re-choosing the threshold in each replicate.
    table = grid_table(
        f"Operating points (predict positive when score >= threshold; {level} CIs)",
        ["chosen by", "threshold", "sensitivity", "specificity", "PPV", "NPV", "CI, re-chosen"],
        rows,
    )
    if any(p.get("selection_ci") is not None for p in points):
        table.caption = (
            "CI, re-chosen: bootstrap CI of the proportion the target leaves free, the "
            "threshold chosen anew in each resample; the others take the threshold as fixed"
        )
        table.caption_justify = "left"
    return table


# The JSON's criterion "youden" in words (a target reads "specificity >= 0.9" already).
_CRITERIA = {"youden": "Youden's J (max)"}


def coerce_pos_label(value: str | None) -> Any:
    """Command-line pos_label: numbers become numbers, anything else stays a string."""
    if value is None:
        return None
    for convert in (int, float):
        try:
            return convert(value)
        except ValueError:
            pass
    return value


def split_name_value(spec: str, option: str, form: str) -> tuple[str, str]:
    """Split an option's ``NAME=VALUE`` (both non-empty), or name ``option`` and its ``form``."""
    name, sep, value = spec.partition("=")
    if not sep or not name or not value:
        raise InputError(f"{option} must look like {form}; got {spec!r}")
    return name, value


def parse_sites(specs: Sequence[str]) -> dict[str, Path]:
    sites: dict[str, Path] = {}
    for spec in specs:
        name, path = split_name_value(spec, "--site", "NAME=PATH")
        if name in sites:
            raise InputError(f"--site {name!r} is given twice")
        sites[name] = Path(path)
    return sites


def read_data(path: Path, columns: Columns, pos_label: Any, *, site: str | None = None) -> SiteData:
    """Read a data file (:meth:`SiteData.from_file`); its messages name ``--pos-label``."""
    from fedroc.data import SiteData

    try:
        return SiteData.from_file(path, columns, pos_label=pos_label, site=site)
    except InputError as exc:  # "pass pos_label to say which value is positive"
        raise name_options(exc, {"pos_label": "--pos-label"}) from None


def check_audit_dir(path: Path | None) -> None:
    """Refuse an ``--audit-dir`` that is a file (it failed as "[Errno 17] File exists: 'x'")."""
    if path is not None and path.exists() and not path.is_dir():
        raise InputError(
            f"--audit-dir {str(path)!r} is a file; give a directory (created if missing)"
        )


def check_site_files(paths: Mapping[str, Path]) -> None:
    """Refuse a missing or empty data file of any site before pandas is imported.

    The message names the site as :meth:`fedroc.data.SiteData.from_file` does.
    """
    from fedroc._files import check_data_file

    for name, path in paths.items():
        try:
            check_data_file(path)
        except InputError as exc:
            raise InputError(f"site {name!r}: {exc}{_joined_sites_hint(name, path)}") from None


def warn_shared_files(paths: Mapping[str, Path]) -> None:
    """Warn on stderr, once per file, where several sites were given the same data file.

    Said once the run is past its checks, so that a refusal stays its one line.
    """
    # One file given for several sites counts its rows once per site: likely a slip, though
    # a test of the machinery may mean it, so a warning and not an error.
    by_file: dict[Path, list[str]] = {}
    for name, path in paths.items():
        by_file.setdefault(path.resolve(), []).append(name)
    for file, names in by_file.items():
        if len(names) > 1:
            listed = ", ".join(repr(n) for n in names)
            warn_user(
                f"sites {listed} read the same file {str(file)!r}: its rows count once per site"
            )


def note_mixed_score_scales(data: Mapping[str, Any]) -> None:
    """Say on stderr when some sites' scores are probabilities and others' are not.

    A site whose file holds logits where the others hold probabilities (or percentages
    where they hold fractions) gives an AUC of the pooled ranks that mixes two scales:
    ``pooled`` and ``mpc`` run on it without a word (the Brier score only goes missing).
    The command holds the files (``--site``), so the ranges are its own to read; said
    before the run, since an MPC job spends each site's authorisation.
    """
    inside: list[tuple[str, float, float]] = []
    outside: list[tuple[str, float, float]] = []
    for name, site in data.items():
        s = site.score
        if s.size == 0:
            continue
        lo, hi = float(s.min()), float(s.max())
        (inside if lo >= 0.0 and hi <= 1.0 else outside).append((name, lo, hi))
    if not (inside and outside):
        return
    off = ", ".join(f"{n!r} in [{lo:.4g}, {hi:.4g}]" for n, lo, hi in outside)
    ins = ", ".join(repr(n) for n, _, _ in inside)
    err.print(
        f"warning: scores at site(s) {off} lie outside [0, 1], while those at {ins} lie "
        "in [0, 1]: if they are on another scale (logits, percentages), the AUC ranks "
        "scores of two scales together and means nothing; put every site on one scale",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


def _joined_sites_hint(name: str, path: Path) -> str:
    """Say to repeat --site when one value holds several sites (``a=x.csv,b=y.csv``)."""
    parts = re.split(r"[,\s]+", str(path))
    if path.exists() or len(parts) < 2 or not all("=" in p for p in parts[1:]):
        return ""
    sites = " ".join(f"--site {p}" for p in [f"{name}={parts[0]}", *parts[1:]])
    return f"; give each site its own --site: {sites}"


def load_site_data(paths: dict[str, Path], columns: Columns, pos_label: Any) -> dict[str, SiteData]:
    return {name: read_data(path, columns, pos_label, site=name) for name, path in paths.items()}
