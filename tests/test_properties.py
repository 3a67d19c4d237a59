"""Properties of the core machinery, for any input hypothesis can think of.

- ``decode(encode(r)) == r`` for every record the wire carries.
- A secure sum equals the plain sum of the survivors' inputs, whichever sites drop out
  (down to the threshold) and at whichever stage.
- A schema check is idempotent: what a site accepted, it accepts again unchanged.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays
from test_secagg import FlakyTransport

from fedroc.data import SiteData
from fedroc.federation import Federation, Reply, Site, site_function
from fedroc.federation.records import decode, encode
from fedroc.federation.schema import Bound, FloatArray, Int, check_arguments
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


@given(records)
@settings(max_examples=200, deadline=None)
def test_decode_inverts_encode(record):
    back = decode(encode(record))
    assert set(back) == set(record)
    for key, value in record.items():
        assert _same(value, back[key]), key


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
    dropped = data.draw(
        st.lists(st.sampled_from([f"s{k}" for k in range(n)]), unique=True, max_size=n - threshold),
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
    result = secure_sum(
        fed,
        "test.properties.vector",
        threshold=threshold,
        allow_dropouts=True,
        size=size,
        salt=salt,
    )
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
