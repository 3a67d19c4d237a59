"""Three-party protocols on additive shares in Z_2^64, vectorized over numpy arrays.

Every function here is a generator run by all three parties (see
:mod:`fedroc.mpc.runtime`). Proxies (parties 0 and 1) pass their shares; the helper passes
arrays of the same shape whose values it ignores (zeros) and gets zeros back. Results are
shares of the outputs at the proxies.

* :func:`mul` / :func:`mul_sf`: Beaver multiplication with triples dealt by the helper
  (1 round). Party 0's parts of the triple come from the stream it shares with the helper,
  so the helper sends only party 1's ``c``.
* :func:`mux`: ``b ? x : y`` as ``y + b (x - y)``.
* :func:`wrap`: the core of comparison. Given a ``k``-bit value held by proxy 0 and one held
  by proxy 1, shares of the carry ``[d0 + d1 >= 2**k]``. The proxies open ``d + r`` for a
  random ``r`` of the helper's (whose bits they hold in shares over Z_67) and run
  SecureNN's private compare with a blinding bit ``beta`` and re-randomized message
  shares: the helper learns only ``beta XOR [r > d + r]``, uniform, and each proxy only
  values masked by ``r``. The helper
  folds its known bits into the result and returns fresh shares (3 rounds).
* :func:`msb`, :func:`lt`, :func:`key_ge` (CMP of two 64-bit score keys),
  :func:`modulus_conversion` (ppAURORA's MC, Z_2^63 -> Z_2^64): one call of :func:`wrap`.
* :func:`trunc`: exact ``floor(x / 2**k)`` (two wraps side by side, 3 rounds), so a
  fixed-point product never has the wrap-around errors of local truncation.
* :func:`divide` (and :func:`div_frac`): ``floor(num * 2**f / den)`` for secret integers,
  by long division in radix ``2**b`` (``2**b - 1`` comparisons side by side per digit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

from fedroc.exceptions import ProtocolError
from fedroc.mpc.ring import (
    MASK63,
    U64,
    P,
    UArray,
    beaver_local,
    bits_msb_first,
    carry_add,
    low_bits,
)
from fedroc.mpc.runtime import HELPER, Party, Program, Step, idle, par

__all__ = [
    "div_frac",
    "divide",
    "key_ge",
    "lt",
    "modulus_conversion",
    "msb",
    "mul",
    "mul_fixed",
    "mul_sf",
    "mux",
    "open_to_proxies",
    "private_compare_vectors",
    "trunc",
    "wrap",
]

BitArray = NDArray[np.uint8]

# Masks of private compare that tests/test_mpc_security.py removes, one at a time, to show
# that its view tests fail without them ("beta", "rho", "sigma", "tau", "share_mask").
# Empty in every real run.
REMOVED_MASKS: frozenset[str] = frozenset()


def _zeros(shape: tuple[int, ...]) -> UArray:
    return np.zeros(shape, dtype=np.uint64)


def constant(p: Party, value: int | UArray, shape: tuple[int, ...]) -> UArray:
    """Shares of a public constant: party 0 holds it, party 1 holds zero."""
    if p.pid == 0:
        return np.broadcast_to(np.asarray(value, dtype=np.uint64), shape).copy()
    return _zeros(shape)


def add_public(p: Party, x: UArray, value: int | UArray) -> UArray:
    """Shares of ``x + value`` for a public ``value``."""
    if p.pid == 0:
        return x + np.asarray(value, dtype=np.uint64)
    return x.copy()


def open_to_proxies(p: Party, x: UArray, tag: str = "open") -> Program:
    """Reveal ``x`` to both proxies (never to the helper). Used only where the paper opens."""
    if p.is_helper:
        yield idle(tag)
        return None
    got = yield Step({p.other: x}, (p.other,), tag)
    return x + got[p.other]


# -- multiplication ----------------------------------------------------------------------


def _beaver(
    p: Party,
    x: UArray,
    y: UArray,
    x_shape: tuple[int, ...],
    shape: tuple[int, ...],
    expand: Callable[[UArray], UArray],
    tag: str,
) -> Program:
    # One Beaver triple (a, b, c = expand(a) * b) dealt by the helper: the proxies open
    # e = x - a and f = y - b, and each computes its share of expand(x) * y from them.
    if p.is_helper:
        s0, s1 = p.shared(0), p.shared(1)
        a0, b0, c0 = s0.uint64(x_shape), s0.uint64(shape), s0.uint64(shape)
        a1, b1 = s1.uint64(x_shape), s1.uint64(shape)
        c1 = expand(a0 + a1) * (b0 + b1) - c0
        yield Step({1: c1}, (), tag)
        return _zeros(shape)
    s = p.shared(HELPER)
    a, b = s.uint64(x_shape), s.uint64(shape)
    c = s.uint64(shape) if p.pid == 0 else None
    e_i, f_i = x - a, y - b
    recv = (p.other,) if p.pid == 0 else (p.other, HELPER)
    got = yield Step({p.other: [e_i, f_i]}, recv, tag)
    e_o, f_o = got[p.other]
    if c is None:
        c = got[HELPER]
    return beaver_local(p.pid, expand(e_i + e_o), f_i + f_o, expand(a), b, c)


def _same(v: UArray) -> UArray:
    return v


def _by_row(v: UArray) -> UArray:
    return v[..., None]


def mul(p: Party, x: UArray, y: UArray, tag: str = "mul") -> Program:
    """Shares of the elementwise product ``x * y`` (same shapes)."""
    shape = np.broadcast_shapes(x.shape, y.shape)
    return (yield from _beaver(p, x, y, shape, shape, _same, tag))


def mul_sf(p: Party, b: UArray, x: UArray, tag: str = "mulsf") -> Program:
    """Shares of ``b[..., None] * x``: one factor shared by a whole row (one opening of b)."""
    if x.shape[:-1] != b.shape:
        raise ProtocolError(f"mul_sf: shapes {b.shape} and {x.shape} do not match")
    return (yield from _beaver(p, b, x, b.shape, x.shape, _by_row, tag))


def mux(p: Party, b: UArray, x: UArray, y: UArray, tag: str = "mux") -> Program:
    """Shares of ``x`` where the shared bit ``b`` is 1, else ``y``."""
    diff = yield from mul(p, b, x - y, tag)
    return y + diff


# -- private compare and the wrap bit ----------------------------------------------------


def private_compare_vectors(
    j: int,
    rbits: BitArray,
    y: UArray,
    beta: BitArray,
    s: BitArray,
    shift: NDArray[np.int64],
    k: int,
    rare: Callable[[int], BitArray],
    mask: BitArray | None = None,
) -> BitArray:
    """One proxy's message of SecureNN's private compare (Wagh et al. 2019, Algorithm 3).

    ``rbits`` (shape ``(k, m)``, bit-major) are this proxy's Z_67 shares of the bits of the
    helper's ``r`` (most significant first), ``y`` the public values (shape ``(m,)``).
    Reconstructed, row ``i`` of the message (shape ``(m, k)``) has exactly one zero iff
    ``beta XOR [r > y]``; the non-zero values are uniform in Z_67* (multiplied by the common
    ``s``, shape ``(k, m)``) and a common random rotation of each row hides where the zero
    is.

    ``mask`` (shape ``(k, m)``, common to both proxies, uniform in Z_67) re-randomizes the
    two additive shares of each ``c_i`` before the multiplication by ``s_i``: party 0 adds
    it, party 1 subtracts it. Without it the helper, who dealt both proxies' bit shares,
    would see the ratio ``c_i^0 / c_i^1`` of the two messages (``s_i`` cancels), which
    depends on the public bits and on ``beta``; with it each message is uniform and the pair
    tells only the sum. (Algorithm 3 as printed sends the unmasked shares.)

    Notes
    -----
    With ``b`` the public bits (of ``y + 1`` where ``beta = 1``, else of ``y``) and ``x``
    the shares of r's bits, ``w_i = x_i + b_i (j - 2 x_i)`` are shares of ``x_i XOR b_i``
    and ``c_i = j + sum_{l < i} w_l +- (j b_i - x_i)`` (minus where ``beta = 1``). All of it
    is computed in int16 on bit-major arrays (the running sum runs over contiguous rows),
    offset to non-negative values and reduced modulo 67 twice, in uint16.
    """
    m = y.shape[0]
    if rbits.shape != (k, m) or s.shape != (k, m):
        raise ProtocolError(f"private compare: bit shares must have shape {(k, m)}")
    bb = beta.astype(bool)
    z = np.where(bb, y + U64(1), y)
    if k < 64:
        z = low_bits(z, k)
    pub = np.ascontiguousarray(bits_msb_first(z, k).T).astype(np.int16)
    x = rbits.astype(np.int16)
    jj = np.int16(j)
    w = x + pub * (jj - 2 * x)  # in [-66, 67]
    # c = sum_{l < i} w_l (a running sum down the contiguous rows: numpy's cumsum along
    # axis 0 does not vectorize across the row), then + j +- (j b - x).
    c = np.empty_like(w)
    c[0] = 0
    for i in range(1, k):
        np.add(c[i - 1], w[i - 1], out=c[i])
    c += jj
    sign = (1 - 2 * beta.astype(np.int16))[None, :]  # -1 where beta = 1
    c += (jj * pub - x) * sign
    full = np.uint64((1 << k) - 1) if k < 64 else np.uint64(2**64 - 1)
    special = np.flatnonzero(bb & (y == full))
    if special.size:
        # t = y + 1 wraps: r <= y always, so the row must hold exactly one zero.
        u = rare(special.size * k).reshape(k, special.size).astype(np.int16)
        rows = (u + 1) % P if j == 0 else (P - u) % P
        rows[-1] = u[-1] if j == 0 else (P - u[-1]) % P
        c[:, special] = rows
    if mask is not None:
        c = c + mask.astype(np.int16) if j == 0 else c - mask.astype(np.int16)
    # Offset by a multiple of 67 above the most negative value, then reduce in uint16.
    c += np.int16(P * 64)
    cu = c.view(np.uint16)
    np.remainder(cu, np.uint16(P), out=cu)
    cu *= s
    np.remainder(cu, np.uint16(P), out=cu)
    d = cu.astype(np.uint8)
    # Rotate row i (of the (m, k) message) right by shift_i: windows of the doubled rows.
    rows_major = np.ascontiguousarray(d.T)
    wide = np.concatenate([rows_major, rows_major], axis=1)
    windows = sliding_window_view(wide, k, axis=1)
    return np.ascontiguousarray(windows[np.arange(m), (k - shift) % k])


OutputFn = Callable[..., BitArray]


def wrap(
    p: Party,
    d: UArray,
    k: int,
    *,
    xor_bit: BitArray | None = None,
    onehot: Sequence[UArray] = (),
    fn: OutputFn | None = None,
    tag: str = "wrap",
) -> Program:
    """Shares of ``W = [d0 + d1 >= 2**k] XOR x0 XOR x1`` or of ``fn(W, b_1, ..., b_t)``.

    Parameters
    ----------
    d : uint64 array, shape (m,)
        This proxy's ``k``-bit value (< 2**k).
    xor_bit : uint8 array, shape (m,), optional
        A bit known to this proxy only, folded into ``W`` (e.g. the top bits of the shares
        when computing an MSB).
    onehot : sequence of shared bits
        Extra secret bits ``b_j`` (shares of 0/1). With them the helper returns shares of
        the one-hot encoding of the masked tuple ``(W, b_1, ...)``, and the proxies apply
        ``fn`` to it by a table lookup under their masks, so any function of those bits
        costs no extra round.
    fn : callable, optional
        ``fn(W, b_1, ..., b_t) -> bit`` on uint8 arrays; required with ``onehot``.

    Notes
    -----
    With ``y_i = d_i + r_i`` (carry ``u_i``), ``y = y_0 + y_1`` (carry ``u_y``),
    ``r = r_0 + r_1`` (carry ``w_r``) and ``c = [r > y]`` (the carry of ``d + r``), the
    integers satisfy ``w = u_y + u_0 + u_1 - c - w_r``; as ``w`` is a bit, it equals the XOR
    of those bits. ``c`` is known only blinded (``beta XOR c``) by the helper, which adds
    ``w_r``; the proxies' own carries travel to the helper masked by common random bits.
    """
    m = d.shape[0]
    t = len(onehot)
    n_out = 1 << (t + 1)
    if t and fn is None:
        raise ProtocolError("wrap: a function is needed with one-hot bits")
    mask = U64((1 << k) - 1) if k < 64 else U64(2**64 - 1)
    tag = f"{tag}.wrap{k}"  # steps: .r (masked values), .pc (to the helper), .out (results)
    if p.is_helper:
        s0, s1 = p.shared(0), p.shared(1)
        r0 = s0.uint64(m) & mask
        rb0 = s0.zp((k, m))
        out0 = s0.uint64((m, n_out)) if t else s0.uint64(m)
        r1 = s1.uint64(m) & mask
        r, w_r = carry_add(r0, r1, k)
        rb1 = (bits_msb_first(r, k).T.astype(np.int16) - rb0.astype(np.int16)) % P
        yield Step({1: rb1.astype(np.uint8)}, (), tag + ".r")
        got = yield Step({}, (0, 1), tag + ".pc")
        d0, e0, a0 = got[0]
        d1, e1, a1 = got[1]
        both = d0 + d1  # < 2 P < 256: no wrap in uint8
        hit = ((both == 0) | (both == P)).any(axis=1).astype(np.uint8)
        eps = np.unpackbits(e0)[:m] ^ np.unpackbits(e1)[:m]
        masked = hit ^ w_r ^ eps
        if t:
            bits = np.unpackbits(a0)[: m * t] ^ np.unpackbits(a1)[: m * t]
            index = masked.astype(np.int64) + (
                bits.reshape(t, m).astype(np.int64) << np.arange(1, t + 1)[:, None]
            ).sum(axis=0)
            onehot_values = np.zeros((m, n_out), dtype=np.uint64)
            onehot_values[np.arange(m), index] = 1
            share1 = onehot_values - out0
        else:
            share1 = masked.astype(np.uint64) - out0
        yield Step({1: share1}, (), tag + ".out")
        return _zeros((m,))

    j = p.pid
    sh = p.shared(HELPER)
    r_i = sh.uint64(m) & mask
    rb = sh.zp((k, m)) if j == 0 else None
    out_share = (sh.uint64((m, n_out)) if t else sh.uint64(m)) if j == 0 else None
    common = p.shared(p.other)
    beta = common.bits(m)
    rho = common.bits((2, m))
    sigma = common.bits((t, m)) if t else np.zeros((0, m), dtype=np.uint8)
    # tau hides each proxy's own low bit; it cancels in the helper's XOR of the two.
    tau = common.bits((t, m)) if t else np.zeros((0, m), dtype=np.uint8)
    s = common.zp_star((k, m))
    share_mask = common.zp((k, m))
    if REMOVED_MASKS:  # regression tests only: show that the view tests catch the leak
        beta, rho, sigma, tau, share_mask = (
            np.zeros_like(v) if name in REMOVED_MASKS else v
            for name, v in (
                ("beta", beta),
                ("rho", rho),
                ("sigma", sigma),
                ("tau", tau),
                ("share_mask", share_mask),
            )
        )
    shift = common.below(m, k)
    rare_stream = common.child()

    y_i, u_i = carry_add(d & mask, r_i, k)
    recv = (p.other,) if j == 0 else (p.other, HELPER)
    got = yield Step({p.other: y_i}, recv, tag + ".r")
    if rb is None:
        rb = got[HELPER]
    y, u_y = carry_add(y_i, got[p.other], k)
    vectors = private_compare_vectors(j, rb, y, beta, s, shift, k, rare_stream.zp_star, share_mask)
    own = u_i if xor_bit is None else u_i ^ xor_bit
    eps = np.packbits(own ^ rho[j])
    if t:
        # Shares of b XOR sigma = sigma + (1 - 2 sigma) b; their low bits add up mod 2.
        flips = np.stack([np.where(sigma[q] == 1, U64(0) - onehot[q], onehot[q]) for q in range(t)])
        if j == 0:
            flips = flips + sigma.astype(np.uint64)
        low = ((flips & U64(1)).astype(np.uint8) ^ tau).reshape(-1)
        masked_bits = np.packbits(low)
    else:
        masked_bits = np.zeros(0, dtype=np.uint8)
    yield Step({HELPER: [vectors, eps, masked_bits]}, (), tag + ".pc")
    got = yield Step({}, () if j == 0 else (HELPER,), tag + ".out")
    share = out_share if j == 0 else got[HELPER]
    assert share is not None
    # The helper's bit is W XOR mu, with mu known to both proxies.
    mu = beta ^ u_y ^ rho[0] ^ rho[1]
    if not t:
        out = np.where(mu == 1, U64(0) - share, share)
        if j == 0:
            out = out + mu.astype(np.uint64)
        return out
    assert fn is not None
    # Row r's table is fn at (index XOR M_r), M_r the row's masks packed like the index, so
    # sum_i fn(i ^ M_r) share[r, i] = sum over the i' with fn(i') = 1 of share[r, i' ^ M_r].
    index = np.arange(n_out)
    base = fn(*[((index >> q) & 1).astype(np.uint8) for q in range(t + 1)])
    packed = mu.astype(np.int64)
    for q in range(t):
        packed |= sigma[q].astype(np.int64) << (q + 1)
    rows = np.arange(m)
    out = np.zeros(m, dtype=np.uint64)
    for i in np.flatnonzero(base):
        out += share[rows, packed ^ i]
    return out


def msb(p: Party, a: UArray, tag: str = "msb") -> Program:
    """Shares of the most significant bit of ``a`` (1 for negative two's complement)."""
    top = (a >> U64(63)).astype(np.uint8)
    return (yield from wrap(p, a & U64(MASK63), 63, xor_bit=top, tag=tag))


def lt(p: Party, x: UArray, y: UArray, tag: str = "lt") -> Program:
    """Shares of ``[x < y]`` for signed values with ``|x - y| < 2**63``."""
    return (yield from msb(p, x - y, tag))


def _key_ge_fn(w: BitArray, hx: BitArray, hy: BitArray) -> BitArray:
    # w = [lx < ly]; keys with different top bits are ordered by the top bit alone.
    return np.where(hx != hy, hx, 1 - w).astype(np.uint8)


def key_ge(p: Party, hx: UArray, lx: UArray, hy: UArray, ly: UArray, tag: str = "cmp") -> Program:
    """Shares of ``[x >= y]`` for 64-bit keys given as top bit ``h`` and low 63 bits ``l``.

    ``lx - ly`` fits in 64 bits, its MSB gives ``[lx < ly]``, and the top bits decide where
    they differ; all three bits go through one :func:`wrap`, so this costs one wrap.
    """
    a = lx - ly
    top = (a >> U64(63)).astype(np.uint8)
    return (
        yield from wrap(
            p, a & U64(MASK63), 63, xor_bit=top, onehot=(hx, hy), fn=_key_ge_fn, tag=tag
        )
    )


def modulus_conversion(p: Party, dk: UArray, tag: str = "mc") -> Program:
    """PpAURORA's MC: shares of ``x`` over Z_2^63 to shares of the same ``x`` over Z_2^64."""
    dk = dk & U64(MASK63)
    w = yield from wrap(p, dk, 63, tag=tag)
    return dk - w * U64(1 << 63)


def trunc(p: Party, x: UArray, k: int, *, signed: bool = True, tag: str = "trunc") -> Program:
    """Shares of ``floor(x / 2**k)``, exactly (signed two's complement or unsigned)."""
    if not 1 <= k <= 62:
        raise ProtocolError(f"trunc: k must be in 1..62; got {k}")
    xs = add_public(p, x, 1 << 63) if signed else x
    w64, carry = yield from par(
        wrap(p, xs, 64, tag=tag + ".hi"), wrap(p, low_bits(xs, k), k, tag=tag + ".lo")
    )
    q = (xs >> U64(k)) + carry - (w64 << U64(64 - k))
    if signed:
        q = add_public(p, q, (1 << 64) - (1 << (63 - k)))
    return q


def mul_fixed(p: Party, x: UArray, y: UArray, frac_bits: int, tag: str = "mulfx") -> Program:
    """Fixed-point product: Beaver multiplication, then exact truncation by ``frac_bits``."""
    z = yield from mul(p, x, y, tag)
    return (yield from trunc(p, z, frac_bits, tag=tag + ".trunc"))


def divide(
    p: Party,
    num: UArray,
    den: UArray,
    *,
    den_bits: int,
    int_bits: int,
    frac_bits: int,
    max_radix: int = 8,
    tag: str = "div",
) -> Program:
    """Shares of ``floor(num * 2**frac_bits / den)`` for secret integers.

    Parameters
    ----------
    num, den : uint64 shares, shape (m,)
        ``0 <= num < den * 2**int_bits`` and ``0 < den < 2**den_bits`` (public bounds).
    den_bits, int_bits, frac_bits : int
        Bounds of the operands and the number of quotient bits after the point.
    max_radix : int
        Quotient bits per digit at most; the radix is also limited so that every compared
        value stays below ``2**62``.

    Notes
    -----
    Long division in radix ``2**b``: each digit is the count of ``t = 1 .. 2**b - 1`` with
    ``remainder >= t den`` (``2**b - 1`` comparisons side by side, one wrap, 3 rounds), and
    the remainder is updated by one multiplication (1 round). A larger radix costs more
    comparisons per digit but fewer rounds; the few quotients of a job make that cheap.
    With ``den = 0`` the result is meaningless and must be masked by the caller.
    """
    room = 62 - den_bits
    if room < 1 or int_bits > room or int_bits < 0 or frac_bits < 0:
        raise ProtocolError(
            f"divide: {den_bits}-bit denominators with {int_bits} integer bits do not fit "
            "the 62-bit comparisons"
        )
    # Integer digits compare values below den 2**int_bits whatever their radix; fraction
    # digits compare the shifted remainder (below den 2**b), so their radix is limited.
    radix = max(1, min(max_radix, room))
    m = num.shape[0]
    q = np.zeros(m, dtype=np.uint64)
    rem = num
    digits: list[tuple[int, int]] = []  # (bits, shift of den) for each digit, top first
    hi = int_bits
    while hi > 0:
        b = min(max_radix, hi)
        digits.append((b, hi - b))
        hi -= b
    done = 0
    while done < frac_bits:
        b = min(radix, frac_bits - done)
        done += b
        digits.append((b, -b))  # fraction digit: shift the remainder left by b instead
    for index, (b, shift) in enumerate(digits):
        if shift < 0:
            rem = rem << U64(-shift)
            scale = np.uint64(1)
        else:
            scale = np.uint64(1) << U64(shift)
        steps = np.arange(1, 1 << b, dtype=np.uint64) * scale
        lhs = np.repeat(rem, steps.size)
        rhs = (den[:, None] * steps[None, :]).reshape(-1)
        below = yield from lt(p, lhs, rhs, f"{tag}.digit")
        digit = add_public(
            p, U64(0) - below.reshape(m, -1).sum(axis=1, dtype=np.uint64), (1 << b) - 1
        )
        q = (q << U64(b)) + digit
        if index < len(digits) - 1:
            taken = yield from mul(p, digit, den, f"{tag}.digit.mul")
            rem = rem - taken * scale
    return q


def div_frac(
    p: Party, num: UArray, den: UArray, frac_bits: int, *, radix_bits: int = 4, tag: str = "div"
) -> Program:
    """Shares of ``floor(num * 2**frac_bits / den)`` for integers ``0 <= num < 2 den``.

    Needs ``den * 2**radix_bits < 2**62``; see :func:`divide`.
    """
    return (
        yield from divide(
            p,
            num,
            den,
            den_bits=62 - radix_bits,
            int_bits=1,
            frac_bits=frac_bits,
            max_radix=radix_bits,
            tag=tag,
        )
    )
