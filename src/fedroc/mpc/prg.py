"""Correlated randomness: a shared seed expanded by AES-256 in counter mode.

Two parties holding the same 32-byte seed draw identical streams as long as they make the
same draws in the same order, which the protocols guarantee by construction (every party
runs the same program). Seeds come from :mod:`secrets`; nothing here uses numpy's or libc's
generators. A deterministic seed is accepted for reproducible tests only.
"""

from __future__ import annotations

import hashlib
import secrets
import sys

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from numpy.typing import NDArray

from fedroc.mpc.ring import P

__all__ = ["Stream", "derive_seed", "new_seed"]

SEED_BYTES = 32


def new_seed() -> bytes:
    """Return a fresh 32-byte seed from :mod:`secrets`."""
    return secrets.token_bytes(SEED_BYTES)


def derive_seed(master: bytes, label: str) -> bytes:
    """Derive a seed from a master seed and a label (for reproducible test runs)."""
    return hashlib.sha256(master + b"\x00fedroc-mpc\x00" + label.encode()).digest()


_LOW, _HIGH = (0, 1) if sys.byteorder == "little" else (1, 0)
_ZEROS = bytes(1 << 20)


def _zeros(n: int) -> memoryview:
    """``n`` zero bytes to encrypt, from one buffer kept for the process.

    Allocating and zeroing a fresh buffer per draw cost more than the AES itself.
    """
    global _ZEROS
    if n > len(_ZEROS):
        _ZEROS = bytes(1 << max(20, (n - 1).bit_length()))
    return memoryview(_ZEROS)[:n]


def _size(shape: int | tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    shp = (shape,) if isinstance(shape, int) else tuple(shape)
    n = 1
    for d in shp:
        n *= int(d)
    return shp, n


class Stream:
    """A deterministic cryptographic stream from a 32-byte seed.

    Each draw encrypts zeros under a fresh 128-bit counter block (the draw number in the
    high 64 bits), so draws never overlap.
    """

    def __init__(self, seed: bytes) -> None:
        if len(seed) != SEED_BYTES:
            raise ValueError(f"a stream seed has {SEED_BYTES} bytes; got {len(seed)}")
        self._key = seed
        self._draw = 0

    def random_bytes(self, n: int) -> bytes:
        """Draw ``n`` bytes: AES-256-CTR of zeros under this draw's counter block."""
        nonce = self._draw.to_bytes(8, "big") + bytes(8)
        self._draw += 1
        if n == 0:
            return b""
        enc = Cipher(algorithms.AES(self._key), modes.CTR(nonce)).encryptor()
        return enc.update(_zeros(n))

    def uint64(self, shape: int | tuple[int, ...]) -> NDArray[np.uint64]:
        """Draw uniform ring elements (uint64) of the given shape."""
        shp, n = _size(shape)
        return np.frombuffer(self.random_bytes(8 * n), dtype="<u8").astype(np.uint64).reshape(shp)

    def bits(self, shape: int | tuple[int, ...]) -> NDArray[np.uint8]:
        """Draw uniform bits (uint8 0/1) of the given shape."""
        shp, n = _size(shape)
        raw = np.frombuffer(self.random_bytes((n + 7) // 8), dtype=np.uint8)
        return np.unpackbits(raw)[:n].reshape(shp)

    def below(self, shape: int | tuple[int, ...], bound: int) -> NDArray[np.int64]:
        """Uniform integers in ``[0, bound)`` (bias at most ``bound / 2**64``)."""
        return (self.uint64(shape) % np.uint64(bound)).astype(np.int64)

    def _below_small(self, n: int, bound: int) -> NDArray[np.uint8]:
        """``n`` uniform integers in ``[0, bound)`` for ``bound <= 256``, exactly.

        Lemire's multiply-shift on 16-bit words: ``v = (x bound) >> 16``, rejecting the
        ``65536 mod bound`` words whose low half ``(x bound) mod 2**16`` falls below
        ``(65536 - bound) mod bound`` (10 in 65536 for 67). The rare rejected positions are
        drawn again, so the result is exactly uniform and no array is compacted.
        """
        prod = np.frombuffer(self.random_bytes(2 * n), dtype="<u2").astype(np.uint32)
        prod *= np.uint32(bound)
        halves = prod.view(np.uint16)  # the low and high 16 bits of each product
        out = halves[_HIGH::2].astype(np.uint8)
        threshold = (65536 - bound) % bound
        if threshold:
            bad = np.flatnonzero(halves[_LOW::2] < threshold)
            if bad.size:
                out[bad] = self._below_small(bad.size, bound)
        return out

    def zp(self, shape: int | tuple[int, ...]) -> NDArray[np.uint8]:
        """Uniform elements of Z_p."""
        shp, n = _size(shape)
        return self._below_small(n, P).reshape(shp)

    def zp_star(self, shape: int | tuple[int, ...]) -> NDArray[np.uint8]:
        """Uniform non-zero elements of Z_p."""
        shp, n = _size(shape)
        return (self._below_small(n, P - 1) + np.uint8(1)).reshape(shp)

    def child(self) -> Stream:
        """Split off an independent stream, for draws whose number depends on public data."""
        return Stream(self.random_bytes(SEED_BYTES))
