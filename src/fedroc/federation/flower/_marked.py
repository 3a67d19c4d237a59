"""The ServerApp's result channel: one checksummed line of its log (no Flower import).

``flwr run --stream`` hands the analyst the ServerApp's log; fedroc's result (or error) is
one line ``FEDROC-OUTPUT <kind> <sha256[:16]> <base64 JSON>``, so noise around it (Flower's
own log lines, colour codes) cannot corrupt it and a truncated line is detected.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import sys
from typing import Any

from fedroc._results import jsonable

__all__ = ["MARK", "emit_marked", "parse_marked", "process_started"]

MARK = "FEDROC-OUTPUT"
MARKED = re.compile(MARK + r" (result|error) ([0-9a-f]{16}) ([A-Za-z0-9+/=]+)")


def emit_marked(kind: str, payload: Any) -> None:
    """Print ``payload`` as one line of the ServerApp's log: kind, checksum, base64 JSON."""
    text = json.dumps(jsonable(payload), allow_nan=False)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    blob = base64.b64encode(text.encode()).decode()
    sys.stdout.write(f"{MARK} {kind} {digest} {blob}\n")
    sys.stdout.flush()


def parse_marked(log_text: str) -> tuple[str, Any] | None:
    """Find the last marked output in a ServerApp log, checked against its checksum."""
    found = None
    for kind, digest, blob in MARKED.findall(log_text):
        text = base64.b64decode(blob).decode()
        if hashlib.sha256(text.encode()).hexdigest()[:16] == digest:
            found = (kind, json.loads(text))
    return found


def process_started() -> float | None:
    """When this process started (``time.time()``; Linux ``/proc``), else None."""
    try:
        with open(f"/proc/{os.getpid()}/stat") as fh:
            ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as fh:
            boot = next(int(x.split()[1]) for x in fh if x.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, StopIteration, IndexError):
        return None
