"""Self-signed certificate authorities for local and small deployments.

The Flower deployment (SuperLink certificate) and the MPC cluster (mutual TLS between the
three parties) both need a CA and certificates that name the hosts their peers dial.
Keys are ECDSA P-256, signatures SHA-256.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["issue_certificate", "new_ca", "write_certificate", "write_private_key"]

# Certificates start five minutes in the past so that small clock skews do not reject them.
_SKEW = _dt.timedelta(minutes=5)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def new_ca(common_name: str, *, days: int) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """Create a self-signed CA certificate and its key, valid for ``days`` days."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    now = _dt.datetime.now(_dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _SKEW)
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _alt_names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def issue_certificate(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    common_name: str,
    *,
    hosts: Iterable[str] = (),
    days: int,
    server_only: bool = False,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """Issue a certificate signed by the CA, naming ``hosts`` (IP addresses or DNS names).

    Without hosts it is a client certificate (mutual TLS). ``server_only`` restricts its
    use to TLS servers (extended key usage serverAuth), as gRPC servers expect.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    now = _dt.datetime.now(_dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _SKEW)
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    alt = _alt_names(hosts)
    if alt:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    if server_only:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
    return builder.sign(ca_key, hashes.SHA256()), key


def write_certificate(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def write_private_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    """PEM (PKCS#8, unencrypted), readable by its owner only."""
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    os.chmod(path, 0o600)
