"""Peer for bench_mpc.py: the exact AUROC (ties counted one half) with MPyC.

Run by the benchmark as ``python benchmarks/mpyc_auc.py -M3 -B PORT DATA.npz``: MPyC starts
parties 1 and 2 as local processes (plain TCP on localhost; MPyC's own transport, no TLS).
Party 0 inputs the pooled keys and labels (MPyC secret-shares them with Shamir's scheme);
the owners' lists are not merged but sorted as a whole with ``np_sort`` (Batcher's network).

Exactness with ties: one sort by ``2 key + label`` puts negatives before positives within
ties, another by ``2 key + 1 - label`` the reverse; run side by side in one network. The
positives' counts of preceding negatives give ``#(pos >= neg)`` and ``#(pos > neg)``, and
AUROC is their mean over ``P N``, divided under MPC (secure fixed point).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
from mpyc.runtime import mpc


async def main() -> None:
    data = np.load(sys.argv[1])
    key = data["key"].astype(object)  # signed 64-bit order-preserving score keys
    y = data["y"].astype(object)
    n = len(y)
    secint = mpc.SecInt(68)
    secfxp = mpc.SecFxp(128, 64)  # MPyC's division needs l = 2 f; 64 bits keep 1e-12
    await mpc.start()
    start = time.perf_counter()
    plain = np.array([[2 * key + y, y], [2 * key + 1 - y, y]], dtype=object)
    shared = mpc.input(secint.array(plain), senders=0)
    ordered = mpc.np_sort(shared, axis=-1, key=lambda a: a[..., 0:1, :])
    labels = ordered[:, 1, :]
    before = mpc.np_cumsum(labels, axis=1) - labels
    negatives_before = np.arange(n) - before
    counts = mpc.np_sum(labels * negatives_before, axis=1)
    pos = mpc.np_sum(labels[0])
    num = counts[0] + counts[1]
    den = 2 * pos * (n - pos)
    auc = mpc.convert(num, secfxp) / mpc.convert(den, secfxp)
    value = await mpc.output(auc)
    seconds = time.perf_counter() - start
    await mpc.shutdown()
    if mpc.pid == 0:
        print(json.dumps({"auc": float(value), "seconds": seconds, "n": n}))


if __name__ == "__main__":
    mpc.run(main())
