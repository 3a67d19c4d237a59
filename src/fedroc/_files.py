"""Reading a user's file: its contents, or one :class:`InputError` that names the file.

Key files, rosters and data tables are all given by path on the command line or in a TOML
file; when one cannot be read the user needs the file's name and the reason on one line
(the CLI prints it and exits 2), never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fedroc.exceptions import InputError

__all__ = ["check_data_file", "reading"]


@contextmanager
def reading(
    path: str | Path, what: str, errors: type[Exception] | tuple[type[Exception], ...] = OSError
) -> Iterator[Path]:
    """Read ``path`` in the ``with`` body; an error of ``errors`` there names the file.

    Parameters
    ----------
    path : str or Path
        The file.
    what : str
        What the file holds, as the message names it (``"signing key"``, ``"data file"``).
    errors : exception type or tuple of them, default OSError
        The errors that mean "cannot read" (a parser's own errors, for readers that parse).

    Yields
    ------
    Path
        ``path`` as a :class:`~pathlib.Path`.

    Raises
    ------
    InputError
        ``cannot read <what> '<path>': <reason>``, the reason being the operating system's
        (``No such file or directory``) or the parser's message.

    Examples
    --------
    >>> with reading("/no/such.key", "signing key") as p:
    ...     p.read_bytes()
    Traceback (most recent call last):
    ...
    fedroc.exceptions.InputError: cannot read signing key '/no/such.key': No such file or directory
    """
    p = Path(path)
    try:
        yield p
    except errors as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise InputError(f"cannot read {what} {str(p)!r}: {reason}") from None


def check_data_file(path: str | Path) -> Path:
    """Refuse a data file that does not exist or is empty, before any parser is loaded.

    :func:`fedroc.data.load_table` starts with these checks; the command line makes them
    before it imports pandas (a second and a half), so that a mistyped path is reported at
    once.

    Raises
    ------
    InputError
        ``data file '<path>' does not exist`` or ``... is empty (no header, no rows)``.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"data file {str(p)!r} does not exist")
    if p.is_file() and p.stat().st_size == 0:  # pandas would say "No columns to parse"
        raise InputError(f"data file {str(p)!r} is empty (no header, no rows)")
    return p
