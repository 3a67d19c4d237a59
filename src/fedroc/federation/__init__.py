"""Sites, the analyst's Federation handle, transports and the first federated methods.

Names are loaded on first use (PEP 562): :mod:`fedroc.federation.records`, the one record
codec, is used by light processes (the MPC parties) that must not import pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedroc._lazy import attach

_LAZY = {
    "CallProgress": "fedroc.federation._progress",
    "CallRecord": "fedroc.federation.federation",
    "Federation": "fedroc.federation.federation",
    "Released": "fedroc.federation.federation",
    "Record": "fedroc.federation.records",
    "AuditLog": "fedroc.federation.site",
    "Reply": "fedroc.federation.site",
    "Site": "fedroc.federation.site",
    "SiteContext": "fedroc.federation.site",
    "get_site_function": "fedroc.federation.site",
    "registered_site_functions": "fedroc.federation.site",
    "site_function": "fedroc.federation.site",
    "Exchange": "fedroc.federation.transport",
    "InProcessTransport": "fedroc.federation.transport",
    "Transport": "fedroc.federation.transport",
}

__all__ = [
    "AuditLog",
    "CallProgress",
    "CallRecord",
    "Exchange",
    "Federation",
    "InProcessTransport",
    "Record",
    "Released",
    "Reply",
    "Site",
    "SiteContext",
    "Transport",
    "get_site_function",
    "registered_site_functions",
    "site_function",
]

if TYPE_CHECKING:  # pragma: no cover
    from fedroc.federation.federation import CallProgress, CallRecord, Federation, Released
    from fedroc.federation.records import Record
    from fedroc.federation.site import (
        AuditLog,
        Reply,
        Site,
        SiteContext,
        get_site_function,
        registered_site_functions,
        site_function,
    )
    from fedroc.federation.transport import Exchange, InProcessTransport, Transport


__getattr__, __dir__ = attach(__name__, _LAZY, globals())
