"""Names of a package loaded on first use (PEP 562), so that importing it stays cheap."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["attach"]


def attach(
    package: str, where: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a package whose names live in submodules.

    Parameters
    ----------
    package : str
        The package's ``__name__`` (for the error message).
    where : mapping of str to str
        Public name -> the module that defines it.
    namespace : dict
        The package's ``globals()``; a loaded name is stored there, so later look-ups skip
        ``__getattr__``.

    Returns
    -------
    (__getattr__, __dir__)
        Assign both at module level.

    Examples
    --------
    >>> getattr_, dir_ = attach("pkg", {"sqrt": "math"}, {})
    >>> getattr_("sqrt")(4.0)
    2.0
    >>> "sqrt" in dir_()
    True
    """

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
