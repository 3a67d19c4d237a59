"""One wire format for errors: what a site or the ServerApp raises is what the analyst gets."""

from __future__ import annotations

import json
from unittest import mock

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


@given(any_error, st.booleans())
@settings(max_examples=100, deadline=None)
def test_any_error_survives_a_flower_error_reply(exc: FedrocError, names_function: bool) -> None:
    # What a SuperNode's ClientApp raises travels as an Error (code, JSON reason) through
    # protobuf; the analyst's transport rebuilds it, with the site it sent the message to.
    pytest.importorskip("flwr")
    from flwr.app import Message, RecordDict
    from flwr.common import serde
    from flwr.supercore.task_identity import TaskIdentity

    from fedroc.federation.flower.apps import ERROR_DISCLOSURE, ERROR_FEDROC, _error_reply
    from fedroc.federation.flower.transport import error_from_reply

    code = ERROR_DISCLOSURE if isinstance(exc, DisclosureError) else ERROR_FEDROC
    call = "fedroc.the_call" if names_function else None
    # A message needs the identity of the task that builds it (Flower sets it in a run).
    with mock.patch.multiple(TaskIdentity, _run_id=7, _node_id=0, _task_id=1):
        asked = Message(RecordDict(), dst_node_id=7, message_type="query.fedroc_call")
        asked.metadata.__dict__["_message_id"] = "m1"
        reply = _error_reply(asked, code, exc, call)
    error = serde.error_from_proto(serde.error_to_proto(reply.error))
    back = error_from_reply("east", int(error.code), str(error.reason))
    expected = DisclosureError if isinstance(exc, DisclosureError) else type(exc)
    assert type(back) is expected
    assert str(back) == str(exc)
    if expected in (DisclosureError, SiteError):
        assert back.site == "east"  # the site the analyst asked, whatever the error says
        assert back.function == (getattr(exc, "function", None) or call)
