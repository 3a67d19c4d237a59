"""One wire format for errors: what a site or the ServerApp raises is what the analyst gets."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


_text = st.text(max_size=40)
_name = st.text(min_size=1, max_size=20)
any_error = st.one_of(
    st.builds(DisclosureError, _text, site=_name, function=_name),
    st.builds(ArgumentRefused, _text, site=_name, function=_name, argument=_name),
    st.builds(SiteError, _text, site=_name, function=st.none() | _name),
    st.builds(InputError, _text),
    st.builds(ProtocolError, _text),
)


@given(any_error)
@settings(max_examples=200, deadline=None)
def test_any_error_survives_the_wire(exc: FedrocError) -> None:
    # The property behind the examples above, for any message, site and function name.
    test_errors_survive_the_wire(exc)


def test_unknown_errors_become_site_or_job_failures() -> None:
    info = error_to_dict(KeyError("column"))
    assert info["type"] == "KeyError"
    at_site = error_from_dict(info, site="east")
    assert isinstance(at_site, SiteError) and at_site.site == "east"
    job = error_from_dict(info, fallback="FedrocError")
    assert type(job) is FedrocError and "KeyError" in str(job)
