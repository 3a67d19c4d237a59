"""Properties of the core machinery, for any input hypothesis can think of.

- Class counts add across any split of the rows into sites: the sum of the sites' counts
  is the count of the pooled rows (checked by a loop over the rows), and the AUC, ROC
  points and DeLong variance of the summed counts are scikit-learn's and the brute-force
  pair count's on the pooled rows (scores replaced by their shared threshold).
- ``decode(encode(r)) == r`` for every record the wire carries: in process, through Flower's
  RecordDict and protobuf (arrays in the encoded body or in an ArrayRecord), and as the
  typed MPC messages in their frames.
- A secure sum equals the plain sum of the survivors' inputs, whichever sites drop out
  (down to the threshold) and at whichever stage; below the threshold it refuses.
- A schema check is idempotent: what a site accepted, it accepts again unchanged.
- An array's JSON form (what the audit log writes) is its elements converted one by one.
"""

from __future__ import annotations

import functools
import json
import math
import struct
from typing import Any
from unittest import mock

import _ranking_brute as brute
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays
from sklearn.metrics import roc_auc_score, roc_curve
from test_secagg import FlakyTransport

from fedroc.data import SiteData
from fedroc.exceptions import ProtocolError
from fedroc.federation import Federation, Reply, Site, site_function
from fedroc.federation.records import decode, encode
from fedroc.federation.schema import Bound, FloatArray, Int, check_arguments
from fedroc.metrics import ScoreCounts
from fedroc.mpc.auc import AucSpec
from fedroc.mpc.bundle import Bundle
from fedroc.mpc.messages import (
    FRAME_PREFIX,
    MAX_TEXT,
    ErrorMessage,
    Forward,
    ForwardedBundle,
    Hello,
    HelperJob,
    JobRequest,
    Kind,
    Ok,
    Result,
    ResultShare,
    Seed,
    Shutdown,
    StatsRecord,
    StepFrame,
    Verdict,
    decode_message,
    encode_message,
)
from fedroc.mpc.owner import JobTerms
from fedroc.privacy import DisclosurePolicy
from fedroc.secagg import secure_sum
from fedroc.secagg.protocol import (
    FN_ABORT,
    FUNCTIONS,
    STAGE_ADVERTISE_KEYS,
    STAGE_MASKED_INPUT,
    STAGE_SHARE_KEYS,
    STAGE_UNMASK,
)

_keys = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=8)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**62), 2**62),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.binary(max_size=20),
)
_lists = st.lists(st.one_of(st.integers(-1000, 1000), st.floats(-1e6, 1e6), st.text(max_size=5)))
_arrays = st.one_of(
    *(
        arrays(dtype, array_shapes(min_dims=0, max_dims=3, max_side=4))
        for dtype in (np.float64, np.float32, np.int64, np.int32, np.uint8, np.bool_)
    )
)
records = st.dictionaries(
    _keys.filter(lambda k: not k.startswith("__")), st.one_of(_scalars, _lists, _arrays)
)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
        )
    if isinstance(a, float):
        return isinstance(b, float) and (a == b or (math.isnan(a) and math.isnan(b)))
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


# -- the counting core: counts add across sites -------------------------------------------------
_grid = st.integers(-6, 6).map(lambda k: k / 4)  # few values: many ties
_score = _grid | st.floats(-3, 3, allow_subnormal=False)


def _points(fpr: Any, tpr: Any) -> set[tuple[float, float]]:
    # A level without rows repeats a point; the curve is the same polyline.
    return set(zip(np.asarray(fpr).tolist(), np.asarray(tpr).tolist(), strict=True))


@pytest.mark.filterwarnings("ignore::fedroc.exceptions.UndefinedMetricWarning")
@given(data=st.data(), binned=st.booleans(), weighted=st.booleans())
@settings(max_examples=60, deadline=None)
def test_class_counts_add_across_any_split_of_the_rows(data, binned, weighted):
    n = data.draw(st.integers(2, 40), label="n")
    y = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="y"))
    y[:2] = True, False  # both classes among the pooled rows
    s = np.array(data.draw(st.lists(_score, min_size=n, max_size=n), label="scores"))
    w = np.ones(n)
    if weighted:
        w = np.array(data.draw(st.lists(st.integers(1, 4), min_size=n, max_size=n)), float)
    site = np.array(data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n), label="site"))
    if binned:  # shared bin edges, the lowest at or below every score
        edges = data.draw(st.lists(_grid, max_size=6), label="edges")
        thresholds = np.unique([*edges, s.min()])
    else:  # a level at each distinct score of the pooled rows
        thresholds = np.unique(s)
    total = sum(
        ScoreCounts.from_scores(
            y[site == k], s[site == k], thresholds=thresholds, sample_weight=w[site == k]
        )
        for k in np.unique(site)
    )
    assert isinstance(total, ScoreCounts)
    t = total.thresholds
    # Each row, by a loop: its level is the first (largest) threshold not above its score.
    level = np.array([next(i for i, ti in enumerate(t) if si >= ti) for si in s])
    want_pos = [w[(level == i) & y].sum() for i in range(t.size)]
    want_neg = [w[(level == i) & ~y].sum() for i in range(t.size)]
    np.testing.assert_array_equal(total.pos, want_pos)
    np.testing.assert_array_equal(total.neg, want_neg)
    # The metrics of the summed counts are those of the pooled rows at their level's score.
    binned_s = t[level]
    auc = total.auc()
    assert auc == pytest.approx(roc_auc_score(y, binned_s, sample_weight=w), abs=1e-12)
    assert auc == pytest.approx(brute.auc(y, binned_s, w), abs=1e-12)
    fpr, tpr, _ = total.roc(drop_intermediate=False)
    sk_fpr, sk_tpr, _ = roc_curve(y, binned_s, sample_weight=w, drop_intermediate=False)
    assert _points(fpr, tpr) == _points(sk_fpr, sk_tpr)
    got = total.delong()
    want_auc, want_var = brute.delong(y, binned_s, w)
    assert got.auc == pytest.approx(want_auc, abs=1e-12)
    np.testing.assert_allclose(got.variance, want_var, rtol=1e-9, atol=1e-15, equal_nan=True)


# -- the wire ----------------------------------------------------------------------------------
@given(records)
@settings(max_examples=200, deadline=None)
def test_decode_inverts_encode(record):
    back = decode(encode(record))
    assert set(back) == set(record)
    for key, value in record.items():
        assert _same(value, back[key]), key


@given(records, st.booleans())
@settings(max_examples=100, deadline=None)
def test_flower_codec_inverts_itself_through_protobuf(record, arrays_apart):
    # arrays_apart: every array leaves the encoded body for Flower's ArrayRecord (the path
    # of arrays above PACK_LIMIT), else they all travel inside it.
    pytest.importorskip("flwr")
    from flwr.common import serde

    from fedroc.federation.flower import _codec

    with mock.patch.object(_codec, "PACK_LIMIT", -1 if arrays_apart else _codec.PACK_LIMIT):
        content = _codec.to_recorddict(record, {"function": "f"})
    wire = serde.recorddict_from_proto(serde.recorddict_to_proto(content))
    back = _codec.from_recorddict(wire)
    assert list(back) == list(record)  # the order too
    for key, value in record.items():
        assert _same(value, back[key]), key
    assert _codec.read_header(wire) == {"function": "f"}


# -- the MPC frames: every message kind with the values its fields admit -----------------------
_bytes32 = st.binary(min_size=32, max_size=32)
_text = st.text(max_size=40) | st.text(min_size=MAX_TEXT, max_size=MAX_TEXT)
_stats = st.builds(
    StatsRecord,
    st.integers(0, 2**62),
    st.integers(0, 2**62),
    st.integers(0, 2**62),
    st.integers(0, 2**62),
    st.floats(0, 1e9),
)
_owner = st.text(
    st.characters(min_codepoint=32, exclude_characters="\x7f"), min_size=1, max_size=12
)
_terms = st.builds(
    JobTerms.create,
    st.lists(_owner, min_size=1, max_size=4, unique=True),
    st.tuples(_bytes32, _bytes32),
)
_forwarded = st.builds(
    ForwardedBundle,
    _owner,
    st.integers(1, 2**28),
    _bytes32,
    st.binary(min_size=64, max_size=64),
    _bytes32,
    st.binary(max_size=64),
)
_payload = st.recursive(
    st.none()
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.integers(-(2**62), 2**62)
    | arrays(np.uint64, array_shapes(min_dims=0, max_dims=2, max_side=3)),
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=8,
)
_bundle = st.builds(
    Bundle,
    _owner,
    st.integers(1, 2**20),
    _terms,
    _bytes32,
    st.binary(min_size=64, max_size=64),
    st.binary(max_size=64),
    st.binary(max_size=64),
)
_MESSAGES = {  # one strategy per message kind
    Hello: st.builds(Hello, st.sampled_from(["party", "client"]), st.integers(-1, 2)),
    Shutdown: st.builds(Shutdown),
    Ok: st.builds(Ok),
    JobRequest: st.builds(
        JobRequest, st.lists(_bundle, min_size=1, max_size=3).map(tuple), _bytes32
    ),
    ErrorMessage: st.builds(ErrorMessage, _text, st.text(max_size=96)),
    Seed: st.builds(Seed, _bytes32),
    Verdict: st.builds(Verdict, st.booleans(), _text),
    ResultShare: st.builds(ResultShare, st.binary(max_size=64), _stats),
    Result: st.builds(
        Result, st.binary(max_size=64), st.binary(max_size=64), st.tuples(_stats, _stats, _stats)
    ),
    HelperJob: st.builds(
        HelperJob, st.builds(AucSpec, st.tuples(st.integers(1, 500), st.integers(1, 500))), _bytes32
    ),
    Forward: st.builds(
        Forward, _terms, st.lists(_forwarded, min_size=1, max_size=3).map(tuple), _bytes32, _bytes32
    ),
    StepFrame: st.builds(StepFrame, st.text(max_size=256), _payload),
}
messages = st.one_of(*_MESSAGES.values())


def test_the_frames_property_draws_every_message_kind():
    kinds = {v for k, v in vars(Kind).items() if not k.startswith("_")}
    assert {cls.KIND for cls in _MESSAGES} == kinds


@given(messages, st.from_regex(r"\A[0-9A-Za-z_-]{8,64}\Z") | st.just(""))
@settings(max_examples=200, deadline=None)
def test_mpc_frames_invert_themselves(message, job):
    frame = encode_message(message, job)
    (length,) = struct.unpack("<Q", frame[:FRAME_PREFIX])
    assert length == len(frame) - FRAME_PREFIX
    got_job, back = decode_message(frame[FRAME_PREFIX:])
    # An error message names its job itself (outside a job: none), and that is the frame's.
    assert got_job == (message.job if isinstance(message, ErrorMessage) else job)
    if isinstance(message, StepFrame):  # its payload holds arrays: compare them by value
        assert isinstance(back, StepFrame) and back.tag == message.tag
        assert _same_payload(message.payload, back.payload)
    else:
        assert back == message


def _same_payload(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same_payload, a, b))
    return _same(a, b)


@site_function(
    "test.properties.vector",
    schema={"size": Int(1, 64), "salt": Int(0, 2**31)},
    release="secure",
)
def _vector(ctx, args):
    rng = np.random.default_rng([args["salt"], int(ctx.site[1:])])
    return Reply(
        {"x": rng.integers(-1000, 1000, args["size"]), "f": rng.normal(size=2)},
        counts={"rows": ctx.data.n},
    )


def _inputs(names, size, salt):
    out = {}
    for name in names:
        rng = np.random.default_rng([salt, int(name[1:])])
        out[name] = (rng.integers(-1000, 1000, size), rng.normal(size=2))
    return out


_STAGES = [STAGE_ADVERTISE_KEYS, STAGE_SHARE_KEYS, STAGE_MASKED_INPUT, STAGE_UNMASK]


@given(
    n=st.integers(3, 6),
    size=st.integers(1, 16),
    salt=st.integers(0, 2**31),
    data=st.data(),
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_secure_sum_equals_the_plain_sum_of_the_survivors(n, size, salt, data):
    # The sites accept no threshold below a majority of the session's members.
    threshold = data.draw(st.integers(max(2, n // 2 + 1), n), label="threshold")
    # Up to every site but one drops: below the threshold the protocol must refuse.
    dropped = data.draw(
        st.lists(st.sampled_from([f"s{k}" for k in range(n)]), unique=True, max_size=n - 1),
        label="dropped",
    )
    stages = {
        name: data.draw(st.sampled_from(_STAGES), label=f"{name} drops at") for name in dropped
    }
    policy = DisclosurePolicy(secagg_min_sites=2)
    sites = [
        Site(f"s{k}", SiteData.from_arrays([0, 1] * 5, np.linspace(0, 1, 10)), policy=policy)
        for k in range(n)
    ]
    fail = {
        name: {FUNCTIONS[s] for s in _STAGES[_STAGES.index(stage) :]} | {FN_ABORT}
        for name, stage in stages.items()
    }
    fed = Federation(FlakyTransport(Federation.from_sites(sites).transport, fail))
    run = functools.partial(
        secure_sum,
        fed,
        "test.properties.vector",
        threshold=threshold,
        allow_dropouts=True,
        size=size,
        salt=salt,
    )
    if n - len(dropped) < threshold:
        event("fewer survivors than the threshold")
        # Fewer sites answer the last stage than the threshold: no sum, and no unmasking.
        with pytest.raises(ProtocolError, match="threshold"):
            run()
        return
    result = run()
    # A site that drops at the last stage has its input in the sum already (U3).
    in_sum = [f"s{k}" for k in range(n) if stages.get(f"s{k}") in (None, STAGE_UNMASK)]
    assert result.sites == in_sum
    inputs = _inputs(in_sum, size, salt)
    np.testing.assert_array_equal(result["x"], sum(v[0] for v in inputs.values()))
    # Floats travel in fixed point with 32 fraction bits: exact to n * 2^-33.
    np.testing.assert_allclose(result["f"], sum(v[1] for v in inputs.values()), atol=1e-8)


@given(arrays(np.float64, st.tuples(st.integers(1, 6), st.just(2)), elements=st.floats(-5, 5)))
@settings(max_examples=100, deadline=None)
def test_a_schema_accepts_what_it_accepted_unchanged(gamma):
    schema = {"gamma": FloatArray((Bound(1, 8), 2), lo=-5, hi=5), "k": Int(0, 9, default=3)}
    first = check_arguments(schema, {"gamma": gamma}, site="s", function="f")
    again = check_arguments(schema, first, site="s", function="f")
    np.testing.assert_array_equal(first["gamma"], again["gamma"])
    assert first["k"] == again["k"] == 3


def _jsonable_elementwise(value: Any) -> Any:
    """An array's JSON form, one element at a time: non-finite floats become None."""
    if isinstance(value, list):
        return [_jsonable_elementwise(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@given(
    arrays(
        st.sampled_from(
            [np.bool_, np.int8, np.int64, np.uint64, np.float16, np.float32, np.float64]
        ),
        array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5),
    )
)
@settings(max_examples=200, deadline=None)
def test_an_arrays_json_form_is_its_elements_one_by_one(values):
    from fedroc._results import jsonable

    got = jsonable(values)
    want = _jsonable_elementwise(values.tolist())
    assert got == want
    # The same Python types (a float is not an int, nothing stays a numpy scalar), and it
    # is strict JSON (no NaN or Infinity).
    assert repr(got) == repr(want)
    json.dumps(got, allow_nan=False)
