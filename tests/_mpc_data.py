"""Simulated data owners for the MPC tests."""

from __future__ import annotations

import numpy as np


def owners_from(rng, sizes, levels=None, shift=0.7):
    """One ``(labels, scores)`` pair per owner: normal scores shifted by ``shift`` for the
    positives, rounded to ``1 / levels`` when ``levels`` is given (ties)."""
    out = []
    for n in sizes:
        y = rng.integers(0, 2, n)
        s = rng.normal(size=n) + shift * y
        if levels is not None:
            s = np.round(s * levels) / levels
        out.append((y, s))
    return out
