"""The small, seeded version of scripts/rocglm_interval_diagnosis.py (its tables:
scripts/results/rocglm_interval_diagnosis_rare_*.md).

The study had no test. Since the bagged deconvolution caches its fits by their inputs
(``m=None`` among them, not the bin count ``default_bins`` gives), its ``--bins 41`` rows
reused the fits of the default-bin rows before them: the two rows came out identical.
"""

from __future__ import annotations

import pytest
from _scripts import load_script


def _rows(text: str) -> dict[str, list[str]]:
    lines = [line for line in text.splitlines() if line.startswith("| paper")]
    return {line.split("|")[2].strip(): line.split("|")[4:-1] for line in lines}


def test_the_forced_bins_row_is_fitted_with_its_own_bins(tmp_path):
    study = load_script("rocglm_interval_diagnosis.py", "fedroc_rocglm_interval_diagnosis_script")
    argv = ["--reps", "2", "--setting", "paper-0.03", "--bins", "0", "41", "--out", str(tmp_path)]
    study.main(argv)
    rows = _rows((tmp_path / "rocglm_interval_diagnosis_rare_5000.md").read_text())
    assert set(rows) == {"default", "41"}
    assert rows["default"][0].strip() == rows["41"][0].strip() == "2"  # two runs each
    # The same rows and noise, 41 bins instead of the default 14: another fit, another AUC.
    assert rows["default"][2] != rows["41"][2]
    assert study._deconvolution._BAGGED == {}  # nothing of the forced bins is left behind


def test_runs_the_sites_all_refuse_end_in_one_line(tmp_path):
    study = load_script("rocglm_interval_diagnosis.py", "fedroc_rocglm_interval_diagnosis_script")
    # 300 rows of the rare design: sites with fewer than 5 positives refuse every run.
    argv = ["--n", "300", "--reps", "2", "--setting", "default", "--out", str(tmp_path)]
    with pytest.raises(SystemExit, match=r"0 of 2 runs gave a result \(--design rare --n 300"):
        study.main(argv)
