"""Secure aggregation (Bonawitz et al. 2017): the analyst learns only the sum over sites.

- :func:`secure_sum` runs a whole session over a :class:`~fedroc.federation.Federation`;
  :class:`SecAggServer` exposes its four stages one by one.
- What a site contributes is any site function registered with ``release="secure"`` or
  ``"both"`` (:func:`fedroc.federation.site_function`): secure aggregation wraps the
  function, which is written once.
- :mod:`fedroc.secagg.statistics`: secure class counts, Brier score and calibration.
"""

from fedroc.secagg.protocol import *  # noqa: F403  (the protocol's public names)
from fedroc.secagg.protocol import __all__ as _PROTOCOL

# The helpers for the foundation's statistics import fedroc.federation.basic; they are
# loaded on first use so that importing fedroc.secagg stays light.
_STATISTICS = ("secure_brier", "secure_calibration", "secure_class_counts")

__all__ = sorted([*_PROTOCOL, *_STATISTICS])


def __getattr__(name: str) -> object:
    if name in _STATISTICS:
        from fedroc.secagg import statistics

        return getattr(statistics, name)
    raise AttributeError(name)
