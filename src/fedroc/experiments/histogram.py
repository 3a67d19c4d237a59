"""Paper 5's figures, reproduced by ``fedroc figures --paper 5 --out DIR``.

The paper draws Figures 1-3 from Adult scored by XGBoost and Figure 4 from the same data;
neither ships with an installed package, so Figures 1-3 use simulated binormal scores and
Figure 4 uses flchain scored by gradient boosting (scikit-survival ships it; simulated
scores when it is not installed), as ``scripts/histogram_experiment.py`` does. Each title
says which data it shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fedroc._plotting import new_figure, save_figure
from fedroc.figures import paper_figure
from fedroc.methods.histogram import (
    approximate_curves,
    count_leaves,
    levels_from_leaves,
    survival_function,
)


def _scores(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    s = 1.0 / (1.0 + np.exp(-(rng.normal(size=n) + 1.5 * y - 0.5)))
    return y, s


@paper_figure(5, "1", "hierarchical histogram of each class (branching 2, height 4)")
def figure1(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    """Draw paper 5's Figure 1: each class's hierarchical histogram (simulated scores)."""
    y, s = _scores(400, seed)
    height = 4
    pos, neg = count_leaves(y, s, 2**height, 0.0, 1.0)
    fig = new_figure((8, 6))
    axes = fig.subplots(height, 1, sharex=True)
    for ax, p, q in zip(axes, levels_from_leaves(pos, 2), levels_from_leaves(neg, 2), strict=True):
        edges = np.linspace(0.0, 1.0, p.size + 1)
        for counts, label in ((q, "negatives"), (p, "positives")):
            ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", alpha=0.5,
                   label=label, edgecolor="k")  # fmt: skip
        ax.set_ylabel(f"level {int(np.log2(p.size))}")
    axes[0].legend(fontsize=7)
    axes[-1].set_xlabel("score")
    fig.suptitle("Paper 5, Figure 1: hierarchical histograms (simulated scores, 400 rows)")
    return save_figure(fig, path)


@paper_figure(5, "2", "class ECDFs reconstructed from Q = 6 quantiles by PCHIP")
def figure2(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    """Draw paper 5's Figure 2: class ECDFs rebuilt from six quantiles by PCHIP."""
    y, s = _scores(2000, seed)
    fractions = np.linspace(0.0, 1.0, 6)
    grid = np.linspace(0.0, 1.0, 501)
    fig = new_figure((6, 4.5))
    ax = fig.add_subplot()
    for cls, name, color in ((y, "positives", "C1"), (~y, "negatives", "C0")):
        scores = np.sort(s[cls])
        ax.step(
            scores,
            np.arange(1, scores.size + 1) / scores.size,
            where="post",
            color=color,
            alpha=0.4,
            label=f"ECDF of the {name}",
        )
        q = np.quantile(scores, fractions)
        ecdf = 1.0 - survival_function(q, fractions, "pchip")(grid)
        ax.plot(grid, ecdf, color=color, label=f"PCHIP through 6 quantiles ({name})")
        ax.plot(q, fractions, "o", color=color)
    ax.set(xlabel="score s", ylabel="Phi(s)")
    ax.legend(fontsize=7)
    ax.set_title("Paper 5, Figure 2: ECDFs from Q = 6 quantiles (simulated)", fontsize=9)
    return save_figure(fig, path)


@paper_figure(5, "3", "ROC and PR curves approximated from the Q = 6 quantile ECDFs")
def figure3(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    """Draw paper 5's Figure 3: ROC and PR curves from the six-quantile ECDFs."""
    from fedroc.metrics import precision_recall_curve, roc_curve

    y, s = _scores(2000, seed)
    fractions = np.linspace(0.0, 1.0, 6)
    curves = approximate_curves(
        np.quantile(s[y], fractions),
        np.quantile(s[~y], fractions),
        fractions,
        int(y.sum()),
        int((~y).sum()),
        0.0,
        1.0,
    )
    fpr, tpr, _ = roc_curve(y, s)
    precision, recall, _ = precision_recall_curve(y, s)
    fig = new_figure((9, 4.2))
    a, b = fig.subplots(1, 2)
    a.plot(fpr, tpr, color="grey", label="empirical")
    a.plot(curves.fpr, curves.tpr, label="from 6 quantiles (PCHIP)")
    a.set(xlabel="FPR F(s)", ylabel="TPR T(s)", title="ROC (eqs. 1-2)")
    b.plot(recall, precision, color="grey", label="empirical")
    b.plot(curves.tpr, curves.precision, label="from 6 quantiles (PCHIP)")
    b.set(xlabel="recall T(s)", ylabel="precision P(s)", title="PR (eq. 3)")
    a.legend(fontsize=7)
    fig.suptitle("Paper 5, Figure 3: curves approximated from ECDFs (simulated)", fontsize=10)
    return save_figure(fig, path)


def _figure4_data(quick: bool, seed: int) -> tuple[pd.DataFrame, str]:
    if not quick:
        try:
            from fedroc.datasets import flchain_scores

            return flchain_scores(), "flchain, gradient boosting"
        except ImportError:
            pass
    y, s = _scores(3000 if quick else 20000, seed)
    return pd.DataFrame({"label": y.astype(int), "score": s}), "simulated binormal scores"


@paper_figure(5, "4", "area error of the ROC and PR curves against Q, SA and distributed DP")
def figure4(path: Path, *, quick: bool = False, seed: int = 0) -> Path:
    """Draw paper 5's Figure 4: ROC and PR area errors against Q, for SA and distributed DP.

    Ten sites, flchain scores when scikit-survival is installed (simulated scores otherwise
    and with ``quick``); ``quick`` also runs fewer Q and one repetition instead of five.
    """
    from fedroc.data import SiteData
    from fedroc.federation import Federation
    from fedroc.methods import evaluate
    from fedroc.privacy import DisclosurePolicy

    frame, data_name = _figure4_data(quick, seed)
    pooled = SiteData.from_arrays(frame["label"], frame["score"])
    qs = [4, 16, 64] if quick else [4, 8, 16, 32, 64, 128, 256, 512, 1024]
    reps = 1 if quick else 5
    settings: list[tuple[str, dict[str, Any]]] = [("SA", {"oversampling": 1})] + [
        (f"DDP eps={e:g}", {"dp_epsilon": e}) for e in (0.1, 0.3, 1.0)
    ]
    errors: dict[str, list[list[float]]] = {name: [] for name, _ in settings}
    for rep in range(reps):
        part = np.random.default_rng([seed, rep]).permutation(len(frame)) % 10
        frames = {f"site{k}": frame[part == k] for k in range(10)}
        for name, options in settings:
            row = []
            for q in qs:
                # A federation per tree: each site binds the tree of its first request.
                fed = Federation.from_frames(
                    frames,
                    policy=DisclosurePolicy(epsilon_limit=float("inf")),
                    noise_seed=seed * 1000 + rep,
                )
                res = evaluate(
                    fed, "histogram", pooled=pooled, quantiles=q, calibration_bins=None, **options
                )
                row.append(
                    (
                        res.extra.get("roc_area_error", np.nan),
                        res.extra.get("pr_area_error", np.nan),
                    )
                )
            errors[name].append(row)  # type: ignore[arg-type]
    fig = new_figure((10, 4.2))
    axes = fig.subplots(1, 2, sharex=True)
    for idx, (ax, title) in enumerate(zip(axes, ("ROC", "PR"), strict=True)):
        ax.plot(qs, 1.0 / np.asarray(qs, float), "k:", label="1/Q")
        for name, _ in settings:
            values = np.asarray(errors[name], dtype=np.float64)[:, :, idx]
            ax.errorbar(
                qs, values.mean(axis=0), yerr=values.std(axis=0), fmt="o-", ms=3, label=name
            )
        ax.set(xscale="log", yscale="log", xlabel="Q", ylabel="area error", title=f"{title} curve")
    axes[1].legend(fontsize=7)
    fig.suptitle(
        f"Paper 5, Figure 4: area error against Q ({data_name}, 10 sites, {reps} repetition(s))",
        fontsize=10,
    )
    return save_figure(fig, path)
