"""Example data: a synthetic multi-site evaluation set generated from a fixed seed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["flchain_scores", "make_multisite"]


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

    Parameters
    ----------
    sizes : sequence of int, default (420, 260, 610, 180, 330)
        Rows of each site, one entry per site.
    seed : int, default 2024
        Seed of the generator: the same seed gives the same tables.
    names : sequence of str, optional
        Site names, as many as ``sizes``; None names them ``site1``, ``site2``, ...

    Returns
    -------
    dict of str to pandas.DataFrame
        One table per site, by name, with columns ``label``, ``score`` (rounded to six
        decimals) and ``patient`` (``"<site>-<i>"``).

    Raises
    ------
    ValueError
        ``names`` and ``sizes`` differ in length.

    Examples
    --------
    >>> sites = make_multisite((30, 20), seed=1)
    >>> list(sites), [len(t) for t in sites.values()], list(sites["site1"].columns)
    (['site1', 'site2'], [30, 20], ['label', 'score', 'patient'])
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


def flchain_scores(*, folds: int = 5, max_iter: int = 200, seed: int = 0) -> pd.DataFrame:
    """Out-of-fold gradient-boosting scores on the ``flchain`` data of scikit-survival.

    ``flchain`` (Dispenzieri et al. 2012; 7874 residents of Olmsted County, Minnesota)
    ships with scikit-survival, so no download is needed. The label is death during
    follow-up (27.5 %); the features are age, sex, sample year, the free light chain
    measurements (kappa, lambda, flc.grp), creatinine and MGUS (the cause of death,
    ``chapter``, is left out: it is known only for the dead). Each row is scored by a
    :class:`~sklearn.ensemble.HistGradientBoostingClassifier` fitted on the other folds.
    Needs the ``examples`` extra (scikit-learn, scikit-survival).

    Parameters
    ----------
    folds : int, default 5
        Folds of the stratified cross-validation (shuffled with ``seed``).
    max_iter : int, default 200
        Boosting iterations of each fitted model.
    seed : int, default 0
        Seed of the folds and of the models.

    Returns
    -------
    pandas.DataFrame
        Columns ``label`` (0/1) and ``score`` (out-of-fold probability), one row per person,
        in the data's order.
    """
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sksurv.datasets import load_flchain

    features, outcome = load_flchain()
    features = features.drop(columns=["chapter"])
    label = np.asarray(outcome["death"], dtype=int)
    model = HistGradientBoostingClassifier(
        max_iter=max_iter, learning_rate=0.05, categorical_features="from_dtype", random_state=seed
    )
    cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
    score = cross_val_predict(model, features, label, cv=cv, method="predict_proba")[:, 1]
    return pd.DataFrame({"label": label, "score": score})
