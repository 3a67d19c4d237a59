"""The small, seeded version of scripts/rocglm_bins.py (its table: scripts/results/rocglm_bins.md).

The study had no test. Its 'default' rows are labelled ``default_bins(sd)``: the
deconvolution without ``m`` must fit exactly that many bins, on the same data.
"""

from __future__ import annotations

import numpy as np
from _scripts import load_script


def test_the_default_row_is_the_default_bins_and_the_errors_are_small():
    study = load_script("rocglm_bins.py", "fedroc_rocglm_bins_script")
    for design in ("rare", "smooth"):
        default = study.errors(design, 0.151, 2000, None, 3, seed=5)
        named = study.errors(design, 0.151, 2000, study.default_bins(0.151), 3, seed=5)
        np.testing.assert_array_equal(default, named)
        other = study.errors(design, 0.151, 2000, 41, 3, seed=5)
        assert not np.array_equal(default, other)  # the same data, another fit
        # Deconvolved AUC against the positives' placement in the true negatives.
        assert np.abs(default).max() < 0.03, default
