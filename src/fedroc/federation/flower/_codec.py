"""fedroc records <-> Flower ``RecordDict``.

A fedroc record maps onto Flower's record types: numpy arrays go into an ``ArrayRecord``
(dtype, byte order and shape survive), numbers, strings, bytes, booleans and lists of one
scalar type into a ``ConfigRecord`` under their own keys. The few values a ``ConfigRecord``
cannot hold faithfully (None, mixed lists, integers beyond 64 bits) travel as JSON text in
the same ``ConfigRecord``, which also keeps the key order (so a decoded record equals the
encoded one exactly, as on the in-process transport) and a small *header* (for a call:
function, requester and protocol version). Every record is a separate object on Flower's
wire, so a message has one ``ConfigRecord`` and, only when needed, one ``ArrayRecord``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fedroc.exceptions import InputError
from fedroc.federation.records import Record, _json_restore, _json_safe, check_record

__all__ = ["PROTOCOL", "from_recorddict", "read_header", "to_recorddict"]

PROTOCOL = 1  # bumped when the message layout changes; both sides refuse other versions

_VALUES = "fedroc.record"  # ConfigRecord: values, key order, JSON values, header
_ARRAYS = "fedroc.arrays"  # ArrayRecord (only when the record holds arrays)
_RESERVED = "\x00"  # prefix of the ConfigRecord's own entries (record keys cannot use it)
_KEYS = _RESERVED + "keys"
_JSON = _RESERVED + "json"
_HEADER = _RESERVED + "h:"
_PACKED = _RESERVED + "arrays"  # {key: [dtype.str, shape]} of arrays packed as bytes
_PACK = _RESERVED + "a:"
# Arrays up to this size travel as raw bytes inside the ConfigRecord. In Flower 1.41 every
# Array of an ArrayRecord is a separate object on the wire (itself split into chunks), each
# one HTTP request to upload and one to download, each checked against the SuperLink's
# database; fedroc's arrays are small statistics, for which those requests, not the bytes,
# were the cost of a round. Larger arrays keep Flower's chunked ArrayRecord.
PACK_LIMIT = 1 << 20

_INT64 = (-(2**63), 2**63 - 1)


def _native(value: Any) -> bool:
    """Whether a ConfigRecord stores ``value`` and gives back an equal value of one type."""
    if isinstance(value, bool) or isinstance(value, (str, bytes, float)):
        return True
    if isinstance(value, int):
        return _INT64[0] <= value <= _INT64[1]
    if isinstance(value, list):
        if not value:
            return True
        kind = type(value[0])
        if kind not in (bool, int, float, str, bytes):
            return False
        return all(type(v) is kind and _native(v) for v in value)
    return False


def to_recorddict(record: Mapping[str, Any], header: Mapping[str, Any] | None = None) -> RecordDict:
    """Pack a record, and a header of scalars, into a RecordDict."""
    rec = check_record(record)
    arrays: dict[str, Array] = {}
    values: dict[str, Any] = {}
    as_json: dict[str, Any] = {}
    packed: dict[str, Any] = {}
    for key, value in rec.items():
        if key.startswith(_RESERVED):
            raise InputError(f"record keys may not start with a NUL character; got {key!r}")
        if isinstance(value, np.ndarray) and value.nbytes <= PACK_LIMIT:
            packed[key] = [value.dtype.str, list(value.shape)]
            values[_PACK + key] = np.ascontiguousarray(value).tobytes()
        elif isinstance(value, np.ndarray):
            arrays[key] = Array(value)
        elif _native(value):
            values[key] = value
        else:
            as_json[key] = _json_safe(value)
    values[_KEYS] = json.dumps(list(rec))
    values[_JSON] = json.dumps(as_json)
    if packed:
        values[_PACKED] = json.dumps(packed)
    for key, value in (header or {}).items():
        values[_HEADER + key] = value
    content: dict[str, Any] = {_VALUES: ConfigRecord(values)}
    if arrays:
        content[_ARRAYS] = ArrayRecord(arrays)
    return RecordDict(content)


def _values(content: RecordDict) -> Any:
    if _VALUES not in content:
        raise InputError(f"not a fedroc message: record {_VALUES!r} is missing")
    return content[_VALUES]


def read_header(content: RecordDict) -> dict[str, Any]:
    """The header :func:`to_recorddict` packed."""
    values = _values(content)
    return {k[len(_HEADER) :]: v for k, v in values.items() if k.startswith(_HEADER)}


def from_recorddict(content: RecordDict) -> Record:
    """Inverse of :func:`to_recorddict` (the header is left out)."""
    values = _values(content)
    order = json.loads(str(values[_KEYS]))
    as_json = json.loads(str(values[_JSON]))
    arrays: Any = content[_ARRAYS] if _ARRAYS in content else {}
    packed = json.loads(str(values[_PACKED])) if _PACKED in values else {}
    out: Record = {}
    for key in order:
        if key in packed:
            dtype, shape = packed[key]
            blob = bytes(values[_PACK + key])
            out[key] = np.frombuffer(blob, dtype=np.dtype(dtype)).reshape(shape).copy()
        elif key in arrays:
            out[key] = np.array(arrays[key].numpy(), copy=True)
        elif key in as_json:
            out[key] = _json_restore(as_json[key])
        elif key in values:
            value = values[key]
            out[key] = list(value) if isinstance(value, list) else value
        else:
            raise InputError(f"fedroc message lists key {key!r} but carries no value for it")
    return out
