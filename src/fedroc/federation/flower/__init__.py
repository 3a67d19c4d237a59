"""fedroc across machines on Flower (flwr 1.41): one SuperNode per site.

How the pieces fit
------------------
* Each site runs a Flower SuperNode whose node config names its data file, columns,
  disclosure policy and audit log (:mod:`.site_config`). fedroc's ClientApp
  (:mod:`.apps`) answers two query messages: ``fedroc_hello`` (which site am I) and
  ``fedroc_call`` (run one site function through :meth:`fedroc.federation.Site.handle`,
  so the policy and audit log work exactly as in-process). The analyst never sees a path,
  a column name or a row.
* The analyst's code runs in fedroc's ServerApp, on a :class:`~fedroc.federation.Federation`
  whose transport is :class:`FlowerTransport`: the same method code as in-process. A
  *job* (:mod:`.jobs`: ``evaluate`` a registered method, ``moments``, ``sites``,
  ``calls``) travels in the run config; :func:`submit_job` (``fedroc flower run``) starts
  the run with ``flwr run`` and reads the JSON result back from the run's log.
* Faults: a site that does not answer a call within the timeout fails the job with a
  :class:`~fedroc.exceptions.SiteError` naming it; policy refusals come back as
  :class:`~fedroc.exceptions.DisclosureError`. Nothing partial is reported.
* :class:`LocalDeployment` (``fedroc flower up``) starts a SuperLink (state in a database)
  and N SuperNodes on loopback, with TLS from a CA generated for the run, or insecure; it
  restarts processes that die (:meth:`LocalDeployment.supervise`) and leaves none behind.
* Identity (:mod:`.identity`): each site has its own key pair; the SuperLink accepts only
  registered keys (Flower's SuperNode authentication) and the ServerApp refuses a node whose
  key is not the pinned key of the site it declares, naming it.
* Operations: :mod:`.superlink` (``fedroc flower superlink``, with the warm ServerApp
  executor of :mod:`.serverexec`), :mod:`.health` (``fedroc flower health``), JSON logs
  (:mod:`._logs`); Docker, compose and systemd files are in ``deploy/flower``.
* :mod:`.node` (``fedroc flower supernode``) is a SuperNode tuned for fedroc's many short
  rounds; the stock ``flower-supernode --node-config FILE`` works too, more slowly.

Privacy: Flower carries the messages (TLS between SuperNodes and SuperLink); what a site
releases is decided by fedroc's site functions and policy. fedroc's secure aggregation
and differential privacy are its own (inside the site functions); Flower's SecAgg+ and DP
mods act on model-training messages and are not used.

Importing this package does not import Flower; its names load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

# Flower loads the apps by these references. They name the application module
# (:mod:`fedroc.apps.flower`), which registers every layer's site functions, methods and jobs
# before it hands Flower the apps of :mod:`.apps`; this layer never imports it.
CLIENT_APP_REF = "fedroc.apps.flower:client_app"
SERVER_APP_REF = "fedroc.apps.flower:server_app"


def load_app(ref: str) -> Any:
    """Import and return the object ``module:attribute`` names (a Flower app reference)."""
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)


__all__ = [
    "FlowerConnection",
    "FlowerTransport",
    "LocalDeployment",
    "SiteNodeConfig",
    "TlsFiles",
    "generate_certificates",
    "submit_job",
]

_WHERE = {
    "FlowerTransport": "fedroc.federation.flower.transport",
    "FlowerConnection": "fedroc.federation.flower.deploy",
    "LocalDeployment": "fedroc.federation.flower.deploy",
    "TlsFiles": "fedroc.federation.flower.deploy",
    "generate_certificates": "fedroc.federation.flower.deploy",
    "submit_job": "fedroc.federation.flower.deploy",
    "SiteNodeConfig": "fedroc.federation.flower.site_config",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
