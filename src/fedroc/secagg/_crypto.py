"""Cryptographic building blocks of secure aggregation (the ``cryptography`` package).

- Key agreement: X25519 (RFC 7748). Each party holds two key pairs: one whose shared
  secrets encrypt the Shamir shares sent through the server, one whose shared secrets
  seed the pairwise masks (Bonawitz et al. 2017, section 4).
- Key derivation: HKDF-SHA256 (RFC 5869) of a shared secret, with the session id as salt
  and the purpose as info, so that no key is used for two purposes or two sessions.
- Mask expansion: the ChaCha20 key stream of a derived key (zero nonce: each key serves
  one stream only), read as little-endian 64-bit words.
- Authenticated encryption of shares: AES-256-GCM with a random 96-bit nonce.

Every random byte comes from :func:`random_bytes` (operating-system entropy through
``secrets``); tests may replace it with a seeded ChaCha20 stream to make a run
reproducible, never the product.
"""

from __future__ import annotations

import secrets

import numpy as np
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from numpy.typing import NDArray

from fedroc.exceptions import ProtocolError

KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
_RAW = serialization.Encoding.Raw

PURPOSE_MASK = b"fedroc-secagg/v1 pairwise mask"
PURPOSE_SELF_MASK = b"fedroc-secagg/v1 self mask"
PURPOSE_SHARES = b"fedroc-secagg/v1 share encryption"


def random_bytes(n: int) -> bytes:
    """``n`` bytes of operating-system entropy (the only source of protecting randomness)."""
    return secrets.token_bytes(n)


def random_below(bound: int) -> int:
    """Uniform integer in ``[0, bound)`` by rejection sampling over :func:`random_bytes`."""
    n_bytes = (bound.bit_length() + 7) // 8 + 8  # 64 spare bits: rejection is rare
    limit = (256**n_bytes // bound) * bound
    while True:
        value = int.from_bytes(random_bytes(n_bytes), "big")
        if value < limit:
            return value % bound


def new_private_key() -> bytes:
    """Raw bytes of a fresh X25519 private key (any 32 bytes are a valid key)."""
    return random_bytes(KEY_BYTES)


def public_key(private: bytes) -> bytes:
    return (
        X25519PrivateKey.from_private_bytes(private)
        .public_key()
        .public_bytes(_RAW, serialization.PublicFormat.Raw)
    )


def agree(private: bytes, peer_public: bytes, *, purpose: bytes, session: bytes) -> bytes:
    """Derive a 32-byte key for ``purpose`` from X25519(private, peer_public) by HKDF."""
    try:
        peer = X25519PublicKey.from_public_bytes(peer_public)
        shared = X25519PrivateKey.from_private_bytes(private).exchange(peer)
    except ValueError as exc:
        raise ProtocolError(f"invalid X25519 public key: {exc}") from None
    return derive(shared, purpose=purpose, session=session)


def derive(secret: bytes, *, purpose: bytes, session: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=session, info=purpose).derive(
        secret
    )


def expand_mask(key: bytes, size: int, bits: int) -> NDArray[np.uint64]:
    """``size`` pseudo-random elements of Z_2^bits from the ChaCha20 stream of ``key``."""
    encryptor = Cipher(algorithms.ChaCha20(key, bytes(16)), mode=None).encryptor()
    words = np.frombuffer(encryptor.update(bytes(8 * size)), dtype="<u8").astype(np.uint64)
    if bits < 64:
        words &= np.uint64((1 << bits) - 1)
    return words


def seal(key: bytes, plaintext: bytes, associated: bytes) -> bytes:
    """``nonce || AES-256-GCM(key, nonce, plaintext, associated)``."""
    nonce = random_bytes(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, associated)


def open_sealed(key: bytes, blob: bytes, associated: bytes) -> bytes:
    from cryptography.exceptions import InvalidTag

    try:
        return AESGCM(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], associated)
    except InvalidTag:
        raise ProtocolError(
            "a share ciphertext failed authentication (altered in transit or misrouted)"
        ) from None
