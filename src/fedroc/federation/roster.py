"""Who a site aggregates with: its long-term signing key and its operator's roster of peers.

Secure aggregation (:mod:`fedroc.secagg`) runs through the analyst, who relays every
message. Without identities a site could not tell its real partners from sites the analyst
runs itself, nor their keys from keys the analyst substituted, nor whether the others were
asked for the same sum. So each site holds

- a long-term **Ed25519 signing key** (:class:`SiteIdentity`), with which it signs its
  advertisement in every session: its two key-agreement public keys together with every
  parameter of the session (members, threshold, ring, input function and a hash of its
  arguments);
- a **roster** (:class:`Roster`) that its own operator configured: the names of the sites it
  will aggregate with and their Ed25519 public keys. A site joins a session only if every
  member is on its roster, and goes on only if every member's advertisement verifies
  under the roster's key over the parameters it was itself given.

The same key signs a site's release of noisy scores in the distributed ROC-GLM, and a
site sets up its ROC-GLM only on pooled scores whose every other part carries the
signature of a site on its roster (:mod:`fedroc.methods.rocglm`): the analyst cannot pad
them with values of its own.

Where the keys and rosters live:

- Flower SuperNodes: ``secagg.key`` (private, mode 0600) and ``roster.toml`` in the node's
  directory (node config keys ``secagg-key``, ``roster``); ``fedroc flower up`` writes both
  for every site, ``fedroc flower keys`` creates a key for a site's operator to exchange.
- TOML federations (:meth:`fedroc.federation.Federation.from_toml`): ``secagg_key`` and
  ``roster`` paths per site (or one ``roster`` for all) in the operator's file.
- Other in-process federations (``from_frames``, ``from_files``, ``from_sites``): sites
  without an identity get one when the federation is built, with a roster of that
  federation's sites (:func:`provide_identities`). The analyst then holds the sites' rows
  in its own process anyway; see ``docs/privacy.md``.

Roster files are TOML: a ``[roster]`` table (or the whole file) of ``name = "ed25519:HEX"``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from fedroc._files import reading
from fedroc.exceptions import InputError

__all__ = [
    "KEY_NAME",
    "PUBLIC_NAME",
    "ROSTER_NAME",
    "SIGNATURE_BYTES",
    "Roster",
    "SiteIdentity",
    "load_identity",
    "load_signing_key",
    "new_signing_key",
    "provide_identities",
    "public_key_bytes",
    "public_key_text",
    "split_signatures",
    "write_signing_key",
]

KEY_NAME = "secagg.key"  # in a node's directory: the site's Ed25519 private key (PEM)
PUBLIC_NAME = "secagg.pub"  # its public key, as the roster line to give the other operators
ROSTER_NAME = "roster.toml"  # the peers the site aggregates with
SIGNATURE_BYTES = 64


def split_signatures(blob: bytes, names: Sequence[str]) -> dict[str, bytes] | None:
    """Cut concatenated signatures into one per name, in order; None unless one each.

    How a site reads the signatures an analyst relays for several sites' releases (the
    ROC-GLM's pooled parts, the clustered method's signed rows).
    """
    if len(blob) != SIGNATURE_BYTES * len(names):
        return None
    return {
        n: bytes(blob[SIGNATURE_BYTES * i : SIGNATURE_BYTES * (i + 1)]) for i, n in enumerate(names)
    }


_PREFIX = "ed25519:"


def new_signing_key() -> Ed25519PrivateKey:
    """Generate a fresh Ed25519 signing key (operating-system entropy)."""
    return Ed25519PrivateKey.generate()


def public_key_bytes(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    """Return the 32 raw bytes of an Ed25519 public key."""
    pub = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_key_text(key: Ed25519PrivateKey | Ed25519PublicKey | bytes) -> str:
    """Return a public key as a roster writes it: ``ed25519:`` and 64 hex digits."""
    raw = key if isinstance(key, bytes) else public_key_bytes(key)
    return _PREFIX + raw.hex()


def _parse_public(text: Any, where: str) -> bytes:
    if isinstance(text, bytes) and len(text) == 32:
        return text
    value = str(text).strip()
    if value.startswith(_PREFIX):
        value = value[len(_PREFIX) :]
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise InputError(
            f"{where}: {text!r} is not an Ed25519 public key (write 'ed25519:' and 64 hex digits)"
        )
    return raw


def write_signing_key(
    path: str | Path, key: Ed25519PrivateKey | None = None, *, overwrite: bool = False
) -> Ed25519PrivateKey:
    """Write a signing key to ``path`` (PEM, mode 0600) and its public line beside it.

    An existing key file is never replaced unless ``overwrite`` (key rotation; the new file
    replaces the old one atomically): a site's identity must not change because a
    deployment was started again. Returns the key in the file.
    """
    p = Path(path)
    if p.exists() and not overwrite:
        return load_signing_key(p)
    key = key or new_signing_key()
    p.parent.mkdir(parents=True, exist_ok=True)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    tmp = p.with_name(p.name + ".new")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, p)
    p.with_suffix(".pub").write_text(public_key_text(key) + "\n")
    return key


def load_signing_key(path: str | Path) -> Ed25519PrivateKey:
    """Read a site's Ed25519 signing key (PEM).

    Raises
    ------
    InputError
        When the file is missing or does not hold an Ed25519 private key.
    """
    with reading(path, "signing key") as p:
        data = p.read_bytes()
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise InputError(f"signing key {str(p)!r} is not a PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(f"signing key {str(p)!r} is not an Ed25519 key")
    return key


@dataclass(frozen=True)
class Roster:
    """The sites a site's operator lets it aggregate with, and their Ed25519 public keys.

    Parameters
    ----------
    keys : mapping of str to bytes or str
        Site name -> public key (32 raw bytes, or ``"ed25519:HEX"``).
    """

    keys: Mapping[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Check the names and parse the keys (a roster is immutable)."""
        parsed: dict[str, bytes] = {}
        for name, key in dict(self.keys).items():
            if not isinstance(name, str) or not name:
                raise InputError(f"a roster names a site {name!r}; names are non-empty strings")
            parsed[name] = _parse_public(key, f"roster entry {name!r}")
        object.__setattr__(self, "keys", dict(sorted(parsed.items())))

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is on the roster."""
        return name in self.keys

    @property
    def names(self) -> list[str]:
        """The sites on the roster, sorted."""
        return list(self.keys)

    def verify(self, name: str, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is ``name``'s signature of ``message`` under the roster's key."""
        key = self.keys.get(name)
        if key is None or len(signature) != SIGNATURE_BYTES:
            return False
        try:
            Ed25519PublicKey.from_public_bytes(key).verify(signature, message)
        except InvalidSignature:
            return False
        return True

    def unverified(self, signed: Iterable[tuple[str, bytes, bytes]]) -> list[str]:
        """Return the names among ``(name, message, signature)`` whose signature fails.

        A name that is not on the roster fails too (:meth:`verify`).
        """
        return [name for name, message, sig in signed if not self.verify(name, message, sig)]

    def to_mapping(self) -> dict[str, str]:
        """Return ``{name: "ed25519:HEX"}`` (what a roster file holds)."""
        return {name: public_key_text(key) for name, key in self.keys.items()}

    def to_toml(self) -> str:
        """Return the roster as a TOML file (a ``[roster]`` table)."""
        lines = ["# fedroc: the sites this site aggregates with, and their Ed25519 keys"]
        lines.append("[roster]")
        lines += [f'"{name}" = "{key}"' for name, key in self.to_mapping().items()]
        return "\n".join(lines) + "\n"

    def write(self, path: str | Path) -> Path:
        """Write the roster to ``path`` (TOML) and return the path."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(self.to_toml())
        return p

    @classmethod
    def from_file(cls, path: str | Path) -> Roster:
        """Read a roster file: its ``[roster]`` table, or the whole file.

        Raises
        ------
        InputError
            When the file cannot be read, is not TOML, or holds a malformed entry.
        """
        with reading(path, "roster") as p:
            raw = p.read_bytes()
        try:
            data = tomllib.loads(raw.decode())
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise InputError(f"roster {str(p)!r} is not valid TOML: {exc}") from None
        table = data.get("roster", data)
        if not isinstance(table, dict) or not table:
            raise InputError(f"roster {str(p)!r} lists no sites")
        try:
            return cls(table)
        except InputError as exc:
            raise InputError(f"roster {str(p)!r}: {exc}") from None


@dataclass(frozen=True, repr=False)
class SiteIdentity:
    """A site's signing key and the roster of the peers its operator configured.

    The roster must hold the site's own name with the public key of ``signing_key``.
    """

    name: str
    signing_key: Ed25519PrivateKey
    roster: Roster

    def __post_init__(self) -> None:
        """Check that the roster lists this site under its own key."""
        own = self.roster.keys.get(self.name)
        if own is None:
            raise InputError(f"site {self.name!r}: its roster does not list the site itself")
        if own != public_key_bytes(self.signing_key):
            raise InputError(
                f"site {self.name!r}: its roster lists another public key for the site than "
                "the one of its signing key"
            )

    def __repr__(self) -> str:
        """Show the name, the public key and the roster's names; never the private key."""
        return (
            f"SiteIdentity({self.name!r}, {public_key_text(self.public_key)}, "
            f"roster={self.roster.names})"
        )

    @property
    def public_key(self) -> bytes:
        """The site's Ed25519 public key (32 bytes)."""
        return public_key_bytes(self.signing_key)

    def sign(self, message: bytes) -> bytes:
        """Sign ``message`` with the site's long-term key (64 bytes)."""
        return self.signing_key.sign(message)


def load_identity(name: str, key: str | Path, roster: str | Path) -> SiteIdentity:
    """Read a site's identity from its key file and its roster file.

    A roster that leaves out the site itself is read with the site's own key added; one
    that lists another key for it is refused.
    """
    signing_key = load_signing_key(key)
    peers = Roster.from_file(roster)
    if name not in peers:
        peers = Roster({**peers.keys, name: public_key_bytes(signing_key)})
    return SiteIdentity(name, signing_key, peers)


def provide_identities(sites: Iterable[Any]) -> None:
    """Give every in-process site without an identity one, with a roster of these sites.

    ``sites`` are :class:`~fedroc.federation.Site` objects of one federation. A site that
    has an identity keeps it (and its roster, which may leave out sites added here: it then
    refuses to aggregate with them). The new sites' roster lists every site of the
    federation under its key.
    """
    sites = list(sites)
    missing = [s for s in sites if getattr(s, "identity", None) is None]
    if not missing:
        return
    keys = {s.name: new_signing_key() for s in missing}
    public = {
        s.name: public_key_bytes(keys[s.name]) if s.identity is None else s.identity.public_key
        for s in sites
    }
    roster = Roster(public)
    for s in missing:
        s.identity = SiteIdentity(s.name, keys[s.name], roster)
