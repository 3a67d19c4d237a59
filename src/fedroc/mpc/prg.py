"""Correlated randomness: a shared seed expanded by AES-256 in counter mode.

Two parties holding the same 32-byte seed draw identical streams as long as they make the
same draws in the same order, which the protocols guarantee by construction (every party
runs the same program). Seeds come from :mod:`secrets`; nothing here uses numpy's or libc's
generators. A deterministic seed is accepted for reproducible tests only.
"""

from __future__ import annotations

import hashlib
import secrets

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from numpy.typing import NDArray

from fedroc.mpc.ring import P

__all__ = ["Stream", "derive_seed", "new_seed"]

SEED_BYTES = 32


def new_seed() -> bytes:
    return secrets.token_bytes(SEED_BYTES)


def derive_seed(master: bytes, label: str) -> bytes:
    """A seed derived from a master seed (for reproducible test runs)."""
    return hashlib.sha256(master + b"\x00fedroc-mpc\x00" + label.encode()).digest()


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
        nonce = self._draw.to_bytes(8, "big") + bytes(8)
        self._draw += 1
        if n == 0:
            return b""
        enc = Cipher(algorithms.AES(self._key), modes.CTR(nonce)).encryptor()
        return enc.update(bytes(n))

    def uint64(self, shape: int | tuple[int, ...]) -> NDArray[np.uint64]:
        shp, n = _size(shape)
        return np.frombuffer(self.random_bytes(8 * n), dtype="<u8").astype(np.uint64).reshape(shp)

    def bits(self, shape: int | tuple[int, ...]) -> NDArray[np.uint8]:
        shp, n = _size(shape)
        raw = np.frombuffer(self.random_bytes((n + 7) // 8), dtype=np.uint8)
        return np.unpackbits(raw)[:n].reshape(shp)

    def below(self, shape: int | tuple[int, ...], bound: int) -> NDArray[np.int64]:
        """Uniform integers in ``[0, bound)`` (bias at most ``bound / 2**64``)."""
        return (self.uint64(shape) % np.uint64(bound)).astype(np.int64)

    def _bytes_below(self, n: int, bound: int) -> NDArray[np.uint8]:
        """``n`` uniform bytes below ``bound`` (<= 256) by rejection sampling."""
        limit = (256 // bound) * bound
        out = np.empty(0, dtype=np.uint8)
        while out.size < n:
            want = n - out.size
            raw = np.frombuffer(self.random_bytes(int(want * 256 / limit) + 64), dtype=np.uint8)
            out = np.concatenate([out, raw[raw < limit][:want]])
        return out % np.uint8(bound)

    def zp(self, shape: int | tuple[int, ...]) -> NDArray[np.uint8]:
        """Uniform elements of Z_p."""
        shp, n = _size(shape)
        return self._bytes_below(n, P).reshape(shp)

    def zp_star(self, shape: int | tuple[int, ...]) -> NDArray[np.uint8]:
        """Uniform non-zero elements of Z_p."""
        shp, n = _size(shape)
        return (self._bytes_below(n, P - 1) + np.uint8(1)).reshape(shp)

    def child(self) -> Stream:
        """An independent stream, for draws whose number depends on public data."""
        return Stream(self.random_bytes(SEED_BYTES))
