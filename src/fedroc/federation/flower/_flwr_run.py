"""Flower's ``flwr run`` command alone: ``python -m fedroc.federation.flower._flwr_run ARGS``.

``flwr``'s CLI imports every one of its commands before it runs one (the chat app, app
publishing, federation management, ...): on the shared 2-core test machine 2.8-3.6 s
before ``flwr run`` starts, against 2.1-2.7 s for the ``run`` command alone, which is what
``fedroc flower run`` needs for every job. The command is Flower's own function
(``flwr.cli.run.run``) behind a one-command Typer app, so its options, output and exit codes
are those of ``flwr run`` (the ``flwr`` app's callback only prints ``--version`` and checks
for updates, which fedroc turns off). :func:`command` falls back to the ``flwr`` executable
on other Flower versions or with ``FEDROC_FLOWER_TUNING=off``.
"""

from __future__ import annotations

import sys

__all__ = ["command", "main"]


def command(flwr_executable: str) -> list[str]:
    """Build the command that runs ``flwr run`` (append its arguments, without ``run``)."""
    from importlib.metadata import PackageNotFoundError, version

    from fedroc.federation.flower._middleware import tuning_enabled
    from fedroc.federation.flower._tuning import SUPPORTED_FLOWER

    try:
        # Not flwr's own version module: importing flwr costs the analyst's process ~1 s.
        supported = version("flwr").startswith(SUPPORTED_FLOWER)
    except PackageNotFoundError:
        supported = False
    if supported and tuning_enabled():
        return [sys.executable, "-m", "fedroc.federation.flower._flwr_run"]
    return [flwr_executable, "run"]


def main() -> None:
    import typer
    from flwr.cli.run import run

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(run)
    app()


if __name__ == "__main__":
    main()
