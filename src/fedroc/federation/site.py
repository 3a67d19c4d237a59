"""The site: the only code that touches a site's rows.

A :class:`Site` holds one site's table, its :class:`~fedroc.privacy.DisclosurePolicy`, and
an append-only audit log. It runs *site functions*, registered by name with
:func:`site_function`; each returns a :class:`Reply` of aggregates, noisy values or secret
shares, never rows. Every reply passes the policy check and is written to the audit log
before it leaves; a refusal is logged too.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib
import json
import os
import pkgutil
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedroc._results import jsonable
from fedroc.data import Columns, SiteData
from fedroc.exceptions import DisclosureError, InputError
from fedroc.federation.records import Record, check_record
from fedroc.privacy.ledger import BudgetLedger, DPEvent
from fedroc.privacy.policy import DisclosurePolicy, ReleaseKind

__all__ = [
    "AuditLog",
    "Reply",
    "Site",
    "SiteContext",
    "get_site_function",
    "registered_site_functions",
    "site_function",
]

# Keys of a reply that carry metadata for the analyst's transcript, not results.
META_DP = "__dp__"
META_KIND = "__kind__"

# Modules and packages whose import registers site functions. A site looks a function up
# here before refusing it as unknown, so a Flower ClientApp needs no extra imports.
SITE_FUNCTION_MODULES: list[str] = ["fedroc.federation.basic", "fedroc.methods", "fedroc.secagg"]


@dataclass(frozen=True)
class Reply:
    """What a site function returns.

    Attributes
    ----------
    values : Record
        The released values.
    kind : {"aggregate", "noisy", "shares"}
        Aggregates must declare their row counts; noisy values their DP events.
    counts : mapping of str to int or array
        Number of rows behind each released aggregate; the policy refuses any below q.
    dp : sequence of DPEvent
        Differential-privacy releases in ``values``.
    """

    values: Mapping[str, Any]
    kind: ReleaseKind = "aggregate"
    counts: Mapping[str, Any] = field(default_factory=dict)
    dp: tuple[DPEvent, ...] = ()


@dataclass
class SiteContext:
    """What a site function may use: the rows, the policy, its state and randomness."""

    site: str
    data: SiteData
    policy: DisclosurePolicy
    state: dict[str, Record]
    requester: str

    def rng(self, seed: int | None, stream: str = "") -> np.random.Generator:
        """A statistical generator for this site.

        With a seed it is derived from (seed, site name, stream), so every site draws
        independently (the reference code of paper 5 gave all clients the same seed) while a
        run stays reproducible. Without a seed it draws from operating-system entropy.
        """
        if seed is None:
            return np.random.default_rng()
        digest = hashlib.sha256(f"{self.site}\x00{stream}".encode()).digest()
        words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
        return np.random.default_rng(np.random.SeedSequence([int(seed), *words]))


SiteFn = Callable[[SiteContext, Record], Reply]


@dataclass(frozen=True)
class _Spec:
    name: str
    fn: SiteFn


_REGISTRY: dict[str, _Spec] = {}
_LOADED = False


def site_function(name: str) -> Callable[[SiteFn], SiteFn]:
    """Register ``fn(ctx, args) -> Reply`` under ``name``."""

    def register(fn: SiteFn) -> SiteFn:
        existing = _REGISTRY.get(name)
        if existing is not None and existing.fn.__qualname__ != fn.__qualname__:
            raise InputError(f"site function {name!r} is already registered")
        _REGISTRY[name] = _Spec(name, fn)
        return fn

    return register


def _load_plugins() -> None:
    global _LOADED
    if _LOADED:
        return
    for module_name in SITE_FUNCTION_MODULES:
        module = importlib.import_module(module_name)
        if hasattr(module, "__path__"):
            for info in pkgutil.walk_packages(module.__path__, module_name + "."):
                importlib.import_module(info.name)
    _LOADED = True


def get_site_function(name: str) -> SiteFn:
    if name not in _REGISTRY:
        _load_plugins()
    try:
        return _REGISTRY[name].fn
    except KeyError:
        raise InputError(f"unknown site function {name!r}") from None


def registered_site_functions() -> list[str]:
    _load_plugins()
    return sorted(_REGISTRY)


_INLINE_LIMIT = 4096  # arrays up to this many elements are written into the log line


class AuditLog:
    """Append-only log of every value a site released, as JSON lines.

    With a ``path`` each entry is appended and flushed to disk (``fsync``) before the reply
    leaves the site, so a crash loses nothing that was released; arrays larger than
    4096 elements go to ``<path>.blobs/<seq>-<key>.npy`` and the line records their file,
    shape and SHA-256. Without a path the entries are kept in memory.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._memory: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._seq = 0
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                self._seq = sum(1 for _ in self.path.open("rb"))

    def _value(self, seq: int, key: str, value: Any) -> Any:
        if isinstance(value, np.ndarray) and value.size > _INLINE_LIMIT:
            item: dict[str, Any] = {
                "shape": list(value.shape),
                "dtype": value.dtype.str,
                "sha256": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest(),
            }
            if self.path is not None:
                blob_dir = self.path.with_name(self.path.name + ".blobs")
                blob_dir.mkdir(exist_ok=True)
                blob = blob_dir / f"{seq:08d}-{key}.npy"
                np.save(blob, value)
                item["file"] = str(blob.relative_to(self.path.parent))
            else:
                item["values"] = value.copy()
            return item
        if isinstance(value, bytes):
            return {"bytes": value.hex()}
        return jsonable(value)

    def append(self, entry: Mapping[str, Any], released: Mapping[str, Any] | None = None) -> None:
        with self._lock:
            seq = self._seq
            self._seq += 1
            line = {"seq": seq, "time": _dt.datetime.now(_dt.UTC).isoformat(), **entry}
            if released is not None:
                line["released"] = {k: self._value(seq, k, v) for k, v in released.items()}
            if self.path is None:
                self._memory.append(line)
                return
            text = json.dumps(
                line, default=lambda o: jsonable(o) if not isinstance(o, np.ndarray) else None
            )
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(text + "\n")
                fh.flush()
                os.fsync(fh.fileno())

    def entries(self) -> list[dict[str, Any]]:
        if self.path is None:
            return list(self._memory)
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]


def _summarize_args(args: Record) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in args.items():
        if isinstance(value, np.ndarray):
            out[key] = {
                "shape": list(value.shape),
                "sha256": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:16],
            }
        elif isinstance(value, bytes):
            out[key] = {"bytes": len(value)}
        else:
            out[key] = jsonable(value)
    return out


class Site:
    """One site: its rows, its policy, its audit log and its state between calls.

    Parameters
    ----------
    name : str
        The site's name, used in every error and log entry.
    data : SiteData
    policy : DisclosurePolicy, optional
        Defaults to ``DisclosurePolicy()`` (q = 5).
    audit : AuditLog, path or None
        Where released values are logged; None keeps the log in memory.
    """

    def __init__(
        self,
        name: str,
        data: SiteData,
        *,
        policy: DisclosurePolicy | None = None,
        audit: AuditLog | str | Path | None = None,
    ) -> None:
        if not name or not isinstance(name, str):
            raise InputError(f"a site needs a non-empty name; got {name!r}")
        self.name = name
        self._data = data
        self.policy = policy or DisclosurePolicy()
        self.audit = audit if isinstance(audit, AuditLog) else AuditLog(audit)
        self.ledger = BudgetLedger()
        self.state: dict[str, Record] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Site({self.name!r}, n={self._data.n}, min_count={self.policy.min_count})"

    @classmethod
    def from_frame(
        cls,
        name: str,
        frame: Any,
        columns: Columns = Columns(),
        *,
        pos_label: Any = None,
        policy: DisclosurePolicy | None = None,
        audit: AuditLog | str | Path | None = None,
    ) -> Site:
        data = SiteData.from_frame(frame, columns, pos_label=pos_label, source=f"site {name!r}")
        return cls(name, data, policy=policy, audit=audit)

    @classmethod
    def from_file(
        cls,
        name: str,
        path: str | Path,
        columns: Columns = Columns(),
        *,
        pos_label: Any = None,
        policy: DisclosurePolicy | None = None,
        audit: AuditLog | str | Path | None = None,
    ) -> Site:
        data = SiteData.from_file(path, columns, pos_label=pos_label, site=name)
        return cls(name, data, policy=policy, audit=audit)

    def handle(self, function: str, args: Mapping[str, Any], requester: str = "analyst") -> Record:
        """Run a site function, check its reply against the policy, log it, return it."""
        base = {"site": self.name, "function": function, "requester": requester}
        with self._lock:
            try:
                self.policy.check_function(self.name, function)
                fn = get_site_function(function)
                ctx = SiteContext(self.name, self._data, self.policy, self.state, requester)
                reply = fn(ctx, dict(args))
                if not isinstance(reply, Reply):
                    raise TypeError(
                        f"site function {function!r} returned {type(reply).__name__}, not Reply"
                    )
                values = check_record(reply.values, f"reply of {function!r}")
                if any(k.startswith("__") for k in values):
                    raise InputError(f"reply keys starting with '__' are reserved ({function!r})")
                self.policy.check_release(
                    site=self.name,
                    function=function,
                    kind=reply.kind,
                    counts=reply.counts,
                    dp=reply.dp,
                    ledger=self.ledger,
                )
            except DisclosureError as exc:
                self.audit.append({**base, "outcome": "refused", "reason": str(exc)})
                raise
            except Exception as exc:
                self.audit.append(
                    {**base, "outcome": "error", "reason": f"{type(exc).__name__}: {exc}"}
                )
                raise
            self.ledger.record(reply.dp)
            self.audit.append(
                {
                    **base,
                    "outcome": "released",
                    "kind": reply.kind,
                    "args": _summarize_args(dict(args)),
                    "counts": jsonable(dict(reply.counts)),
                    "dp": [jsonable(e) for e in reply.dp],
                },
                released=values,
            )
        out = dict(values)
        out[META_KIND] = reply.kind
        out[META_DP] = [e.to_json() for e in reply.dp]
        return out


def split_meta(reply: Record) -> tuple[Record, str, list[DPEvent]]:
    """Separate a site's reply into values, release kind and DP events."""
    values = {k: v for k, v in reply.items() if not k.startswith("__")}
    kind = str(reply.get(META_KIND, "aggregate"))
    events = [DPEvent.from_json(t) for t in reply.get(META_DP, [])]
    return values, kind, events


def site_names_unique(names: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for name in names:
        if name in seen:
            raise InputError(f"site name {name!r} is used twice")
        seen.append(name)
    return seen
