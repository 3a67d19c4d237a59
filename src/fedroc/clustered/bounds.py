"""Re-export of :mod:`fedroc.methods.clustered.bounds` (its name before fedroc 0.2)."""

from fedroc.methods.clustered.bounds import *  # noqa: F403
from fedroc.methods.clustered.bounds import __all__  # noqa: F401
