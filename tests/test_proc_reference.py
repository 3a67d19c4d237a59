"""fedroc.metrics against R's pROC on the same rows.

Provenance: every expected number below was produced by ``scripts/proc_reference.py``
(R 4.2.2 Patched 2022-11-10 r83330, pROC 1.18.0 from Debian 12's r-cran-proc, run through
Rscript; full output in scripts/results/proc_reference.json). The data sets come from the
script's seeded numpy generator and are rebuilt here; their checksum guards against a
change of numpy's streams. Tolerances: 1e-12 for closed-form quantities (pROC and fedroc
compute the same rationals); the bootstrap is compared within Monte-Carlo error (two
independent runs of B = 20000 draws, 4 standard errors of their difference).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from fedroc import metrics as fm

sys.path.insert(0, str(Path(__file__).parents[1] / "scripts"))
from proc_reference import datasets

PROC = {
    "ties": {
        "checksum": 153.7,
        "auc": 0.7017142857142857,
        "delong_var": 0.002386961881824602,
        "delong_ci": (0.6059572192617477, 0.7974713521668235),
        "boot_ci": (0.6017142857142858, 0.7924285714285714),  # set.seed(1), boot.n 20000
        "boot_var": 0.0023734978793053937,  # set.seed(2), boot.n 20000
        "partial_auc_0.1": 0.5774436090225564,
        "partial_auc_0.3": 0.6473389355742297,
        # coords(best, youden): threshold (midpoint), sensitivity, specificity, ppv, npv
        "youden": (0.75, 0.52, 0.8142857142857143, 0.6666666666666666, 0.7037037037037037),
        # roc.test(method="delong", paired=TRUE) of score a against b: AUC b, z, p
        "paired": (0.7152857142857143, -0.2747491395319978, 0.7835089754893996),
    },
    "smooth": {
        "checksum": 385.07900000000006,
        "auc": 0.7716473192104432,
        "delong_var": 0.0007471139503888885,
        "delong_ci": (0.718074868503153, 0.8252197699177333),
        "boot_ci": (0.7168565653371878, 0.8224631871358236),
        "boot_var": 0.0007383633553661189,
        "partial_auc_0.1": 0.6523638922501611,
        "partial_auc_0.3": 0.7031717605963745,
        "youden": (
            1.0434999999999999,
            0.5343511450381679,
            0.8816568047337278,
            0.7777777777777778,
            0.7095238095238096,
        ),
        "paired": (0.7305208003974886, 1.3847728049662917, 0.16612194898813684),
    },
}
DATA = datasets()
B = 20000


@pytest.fixture(params=sorted(PROC))
def case(request):
    name = request.param
    d = DATA[name]
    checksum = float(np.sum(d["a"] * (1 + d["y"])) + np.sum(d["b"]))
    assert checksum == pytest.approx(PROC[name]["checksum"], abs=1e-9), "data changed"
    return d, PROC[name]


def test_closed_forms_equal_proc(case):
    d, ref = case
    y, a, b = d["y"], d["a"], d["b"]
    r = fm.delong(y, a)
    assert r.auc == pytest.approx(ref["auc"], abs=1e-12)
    assert r.variance == pytest.approx(ref["delong_var"], rel=1e-12)
    assert r.confidence_interval(method="wald") == pytest.approx(ref["delong_ci"], abs=1e-12)
    # pROC's partial.auc.correct is McClish's standardisation, as scikit-learn's max_fpr.
    for f in (0.1, 0.3):
        assert fm.partial_auc(y, a, max_fpr=f) == pytest.approx(ref[f"partial_auc_{f}"], abs=1e-12)
    paired = fm.delong_paired(y, a, b)
    auc_b, z, p = ref["paired"]
    assert paired.auc_b == pytest.approx(auc_b, abs=1e-12)
    assert paired.z == pytest.approx(z, abs=1e-10)
    assert paired.p_value == pytest.approx(p, abs=1e-10)


def test_youden_equals_proc(case):
    d, ref = case
    op = fm.youden_threshold(d["y"], d["a"])
    thr, sens, spec, ppv, npv = ref["youden"]
    assert (op.sensitivity, op.specificity, op.ppv, op.npv) == pytest.approx(
        (sens, spec, ppv, npv), abs=1e-12
    )
    # pROC reports the midpoint between two scores; fedroc the lowest score called positive.
    below = d["a"][d["a"] < op.threshold].max()
    assert thr == pytest.approx((below + op.threshold) / 2, abs=1e-12)


def test_stratified_bootstrap_within_monte_carlo_error_of_proc(case):
    d, ref = case
    res = fm.auc_ci(d["y"], d["a"], ci_method="bootstrap", n_bootstraps=B, seed=1)
    sd = res.se
    # Standard error of a bootstrap quantile q from B draws: sqrt(q (1 - q) / B) / density,
    # the density of a near-normal distribution with this SD; the difference of two
    # independent runs has sqrt(2) times that.
    z = stats.norm.ppf(0.975)
    density = stats.norm.pdf(z) / sd
    se_quantile = math.sqrt(0.025 * 0.975 / B) / density
    lo, hi = res.confidence_interval()
    assert lo == pytest.approx(ref["boot_ci"][0], abs=4 * math.sqrt(2) * se_quantile)
    assert hi == pytest.approx(ref["boot_ci"][1], abs=4 * math.sqrt(2) * se_quantile)
    # The bootstrap variance: SE of a sample variance ~ var sqrt(2 / B) per run.
    se_var = ref["boot_var"] * math.sqrt(2 / B)
    assert res.variance == pytest.approx(ref["boot_var"], abs=4 * math.sqrt(2) * se_var)
