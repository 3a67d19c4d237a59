from __future__ import annotations

import itertools
import os
import random
import socket
from collections import Counter
from collections.abc import Iterator
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


@pytest.fixture
def seeded_site_entropy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sites without a ``noise_seed`` draw fresh noise at every release, as in production,
    but from a stream this fixture seeds instead of the operating system's entropy.

    For tests whose statistical assertions read the noise of repeated releases (averaging
    attacks): with fresh entropy each run was a new draw and such an assertion failed by
    chance now and then; a site's ``noise_seed`` would give every release of a stream the
    same noise, which is not what the attack meets. Each call of
    :meth:`~fedroc.federation.SiteContext.noise_rng` gets its own child of one seed, so
    releases differ from each other and the run is the same every time. Nothing reaches the
    product: the analyst still cannot send a seed, and sites with a ``noise_seed`` keep it.
    """
    from fedroc.federation.site import SiteContext

    root = np.random.SeedSequence(20261127)
    configured = SiteContext.noise_rng

    def noise_rng(self: SiteContext, stream: str) -> np.random.Generator | None:
        if self.noise_seed is not None:
            return configured(self, stream)
        return np.random.default_rng(root.spawn(1)[0])

    monkeypatch.setattr(SiteContext, "noise_rng", noise_rng)


# Ports for the servers the tests start in this process. fedroc picks a port by binding to
# port 0 and closing, and its process binds it seconds later; the kernel hands those ports
# out at random from the ephemeral range (Linux: 14 116 odd ports), so the other pytest
# process, picking its own at the same time (both start a Flower deployment first), takes
# the same one about once in 14 116 picks, and a deployment fails to start. Each process
# here takes its ports from its own block below the ephemeral range instead, which the
# kernel never hands out, from a random start (another suite on the same machine).
PORT_BLOCKS = range(20000, 32000, 3000)


def _port_allocator() -> Iterator[int]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    base = PORT_BLOCKS[int(worker) % len(PORT_BLOCKS) if worker.isdigit() else 0]
    start = random.randrange(3000)
    return (base + (start + k) % 3000 for k in itertools.count())


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


@pytest.fixture(scope="session", autouse=True)
def _ports_outside_the_ephemeral_range() -> Iterator[None]:
    ports = _port_allocator()

    def free_port(host: str = "127.0.0.1") -> int:
        return next(p for p in ports if _bindable(host, p))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            "fedroc.mpc.cluster.free_ports", lambda count: [free_port() for _ in range(count)]
        )
        mp.setattr("tests._sequester_server.free_port", free_port)
        try:
            mp.setattr("fedroc.federation.flower.deploy.free_port", free_port)
        except ImportError:  # pragma: no cover - without the flower extra
            pass
        yield
