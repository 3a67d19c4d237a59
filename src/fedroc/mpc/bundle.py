"""A data owner's shares, sealed for the two proxies.

The owner sorts its (score key, label) records, splits them into two additive shares and
seals one for each proxy (:mod:`fedroc.mpc.seal`). Proxy 0's share is the expansion of a
fresh 32-byte seed, so its box holds only the seed; proxy 1's box holds ``records - share0``.
The analyst (or whoever carries the bundle) sees the list length and two ciphertexts;
neither proxy can open the other's box. The associated data binds each box to its context
(a job or bundle id), owner, length and proxy.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from numpy.typing import ArrayLike

from fedroc.exceptions import InputError, ProtocolError
from fedroc.federation.records import decode, encode
from fedroc.mpc.auc import FIELDS, owner_records
from fedroc.mpc.prg import SEED_BYTES, Stream
from fedroc.mpc.ring import UArray
from fedroc.mpc.seal import seal, unseal

__all__ = ["Bundle", "make_bundle", "open_bundle", "read_bundle", "write_bundle"]

FORMAT = "fedroc-mpc-bundle-1"


@dataclass(frozen=True)
class Bundle:
    owner: str
    n: int
    context: str
    box0: bytes
    box1: bytes

    def box(self, pid: int) -> bytes:
        return self.box0 if pid == 0 else self.box1


def _aad(context: str, owner: str, n: int, pid: int) -> bytes:
    return f"{FORMAT}|{context}|{owner}|{n}|proxy{pid}".encode()


def make_bundle(
    owner: str,
    labels: ArrayLike,
    scores: ArrayLike,
    proxy_keys: tuple[X25519PublicKey, X25519PublicKey],
    context: str,
) -> Bundle:
    records = owner_records(labels, scores)
    n = int(records.shape[0])
    if n == 0:
        raise InputError(f"data owner {owner!r} has no samples")
    seed = secrets.token_bytes(SEED_BYTES)
    share0 = Stream(seed).uint64(records.shape)
    share1 = records - share0
    box0 = seal(proxy_keys[0], seed, _aad(context, owner, n, 0))
    box1 = seal(
        proxy_keys[1],
        np.ascontiguousarray(share1, dtype="<u8").tobytes(),
        _aad(context, owner, n, 1),
    )
    return Bundle(owner, n, context, box0, box1)


def open_bundle(bundle: Bundle, pid: int, key: X25519PrivateKey) -> UArray:
    """Proxy ``pid``'s share of the owner's records, shape ``(n, 3)``."""
    plain = unseal(key, bundle.box(pid), _aad(bundle.context, bundle.owner, bundle.n, pid))
    shape = (bundle.n, FIELDS)
    if pid == 0:
        if len(plain) != SEED_BYTES:
            raise ProtocolError(f"share of owner {bundle.owner!r} for proxy 0 is malformed")
        return Stream(plain).uint64(shape)
    if len(plain) != 8 * bundle.n * FIELDS:
        raise ProtocolError(f"share of owner {bundle.owner!r} for proxy 1 has the wrong size")
    return np.frombuffer(plain, dtype="<u8").astype(np.uint64).reshape(shape)


def write_bundle(bundle: Bundle, path: str | Path) -> None:
    Path(path).write_bytes(
        encode(
            {
                "format": FORMAT,
                "owner": bundle.owner,
                "n": bundle.n,
                "context": bundle.context,
                "box0": np.frombuffer(bundle.box0, dtype=np.uint8),
                "box1": np.frombuffer(bundle.box1, dtype=np.uint8),
            }
        )
    )


def read_bundle(path: str | Path) -> Bundle:
    p = Path(path)
    try:
        rec = decode(p.read_bytes())
    except FileNotFoundError:
        raise InputError(f"share bundle {str(p)!r} does not exist") from None
    except Exception as exc:
        raise InputError(f"{str(p)!r} is not a fedroc share bundle: {exc}") from exc
    if rec.get("format") != FORMAT:
        raise InputError(f"{str(p)!r} is not a fedroc share bundle ({FORMAT})")
    return Bundle(
        str(rec["owner"]),
        int(rec["n"]),
        str(rec["context"]),
        rec["box0"].tobytes(),
        rec["box1"].tobytes(),
    )
