"""``fedroc demo``: a small multi-site example, every method beside the pooled reference."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from fedroc.cli._common import (
    MissingExtraError,
    calibration_table,
    check_audit_dir,
    command_line,
    emit_json,
    err,
    grid_table,
    out,
    report_output,
    require_extra,
)
from fedroc.cli._options import JsonOption
from fedroc.exceptions import FedrocError


def run_demo(seed: int, audit_dir: Path) -> dict[str, Any]:
    """Run ``fedroc demo``'s computation: five synthetic sites, every method, the reference.

    Parameters
    ----------
    seed : int
        Seed of the synthetic data and of the methods' statistical randomness.
    audit_dir : Path
        Where the simulated sites write their audit logs and privacy ledgers.

    Returns
    -------
    dict
        ``sites`` (rows per site), ``site_rows``, ``reference`` (the pooled result),
        ``methods`` (one result per private method), ``statistics`` (distributed mean,
        variance and Brier score beside their pooled values), ``calibration``,
        ``pooled_calibration`` and ``use_cases`` (real-data cases whose packages are installed).
    """
    from fedroc.cli.evaluate_cmd import build_federation, show_progress
    from fedroc.data import Columns, SiteData
    from fedroc.datasets import make_multisite
    from fedroc.federation import basic
    from fedroc.methods import (
        evaluate,
        get_method,
        method_names,
        pool_site_data,
        sites_calibration,
    )
    from fedroc.metrics import brier_score, calibration_curve, roc_auc

    frames = make_multisite(seed=seed)
    data = {
        name: SiteData.from_frame(f, Columns("label", "score"), source=f"site {name!r}")
        for name, f in frames.items()
    }
    pooled = pool_site_data(data)
    federation = build_federation(data, min_count=5, audit_dir=audit_dir)
    sizes = {k: v.n for k, v in data.items()}
    reference = evaluate(federation, "pooled", pooled=pooled, site_sizes=sizes)
    # Distributed statistics of paper 1 section 4.1 beside their pooled values. The
    # calibration bins go through secure aggregation, as every method's: a site releases
    # exact binned counts one way for its lifetime, and the histogram method's exact trees
    # are secure (paper 1's clear bins would leave the sites answering no secure tree).
    moments = basic.distributed_variance(federation)
    brier, _ = basic.distributed_brier(federation)
    cal, note = sites_calibration(federation, n_bins=10)
    if cal is None:
        raise FedrocError(f"the demo's sites withheld their calibration curve: {note}")
    rows = []
    refused: dict[str, str] = {}
    for name in method_names():
        if name == "pooled":
            continue
        spec = get_method(name)
        if spec.needs_clusters:  # the demo's patients have one row each
            err.print(f"{name}: skipped, the demo data has no clusters (see fedroc clustered)")
            continue
        err.print(f"running {name} ...")
        try:
            with show_progress(name, federation):  # on a terminal: its round and site
                res = evaluate(federation, name, pooled=pooled, seed=seed, **spec.demo_options)
        except FedrocError as exc:
            # A ledger kept with --audit-dir remembers the last run: a second demo on it
            # meets the sites' limits (one MPC job, the budget). Shown, not the end of the
            # demo: what a ledger does is part of what the demo shows.
            err.print(f"{name}: refused by the sites: {exc}", highlight=False, markup=False)
            refused[name] = str(exc)
            continue
        rows.append(res)
    stats_rows = [
        ("mean score", moments.mean, float(pooled.score.mean())),
        ("variance of score", moments.variance, float(pooled.score.var(ddof=1))),
        ("Brier score", brier, brier_score(pooled.label, pooled.score)),
    ]
    site_rows = [
        {"name": k, "n": v.n, "n_pos": v.n_pos, "auc": roc_auc(v.label, v.score)}
        for k, v in data.items()
    ]
    return {
        "sites": sizes,
        "site_rows": site_rows,
        "reference": reference,
        "methods": rows,
        "refused": refused,
        "statistics": stats_rows,
        "calibration": cal.curve,
        "pooled_calibration": calibration_curve(pooled.label, pooled.score),
        "use_cases": _use_cases(seed),
    }


def _write_report(path: Path, result: dict[str, Any], seed: int) -> Path:
    from fedroc import __version__
    from fedroc.report import Provenance, comparison_report

    prov = Provenance(
        inputs={"data": f"fedroc.datasets.make_multisite(seed={seed}), 5 synthetic sites"},
        columns={"label": "label", "score": "score"},
        options={"methods": ", ".join(["pooled"] + [r.method for r in result["methods"]])},
        seed=seed,
        command=command_line(),
        date=Provenance.now(),
        version=__version__,
    )
    report = comparison_report(
        result["reference"],
        result["methods"],
        provenance=prov,
        site_rows=result["site_rows"],
        seed=seed,
        title="fedroc demo: five synthetic hospitals, every method beside the pooled reference",
    )
    return report.write(path).resolve()


def _use_cases(seed: int) -> dict[str, Any]:
    """Real-data use cases of the papers; skipped when their optional packages are absent."""
    cases: dict[str, Any] = {}
    try:
        require_extra("examples")
    except MissingExtraError as exc:  # the base install: the demo runs without it
        err.print(f"GBSG2 use case skipped: {exc}", highlight=False, markup=False)
        return cases
    from fedroc.experiments.gbsg2 import gbsg2_use_case

    err.print("running the GBSG2 use case (paper 1, section 6) ...")
    cases["gbsg2_rocglm"] = gbsg2_use_case(seed=seed)
    return cases


def _print_use_cases(cases: dict[str, Any]) -> None:
    gbsg2 = cases.get("gbsg2_rocglm")
    if gbsg2 is not None:
        out.print(
            grid_table(
                "Use case: GBSG2 2-year survival forest over 5 sites (paper 1, section 6; "
                f"epsilon {gbsg2.distributed.epsilon:g}, delta {gbsg2.distributed.delta:g})",
                ["quantity", "ROC-GLM (paper)", "ROC-GLM (corrected)", "pooled"],
                gbsg2.rows(),
            )
        )
        out.print(calibration_table("GBSG2 distributed calibration", gbsg2.calibration_distributed))


def _use_cases_json(cases: dict[str, Any]) -> dict[str, Any]:
    gbsg2 = cases.get("gbsg2_rocglm")
    if gbsg2 is None:
        return {}
    return {
        "gbsg2_rocglm": {
            "sites": gbsg2.site_sizes,
            "censored_dropped": gbsg2.n_censored_dropped,
            "sensitivity": gbsg2.sensitivity,
            "rows": [
                {"quantity": q, "rocglm": a, "rocglm_corrected": b, "pooled": c}
                for q, a, b, c in gbsg2.rows()
            ],
            "calibration": gbsg2.calibration_distributed,
            "pooled_calibration": gbsg2.calibration_pooled,
        }
    }


def demo(
    seed: Annotated[int, typer.Option(help="Seed of the data and of the DP noise.", min=0)] = 2024,
    audit_dir: Annotated[
        Path | None, typer.Option(help="Keep the sites' audit logs here (default: temporary).")
    ] = None,
    report: Annotated[
        Path,
        typer.Option(help="Write the HTML report of the demo here (one self-contained file)."),
    ] = Path("fedroc-demo-report.html"),
    as_json: JsonOption = False,
) -> None:
    """Five synthetic hospitals: every method beside the pooled reference, and a report."""
    import numpy as np

    report = report_output("--report", report)
    check_audit_dir(audit_dir)
    with tempfile.TemporaryDirectory() as tmp:
        result = run_demo(seed, audit_dir or Path(tmp))
    ref = result["reference"]
    written = _write_report(report, result, seed)
    err.print(f"report written to {written}", highlight=False, markup=False, soft_wrap=True)
    if as_json:
        from fedroc._results import jsonable

        emit_json(
            {
                "sites": result["sites"],
                "reference": ref.to_dict(),
                "methods": [r.to_dict() for r in result["methods"]],
                "refused": result["refused"],
                "statistics": [
                    {"quantity": q, "distributed": d, "pooled": p}
                    for q, d, p in result["statistics"]
                ],
                "calibration": jsonable(result["calibration"]),
                "pooled_calibration": jsonable(result["pooled_calibration"]),
                "use_cases": _use_cases_json(result["use_cases"]),
            }
        )
        return
    out.print(
        grid_table(f"Sites (synthetic, seed {seed})", ["site", "n"], list(result["sites"].items()))
    )
    method_rows: list[tuple[Any, ...]] = [
        ("pooled (reference)", ref.auc, ref.auc_ci, 0.0, "-", "-")
    ]
    for r in result["methods"]:
        eps = max(r.released.epsilon.values()) if r.released.epsilon else None
        method_rows.append(
            (r.method, r.auc, r.auc_ci, abs(r.auc - ref.auc), r.released.rounds, eps)
        )
    method_rows += [(name, "refused", "-", "-", "-", "-") for name in result["refused"]]
    out.print(
        grid_table(
            "AUC by method",
            ["method", "AUC", "95% CI", "|AUC - pooled|", "rounds", "epsilon"],
            method_rows,
        )
    )
    out.print(
        grid_table(
            "Distributed statistics (paper 1, section 4.1)",
            ["quantity", "distributed", "pooled", "|difference|"],
            [(q, d, p, float(np.abs(d - p))) for q, d, p in result["statistics"]],
        )
    )
    out.print(calibration_table("Secure calibration curve", result["calibration"]))
    out.print(calibration_table("Pooled calibration curve", result["pooled_calibration"]))
    _print_use_cases(result["use_cases"])
