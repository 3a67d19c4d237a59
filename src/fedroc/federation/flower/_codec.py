"""fedroc records <-> Flower ``RecordDict``.

A fedroc record maps onto Flower's record types one to one: numpy arrays go into an
``ArrayRecord`` (dtype, byte order and shape survive), numbers, strings, bytes, booleans
and lists of one scalar type into a ``ConfigRecord``. The few values a ``ConfigRecord``
cannot hold faithfully (None, mixed lists, integers beyond 64 bits) travel as JSON text in
a second ``ConfigRecord``. Key order is kept, so a decoded record equals the encoded one
exactly, as on the in-process transport.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fedroc.exceptions import InputError
from fedroc.federation.records import Record, _json_restore, _json_safe, check_record

__all__ = [
    "CALL_KEY",
    "HELLO_KEY",
    "PROTOCOL",
    "from_recorddict",
    "to_recorddict",
]

PROTOCOL = 1  # bumped when the message layout changes; sites refuse other versions

CALL_KEY = "fedroc.call"  # ConfigRecord of a call: function, requester, protocol
HELLO_KEY = "fedroc.hello"  # ConfigRecord of a hello reply: site, version, protocol
_META = "fedroc.record"  # ConfigRecord: key order and the values kept as JSON
_ARRAYS = "fedroc.arrays"  # ArrayRecord (only when the record holds arrays)
_VALUES = "fedroc.values"  # ConfigRecord (only when the record holds other values)

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


def to_recorddict(record: Mapping[str, Any], **meta: Any) -> RecordDict:
    """Pack a record (and optional ``meta`` ConfigRecords, by key) into a RecordDict."""
    rec = check_record(record)
    arrays: dict[str, Array] = {}
    values: dict[str, Any] = {}
    as_json: dict[str, Any] = {}
    for key, value in rec.items():
        if isinstance(value, np.ndarray):
            arrays[key] = Array(value)
        elif _native(value):
            values[key] = value
        else:
            as_json[key] = _json_safe(value)
    # Each record is a separate object on Flower's wire: send no empty ones.
    content: dict[str, Any] = {
        _META: ConfigRecord({"keys": json.dumps(list(rec)), "json": json.dumps(as_json)})
    }
    if arrays:
        content[_ARRAYS] = ArrayRecord(arrays)
    if values:
        content[_VALUES] = ConfigRecord(values)
    for key, config in meta.items():
        content[key] = ConfigRecord(dict(config))
    return RecordDict(content)


def from_recorddict(content: RecordDict) -> Record:
    """Inverse of :func:`to_recorddict` (meta records are ignored)."""
    if _META not in content:
        raise InputError(f"not a fedroc message: record {_META!r} is missing")
    meta: Any = content[_META]
    order = json.loads(str(meta["keys"]))
    as_json = json.loads(str(meta["json"]))
    arrays: Any = content[_ARRAYS] if _ARRAYS in content else {}
    values: Any = content[_VALUES] if _VALUES in content else {}
    out: Record = {}
    for key in order:
        if key in arrays:
            out[key] = np.array(arrays[key].numpy(), copy=True)
        elif key in values:
            value = values[key]
            out[key] = list(value) if isinstance(value, list) else value
        elif key in as_json:
            out[key] = _json_restore(as_json[key])
        else:
            raise InputError(f"fedroc message lists key {key!r} but carries no value for it")
    return out
