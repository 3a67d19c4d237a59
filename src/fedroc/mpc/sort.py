"""Merging the data owners' sorted lists into one list sorted by score, descending.

Each data owner sorts its own (score key, label) list before sharing it; the proxies merge
the lists pairwise over a tree. Two ways:

* :func:`oblivious_sort` (the default): Batcher's bitonic merge. List ``A`` followed by
  list ``B`` reversed is bitonic; ``log2 N`` layers of compare-exchange sort it. The
  network depends only on the public list lengths, so no comparison result is opened to
  anyone: each compare-exchange is a secret comparison (:func:`~fedroc.mpc.protocols.key_ge`)
  and a secret swap (one multiplication). Padding to a power of two uses virtual
  ``-inf`` entries whose comparisons have known outcomes, so they cost nothing. All merges
  of one tree level run side by side: ``sum over levels of log2(N)`` layers of 4 rounds.
* :func:`delta_sort`: the paper's private merge with its ``delta`` parameter, kept for
  fidelity and comparison. Aligned pairs of the two lists are compared and swapped
  secretly ("shuffle"), the top of the first list is moved out, then up to ``delta - 1``
  further heads are moved by comparisons **opened to both proxies**. Its cost is quadratic
  and the number of comparisons of each step (which the helper must be told) follows the
  opened results, so in this mode the proxies learn part of the merge pattern, as in the
  paper, and the helper learns the list lengths along the way.

Lists are arrays of *slots* (rows of the record array); merging permutes slots, and a
compare-exchange on slots ``(hi, lo)`` leaves the larger record in ``hi``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fedroc.exceptions import ProtocolError
from fedroc.mpc.protocols import key_ge, mul_sf, open_to_proxies
from fedroc.mpc.ring import U64, UArray
from fedroc.mpc.runtime import HELPER, Party, Program, Step, idle

__all__ = ["SortPlan", "bitonic_plan", "compare_exchange", "delta_sort", "oblivious_sort"]

IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class SortPlan:
    """The public comparator network: layers of slot pairs and the final slot order."""

    layers: list[tuple[IntArray, IntArray]]
    order: IntArray

    @property
    def comparisons(self) -> int:
        """Number of compare-exchange operations in the network."""
        return sum(int(hi.size) for hi, _ in self.layers)


def _owner_lists(sizes: list[int]) -> list[IntArray]:
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    return [np.arange(s, s + n, dtype=np.int64) for s, n in zip(starts, sizes, strict=True) if n]


def _pair_lists(lists: list[IntArray]) -> tuple[list[tuple[IntArray, IntArray]], list[IntArray]]:
    """Pair the lists for one tree level: largest with next largest; an odd one waits."""
    ranked = sorted(lists, key=lambda a: -a.size)
    pairs = [(ranked[i], ranked[i + 1]) for i in range(0, len(ranked) - 1, 2)]
    rest = [ranked[-1]] if len(ranked) % 2 else []
    return pairs, rest


def _bitonic_merge_stages(
    a: IntArray, b: IntArray
) -> tuple[list[tuple[IntArray, IntArray]], IntArray]:
    """Stages of the bitonic merge of two descending lists of slots (``-1`` = virtual)."""
    total = a.size + b.size
    size = 1 << max(1, int(total - 1).bit_length())
    vmap = np.full(size, -1, dtype=np.int64)
    vmap[: a.size] = a
    vmap[size - b.size :] = b[::-1]
    stages = []
    stride = size // 2
    while stride >= 1:
        v = np.arange(size, dtype=np.int64)
        v = v[(v // stride) % 2 == 0]
        w = v + stride
        hi, lo = vmap[v], vmap[w]
        both = (hi >= 0) & (lo >= 0)
        stages.append((hi[both], lo[both]))
        # A virtual -inf at the upper position loses to any real entry: relabel, no data moves.
        move = (hi < 0) & (lo >= 0)
        vmap[v[move]] = lo[move]
        vmap[w[move]] = -1
        stride //= 2
    merged = vmap[:total]
    if (merged < 0).any():  # pragma: no cover - a property of the network
        raise ProtocolError("bitonic merge plan lost an element")
    return stages, merged


def bitonic_plan(sizes: list[int]) -> SortPlan:
    """Plan the oblivious merge network for owners' lists of the given lengths."""
    lists = _owner_lists(list(sizes))
    layers: list[tuple[IntArray, IntArray]] = []
    while len(lists) > 1:
        pairs, rest = _pair_lists(lists)
        merged_lists = []
        level: list[list[tuple[IntArray, IntArray]]] = []
        for a, b in pairs:
            stages, merged = _bitonic_merge_stages(a, b)
            level.append(stages)
            merged_lists.append(merged)
        for t in range(max(len(s) for s in level)):
            his = [s[t][0] for s in level if t < len(s)]
            los = [s[t][1] for s in level if t < len(s)]
            hi, lo = np.concatenate(his), np.concatenate(los)
            if hi.size:
                layers.append((hi, lo))
        lists = merged_lists + rest
    order = lists[0] if lists else np.zeros(0, dtype=np.int64)
    return SortPlan(layers, order)


def compare_exchange(p: Party, rec: UArray, hi: IntArray, lo: IntArray, tag: str = "cx") -> Program:
    """Secretly put the record with the larger key into slot ``hi`` (4 rounds)."""
    x, y = rec[hi], rec[lo]
    ge = yield from key_ge(p, x[:, 0], x[:, 1], y[:, 0], y[:, 1], tag + ".cmp")
    z = yield from mul_sf(p, ge, x - y, tag + ".swap")
    out = rec.copy()
    out[hi] = y + z
    out[lo] = x - z
    return out


def oblivious_sort(p: Party, rec: UArray, plan: SortPlan) -> Program:
    """Sort secret records (rows ``[h, l, label]``) by descending key; nothing is opened."""
    for hi, lo in plan.layers:
        rec = yield from compare_exchange(p, rec, hi, lo)
    return rec[plan.order]


# -- the paper's merge with delta ----------------------------------------------------------


def _largest_odd_at_most(n: int) -> int:
    return n if n % 2 else max(1, n - 1)


def delta_sort(p: Party, rec: UArray, sizes: list[int], delta: int) -> Program:
    """PpAURORA's private merge (Section 5), merging the owners' lists pairwise over a tree."""
    if delta < 1 or delta % 2 == 0:
        raise ProtocolError(f"delta must be a positive odd number; got {delta}")
    lists = _owner_lists(list(sizes))
    rec = rec.copy()
    while len(lists) > 1:
        pairs, rest = _pair_lists(lists)
        merged_lists = []
        for a, b in pairs:
            rec, merged = yield from _delta_merge(p, rec, a, b, delta)
            merged_lists.append(merged)
        lists = merged_lists + rest
    order = lists[0] if lists else np.zeros(0, dtype=np.int64)
    return rec[order]


def _delta_merge(p: Party, rec: UArray, a: IntArray, b: IntArray, delta: int) -> Program:
    if p.is_helper:
        # The helper only deals randomness: it is told what comes next.
        while True:
            got = yield Step({}, (0,), "ctl")
            kind, m = got[0]
            if kind == "done":
                return rec, np.concatenate([a, b])
            zeros = np.zeros(m, dtype=np.uint64)
            yield from key_ge(p, zeros, zeros, zeros, zeros, "dm.cmp")
            if kind == "shuffle":
                yield from mul_sf(p, zeros, np.zeros((m, 3), dtype=np.uint64), "dm.swap")
            else:
                yield idle("dm.open")

    def tell(kind: str, m: int) -> Step:
        return Step({HELPER: [kind, m]} if p.pid == 0 else {}, (), "ctl")

    l1, l2 = list(a), list(b)
    out: list[int] = []
    if len(l1) < len(l2):
        l1, l2 = l2, l1
    step = min(delta, _largest_odd_at_most(len(l2)))
    while l1:
        if not l2:
            break
        if len(l1) < len(l2):
            l1, l2 = l2, l1
        m = len(l2)
        yield tell("shuffle", m)
        hi = np.asarray(l1[:m], dtype=np.int64)
        lo = np.asarray(l2[:m], dtype=np.int64)
        rec = yield from compare_exchange(p, rec, hi, lo, "dm")
        out.append(l1.pop(0))
        for _ in range(step - 1):
            if not l1 or not l2:
                break
            yield tell("select", 1)
            x, y = rec[[l1[0]]], rec[[l2[0]]]
            ge = yield from key_ge(p, x[:, 0], x[:, 1], y[:, 0], y[:, 1], "dm.cmp")
            opened = yield from open_to_proxies(p, ge, "dm.open")
            out.append(l1.pop(0) if int(opened[0] & U64(1)) else l2.pop(0))
        if l2:
            step = min(step, _largest_odd_at_most(len(l2)))
    out.extend(l1)
    out.extend(l2)
    yield tell("done", 0)
    return rec, np.asarray(out, dtype=np.int64)
