"""Paper 1's figures, reproduced: ``fedroc figures --paper 1 --out DIR``.

- Figure 3: densities of the empirical and the (pooled) ROC-GLM AUC by data size.
- Figure 4: MAE of the distributed ROC-GLM AUC against the empirical AUC per AUC bin, for
  every (sensitivity, epsilon, delta) of section 5.3.1; blue where MAE <= 0.01.
- Figure 5: the same for the CI error ``|ci_l - ci~_l| + |ci_r - ci~_r|``.
- Figure 6: the distributed ROC-GLM curve of the GBSG2 use case (section 6.2).
- Figure 7: the distributed calibration curve and each site's (section 6.3).
- Figure 8: the ROC-GLM curve beside the empirical one, and the pooled calibration curve
  beside the distributed one (section 6.4).

Figures 3-5 run the simulation of section 5 (:mod:`.rocglm_simulation`; ``quick`` uses a few
data sets instead of the paper's 10000). Figures 6-8 run the GBSG2 use case
(:mod:`.gbsg2`), which needs the ``examples`` extra (scikit-survival).
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from fedroc._plotting import new_figure, save_figure
from fedroc.exceptions import FedrocError, FedrocWarning, InputError, warn_user
from fedroc.experiments.rocglm_simulation import (
    BIN_EDGES,
    DELTAS,
    EPSILONS,
    PAPER_THRESHOLD,
    SENSITIVITIES,
    overall_mae,
    settings_grid,
    simulate_paper_data,
)
from fedroc.figures import paper_figure

__all__: list[str] = []

_COLORS = {"ok": "#3b6fb6", "bad": "#d0463b", "none": "#e4e4e4"}


@functools.lru_cache(maxsize=4)
def _grid(quick: bool, seed: int) -> Any:
    rng = np.random.default_rng([seed, 2022])
    datasets = [simulate_paper_data(rng) for _ in range(6 if quick else 1000)]
    return settings_grid(datasets, rng)


def draw_settings_grid(frame: Any, path: Path, column: str, what: str, figure: str) -> Path:
    """One panel per sensitivity, one cell per (epsilon, delta), one strip per AUC bin."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Patch, Rectangle

    nb = len(BIN_EDGES) - 1
    overall = overall_mae(frame, column)
    fig = new_figure((4.0 * len(SENSITIVITIES), 4.6))
    axes = fig.subplots(1, len(SENSITIVITIES))
    for ax, sens in zip(axes, SENSITIVITIES, strict=True):
        sub = frame[frame["sensitivity"] == sens]
        cells = []
        for i, delta in enumerate(DELTAS):
            for j, eps in enumerate(EPSILONS):
                cell = sub[(sub["epsilon"] == eps) & (sub["delta"] == delta)]
                values = cell[column].to_numpy()
                width = 0.9 / nb
                for k in range(nb):
                    v = values[k]
                    key = "none" if np.isnan(v) else ("bad" if v > PAPER_THRESHOLD else "ok")
                    cells.append(
                        Rectangle((j + 0.05 + k * width, i + 0.05), width, 0.9, color=_COLORS[key])
                    )
                ax.text(j + 0.5, i + 0.5, f"{overall[(sens, eps, delta)]:.3f}", ha="center",
                        va="center", fontsize=7, color="white")  # fmt: skip
        # One collection of the 500 strips of a panel: as separate patches, laying them out
        # and drawing them took most of the figure's time (25 s of paper 1's quick figures).
        ax.add_collection(PatchCollection(cells, match_original=True))
        ax.set_xlim(0, len(EPSILONS))
        ax.set_ylim(0, len(DELTAS))
        ax.set_xticks(np.arange(len(EPSILONS)) + 0.5, [f"{e:g}" for e in EPSILONS])
        ax.set_yticks(np.arange(len(DELTAS)) + 0.5, [f"{d:g}" for d in DELTAS])
        ax.set_xlabel("epsilon")
        ax.set_ylabel("delta")
        ax.set_title(f"l2-sensitivity {sens:g}")
    handles = [
        Patch(color=_COLORS["ok"], label=f"{what} <= {PAPER_THRESHOLD}"),
        Patch(color=_COLORS["bad"], label=f"{what} > {PAPER_THRESHOLD}"),
        Patch(color=_COLORS["none"], label="no data set in the bin"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=9)
    fig.suptitle(
        f"Paper 1, Figure {figure}: {what} of the distributed ROC-GLM (5 sites) per empirical "
        "AUC bin (strips: bins 0.5 -> 1; number: over all data sets)"
    )
    return save_figure(fig, path, rect=(0, 0.06, 1, 1))


@paper_figure(1, "3", "Densities of the empirical and the ROC-GLM AUC by data size")
def figure3(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    from fedroc.methods.rocglm import rocglm
    from fedroc.metrics import roc_auc

    rng = np.random.default_rng([seed, 3])
    groups = {
        "n in [100, 800)": (100, 800),
        "[800, 1600)": (800, 1600),
        "[1600, 2500]": (1600, 2501),
    }
    fig = new_figure((12, 3.8))
    axes = fig.subplots(1, len(groups), sharey=True)
    unconverged = failed = fits = 0
    for ax, (label, (lo, hi)) in zip(axes, groups.items(), strict=True):
        emp, glm = [], []
        for _ in range(20 if quick else 1000):
            y, s = simulate_paper_data(rng, int(rng.integers(lo, hi)))
            emp.append(roc_auc(y, s))
            fits += 1
            try:
                # Separated classes (the paper's right border, AUC 1) do not converge: that
                # is expected here, so one summary below instead of the fit's own warning.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FedrocWarning)
                    fit = rocglm(y, s)
                glm.append(fit.auc)
                unconverged += not fit.converged
            except (FedrocError, FloatingPointError):  # no fit at all: left out
                glm.append(np.nan)
                failed += 1
        bins = np.linspace(0.5, 1.0, 26)
        ax.hist(emp, bins=bins, density=True, alpha=0.5, label="empirical AUC")
        ax.hist(np.asarray(glm)[np.isfinite(glm)], bins=bins, density=True, alpha=0.5,
                label="ROC-GLM AUC")  # fmt: skip
        ax.set(title=label, xlabel="AUC")
    axes[0].set_ylabel("density")
    axes[0].legend(fontsize=8)
    fig.suptitle("Paper 1, Figure 3: empirical and ROC-GLM AUC of the simulated data sets")
    if unconverged or failed:
        left_out = f", {failed} could not be fitted and are left out" if failed else ""
        warn_user(
            f"paper 1 Figure 3: the ROC-GLM did not converge on {unconverged} of {fits} "
            "simulated data sets (classes separated, AUC near 1: the paper's right border); "
            f"they are drawn at their last iteration, as R's glm leaves them{left_out}; "
            "nothing to do",
            FedrocWarning,
        )
    return save_figure(fig, path)


@paper_figure(1, "4", "MAE of the distributed AUC per privacy setting and AUC bin")
def figure4(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    return draw_settings_grid(_grid(quick, seed), path, "mae_auc", "MAE of the AUC", "4")


@paper_figure(1, "5", "Error of the distributed CI per privacy setting and AUC bin")
def figure5(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    return draw_settings_grid(_grid(quick, seed), path, "delta_ci", "CI error", "5")


@functools.lru_cache(maxsize=2)
def _use_case(seed: int) -> Any:
    try:
        from fedroc.experiments.gbsg2 import gbsg2_use_case

        return gbsg2_use_case(seed=seed)
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise InputError(
            "paper 1's figures 6-8 run the GBSG2 use case, which needs scikit-survival: "
            "pip install 'fedroc[examples]'"
        ) from exc


def _roc_axes(ax: Any, case: Any, *, pooled: bool) -> None:
    from fedroc.metrics import roc_curve

    d = case.distributed.without_correction()
    fpr, tpr = d.roc_curve()
    if pooled:
        data = case.pooled_data
        efpr, etpr, _ = roc_curve(data.label, data.score)
        ax.step(efpr, etpr, where="post", color="black", lw=0.8,
                label=f"empirical, pooled (AUC {case.pooled.auc:.3f})")  # fmt: skip
    ax.plot(fpr, tpr, lw=2, label=f"distributed ROC-GLM (AUC {d.auc:.3f})")
    ax.plot([0, 1], [0, 1], ls=":", color="grey", lw=0.8)
    ax.set(xlabel="false positive rate", ylabel="true positive rate", xlim=(0, 1), ylim=(0, 1))
    ax.legend(loc="lower right", fontsize=8)


def _calibration_axes(ax: Any, curves: list[tuple[str, Any, dict[str, Any]]]) -> None:
    ax.plot([0, 1], [0, 1], ls=":", color="grey", lw=0.8)
    for label, curve, style in curves:
        ok = np.isfinite(curve.observed_fraction)
        ax.plot(curve.mean_predicted[ok], curve.observed_fraction[ok], label=label, **style)
    ax.set(xlabel="mean predicted probability", ylabel="observed fraction",
           xlim=(0, 1), ylim=(0, 1))  # fmt: skip
    ax.legend(loc="upper left", fontsize=7)


@paper_figure(1, "6", "ROC curve of the distributed ROC-GLM (GBSG2)", needs="examples")
def figure6(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    fig = new_figure((5, 5))
    ax = fig.add_subplot()
    _roc_axes(ax, _use_case(2024 + seed), pooled=False)
    ax.set_title("Paper 1, Figure 6: distributed ROC-GLM, GBSG2")
    return save_figure(fig, path)


@paper_figure(
    1, "7", "Distributed calibration curve and the sites' curves (GBSG2)", needs="examples"
)
def figure7(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    case = _use_case(2024 + seed)
    curves = [("distributed (secure sums of the sites' bins)", case.calibration_distributed,
               {"lw": 2.5, "color": "black", "marker": "o", "ms": 4})]  # fmt: skip
    curves += [(name, c, {"lw": 0.9, "marker": ".", "alpha": 0.8})
               for name, c in case.calibration_sites.items()]  # fmt: skip
    fig = new_figure((5.5, 5))
    ax = fig.add_subplot()
    _calibration_axes(ax, curves)
    ax.set_title("Paper 1, Figure 7: calibration, all sites and each site's own (10 bins)")
    return save_figure(fig, path)


@paper_figure(
    1, "8", "ROC-GLM beside the empirical ROC; pooled vs distributed calibration", needs="examples"
)
def figure8(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    case = _use_case(2024 + seed)
    fig = new_figure((10, 5))
    left, right = fig.subplots(1, 2)
    _roc_axes(left, case, pooled=True)
    _calibration_axes(
        right,
        [
            ("distributed", case.calibration_distributed, {"lw": 2, "marker": "o", "ms": 4}),
            ("pooled", case.calibration_pooled, {"lw": 0.8, "color": "black"}),
        ],
    )
    fig.suptitle("Paper 1, Figure 8: distributed against pooled (GBSG2)")
    return save_figure(fig, path)
