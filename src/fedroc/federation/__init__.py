"""Sites, the analyst's Federation handle, transports and the first federated methods."""

from fedroc.federation.federation import CallRecord, Federation, Released
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

__all__ = [
    "AuditLog",
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
