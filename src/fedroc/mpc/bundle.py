"""A data owner's shares for one job, sealed for the two proxies and signed.

The owner sorts its (score key, label) records, splits them into two additive shares and
seals one for each proxy (:mod:`fedroc.mpc.seal`). Proxy 0's share is the expansion of a
fresh 32-byte seed, so its box holds only the seed; proxy 1's box holds
``records - share0``. The associated data of each box binds it to the job's terms, the
owner, the list length and the proxy; the owner's Ed25519 signature covers the terms, the
owner, the length and the digests of both boxes (:mod:`fedroc.mpc.owner`). Whoever carries
the bundle (the analyst) sees the list length, the terms and two ciphertexts; neither proxy
can open the other's box; and the bundle is good for its one job only.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from numpy.typing import ArrayLike

from fedroc.exceptions import InputError, ProtocolError
from fedroc.federation.records import decode, encode
from fedroc.mpc.auc import FIELDS, MAX_N, owner_records
from fedroc.mpc.messages import read_bytes, read_int, read_str, sub_record, with_prefix
from fedroc.mpc.owner import (
    JobTerms,
    check_owner_name,
    owner_public_bytes,
    sign_bundle,
    verify_bundle,
)
from fedroc.mpc.prg import SEED_BYTES, Stream
from fedroc.mpc.ring import UArray
from fedroc.mpc.seal import public_from_bytes, seal, unseal

__all__ = ["Bundle", "make_bundle", "open_bundle", "read_bundle", "write_bundle"]

FORMAT = "fedroc-mpc-bundle-2"


def digest(box: bytes) -> bytes:
    return hashlib.sha256(box).digest()


@dataclass(frozen=True)
class Bundle:
    """One owner's sealed shares for one job.

    Attributes
    ----------
    owner : str
    n : int
        The owner's list length (public).
    terms : JobTerms
        The job this bundle is for (signed).
    owner_key : bytes
        The owner's Ed25519 public key (32 bytes); the cluster must have it registered.
    signature : bytes
        The owner's signature (64 bytes) of the terms, owner, n and both boxes' digests.
    box0, box1 : bytes
        The shares sealed for proxy 0 and proxy 1.
    """

    owner: str
    n: int
    terms: JobTerms
    owner_key: bytes
    signature: bytes
    box0: bytes
    box1: bytes

    def box(self, pid: int) -> bytes:
        """Return the box sealed for proxy ``pid`` (0 or 1)."""
        return self.box0 if pid == 0 else self.box1

    def verify(self) -> bool:
        """Whether the signature holds for this bundle's contents and key."""
        return verify_bundle(
            self.owner_key,
            self.signature,
            self.terms,
            self.owner,
            self.n,
            digest(self.box0),
            digest(self.box1),
        )

    def to_record(self) -> dict[str, Any]:
        """Return the bundle as a record (the boxes as uint8 arrays); see :func:`write_bundle`."""
        return {
            "format": FORMAT,
            "owner": self.owner,
            "n": self.n,
            **with_prefix(self.terms.to_record(), "terms"),
            "owner_key": self.owner_key,
            "signature": self.signature,
            "box0": np.frombuffer(self.box0, dtype=np.uint8),
            "box1": np.frombuffer(self.box1, dtype=np.uint8),
        }

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> Bundle:
        """Strict inverse of :meth:`to_record` (raises ProtocolError on a bad field)."""
        what = "bundle"
        if rec.get("format") != FORMAT:
            raise ProtocolError(f"not a fedroc share bundle ({FORMAT})")
        return cls(
            read_str(rec, "owner", what, max_len=100),
            read_int(rec, "n", what, lo=1, hi=MAX_N),
            JobTerms.from_record(sub_record(rec, "terms")),
            read_bytes(rec, "owner_key", what, size=32),
            read_bytes(rec, "signature", what, size=64),
            read_bytes(rec, "box0", what, max_size=1 << 12),
            read_bytes(rec, "box1", what, max_size=8 * (FIELDS + 2) * MAX_N + 64),
        )


def _aad(terms: JobTerms, owner: str, n: int, pid: int) -> bytes:
    return b"|".join(
        [FORMAT.encode(), terms.digest(), owner.encode(), str(n).encode(), b"proxy%d" % pid]
    )


def make_bundle(
    owner: str,
    labels: ArrayLike,
    scores: ArrayLike,
    terms: JobTerms,
    owner_key: Ed25519PrivateKey,
    *,
    scores_b: ArrayLike | None = None,
) -> Bundle:
    """Sort, split, seal and sign one owner's rows for the job ``terms``.

    ``scores_b`` (a second model's scores of the same rows) is needed exactly when the job
    compares two models (``terms.compare``).

    Parameters
    ----------
    owner : str
        The owner's name, one of ``terms.owners``.
    labels : array-like of shape (n,)
        The owner's labels.
    scores : array-like of float, shape (n,)
        The model's scores of those rows.
    terms : JobTerms
        The job the bundle is for (its proxies' keys seal the shares).
    owner_key : Ed25519PrivateKey
        The owner's signing key.
    scores_b : array-like of float, shape (n,), optional
        A second model's scores of the same rows.

    Returns
    -------
    Bundle
        The two sealed shares, the owner's public key and its signature.

    Raises
    ------
    InputError
        An owner not among the job's, ``scores_b`` given without ``terms.compare`` (or
        missing with it), or no or too many rows.
    """
    check_owner_name(owner)
    if owner not in terms.owners:
        raise InputError(f"owner {owner!r} is not among the job's owners {list(terms.owners)}")
    if terms.compare != (scores_b is not None):
        raise InputError(
            "a job that compares two models needs the second model's scores (scores_b), "
            "and only such a job takes them"
        )
    records = owner_records(labels, scores, scores_b)
    n = int(records.shape[0])
    if n == 0:
        raise InputError(f"data owner {owner!r} has no samples")
    if n > MAX_N:
        raise InputError(f"data owner {owner!r} has {n} samples; at most {MAX_N} are supported")
    keys = (public_from_bytes(terms.proxy_keys[0]), public_from_bytes(terms.proxy_keys[1]))
    seed = secrets.token_bytes(SEED_BYTES)
    share0 = Stream(seed).uint64(records.shape)
    share1 = records - share0
    box0 = seal(keys[0], seed, _aad(terms, owner, n, 0))
    box1 = seal(
        keys[1],
        np.ascontiguousarray(share1, dtype="<u8").tobytes(),
        _aad(terms, owner, n, 1),
    )
    signature = sign_bundle(owner_key, terms, owner, n, digest(box0), digest(box1))
    return Bundle(owner, n, terms, owner_public_bytes(owner_key), signature, box0, box1)


def open_box(
    terms: JobTerms, owner: str, n: int, box: bytes, pid: int, key: X25519PrivateKey
) -> UArray:
    """Open proxy ``pid``'s share of an owner's records, shape ``(n, 3)`` (``(n, 5)`` comparing)."""
    plain = unseal(key, box, _aad(terms, owner, n, pid))
    fields = FIELDS + 2 if terms.compare else FIELDS
    shape = (n, fields)
    if pid == 0:
        if len(plain) != SEED_BYTES:
            raise ProtocolError(f"share of owner {owner!r} for proxy 0 is malformed")
        return Stream(plain).uint64(shape)
    if len(plain) != 8 * n * fields:
        raise ProtocolError(f"share of owner {owner!r} for proxy 1 has the wrong size")
    return np.frombuffer(plain, dtype="<u8").astype(np.uint64).reshape(shape)


def open_bundle(bundle: Bundle, pid: int, key: X25519PrivateKey) -> UArray:
    """Open proxy ``pid``'s share of the owner's records.

    Parameters
    ----------
    bundle : Bundle
        An owner's bundle.
    pid : {0, 1}
        The proxy.
    key : X25519PrivateKey
        The proxy's share key.

    Returns
    -------
    ndarray of uint64, shape (n, 3) or (n, 5)
        The proxy's additive share of the records (5 columns when the job compares two
        models).

    Raises
    ------
    ProtocolError
        The share does not open (wrong key, tampered box) or is malformed.
    """
    return open_box(bundle.terms, bundle.owner, bundle.n, bundle.box(pid), pid, key)


def write_bundle(bundle: Bundle, path: str | Path) -> None:
    """Write a bundle to ``path`` (the file an owner hands to the analyst).

    Parameters
    ----------
    bundle : Bundle
        The bundle.
    path : str or pathlib.Path
        The file to write (replaced if it exists).
    """
    Path(path).write_bytes(encode(bundle.to_record()))


def read_bundle(path: str | Path) -> Bundle:
    """Read and validate a bundle file.

    Parameters
    ----------
    path : str or pathlib.Path
        The bundle file.

    Returns
    -------
    Bundle
        The bundle, its fields checked.

    Raises
    ------
    InputError
        When the file is missing, not a record, or a field is malformed.
    """
    p = Path(path)
    try:
        rec = decode(p.read_bytes())
    except FileNotFoundError:
        raise InputError(f"share bundle {str(p)!r} does not exist") from None
    except Exception as exc:
        raise InputError(f"{str(p)!r} is not a fedroc share bundle: {exc}") from exc
    try:
        return Bundle.from_record(rec)
    except ProtocolError as exc:
        raise InputError(f"{str(p)!r}: {exc}") from None
