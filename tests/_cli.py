"""Running the command line in-process, for the tests."""

from __future__ import annotations

from fedroc.cli import main


def run_main(capsys, args: list[str]) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of one in-process `fedroc ARGS`."""
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err
