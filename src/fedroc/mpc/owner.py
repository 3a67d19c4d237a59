"""Data owners: their keys, the job terms they sign, and what a site agrees to.

A data owner authorises one job by signing its *terms* (:class:`JobTerms`): the job id,
the exact list of co-owners, the two proxies' keys and every parameter that decides what
is opened (precision, minimum class count, whether the CI is computed, the merge). The
signature (Ed25519, the owner's own key) also covers the owner's list length and the
digests of its two sealed boxes (:mod:`fedroc.mpc.bundle`). The proxies check every
signature against the keys registered in the cluster file (``[owners]``), refuse a job
whose owners are not exactly the signed list (no subset, no duplicate, no stranger) or
whose parameters differ from the signed ones, and never run a job id twice
(:mod:`fedroc.mpc.ledger`). So a bundle cannot be reused, alone or with crafted bundles.

At a fedroc site (:func:`fedroc.methods.mpc.share_site`), the site checks the terms
against its own settings before it signs: it must be among the owners, the job needs at
least ``min_owners`` owners, the minimum class count at least the site's ``min_count``,
the precision at most ``max_frac_bits``, and the site authorises at most ``max_jobs``
jobs over its lifetime (by default exactly one), all over the co-owners of its first. The
settings and the owner key live in the site's state (:func:`configure_owner`); a key is
generated on first use if none is set.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from fedroc._docs import fill_doc
from fedroc._files import reading
from fedroc.exceptions import InputError, ProtocolError
from fedroc.mpc.auc import (
    DEFAULT_FRAC_BITS,
    JOB_PARAMETERS,
    AucSpec,
    JobParameters,
    check_job_parameters,
    job_parameters,
)
from fedroc.mpc.seal import public_bytes

__all__ = [
    "OWNER_STATE",
    "JobTerms",
    "OwnerSettings",
    "configure_owner",
    "load_owner_key",
    "new_job_id",
    "new_owner_key",
    "owner_public_key",
    "sign_bundle",
    "verify_bundle",
    "write_owner_key",
]

FORMAT = "fedroc-mpc-job-1"
OWNER_STATE = "fedroc.mpc.owner"
JOB_ID = re.compile(r"^[0-9A-Za-z_-]{8,64}$")
MIN_OWNERS = 2
MAX_OWNERS = 1 << 10


def new_job_id() -> str:
    """Return a fresh random job id (32 hex digits)."""
    import secrets

    return secrets.token_hex(16)


def check_owner_name(name: Any) -> str:
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= 100
        or any(ord(c) < 32 or ord(c) == 127 for c in name)
    ):
        raise InputError(f"an owner name is 1-100 printable characters; got {name!r}")
    return name


@fill_doc
@dataclass(frozen=True)
class JobTerms(JobParameters):
    """What every owner of one job signs: the job, its owners and proxies, its parameters.

    The parameters are the :class:`~fedroc.mpc.auc.JobParameters`, given by keyword.

    Attributes
    ----------
    job : str
        Job id (8-64 letters, digits, ``-``, ``_``); a cluster runs each id once.
    owners : tuple of str
        The co-owners, sorted; the job must hold exactly one bundle of each.
    proxy_keys : tuple of bytes
        The proxies' X25519 public keys (32 bytes each) the shares are sealed to.
    {mpc_job_parameters}
    """

    job: str
    owners: tuple[str, ...]
    proxy_keys: tuple[bytes, bytes]

    def __post_init__(self) -> None:
        """Check the job id, the owners (sorted, distinct), the proxy keys and the parameters.

        Raises
        ------
        InputError
            Naming the first field that does not fit.
        """
        if not isinstance(self.job, str) or not JOB_ID.match(self.job):
            raise InputError(f"job id must be 8-64 letters, digits, '-' or '_'; got {self.job!r}")
        owners = self.owners
        if not isinstance(owners, tuple) or not 1 <= len(owners) <= MAX_OWNERS:
            raise InputError(f"owners must be a tuple of 1 to {MAX_OWNERS} names; got {owners!r}")
        for name in owners:
            check_owner_name(name)
        if list(owners) != sorted(set(owners)):
            raise InputError(f"owners must be distinct and sorted; got {list(owners)}")
        keys = self.proxy_keys
        if (
            not isinstance(keys, tuple)
            or len(keys) != 2
            or not all(isinstance(k, bytes) and len(k) == 32 for k in keys)
        ):
            raise InputError("proxy_keys must be two 32-byte X25519 public keys")
        check_job_parameters(**job_parameters(self))

    @classmethod
    def create(
        cls,
        owners: list[str] | tuple[str, ...],
        proxy_keys: tuple[bytes, bytes],
        *,
        job: str | None = None,
        **params: Any,
    ) -> JobTerms:
        """Terms with a fresh job id and the owners sorted."""
        return cls(
            job or new_job_id(),
            tuple(sorted(owners)),
            (proxy_keys[0], proxy_keys[1]),
            **params,
        )

    def params(self) -> dict[str, Any]:
        """Return the computation's parameters (those :class:`~fedroc.mpc.auc.AucSpec` takes)."""
        return job_parameters(self)

    def canonical(self) -> bytes:
        """Encode the bytes that are signed: canonical JSON (sorted keys, keys in hex)."""
        body = {
            "format": FORMAT,
            "job": self.job,
            "owners": list(self.owners),
            "proxy_keys": [k.hex() for k in self.proxy_keys],
            **self.params(),
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    def digest(self) -> bytes:
        """Return the SHA-256 of :meth:`canonical` (32 bytes)."""
        return hashlib.sha256(self.canonical()).digest()

    def spec(self, sizes: tuple[int, ...]) -> AucSpec:
        """Return the computation these terms describe, for owners' lists of the given sizes."""
        return AucSpec(sizes, **self.params())

    def to_record(self) -> dict[str, Any]:
        """Return the terms as a record; :meth:`from_record` inverts it."""
        return {
            "job": self.job,
            "owners": list(self.owners),
            "proxy0": self.proxy_keys[0],
            "proxy1": self.proxy_keys[1],
            **self.params(),
        }

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> JobTerms:
        """Strict inverse of :meth:`to_record`; raises ProtocolError on any bad field."""
        expected = {"job", "owners", "proxy0", "proxy1", *JOB_PARAMETERS}
        if set(rec) != expected:
            raise ProtocolError(f"malformed job terms: keys {sorted(rec)}")
        owners = rec["owners"]
        if not isinstance(owners, list):
            raise ProtocolError("malformed job terms: owners must be a list")
        try:
            return cls(
                rec["job"],
                tuple(owners),
                (_as_bytes(rec["proxy0"]), _as_bytes(rec["proxy1"])),
                **{name: rec[name] for name in JOB_PARAMETERS},
            )
        except InputError as exc:
            raise ProtocolError(f"malformed job terms: {exc}") from None


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    raise ProtocolError("malformed job terms: a proxy key must be bytes")


# -- owner keys and signatures -------------------------------------------------------------


def new_owner_key() -> Ed25519PrivateKey:
    """Generate a fresh Ed25519 signing key (from the operating system's entropy).

    Returns
    -------
    cryptography.hazmat.primitives.asymmetric.ed25519.Ed25519PrivateKey
        The key.
    """
    return Ed25519PrivateKey.generate()


#: The 32 raw bytes of an owner's public key, from its private or public key.
owner_public_bytes = public_bytes


def _private_raw(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )


def write_owner_key(path: str | Path, key: Ed25519PrivateKey | None = None) -> bytes:
    """Write an owner's private key (PEM, mode 0600); returns its public key (32 bytes)."""
    import os

    key = key or new_owner_key()
    p = Path(path)
    p.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    os.chmod(p, 0o600)
    return owner_public_bytes(key)


def load_owner_key(path: str | Path) -> Ed25519PrivateKey:
    """Read an owner's Ed25519 private key (PEM).

    Raises
    ------
    InputError
        When the file is missing, not PEM, or holds another kind of key.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"owner key file {str(p)!r} does not exist")
    with reading(p, "owner key file"):  # a directory, no permission, ...
        data = p.read_bytes()
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except ValueError as exc:
        raise InputError(f"owner key file {str(p)!r} is not a PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(f"owner key file {str(p)!r} does not hold an Ed25519 key")
    return key


def _signed_message(terms: JobTerms, owner: str, n: int, digest0: bytes, digest1: bytes) -> bytes:
    return b"|".join(
        [
            FORMAT.encode(),
            terms.digest(),
            owner.encode(),
            str(int(n)).encode(),
            digest0,
            digest1,
        ]
    )


def sign_bundle(
    key: Ed25519PrivateKey, terms: JobTerms, owner: str, n: int, digest0: bytes, digest1: bytes
) -> bytes:
    """Sign (terms, owner, n, digests of its two boxes) with the owner's key."""
    return key.sign(_signed_message(terms, owner, n, digest0, digest1))


def verify_bundle(
    public: bytes,
    signature: bytes,
    terms: JobTerms,
    owner: str,
    n: int,
    digest0: bytes,
    digest1: bytes,
) -> bool:
    """Tell whether ``signature`` is the owner's signature of these terms, length and digests.

    A malformed key or signature gives False, not an error.
    """
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(
            signature, _signed_message(terms, owner, n, digest0, digest1)
        )
    except (InvalidSignature, ValueError):
        return False
    return True


# -- a site's settings as a data owner -----------------------------------------------------


@dataclass(frozen=True)
class OwnerSettings:
    """What a site agrees to as an MPC data owner (kept in its state).

    Attributes
    ----------
    max_frac_bits : int
        Highest precision of the opened values it accepts (default 14).
    max_jobs : int
        Jobs it authorises over its lifetime (default 1: each owner authorises one job).
    min_owners : int
        Fewest co-owners of a job, itself included (default 2: never its own AUC alone).
    """

    max_frac_bits: int = DEFAULT_FRAC_BITS
    max_jobs: int = 1
    min_owners: int = MIN_OWNERS

    def __post_init__(self) -> None:
        """Check ``max_frac_bits`` in [1, 52], ``max_jobs >= 0`` and ``min_owners >= 1``."""
        if not isinstance(self.max_frac_bits, int) or not 1 <= self.max_frac_bits <= 52:
            raise InputError(f"max_frac_bits must be in [1, 52]; got {self.max_frac_bits!r}")
        if not isinstance(self.max_jobs, int) or self.max_jobs < 0:
            raise InputError(f"max_jobs must be a non-negative integer; got {self.max_jobs!r}")
        if not isinstance(self.min_owners, int) or self.min_owners < 1:
            raise InputError(f"min_owners must be a positive integer; got {self.min_owners!r}")


def _state(site_or_state: Any) -> dict[str, Any]:
    state = getattr(site_or_state, "state", site_or_state)
    if not isinstance(state, dict):
        raise InputError("configure_owner needs a Site (or its state dict)")
    entry = state.get(OWNER_STATE)
    if entry is None:
        entry = {
            "key": _private_raw(new_owner_key()),
            "max_frac_bits": DEFAULT_FRAC_BITS,
            "max_jobs": 1,
            "min_owners": MIN_OWNERS,
            "jobs": [],
            "job_terms": [],
        }
        state[OWNER_STATE] = entry
    return entry


def configure_owner(
    site: Any,
    *,
    key: str | Path | Ed25519PrivateKey | None = None,
    max_frac_bits: int | None = None,
    max_jobs: int | None = None,
    min_owners: int | None = None,
) -> bytes:
    """Set a site's owner key and settings (site-side configuration); returns its public key.

    The public key must be registered with the cluster (``[owners]`` in its file) before
    the proxies accept the site's bundles.

    Parameters
    ----------
    site : Site or dict
        The site (or its state dict), where the settings are kept.
    key : str, pathlib.Path or Ed25519PrivateKey, optional
        The owner's signing key, or the file it is in; None keeps the current one (a fresh
        key is generated on first use).
    max_frac_bits : int, optional
        Highest precision of opened values the site accepts, in [1, 52]; None keeps the
        current setting (default 14).
    max_jobs : int, optional
        Jobs the site authorises over its lifetime, at least 0; None keeps the current
        setting (default 1).
    min_owners : int, optional
        Fewest co-owners of a job, itself included, at least 1; None keeps the current
        setting (default 2).

    Returns
    -------
    bytes
        The owner's 32-byte Ed25519 public key.

    Raises
    ------
    InputError
        ``site`` holds no state dict, or a setting out of range.
    """
    entry = _state(site)
    if key is not None:
        private = key if isinstance(key, Ed25519PrivateKey) else load_owner_key(key)
        entry["key"] = _private_raw(private)
    settings = OwnerSettings(
        entry["max_frac_bits"] if max_frac_bits is None else max_frac_bits,
        entry["max_jobs"] if max_jobs is None else max_jobs,
        entry["min_owners"] if min_owners is None else min_owners,
    )
    entry.update(
        max_frac_bits=settings.max_frac_bits,
        max_jobs=settings.max_jobs,
        min_owners=settings.min_owners,
    )
    return owner_public_bytes(Ed25519PrivateKey.from_private_bytes(entry["key"]))


def owner_public_key(site: Any) -> bytes:
    """Return the site's owner public key (generated on first use).

    Parameters
    ----------
    site : Site or dict
        The site (or its state dict).

    Returns
    -------
    bytes
        The owner's 32-byte Ed25519 public key.
    """
    entry = _state(site)
    return owner_public_bytes(Ed25519PrivateKey.from_private_bytes(entry["key"]))


def _authorised(ledger: Any) -> dict[str, str]:
    """Job id -> terms digest of every MPC job the site authorised (from its ledger)."""
    jobs: dict[str, str] = {}
    for key, value in ledger.bindings.items():
        if key.startswith(JOB_BINDING) and isinstance(value, dict):
            jobs[str(value.get("job"))] = str(value.get("terms"))
    return jobs


def _owner_sets(ledger: Any) -> set[tuple[str, ...]]:
    """Return the sets of co-owners of the MPC jobs the site authorised (from its ledger).

    A job bound before the owners were recorded with it (fedroc up to main 0b40f80) names
    none: its set is unknown here.
    """
    return {
        tuple(sorted(str(o) for o in value["owners"]))
        for key, value in ledger.bindings.items()
        if key.startswith(JOB_BINDING) and isinstance(value, dict) and "owners" in value
    }


JOB_BINDING = "mpc-job:"


def authorise(
    state: dict[str, Any], site: str, terms: JobTerms, ledger: Any = None
) -> Ed25519PrivateKey:
    """Check ``terms`` against the site's settings and record the authorisation.

    The authorisations are kept in the site's ledger (``ledger``, persistent when the site
    has an audit directory; its state otherwise), so that a restarted site still counts
    them. A repeated request for a job the site already authorised (same id, same terms)
    is allowed: the proxies run a job id once, so a second bundle for it opens nothing more.
    Every job a site authorises is over one set of co-owners, that of its first: where
    ``max_jobs`` allows more than one, a second job over another set would subtract from
    the first to the rows of the owners in only one of them (H16-1).
    """
    entry = _state(state)
    settings = OwnerSettings(entry["max_frac_bits"], entry["max_jobs"], entry["min_owners"])
    refuse = f"site {site!r} refuses MPC job {terms.job}"
    if site not in terms.owners:
        raise InputError(f"{refuse}: the site is not among its owners {list(terms.owners)}")
    if len(terms.owners) < settings.min_owners:
        raise InputError(
            f"{refuse}: a job needs at least {settings.min_owners} data owners; "
            f"got {len(terms.owners)}"
        )
    if terms.frac_bits > settings.max_frac_bits:
        raise InputError(
            f"{refuse}: it agrees to at most {settings.max_frac_bits} bits of precision; "
            f"asked {terms.frac_bits}"
        )
    digest = terms.digest().hex()
    key = Ed25519PrivateKey.from_private_bytes(entry["key"])
    owners = tuple(sorted(terms.owners))
    if ledger is None:
        jobs = dict(zip(entry["jobs"], entry["job_terms"], strict=True))
        sets = {tuple(o) for o in entry.setdefault("job_owners", [])}
    else:
        jobs = _authorised(ledger)
        sets = _owner_sets(ledger)
    if terms.job in jobs:
        if jobs[terms.job] != digest:
            raise InputError(f"{refuse}: it authorised that job id with other terms")
        return key
    if len(jobs) >= settings.max_jobs:
        raise InputError(
            f"{refuse}: it has authorised {len(jobs)} MPC job(s) already and its owner "
            f"settings allow {settings.max_jobs}"
        )
    other = sorted(s for s in sets if s != owners)
    if other:
        # Two jobs over two sets of co-owners subtract to the rows of the owners in one and
        # not the other, owners that may have authorised one job only (H16-1, review 16:
        # the AUPR of jobs over {A, B, C} and {A, B} told whether C's rows held a positive).
        raise InputError(
            f"{refuse}: its earlier MPC job(s) were over the co-owners {list(other[0])}, and it "
            f"takes part in no job over another set ({list(owners)}): the two jobs' results "
            "would subtract to the rows of the owners in one set and not the other"
        )
    if ledger is None:
        entry["jobs"] = [*entry["jobs"], terms.job]
        entry["job_terms"] = [*entry["job_terms"], digest]
        entry["job_owners"] = [*entry["job_owners"], list(owners)]
    else:
        ledger.bind(
            f"{JOB_BINDING}{terms.job}",
            {"job": terms.job, "terms": digest, "owners": list(owners)},
        )
    return key
