"""The small, seeded version of scripts/mpc_precision.py (its table:
scripts/results/mpc_precision.md, the reason for the MPC job's 14 opened bits).

The study had no test. Its candidate counts are checked here by brute force: every
``k / (2 P N)`` rounded as the job opens it, for every class count ``P``.
"""

from __future__ import annotations

import sys
from fractions import Fraction

import numpy as np
from _scripts import load_script

from fedroc.mpc.auc import DEFAULT_FRAC_BITS


def _brute_force(v: Fraction, n: int, bits: int, minimum: int) -> list[int]:
    """Every P whose some pair count k, opened at ``bits``, reads ``v``."""
    scale = 2**bits
    found = []
    for p in range(minimum, n - minimum + 1):
        den = 2 * p * (n - p)
        opened = {
            Fraction(int(Fraction(k, den) * scale + Fraction(1, 2)), scale) for k in range(den + 1)
        }
        if v in opened:
            found.append(p)
    return found


def test_the_candidate_class_counts_match_brute_force():
    study = load_script("mpc_precision.py", "fedroc_mpc_precision_script")
    rng = np.random.default_rng(3)
    n = 24
    y = np.r_[np.ones(9, int), np.zeros(n - 9, int)]
    s = np.round(rng.normal(size=n) + 0.8 * y, 1)  # ties across the classes
    u2 = study.twice_pairs(y, s)
    for bits in (4, 8, DEFAULT_FRAC_BITS, 52):
        v = study.opened(u2, 9, n, bits)
        cands = study.consistent(v, n, bits)
        assert cands == _brute_force(v, n, bits, study.MIN_COUNT)
        assert 9 in cands and n - 9 in cands  # the truth and its mirror, always


def test_the_table_at_two_sizes(tmp_path, monkeypatch):
    study = load_script("mpc_precision.py", "fedroc_mpc_precision_script")
    monkeypatch.setattr(study, "SIZES", (60, 200))
    monkeypatch.setattr(sys, "argv", ["mpc_precision.py", "--cases", "4", "--out", str(tmp_path)])
    study.main()
    text = (tmp_path / "mpc_precision.md").read_text()
    assert (
        f"Command: `python scripts/mpc_precision.py --cases 4 --out {tmp_path}` (seed 16, " in text
    )
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in (tmp_path / "mpc_precision.md").read_text().splitlines()
        if line.startswith("| ") and line[2].isdigit()
    ]
    assert len(rows) == 2 * len(study.BITS)
    table = {(int(r[0]), int(r[1])): r for r in rows}
    for n in (60, 200):
        # 8 bits tell nothing: every possible class count stays a candidate.
        assert (
            table[n, 8][3] == table[n, 8][4] == table[n, 8][5] == str(n - 2 * study.MIN_COUNT + 1)
        )
        # Full precision leaves few: the median case is pinned to {P, N} or nearly.
        assert int(table[n, 52][3]) <= 4
