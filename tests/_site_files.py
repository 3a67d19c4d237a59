"""Site tables the command-line tests write: clustered rows with two scores."""

from __future__ import annotations

import numpy as np
import pandas as pd


def clustered_two_scores(rng: np.random.Generator, clusters: int) -> pd.DataFrame:
    """Rows in clusters of 4: ``label``, ``score`` (with a cluster effect), ``score2``, ``pid``.

    Drawn in this order from ``rng``: the labels, the clusters' effects, then each score's
    noise (a caller that adds columns draws them after).
    """
    pid = np.repeat(np.arange(clusters), 4)
    y = rng.integers(0, 2, pid.size)
    effect = rng.normal(0, 0.5, clusters)[pid]
    s = 1 / (1 + np.exp(-(rng.normal(size=pid.size) + 1.2 * y + effect - 0.5)))
    s2 = 1 / (1 + np.exp(-(rng.normal(size=pid.size) + 0.6 * y - 0.3)))
    return pd.DataFrame({"label": y, "score": s.round(4), "score2": s2.round(4), "pid": pid})
