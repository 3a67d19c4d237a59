"""Options that several commands declare alike, declared once (``Annotated`` aliases).

A command gives its own default: ``label: LabelOption = "label"``. Imported by
``fedroc --help``: typer only, nothing heavy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

MaxFprOption = Annotated[
    float | None,
    typer.Option(help="Partial AUC up to this false positive rate (McClish-standardised)."),
]
AtSpecificityOption = Annotated[
    list[float] | None,
    typer.Option(
        metavar="FLOAT", help="Operating point: best sensitivity at this specificity; repeatable."
    ),
]
AtSensitivityOption = Annotated[
    list[float] | None,
    typer.Option(
        metavar="FLOAT", help="Operating point: best specificity at this sensitivity; repeatable."
    ),
]
# metavar "": typer >= 0.21 (which `pip install fedroc` gets; flwr pins 0.20) shows a flag's
# type, "--json <bool>", and users typed "--json true".
YoudenOption = Annotated[
    bool, typer.Option("--youden", metavar="", help="Operating point: Youden's threshold.")
]
JsonOption = Annotated[bool, typer.Option("--json", metavar="", help="Print one JSON object.")]
LabelOption = Annotated[str, typer.Option(help="Label column (binary).")]
ScoreOption = Annotated[str, typer.Option(help="Score column (higher = more likely positive).")]
PosLabelOption = Annotated[
    str | None, typer.Option(help="Label value of the positive class (default 1).")
]
CompareScoreOption = Annotated[
    str | None,
    typer.Option(
        help="A second model's score column of the same rows: the paired comparison "
        "(AUC of --score minus AUC of this, paired DeLong), its CI and p-value."
    ),
]
MinCountOption = Annotated[
    int, typer.Option(help="Disclosure policy: minimum rows per released aggregate (q).")
]


def _confidence_level(value: float) -> float:
    # Checked here so that the message names --confidence, not the API's confidence_level.
    if not 0.0 < value < 1.0:
        raise typer.BadParameter(f"must lie strictly between 0 and 1 (e.g. 0.95); got {value:g}")
    return value


ConfidenceOption = Annotated[
    float,
    typer.Option(help="Confidence level of the intervals, in (0, 1).", callback=_confidence_level),
]
CalibrationBinsOption = Annotated[int, typer.Option(help="Calibration bins.", min=1)]
ClusterFileOption = Annotated[Path, typer.Option(help="Cluster file of the running parties.")]
RootCertificatesOption = Annotated[
    Path | None, typer.Option(help="CA certificate of the SuperLink (PEM).")
]
