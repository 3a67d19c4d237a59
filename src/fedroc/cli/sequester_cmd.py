"""``fedroc sequester``: plan subsets, draw the paper's figures, run the service."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Annotated, Any

import typer

from fedroc.cli._common import emit_json, err, kv_table, out
from fedroc.exceptions import InputError

sequester_app = typer.Typer(
    name="sequester",
    help="Sequestered test set: load-factor planner, figures, Thresholdout service.",
    no_args_is_help=True,
)

ADMIN_ENV = "FEDROC_SEQUESTER_ADMIN_TOKEN"


@sequester_app.command("plan")
def plan_command(
    images: Annotated[int, typer.Option("--images", help="phi: images in the test set.")],
    subsets: Annotated[int, typer.Option("--subsets", help="rho: number of test subsets.")],
    noise_rate: Annotated[
        float, typer.Option("--noise-rate", help="sigma: Laplace scale of the perturbation.")
    ],
    load_factor: Annotated[
        float | None, typer.Option("--load-factor", help="xi = N rho / phi.")
    ] = None,
    subset_size: Annotated[
        int | None, typer.Option("--subset-size", help="N (instead of --load-factor).")
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option("--budget", help="Requested budget: find the load factor that gives it."),
    ] = None,
    auc: Annotated[
        float | None, typer.Option("--auc", help="Expected AUC (for SE, power).")
    ] = None,
    prevalence: Annotated[
        float | None, typer.Option("--prevalence", help="Prevalence of the positive class.")
    ] = None,
    power: Annotated[float, typer.Option("--power", help="Target power of one subset.")] = 0.8,
    alpha: Annotated[float, typer.Option("--alpha", help="Two-sided test level.")] = 0.05,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Subset size, eq.-3 budget, epsilon and AUC SE of a sequestration plan."""
    from fedroc.sequester.planner import plan

    p = plan(
        images,
        subsets,
        noise_rate=noise_rate,
        load_factor=load_factor,
        subset_size=subset_size,
        budget=budget,
        auc=auc,
        prevalence=prevalence,
        power=power,
        alpha=alpha,
    )
    result: dict[str, Any] = p.to_dict()
    if budget is not None:
        result["requested_budget"] = budget
    if as_json:
        emit_json(result)
        return
    rows = [
        ("images (phi)", p.n_images),
        ("subsets (rho)", p.n_subsets),
        ("load factor (xi)", p.load_factor),
        ("subset size (N)", p.subset_size),
        ("noise rate (sigma)", p.noise_rate),
        ("budget (eq. 3)", p.budget),
        ("perturbed answers allowed", p.budget_units),
        ("epsilon = B / (sigma phi)", p.epsilon),
        ("AUC SE of one subset (Hanley-McNeil)", p.auc_se),
        (f"minimum subset size (power {power:g})", p.min_subset_size),
        ("power of one subset", p.subset_power),
    ]
    out.print(kv_table("Sequestration plan (h-Thresholdout_AUC)", rows))


@sequester_app.command("figure")
def figure_command(
    kind: Annotated[str, typer.Argument(help="'budget' (paper Fig. 5) or 'power' (Fig. 3).")],
    output: Annotated[Path, typer.Option("--out", help="PNG file to write.")],
    images: Annotated[int, typer.Option("--images", help="phi.")] = 1047,
    subsets: Annotated[int, typer.Option("--subsets", help="rho (budget figure).")] = 100,
    auc: Annotated[float, typer.Option("--auc", help="AUC of the model.")] = 0.81,
    prevalence: Annotated[
        float | None, typer.Option("--prevalence", help="Default 0.12 (budget), 0.3 (power).")
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option("--data", help="CSV/Parquet with labels and scores for the AUC IQR."),
    ] = None,
    label: Annotated[str, typer.Option(help="Label column of --data.")] = "label",
    score: Annotated[str, typer.Option(help="Score column of --data.")] = "score",
    seed: Annotated[int, typer.Option(help="Seed of the resampling.")] = 0,
) -> None:
    """Draw paper 2's Figure 5 (budget vs load factor beside AUC SE/IQR) or Figure 3."""
    from fedroc.sequester.planner import budget_figure, power_figure

    if kind == "budget":
        xy = None
        if data is not None:
            from fedroc.data import Columns, SiteData, load_table

            site = SiteData.from_frame(load_table(data), Columns(label, score))
            xy = (site.label, site.score)
        fig = budget_figure(
            images, subsets, auc=auc, prevalence=0.12 if prevalence is None else prevalence,
            data=xy, seed=seed,
        )  # fmt: skip
    elif kind == "power":
        fig = power_figure(
            images, auc=auc, prevalence=0.3 if prevalence is None else prevalence, seed=seed
        )
    else:
        raise InputError(f"figure kind must be 'budget' or 'power'; got {kind!r}")
    fig.savefig(output, dpi=120)
    err.print(f"wrote {output}")


@sequester_app.command("serve")
def serve_command(
    db: Annotated[
        str, typer.Option("--db", help="Database URL, or a path for a SQLite file.")
    ] = "fedroc-sequester.db",
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 8000,
    admin_token: Annotated[
        str | None,
        typer.Option("--admin-token", help=f"Custodian token (default: ${ADMIN_ENV}, or new)."),
    ] = None,
    sqlite_synchronous: Annotated[
        str, typer.Option("--sqlite-synchronous", help="FULL (default) or NORMAL.")
    ] = "FULL",
) -> None:
    """Run the sequestered test-set service (FastAPI + uvicorn; OpenAPI at /docs)."""
    import uvicorn

    from fedroc.sequester.service import create_app

    token = admin_token or os.environ.get(ADMIN_ENV)
    if not token:
        token = secrets.token_urlsafe(32)
        err.print(f"custodian token (not stored, keep it): {token}", highlight=False)
    app = create_app(db, token, sqlite_synchronous=sqlite_synchronous)
    err.print(f"serving {app.state.store.engine.url!r} on http://{host}:{port}", highlight=False)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
