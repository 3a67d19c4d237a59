"""The sequestered test-set service (paper 2), an application on :mod:`fedroc.methods.sequester`.

- :mod:`fedroc.sequester.service`: the REST API (FastAPI; ``fedroc sequester serve``),
  its guard (authentication before the body, body size, rate limits) and a small client.
- :mod:`fedroc.sequester.db`: its state in SQLite or PostgreSQL, migrated with Alembic.

Both need the ``service`` extra (``pip install 'fedroc[service]'``) and are not imported
here. The method itself (planner, hash table, mechanisms) lives in
:mod:`fedroc.methods.sequester` and the paper's figures in :mod:`fedroc.experiments.sequester`;
their public names are re-exported here so that ``from fedroc.sequester import plan,
Session, ...`` keeps working. The threat model is in
:mod:`fedroc.methods.sequester`.
"""

from fedroc.experiments import sequester as figures  # noqa: F401  (re-exported)
from fedroc.methods.sequester import *  # noqa: F403
from fedroc.methods.sequester import __all__ as _METHOD_NAMES
from fedroc.methods.sequester import engine as engine
from fedroc.methods.sequester import mechanism as mechanism

__all__ = sorted([*_METHOD_NAMES, "engine", "figures", "mechanism"])
