"""The ServerApp's result channel: one checksummed line of its log (no Flower import).

``flwr run --stream`` hands the analyst the ServerApp's log; fedroc's result (or error) is
one line ``FEDROC-OUTPUT <kind> <sha256[:16]> <base64 JSON>``, so noise around it (Flower's
own log lines, colour codes) cannot corrupt it and a truncated line is detected.

While the job runs, the ServerApp also logs one line ``FEDROC-PROGRESS <JSON>`` as each call
to the sites starts and ends (:func:`emit_progress`), which ``fedroc flower run`` shows on a
terminal as ``fedroc evaluate`` shows its in-process calls. Such a line is for display only:
it carries the call's number, site function and sites, which the result's ``released``
names too, and a line that does not parse is ignored. A ``FEDROC-STATUS <JSON string>``
line (:func:`emit_status`) says what the job waits for between calls (a site that no
connected SuperNode serves, at discovery).
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
from fedroc.federation._progress import CallProgress

__all__ = [
    "MARK",
    "PROGRESS_MARK",
    "STATUS_MARK",
    "emit_marked",
    "emit_progress",
    "emit_status",
    "parse_marked",
    "parse_progress",
    "parse_status",
    "process_started",
]

MARK = "FEDROC-OUTPUT"
MARKED = re.compile(MARK + r" (result|error) ([0-9a-f]{16}) ([A-Za-z0-9+/=]+)")
PROGRESS_MARK = "FEDROC-PROGRESS"
STATUS_MARK = "FEDROC-STATUS"


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


def emit_progress(step: Any) -> None:
    """Log a :class:`~fedroc.federation.CallProgress` as one ``FEDROC-PROGRESS`` line."""
    fields: dict[str, Any] = {
        "round": int(step.round),
        "function": str(step.function),
        "sites": [str(s) for s in step.sites],
        "site": None if step.site is None else str(step.site),
        "done": bool(step.done),
    }
    phase = getattr(step, "phase", None)
    if phase is not None:
        fields["phase"] = str(phase)
    sys.stdout.write(f"{PROGRESS_MARK} {json.dumps(fields)}\n")
    sys.stdout.flush()


def emit_status(text: str) -> None:
    """Log one ``FEDROC-STATUS`` line: what the job waits for between calls (a JSON string)."""
    sys.stdout.write(f"{STATUS_MARK} {json.dumps(str(text))}\n")
    sys.stdout.flush()


def parse_status(line: str) -> str | None:
    """Return the text of a ``FEDROC-STATUS`` line, or None (a line cut short included)."""
    _, found, text = line.partition(STATUS_MARK + " ")
    if not found:
        return None
    try:
        status = json.loads(text)
    except ValueError:
        return None
    return status if isinstance(status, str) else None


def parse_progress(line: str) -> CallProgress | None:
    """Return the call a ``FEDROC-PROGRESS`` line reports, or None.

    Anything else, a line cut short or fields of the wrong types included, gives None.
    """
    _, found, text = line.partition(PROGRESS_MARK + " ")
    if not found:
        return None
    try:
        fields = json.loads(text)
        sites = tuple(fields["sites"])
        site = fields.get("site")
        phase = fields.get("phase")
        step = CallProgress(
            int(fields["round"]),
            str(fields["function"]),
            sites,
            site,
            bool(fields["done"]),
            None if phase is None else str(phase),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if not all(isinstance(s, str) for s in sites) or not (site is None or site in sites):
        return None  # (a site outside its call's sites, which the display counts within)
    return step


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
