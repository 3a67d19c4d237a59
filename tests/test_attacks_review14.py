"""Attack review 14 (main 553c50b): the budget answers, the pre-checks, the newer paths.

Public calls only (``Federation.call`` of the registered site functions, the methods, the
command line). Each attack was run on 553c50b first; where it succeeded, the fix follows in
the same commit as its test, or the hole stays documented as a strict xfail. Where an attack
did not succeed (what held), the test asserts that it still fails.
"""

from __future__ import annotations

import numpy as np

import fedroc.apps.application  # noqa: F401  (registers every site function)
from fedroc.data import SiteData
from fedroc.exceptions import FedrocError
from fedroc.federation import Federation
from fedroc.federation.site import Site

TRIALS = 20


# -- H14-1. the delta a site's limit leaves is 1/n: its row count under q --------------------


def _small_site(seed: int, audit=None) -> tuple[Site, int]:
    """A site of 1 to q - 1 rows (q = 5), which refuses to say how many it holds."""
    rng = np.random.default_rng([1401, seed])
    n = int(rng.integers(1, 5))
    y, s = rng.random(n) < 0.5, rng.random(n)
    return Site("v", SiteData.from_arrays(y, s), audit=audit), n


def test_the_delta_a_site_has_left_does_not_give_its_row_count_under_q(capsys, tmp_path):
    """H14-1. A site of fewer than q rows refuses ``fedroc.info`` with a message that names
    no count ("the message names the count, not its value: that is a number of the rows").
    Without a configured ``delta_limit`` its lifetime delta is 1/n, and
    ``fedroc.epsilon_left`` (no rows read, no count declared) answered ``delta_left`` = 1/n,
    and ``fedroc privacy status`` showed the same limit (noted when the site starts): the
    analyst read n as round(1 / delta_left). On main 553c50b: n in 20 of 20 sites of 1 to 4
    rows, by either.

    Now a site under q rows has no delta to spend (every release with a delta, the ROC-GLM's
    noisy scores, declares its class counts and is refused there anyway): both say 0, the
    same for every n under q: 0 of 20."""
    from tests._cli import run_main

    found_left = found_status = 0
    for seed in range(TRIALS):
        audit = tmp_path / str(seed)
        site, n = _small_site(seed, audit / "v.jsonl")
        fed = Federation.from_sites([site])
        try:
            fed.call("fedroc.info")
            raise AssertionError("a site under q rows told its size")
        except FedrocError:
            pass
        left = float(fed.call("fedroc.epsilon_left")["v"]["delta_left"])
        found_left += left > 0 and round(1 / left) == n
        code, out, err = run_main(
            capsys, ["privacy", "status", "--audit-dir", str(audit), "--json"]
        )
        assert code == 0, err
        import json

        limit = json.loads(out)["sites"][0]["delta_limit"]
        found_status += bool(limit) and round(1 / limit) == n
    assert found_left == 0, f"n read from epsilon_left in {found_left} of {TRIALS}"
    assert found_status == 0, f"n read from the privacy status in {found_status} of {TRIALS}"
