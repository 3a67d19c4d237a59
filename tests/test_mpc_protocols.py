"""The MPC engine's pieces against plain numpy: encodings, streams, frames, protocols.

Protocols run at three parties in threads over the in-memory channel (same code as over
TLS). Inputs are split into fresh random shares; outputs are reconstructed and compared
with the same expression computed in numpy on the plaintext.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fedroc.exceptions import ProtocolError
from fedroc.mpc import protocols as pr
from fedroc.mpc import ring
from fedroc.mpc.local import random_shares
from fedroc.mpc.messages import FRAME_PREFIX
from fedroc.mpc.prg import Stream
from fedroc.mpc.runtime import Step, par, read_step, run_local, step_frame

SEED = b"fedroc-mpc-tests"


def run3(fn, *inputs, **kwargs):
    """Run ``fn(party, *shares)`` at the three parties; reconstructed output and the run."""
    shares = [random_shares(ring.u64(x)) for x in inputs]
    programs = [lambda p, i=i: fn(p, *[s[i] for s in shares]) for i in (0, 1)]
    programs.append(lambda p: fn(p, *[np.zeros_like(s[0]) for s in shares]))
    run = run_local(programs, master_seed=SEED, **kwargs)
    return run.results[0] + run.results[1], run


def signed(x):
    return np.asarray(x, dtype=np.uint64).view(np.int64)


# -- encodings -----------------------------------------------------------------------------


def test_float_key_orders_and_ties_exactly_like_float64(rng):
    special = [0.0, -0.0, 5e-324, -5e-324, 2.2e-308, -1e300, 1e300, 1.7976931348623157e308]
    s = np.concatenate([rng.normal(size=300) * 10.0 ** rng.integers(-300, 300, 300), special])
    s = np.concatenate([s, s[:50]])  # exact ties
    key = ring.float_key(s)
    i, j = rng.integers(0, s.size, (2, 20000))
    assert np.array_equal(key[i] > key[j], s[i] > s[j])
    assert np.array_equal(key[i] == key[j], s[i] == s[j])  # -0.0 ties with 0.0
    h, low = ring.float_key_parts(s)
    assert np.array_equal((h << np.uint64(63)) | low, key)
    with pytest.raises(ValueError):
        ring.float_key([0.5, np.nan])


def test_fixed_point_round_trip(rng):
    x = rng.normal(size=1000) * 1000
    enc = ring.encode_fixed(x, 20)
    assert np.max(np.abs(ring.decode_fixed(enc, 20) - x)) <= 2.0**-21
    with pytest.raises(ValueError):
        ring.encode_fixed([2.0**50], 20)


def test_stream_is_deterministic_and_uniform():
    a, b = Stream(bytes(32)), Stream(bytes(32))
    assert np.array_equal(a.uint64(100), b.uint64(100))
    assert not np.array_equal(a.uint64(100), a.uint64(100))  # successive draws differ
    zp = Stream(bytes(range(32))).zp(67 * 300)
    assert zp.max() < 67
    assert stats.chisquare(np.bincount(zp, minlength=67)).pvalue > 1e-3
    star = Stream(bytes(range(32))).zp_star(66 * 300)
    assert star.min() >= 1 and star.max() < 67
    bits = Stream(bytes(32)).bits(10000)
    assert stats.binomtest(int(bits.sum()), 10000).pvalue > 1e-3


def test_frames_round_trip():
    payload = [np.arange(5, dtype=np.uint64), [np.zeros((2, 3), np.uint8), b"xy", 7], None, "s"]
    frame = step_frame("tag", payload, "job-1234")
    tag, back = read_step(frame[FRAME_PREFIX:], "test")
    assert tag == "tag"
    assert np.array_equal(back[0], payload[0])
    assert back[1][0].shape == (2, 3) and back[1][1] == b"xy" and back[1][2] == 7
    assert back[2] is None and back[3] == "s"


# -- private compare -----------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 7, 63, 64])
def test_private_compare_vectors_hold_a_zero_iff_blinded_result(k, rng):
    m = 400
    top = (1 << k) - 1
    r = ring.u64(rng.integers(0, 2**62, m)) & np.uint64(top)
    y = ring.u64(rng.integers(0, 2**62, m)) & np.uint64(top)
    y[:40] = r[:40]  # equal values
    y[40:60] = np.uint64(top)  # t = y + 1 wraps when beta = 1
    beta = rng.integers(0, 2, m).astype(np.uint8)
    bits = ring.bits_msb_first(r, k).T.astype(np.int64)  # bit-major: (k, m)
    share0 = rng.integers(0, 67, (k, m))
    share1 = (bits - share0) % 67
    s = rng.integers(1, 67, (k, m)).astype(np.uint8)
    shift = rng.integers(0, k, m)
    rare = [Stream(bytes(range(32))), Stream(bytes(range(32)))]  # common to both proxies
    mask = rng.integers(0, 67, (k, m)).astype(np.uint8)
    d0 = pr.private_compare_vectors(
        0, share0.astype(np.uint8), y, beta, s, shift, k, rare[0].zp_star, mask
    )
    d1 = pr.private_compare_vectors(
        1, share1.astype(np.uint8), y, beta, s, shift, k, rare[1].zp_star, mask
    )
    d = (d0.astype(np.int64) + d1) % 67
    zeros = (d == 0).sum(axis=1)
    assert zeros.max() <= 1
    assert np.array_equal(zeros == 1, (beta == 1) ^ (r > y))


def test_private_compare_messages_are_rerandomized(rng):
    """The helper dealt both proxies' bit shares; each message alone must still be uniform.

    At the most significant position proxy 0's share of ``c`` is ``-+ x0`` (no prefix), so
    without the common mask its message is 0 whenever the helper's own ``x0`` is 0.
    """
    m, k = 4000, 63
    y = ring.u64(rng.integers(0, 2**62, m))
    beta = rng.integers(0, 2, m).astype(np.uint8)
    share0 = rng.integers(0, 67, (k, m)).astype(np.uint8)
    s = rng.integers(1, 67, (k, m)).astype(np.uint8)
    no_shift = np.zeros(m, dtype=np.int64)  # isolate the share masking from the rotation
    known_zero = share0[0] == 0  # the helper knows these rows
    mask = rng.integers(0, 67, (k, m)).astype(np.uint8)
    plain = pr.private_compare_vectors(0, share0, y, beta, s, no_shift, k, None)
    masked = pr.private_compare_vectors(0, share0, y, beta, s, no_shift, k, None, mask)
    assert np.all(plain[known_zero, 0] == 0)  # the leak the mask removes
    hits = int((masked[known_zero, 0] == 0).sum())
    assert stats.binomtest(hits, int(known_zero.sum()), 1 / 67).pvalue > 1e-3


def test_wrap_passes_a_common_mask_to_both_proxies(monkeypatch, rng):
    seen = {}
    original = pr.private_compare_vectors

    def spy(j, *args):
        seen[j] = args[-1]
        return original(j, *args)

    monkeypatch.setattr(pr, "private_compare_vectors", spy)
    x = ring.u64(rng.integers(-(2**62), 2**62, 300))
    z, _ = run3(pr.msb, x)
    assert np.array_equal(z, x >> np.uint64(63))
    assert seen[0] is not None and np.array_equal(seen[0], seen[1])
    assert stats.chisquare(np.bincount(seen[0].reshape(-1), minlength=67)).pvalue > 1e-3


# -- protocols -----------------------------------------------------------------------------


def test_mul_and_mux_match_numpy(rng):
    x = ring.u64(rng.integers(-(2**62), 2**62, 500))
    y = ring.u64(rng.integers(-(2**62), 2**62, 500))
    z, run = run3(pr.mul, x, y)
    assert np.array_equal(z, x * y)
    assert [s.rounds for s in run.stats] == [1, 1, 1]
    # Party 0 sends e and f (8 bytes each per element) plus one frame header.
    assert 16 * 500 < run.stats[0].bytes_sent < 16 * 500 + 200
    b = ring.u64(rng.integers(0, 2, 500))
    z, _ = run3(pr.mux, b, x, y)
    assert np.array_equal(z, np.where(b == 1, x, y))


def test_mul_shared_factor(rng):
    b = ring.u64(rng.integers(0, 2**40, (4, 30)))
    x = ring.u64(rng.integers(-(2**40), 2**40, (4, 30, 3)))
    z, _ = run3(pr.mul_sf, b, x)
    assert np.array_equal(z, b[..., None] * x)


def test_msb_and_lt_match_numpy(rng):
    x = ring.u64(rng.integers(-(2**62), 2**62, 3000))
    y = ring.u64(rng.integers(-(2**62), 2**62, 3000))
    edge = ring.u64([0, 1, -1, 2**62, -(2**62), 2**63 - 1])
    x[: edge.size] = edge
    y[: edge.size] = ring.u64([0, 0, 0, 1 - 2**62, 2**62 - 1, 0])  # |x - y| < 2**63
    z, run = run3(pr.msb, x)
    assert np.array_equal(z, x >> np.uint64(63))
    # Proxy 0 sends y_i then the compare vectors; proxy 1 and the helper get one more step.
    assert [s.rounds for s in run.stats] == [2, 3, 3]
    z, _ = run3(pr.lt, x, y)
    assert np.array_equal(z, (signed(x) < signed(y)).astype(np.uint64))


def test_key_ge_compares_64_bit_keys(rng):
    f = np.concatenate([rng.normal(size=800) * 100, [0.0, -0.0, 1.5, -1.5]])
    g = rng.permutation(f)
    g[:200] = f[:200]  # equal keys
    g[200:260] = -f[200:260]  # top bits differ
    hf, lf = ring.float_key_parts(f)
    hg, lg = ring.float_key_parts(g)
    z, _ = run3(pr.key_ge, hf, lf, hg, lg)
    assert np.array_equal(z, (f >= g).astype(np.uint64))


def test_modulus_conversion(rng):
    x = ring.u64(rng.integers(0, 2**63, 1000, dtype=np.uint64))
    shares = random_shares(x)
    low = [s & np.uint64(ring.MASK63) for s in shares]
    run = run_local(
        [
            lambda p: pr.modulus_conversion(p, low[0]),
            lambda p: pr.modulus_conversion(p, low[1]),
            lambda p: pr.modulus_conversion(p, np.zeros(1000, np.uint64)),
        ],
        master_seed=SEED,
    )
    # Shares over Z_2^63 in, shares of the same value over Z_2^64 out.
    assert np.array_equal(run.results[0] + run.results[1], x)


@pytest.mark.parametrize("k", [1, 13, 40, 62])
def test_trunc_is_exact(k, rng):
    x = ring.u64(rng.integers(-(2**63), 2**63 - 1, 1000, dtype=np.int64))
    z, _ = run3(lambda p, a: pr.trunc(p, a, k), x)
    assert np.array_equal(signed(z), signed(x) >> k)
    z, _ = run3(lambda p, a: pr.trunc(p, a, k, signed=False), x)
    assert np.array_equal(z, x >> np.uint64(k))


def test_mul_fixed_matches_float_product(rng):
    f = 20  # products of |x| < 2**11 need 2 f + 22 < 63 bits
    a, b = rng.normal(size=500) * 100, rng.normal(size=500) * 100
    z, _ = run3(
        lambda p, x, y: pr.mul_fixed(p, x, y, f), ring.encode_fixed(a, f), ring.encode_fixed(b, f)
    )
    # Each factor is within 2**-21 of the float; the product is truncated, not rounded.
    assert np.max(np.abs(ring.decode_fixed(z, f) - a * b)) < 1e-3
    exact = (signed(ring.encode_fixed(a, f)) * signed(ring.encode_fixed(b, f))) >> f
    assert np.array_equal(signed(z), exact)


def test_div_frac_is_floor_of_the_ratio(rng):
    den = ring.u64(rng.integers(1, 2**45, 40))
    num = ring.u64((rng.random(40) * den.astype(float)).astype(np.int64))
    num[:3] = den[:3]  # ratio exactly 1
    num[3:6] = 0
    den[6] = num[6] = 1
    z, run = run3(lambda p, a, b: pr.div_frac(p, a, b, 52), num, den)
    expected = [(int(a) << 52) // int(b) for a, b in zip(num, den, strict=True)]
    assert [int(v) for v in z] == expected
    assert run.stats[1].rounds < 60  # radix 16: 13 digits of 4 rounds, plus the integer part


@pytest.mark.parametrize(
    ("den_bits", "int_bits", "frac_bits", "radix"),
    [(20, 22, 0, 8), (30, 12, 17, 8), (58, 0, 20, 4), (45, 1, 60, 8), (10, 30, 0, 3)],
)
def test_divide_is_floor_of_the_ratio_with_integer_and_fraction_bits(
    den_bits, int_bits, frac_bits, radix, rng
):
    m = 60
    den = ring.u64(rng.integers(1, 2**den_bits, m, dtype=np.uint64))
    num = np.array(
        [int(rng.integers(0, 2**62)) % (int(d) << int_bits) if int_bits else 0 for d in den],
        dtype=np.uint64,
    )
    if not int_bits:
        num = (den.astype(float) * rng.random(m)).astype(np.uint64)
    z, _ = run3(
        lambda p, a, b: pr.divide(
            p, a, b, den_bits=den_bits, int_bits=int_bits, frac_bits=frac_bits, max_radix=radix
        ),
        num,
        den,
    )
    expected = [(int(a) << frac_bits) // int(b) for a, b in zip(num, den, strict=True)]
    assert [int(v) for v in z] == expected
    with pytest.raises(ProtocolError, match="do not fit"):
        next(pr.divide(None, num, den, den_bits=60, int_bits=5, frac_bits=0))


def test_par_merges_rounds(rng):
    x = ring.u64(rng.integers(-(2**62), 2**62, 100))

    def both(p, a):
        m1, m2 = yield from par(pr.msb(p, a), pr.msb(p, a - np.uint64(1)))
        return m1 + m2

    _, run = run3(both, x)
    assert [s.rounds for s in run.stats] == [2, 3, 3]


def test_mismatched_programs_fail_instead_of_hanging():
    def talk(p):
        if p.pid == 0:
            yield Step({1: np.zeros(1, np.uint64)}, (1,), "a")
        elif p.pid == 1:
            yield Step({0: np.zeros(1, np.uint64)}, (0,), "b")
        return None

    with pytest.raises(ProtocolError, match="out of step"):
        run_local([talk, talk, talk], timeout=5)
