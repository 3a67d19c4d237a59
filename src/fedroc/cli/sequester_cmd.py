"""``fedroc sequester``: plan subsets, draw the paper's figures, run the service."""

from __future__ import annotations

import math
import os
import secrets
import socket
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from fedroc.cli._common import (
    emit_json,
    err,
    figure_output,
    kv_table,
    name_options,
    option_words,
    out,
)
from fedroc.cli._options import JsonOption
from fedroc.exceptions import InputError

sequester_app = typer.Typer(
    name="sequester",
    help="Sequestered test set: load-factor planner, figures, Thresholdout service.",
    no_args_is_help=True,
)

ADMIN_ENV = "FEDROC_SEQUESTER_ADMIN_TOKEN"
ADMIN_FILE_ENV = "FEDROC_SEQUESTER_ADMIN_TOKEN_FILE"
SEED_ENV = "FEDROC_SEQUESTER_NOISE_SEED"
# Service defaults (fedroc.sequester.service.DEFAULTS), repeated here so that --help works
# without the service extra.
DEFAULT_BODY_MB, DEFAULT_RATE, DEFAULT_BURST = 16.0, 50.0, 100
# The planner's keywords as the options of `fedroc sequester plan`, for its messages.
PLAN_OPTIONS = {
    "n_images": "--images",
    "n_subsets": "--subsets",
    "noise_rate": "--noise-rate",
    "answer_noise_rate": "--answer-noise-rate",
    "load_factor": "--load-factor",
    "subset_size": "--subset-size",
    "budget": "--budget",
    "auc": "--auc",
    "prevalence": "--prevalence",
    "power": "--power",
    "alpha": "--alpha",
    "max_copies": "--max-copies",
    # No option here: the refusal of a plan of 0 answers offers it, which the service's plan
    # (POST /v1/test-sets/ID/plans) takes.
    "budget_units": "the budget_units of the service's plan",
}


@sequester_app.command("plan")
def plan_command(
    images: Annotated[int, typer.Option("--images", help="phi: images in the test set.")],
    subsets: Annotated[int, typer.Option("--subsets", help="rho: number of test subsets.")],
    noise_rate: Annotated[
        float, typer.Option("--noise-rate", help="sigma of eq. 3 (and of the answers).")
    ],
    answer_noise_rate: Annotated[
        float | None,
        typer.Option(
            "--answer-noise-rate",
            help="Laplace scale of the answers. Default: --noise-rate (sigma).",
        ),
    ] = None,
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
    max_copies: Annotated[
        int | None,
        typer.Option(
            "--max-copies",
            help="Most copies of one image in a subset (the service's max_copies; 1: without "
            "replacement, 0: no cap). Default ceil(4 N / phi).",
        ),
    ] = None,
    power: Annotated[float, typer.Option("--power", help="Target power of one subset.")] = 0.8,
    alpha: Annotated[float, typer.Option("--alpha", help="Two-sided test level.")] = 0.05,
    as_json: JsonOption = False,
) -> None:
    """Subset size, eq.-3 budget, epsilon and AUC SE of a sequestration plan."""
    import warnings

    from fedroc.methods.sequester.planner import PlanWarning, plan

    sizes = {"--load-factor": load_factor, "--subset-size": subset_size, "--budget": budget}
    given = [name for name, value in sizes.items() if value is not None]
    if len(given) != 1:  # the planner's message would name its keywords
        raise InputError(
            "give exactly one of --load-factor, --subset-size and --budget; "
            f"got {', '.join(given) or 'none'}"
        )
    if (auc is None) != (prevalence is None):
        raise InputError("give --auc and --prevalence together (both or neither)")
    with warnings.catch_warnings():
        # The warnings are printed below, once, and kept in the JSON.
        warnings.simplefilter("ignore", PlanWarning)
        try:
            p = plan(
                images,
                subsets,
                noise_rate=noise_rate,
                answer_noise_rate=answer_noise_rate,
                load_factor=load_factor,
                subset_size=subset_size,
                budget=budget,
                auc=auc,
                prevalence=prevalence,
                power=power,
                alpha=alpha,
                max_copies=max_copies,
            )
        except InputError as exc:
            raise name_options(exc, PLAN_OPTIONS) from None
    # The planner's notes name its keywords ("give auc and prevalence"); here, the options.
    notes = [
        option_words(note, PLAN_OPTIONS).replace(
            "give auc and prevalence", "give --auc and --prevalence"
        )
        for note in p.warnings
    ]
    for note in notes:
        err.print(f"[yellow]warning:[/] {note}", highlight=False)
    result: dict[str, Any] = p.to_dict()
    result["warnings"] = notes
    if budget is not None:
        result["requested_budget"] = budget
    if as_json:
        emit_json(result)
        return
    out.print(kv_table(p.summary_title, p.summary_rows()))


@sequester_app.command("figure")
def figure_command(
    kind: Annotated[
        str,
        typer.Argument(
            help="'budget' (paper Fig. 5), 'perturbation' (Fig. 4) or 'power' (Fig. 3)."
        ),
    ],
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
    seed: Annotated[int, typer.Option(help="Seed of the resampling and the figure's noise.")] = 0,
    threshold: Annotated[float, typer.Option(help="T (perturbation figure).")] = 0.02,
    noise_rate: Annotated[
        float, typer.Option("--noise-rate", help="sigma of the answers (perturbation figure).")
    ] = 0.124,
) -> None:
    """Draw paper 2's Figure 5 (budget vs load factor beside AUC SE/IQR), 4 or 3."""
    from fedroc.experiments.sequester import budget_figure, perturbation_figure, power_figure

    kinds = ("budget", "perturbation", "power")
    if kind not in kinds:
        raise InputError(f"figure kind must be one of {kinds}; got {kind!r}")
    output = figure_output("--out", output)
    xy = None
    if data is not None:
        from fedroc.data import Columns, SiteData

        site = SiteData.from_file(data, Columns(label, score))
        xy = (site.label, site.score)
    if kind == "budget":
        fig = budget_figure(
            images, subsets, auc=auc, prevalence=0.12 if prevalence is None else prevalence,
            data=xy, seed=seed,
        )  # fmt: skip
    elif kind == "perturbation":
        fig = perturbation_figure(
            images, subsets, auc=auc, prevalence=0.12 if prevalence is None else prevalence,
            threshold=threshold, noise_rate=noise_rate, data=xy, seed=seed,
        )  # fmt: skip
    else:
        fig = power_figure(
            images, auc=auc, prevalence=0.3 if prevalence is None else prevalence, seed=seed
        )
    fig.savefig(output, dpi=120)
    err.print(f"wrote {output}")


@sequester_app.command("serve")
def serve_command(
    db: Annotated[
        str,
        typer.Option(
            "--db",
            help="Database URL, or a path for a SQLite file (made 0600 in a folder that exists).",
        ),
    ] = "fedroc-sequester.db",
    host: Annotated[
        str,
        typer.Option("--host", help="Address to listen on (127.0.0.1: this machine only)."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port to listen on.")] = 8000,
    admin_token_file: Annotated[
        Path | None,
        typer.Option(
            "--admin-token-file",
            envvar=ADMIN_FILE_ENV,
            help=f"File holding the custodian token (else ${ADMIN_ENV}; else a new one).",
        ),
    ] = None,
    tls_cert: Annotated[
        Path | None, typer.Option("--tls-cert", help="PEM certificate: serve HTTPS.")
    ] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", help="PEM private key.")] = None,
    max_body_mb: Annotated[
        float, typer.Option("--max-body-mb", help="Largest request body (413 above).")
    ] = DEFAULT_BODY_MB,
    rate_limit: Annotated[
        float, typer.Option("--rate-limit", help="Requests per second per developer (0: none).")
    ] = DEFAULT_RATE,
    rate_burst: Annotated[
        int, typer.Option("--rate-burst", help="Requests a developer may send at once.")
    ] = DEFAULT_BURST,
    sqlite_synchronous: Annotated[
        str, typer.Option("--sqlite-synchronous", help="FULL (default) or NORMAL.")
    ] = "FULL",
    noise_seed: Annotated[
        int | None,
        typer.Option(
            "--noise-seed",
            envvar=SEED_ENV,
            hidden=True,
            help="Tests only: seed the answers' noise (anyone who knows it can remove it).",
        ),
    ] = None,
) -> None:
    """Run the sequestered test-set service (FastAPI + uvicorn; OpenAPI at /docs).

    The custodian token comes from --admin-token-file or the environment variable
    FEDROC_SEQUESTER_ADMIN_TOKEN (never the command line, where `ps` shows it); without
    either a new one is printed once.
    """
    try:
        import uvicorn

        from fedroc.sequester.db import SQLITE_SYNCHRONOUS, BadDatabase
        from fedroc.sequester.service import create_app
    except ImportError as exc:
        # markup=False: "[service]" is pip's syntax, not a rich style.
        err.print(
            f"error: the sequestration service needs the 'service' extra (missing module "
            f"{exc.name!r}): pip install 'fedroc[service]'",
            markup=False,
            highlight=False,
        )
        sys.exit(2)

    token = _admin_token(admin_token_file)
    _check_tls(tls_cert, tls_key)
    if not (max_body_mb > 0 and math.isfinite(max_body_mb)):
        raise InputError(f"--max-body-mb must be a positive number; got {max_body_mb!r}")
    # Checked here to name the options (create_app names its parameters); a burst below 1
    # was taken as 1 without a word.
    if not (rate_limit >= 0 and math.isfinite(rate_limit)):
        raise InputError(f"--rate-limit must be a number >= 0 (0: none); got {rate_limit!r}")
    if rate_burst < 1:
        raise InputError(f"--rate-burst must be a whole number >= 1; got {rate_burst!r}")
    if sqlite_synchronous.upper() not in SQLITE_SYNCHRONOUS:
        raise InputError(
            f"--sqlite-synchronous must be one of {', '.join(SQLITE_SYNCHRONOUS)}; "
            f"got {sqlite_synchronous!r}"
        )
    _check_listen(host, port)
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    try:
        app = create_app(
            db, token, sqlite_synchronous=sqlite_synchronous, noise_seed=noise_seed,
            max_body_bytes=max(1024, int(max_body_mb * 2**20)), rate_limit=rate_limit,
            rate_burst=rate_burst,
        )  # fmt: skip
    except BadDatabase as exc:
        raise InputError(f"--db: {exc}") from None
    except (ArgumentError, SQLAlchemyError) as exc:
        # A server not there, a file SQLite cannot open: the operator's to fix, not a bug.
        # The URL is shown without its password, and the driver's reason on one line.
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise InputError(f"--db {_shown_url(db)} cannot be opened: {reason}") from None
    if noise_seed is not None:
        err.print(
            f"[yellow]warning:[/] the answers' noise is seeded ({noise_seed}; --noise-seed or "
            f"{SEED_ENV}): anyone who knows the seed can remove it. For tests only.",
            highlight=False,
        )
    store = app.state.store
    for row in store.plans():
        if row["mechanism"] == "h-thresholdout":
            err.print(
                f"[yellow]warning:[/] plan {row['plan_id']} answers with h-thresholdout, which "
                "adaptive developers can read labels from; see fedroc.methods.sequester",
                highlight=False,
            )
    scheme = "https" if tls_cert is not None else "http"
    if tls_cert is None and not _loopback(host):
        err.print(
            f"[yellow]warning:[/] serving plain HTTP on --host {host}: bearer tokens, labels "
            "and scores cross the network in the clear; give --tls-cert and --tls-key (or "
            "serve behind a TLS proxy on 127.0.0.1)",
            highlight=False,
        )
    err.print(
        f"serving {store.engine.url!r} (schema {store.revision}) on {scheme}://{host}:{port}",
        highlight=False,
    )
    uvicorn.run(
        app, host=host, port=port, log_level="warning", access_log=False,
        ssl_certfile=None if tls_cert is None else str(tls_cert),
        ssl_keyfile=None if tls_key is None else str(tls_key),
    )  # fmt: skip


def _shown_url(db: str) -> str:
    """Return the --db value as it may be printed (a URL's password masked)."""
    if "://" not in db:
        return repr(db)
    from sqlalchemy.engine import make_url

    try:
        return make_url(db).render_as_string(hide_password=True)
    except Exception:  # an unparseable URL: its scheme only
        return db.split("://", 1)[0] + "://..."


def _loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: resolved by uvicorn, maybe to anywhere
        return False


def _check_tls(cert: Path | None, key: Path | None) -> None:
    """Refuse a certificate and key that TLS cannot load before anything is served.

    uvicorn loaded them after "serving ... on https://" was printed and stopped with
    ``error: [SSL] PEM lib (_ssl.c:3905)``, naming neither option nor file.
    """
    import ssl

    if (cert is None) != (key is None):
        raise InputError("give --tls-cert and --tls-key together (or neither)")
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if path is not None and not path.is_file():
            raise InputError(f"{flag} {str(path)!r} is not a readable file")
    if cert is None or key is None:
        return
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc.strerror or str(exc)
        raise InputError(
            f"--tls-cert {str(cert)!r} and --tls-key {str(key)!r} are not a PEM certificate "
            f"and its private key ({reason})"
        ) from None


def _check_listen(host: str, port: int) -> None:
    """Refuse a port or address that cannot be listened on before the database is opened.

    uvicorn took ``--port 99999`` and hung, and met a port in use with its own ``ERROR``
    line and exit 1, both after "serving ... on" was printed.
    """
    if not 1 <= port <= 65535:
        raise InputError(f"--port must lie in 1..65535; got {port}")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            # As uvicorn binds: SO_REUSEADDR, so a port in TIME_WAIT is not taken for in use.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise InputError(
            f"--port {port} on --host {host} cannot be listened on: {reason}; choose another "
            "--port (or --host)"
        ) from None


def _long_enough(token: str, source: str) -> str:
    """Refuse a short custodian token naming its source and length (never the token)."""
    from fedroc.sequester.service import MIN_ADMIN_TOKEN  # imported by serve already

    if len(token) < MIN_ADMIN_TOKEN:
        raise InputError(
            f"the custodian token in {source} has {len(token)} characters; it needs at least "
            f"{MIN_ADMIN_TOKEN} (python -c 'import secrets; print(secrets.token_urlsafe(32))' "
            "makes one)"
        )
    return token


def _admin_token(path: Path | None) -> str:
    """Read the custodian token: from a file, else the environment, else a new one (printed)."""
    if path is not None:
        try:
            token = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise InputError(f"--admin-token-file {str(path)!r} cannot be read: {exc}") from None
        except UnicodeDecodeError:  # a binary file ended in a traceback
            raise InputError(
                f"--admin-token-file {str(path)!r} is not a text file (the token is one line "
                "of text)"
            ) from None
        if os.name == "posix" and path.stat().st_mode & 0o077:
            err.print(
                f"[yellow]warning:[/] --admin-token-file {str(path)!r} is readable by others; "
                "chmod 600 it",
                highlight=False,
            )
        if not token:
            raise InputError(f"--admin-token-file {str(path)!r} is empty")
        return _long_enough(token, f"--admin-token-file {str(path)!r}")
    token = os.environ.get(ADMIN_ENV, "")
    if token:
        return _long_enough(token, f"${ADMIN_ENV}")
    token = secrets.token_urlsafe(32)
    err.print(f"custodian token (not stored, keep it): {token}", highlight=False)
    return token
