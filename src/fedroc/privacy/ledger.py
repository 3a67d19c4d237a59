"""Privacy as data: a release is a frozen event; a ledger composes them.

A :class:`BudgetLedger` is a site's memory of what it has released under differential
privacy and of the partners it has aggregated with. With a ``path`` it is an append-only
JSON-lines file (each entry flushed to disk before the release leaves the site, so a crash
can only over-count), shared safely by several processes through an exclusive file lock:
a site that restarts, or runs as several processes, never forgets what it spent.

Composition is basic (sums of epsilon and delta), which is valid for any mix of
mechanisms and any adaptivity; it over-counts repeated Gaussian releases, so it errs on the
safe side.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import fcntl
import json
import os
import secrets
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fedroc.exceptions import InputError
from fedroc.privacy import keys

__all__ = [
    "ANY_QUANTITY",
    "SEALED",
    "BudgetLedger",
    "DPEvent",
    "LedgerStatus",
    "ledger_path_for",
    "read_ledger_status",
    "salt_path_for",
]

LEDGER_SUFFIX = ".ledger.jsonl"
#: Where a ledger's salt of its rows' digests lies: beside it, ``north.ledger.salt``.
SALT_SUFFIX = ".salt"
#: The start of a bound value sealed under the ledger's salt (:meth:`BudgetLedger.seal`).
SEALED = "sealed:"
_SALT_BYTES = 32
#: The quantity under which a site binds the partners of all its secure aggregations.
ANY_QUANTITY = "*"


@dataclass(frozen=True)
class DPEvent:
    """One differentially private release.

    Attributes
    ----------
    mechanism : str
        ``"gaussian"``, ``"analytic-gaussian"``, ``"laplace"``, ``"discrete-laplace"``, ...
    epsilon, delta : float
        Guarantee of this release alone.
    sensitivity : float
        The sensitivity the noise was calibrated to.
    noise_scale : float
        Standard deviation (Gaussian) or scale b (Laplace family) of the noise.
    size : int
        Number of noisy values released.
    note : str
        What was released (for the audit log and the result).
    sampler : str
        Which sampler drew the noise: ``"opendp"`` (production), ``"os-entropy"`` (the
        site's CSPRNG, for laws OpenDP lacks) or ``"site-seed"`` (a seed from the site's own
        configuration: reproducible simulations only).
    """

    mechanism: str
    epsilon: float
    delta: float
    sensitivity: float
    noise_scale: float
    size: int = 1
    note: str = ""
    sampler: str = ""

    def to_json(self) -> str:
        """Serialise the event as one JSON object with sorted keys."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DPEvent:
        """Read an event written by :meth:`to_json`."""
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> DPEvent:
        """Build an event from a mapping, ignoring keys that are not fields.

        Keys unknown to this version (written by a newer one) are dropped so that an old site can
        still read its ledger; a missing required field raises ``TypeError``.
        """
        known = {k: values[k] for k in cls.__dataclass_fields__ if k in values}
        return cls(**known)


def _limits_of(entry: dict[str, Any]) -> dict[str, Any] | None:
    """Read the limits of a "limits" entry as floats and an int; None if it lacks them."""
    try:
        return {
            "epsilon_limit": float(entry["epsilon_limit"]),
            "delta_limit": float(entry["delta_limit"]),
            "min_count": int(entry["min_count"]),
        }
    except (KeyError, TypeError, ValueError):  # not one this version wrote: shown as unknown
        return None


def _parse(line: str) -> dict[str, Any] | None:
    """One entry, or None for a blank or torn line.

    A crash mid-write: nothing was released, since the ledger is written before a reply leaves the
    site.
    """
    if not line.strip():
        return None
    try:
        entry = json.loads(line)
    except json.JSONDecodeError:
        return None
    return entry if isinstance(entry, dict) else None


def ledger_path_for(audit_path: str | Path) -> Path:
    """Where a site keeps its ledger: beside its audit log.

    ``north.jsonl`` -> ``north.ledger.jsonl``

    Parameters
    ----------
    audit_path : str or pathlib.Path
        The site's audit log.

    Returns
    -------
    pathlib.Path
        The ledger's file, in the same folder.
    """
    p = Path(audit_path)
    stem = p.name[: -len(p.suffix)] if p.suffix else p.name
    return p.with_name(stem + LEDGER_SUFFIX)


def salt_path_for(ledger_path: str | Path) -> Path:
    """Where a ledger keeps its salt of the rows' digests: beside it, not in it.

    ``north.ledger.jsonl`` -> ``north.ledger.salt``

    Parameters
    ----------
    ledger_path : str or pathlib.Path
        The ledger's file.

    Returns
    -------
    pathlib.Path
        The salt's file, in the same folder.
    """
    return Path(ledger_path).with_suffix(SALT_SUFFIX)


def _write_new(path: Path, text: str) -> None:
    """Create ``path`` (mode 0600; FileExistsError if it exists) and write ``text`` to disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


@dataclass
class BudgetLedger:
    """DP events spent so far and the site's bindings.

    The bindings are the first partner sets and first bins; the ledger is optionally on disk.

    Parameters
    ----------
    events : list of DPEvent
        Initial events (in-memory ledgers).
    path : str or Path, optional
        JSON-lines file; created if missing, read whole on every check so that several
        processes of one site see each other's spending.
    bindings : dict of str to object
        Values the site bound on first use (its first partner set of secure aggregation,
        its first calibration bins, ...), by key; a later different value is refused.
    """

    events: list[DPEvent] = field(default_factory=list)
    path: Path | None = None
    bindings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Open the ledger file (mode 0600, created if missing) and read what it holds."""
        self._lock = threading.RLock()
        self._held = False  # this ledger's file lock is held (by the thread holding _lock)
        self._limits: dict[str, Any] | None = None  # the last "limits" entry's values
        self._salt: bytes | None = None  # rows_salt(), once read or drawn
        if self.path is not None:
            self.path = Path(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.touch(mode=0o600, exist_ok=True)
            self._reload()

    # -- reading --------------------------------------------------------------------------
    def _reload(self) -> None:
        if self.path is None:
            return
        events: list[DPEvent] = []
        bindings: dict[str, Any] = {}
        limits: dict[str, Any] | None = None
        try:
            with self.path.open(encoding="utf-8") as fh:
                for line in fh:
                    entry = _parse(line)
                    if entry is None:
                        continue
                    if entry.get("kind") == "dp":
                        events.append(DPEvent.from_dict(entry["event"]))
                    elif entry.get("kind") == "binding":
                        bindings.setdefault(str(entry["key"]), entry["value"])
                    elif entry.get("kind") == "limits":
                        limits = _limits_of(entry) or limits
        except UnicodeDecodeError as exc:
            # Not skipped line by line as a torn line is: the spending it records would be
            # lost. Before, the site (and `fedroc privacy status`) ended in a traceback.
            raise InputError(
                f"privacy ledger {str(self.path)!r} is damaged (not UTF-8 text: byte "
                f"{exc.object[exc.start]:#04x} at offset {exc.start}); the spending it records "
                "cannot be read: restore the file from a copy"
            ) from None
        self.events, self.bindings, self._limits = events, bindings, limits

    @contextlib.contextmanager
    def transaction(self) -> Iterator[BudgetLedger]:
        """Hold the ledger while a caller checks the budget and records a release.

        Hold the ledger (thread lock and, on disk, an exclusive file lock) while a caller checks the
        budget and records a release, so that no concurrent release slips in between.
        """
        with self._lock:
            if self.path is None or self._held:
                # Held already by this thread (the lock is reentrant, a file lock taken
                # through a second descriptor of the same file is not: it would wait forever).
                yield self
                return
            self._held = True
            try:
                with self.path.open("a+", encoding="utf-8") as fh:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
                    try:
                        self._reload()
                        yield self
                    finally:
                        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            finally:
                self._held = False

    def spent(self) -> tuple[float, float]:
        """Return the total ``(epsilon, delta)`` of the recorded events (basic composition)."""
        return (sum(e.epsilon for e in self.events), sum(e.delta for e in self.events))

    def spent_with(self, more: Iterable[DPEvent]) -> tuple[float, float]:
        """Return the total ``(epsilon, delta)`` if the events ``more`` were recorded too.

        Nothing is recorded: the policy calls this to check a release against its limits before
        the release is allowed.
        """
        extra = list(more)
        eps, delta = self.spent()
        return (eps + sum(e.epsilon for e in extra), delta + sum(e.delta for e in extra))

    # -- writing --------------------------------------------------------------------------
    def _append(self, entries: Sequence[dict[str, Any]]) -> None:
        if self.path is None or not entries:
            return
        now = _dt.datetime.now(_dt.UTC).isoformat()
        text = "".join(json.dumps({"time": now, **e}, sort_keys=True) + "\n" for e in entries)
        with self.path.open("a+b") as fh:
            # A crash mid-write leaves a torn last line; end it so that it stays one line.
            if fh.tell() > 0:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    text = "\n" + text
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())

    def record(
        self,
        events: Iterable[DPEvent],
        *,
        function: str = "",
        source: str = "",
        limits: tuple[float, float] | None = None,
    ) -> None:
        """Add events (call inside :meth:`transaction` after checking the limit).

        ``source`` is the function whose values the events are of, where ``function`` only
        carried them (a stage of secure aggregation and its input). ``limits`` (epsilon,
        delta) are the site's limits at the time, kept for :func:`read_ledger_status`.
        """
        new = list(events)
        extra: dict[str, Any] = {} if not source else {"source": str(source)}
        if limits is not None:
            extra["limits"] = [float(limits[0]), float(limits[1])]
        with self._lock:
            self._append(
                [{"kind": "dp", "function": function, "event": asdict(e), **extra} for e in new]
            )
            self.events.extend(new)

    def note_limits(self, *, epsilon_limit: float, delta_limit: float, min_count: int) -> None:
        """Write the site's limits into the ledger, unless they are the ones last written.

        A site notes them when it starts, so that :func:`read_ledger_status` shows its
        budget and minimum count before its first DP release. They do not enter the budget
        check, which takes the site's policy.
        """
        limits = {
            "epsilon_limit": float(epsilon_limit),
            "delta_limit": float(delta_limit),
            "min_count": int(min_count),
        }
        if self.path is None or limits == self._limits:  # as read when the ledger opened
            return
        with self.transaction():  # several processes of one site start together
            if limits == self._limits:
                return
            self._append([{"kind": "limits", **limits}])
            self._limits = limits

    def bind(self, key: str, value: Any) -> None:
        """Remember the first value of ``key`` (a JSON value); later values are ignored."""
        with self._lock:
            if key in self.bindings:
                return
            self._append([{"kind": "binding", "key": key, "value": value}])
            self.bindings[key] = value

    # The salt of the rows' digests (fedroc.federation.site.bind_rows).
    def rows_salt(self, *, create: bool) -> bytes | None:
        """Return the ledger's random salt of the rows' digests it binds.

        The rows binding holds a digest of the rows keyed by this salt, so that the
        ledger file with every row but one label tests no guess of that label (a digest
        under a constant salt did, as ``fedroc privacy status`` showing it had: H13-3). A
        ledger on disk keeps it in a file of its own beside it (:func:`salt_path_for`,
        mode 0600), which a copy of the ledger file does not hold; one in memory draws it
        once. Drawn from the operating system's entropy (``secrets``).

        Parameters
        ----------
        create : bool
            Draw and keep a salt where the ledger has none; else return None then.

        Returns
        -------
        bytes or None
            32 bytes, or None (no salt kept and ``create`` false).

        Raises
        ------
        InputError
            The salt's file is not one this version wrote (damaged).
        """
        with self._lock:
            if self._salt is not None:
                return self._salt
            if self.path is None:
                self._salt = secrets.token_bytes(_SALT_BYTES) if create else None
                return self._salt
            path = salt_path_for(self.path)
            if not path.exists():
                if not create:
                    return None
                self._write_salt(path)
            try:
                salt = bytes.fromhex(path.read_text(encoding="ascii").strip())
            except (UnicodeDecodeError, ValueError):
                salt = b""
            if len(salt) != _SALT_BYTES:
                raise InputError(
                    f"salt file {str(path)!r} of privacy ledger {str(self.path)!r} is damaged "
                    f"(not {_SALT_BYTES} bytes in hex); restore it from a copy"
                )
            self._salt = salt
            return salt

    # Bound values that are functions of the rows but that the site must read back (the
    # clear clustered cuts): sealed under the salt, so that a copy of the file holds none.
    def seal(self, key: str, value: Any) -> str:
        """Return ``value`` (a JSON value) sealed for binding under ``key``.

        AES-GCM under a key derived from the ledger's salt (HKDF-SHA256; the salt lies
        beside the ledger file, not in it, :meth:`rows_salt`), ``key`` its associated data.
        For a value bound for the site's own later checks that is a function of its rows:
        the ledger file holds it only sealed, so that a copy of the file (a backup, one
        handed over for an audit of the spending) does not (``clustered:clear-edges`` gave
        every score to the edges' spacing, review 15).

        Parameters
        ----------
        key : str
            The binding's key, one of :data:`fedroc.privacy.keys.SEALED_KEYS`.
        value : Any
            A JSON value.

        Returns
        -------
        str
            :data:`SEALED` and the nonce and ciphertext in URL-safe base64.
        """
        if key not in keys.SEALED_KEYS:  # a site checks at start only those for their salt
            raise ValueError(f"{key!r} is not among fedroc.privacy.keys.SEALED_KEYS")
        nonce = secrets.token_bytes(12)
        data = json.dumps(value, separators=(",", ":")).encode("utf-8")
        salt = self.rows_salt(create=True)
        assert salt is not None  # created where missing
        sealed = self._sealer(salt).encrypt(nonce, data, key.encode("utf-8"))
        return SEALED + base64.urlsafe_b64encode(nonce + sealed).decode("ascii")

    def unseal(self, key: str, value: Any) -> Any:
        """Return a value bound under ``key`` as it was sealed (:meth:`seal`).

        A value not sealed (bound in the clear by fedroc up to main 2e18c5a) is returned
        as it is.

        Raises
        ------
        InputError
            The value does not open under this ledger's salt (a salt file of another
            ledger, or damaged).
        """
        if not (isinstance(value, str) and value.startswith(SEALED)):
            return value
        from cryptography.exceptions import InvalidTag

        salt = self.rows_salt(create=False)  # opening never draws a salt: it would not open
        if salt is None:
            where = "" if self.path is None else f" ({str(salt_path_for(self.path))!r})"
            raise InputError(
                f"privacy ledger {str(self.path)!r}: its binding {key!r} is sealed under a "
                f"salt whose file{where} is missing; restore it from a copy of the site's files"
            )
        try:
            raw = base64.urlsafe_b64decode(value[len(SEALED) :])
            data = self._sealer(salt).decrypt(raw[:12], raw[12:], key.encode("utf-8"))
        except (InvalidTag, ValueError):  # ValueError: base64 that is not (binascii.Error)
            raise InputError(
                f"privacy ledger {str(self.path)!r}: its binding {key!r} does not open under "
                "the salt beside it (a salt file of another ledger, or damaged); restore "
                "the ledger's own salt file"
            ) from None
        return json.loads(data)

    @staticmethod
    def _sealer(salt: bytes) -> Any:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        derived = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=b"fedroc ledger seal"
        ).derive(salt)
        return AESGCM(derived)

    @staticmethod
    def _write_salt(path: Path) -> None:
        """Write a new salt to ``path`` unless another process wrote one first (kept then).

        Written whole to a file of its own, then linked to ``path``, so that no process
        reads half a salt. A file system without hard links (some network and FUSE file
        systems refuse ``link``) gets the salt created in place, exclusively: only a crash
        in that write leaves a damaged salt, which the site then names.
        """
        text = secrets.token_bytes(_SALT_BYTES).hex() + "\n"
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        try:
            _write_new(tmp, text)
            try:
                os.link(tmp, path)
            except FileExistsError:  # the other process's salt stays
                pass
            except OSError:  # no hard links here
                with contextlib.suppress(FileExistsError):
                    _write_new(path, text)
        finally:
            tmp.unlink(missing_ok=True)

    # Secure aggregation: the set of sites each quantity was first aggregated over.
    @staticmethod
    def partners_key(quantity: str) -> str:
        """Return the binding key under which the partner sites of ``quantity`` are kept."""
        return keys.PARTNERS + quantity

    def partners(self, quantity: str) -> list[str] | None:
        """Return the sorted set of sites ``quantity`` was first aggregated over, or None."""
        value = self.bindings.get(self.partners_key(quantity))
        return None if value is None else list(value)

    def bind_partners(self, quantity: str, sites: Sequence[str]) -> None:
        """Remember ``sites`` as the partners of ``quantity``; a set bound earlier stays."""
        self.bind(self.partners_key(quantity), sorted(sites))


@dataclass(frozen=True)
class LedgerStatus:
    """What a site's ledger file says: spending, limits (as last recorded), bindings.

    The limits are those the site noted when it last started (or, in a ledger written
    before sites noted them, at its last DP release); None where the ledger holds neither.
    ``unreadable`` counts the lines that are not an entry: a write torn by a crash (nothing
    was released then) or damage (the spending such a line recorded is not counted).
    ``by_function`` sums epsilon by the function that released it (for a secure sum, the
    protocol's stage); ``by_source`` by the function whose values it was of (the sum's
    input, where the ledger recorded it, else the releasing function): ``epsilon``,
    ``delta``, ``releases``, ``function`` (the releasing one) and ``note`` (the first
    release's description).
    """

    site: str
    path: Path
    releases: int
    epsilon: float
    delta: float
    epsilon_limit: float | None
    delta_limit: float | None
    by_function: dict[str, float]
    bindings: dict[str, Any]
    last: str | None
    min_count: int | None = None
    unreadable: int = 0
    by_source: dict[str, dict[str, Any]] = field(default_factory=dict)


def _site_of_ledger(path: Path) -> str:
    """Name the site of a ledger: as its audit log beside it does, else by the file's name.

    A Flower SuperNode keeps ``audit.jsonl`` and ``audit.ledger.jsonl`` in its node directory,
    so the file name alone named every such site "audit".
    """
    stem = path.name[: -len(LEDGER_SUFFIX)] if path.name.endswith(LEDGER_SUFFIX) else path.stem
    try:
        with (path.parent / f"{stem}.jsonl").open(encoding="utf-8") as fh:
            first = _parse(fh.readline())
    except (OSError, UnicodeDecodeError):  # no audit log, or a damaged one: the file's name
        return stem
    site = None if first is None else first.get("site")
    return str(site) if site else stem


def read_ledger_status(path: str | Path) -> LedgerStatus:
    """Summarise one ledger file (``fedroc privacy status``)."""
    p = Path(path)
    ledger = BudgetLedger(path=p)
    limits: list[float] | None = None
    min_count: int | None = None
    by_function: dict[str, float] = {}
    by_source: dict[str, dict[str, Any]] = {}
    last = None
    unreadable = 0
    with p.open(encoding="utf-8") as fh:
        for line in fh:
            entry = _parse(line)
            if entry is None:
                unreadable += bool(line.strip())
                continue
            last = entry.get("time", last)
            if entry.get("kind") == "limits":
                if (noted := _limits_of(entry)) is not None:
                    limits = [noted["epsilon_limit"], noted["delta_limit"]]
                    min_count = noted["min_count"]
            elif entry.get("kind") == "dp":
                limits = entry.get("limits", limits)
                name = str(entry.get("function") or "?")
                event = entry["event"]
                by_function[name] = by_function.get(name, 0.0) + float(event["epsilon"])
                source = str(entry.get("source") or name)
                row = by_source.setdefault(
                    source,
                    {
                        "epsilon": 0.0,
                        "delta": 0.0,
                        "releases": 0,
                        "function": name,
                        "note": str(event.get("note", "")),
                    },
                )
                row["epsilon"] += float(event["epsilon"])
                row["delta"] += float(event.get("delta", 0.0))
                row["releases"] += 1
    eps, delta = ledger.spent()
    site = _site_of_ledger(p)
    return LedgerStatus(
        site=site,
        path=p,
        releases=len(ledger.events),
        epsilon=eps,
        delta=delta,
        epsilon_limit=None if limits is None else limits[0],
        delta_limit=None if limits is None else limits[1],
        by_function=by_function,
        bindings=dict(ledger.bindings),
        last=last,
        min_count=min_count,
        unreadable=unreadable,
        by_source=by_source,
    )
