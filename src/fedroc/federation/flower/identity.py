"""Who a SuperNode is: one key pair per site, registered with the SuperLink under its name.

Flower 1.41 authenticates SuperNodes when the SuperLink runs with
``--enable-supernode-auth``: each node signs every Fleet API request with its private key
(``flower-supernode --auth-supernode-private-key``), and the SuperLink accepts only keys
that were registered through its Control API (``flwr supernode register KEY --name NAME``).
A node with an unregistered key cannot connect; self-registration is disabled.

fedroc binds a site's *name* to its key on top of that. The analyst keeps the fingerprint
of each site's public key (``connection.json`` of a deployment, or ``--site-key``); the
ServerApp reads every node's registered public key and name from the SuperLink
(``Grid.get_nodes``) and refuses a node whose key is not the pinned key of the site it
declares, or whose registered name differs from it (:mod:`.transport`). So a node holding
another site's key cannot answer as a third site, and a rogue key registered under a
site's name (anyone who can reach the Control API can register one: Flower 1.41 has no
account authentication without its enterprise plugins) is refused by the pin.

Keys are ECDSA P-384 in OpenSSH format (what Flower's tools read); fingerprints are
``SHA256:`` + hex of the DER SubjectPublicKeyInfo, so a PEM and an OpenSSH copy of one key
have the same fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fedroc._files import reading
from fedroc.exceptions import FedrocError, InputError

__all__ = [
    "NodeKey",
    "fingerprint",
    "generate_node_key",
    "public_key_fingerprint",
    "read_node_key",
]

PRIVATE_NAME = "node-auth.key"
PUBLIC_NAME = "node-auth.pub"


@dataclass(frozen=True)
class NodeKey:
    """A site's SuperNode key pair on disk and the fingerprint of its public key."""

    site: str
    private_key: Path | None
    public_key: Path
    fingerprint: str


def fingerprint(public_key: bytes) -> str:
    """``SHA256:<hex>`` of a public key given as PEM (Flower's NodeInfo) or OpenSSH text."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    data = public_key.strip()
    try:
        if data.startswith(b"-----BEGIN"):
            key = serialization.load_pem_public_key(data)
        else:
            key = serialization.load_ssh_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise InputError(f"not a PEM or OpenSSH public key: {exc}") from None
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return "SHA256:" + hashlib.sha256(der).hexdigest()


def public_key_fingerprint(path: str | Path) -> str:
    """Fingerprint of the public key in a file (PEM or OpenSSH)."""
    with reading(path, "public key file") as p:
        data = p.read_bytes()
    try:
        return fingerprint(data)
    except InputError as exc:
        raise InputError(f"public key file {str(p)!r}: {exc}") from None


def generate_node_key(directory: str | Path, site: str, *, overwrite: bool = False) -> NodeKey:
    """Create a site's key pair in ``directory`` (``node-auth.key``, mode 600, and ``.pub``).

    An existing pair is kept (and returned) unless ``overwrite``: a site's identity must
    not change because a deployment was started again.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    private, public = out / PRIVATE_NAME, out / PUBLIC_NAME
    if private.exists() and public.exists() and not overwrite:
        return read_node_key(out, site)
    key = ec.generate_private_key(ec.SECP384R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    ssh = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    public.write_bytes(ssh + f" fedroc-site:{site}\n".encode())
    return NodeKey(site, private, public, fingerprint(ssh))


def read_node_key(directory: str | Path, site: str) -> NodeKey:
    """Read the key pair a node directory holds (the private key may be absent: analyst side)."""
    out = Path(directory)
    private = out / PRIVATE_NAME
    public = out / PUBLIC_NAME
    return NodeKey(
        site, private if private.exists() else None, public, public_key_fingerprint(public)
    )


def register_sites(
    flwr: list[str],
    env: Mapping[str, str],
    keys: Mapping[str, Path],
    *,
    connection_name: str,
    timeout: float = 120.0,
) -> dict[str, int | None]:
    """Register each site's public key with the SuperLink under the site's name.

    Runs ``flwr supernode register`` (Flower's public CLI) once per site, in parallel. A key
    that is already registered (a restarted deployment on the same database) is accepted:
    its node id then comes back as None.
    """
    procs = {}
    for site, public in keys.items():
        cmd = [*flwr, "supernode", "register", str(public), connection_name]
        cmd += ["--name", site, "--format", "json"]
        procs[site] = subprocess.Popen(
            cmd,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
    out: dict[str, int | None] = {}
    problems = []
    for site, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            problems.append(f"site {site!r}: `flwr supernode register` timed out")
            continue
        text = stdout + "\n" + stderr
        node_id = None
        for line in stdout.splitlines():
            if line.strip().startswith("{"):
                try:
                    node_id = int(json.loads(stdout[stdout.index("{") :])["node-id"])
                except (ValueError, KeyError):
                    pass
                break
        if node_id is not None:
            out[site] = node_id
        elif "already in use" in text.lower() or "ALREADY_IN_USE" in text:
            out[site] = None
        else:
            detail = " | ".join(text.strip().splitlines()[-3:])
            problems.append(f"site {site!r}: {detail}")
    if problems:
        raise FedrocError("could not register the sites' keys: " + "; ".join(problems))
    return out
