"""Pure share arithmetic: the rings, encodings and local steps of the protocols.

Nothing here communicates or draws randomness; :mod:`fedroc.mpc.protocols` composes these
local steps with the runtime (parties, correlated randomness, channels), as MPyC separates
its finite-field and share arithmetic from its runtime.

Rings
-----
``Z_L`` with ``L = 2**64``: numpy ``uint64`` arrays, whose arithmetic wraps exactly
modulo ``2**64``. ``Z_K`` with ``K = 2**63`` (the low 63 bits). ``Z_p`` with ``p = 67``
(the field of SecureNN's private compare), stored as small unsigned integers.

Encodings
---------
* Fixed point: a real ``x`` is ``round(x * 2**f)`` in two's complement.
* Scores: a finite float64 maps to the unsigned 64-bit integer that orders exactly like the
  float (:func:`float_key`): ties stay ties, order stays order, nothing is rounded. The key
  is kept as two shared values, its top bit ``h`` and its low 63 bits ``l``, because the
  difference of two 64-bit keys needs 65 bits and a comparison in ``Z_L`` sees only 64.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

U64 = np.uint64
UArray = NDArray[np.uint64]

L_BITS = 64
K = 1 << 63  # 2**63: MSB weight in Z_L and modulus of Z_K
MASK63 = K - 1
P = 67  # SecureNN's prime for private compare (> 64 + 2, so sums of bit differences never wrap)

__all__ = [
    "MASK63",
    "K",
    "P",
    "beaver_local",
    "bits_msb_first",
    "decode_fixed",
    "encode_fixed",
    "float_key",
    "float_key_parts",
    "low_bits",
    "reconstruct",
    "split_with",
    "u64",
]


def u64(values: ArrayLike) -> UArray:
    """As a contiguous uint64 array; Python ints are taken modulo 2**64."""
    arr = np.asarray(values)
    if arr.dtype == np.uint64:
        return np.ascontiguousarray(arr)
    if arr.dtype.kind in "iub":
        return np.ascontiguousarray(arr.astype(np.int64).view(np.uint64))
    if arr.dtype == object:
        return np.array([int(v) % (1 << 64) for v in arr.reshape(-1)], dtype=np.uint64).reshape(
            arr.shape
        )
    raise TypeError(f"cannot use values of dtype {arr.dtype} as ring elements")


def low_bits(x: UArray, k: int) -> UArray:
    """``x mod 2**k`` (k in 1..64)."""
    if k >= 64:
        return x
    return x & U64((1 << k) - 1)


def split_with(x: UArray, share0: UArray) -> tuple[UArray, UArray]:
    """Additive shares ``(share0, x - share0)``; ``share0`` must be uniform in Z_L."""
    return share0, x - share0


def reconstruct(*shares: UArray) -> UArray:
    """Add the shares (mod ``2**64``) to recover the shared value."""
    out = np.zeros_like(shares[0])
    for s in shares:
        out = out + s
    return out


def to_signed(x: UArray) -> NDArray[np.int64]:
    """Two's-complement view of ring elements."""
    return np.asarray(x, dtype=np.uint64).view(np.int64)


# -- fixed point -------------------------------------------------------------------------


def encode_fixed(x: ArrayLike, frac_bits: int) -> UArray:
    """``round(x * 2**frac_bits)`` in two's complement; refuses values that do not fit."""
    arr = np.asarray(x, dtype=np.float64)
    scaled = np.rint(arr * float(1 << frac_bits))
    if not np.all(np.abs(scaled) < 2.0**62):
        raise ValueError(f"fixed-point values must satisfy |x| < 2**{62 - frac_bits}")
    return scaled.astype(np.int64).view(np.uint64)


def decode_fixed(x: UArray, frac_bits: int) -> NDArray[np.float64]:
    """Return the float64 values of fixed-point ring elements (inverse of :func:`encode_fixed`)."""
    return to_signed(x).astype(np.float64) / float(1 << frac_bits)


# -- score keys --------------------------------------------------------------------------


def float_key(scores: ArrayLike) -> UArray:
    """Order-preserving map of finite float64 values to uint64.

    Non-negative floats keep their bit pattern with the sign bit set; negative floats have
    every bit flipped, so larger floats give larger keys. ``-0.0`` becomes ``+0.0`` first
    (they compare equal as floats and must tie).
    """
    s = np.asarray(scores, dtype=np.float64)
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite to be encoded as keys")
    s = np.where(s == 0.0, 0.0, s)  # -0.0 -> +0.0
    bits = np.ascontiguousarray(s).view(np.uint64)
    negative = (bits >> U64(63)).astype(bool)
    return np.where(negative, ~bits, bits | U64(K))


def float_key_parts(scores: ArrayLike) -> tuple[UArray, UArray]:
    """Split each score's key into its top bit ``h`` (0/1) and its low 63 bits ``l``."""
    key = float_key(scores)
    return key >> U64(63), key & U64(MASK63)


# -- bits and Z_p ------------------------------------------------------------------------


def bits_msb_first(x: UArray, k: int) -> NDArray[np.uint8]:
    """Return the low ``k`` bits of each element, most significant first.

    The result has shape ``x.shape + (k,)``.
    """
    flat = np.ascontiguousarray(x.reshape(-1), dtype=np.uint64)
    big = flat.astype(">u8").view(np.uint8).reshape(-1, 8)
    bits = np.unpackbits(big, axis=1)[:, 64 - k :]
    return bits.reshape(*x.shape, k)


def carry_add(a: UArray, b: UArray, k: int) -> tuple[UArray, NDArray[np.uint8]]:
    """Add ``a + b`` mod ``2**k`` and return the carry ``[a + b >= 2**k]`` too (a, b < 2**k)."""
    s = a + b
    if k >= 64:
        return s, (s < a).astype(np.uint8)
    return low_bits(s, k), (s >> U64(k)).astype(np.uint8)


# -- Beaver multiplication (local parts) -------------------------------------------------


def beaver_local(party: int, e: UArray, f: UArray, a: UArray, b: UArray, c: UArray) -> UArray:
    """Compute a proxy's share of ``x * y`` from the opened ``e = x - a``, ``f = y - b``.

    ``x y = (e + a)(f + b) = e f + e b + a f + a b``; the public ``e f`` is added by party 0
    only. Shapes broadcast, so one ``a`` can serve a whole row of ``b`` (shared factor).
    """
    z = e * b + a * f + c
    if party == 0:
        z = z + e * f
    return z


def as_uint8_bits(values: Any) -> NDArray[np.uint8]:
    return np.asarray(values, dtype=np.uint8) & np.uint8(1)
