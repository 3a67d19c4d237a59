"""Example data: a synthetic multi-site evaluation set generated from a fixed seed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["make_multisite"]


def make_multisite(
    sizes: Sequence[int] = (420, 260, 610, 180, 330),
    *,
    seed: int = 2024,
    names: Sequence[str] | None = None,
) -> dict[str, pd.DataFrame]:
    """Hospitals that each hold a test set scored by one risk model.

    Each patient has three covariates; the true risk follows a logistic model whose
    intercept shifts by site (case mix), and the model's predicted probability uses slightly
    shrunken coefficients without the site shift, so it is well but not perfectly
    calibrated. Columns: ``label`` (0/1), ``score`` (predicted probability), ``patient``.
    """
    rng = np.random.default_rng(seed)
    names = list(names) if names is not None else [f"site{k + 1}" for k in range(len(sizes))]
    frames: dict[str, pd.DataFrame] = {}
    beta = np.array([1.1, 0.8, -0.6])
    for name, n in zip(names, sizes, strict=True):
        x = rng.normal(size=(n, 3))
        shift = rng.normal(0.0, 0.35)
        true_logit = -1.0 + shift + x @ beta
        label = rng.random(n) < 1.0 / (1.0 + np.exp(-true_logit))
        model_logit = -0.9 + x @ (0.9 * beta) + rng.normal(0.0, 0.3, n)
        score = 1.0 / (1.0 + np.exp(-model_logit))
        frames[name] = pd.DataFrame(
            {
                "label": label.astype(int),
                "score": np.round(score, 6),
                "patient": [f"{name}-{i}" for i in range(n)],
            }
        )
    return frames
