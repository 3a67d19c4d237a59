"""What the attack reviews ask a site and read back: a refusal's words, or "answered"."""

from __future__ import annotations

from fedroc.exceptions import FedrocError
from fedroc.federation import Federation


def refusal(fed: Federation, function: str, **args: object) -> str:
    """The refusal of ``function`` (a FedrocError's words), or "answered"."""
    try:
        fed.call(function, **args)
    except FedrocError as exc:
        return str(exc)
    return "answered"
