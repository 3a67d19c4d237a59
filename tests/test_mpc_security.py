"""What each party sees, and what happens when a party stops.

Views are recorded at the channel (every message a party receives, with its protocol step).
With fixed seeds the runs are reproducible, so the chi-square and Kolmogorov-Smirnov tests
below are deterministic; their threshold (p > 1e-3) would be missed by a view that depends
on the inputs, as the negative control shows for private compare without the blinding bit.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats

from fedroc.exceptions import ProtocolError
from fedroc.mpc import protocols as pr
from fedroc.mpc import ring
from fedroc.mpc.local import secure_auc_local
from fedroc.mpc.runtime import Step, run_local

ALPHA = 1e-3


class Views:
    def __init__(self) -> None:
        self.items: list[tuple[int, int, str, object]] = []

    def __call__(self, pid: int, peer: int, tag: str, payload: object) -> None:
        self.items.append((pid, peer, tag, payload))

    def tags(self) -> set[str]:
        return {tag for _, _, tag, _ in self.items}

    def helper_compare_rows(self) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """(bit width, proxy 0's vectors, reconstructed vectors) of every private compare."""
        by_tag: dict[str, dict[int, list]] = defaultdict(lambda: defaultdict(list))
        for pid, peer, tag, payload in self.items:
            if pid == 2 and tag.endswith(".pc"):
                by_tag[tag][peer].append(payload[0])
        rows = []
        for tag, peers in by_tag.items():
            k = int(re.search(r"wrap(\d+)", tag).group(1))
            for d0, d1 in zip(peers[0], peers[1], strict=True):
                rows.append((k, d0, (d0.astype(np.int64) + d1) % 67))
        return rows

    def proxy_words(self) -> dict[str, list[np.ndarray]]:
        """Received uint64 words of the proxies, scaled to [0, 1), grouped by kind."""
        out: dict[str, list[np.ndarray]] = defaultdict(list)
        for pid, _peer, tag, payload in self.items:
            if pid == 2:
                continue
            arrays = payload if isinstance(payload, list) else [payload]
            match = re.search(r"wrap(\d+)\.r$", tag)
            for arr in arrays:
                if not isinstance(arr, np.ndarray):
                    continue
                if arr.dtype == np.uint8:
                    out["zp"].append(arr.reshape(-1).astype(np.int64))
                elif match and _peer != 2:
                    k = int(match.group(1))  # d + r mod 2**k, uniform on [0, 2**k)
                    out["masked"].append(arr.reshape(-1).astype(np.float64) / 2.0**k)
                else:
                    out["word"].append(
                        (arr.reshape(-1) >> np.uint64(11)).astype(np.float64) / 2.0**53
                    )
        return out


def run_views(owners, **kwargs) -> Views:
    views = Views()
    secure_auc_local(owners, master_seed=b"views", recorder=views, **kwargs)
    return views


@pytest.fixture(scope="module")
def two_inputs():
    rng = np.random.default_rng(7)
    distinct = [(rng.integers(0, 2, n), rng.normal(size=n)) for n in (40, 40, 40)]
    # All scores equal: every comparison of the sort and of the tie detection comes out
    # the same, so any unblinded comparison would show.
    equal = [(rng.integers(0, 2, n), np.full(n, 0.5)) for n in (40, 40, 40)]
    return run_views(distinct), run_views(equal)


def _hits(rows):
    return np.concatenate([(full == 0).any(axis=1) for _, _, full in rows])


def test_helper_sees_blinded_compare_vectors(two_inputs):
    for views in two_inputs:
        rows = views.helper_compare_rows()
        assert sum(full.shape[0] for _, _, full in rows) > 1000
        zeros = np.concatenate([(full == 0).sum(axis=1) for _, _, full in rows])
        assert zeros.max() <= 1
        hits = _hits(rows)
        # Blinded: a uniform bit per comparison, whatever the inputs.
        assert stats.binomtest(int(hits.sum()), hits.size).pvalue > ALPHA
        # Where the zero is: uniform over the 63 positions (the rows are rotated).
        pos = np.concatenate(
            [
                np.argmax(full == 0, axis=1)[(full == 0).any(axis=1)]
                for k, _, full in rows
                if k == 63
            ]
        )
        assert stats.chisquare(np.bincount(pos, minlength=63)).pvalue > ALPHA
        # Everything else uniform over Z_67*, and each proxy's part uniform over Z_67.
        nonzero = np.concatenate([full[full != 0] for _, _, full in rows])
        assert stats.chisquare(np.bincount(nonzero, minlength=67)[1:]).pvalue > ALPHA
        part = np.concatenate([d0.reshape(-1) for _, d0, _ in rows])
        assert stats.chisquare(np.bincount(part, minlength=67)).pvalue > ALPHA


def test_helper_view_does_not_depend_on_the_inputs(two_inputs):
    a, b = (_hits(v.helper_compare_rows()) for v in two_inputs)
    table = [[a.sum(), a.size - a.sum()], [b.sum(), b.size - b.sum()]]
    assert stats.chi2_contingency(table).pvalue > ALPHA
    va, vb = (
        np.concatenate([full[full != 0] for _, _, full in v.helper_compare_rows()])
        for v in two_inputs
    )
    counts = [np.bincount(va, minlength=67)[1:], np.bincount(vb, minlength=67)[1:]]
    assert stats.chi2_contingency(counts).pvalue > ALPHA


def test_negative_control_without_blinding_bit_is_detected():
    """Private compare with beta fixed to 0 on equal inputs: the helper would see results."""
    m, k = 2000, 63
    rng = np.random.default_rng(1)
    r = ring.u64(rng.integers(0, 2**62, m))
    y = r.copy()  # every comparison has the same result
    bits = ring.bits_msb_first(r, k).astype(np.int64)
    s0 = rng.integers(0, 67, (m, k))
    s = rng.integers(1, 67, (m, k)).astype(np.uint8)
    shift = rng.integers(0, k, m)
    beta = np.zeros(m, np.uint8)
    d = [
        pr.private_compare_vectors(j, sh.astype(np.uint8), y, beta, s, shift, k, None)
        for j, sh in ((0, s0), (1, (bits - s0) % 67))
    ]
    hits = ((d[0].astype(np.int64) + d[1]) % 67 == 0).any(axis=1)
    assert stats.binomtest(int(hits.sum()), m).pvalue < 1e-6


def test_proxies_see_uniform_values(two_inputs):
    for views in two_inputs:
        words = views.proxy_words()
        for kind in ("word", "masked"):
            values = np.concatenate(words[kind])
            assert values.size > 1000
            assert stats.kstest(values, "uniform").pvalue > ALPHA, kind
        zp = np.concatenate(words["zp"])
        assert stats.chisquare(np.bincount(zp, minlength=67)).pvalue > ALPHA
    a, b = (v.proxy_words() for v in two_inputs)
    for kind in ("word", "masked"):
        assert stats.ks_2samp(np.concatenate(a[kind]), np.concatenate(b[kind])).pvalue > ALPHA


def test_no_comparison_is_opened_in_oblivious_mode(two_inputs):
    for views in two_inputs:
        tags = views.tags()
        assert not any("open" in t or "ctl" in t for t in tags)
        # Proxies hear only masked values, Beaver openings and the helper's dealings.
        for pid, _peer, tag, _ in views.items:
            if pid < 2:
                assert re.search(r"(wrap\d+\.(r|out)|swap|mul|scan|labels|squares|pp|mask|both|var\.\w+)$", tag), tag
    # The paper's merge opens comparisons; the instrumentation sees them.
    rng = np.random.default_rng(3)
    delta = run_views(
        [(rng.integers(0, 2, 12), rng.normal(size=12)) for _ in range(2)], sort="delta", delta=3
    )
    opened = [p for pid, _, tag, p in delta.items if tag == "dm.open" and pid < 2]
    assert opened and all(a.size == 1 for a in opened)


# -- a party that stops ----------------------------------------------------------------------


def test_a_party_that_dies_stops_the_others_quickly():
    rng = np.random.default_rng(5)
    owners = [(rng.integers(0, 2, 30), rng.normal(size=30)) for _ in range(2)]
    start = time.monotonic()
    with pytest.raises(ProtocolError, match="helper"):
        secure_auc_local(owners, timeout=30.0, die_after_rounds={2: 12})
    assert time.monotonic() - start < 5.0  # not the 30 s timeout: the others are told


def test_a_silent_party_times_out():
    def proxy(p):
        got = yield Step({2: np.zeros(1, np.uint64)}, (2,), "x")
        return got

    def silent(p):
        time.sleep(1.0)
        got = yield Step({}, (0, 1), "x")
        return got

    start = time.monotonic()
    with pytest.raises(ProtocolError, match="no message from helper within 0.3 s"):
        run_local([proxy, proxy, silent], timeout=0.3)
    assert time.monotonic() - start < 3.0
