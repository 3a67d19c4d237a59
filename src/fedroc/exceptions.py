"""Errors and warnings raised by fedroc.

Every error names what was wrong (the parameter, site, function or file) and repeats the
offending value, so that a user can act on the message alone.
"""

from __future__ import annotations

import os
import sys
import types
import warnings


class FedrocError(Exception):
    """Base class of every error fedroc raises on purpose."""


class InputError(FedrocError, ValueError):
    """Bad input: a parameter, a column or a file that fedroc cannot use."""


class DisclosureError(FedrocError):
    """A site refused to release a value because its disclosure policy forbids it.

    Parameters
    ----------
    message : str
        What was refused and why (the rule of the policy and the value it met).
    site : str
        Name of the refusing site.
    function : str
        The site function whose reply was refused.
    """

    def __init__(self, message: str, *, site: str, function: str) -> None:
        super().__init__(message)
        self.site = site
        self.function = function


class SiteError(FedrocError):
    """A site failed (error, refusal, time-out) while answering a call.

    The analyst never receives a partial result: a call that fails at one site raises this
    error, naming the site, instead of returning the replies of the other sites.

    Parameters
    ----------
    message : str
        What went wrong at the site.
    site : str
        Name of the site that failed.
    function : str, optional
        The site function it was answering, where known.
    """

    def __init__(self, message: str, *, site: str, function: str | None = None) -> None:
        super().__init__(message)
        self.site = site
        self.function = function


class ProtocolError(FedrocError):
    """A multi-party protocol could not proceed (invalid stage, too few parties, ...)."""


class FedrocWarning(UserWarning):
    """Base class of fedroc's warnings."""


class UndefinedMetricWarning(FedrocWarning):
    """A metric is undefined for this input (one class only); NaN is returned."""


#: fedroc's own source folder: the frames a warning skips to reach the user's line.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning] = FedrocWarning) -> None:
    """Issue ``message`` as a warning of ``category`` at the first caller outside fedroc.

    fedroc's own frames are skipped, as pandas' ``find_stack_level`` does, so the warning
    names the user's line (the one to change) whichever path inside fedroc led to it, and
    no caller has to count its depth by hand.

    Parameters
    ----------
    message : str
        The warning's text.
    category : type of Warning, default FedrocWarning
        Its class.
    """
    level = 2  # the caller of warn_user()
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


# -- the wire format of an error ---------------------------------------------------------------
# Errors cross processes (a site's reply on Flower, the ServerApp's result) as one JSON-ready
# dict: {"type", "message", "site", "function"}. The type is the nearest of these classes, so a
# subclass (``ArgumentRefused``) arrives as the error the receiver handles.
_WIRE_TYPES: dict[str, type[FedrocError]] = {
    "DisclosureError": DisclosureError,
    "SiteError": SiteError,
    "InputError": InputError,
    "ProtocolError": ProtocolError,
    "FedrocError": FedrocError,
}


def error_to_dict(exc: BaseException) -> dict[str, str | None]:
    """Describe an error in its wire form: ``{"type", "message", "site", "function"}``.

    Parameters
    ----------
    exc : BaseException
        Any exception; its type is written as the nearest fedroc error class it derives
        from, or its own name when it is not a fedroc error.

    Returns
    -------
    dict
        JSON-ready; :func:`error_from_dict` turns it back into an exception.

    Examples
    --------
    >>> info = error_to_dict(SiteError("site 'a' timed out", site="a"))
    >>> info["type"], info["site"]
    ('SiteError', 'a')
    >>> error_from_dict(info).site
    'a'
    """
    kind = next((c.__name__ for c in type(exc).__mro__ if c.__name__ in _WIRE_TYPES), None)
    site, function = getattr(exc, "site", None), getattr(exc, "function", None)
    return {
        "type": kind or type(exc).__name__,
        "message": str(exc),
        "site": None if site is None else str(site),
        "function": None if function is None else str(function),
    }


def error_from_dict(
    info: dict[str, object], *, site: str | None = None, fallback: str = "SiteError"
) -> FedrocError:
    """Rebuild the exception :func:`error_to_dict` describes.

    Parameters
    ----------
    info : dict
        The wire form.
    site : str, optional
        The site the error came from, when the receiver knows it (it wins over ``info``).
    fallback : {"SiteError", "FedrocError"}
        What an unknown type becomes: a failure at the site, or (for a whole job) a
        :class:`FedrocError` whose message names the original type.
    """
    kind = str(info.get("type"))
    message = str(info.get("message", ""))
    where = site if site is not None else info.get("site")
    function = info.get("function")
    cls = _WIRE_TYPES.get(kind)
    if cls is DisclosureError:
        return DisclosureError(message, site=str(where), function=str(function or ""))
    if cls in (InputError, ProtocolError):
        return cls(message)
    if cls is SiteError or fallback == "SiteError":
        return SiteError(
            message, site=str(where), function=None if function is None else str(function)
        )
    return FedrocError(f"the ServerApp failed: {kind}: {message}")
