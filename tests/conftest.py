from __future__ import annotations

import numpy as np
import pytest


def tied_data(rng: np.random.Generator, n: int, levels: int | None = 7, shift: float = 0.6):
    """Labels and scores; with ``levels`` the scores take only that many values (heavy ties)."""
    y = rng.integers(0, 2, n)
    if y.min() == y.max():
        y[0] = 1 - y[0]
    s = rng.normal(size=n) + shift * y
    if levels is not None:
        s = np.round(s * levels / 4.0) / levels
    return y, s


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
