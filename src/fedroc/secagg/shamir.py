"""Shamir secret sharing over the prime field GF(2^521 - 1).

A secret s < p is the constant term of a random polynomial f of degree t - 1; party i
(x = i, counted from 1) receives f(i). Any t shares give s back by Lagrange interpolation
at 0; fewer reveal nothing about it (Shamir 1979). The Mersenne prime 2^521 - 1 holds any
32-byte secret (an X25519 key or a mask seed). Coefficients come from the cryptographic
source of :mod:`fedroc.secagg._crypto`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fedroc.exceptions import ProtocolError
from fedroc.secagg import _crypto

__all__ = ["PRIME", "SHARE_BYTES", "reconstruct", "share_from_bytes", "share_to_bytes", "split"]

PRIME = 2**521 - 1
SHARE_BYTES = 66  # ceil(521 / 8)


def split(secret: int, *, n: int, threshold: int) -> list[int]:
    """Split ``secret`` into the shares ``f(1), ..., f(n)`` of threshold ``threshold``."""
    if not 0 <= secret < PRIME:
        raise ProtocolError("the secret does not fit the field")
    if not 1 <= threshold <= n:
        raise ProtocolError(f"threshold must lie in [1, {n}]; got {threshold}")
    coefficients = [secret] + [_crypto.random_below(PRIME) for _ in range(threshold - 1)]
    shares = []
    for x in range(1, n + 1):
        acc = 0
        for c in reversed(coefficients):  # Horner
            acc = (acc * x + c) % PRIME
        shares.append(acc)
    return shares


def reconstruct(shares: Mapping[int, int], *, threshold: int) -> int:
    """Recover the secret from shares ``{x: f(x)}`` by Lagrange interpolation at 0.

    Parameters
    ----------
    shares : mapping of int to int
        Share ``f(x)`` of party ``x`` (counted from 1); the ``threshold`` smallest ``x`` are
        used.
    threshold : int
        The threshold the secret was split with.

    Returns
    -------
    int
        The secret. Shares that were not made by one :func:`split` give a meaningless number,
        not an error.

    Raises
    ------
    ProtocolError
        With fewer than ``threshold`` shares.

    Examples
    --------
    >>> shares = split(42, n=5, threshold=3)
    >>> reconstruct({x: shares[x - 1] for x in (1, 3, 5)}, threshold=3)
    42
    """
    if len(shares) < threshold:
        raise ProtocolError(
            f"{len(shares)} share(s) cannot reconstruct a secret of threshold {threshold}"
        )
    points = sorted(shares.items())[:threshold]
    secret = 0
    for i, (xi, yi) in enumerate(points):
        num, den = 1, 1
        for j, (xj, _) in enumerate(points):
            if i != j:
                num = num * (-xj) % PRIME
                den = den * (xi - xj) % PRIME
        secret = (secret + yi * num * pow(den, -1, PRIME)) % PRIME
    return secret


def share_to_bytes(share: int) -> bytes:
    """Encode a share as :data:`SHARE_BYTES` big-endian bytes."""
    return share.to_bytes(SHARE_BYTES, "big")


def share_from_bytes(blob: bytes | Sequence[int]) -> int:
    """Decode a share written by :func:`share_to_bytes`."""
    return int.from_bytes(bytes(blob), "big")
