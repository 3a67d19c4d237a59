"""``fedroc metrics``: pooled reference metrics of one file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fedroc.cli._common import coerce_pos_label, emit_json, kv_table, out

if TYPE_CHECKING:
    from fedroc.data import SiteData


def metrics_dict(data: SiteData, confidence: float) -> dict[str, Any]:
    import numpy as np

    from fedroc.metrics import average_precision, brier_score, delong, pr_auc

    y, s = data.label, data.score
    res = delong(y, s, confidence_level=confidence)
    is_prob = bool(np.all((s >= 0) & (s <= 1)))
    two_classes = 0 < data.n_pos < data.n
    return {
        "n": data.n,
        "n_pos": data.n_pos,
        "n_neg": data.n_neg,
        "auc": res.auc,
        "auc_se": res.se,
        "auc_ci_logit": list(res.confidence_interval(method="logit")),
        "auc_ci_wald": list(res.confidence_interval(method="wald")),
        "average_precision": average_precision(y, s) if data.n_pos else None,
        "pr_auc": pr_auc(y, s) if two_classes else None,
        "brier": brier_score(y, s) if is_prob else None,
    }


def metrics(
    data: Annotated[Path, typer.Argument(help="CSV or Parquet file with labels and scores.")],
    label: Annotated[str, typer.Option(help="Label column (binary).")] = "label",
    score: Annotated[str, typer.Option(help="Score column (higher = more likely positive).")] = (
        "score"
    ),
    pos_label: Annotated[
        str | None, typer.Option(help="Label value of the positive class (default 1).")
    ] = None,
    confidence: Annotated[float, typer.Option(help="Confidence level of the intervals.")] = 0.95,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """AUC with DeLong CIs, average precision, PR-AUC and Brier score of one file."""
    from fedroc.data import Columns, SiteData, load_table

    frame = load_table(data)
    site = SiteData.from_frame(
        frame,
        Columns(label, score),
        pos_label=coerce_pos_label(pos_label),
        source=f"file {str(data)!r}",
    )
    result = metrics_dict(site, confidence)
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
                (f"{level} CI, logit (paper 1 eq. 3)", result["auc_ci_logit"]),
                (f"{level} CI, Wald", result["auc_ci_wald"]),
                ("average precision", result["average_precision"]),
                ("PR-AUC (trapezoids)", result["pr_auc"]),
                ("Brier score", result["brier"]),
            ],
        )
    )
