"""One wire format for errors: what a site or the ServerApp raises is what the analyst gets."""

from __future__ import annotations

import json

import pytest

from fedroc.exceptions import (
    DisclosureError,
    FedrocError,
    InputError,
    ProtocolError,
    SiteError,
    error_from_dict,
    error_to_dict,
)
from fedroc.federation.schema import ArgumentRefused

ERRORS = [
    DisclosureError("refused: 3 rows < q", site="north", function="fedroc.sum"),
    ArgumentRefused("bad edges", site="north", function="fedroc.calibration", argument="edges"),
    SiteError("timed out", site="south", function="fedroc.info"),
    SiteError("gone", site="south"),
    InputError("n_bins must be >= 2; got 1"),
    ProtocolError("too few survivors"),
]


@pytest.mark.parametrize("exc", ERRORS, ids=lambda e: type(e).__name__)
def test_errors_survive_the_wire(exc: FedrocError) -> None:
    back = error_from_dict(json.loads(json.dumps(error_to_dict(exc))))
    expected = DisclosureError if isinstance(exc, DisclosureError) else type(exc)
    assert type(back) is expected
    assert str(back) == str(exc)
    assert getattr(back, "site", None) == getattr(exc, "site", None)
    assert getattr(back, "function", None) == getattr(exc, "function", None)


def test_unknown_errors_become_site_or_job_failures() -> None:
    info = error_to_dict(KeyError("column"))
    assert info["type"] == "KeyError"
    at_site = error_from_dict(info, site="east")
    assert isinstance(at_site, SiteError) and at_site.site == "east"
    job = error_from_dict(info, fallback="FedrocError")
    assert type(job) is FedrocError and "KeyError" in str(job)
