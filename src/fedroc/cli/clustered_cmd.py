"""``fedroc clustered``: population and personalized AUCs of one clustered file (paper 3)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from fedroc.cli._common import (
    coerce_pos_label,
    emit_json,
    err,
    figure_output,
    kv_table,
    out,
    read_data,
)
from fedroc.cli._options import (
    ConfidenceOption,
    JsonOption,
    LabelOption,
    PosLabelOption,
    ScoreOption,
)
from fedroc.exceptions import InputError

_ESTIMATORS = ("joint", "obuchowski")


def clustered(
    data: Annotated[
        Path,
        typer.Argument(metavar="DATA", help="CSV or Parquet file with labels, scores, clusters."),
    ],
    cluster: Annotated[str, typer.Option(help="Cluster id column (patient, reader, site).")],
    label: LabelOption = "label",
    score: ScoreOption = "score",
    pos_label: PosLabelOption = None,
    confidence: ConfidenceOption = 0.95,
    estimator: Annotated[
        str,
        typer.Option(
            help="joint: population and personalized AUCs (clusters need both classes); "
            "obuchowski: Obuchowski's AUC only, which uses clusters holding one class."
        ),
    ] = "joint",
    pair_correction: Annotated[
        bool,
        typer.Option(
            help="Population AUC as Theorem 5's U-statistic, eq. 5 times I/(I-1) (default); "
            "--no-pair-correction gives eq. 5 as printed."
        ),
    ] = True,
    population_estimator: Annotated[
        str | None,
        typer.Option(
            help="corrected (eq. 5 x I/(I-1)), eq5, or between (concordant share of the "
            "pairs of different clusters, always in [0, 1]); overrides --pair-correction. "
            "Default: corrected, or eq5 with --no-pair-correction."
        ),
    ] = None,
    sigma11: Annotated[
        str,
        typer.Option(
            help="Sigma11 divided by I-1 (corollary6, default) or by (I-1)^2/I (authors: "
            "their R code and Table 1)."
        ),
    ] = "corollary6",
    interval: Annotated[
        str,
        typer.Option(
            help="Intervals: t on I-1 degrees of freedom for I clusters on the logit scale "
            "(logit, default), the same with the population AUC's jackknife SE (jackknife), "
            "on the AUC scale (t) or normal (wald, the paper's)."
        ),
    ] = "logit",
    plot: Annotated[
        Path | None, typer.Option(help="Write the confidence-ellipse figure (PNG) here.")
    ] = None,
    rug: Annotated[
        Path | None,
        typer.Option(
            help="Write the rug plot of the clusters (Figure 1's view, PNG) here: a row per "
            "cluster, at most 60 rows (evenly spaced by id), and a row of every cluster."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Estimate population and personalized AUCs, their joint CI and equality test (paper 3)."""
    # Imported here: `fedroc --help` must not load numpy, pandas or matplotlib.
    import numpy as np

    from fedroc.data import Columns
    from fedroc.methods.clustered import (
        INTERVALS,
        POPULATION_ESTIMATORS,
        SIGMA11_DIVISORS,
        ClusteredAUCWarning,
        clustered_auc,
        obuchowski_auc,
    )
    from fedroc.methods.clustered.plots import RUG_MAX_CLUSTERS, rug_figure

    if estimator not in _ESTIMATORS:
        raise InputError(f"--estimator must be one of {list(_ESTIMATORS)}; got {estimator!r}")
    if population_estimator is not None and population_estimator not in POPULATION_ESTIMATORS:
        raise InputError(
            f"--population-estimator must be one of {list(POPULATION_ESTIMATORS)}; "
            f"got {population_estimator!r}"
        )
    if sigma11 not in SIGMA11_DIVISORS:
        raise InputError(f"--sigma11 must be one of {list(SIGMA11_DIVISORS)}; got {sigma11!r}")
    if interval not in INTERVALS:
        raise InputError(f"--interval must be one of {list(INTERVALS)}; got {interval!r}")
    if estimator == "obuchowski":  # these were ignored: exit 0, and no --plot file written
        joint_only = [
            option
            for option, given in (
                ("--plot", plot is not None),
                ("--population-estimator", population_estimator is not None),
                ("--sigma11", sigma11 != "corollary6"),
                ("--no-pair-correction", not pair_correction),
                # The population AUC's jackknife SE: Obuchowski's interval keeps his
                # variance, so this gave the logit interval under the name "jackknife".
                ("--interval jackknife", interval == "jackknife"),
            )
            if given
        ]
        if joint_only:
            raise InputError(
                f"option(s) {', '.join(joint_only)} apply to --estimator joint (population "
                "and personalized AUCs), not --estimator obuchowski (one AUC, no ellipse)"
            )
    plot = None if plot is None else figure_output("--plot", plot)
    rug = None if rug is None else figure_output("--rug", rug)
    site = read_data(data, Columns(label, score, cluster), coerce_pos_label(pos_label))
    assert site.cluster is not None
    if rug is not None:
        # Above RUG_MAX_CLUSTERS rows a rug is unreadable (and 1000 clusters took 5.5 s for a
        # 251-inch figure): it draws that many clusters, evenly spaced by id, and says so.
        # Before, the command refused and printed no estimate at all.
        clusters = len(np.unique(site.cluster))
        rug_figure(site.label, site.score, site.cluster, path=str(rug), sample=True)
        if clusters > RUG_MAX_CLUSTERS:
            err.print(
                f"note: --rug drew {RUG_MAX_CLUSTERS} of the {clusters} clusters of "
                f"{str(data)!r} (evenly spaced by id; the bottom row holds every cluster)",
                highlight=False,
            )
        err.print(f"rug plot written to {rug}")
    # The caveats are part of the result (table and JSON); no second copy as a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClusteredAUCWarning)
        if estimator == "obuchowski":
            obu = obuchowski_auc(
                site.label,
                site.score,
                site.cluster,
                confidence_level=confidence,
                interval=interval,  # type: ignore[arg-type]
            )
            _show(obu, f"Obuchowski's clustered AUC of {data}", as_json)
            return
        result = clustered_auc(
            site.label,
            site.score,
            site.cluster,
            confidence_level=confidence,
            pair_correction=pair_correction,
            population_estimator=population_estimator,  # type: ignore[arg-type]
            sigma11=sigma11,  # type: ignore[arg-type]
            interval=interval,  # type: ignore[arg-type]
        )
    if plot is not None:
        result.plot(str(plot), levels=tuple(sorted({confidence, 0.99})))
        err.print(f"ellipse plot written to {plot}")
    _show(result, f"Clustered AUCs of {data}", as_json)


def _show(result: Any, title: str, as_json: bool) -> None:
    """Print the result as one JSON object, or as its table followed by its caveats and notes."""
    if as_json:
        emit_json(result.to_dict())
        return
    out.print(kv_table(title, result.summary_rows()))
    for message in result.caveats:
        out.print(f"CAVEAT: {message}", highlight=False)
    for message in getattr(result, "notes", ()):
        out.print(f"note: {message}", highlight=False)
