"""Keys, certificates and the cluster file for a local (or small) deployment.

:func:`generate_cluster` writes into one directory: a self-signed CA, a TLS certificate and
key for each party (and for the client that submits jobs), an X25519 key pair for each
proxy (owners seal their shares to it), optionally an Ed25519 key for each data owner
(``owner-NAME.key``), and ``cluster.toml`` with the owners' public keys registered under
``[owners]``. In a real deployment each party keeps only its own private keys and each
owner only its own key; the TOML file names the files each side needs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tomli_w

from fedroc._tls import issue_certificate, new_ca, write_certificate, write_private_key
from fedroc.exceptions import InputError
from fedroc.mpc.messages import CLIENT_CN, party_cn
from fedroc.mpc.owner import check_owner_name, write_owner_key
from fedroc.mpc.seal import write_key_pair

__all__ = [
    "CLIENT_CN",
    "generate_cluster",
    "owner_key_file",
    "owner_line",
    "owners_table",
    "party_cn",
]


def generate_cluster(
    directory: str | Path,
    *,
    hosts: Mapping[int, str] | None = None,
    ports: Mapping[int, int] | None = None,
    timeout: float = 60.0,
    days: int = 365,
    owners: Mapping[str, bytes] | None = None,
    owner_keys: Sequence[str] = (),
) -> Path:
    """Write CA, party and client certificates, proxy share keys and ``cluster.toml``.

    Parameters
    ----------
    directory : path
        Created if missing.
    hosts, ports : mapping party id -> host / port
        Defaults: 127.0.0.1 and ports 7400, 7401, 7402.
    timeout : float
        Seconds a party waits for a peer before it gives up (written to the file).
    owners : mapping name -> Ed25519 public key (32 bytes), optional
        Data owners to register.
    owner_keys : sequence of str
        Owners to make a key for here (``owner-NAME.key``) and register (local setups).

    Returns
    -------
    Path of the cluster file.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    hosts = {pid: (hosts or {}).get(pid, "127.0.0.1") for pid in range(3)}
    ports = {pid: (ports or {}).get(pid, 7400 + pid) for pid in range(3)}
    ca_cert, ca_key = new_ca("fedroc-mpc-ca", days=days)
    write_certificate(out / "ca.pem", ca_cert)
    config: dict[str, Any] = {"ca": "ca.pem", "timeout": float(timeout), "party": {}}
    for pid in range(3):
        cert, key = issue_certificate(
            ca_cert, ca_key, party_cn(pid), hosts=["localhost", "127.0.0.1", hosts[pid]], days=days
        )
        write_certificate(out / f"party{pid}.pem", cert)
        write_private_key(out / f"party{pid}.key", key)
        party: dict[str, Any] = {
            "host": hosts[pid],
            "port": int(ports[pid]),
            "cert": f"party{pid}.pem",
            "key": f"party{pid}.key",
        }
        if pid in (0, 1):
            write_key_pair(out / f"party{pid}.share.key", out / f"party{pid}.share.pub")
            party["share_public"] = f"party{pid}.share.pub"
            party["share_key"] = f"party{pid}.share.key"
        config["party"][str(pid)] = party
    cert, key = issue_certificate(ca_cert, ca_key, CLIENT_CN, days=days)
    write_certificate(out / "client.pem", cert)
    write_private_key(out / "client.key", key)
    config["client"] = {"cert": "client.pem", "key": "client.key"}
    registered = dict(owners or {})
    for name in owner_keys:
        registered[name] = write_owner_key(out / owner_key_file(name))
    head = (
        "# fedroc MPC cluster: parties 0 and 1 are the proxies, party 2 the helper.\n"
        "# Paths are relative to this file. Each party needs only its own private keys.\n"
    )
    # The owners' table stays last: register_owners rewrites it in place.
    path = out / "cluster.toml"
    path.write_text(head + tomli_w.dumps(config) + "\n" + "\n".join(owners_table(registered)))
    return path


def owner_key_file(name: str) -> str:
    """File name of an owner's key in a cluster directory: ``owner-NAME.key``."""
    return "owner-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in name) + ".key"


def owner_line(name: str, key: bytes) -> str:
    """Return the line an owner's operator sends for the cluster file's ``[owners]`` table.

    ``"NAME" = "HEX"`` (a quoted TOML key, whatever the name), as ``fedroc mpc owner-key``
    and ``fedroc flower supernode --mpc-proxies`` print it.
    """
    return f"{json.dumps(name)} = {json.dumps(key.hex())}"


def owners_table(owners: Mapping[str, bytes]) -> list[str]:
    """Write the ``[owners]`` table registering data owners' public keys (TOML lines)."""
    for name, key in owners.items():
        check_owner_name(name)
        if len(key) != 32:
            raise InputError(f"owner {name!r}: an Ed25519 public key has 32 bytes")
    table = tomli_w.dumps({"owners": {name: key.hex() for name, key in owners.items()}})
    comment = "# Data owners whose signed bundles the proxies accept (Ed25519 public keys)."
    return [comment, *table.splitlines(), ""]
