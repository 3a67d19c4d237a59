"""Sealed boxes: a message readable only by the holder of one X25519 private key.

A data owner seals each share for its proxy, and each proxy seals its share of the result
for the analyst, so whoever relays the messages (the analyst relays the owners' shares;
proxy 0 relays proxy 1's result share) sees ciphertext only. Construction: an ephemeral
X25519 key agreement, HKDF-SHA256, ChaCha20-Poly1305 with caller-chosen associated data
(the job, owner and recipient), so a box cannot be replayed into another role.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from fedroc.exceptions import ProtocolError

__all__ = [
    "load_private_key",
    "load_public_key",
    "new_key",
    "public_bytes",
    "public_from_bytes",
    "seal",
    "unseal",
    "write_key_pair",
]

_INFO = b"fedroc-mpc sealed box v1"


def new_key() -> X25519PrivateKey:
    """Generate a fresh X25519 private key (from the operating system's entropy)."""
    return X25519PrivateKey.generate()


def public_bytes(
    key: X25519PublicKey | X25519PrivateKey | Ed25519PublicKey | Ed25519PrivateKey,
) -> bytes:
    """Return the 32 raw bytes of a key's public half (sealing X25519 or signing Ed25519)."""
    pub = key.public_key() if isinstance(key, X25519PrivateKey | Ed25519PrivateKey) else key
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_from_bytes(raw: bytes) -> X25519PublicKey:
    """Read a 32-byte X25519 public key; any other length is a ProtocolError."""
    if len(raw) != 32:
        raise ProtocolError(f"an X25519 public key has 32 bytes; got {len(raw)}")
    return X25519PublicKey.from_public_bytes(raw)


def _key(shared: bytes, eph: bytes, recipient: bytes) -> bytes:
    return HKDF(hashes.SHA256(), 32, salt=eph + recipient, info=_INFO).derive(shared)


def seal(recipient: X25519PublicKey, message: bytes, aad: bytes) -> bytes:
    """Seal ``message`` for ``recipient``, bound to ``aad``.

    Returns ``ephemeral public key (32) || nonce (12) || ciphertext`` (with its 16-byte tag).
    """
    eph = X25519PrivateKey.generate()
    eph_pub = public_bytes(eph)
    key = _key(eph.exchange(recipient), eph_pub, public_bytes(recipient))
    nonce = os.urandom(12)
    return eph_pub + nonce + ChaCha20Poly1305(key).encrypt(nonce, message, aad)


def unseal(private: X25519PrivateKey, box: bytes, aad: bytes) -> bytes:
    """Open a box sealed for ``private`` with the same ``aad``.

    Raises
    ------
    ProtocolError
        When the box is too short, or was sealed for another key or other associated data.
    """
    if len(box) < 32 + 12 + 16:
        raise ProtocolError("sealed box too short")
    eph_pub, nonce, body = box[:32], box[32:44], box[44:]
    key = _key(private.exchange(public_from_bytes(eph_pub)), eph_pub, public_bytes(private))
    try:
        return ChaCha20Poly1305(key).decrypt(nonce, body, aad)
    except InvalidTag:
        raise ProtocolError(
            "cannot open a sealed share: it was sealed for another key or another job/owner"
        ) from None


def write_key_pair(private_path: Path, public_path: Path) -> X25519PrivateKey:
    """Generate a key pair and write it as PEM files (the private one with mode 0600)."""
    key = new_key()
    private_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    os.chmod(private_path, 0o600)
    public_path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return key


def load_private_key(path: Path) -> X25519PrivateKey:
    """Read an X25519 private key from a PEM file."""
    key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    if not isinstance(key, X25519PrivateKey):
        raise ProtocolError(f"{path} does not hold an X25519 private key")
    return key


def load_public_key(path: Path) -> X25519PublicKey:
    """Read an X25519 public key from a PEM file."""
    key = serialization.load_pem_public_key(Path(path).read_bytes())
    if not isinstance(key, X25519PublicKey):
        raise ProtocolError(f"{path} does not hold an X25519 public key")
    return key
