"""``fedroc clustered``: population and personalized AUCs of one clustered file (paper 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedroc.cli._common import coerce_pos_label, emit_json, err, kv_table, out


def clustered(
    data: Annotated[
        Path, typer.Argument(help="CSV or Parquet file with labels, scores, clusters.")
    ],
    cluster: Annotated[str, typer.Option(help="Cluster id column (patient, reader, site).")],
    label: Annotated[str, typer.Option(help="Label column (binary).")] = "label",
    score: Annotated[str, typer.Option(help="Score column (higher = more likely positive).")] = (
        "score"
    ),
    pos_label: Annotated[
        str | None, typer.Option(help="Label value of the positive class (default 1).")
    ] = None,
    confidence: Annotated[float, typer.Option(help="Confidence level of the intervals.")] = 0.95,
    pair_correction: Annotated[
        bool,
        typer.Option(
            help="Population AUC as Theorem 5's U-statistic, eq. 5 times I/(I-1) (default); "
            "--no-pair-correction gives eq. 5 as printed."
        ),
    ] = True,
    plot: Annotated[
        Path | None, typer.Option(help="Write the confidence-ellipse figure (PNG) here.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Population and personalized AUCs with their joint CI and equality test (paper 3)."""
    from fedroc.clustered import clustered_auc
    from fedroc.data import Columns, SiteData, load_table

    frame = load_table(data)
    site = SiteData.from_frame(
        frame,
        Columns(label, score, cluster),
        pos_label=coerce_pos_label(pos_label),
        source=f"file {str(data)!r}",
    )
    assert site.cluster is not None
    result = clustered_auc(
        site.label,
        site.score,
        site.cluster,
        confidence_level=confidence,
        pair_correction=pair_correction,
    )
    if plot is not None:
        result.plot(str(plot), levels=tuple(sorted({confidence, 0.99})))
        err.print(f"ellipse plot written to {plot}")
    if as_json:
        emit_json(result.to_dict())
        return
    level = f"{result.confidence_level:.0%}"
    z_less = result.equality_test("less")[1]
    z_greater = result.equality_test("greater")[1]
    out.print(
        kv_table(
            f"Clustered AUCs of {data}",
            [
                ("population AUC (theta12)", result.population_auc),
                ("  SE", result.population_se),
                (f"  {level} CI (Wald)", result.population_ci),
                ("personalized AUC (theta11)", result.personalized_auc),
                ("  SE", result.personalized_se),
                (f"  {level} CI (Wald)", result.personalized_ci),
                ("correlation of the two estimates", result.correlation),
                ("H0 theta12 = theta11: z", result.equality_z),
                ("  p two-sided", result.equality_p),
                ("  p (H1 theta12 < theta11)", z_less),
                ("  p (H1 theta12 > theta11)", z_greater),
                ("Obuchowski AUC (eq. 7)", result.obuchowski_auc),
                ("  SE (Obuchowski 1997)", result.obuchowski_se),
                ("clusters used", result.n_clusters),
                ("clusters with one class (excluded)", result.n_excluded),
                ("controls, cases", f"{result.n_neg}, {result.n_pos}"),
                ("theta12 estimator", "eq. 5 x I/(I-1)" if pair_correction else "eq. 5"),
            ],
        )
    )
