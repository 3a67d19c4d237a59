"""A proxy's persistent record of the jobs whose result it released.

Each proxy refuses a job id it has already run, across restarts: the record is a JSON-lines
file, each line written and flushed to disk (``fsync``) before the proxy releases its share
of the result. A job that failed or was refused before that point is not recorded (nothing
was opened), so its bundles may be submitted again.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from fedroc.exceptions import InputError

__all__ = ["JobLedger"]


class JobLedger:
    """Used job ids (and the owners and bundle digests of each), on disk or in memory."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._jobs: set[str] = set()
        self._bundles: set[str] = set()
        self._lock = threading.Lock()
        if self.path is not None and self.path.exists():
            number = 0
            try:
                with self.path.open(encoding="utf-8") as fh:
                    for line in fh:
                        number += 1
                        if not line.strip():
                            continue
                        entry = json.loads(line)
                        self._jobs.add(str(entry["job"]))
                        self._bundles.update(str(d) for d in entry.get("bundles", []))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise InputError(
                    f"job ledger {str(self.path)!r} is unreadable (line {number}): {exc}"
                ) from None

    def used(self, job: str) -> bool:
        """Tell whether job id ``job`` was run already."""
        with self._lock:
            return job in self._jobs

    def seen_bundle(self, digest: str) -> bool:
        """Tell whether a bundle of this fingerprint served an earlier job."""
        with self._lock:
            return digest in self._bundles

    def record(self, job: str, owners: Sequence[str], bundles: Sequence[str]) -> None:
        """Record a job as run; raises if it was recorded already."""
        with self._lock:
            if job in self._jobs:
                raise InputError(f"job {job} is already in the ledger")
            line = {
                "job": job,
                "owners": list(owners),
                "bundles": list(bundles),
                "time": _dt.datetime.now(_dt.UTC).isoformat(),
            }
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(line) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
            self._jobs.add(job)
            self._bundles.update(bundles)
