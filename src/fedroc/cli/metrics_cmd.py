"""``fedroc metrics``: pooled reference metrics of one file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fedroc.cli._common import (
    calibration_table,
    coerce_pos_label,
    emit_json,
    err,
    figure_output,
    grid_table,
    kv_table,
    operating_points_table,
    out,
    read_data,
)
from fedroc.cli._options import (
    DEFAULT_CALIBRATION_BINS,
    NO_OPTIONS,
    CompareScoreOption,
    ConfidenceOption,
    JsonOption,
    LabelOption,
    PosLabelOption,
    ScoreOption,
    takes_options,
)
from fedroc.exceptions import InputError, warn_user

if TYPE_CHECKING:
    from fedroc.data import SiteData


def metrics_dict(
    data: SiteData,
    confidence: float,
    *,
    max_fpr: float | None = None,
    at_specificity: list[float] | None = None,
    at_sensitivity: list[float] | None = None,
    youden: bool = False,
    bootstrap: int | None = None,
    seed: int | None = None,
    n_bins: int = DEFAULT_CALIBRATION_BINS,
) -> dict[str, Any]:
    """Compute the JSON object of ``fedroc metrics`` (keys in DESIGN.md) from pooled rows.

    ``average_precision``, ``pr_auc``, ``brier`` and ``calibration`` (``n_bins`` equal-width
    bins, as evaluate's pooled method) are None where the rows do not define them (no
    positive, one class, scores outside [0, 1]); the AUC and its intervals are NaN with one
    class. The optional keyword arguments add ``partial_auc``, ``auc_ci_bootstrap`` and
    ``operating_points``; a second score (``data.score_b``) adds the paired ``comparison``.
    """
    import numpy as np

    from fedroc.methods import interval_caveat
    from fedroc.methods.asks import (
        check_targets,
        comparison_dict,
        not_probabilities_caveat,
        operating_points_from_counts,
    )
    from fedroc.metrics import (
        ScoreCounts,
        average_precision,
        brier_score,
        calibration_curve,
        delong,
        delong_paired,
        pr_auc,
    )

    check_targets(max_fpr, at_specificity or [], at_sensitivity or [])
    y, s = data.label, data.score
    res = delong(y, s, confidence_level=confidence)
    is_prob = bool(np.all((s >= 0) & (s <= 1)))
    two_classes = 0 < data.n_pos < data.n
    extra: dict[str, Any] = {}
    counts = ScoreCounts.from_scores(y, s) if two_classes else None
    if max_fpr is not None:
        extra["max_fpr"] = max_fpr
        extra["partial_auc"] = counts.auc(max_fpr=max_fpr) if counts is not None else None
    if bootstrap is not None:
        if bootstrap < 1:
            raise InputError(f"--bootstrap must be a positive number of samples; got {bootstrap}")
        boot = (
            counts.bootstrap_auc(bootstrap, seed=seed, confidence_level=confidence)
            if counts
            else None
        )
        extra["auc_ci_bootstrap"] = None if boot is None else list(boot.confidence_interval())
        extra["bootstrap"] = {"samples": bootstrap, "seed": seed}
    if (at_specificity or at_sensitivity or youden) and counts is None:
        extra["operating_points"] = None  # asked for: present, and said why it is empty
        warn_user("operating points need both classes; the data has one: none are reported")
    elif (at_specificity or at_sensitivity or youden) and counts is not None:
        extra["operating_points"] = operating_points_from_counts(
            counts,
            at_specificity=at_specificity or [],
            at_sensitivity=at_sensitivity or [],
            youden=youden,
            confidence_level=confidence,
            seed=seed,
        )
    caveat = interval_caveat(res.auc, res.ci) if two_classes else None
    if caveat is not None and res.auc in (0.0, 1.0):
        # Newcombe's score interval takes its variance at each candidate AUC, not at the
        # estimate's 0: defined where the logit interval is not (README, fm.score_ci).
        lo, hi = res.confidence_interval(method="score")
        caveat += (
            f"; the score interval (Newcombe's method 5, tie-aware), which stays defined "
            f"there, is [{lo:.4f}, {hi:.4f}] (the Wald interval is the point {res.auc:g} "
            "for the same reason)"
        )
    caveats = [] if caveat is None else [caveat]
    if not is_prob and data.n:
        caveats.append(not_probabilities_caveat(s))
    if caveats:
        extra["caveats"] = caveats
    if data.score_b is not None:
        extra["comparison"] = comparison_dict(
            delong_paired(y, s, data.score_b, confidence_level=confidence),
            "paired DeLong",
        )
    return {
        "n": data.n,
        "n_pos": data.n_pos,
        "n_neg": data.n_neg,
        "auc": res.auc,
        "auc_se": res.se,
        "auc_ci": list(res.ci),
        "auc_ci_logit": list(res.confidence_interval(method="logit")),
        "auc_ci_wald": list(res.confidence_interval(method="wald")),
        "confidence_level": confidence,
        "average_precision": average_precision(y, s) if data.n_pos else None,
        "pr_auc": pr_auc(y, s) if two_classes else None,
        "brier": brier_score(y, s) if is_prob else None,
        "calibration": calibration_curve(y, s, n_bins=n_bins) if is_prob else None,
        **extra,
    }


@takes_options
def metrics(
    data: Annotated[
        Path, typer.Argument(metavar="DATA", help="CSV or Parquet file with labels and scores.")
    ],
    label: LabelOption = "label",
    score: ScoreOption = "score",
    pos_label: PosLabelOption = None,
    confidence: ConfidenceOption = 0.95,
    compare_score: CompareScoreOption = None,
    asks: Mapping[str, Any] = NO_OPTIONS,  # ASK_OPTIONS: --max-fpr, --at-specificity, ...
    bootstrap: Annotated[
        int | None,
        typer.Option(help="Also a stratified bootstrap CI of the AUC with this many samples."),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="Seed of the bootstraps (reproducible intervals).", min=0)
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            help="Write the ROC and precision-recall curves (PNG, or another suffix "
            "matplotlib writes) here; operating points and --compare-score are drawn too."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """AUC with DeLong CIs, average precision, PR-AUC, Brier score and calibration of one file.

    Partial AUC, operating points, a paired comparison and a figure on request.
    """
    from fedroc._files import check_data_file

    check_data_file(data)  # a mistyped path is named before pandas is loaded
    if plot is not None:
        plot = figure_output("--plot", plot)
    from fedroc.data import Columns

    site = read_data(
        data, Columns(label, score, score_b=compare_score), coerce_pos_label(pos_label)
    )
    if plot is not None and not 0 < site.n_pos < site.n:
        kind = "positive" if site.n_pos == 0 else "negative"
        raise InputError(
            f"--plot draws ROC and precision-recall curves, which need both classes; "
            f"{str(data)!r} has no {kind} row"
        )
    result = metrics_dict(
        site,
        confidence,
        **asks,
        bootstrap=bootstrap,
        seed=seed,
    )
    if plot is not None:
        from fedroc._plotting import save_figure
        from fedroc.report import metrics_figure

        figure = metrics_figure(
            site,
            result,
            names=(score, compare_score),
            confidence_level=confidence,
            title=str(data),
        )
        save_figure(figure, plot)
        err.print(f"figure written to {plot}", highlight=False, markup=False)
    if as_json:
        emit_json(result)
        return
    level = f"{confidence:.0%}"
    out.print(
        kv_table(
            f"Metrics of {data}",
            [
                ("n", result["n"]),
                ("positives", result["n_pos"]),
                ("negatives", result["n_neg"]),
                ("AUC", result["auc"]),
                ("SE (DeLong)", result["auc_se"]),
                (
                    f"{level} CI (default: logit; joined with the score CI below 100 rows "
                    "of a class)",
                    result["auc_ci"],
                ),
                (f"{level} CI, logit (paper 1 eq. 3)", result["auc_ci_logit"]),
                (f"{level} CI, Wald", result["auc_ci_wald"]),
                ("average precision", result["average_precision"]),
                ("PR-AUC (trapezoids)", result["pr_auc"]),
                ("Brier score", result["brier"]),
                *_optional_rows(result, level),
            ],
        )
    )
    comparison = result.get("comparison")
    if comparison is not None:
        out.print(
            grid_table(
                f"Comparison: {score} minus {compare_score} (same rows)",
                ["AUC difference", f"{level} CI", "p-value", f"AUC of {compare_score}"],
                [
                    (
                        comparison["auc_difference"],
                        comparison["ci"],
                        comparison["p_value"],
                        comparison["auc_b"],
                    )
                ],
            )
        )
    if result.get("operating_points"):
        out.print(operating_points_table(result["operating_points"], level))
    if result["calibration"] is not None:  # else a caveat row says why (not probabilities)
        out.print(calibration_table("Calibration", result["calibration"]))


def _optional_rows(result: dict[str, Any], level: str) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    if "partial_auc" in result:
        rows.append((f"partial AUC (FPR <= {result['max_fpr']:g}, McClish)", result["partial_auc"]))
    rows += [("caveat", str(c)) for c in result.get("caveats") or []]
    if "auc_ci_bootstrap" in result:
        boot = result["bootstrap"]
        # "seed None" read as a missing value; unseeded, another run gives another interval
        seeded = "unseeded" if boot["seed"] is None else f"seed {boot['seed']}"
        rows.append(
            (
                f"{level} CI, bootstrap ({boot['samples']} samples, {seeded})",
                result["auc_ci_bootstrap"],
            )
        )
    return rows
