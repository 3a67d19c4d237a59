"""Errors and warnings raised by fedroc.

Every error names what was wrong (the parameter, site, function or file) and repeats the
offending value, so that a user can act on the message alone.
"""

from __future__ import annotations


class FedrocError(Exception):
    """Base class of every error fedroc raises on purpose."""


class InputError(FedrocError, ValueError):
    """Bad input: a parameter, a column or a file that fedroc cannot use."""


class DisclosureError(FedrocError):
    """A site refused to release a value because its disclosure policy forbids it."""

    def __init__(self, message: str, *, site: str, function: str) -> None:
        super().__init__(message)
        self.site = site
        self.function = function


class SiteError(FedrocError):
    """A site failed (error, refusal, time-out) while answering a call.

    The analyst never receives a partial result: a call that fails at one site raises this
    error, naming the site, instead of returning the replies of the other sites.
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
