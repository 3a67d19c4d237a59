"""The ``fedroc`` command line.

Every command prints a readable table by default and exactly one JSON object on stdout with
``--json``; logs and progress go to stderr. Errors print one line naming what was wrong and
exit with status 2.
"""

from __future__ import annotations

import sys

import typer
from rich.markup import escape

from fedroc.cli._common import err
from fedroc.cli.clustered_cmd import clustered
from fedroc.cli.demo_cmd import demo
from fedroc.cli.evaluate_cmd import evaluate_command
from fedroc.cli.figures_cmd import figures
from fedroc.cli.flower_cmd import flower_app
from fedroc.cli.metrics_cmd import metrics
from fedroc.cli.mpc_cmd import mpc_app
from fedroc.cli.privacy_cmd import privacy_app
from fedroc.cli.sequester_cmd import sequester_app
from fedroc.exceptions import FedrocError

app = typer.Typer(
    name="fedroc",
    help="Validate binary classifiers on test data that cannot be pooled.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("metrics")(metrics)
app.command("evaluate")(evaluate_command)
app.command("demo")(demo)
app.add_typer(sequester_app)
app.command("clustered")(clustered)
app.add_typer(mpc_app, name="mpc")
app.add_typer(flower_app, name="flower")
app.add_typer(privacy_app, name="privacy")
app.command("figures")(figures)


def main(argv: list[str] | None = None) -> None:
    """Entry point: fedroc's own errors become one line on stderr and exit status 2."""
    try:
        # With standalone_mode=False click returns a command's exit code instead of exiting.
        code = app(args=argv, standalone_mode=False)
    except FedrocError as exc:
        # escape(): a message naming "[party.0]" must not be read as Rich markup; soft_wrap:
        # one line, however long.
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(1)
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise
    if isinstance(code, int) and code != 0:
        sys.exit(code)
