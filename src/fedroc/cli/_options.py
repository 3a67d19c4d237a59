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
    typer.Option(help="Operating point: best sensitivity at this specificity; repeatable."),
]
AtSensitivityOption = Annotated[
    list[float] | None,
    typer.Option(help="Operating point: best specificity at this sensitivity; repeatable."),
]
YoudenOption = Annotated[
    bool, typer.Option("--youden", help="Operating point: Youden's threshold.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
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
ConfidenceOption = Annotated[float, typer.Option(help="Confidence level of the intervals.")]
CalibrationBinsOption = Annotated[int, typer.Option(help="Calibration bins.")]
ClusterFileOption = Annotated[Path, typer.Option(help="Cluster file of the running parties.")]
RootCertificatesOption = Annotated[
    Path | None, typer.Option(help="CA certificate of the SuperLink (PEM).")
]
