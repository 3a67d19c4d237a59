"""Records: what crosses between the analyst and a site.

A record is a flat mapping from string keys to numpy arrays, numbers, strings, bytes,
booleans, None, or lists of numbers/strings. It maps one-to-one onto Flower's
``ArrayRecord`` (arrays) and ``ConfigRecord`` (everything else). The in-process transport
encodes every message to bytes and decodes it on the other side, so no object is shared
between analyst and site, and bytes sent are counted the same way on every transport.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from fedroc.exceptions import InputError

__all__ = ["Record", "check_record", "decode", "encode"]

Record = dict[str, Any]

_SCALARS = (bool, int, float, str, type(None))
_MAGIC = b"FRR2"  # FRR1 wrote bytes as hex inside the JSON header


def _check_value(key: str, value: Any, where: str) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise InputError(
                f"{where}: array {key!r} has dtype {value.dtype}; only numeric arrays may be sent"
            )
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, _SCALARS) or isinstance(value, bytes):
        return value
    if isinstance(value, (list, tuple)):
        items = [v.item() if isinstance(v, np.generic) else v for v in value]
        if not all(isinstance(v, _SCALARS) for v in items):
            raise InputError(f"{where}: list {key!r} may hold only numbers and strings")
        return items
    raise InputError(
        f"{where}: value {key!r} has type {type(value).__name__}; records hold numpy arrays, "
        "numbers, strings, bytes, booleans, None and lists of those"
    )


def check_record(record: Mapping[str, Any], where: str = "record") -> Record:
    """Validate a record and return it with numpy scalars converted to Python ones."""
    if not isinstance(record, Mapping):
        raise InputError(f"{where} must be a mapping; got {type(record).__name__}")
    out: Record = {}
    for key, value in record.items():
        if not isinstance(key, str):
            raise InputError(f"{where}: keys must be strings; got {key!r}")
        out[key] = _check_value(key, value, where)
    return out


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return {"__float__": repr(value)}
    if isinstance(value, bytes):
        return {"__bytes__": value.hex()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _json_restore(value: Any) -> Any:
    if isinstance(value, dict):
        if "__float__" in value:
            return float(value["__float__"])
        if "__bytes__" in value:
            return bytes.fromhex(value["__bytes__"])
    if isinstance(value, list):
        return [_json_restore(v) for v in value]
    return value


def encode(record: Mapping[str, Any]) -> bytes:
    """Serialize a record: a JSON header followed by the raw array and bytes buffers."""
    rec = check_record(record)
    header: dict[str, Any] = {}
    buffers: list[bytes] = []
    offset = 0
    for key, value in rec.items():
        if isinstance(value, np.ndarray):
            arr = np.asarray(value, order="C")  # ascontiguousarray would make 0-d arrays 1-d
            raw = arr.tobytes()
            header[key] = {"a": [arr.dtype.str, list(arr.shape), offset, len(raw)]}
            buffers.append(raw)
            offset += len(raw)
        elif isinstance(value, bytes):
            # Raw, like arrays: keys, ciphertexts and shares are most of what secure
            # aggregation and MPC send, and hex in the JSON header would double them.
            header[key] = {"b": [offset, len(value)]}
            buffers.append(value)
            offset += len(value)
        else:
            header[key] = {"v": _json_safe(value)}
    head = json.dumps(header, separators=(",", ":")).encode()
    return _MAGIC + struct.pack("<Q", len(head)) + head + b"".join(buffers)


def decode(blob: bytes) -> Record:
    """Inverse of :func:`encode`; arrays are fresh copies owned by the receiver."""
    if blob[:4] != _MAGIC:
        raise InputError("not a fedroc record (bad magic bytes)")
    (n_head,) = struct.unpack("<Q", blob[4:12])
    header = json.loads(blob[12 : 12 + n_head])
    body = memoryview(blob)[12 + n_head :]
    out: Record = {}
    for key, item in header.items():
        if "a" in item:
            dtype, shape, offset, nbytes = item["a"]
            arr = np.frombuffer(body[offset : offset + nbytes], dtype=np.dtype(dtype))
            out[key] = arr.reshape(shape).copy()
        elif "b" in item:
            offset, nbytes = item["b"]
            out[key] = bytes(body[offset : offset + nbytes])
        else:
            out[key] = _json_restore(item["v"])
    return out
