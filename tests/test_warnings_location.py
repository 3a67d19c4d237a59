"""fedroc's warnings name the user's line, not a line inside fedroc.

A warning points at the line to change (as scikit-learn's and pandas' do): whichever path
inside fedroc leads to it, ``fedroc.exceptions.warn_user`` skips fedroc's own frames. Before,
each caller counted its depth by hand, and the pooled metrics' one-class warnings pointed
into ``_ranking.py`` and ``_operating.py``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fedroc.exceptions import FedrocWarning, warn_user
from fedroc.methods.clustered import clustered_auc, obuchowski_auc
from fedroc.methods.rocglm import recommended_privacy
from fedroc.metrics import (
    ScoreCounts,
    average_precision,
    roc_auc,
    sensitivity_at_specificity,
    specificity_at_sensitivity,
    youden_threshold,
)

ONE_CLASS = ([1, 1, 1], [0.1, 0.2, 0.3])
_rng = np.random.default_rng(0)
_Y = _rng.integers(0, 2, 60)
_S = _rng.normal(size=60) + _Y
_C = np.arange(60) % 5  # five clusters: both estimators warn that they are too few

CASES = {
    "roc_auc": lambda: roc_auc(*ONE_CLASS),
    "average_precision": lambda: average_precision([0, 0, 0], [0.1, 0.2, 0.3]),
    "sensitivity_at_specificity": lambda: sensitivity_at_specificity(*ONE_CLASS, 0.5),
    "specificity_at_sensitivity": lambda: specificity_at_sensitivity(*ONE_CLASS, 0.5),
    "youden_threshold": lambda: youden_threshold(*ONE_CLASS),
    "ScoreCounts.at_specificity": lambda: ScoreCounts.from_scores(*ONE_CLASS).at_specificity(0.5),
    "obuchowski_auc": lambda: obuchowski_auc(_Y, _S, _C),
    "clustered_auc": lambda: clustered_auc(_Y, _S, _C),
    "recommended_privacy": lambda: recommended_privacy(0.5),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_warning_names_the_callers_line(name):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        CASES[name]()
    assert record, f"{name} gave no warning"
    for w in record:
        assert issubclass(w.category, FedrocWarning)
        assert w.filename == __file__, f"{name}: {w.message} points at {w.filename}:{w.lineno}"


def test_warn_user_outside_fedroc_is_a_plain_warning_at_its_caller():
    with pytest.warns(FedrocWarning, match="plain") as record:
        warn_user("plain")
    assert record[0].filename == __file__
