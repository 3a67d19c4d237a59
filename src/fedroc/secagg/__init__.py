"""Secure aggregation (Bonawitz et al. 2017): the analyst learns only the sum over sites.

- :func:`secure_sum` runs a whole session over a :class:`~fedroc.federation.Federation`;
  :class:`SecAggServer` exposes its four stages one by one.
- :func:`secure_input` registers what a site contributes (it never leaves in the clear).
- :mod:`fedroc.secagg.inputs`: secure class counts, Brier score and calibration counts.
"""

from fedroc.secagg.protocol import (
    FUNCTIONS,
    STAGES,
    ClientState,
    SecAggServer,
    SecureSum,
    ServerState,
    get_secure_input,
    secure_input,
    secure_sum,
)

__all__ = [
    "FUNCTIONS",
    "STAGES",
    "ClientState",
    "SecAggServer",
    "SecureSum",
    "ServerState",
    "get_secure_input",
    "secure_brier",
    "secure_calibration",
    "secure_class_counts",
    "secure_input",
    "secure_sum",
]


def __getattr__(name: str) -> object:
    # The helpers for the foundation's statistics import fedroc.federation.basic; load them
    # on first use so that importing fedroc.secagg stays light.
    if name in {"secure_brier", "secure_calibration", "secure_class_counts"}:
        from fedroc.secagg import inputs

        return getattr(inputs, name)
    raise AttributeError(name)
