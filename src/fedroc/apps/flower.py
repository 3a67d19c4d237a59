"""fedroc's Flower apps, with the whole application loaded.

Flower loads ``fedroc.apps.flower:client_app`` on every SuperNode and
``fedroc.apps.flower:server_app`` on the SuperLink (the references are in
:data:`fedroc.federation.flower.CLIENT_APP_REF` and ``SERVER_APP_REF``). Importing
:mod:`fedroc.apps.application` first registers every site function, method and job; the
apps themselves are those of :mod:`fedroc.federation.flower.apps`.
"""

from __future__ import annotations

import fedroc.apps.application  # noqa: F401  (registers every site function, method and job)
from fedroc.federation.flower.apps import client_app, server_app

# Listed, so that Flower's check for the attribute (a plain assignment or a name in
# __all__) finds them.
__all__ = ["client_app", "server_app"]
