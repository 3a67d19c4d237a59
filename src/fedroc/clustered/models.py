"""Re-export of :mod:`fedroc.methods.clustered.models` (its name before fedroc 0.2)."""

from fedroc.methods.clustered.models import *  # noqa: F403
from fedroc.methods.clustered.models import __all__  # noqa: F401
