"""Health checks of a fedroc Flower deployment (``fedroc flower health``).

* SuperLink: its ``/health`` endpoint (Flower 1.41 serves it on the SuperLink's HTTPS port)
  answers 200 over TLS verified with the deployment's CA.
* SuperNode: its process is alive and it polled the SuperLink successfully within
  ``max_age`` seconds, from the ``status.json`` that fedroc's tuned node keeps in its node
  directory (a node whose SuperLink is gone keeps running and retrying, so a live process
  alone says little).

Each check returns ``{"healthy": bool, "detail": str, ...}`` and never raises on an
unhealthy target; Docker's ``HEALTHCHECK`` and systemd use the exit status of the command.
"""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from fedroc.federation.flower.node import STATUS_NAME

__all__ = ["check_node", "check_superlink"]


def check_superlink(
    address: str, root_certificates: Path | None, *, timeout: float = 5.0
) -> dict[str, Any]:
    """GET ``/health`` of the SuperLink at ``address`` (TLS unless no CA is given)."""
    scheme = "http" if root_certificates is None else "https"
    context = None
    if root_certificates is not None:
        context = ssl.create_default_context(cafile=str(root_certificates))
    url = f"{scheme}://{address}/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            status = int(resp.status)
    except urllib.error.HTTPError as exc:
        status = int(exc.code)
    except (urllib.error.URLError, OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "reason", exc)
        return {"healthy": False, "target": url, "detail": f"{url}: {reason}"}
    return {
        "healthy": status == 200,
        "target": url,
        "status": status,
        "detail": f"{url} answered {status}",
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_node(node_dir: str | Path, *, max_age: float = 60.0) -> dict[str, Any]:
    """Whether the SuperNode of ``node_dir`` runs and reached its SuperLink lately."""
    path = Path(node_dir) / STATUS_NAME
    try:
        status = json.loads(path.read_text())
    except FileNotFoundError:
        return {"healthy": False, "detail": f"{path} does not exist (the node never connected)"}
    except (OSError, ValueError) as exc:
        return {"healthy": False, "detail": f"{path} is unreadable: {exc}"}
    age = time.time() - float(status.get("last_contact", 0.0))
    pid = int(status.get("pid", 0))
    site = status.get("site")
    out = {**status, "age": age}
    if not pid or not _alive(pid):
        return {**out, "healthy": False, "detail": f"site {site!r}: node process {pid} is gone"}
    if age > max_age:
        return {
            **out,
            "healthy": False,
            "detail": f"site {site!r}: no contact with the SuperLink for {age:.0f} s",
        }
    return {
        **out,
        "healthy": True,
        "detail": f"site {site!r}: node {status.get('node_id')} in contact {age:.0f} s ago",
    }
