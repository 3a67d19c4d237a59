"""fedroc records <-> Flower ``RecordDict``.

A message body is the bytes of fedroc's one record codec (:func:`fedroc.federation.records.encode`,
as on the in-process transport and in the MPC frames) in one ``ConfigRecord`` entry, next to a
small *header* of scalars (for a call: function, requester and protocol version). Arrays larger
than :data:`PACK_LIMIT` leave the encoded bytes for an ``ArrayRecord``, which Flower splits into
chunks; the ``ConfigRecord`` then lists the record's keys, so that a decoded record equals the
encoded one exactly, in its order. Every record is a separate object on Flower's wire, so a
message has one ``ConfigRecord`` and, only when needed, one ``ArrayRecord``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fedroc.exceptions import InputError
from fedroc.federation.records import Record, check_record, decode, encode

__all__ = ["PROTOCOL", "from_recorddict", "read_header", "to_recorddict"]

PROTOCOL = 2  # bumped when the message layout changes; both sides refuse other versions

_VALUES = "fedroc.record"  # ConfigRecord: the encoded record, key order, header
_ARRAYS = "fedroc.arrays"  # ArrayRecord (only when the record holds large arrays)
_RESERVED = "\x00"  # prefix of the ConfigRecord's own entries (record keys cannot use it)
_BODY = _RESERVED + "body"
_KEYS = _RESERVED + "keys"
_HEADER = _RESERVED + "h:"
# Arrays up to this size travel inside the encoded record. In Flower 1.41 every Array of an
# ArrayRecord is a separate object on the wire (itself split into chunks), each one HTTP
# request to upload and one to download, each checked against the SuperLink's database;
# fedroc's arrays are small statistics, for which those requests, not the bytes, were the cost
# of a round. Larger arrays keep Flower's chunked ArrayRecord.
PACK_LIMIT = 1 << 20


def to_recorddict(record: Mapping[str, Any], header: Mapping[str, Any] | None = None) -> RecordDict:
    """Pack a record, and a header of scalars, into a RecordDict."""
    rec = check_record(record)
    reserved = [key for key in rec if key.startswith(_RESERVED)]
    if reserved:
        raise InputError(f"record keys may not start with a NUL character; got {reserved[0]!r}")
    large = {
        key: value
        for key, value in rec.items()
        if isinstance(value, np.ndarray) and value.nbytes > PACK_LIMIT
    }
    values: dict[str, Any] = {_BODY: encode({k: v for k, v in rec.items() if k not in large})}
    if large:
        values[_KEYS] = json.dumps(list(rec))
    for key, value in (header or {}).items():
        values[_HEADER + key] = value
    content: dict[str, Any] = {_VALUES: ConfigRecord(values)}
    if large:
        content[_ARRAYS] = ArrayRecord({key: Array(value) for key, value in large.items()})
    return RecordDict(content)


def _values(content: RecordDict) -> Any:
    if _VALUES not in content:
        raise InputError(f"not a fedroc message: record {_VALUES!r} is missing")
    return content[_VALUES]


def read_header(content: RecordDict) -> dict[str, Any]:
    """Return the header :func:`to_recorddict` packed."""
    values = _values(content)
    return {k[len(_HEADER) :]: v for k, v in values.items() if k.startswith(_HEADER)}


def from_recorddict(content: RecordDict) -> Record:
    """Inverse of :func:`to_recorddict` (the header is left out)."""
    values = _values(content)
    if _BODY not in values:
        # The header (with the protocol version) is still readable: a site of another
        # version is told so by the caller, not by this error.
        raise InputError("fedroc message without a record body (another protocol version?)")
    body = decode(bytes(values[_BODY]))
    if _KEYS not in values:
        return body
    arrays: Any = content[_ARRAYS] if _ARRAYS in content else {}
    out: Record = {}
    for key in json.loads(str(values[_KEYS])):
        if key in body:
            out[key] = body[key]
        elif key in arrays:
            out[key] = np.array(arrays[key].numpy(), copy=True)
        else:
            raise InputError(f"fedroc message lists key {key!r} but carries no value for it")
    return out
