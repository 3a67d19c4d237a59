"""What a proxy checks before it lends a job its shares.

Every proxy runs :func:`check_job` on its own view of the job (proxy 0 on the client's
request, proxy 1 on what proxy 0 forwards) before the computation starts, and the three
parties start only if all accept (:class:`~fedroc.mpc.messages.Verdict`). A refusal names
the reason and leaves the cluster serving. The checks:

* the owners of the bundles are exactly the owners the terms list: no subset (a bundle
  reused without its co-owners), no duplicate, no stranger;
* each owner is registered with the cluster (``[owners]`` in its file) under the key that
  signed its bundle, and the signature covers the terms, the owner, its list length and
  both sealed boxes (so crafted or altered bundles are refused);
* every bundle was made for these terms, these proxies, and the job's parameters are the
  signed ones (precision, minimum class count, CI, merge);
* the job id was never run before (:class:`~fedroc.mpc.ledger.JobLedger`), and no bundle
  was used before;
* the proxy's own boxes open (sealed for its key, for this job, owner and length).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fedroc.exceptions import InputError, ProtocolError
from fedroc.mpc.auc import AucSpec
from fedroc.mpc.ledger import JobLedger
from fedroc.mpc.owner import JobTerms, verify_bundle

__all__ = ["JobRefused", "OwnerPart", "check_job"]


class JobRefused(ProtocolError):
    """A proxy refused a job before it started; the cluster keeps serving."""


@dataclass(frozen=True)
class OwnerPart:
    """One owner's bundle as a proxy sees it: what the signature covers."""

    owner: str
    n: int
    owner_key: bytes
    signature: bytes
    digest0: bytes
    digest1: bytes

    def fingerprint(self) -> str:
        """Return the SHA-256 of the signature (hex), the key of a bundle in the job ledger.

        The ledger records it so that a bundle cannot serve a second job.
        """
        return hashlib.sha256(self.signature).hexdigest()


def check_job(
    terms: JobTerms,
    parts: Sequence[OwnerPart],
    *,
    registry: Mapping[str, bytes],
    proxy_keys: tuple[bytes, bytes],
    ledger: JobLedger,
) -> AucSpec:
    """Refuse the job (:class:`JobRefused`) unless every check passes; returns its spec."""
    if tuple(terms.proxy_keys) != tuple(proxy_keys):
        raise JobRefused(
            f"job {terms.job}: the bundles were sealed for other proxies than this cluster's"
        )
    names = [p.owner for p in parts]
    twice = sorted(name for name, count in Counter(names).items() if count > 1)
    if twice:
        raise JobRefused(f"job {terms.job}: owner(s) {twice} appear more than once")
    missing = sorted(set(terms.owners) - set(names))
    if missing:
        raise JobRefused(
            f"job {terms.job}: the owners signed a job with {list(terms.owners)}; bundles of "
            f"{missing} are missing (a bundle is good only with all its co-owners)"
        )
    strangers = sorted(set(names) - set(terms.owners))
    if strangers:
        raise JobRefused(
            f"job {terms.job}: bundles of {strangers} are not among the signed owners "
            f"{list(terms.owners)}"
        )
    for part in parts:
        registered = registry.get(part.owner)
        if registered is None:
            raise JobRefused(
                f"job {terms.job}: owner {part.owner!r} is not registered with this cluster "
                "([owners] in the cluster file; the parties read the cluster file when they "
                "start: restart them after adding an owner)"
            )
        if registered != part.owner_key:
            raise JobRefused(
                f"job {terms.job}: the bundle of {part.owner!r} is signed with a key that is not "
                "the one registered for that owner (the parties read the cluster file when "
                "they start)"
            )
        if not verify_bundle(
            part.owner_key,
            part.signature,
            terms,
            part.owner,
            part.n,
            part.digest0,
            part.digest1,
        ):
            raise JobRefused(
                f"job {terms.job}: the signature of {part.owner!r} does not match its bundle "
                "(altered, or made for other terms)"
            )
    if ledger.used(terms.job):
        raise JobRefused(f"job {terms.job} was run before; a job id is run once")
    reused = [p.owner for p in parts if ledger.seen_bundle(p.fingerprint())]
    if reused:
        raise JobRefused(f"job {terms.job}: the bundles of {reused} were used before")
    try:
        return terms.spec(tuple(p.n for p in parts))
    except InputError as exc:
        raise JobRefused(f"job {terms.job}: {exc}") from None
