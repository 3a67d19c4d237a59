"""Argument schemas of site functions: what a site accepts from the analyst.

The analyst is untrusted. Every site function declares, next to its code, the arguments it
accepts (type, bounds, shape, choices); :meth:`fedroc.federation.Site.handle` checks a
request against that declaration before the function runs and refuses anything else: an
unknown key, a missing one, a value of the wrong type, out of bounds, of the wrong shape,
not finite. The refusal is a :class:`ArgumentRefused` (a
:class:`~fedroc.exceptions.DisclosureError`) naming the site, the function and the
argument, and the site's audit log records it.

A schema is a mapping from argument name to a field::

    SCHEMA = {
        "n_bins": Int(2, 100, default=10),
        "gamma": FloatArray(shape=(Bound(1, 81), 2), lo=-50, hi=50),
        "mode": Choice("secure-aggregation", "distributed-dp"),
    }

Checking returns the arguments as the function should see them: defaults filled in,
numbers converted to Python ``int``/``float``, arrays as contiguous numpy arrays of the
declared dtype.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedroc.exceptions import DisclosureError

__all__ = [
    "ArgumentRefused",
    "Bool",
    "Bound",
    "Bytes",
    "Choice",
    "Field",
    "Float",
    "FloatArray",
    "Int",
    "IntArray",
    "Names",
    "Schema",
    "Text",
    "check_arguments",
]

_MISSING: Any = object()


class ArgumentRefused(DisclosureError):
    """A site refused a request whose arguments its function does not accept."""

    def __init__(self, message: str, *, site: str, function: str, argument: str) -> None:
        super().__init__(message, site=site, function=function)
        self.argument = argument


class _Invalid(Exception):
    """Raised by a field with the reason; turned into ArgumentRefused with the names."""


def _show(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int of more digits than Python converts to text (10**5000)
        text = f"an integer of {value.bit_length()} bits"
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class Field:
    """Base of every field: ``default`` makes the argument optional (None allowed).

    ``bind=True`` (on :class:`Int` and :class:`Choice`) makes the site accept one value of
    the argument over its lifetime for releases in the clear: the first value it released
    with is kept in its ledger and any other is refused. It is for arguments that choose a
    partition of the rows (bins), whose aggregates under two partitions could be
    subtracted to isolate fewer rows than the minimum count.
    """

    default: Any = field(default=_MISSING, kw_only=True)
    bind: bool = field(default=False, kw_only=True)

    @property
    def required(self) -> bool:
        """Whether the argument must be given (the field has no default)."""
        return self.default is _MISSING

    def check(self, value: Any) -> Any:  # pragma: no cover - abstract
        """Return ``value`` as the site function should see it, or refuse it.

        Each field raises the module's internal ``_Invalid`` with the reason;
        :func:`check_arguments` turns it into an :class:`ArgumentRefused` naming the argument.
        """
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        """Describe the accepted values for a refusal message (``"integer in [2, 100]"``)."""
        raise NotImplementedError


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _Invalid(f"must be {what}; got {_show(value)}")
    try:
        number = float(value)
    except OverflowError:  # an int past the largest float (10**400)
        raise _Invalid(f"must be a finite number; got {_show(value)}") from None
    if not math.isfinite(number):
        raise _Invalid(f"must be a finite number; got {_show(value)}")
    return number


def _in_bounds(number: float, lo: float | None, hi: float | None, shown: Any) -> None:
    if (lo is not None and number < lo) or (hi is not None and number > hi):
        raise _Invalid(f"must lie in [{lo}, {hi}]; got {_show(shown)}")


@dataclass(frozen=True)
class Int(Field):
    """An integer in ``[lo, hi]`` (either bound may be None).

    Integral floats (``3.0``) are accepted and returned as ``int``; booleans are refused.

    Parameters
    ----------
    lo, hi : int, optional
        Inclusive bounds.
    default : optional
        Makes the argument optional.
    bind : bool, default False
        Accept one value over the site's lifetime for releases in the clear (see
        :class:`Field`).
    """

    lo: int | None = None
    hi: int | None = None

    def check(self, value: Any) -> int:
        """Return ``value`` as a Python ``int`` if it is an integer within the bounds."""
        number = _number(value, "an integer")
        if number != int(number):
            raise _Invalid(f"must be an integer; got {_show(value)}")
        _in_bounds(number, self.lo, self.hi, value)
        return int(number)

    def describe(self) -> str:
        """Describe the bounds (``"integer in [lo, hi]"``)."""
        return f"integer in [{self.lo}, {self.hi}]"


@dataclass(frozen=True)
class Float(Field):
    """A finite number in ``[lo, hi]``, or ``(lo, hi]`` with ``open_lo``.

    Parameters
    ----------
    lo, hi : float, optional
        Bounds (inclusive unless ``open_lo``).
    open_lo : bool, default False
        Exclude ``lo`` itself (for a scale or an epsilon that must be positive).
    default : optional
        Makes the argument optional.
    """

    lo: float | None = None
    hi: float | None = None
    open_lo: bool = field(default=False, kw_only=True)

    def check(self, value: Any) -> float:
        """Return ``value`` as a Python ``float`` if it is finite and within the bounds."""
        number = _number(value, "a number")
        _in_bounds(number, self.lo, self.hi, value)
        if self.open_lo and self.lo is not None and number <= self.lo:
            raise _Invalid(f"must be greater than {self.lo}; got {_show(value)}")
        return number

    def describe(self) -> str:
        """Describe the interval of accepted numbers."""
        return f"finite number in {'(' if self.open_lo else '['}{self.lo}, {self.hi}]"


@dataclass(frozen=True)
class Bool(Field):
    """A boolean (``True``/``False`` or a numpy bool; numbers are refused)."""

    def check(self, value: Any) -> bool:
        """Return ``value`` as a Python ``bool`` if it is one."""
        if not isinstance(value, (bool, np.bool_)):
            raise _Invalid(f"must be true or false; got {_show(value)}")
        return bool(value)

    def describe(self) -> str:
        """Return ``"boolean"``."""
        return "boolean"


@dataclass(frozen=True)
class Choice(Field):
    """One of a fixed set of values.

    Parameters
    ----------
    *options
        The accepted values (booleans are always refused, even where ``True == 1``).
    default : optional
        Makes the argument optional.
    bind : bool, default False
        Accept one value over the site's lifetime for releases in the clear (see
        :class:`Field`).
    """

    options: tuple[Any, ...] = ()

    def __init__(self, *options: Any, default: Any = _MISSING, bind: bool = False):
        object.__setattr__(self, "options", tuple(options))
        object.__setattr__(self, "default", default)
        object.__setattr__(self, "bind", bind)

    def check(self, value: Any) -> Any:
        """Return ``value`` if it is one of the options."""
        if isinstance(value, bool) or value not in self.options:
            raise _Invalid(f"must be one of {list(self.options)}; got {_show(value)}")
        return value

    def describe(self) -> str:
        """List the options."""
        return f"one of {list(self.options)}"


@dataclass(frozen=True)
class Text(Field):
    """A string of at most ``max_length`` characters, optionally from an ``alphabet``.

    Parameters
    ----------
    max_length : int, default 256
    alphabet : str, optional
        The only characters allowed.
    default : optional
        Makes the argument optional.
    """

    max_length: int = 256
    alphabet: str | None = field(default=None, kw_only=True)

    def check(self, value: Any) -> str:
        """Return ``value`` if it is a string within the length and the alphabet."""
        if not isinstance(value, str):
            raise _Invalid(f"must be a string; got {_show(value)}")
        if len(value) > self.max_length:
            raise _Invalid(f"must have at most {self.max_length} characters; got {len(value)}")
        if self.alphabet is not None and set(value) - set(self.alphabet):
            raise _Invalid(f"has characters outside {self.alphabet!r}")
        return value

    def describe(self) -> str:
        """Describe the longest string accepted."""
        return f"string of at most {self.max_length} characters"


@dataclass(frozen=True)
class Bytes(Field):
    """A ``bytes`` (or ``bytearray``) value of at most ``max_length`` bytes (1 MiB default)."""

    max_length: int = 1 << 20

    def check(self, value: Any) -> bytes:
        """Return ``value`` as ``bytes`` if it is bytes within the length."""
        if not isinstance(value, (bytes, bytearray)):
            raise _Invalid(f"must be bytes; got {type(value).__name__}")
        if len(value) > self.max_length:
            raise _Invalid(f"must have at most {self.max_length} bytes; got {len(value)}")
        return bytes(value)

    def describe(self) -> str:
        """Describe the largest value accepted."""
        return f"at most {self.max_length} bytes"


@dataclass(frozen=True)
class Names(Field):
    """A list of distinct short strings (site names, ...).

    Parameters
    ----------
    max_items : int, default 1024
        Most names the list may hold; each name has at most 256 characters.
    default : optional
        Makes the argument optional.
    """

    max_items: int = 1024

    def check(self, value: Any) -> list[str]:
        """Return ``value`` as a list if it holds at most ``max_items`` distinct strings.

        Each name may have at most 256 characters.
        """
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise _Invalid(f"must be a list of strings; got {_show(value)}")
        if len(value) > self.max_items:
            raise _Invalid(f"must hold at most {self.max_items} names; got {len(value)}")
        if len(set(value)) != len(value):
            raise _Invalid("names an item twice")
        if any(len(v) > 256 for v in value):
            raise _Invalid("holds a name longer than 256 characters")
        return list(value)

    def describe(self) -> str:
        """Describe the longest list accepted."""
        return f"list of at most {self.max_items} distinct names"


@dataclass(frozen=True)
class Bound:
    """An array dimension of length ``lo..hi``."""

    lo: int
    hi: int


Dim = int | Bound | None  # exact length, a range, or any length


@dataclass(frozen=True)
class _Array(Field):
    shape: tuple[Dim, ...] = (None,)
    lo: float | None = field(default=None, kw_only=True)
    hi: float | None = field(default=None, kw_only=True)
    max_size: int = field(default=1 << 26, kw_only=True)
    dtype: Any = field(default=np.float64, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))

    def check(self, value: Any) -> np.ndarray:
        if isinstance(value, (list, tuple)) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
        ):
            value = np.asarray(value)
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "iuf":
            shown = value.dtype if isinstance(value, np.ndarray) else type(value).__name__
            raise _Invalid(f"must be a numeric array; got {shown}")
        if value.size > self.max_size:
            raise _Invalid(f"must hold at most {self.max_size} values; got {value.size}")
        if len(self.shape) != value.ndim:
            raise _Invalid(f"must have {len(self.shape)} dimension(s); got shape {value.shape}")
        for axis, (want, got) in enumerate(zip(self.shape, value.shape, strict=True)):
            if want is None:
                continue
            lo, hi = (want, want) if isinstance(want, int) else (want.lo, want.hi)
            if not lo <= got <= hi:
                raise _Invalid(f"must have length in [{lo}, {hi}] along axis {axis}; got {got}")
        arr = np.ascontiguousarray(value, dtype=self.dtype)
        if arr.dtype.kind == "f" and arr.size and not np.isfinite(arr).all():
            raise _Invalid("must hold only finite numbers")
        if arr.size and (
            (self.lo is not None and arr.min() < self.lo)
            or (self.hi is not None and arr.max() > self.hi)
        ):
            raise _Invalid(f"must hold values in [{self.lo}, {self.hi}]")
        if self.dtype is np.int64 and value.dtype.kind == "f" and not np.array_equal(arr, value):
            raise _Invalid("must hold integers")
        return arr

    def describe(self) -> str:
        dims = ", ".join(
            "any" if d is None else str(d) if isinstance(d, int) else f"{d.lo}..{d.hi}"
            for d in self.shape
        )
        return f"array of shape ({dims}) with values in [{self.lo}, {self.hi}]"


@dataclass(frozen=True)
class FloatArray(_Array):
    """A numeric array, returned as contiguous float64, every value finite.

    Parameters
    ----------
    shape : tuple of (int, Bound or None), default ``(None,)``
        One entry per dimension: an exact length, a :class:`Bound`, or None for any length.
    lo, hi : float, optional
        Inclusive bounds on every value.
    max_size : int, default ``2**26``
        Most values the array may hold.
    default : optional
        Makes the argument optional.
    """


@dataclass(frozen=True)
class IntArray(_Array):
    """A numeric array of integers, returned as contiguous int64.

    Floats are accepted only when every value is integral. Parameters as :class:`FloatArray`,
    with integer bounds.
    """

    dtype: Any = field(default=np.int64, init=False)


Schema = Mapping[str, Field]


def check_arguments(
    schema: Schema, args: Mapping[str, Any], *, site: str, function: str
) -> dict[str, Any]:
    """Check ``args`` against ``schema``; return them with defaults filled in.

    Raises
    ------
    ArgumentRefused
        Naming the site, the function and the first argument that does not fit.
    """

    def refuse(argument: str, reason: str) -> ArgumentRefused:
        return ArgumentRefused(
            f"site {site!r} refuses {function!r}: argument {argument!r} {reason}",
            site=site,
            function=function,
            argument=argument,
        )

    unknown = sorted(set(args) - set(schema))
    if unknown:
        raise refuse(
            unknown[0],
            f"is not an argument of this function (it accepts {sorted(schema) or 'none'})",
        )
    out: dict[str, Any] = {}
    for name, spec in schema.items():
        if name not in args or args[name] is None:
            if spec.required:
                raise refuse(name, f"is missing (expected {spec.describe()})")
            out[name] = spec.default
            continue
        try:
            out[name] = spec.check(args[name])
        except _Invalid as exc:
            raise refuse(name, str(exc)) from None
    return out
