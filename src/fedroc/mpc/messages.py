"""Every message the MPC parties exchange: its kind, its fields, its frame on the wire.

As Flower's ``secaggplus_constants`` names the stages and keys of SecAgg+, :class:`Kind`
names the messages of the cluster, and each message is a frozen dataclass that turns into
a record of :mod:`fedroc.federation.records` (the one codec of fedroc) and back. Decoding
validates every field (type, length, range), so a malformed message from a peer or a
client becomes a :class:`~fedroc.exceptions.ProtocolError` naming the field, never an
``IndexError`` deep in a handler.

Frames. A frame is an 8-byte little-endian length followed by one encoded record; the
receiver checks the length against its limit before it allocates anything
(:func:`check_frame_length`). Protocol data (:class:`StepFrame`) carries nested lists of
arrays; they are flattened into record keys ``p``, ``p.0``, ``p.0.1``, ... with ``#``
keys holding list lengths.

Flow of one job (proxy 0 = P0, proxy 1 = P1, helper = H)::

    client -> P0   JobRequest        terms, owners' bundles, client's one-time key
    P0     -> P1   Forward           terms, P1's sealed shares, seed of the P0-P1 stream
    P0     -> H    HelperJob         the public spec, seed of the P0-H stream
    P1     -> H    Seed              seed of the P1-H stream
    all    -> all  Verdict           each party's own check of the job (run only if all agree)
    all    <-> all StepFrame ...     the protocol
    P1, H  -> P0   ResultShare       P1's result share sealed for the client; statistics
    P0     -> client Result          both sealed shares, every party's statistics
    any    -> any  ErrorMessage      the job failed or was refused; parties keep serving
"""

from __future__ import annotations

import dataclasses
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, ClassVar

import numpy as np

from fedroc.exceptions import ProtocolError
from fedroc.federation.records import Record, decode, encode

__all__ = [
    "CLIENT_CN",
    "FRAME_PREFIX",
    "ErrorMessage",
    "Forward",
    "ForwardedBundle",
    "Hello",
    "HelperJob",
    "JobRequest",
    "Kind",
    "Message",
    "Ok",
    "Result",
    "ResultShare",
    "Seed",
    "Shutdown",
    "StatsRecord",
    "StepFrame",
    "Verdict",
    "check_frame_length",
    "decode_message",
    "encode_message",
    "party_cn",
]

FRAME_PREFIX = 8  # bytes of the length prefix
HELLO_LIMIT = 1 << 16  # the first frame of a connection, before its role is known
JOB_ID = re.compile(r"^[0-9A-Za-z_-]{8,64}$")
MAX_TEXT = 4096
MAX_BOX = 1 << 20  # a sealed result share


CLIENT_CN = "fedroc-mpc-client"  # common name of the analyst's TLS certificate


def party_cn(pid: int) -> str:
    """Return the common name of party ``pid``'s TLS certificate."""
    return f"fedroc-mpc-party-{pid}"


class Kind:
    """Message kinds (the ``kind`` key of every record)."""

    HELLO = "hello"
    JOB = "job"
    SHUTDOWN = "shutdown"
    FORWARD = "forward"
    HELPER_JOB = "helper-job"
    SEED = "seed"
    VERDICT = "verdict"
    STEP = "step"
    RESULT_SHARE = "result-share"
    RESULT = "result"
    ERROR = "error"
    OK = "ok"


# -- field readers: one error message shape for every bad field ----------------------------


def _get(rec: Mapping[str, Any], key: str, kind: str) -> Any:
    if key not in rec:
        raise ProtocolError(f"malformed {kind!r} message: field {key!r} is missing")
    return rec[key]


def read_str(rec: Mapping[str, Any], key: str, kind: str, *, max_len: int = MAX_TEXT) -> str:
    value = _get(rec, key, kind)
    if not isinstance(value, str) or len(value) > max_len:
        raise ProtocolError(
            f"malformed {kind!r} message: {key!r} must be a string of at most {max_len} "
            f"characters; got {type(value).__name__}"
        )
    return value


def read_int(rec: Mapping[str, Any], key: str, kind: str, *, lo: int, hi: int) -> int:
    value = _get(rec, key, kind)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ProtocolError(
            f"malformed {kind!r} message: {key!r} must be an integer in [{lo}, {hi}]; got {value!r}"
        )
    return value


def read_bool(rec: Mapping[str, Any], key: str, kind: str) -> bool:
    value = _get(rec, key, kind)
    if not isinstance(value, bool):
        raise ProtocolError(f"malformed {kind!r} message: {key!r} must be true or false")
    return value


def read_choice(
    rec: Mapping[str, Any], key: str, kind: str, *, options: tuple[str, ...], max_len: int
) -> str:
    value = read_str(rec, key, kind, max_len=max_len)
    if value not in options:
        raise ProtocolError(f"malformed {kind!r} message: unknown {key} {value!r}")
    return value


def read_bytes(
    rec: Mapping[str, Any], key: str, kind: str, *, size: int | None = None, max_size: int = 1 << 40
) -> bytes:
    value = _get(rec, key, kind)
    if isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 1:
        value = value.tobytes()
    if not isinstance(value, bytes):
        raise ProtocolError(f"malformed {kind!r} message: {key!r} must be bytes")
    if (size is not None and len(value) != size) or len(value) > max_size:
        want = f"{size}" if size is not None else f"at most {max_size}"
        raise ProtocolError(
            f"malformed {kind!r} message: {key!r} must hold {want} bytes; got {len(value)}"
        )
    return value


def read_str_list(
    rec: Mapping[str, Any], key: str, kind: str, *, max_items: int = 1 << 16
) -> list[str]:
    value = _get(rec, key, kind)
    if (
        not isinstance(value, list)
        or len(value) > max_items
        or not all(isinstance(v, str) and len(v) <= MAX_TEXT for v in value)
    ):
        raise ProtocolError(f"malformed {kind!r} message: {key!r} must be a list of strings")
    return value


def read_int_list(
    rec: Mapping[str, Any], key: str, kind: str, *, lo: int, hi: int, max_items: int = 1 << 16
) -> list[int]:
    value = _get(rec, key, kind)
    if (
        not isinstance(value, list)
        or len(value) > max_items
        or not all(isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi for v in value)
    ):
        raise ProtocolError(
            f"malformed {kind!r} message: {key!r} must be a list of integers in [{lo}, {hi}]"
        )
    return value


def read_job_id(rec: Mapping[str, Any], kind: str) -> str:
    job = read_str(rec, "job", kind, max_len=64)
    if not JOB_ID.match(job):
        raise ProtocolError(
            f"malformed {kind!r} message: job id {job!r} must be 8-64 letters, digits, - or _"
        )
    return job


def sub_record(rec: Mapping[str, Any], prefix: str) -> Record:
    """Return the fields of ``rec`` under ``prefix.`` (prefix stripped)."""
    head = prefix + "."
    return {k[len(head) :]: v for k, v in rec.items() if k.startswith(head)}


def with_prefix(rec: Mapping[str, Any], prefix: str) -> Record:
    return {f"{prefix}.{k}": v for k, v in rec.items()}


def reads(reader: Callable[..., Any], **limits: Any) -> dict[str, Any]:
    """Metadata of a dataclass field: the ``read_*`` function (and limits) that reads it back.

    ``name: bytes = field(metadata=reads(read_bytes, size=32))`` declares the field and its
    validation in one place; :func:`read_fields` reads every field so declared.
    """
    return {"read": partial(reader, **limits)}


def nests(record: type[Any], *, count: int | None = None) -> dict[str, Any]:
    """Metadata of a field holding a record type (``to_record()``, ``from_record(rec, kind)``).

    The field ``name`` is written under ``name.``; with ``count``, a tuple of ``count``
    records is written under ``name0.``, ``name1.``, ...
    """

    def prefixes(name: str) -> list[str]:
        return [name] if count is None else [f"{name}{i}" for i in range(count)]

    def write(name: str, value: Any) -> Record:
        items = [value] if count is None else list(value)
        out: Record = {}
        for prefix, item in zip(prefixes(name), items, strict=True):
            out.update(with_prefix(item.to_record(), prefix))
        return out

    def read(rec: Mapping[str, Any], name: str, kind: str) -> Any:
        items = tuple(record.from_record(sub_record(rec, p), kind) for p in prefixes(name))
        return items[0] if count is None else items

    return {"read": read, "write": write}


def read_fields(cls: type, rec: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """Read and validate each field of dataclass ``cls`` with the reader it declares."""
    return {f.name: f.metadata["read"](rec, f.name, kind) for f in dataclasses.fields(cls)}


# -- messages -----------------------------------------------------------------------------


class Message:
    """Base of every message (a frozen dataclass): ``fields()`` and ``from_fields()``.

    A message declares how each field is read back (:func:`reads`, :func:`nests`), and these
    two methods serve it as they are; a message whose layout is its own overrides both.
    """

    KIND: ClassVar[str]

    def fields(self) -> Record:
        """Return the message's own fields as a record, text cut to 4096 characters.

        :func:`encode_message` adds ``kind`` and ``job``.
        """
        out: Record = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if "write" in f.metadata:
                out.update(f.metadata["write"](f.name, value))
            else:
                out[f.name] = value[:MAX_TEXT] if isinstance(value, str) else value
        return out

    @classmethod
    def from_fields(cls, rec: Mapping[str, Any]) -> Message:
        """Read and validate a message of this kind from its record.

        Raises
        ------
        ProtocolError
            Naming the first field that is missing or malformed.
        """
        return cls(**read_fields(cls, rec, cls.KIND))


_REGISTRY: dict[str, type[Message]] = {}


def _message(cls: type[Message]) -> type[Message]:
    _REGISTRY[cls.KIND] = cls
    return cls


@_message
@dataclass(frozen=True)
class Hello(Message):
    """First frame on a connection: who the certificate holder claims to be."""

    KIND: ClassVar[str] = Kind.HELLO
    role: str = field(metadata=reads(read_choice, options=("party", "client"), max_len=16))
    pid: int = field(default=-1, metadata=reads(read_int, lo=-1, hi=2))


@_message
@dataclass(frozen=True)
class Shutdown(Message):
    """Client -> proxy 0, then proxy 0 -> the other parties: stop serving.

    Proxy 0 answers the client with :class:`Ok`.
    """

    KIND: ClassVar[str] = Kind.SHUTDOWN


@_message
@dataclass(frozen=True)
class Ok(Message):
    """Proxy 0 -> client: the shutdown was passed on."""

    KIND: ClassVar[str] = Kind.OK


@_message
@dataclass(frozen=True)
class ErrorMessage(Message):
    """A job (or a request) failed or was refused; ``job`` is empty outside a job."""

    KIND: ClassVar[str] = Kind.ERROR
    reason: str = field(metadata=reads(read_str))
    job: str = field(default="", metadata=reads(read_str, max_len=96))


@dataclass(frozen=True)
class StatsRecord:
    """One party's communication during a job (see :class:`~fedroc.mpc.runtime.PartyStats`)."""

    rounds: int
    bytes_sent: int
    bytes_received: int
    messages_sent: int
    seconds: float

    def to_record(self) -> Record:
        """Return the statistics as a record."""
        return {**asdict(self), "seconds": float(self.seconds)}

    @classmethod
    def from_record(cls, rec: Mapping[str, Any], kind: str) -> StatsRecord:
        """Read and validate statistics (non-negative counts and seconds).

        ``kind`` names the enclosing message in error messages.
        """
        big = 1 << 62
        seconds = _get(rec, "seconds", kind)
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
            raise ProtocolError(f"malformed {kind!r} message: 'seconds' must be >= 0")
        return cls(
            read_int(rec, "rounds", kind, lo=0, hi=big),
            read_int(rec, "bytes_sent", kind, lo=0, hi=big),
            read_int(rec, "bytes_received", kind, lo=0, hi=big),
            read_int(rec, "messages_sent", kind, lo=0, hi=big),
            float(seconds),
        )


@dataclass(frozen=True)
class ForwardedBundle:
    """What proxy 1 gets of an owner's bundle: its own box and the digest of proxy 0's."""

    owner: str = field(metadata=reads(read_str, max_len=100))
    n: int = field(metadata=reads(read_int, lo=1, hi=1 << 28))
    owner_key: bytes = field(metadata=reads(read_bytes, size=32))
    signature: bytes = field(metadata=reads(read_bytes, size=64))
    digest0: bytes = field(metadata=reads(read_bytes, size=32))
    box1: bytes = field(metadata=reads(read_bytes))

    def to_record(self) -> Record:
        """Return the bundle part as a record (``box1`` as a uint8 array)."""
        return {**asdict(self), "box1": np.frombuffer(self.box1, dtype=np.uint8)}

    @classmethod
    def from_record(cls, rec: Mapping[str, Any], kind: str) -> ForwardedBundle:
        """Read and validate a bundle part (key, signature and digest of fixed sizes).

        ``kind`` names the enclosing message in error messages.
        """
        return cls(**read_fields(cls, rec, kind))


def _bundles_to_record(items: Sequence[Any]) -> Record:
    out: Record = {"bundles": len(items)}
    for i, b in enumerate(items):
        out.update(with_prefix(b.to_record(), f"bundle{i}"))
    return out


def _count(rec: Mapping[str, Any], kind: str) -> int:
    return read_int(rec, "bundles", kind, lo=1, hi=1 << 16)


@_message
@dataclass(frozen=True)
class JobRequest(Message):
    """Client -> proxy 0: one job, the owners' bundles, the client's one-time X25519 key."""

    KIND: ClassVar[str] = Kind.JOB
    bundles: tuple[Any, ...]  # fedroc.mpc.bundle.Bundle
    client_key: bytes

    def fields(self) -> Record:
        """Return the client's key and the bundles (under ``bundle0.``, ``bundle1.``, ...)."""
        return {"client_key": self.client_key, **_bundles_to_record(self.bundles)}

    @classmethod
    def from_fields(cls, rec: Mapping[str, Any]) -> JobRequest:
        """Read the client's 32-byte key and each bundle (validated by ``Bundle.from_record``)."""
        from fedroc.mpc.bundle import Bundle

        count = _count(rec, cls.KIND)
        bundles = tuple(Bundle.from_record(sub_record(rec, f"bundle{i}")) for i in range(count))
        return cls(bundles, read_bytes(rec, "client_key", cls.KIND, size=32))


@_message
@dataclass(frozen=True)
class Forward(Message):
    """Proxy 0 -> proxy 1: the terms, proxy 1's part of each bundle, the P0-P1 seed."""

    KIND: ClassVar[str] = Kind.FORWARD
    terms: Any  # fedroc.mpc.owner.JobTerms
    bundles: tuple[ForwardedBundle, ...]
    client_key: bytes
    seed: bytes

    def fields(self) -> Record:
        """Return the terms (under ``terms.``), the client's key, the seed and the bundles."""
        return {
            **with_prefix(self.terms.to_record(), "terms"),
            "client_key": self.client_key,
            "seed": self.seed,
            **_bundles_to_record(self.bundles),
        }

    @classmethod
    def from_fields(cls, rec: Mapping[str, Any]) -> Forward:
        """Read and validate the terms, the bundle parts, the client's key and the 32-byte seed."""
        from fedroc.mpc.owner import JobTerms

        count = _count(rec, cls.KIND)
        return cls(
            JobTerms.from_record(sub_record(rec, "terms")),
            tuple(
                ForwardedBundle.from_record(sub_record(rec, f"bundle{i}"), cls.KIND)
                for i in range(count)
            ),
            read_bytes(rec, "client_key", cls.KIND, size=32),
            read_bytes(rec, "seed", cls.KIND, size=32),
        )


@_message
@dataclass(frozen=True)
class HelperJob(Message):
    """Proxy 0 -> helper: the public spec of the computation and the P0-H seed."""

    KIND: ClassVar[str] = Kind.HELPER_JOB
    spec: Any  # fedroc.mpc.auc.AucSpec
    seed: bytes

    def fields(self) -> Record:
        """Return the spec (under ``spec.``) and the seed."""
        return {**with_prefix(self.spec.to_record(), "spec"), "seed": self.seed}

    @classmethod
    def from_fields(cls, rec: Mapping[str, Any]) -> HelperJob:
        """Read the spec (validated by ``AucSpec.from_record``) and the 32-byte seed."""
        from fedroc.mpc.auc import AucSpec

        return cls(
            AucSpec.from_record(sub_record(rec, "spec")),
            read_bytes(rec, "seed", cls.KIND, size=32),
        )


@_message
@dataclass(frozen=True)
class Seed(Message):
    """Proxy 1 -> helper: the seed of the P1-H correlated-randomness stream."""

    KIND: ClassVar[str] = Kind.SEED
    seed: bytes = field(metadata=reads(read_bytes, size=32))


@_message
@dataclass(frozen=True)
class Verdict(Message):
    """A party's own check of the job: the job runs only if all three accept."""

    KIND: ClassVar[str] = Kind.VERDICT
    accept: bool = field(metadata=reads(read_bool))
    reason: str = field(default="", metadata=reads(read_str))


@_message
@dataclass(frozen=True)
class ResultShare(Message):
    """Proxy 1 or the helper -> proxy 0: the sealed result share (empty for the helper)."""

    KIND: ClassVar[str] = Kind.RESULT_SHARE
    box: bytes = field(metadata=reads(read_bytes, max_size=MAX_BOX))
    stats: StatsRecord = field(metadata=nests(StatsRecord))


@_message
@dataclass(frozen=True)
class Result(Message):
    """Proxy 0 -> client: both proxies' sealed result shares and every party's statistics."""

    KIND: ClassVar[str] = Kind.RESULT
    box0: bytes = field(metadata=reads(read_bytes, max_size=MAX_BOX))
    box1: bytes = field(metadata=reads(read_bytes, max_size=MAX_BOX))
    # One party's statistics each, under ``stats0.`` ... ``stats2.``.
    stats: tuple[StatsRecord, StatsRecord, StatsRecord] = field(
        metadata=nests(StatsRecord, count=3)
    )


@dataclass(frozen=True)
class StepFrame(Message):
    """Protocol data of one step: the step's tag and a nested list of arrays."""

    KIND: ClassVar[str] = Kind.STEP
    tag: str
    payload: Any

    def fields(self) -> Record:
        """Return the tag and the payload flattened into keys ``p``, ``p.0``, ``p#``, ..."""
        out: Record = {"tag": self.tag}
        _flatten("p", self.payload, out)
        return out

    @classmethod
    def from_fields(cls, rec: Mapping[str, Any]) -> StepFrame:
        """Read the tag and rebuild the nested payload (at most 16 levels deep)."""
        return cls(read_str(rec, "tag", cls.KIND, max_len=256), _unflatten("p", rec))


_REGISTRY[Kind.STEP] = StepFrame


def _flatten(path: str, value: Any, out: Record) -> None:
    if isinstance(value, (list, tuple)):
        out[path + "#"] = len(value)
        for i, item in enumerate(value):
            _flatten(f"{path}.{i}", item, out)
    elif isinstance(value, np.ndarray) or value is None or isinstance(value, (bytes, str)):
        out[path] = value
    elif isinstance(value, (bool, int, np.integer)):
        out[path] = int(value)
    else:
        raise TypeError(f"cannot send a value of type {type(value).__name__}")


def _unflatten(path: str, rec: Mapping[str, Any], depth: int = 0) -> Any:
    if depth > 16:
        raise ProtocolError("malformed step: payload nested too deeply")
    count = rec.get(path + "#")
    if count is not None:
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 1 << 16:
            raise ProtocolError(f"malformed step: bad list length at {path!r}")
        return [_unflatten(f"{path}.{i}", rec, depth + 1) for i in range(count)]
    if path not in rec:
        raise ProtocolError(f"malformed step: {path!r} is missing")
    return rec[path]


# -- frames --------------------------------------------------------------------------------


def encode_message(message: Message, job: str = "") -> bytes:
    """One frame: length prefix and the message's record (kind, job and its fields)."""
    blob = encode({"kind": message.KIND, "job": job, **message.fields()})
    return struct.pack("<Q", len(blob)) + blob


def check_frame_length(length: int, limit: int, who: str) -> None:
    """Refuse a frame before allocating it when its announced length exceeds ``limit``."""
    if length > limit:
        raise ProtocolError(
            f"{who} announced a frame of {length} bytes, above the limit of {limit} bytes"
        )
    if length < 12:
        raise ProtocolError(f"{who} announced a frame of {length} bytes: too short")


def decode_message(blob: bytes | bytearray | memoryview) -> tuple[str, Message]:
    """``(job id, message)`` of one frame body (without its length prefix)."""
    try:
        rec = decode(blob if isinstance(blob, bytes) else bytes(blob))
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError(f"malformed frame: {type(exc).__name__}: {exc}") from None
    kind = rec.get("kind")
    cls = _REGISTRY.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(f"malformed frame: unknown message kind {kind!r}")
    job = rec.get("job", "")
    if not isinstance(job, str) or len(job) > 96:
        raise ProtocolError("malformed frame: bad job id")
    try:
        return job, cls.from_fields(rec)
    except ProtocolError:
        raise
    except Exception as exc:  # a field's own validation (InputError, ...) says what is wrong
        raise ProtocolError(f"malformed {kind!r} message: {exc}") from None
