"""Keys, certificates and the cluster file for a local (or small) deployment.

:func:`generate_cluster` writes into one directory: a self-signed CA, a TLS certificate and
key for each party (and for the client that submits jobs), an X25519 key pair for each
proxy (owners seal their shares to it) and ``cluster.toml``. In a real deployment each
party keeps only its own private keys; the TOML file names the files each side needs.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fedroc.mpc.seal import write_key_pair

__all__ = ["CLIENT_CN", "generate_cluster", "party_cn"]

CLIENT_CN = "fedroc-mpc-client"


def party_cn(pid: int) -> str:
    return f"fedroc-mpc-party-{pid}"


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    os.chmod(path, 0o600)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _san(host: str) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    try:
        ip = ipaddress.ip_address(host)
        if str(ip) != "127.0.0.1":
            names.append(x509.IPAddress(ip))
    except ValueError:
        if host != "localhost":
            names.append(x509.DNSName(host))
    return names


def _issue(
    cn: str,
    host: str | None,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_name: x509.Name,
    days: int,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = _dt.datetime.now(_dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if host is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName(_san(host)), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def generate_cluster(
    directory: str | Path,
    *,
    hosts: Mapping[int, str] | None = None,
    ports: Mapping[int, int] | None = None,
    timeout: float = 60.0,
    days: int = 365,
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

    Returns
    -------
    Path of the cluster file.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    hosts = {pid: (hosts or {}).get(pid, "127.0.0.1") for pid in range(3)}
    ports = {pid: (ports or {}).get(pid, 7400 + pid) for pid in range(3)}
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("fedroc-mpc-ca")
    now = _dt.datetime.now(_dt.UTC)
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    (out / "ca.pem").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    lines = [
        "# fedroc MPC cluster: parties 0 and 1 are the proxies, party 2 the helper.",
        "# Paths are relative to this file. Each party needs only its own private keys.",
        'ca = "ca.pem"',
        f"timeout = {float(timeout)!r}",
        "",
    ]
    for pid in range(3):
        cert, key = _issue(party_cn(pid), hosts[pid], ca_key, ca_name, days)
        (out / f"party{pid}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(out / f"party{pid}.key", key)
        lines += [
            f"[party.{pid}]",
            f'host = "{hosts[pid]}"',
            f"port = {int(ports[pid])}",
            f'cert = "party{pid}.pem"',
            f'key = "party{pid}.key"',
        ]
        if pid in (0, 1):
            write_key_pair(out / f"party{pid}.share.key", out / f"party{pid}.share.pub")
            lines += [
                f'share_public = "party{pid}.share.pub"',
                f'share_key = "party{pid}.share.key"',
            ]
        lines.append("")
    cert, key = _issue(CLIENT_CN, None, ca_key, ca_name, days)
    (out / "client.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(out / "client.key", key)
    lines += ["[client]", 'cert = "client.pem"', 'key = "client.key"', ""]
    path = out / "cluster.toml"
    path.write_text("\n".join(lines))
    return path
