from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

# The longest test files (seconds on a quiet machine: `pytest --durations`), started first so
# that `make test`'s two pytest processes (pytest-xdist, a file at a time) end together
# instead of one of them starting the Flower deployment's 200 s last.
LONGEST_FIRST = (
    "test_flower_deploy.py",
    "test_flower_stock.py",
    "test_flower_identity.py",
    "test_cli_install.py",
    "test_flower.py",
    "test_sequester_service.py",
    "test_sequester_operator.py",
    "test_rocglm_paper1.py",
    "test_coverage_harness.py",
    "test_sequester_attack.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # pytest-xdist knows tests by node id and runs one test of each id: two tests sharing
    # one would silently lose all but one (schemathesis's parametrize once lost 23 of 24).
    twice = sorted(n for n, k in Counter(i.nodeid for i in items).items() if k > 1)
    if twice:
        raise pytest.UsageError(f"tests share a node id (xdist would run one): {twice[:5]}")
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))  # stable


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
