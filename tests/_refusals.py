"""What the attack reviews ask a site and read back: a refusal's words, or "answered"."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fedroc.data import SiteData
from fedroc.exceptions import FedrocError
from fedroc.federation import Federation
from fedroc.federation.site import Site


def refusal(fed: Federation, function: str, **args: object) -> str:
    """The refusal of ``function`` (a FedrocError's words), or "answered"."""
    try:
        fed.call(function, **args)
    except FedrocError as exc:
        return str(exc)
    return "answered"


def clustered_rows(rng: np.random.Generator, n: int, above: bool = False) -> SiteData:
    """``n`` rows in clusters of two, scores in [0, 1) (the first one above 1 if ``above``)."""
    s = rng.random(n)
    if above:
        s[0] += 1.0
    return SiteData.from_arrays(rng.random(n) < 0.4, s, cluster=np.arange(n) // 2)


def small_site_secure_refusals(
    function: str, args: dict[str, Any], seed: int, trials: int
) -> tuple[int, dict[bool, set[str]]]:
    """A secure sum of ``function`` over two sites of 60 rows and one of 1 to 4 (q = 5), half
    of whose sites hold a row above 1; every sum is refused (the small site's count).

    Returns how many refusals said a row lay "outside", and the refusals' words by whether
    the small site held a row above 1.
    """
    from fedroc.secagg import secure_sum

    said: dict[bool, set[str]] = {False: set(), True: set()}
    told = 0
    for trial in range(trials):
        rng = np.random.default_rng([seed, trial])
        wider = trial % 2 == 1
        victim = clustered_rows(rng, 1 + trial % 4, wider)
        sites = [Site("A", clustered_rows(rng, 60)), Site("B", clustered_rows(rng, 60)),
                 Site("v", victim)]  # fmt: skip
        with pytest.raises(FedrocError) as refused:
            secure_sum(Federation.from_sites(sites), function, **args)
        said[wider].add(str(refused.value))
        told += wider and "outside" in str(refused.value)
    return told, said


def lone_small_site(seed: int, trial: int) -> tuple[Federation, bool]:
    """One site of 1 to 4 rows (q = 5) by ``trial``, with a row above 1 at odd trials.

    Returns the federation of that one site and whether it holds the row above 1.
    """
    n = 1 + trial % 4
    rng = np.random.default_rng([seed, trial])
    y, s = rng.random(n) < 0.5, rng.random(n)
    wider = trial % 2 == 1
    if wider:
        s[0] += 1.0  # the site's one row (or one of its rows) above 1
    return Federation.from_sites([Site("v", SiteData.from_arrays(y, s))]), wider
