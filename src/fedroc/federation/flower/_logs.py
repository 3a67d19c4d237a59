"""Structured logs of fedroc's Flower processes: one JSON object per line, UTC timestamps.

Flower's console handler prints ``INFO :      message`` without a time (timestamps only at
DEBUG level). fedroc's launchers (``fedroc flower supernode``/``superlink``) replace it
with JSON lines that log collectors (journald, Docker, Loki) parse without a pattern::

    {"time": "2026-01-31T09:15:02.123Z", "level": "INFO", "component": "supernode",
     "site": "north", "logger": "flwr", "message": "SuperNode ID: 4114..."}

Uvicorn's access log (the SuperLink's HTTP requests) keeps its own UTC-timestamped lines.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

__all__ = ["JsonFormatter", "configure"]


class JsonFormatter(logging.Formatter):
    """A log record as one JSON line."""

    def __init__(self, **fields: Any) -> None:
        super().__init__()
        self.fields = {k: v for k, v in fields.items() if v is not None}

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        entry: dict[str, Any] = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            **self.fields,
            "logger": record.name,
            "message": record.getMessage().strip(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure(component: str, *, site: str | None = None, stream: TextIO | None = None) -> None:
    """Send fedroc's and Flower's log records to ``stream`` (stderr) as JSON lines."""
    try:  # Flower adds its console handler when its logger module is first imported
        import flwr.supercore.logger  # noqa: F401
    except ImportError:
        pass
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter(component=component, site=site))
    handler.setLevel(logging.INFO)
    for name in ("flwr", "fedroc"):
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
