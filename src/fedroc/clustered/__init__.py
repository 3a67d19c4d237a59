"""Former home of paper 3's clustered AUCs; now :mod:`fedroc.methods.clustered`.

Kept so that ``from fedroc.clustered import clustered_auc`` (and ``fedroc.clustered.models``,
``fedroc.clustered.bounds``) keep working.
"""

from fedroc.methods.clustered import *  # noqa: F403
from fedroc.methods.clustered import __all__  # noqa: F401
