"""``fedroc evaluate``: one method over several sites."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fedroc.cli._common import (
    calibration_table,
    coerce_pos_label,
    emit_json,
    err,
    grid_table,
    kv_table,
    load_site_data,
    out,
    parse_sites,
)
from fedroc.exceptions import InputError

if TYPE_CHECKING:
    from fedroc.data import SiteData
    from fedroc.federation import Federation
    from fedroc.methods import EvaluationResult

# Defaults of the options that a --sites file may also set (see evaluate_command).
DEFAULT_LABEL = "label"
DEFAULT_SCORE = "score"
DEFAULT_MIN_COUNT = 5


def build_federation(
    data: dict[str, SiteData],
    *,
    min_count: int,
    audit_dir: Path | None,
    mpc_owner_keys: Path | None = None,
) -> Federation:
    from fedroc.federation import Federation, Site
    from fedroc.privacy import DisclosurePolicy

    policy = DisclosurePolicy(min_count=min_count)
    sites = [
        Site(
            name, d, policy=policy, audit=None if audit_dir is None else audit_dir / f"{name}.jsonl"
        )
        for name, d in data.items()
    ]
    if mpc_owner_keys is not None:
        # The sites built here are simulated: give each its MPC owner key (owner-NAME.key,
        # as `fedroc mpc certs --owner NAME` writes), registered with the cluster.
        from fedroc.mpc.certs import owner_key_file
        from fedroc.mpc.owner import configure_owner

        for site in sites:
            configure_owner(site, key=mpc_owner_keys / owner_key_file(site.name))
    return Federation.from_sites(sites)


def check_options(method: str, options: dict[str, Any]) -> None:
    """Refuse method options that the chosen method does not take, naming them."""
    from fedroc.methods import get_method

    params = inspect.signature(get_method(method).run).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    wrong = [k for k in options if k not in params]
    if wrong:
        flags = ", ".join("--" + k.replace("_", "-") for k in wrong)
        raise InputError(f"option(s) {flags} do not apply to --method {method}")


def render_result(result: EvaluationResult) -> None:
    out.print(grid_table("Sites", ["site", "n"], [(s["name"], s["n"]) for s in result.sites]))
    level = f"{result.confidence_level:.0%}"
    rows: list[tuple[str, Any]] = [("method", result.method), ("AUC", result.auc)]
    rows.append((f"{level} CI", result.auc_ci))
    for key, value in result.extra.items():
        if key in {"calibration", "calibration_released"}:
            continue
        if key == "caveats":  # plain sentences: one row each
            rows += [("caveat", str(c)) for c in value]
            continue
        if isinstance(value, (int, float, str, tuple)) or value is None:
            rows.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            rows += [(key, v) for v in value]  # caveats and notes, one per row
        elif isinstance(value, list) and not value:
            continue
        elif isinstance(value, list) and len(value) <= 4:
            rows.append((key, tuple(value) if len(value) == 2 else str(value)))
    rel = result.released
    rows.append(("rounds", rel.rounds))
    if rel.bytes_received:
        rows.append(("bytes sent by sites", sum(rel.bytes_received.values())))
    if rel.epsilon:
        rows.append(("epsilon spent (max over sites)", max(rel.epsilon.values())))
    for note in rel.notes:
        rows.append(("released", note))
    out.print(kv_table(f"Evaluation: {result.method}", rows))
    cal = result.extra.get("calibration")
    if cal is not None:
        out.print(calibration_table("Calibration", cal))


def write_report(path: Path, result: EvaluationResult, pooled: SiteData | None) -> None:
    from fedroc.report import Report, calibration_figure, roc_figure

    report = Report(f"fedroc evaluation: {result.method}")
    report.add_table(["site", "n"], [(s["name"], s["n"]) for s in result.sites])
    report.add_table(
        ["quantity", "value"],
        [("AUC", result.auc), ("CI", result.auc_ci)]
        + [(k, v) for k, v in result.extra.items() if isinstance(v, (int, float, str))],
    )
    curves = []
    roc = getattr(result.details, "roc_points", None)
    if callable(roc):
        fpr, tpr = roc()
        curves.append((result.method, fpr, tpr))
    report.add_figure(roc_figure(pooled, curves), "ROC curve")
    cal = result.extra.get("calibration")
    if cal is not None:
        report.add_figure(calibration_figure([(result.method, cal)]), "Calibration curve")
    report.write(path)


def _parse_range(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise InputError(f"--score-range must be LO,HI (two numbers); got {text!r}") from None
    return lo, hi


def _parse_levels(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise InputError(
            f"--score-levels must be numbers separated by commas; got {text!r}"
        ) from None


def _federation_from_file(
    path: Path,
    label: str | None,
    score: str | None,
    pos_label: str | None,
    min_count: int | None,
    audit_dir: Path | None,
    cluster: str | None = None,
) -> Federation:
    """The --sites federation, with the options given on the command line winning."""
    from fedroc.federation import Federation

    columns = {
        "label": label,
        "score": score,
        "pos_label": coerce_pos_label(pos_label),
        "cluster": cluster,
    }
    columns = {k: v for k, v in columns.items() if v is not None}
    policy = {} if min_count is None else {"min_count": min_count}
    given = [f"--{k.replace('_', '-')}" for k in [*columns, *policy]]
    if audit_dir is not None:
        given.append("--audit-dir")
    if given:
        err.print(
            f"{', '.join(given)} given on the command line override {str(path)!r} for every site",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    return Federation.from_toml(path, columns=columns, policy=policy, audit_dir=audit_dir)


def evaluate_command(
    site: Annotated[
        list[str] | None,
        typer.Option("--site", help="A site as NAME=PATH (CSV or Parquet); repeat per site."),
    ] = None,
    sites_file: Annotated[
        Path | None,
        typer.Option(
            "--sites",
            help="TOML file describing the sites instead; --label, --score, --pos-label, "
            "--min-count and --audit-dir given here override it for every site.",
        ),
    ] = None,
    label: Annotated[
        str | None,
        typer.Option(help=f"Label column (default {DEFAULT_LABEL!r}; overrides --sites)."),
    ] = None,
    score: Annotated[
        str | None,
        typer.Option(help=f"Score column (default {DEFAULT_SCORE!r}; overrides --sites)."),
    ] = None,
    pos_label: Annotated[
        str | None, typer.Option(help="Positive label value (default 1; overrides --sites).")
    ] = None,
    method: Annotated[
        str, typer.Option(help="pooled, rocglm, histogram, mpc or clustered (those installed).")
    ] = "",
    seed: Annotated[
        int | None,
        typer.Option(
            help="Seed of the analyst's own randomness (bootstrap, SIMEX). The sites' DP noise "
            "is theirs: a site seeds it only from its own configuration (noise_seed in TOML).",
            min=0,
        ),
    ] = None,
    confidence: Annotated[float, typer.Option(help="Confidence level.")] = 0.95,
    bins: Annotated[int, typer.Option(help="Calibration bins.")] = 10,
    min_count: Annotated[
        int | None,
        typer.Option(
            help="Disclosure policy: minimum rows per released aggregate "
            f"(q, default {DEFAULT_MIN_COUNT}; overrides --sites).",
            min=1,
        ),
    ] = None,
    audit_dir: Annotated[
        Path | None,
        typer.Option(help="Write each site's audit log here as NAME.jsonl (overrides --sites)."),
    ] = None,
    report: Annotated[Path | None, typer.Option(help="Write an HTML report here.")] = None,
    # --- rocglm (paper 1) ---
    epsilon: Annotated[
        float | None, typer.Option(help="rocglm: DP epsilon of the noisy scores.")
    ] = None,
    delta: Annotated[
        float | None, typer.Option(help="rocglm: DP delta of the noisy scores.")
    ] = None,
    sensitivity: Annotated[
        float | None,
        typer.Option(help="rocglm: l2-sensitivity of the score (default: site heuristic)."),
    ] = None,
    dp_calibration: Annotated[
        str | None, typer.Option(help="rocglm: Gaussian mechanism, classic or analytic.")
    ] = None,
    privacy: Annotated[
        str | None,
        typer.Option(
            help="rocglm: without --epsilon/--delta, 'default' (epsilon 1, delta 1/(10 n)) "
            "or 'paper' (paper 1's table; sites refuse its delta unless their policy allows)."
        ),
    ] = None,
    thresholds: Annotated[
        str | None, typer.Option(help="rocglm: threshold rule, grid or positives.")
    ] = None,
    n_thresholds: Annotated[int | None, typer.Option(help="rocglm: size of the grid.")] = None,
    correction: Annotated[
        str | None,
        typer.Option(
            help="rocglm: 'deconvolution' (default: corrects the noise bias and includes the "
            "noise in the CI) or 'none' (paper 1's estimate)."
        ),
    ] = None,
    bootstrap: Annotated[
        int | None,
        typer.Option(help="rocglm: resamples of the noisy negatives for the CI (default 50)."),
    ] = None,
    score_levels: Annotated[
        str | None,
        typer.Option(help="rocglm: the public levels of rated scores, e.g. 1,2,3,4,5."),
    ] = None,
    a0: Annotated[
        float | None, typer.Option(help="rocglm: one-sided test of H0: AUC <= A0.")
    ] = None,
    # --- histogram (paper 5) ---
    quantiles: Annotated[
        int | None, typer.Option(help="histogram: quantiles per class (Q, default 1024).")
    ] = None,
    dp_epsilon: Annotated[
        float | None,
        typer.Option(help="histogram: distributed DP with this total epsilon per site."),
    ] = None,
    dp_noise: Annotated[
        str | None, typer.Option(help="histogram: DP noise shares, discrete or continuous.")
    ] = None,
    dp_mode: Annotated[
        str | None,
        typer.Option(
            help="histogram: with --dp-epsilon, 'distributed' (noise shares summed by secure "
            "aggregation) or 'local' (each site's tree fully noised, sent in the clear)."
        ),
    ] = None,
    interpolation: Annotated[
        str | None,
        typer.Option(help="histogram: pchip (the paper), linear or midpoint between quantiles."),
    ] = None,
    branching: Annotated[
        int | None, typer.Option(help="histogram: branching factor of the tree (default 2).")
    ] = None,
    score_range: Annotated[
        str | None,
        typer.Option(help="histogram, rocglm: public score range LO,HI (default 0,1)."),
    ] = None,
    score_transform: Annotated[
        str | None,
        typer.Option(help="histogram: logistic or arctan map of unbounded scores onto (0, 1)."),
    ] = None,
    # --- mpc (paper 4) ---
    mpc_cluster: Annotated[
        Path | None,
        typer.Option(help="mpc: cluster file of running parties (default: 3 local processes)."),
    ] = None,
    mpc_sort: Annotated[
        str | None, typer.Option(help="mpc: 'oblivious' (default) or 'delta' (the paper's merge).")
    ] = None,
    mpc_delta: Annotated[int | None, typer.Option(help="mpc: the paper's delta (odd).")] = None,
    mpc_owner_keys: Annotated[
        Path | None,
        typer.Option(help="mpc: directory of the sites' owner keys (owner-NAME.key)."),
    ] = None,
    mpc_precision: Annotated[
        int | None, typer.Option(help="mpc: bits of the opened values (default 14).")
    ] = None,
    mpc_min_class_count: Annotated[
        int | None,
        typer.Option(help="mpc: open nothing unless both classes have this many samples."),
    ] = None,
    # --- clustered (paper 3) ---
    cluster: Annotated[
        str | None,
        typer.Option(help="clustered: cluster id column (each cluster inside one site)."),
    ] = None,
    cluster_bins: Annotated[
        int | None, typer.Option(help="clustered: shared score bins (default 1000).")
    ] = None,
    population_estimator: Annotated[
        str | None, typer.Option(help="clustered: corrected (default), eq5 or between.")
    ] = None,
    sigma11: Annotated[
        str | None, typer.Option(help="clustered: Sigma11 divisor, corollary6 or authors.")
    ] = None,
    plain: Annotated[
        bool | None,
        typer.Option(
            "--plain",
            help="clustered: sums in the clear (one or two sites whose policy sets "
            "clear_histograms) instead of secure aggregation.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Evaluate a score over several sites with one method.

    Sites come from --site NAME=PATH options or from a --sites TOML file. With --sites,
    --label, --score, --pos-label, --min-count and --audit-dir given on the command line
    override the file's values for every site (a note on stderr says which); the file's
    values apply only where the command line is silent.
    """
    from fedroc.methods import evaluate, get_method, method_names

    if not method:
        raise InputError(f"--method is required; one of {method_names()}")
    spec = get_method(method)  # an unknown method fails before any file is read
    if sites_file is not None and spec.needs_pooled:
        raise InputError(
            f"--method {method} reads the rows itself: give the sites as --site NAME=PATH, "
            "not --sites FILE"
        )
    options: dict[str, Any] = {}
    histogram_options = {
        "quantiles": quantiles,
        "dp_epsilon": dp_epsilon,
        "dp_noise": dp_noise,
        "dp_mode": dp_mode,
        "interpolation": interpolation,
        "branching": branching,
        "score_range": None if score_range is None else _parse_range(score_range),
        "score_transform": score_transform,
    }
    options.update({k: v for k, v in histogram_options.items() if v is not None})
    rocglm_options = {
        "epsilon": epsilon,
        "delta": delta,
        "sensitivity": sensitivity,
        "dp_calibration": dp_calibration,
        "privacy": privacy,
        "thresholds": thresholds,
        "n_thresholds": n_thresholds,
        "correction": correction,
        "bootstrap": bootstrap,
        "score_levels": None if score_levels is None else _parse_levels(score_levels),
        "a0": a0,
    }
    options.update({k: v for k, v in rocglm_options.items() if v is not None})
    mpc_options = {
        "mpc_cluster": None if mpc_cluster is None else str(mpc_cluster),
        "mpc_sort": mpc_sort,
        "mpc_delta": mpc_delta,
        "mpc_precision": mpc_precision,
        "mpc_min_class_count": mpc_min_class_count,
    }
    options.update({k: v for k, v in mpc_options.items() if v is not None})
    clustered_options = {
        "n_bins": cluster_bins,
        "population_estimator": population_estimator,
        "sigma11": sigma11,
        "secure": None if plain is None else not plain,
    }
    options.update({k: v for k, v in clustered_options.items() if v is not None})
    if method == "clustered" and cluster is None and sites_file is None:
        raise InputError("--method clustered needs --cluster COL (the cluster id column)")
    if sites_file is not None and site:
        raise InputError("give either --site NAME=PATH options or --sites FILE, not both")
    pooled: SiteData | None
    if sites_file is not None:
        if mpc_owner_keys is not None:
            raise InputError("--mpc-owner-keys configures sites given with --site only")
        federation = _federation_from_file(
            sites_file, label, score, pos_label, min_count, audit_dir, cluster
        )
        pooled = None
    else:
        from fedroc.data import Columns
        from fedroc.methods import pool_site_data

        if not site:
            raise InputError("give at least one --site NAME=PATH (or --sites FILE)")
        paths = parse_sites(site)
        data = load_site_data(
            paths,
            Columns(label or DEFAULT_LABEL, score or DEFAULT_SCORE, cluster),
            coerce_pos_label(pos_label),
        )
        if mpc_owner_keys is not None and method != "mpc":
            raise InputError(f"option --mpc-owner-keys does not apply to --method {method}")
        federation = build_federation(
            data,
            min_count=DEFAULT_MIN_COUNT if min_count is None else min_count,
            audit_dir=audit_dir,
            mpc_owner_keys=mpc_owner_keys,
        )
        pooled = pool_site_data(data)
        if method == "mpc" and mpc_min_class_count is None:
            # The sites built here refuse an MPC job below their --min-count.
            options["mpc_min_class_count"] = max(
                5, DEFAULT_MIN_COUNT if min_count is None else min_count
            )
        if method == "pooled":
            options["site_sizes"] = {k: v.n for k, v in data.items()}
            options["n_bins"] = bins
    if method == "mpc":
        options["mpc_calibration_bins"] = bins
    check_options(method, options)
    with err.status(f"running {method} over {len(federation.site_names)} site(s)"):
        result = evaluate(
            federation,
            method,
            pooled=pooled,
            seed=seed,
            confidence_level=confidence,
            calibration_bins=bins,
            **options,
        )
    if report is not None:
        write_report(report, result, pooled)
        err.print(f"report written to {report}")
    if as_json:
        emit_json(result.to_dict())
    else:
        render_result(result)
