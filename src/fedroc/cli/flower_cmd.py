"""``fedroc flower``: fedroc across machines on Flower.

* ``fedroc flower up``: a SuperLink and N SuperNodes on this machine (TLS or insecure).
* ``fedroc flower run``: run a method (or another job) on a running federation.
* ``fedroc flower supernode``: a site's SuperNode, configured from options (real machines).
* ``fedroc flower certs``: a CA and a SuperLink certificate for a real deployment.
"""

from __future__ import annotations

import signal
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from fedroc.cli._common import coerce_pos_label, emit_json, err, grid_table, kv_table, out
from fedroc.exceptions import InputError

flower_app = typer.Typer(
    name="flower",
    help="Run fedroc across machines on Flower: a SuperLink and one SuperNode per site.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _policy_config(
    min_count: int,
    allow_noisy: bool,
    allow_shares: bool,
    epsilon_limit: float | None,
    delta_limit: float | None,
    allowed_functions: str | None,
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "min-count": min_count,
        "allow-noisy": allow_noisy,
        "allow-shares": allow_shares,
    }
    if epsilon_limit is not None:
        config["epsilon-limit"] = epsilon_limit
    if delta_limit is not None:
        config["delta-limit"] = delta_limit
    if allowed_functions:
        config["allowed-functions"] = allowed_functions
    return config


@flower_app.command("up")
def up(
    sites: Annotated[
        int | None, typer.Option(help="Number of sites (default: one per --data).")
    ] = None,
    data: Annotated[
        list[str] | None,
        typer.Option(
            "--data",
            help="A site's data as NAME=PATH or PATH (CSV/Parquet); repeat per site. "
            "Without it, synthetic hospitals are generated.",
        ),
    ] = None,
    label: Annotated[str, typer.Option(help="Label column.")] = "label",
    score: Annotated[str, typer.Option(help="Score column.")] = "score",
    pos_label: Annotated[str | None, typer.Option(help="Positive label value.")] = None,
    min_count: Annotated[int, typer.Option(help="Disclosure policy of every site: q.")] = 5,
    directory: Annotated[
        Path | None,
        typer.Option("--dir", help="Working directory (certificates, logs, audit logs)."),
    ] = None,
    insecure: Annotated[
        bool, typer.Option(help="No TLS (plain HTTP on loopback), for quick tests.")
    ] = False,
    stock: Annotated[
        bool,
        typer.Option(help="Run stock flower-supernode processes instead of fedroc's tuned ones."),
    ] = False,
    port: Annotated[int | None, typer.Option(help="SuperLink port (default: a free one).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic data.")] = 2024,
    duration: Annotated[
        float | None,
        typer.Option(help="Stop after this many seconds (default: run until Ctrl-C)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the connection as one JSON object.")
    ] = False,
) -> None:
    """Start a SuperLink and one SuperNode per site on loopback; stop them on Ctrl-C."""
    from fedroc.datasets import make_multisite
    from fedroc.federation.flower.deploy import LocalDeployment
    from fedroc.federation.flower.site_config import SiteNodeConfig
    from fedroc.privacy import DisclosurePolicy

    work = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="fedroc-"))
    work = work.resolve()
    paths: dict[str, Path] = {}
    for i, spec in enumerate(data or []):
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = f"site{i + 1}", spec
        if not name or not path:
            raise InputError(f"--data must look like NAME=PATH or PATH; got {spec!r}")
        if name in paths:
            raise InputError(f"--data names site {name!r} twice")
        paths[name] = Path(path).resolve()
    if sites is not None and sites < 1:
        raise InputError(f"--sites must be at least 1; got {sites}")
    if paths and sites is not None and sites != len(paths):
        raise InputError(f"--sites {sites} but {len(paths)} --data file(s) given")
    if not paths:
        count = sites or 3
        (work / "data").mkdir(parents=True, exist_ok=True)
        sizes = [300 + 70 * (k % 4) for k in range(count)]
        for name, frame in make_multisite(sizes, seed=seed).items():
            paths[name] = work / "data" / f"{name}.csv"
            frame.to_csv(paths[name], index=False)
    policy = DisclosurePolicy(min_count=min_count)
    configs = [
        SiteNodeConfig(
            site=name,
            data=path,
            label=label,
            score=score,
            pos_label=coerce_pos_label(pos_label),
            policy=policy,
            audit=work / "audit" / f"{name}.jsonl",
        )
        for name, path in paths.items()
    ]
    deployment = LocalDeployment(configs, work, insecure=insecure, tuned=not stock, port=port)
    err.print(f"starting a SuperLink and {len(configs)} SuperNode(s) in {work} ...")
    stop = {"now": False}

    def _stop(signum: int, frame: Any) -> None:
        stop["now"] = True

    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        deployment.start()
        connection = deployment.connection
        if as_json:
            emit_json({**connection.to_dict(), "directory": str(work)})
        else:
            out.print(
                kv_table(
                    "Flower federation (fedroc)",
                    [
                        ("SuperLink", connection.address),
                        (
                            "TLS",
                            "off (insecure)" if insecure else str(connection.root_certificates),
                        ),
                        ("SuperNodes", "stock flower-supernode" if stock else "fedroc tuned"),
                        ("connection file", str(work / "connection.json")),
                        ("logs", str(work / "logs")),
                    ],
                )
            )
            out.print(
                grid_table("Sites", ["site", "data"], [(n, str(p)) for n, p in paths.items()])
            )
            out.print(f"run a method:  fedroc flower run --deployment {work} --method <name>")
        err.print("running; Ctrl-C stops every process")
        end = None if duration is None else time.monotonic() + duration
        while not stop["now"] and (end is None or time.monotonic() < end):
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        deployment.stop()
        err.print("stopped")


@flower_app.command("run")
def run(
    deployment: Annotated[
        Path | None,
        typer.Option(help="Directory of `fedroc flower up` (or its connection.json)."),
    ] = None,
    superlink: Annotated[
        str | None, typer.Option(help="SuperLink address HOST:PORT (instead of --deployment).")
    ] = None,
    root_certificates: Annotated[
        Path | None, typer.Option(help="CA certificate of the SuperLink (PEM).")
    ] = None,
    insecure: Annotated[bool, typer.Option(help="Connect without TLS.")] = False,
    site: Annotated[
        list[str] | None,
        typer.Option("--site", help="A site the run needs; repeat (default: every node)."),
    ] = None,
    job: Annotated[str, typer.Option(help="evaluate, moments, sites or calls.")] = "evaluate",
    method: Annotated[str | None, typer.Option(help="Method of the evaluate job.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the DP noise.")] = None,
    confidence: Annotated[float, typer.Option(help="Confidence level.")] = 0.95,
    bins: Annotated[int, typer.Option(help="Calibration bins.")] = 10,
    timeout: Annotated[
        float, typer.Option(help="Seconds a site may take to answer one call.")
    ] = 60.0,
    run_timeout: Annotated[
        float | None, typer.Option(help="Wall-clock limit of the whole run (seconds).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run a fedroc job (by default: evaluate one method) on a Flower federation."""
    from fedroc.federation.flower.deploy import FlowerConnection, submit_job

    if deployment is not None and superlink is not None:
        raise InputError("give --deployment or --superlink, not both")
    if deployment is not None:
        connection = FlowerConnection.from_file(deployment)
    elif superlink is not None:
        connection = FlowerConnection(superlink, root_certificates, insecure)
    else:
        raise InputError("give --deployment DIR (from `fedroc flower up`) or --superlink HOST:PORT")
    if site:
        connection = connection.with_sites(site)
    options: dict[str, Any] = {}
    if job == "evaluate":
        if not method:
            raise InputError("--method is required with --job evaluate")
        options = {
            "method": method,
            "seed": seed,
            "confidence_level": confidence,
            "calibration_bins": bins,
        }
    elif method is not None:
        raise InputError(f"--method applies to --job evaluate, not --job {job}")
    with err.status(f"running {job} on Flower ({connection.address})"):
        payload = submit_job(connection, job, options, timeout=timeout, run_timeout=run_timeout)
    result = dict(payload["result"])
    result["flower"] = {"run_id": payload["run_id"], "nodes": payload["node_ids"]}
    if as_json:
        emit_json(result)
        return
    rows: list[tuple[str, Any]] = [
        (key, value)
        for key, value in result.items()
        if isinstance(value, (int, float, str)) or value is None
    ]
    for key in ("auc_ci",):
        if isinstance(result.get(key), list):
            rows.append((key, tuple(result[key])))
    released = result.get("released")
    if isinstance(released, dict):
        rows.append(("rounds", released.get("rounds")))
        rows.append(("bytes sent by sites", sum(released.get("bytes_received", {}).values())))
    rows.append(("Flower run", payload["run_id"]))
    out.print(kv_table(f"fedroc on Flower: {job}", rows))
    sites_rows = result.get("sites")
    if isinstance(sites_rows, list) and sites_rows and isinstance(sites_rows[0], dict):
        out.print(grid_table("Sites", ["site", "n"], [(s["name"], s["n"]) for s in sites_rows]))


@flower_app.command("supernode")
def supernode(
    superlink: Annotated[str, typer.Option(help="SuperLink Fleet address HOST:PORT.")],
    site: Annotated[str, typer.Option(help="This site's name.")],
    data: Annotated[Path, typer.Option(help="This site's data (CSV or Parquet).")],
    root_certificates: Annotated[
        Path | None, typer.Option(help="CA certificate of the SuperLink (PEM).")
    ] = None,
    insecure: Annotated[bool, typer.Option(help="Connect without TLS (tests only).")] = False,
    label: Annotated[str, typer.Option(help="Label column.")] = "label",
    score: Annotated[str, typer.Option(help="Score column.")] = "score",
    cluster: Annotated[str | None, typer.Option(help="Cluster column.")] = None,
    pos_label: Annotated[str | None, typer.Option(help="Positive label value.")] = None,
    min_count: Annotated[int, typer.Option(help="Minimum rows per released aggregate (q).")] = 5,
    allow_noisy: Annotated[bool, typer.Option(help="Allow DP-noisy releases.")] = True,
    allow_shares: Annotated[bool, typer.Option(help="Allow secret shares.")] = True,
    epsilon_limit: Annotated[
        float | None, typer.Option(help="Lifetime epsilon budget (needs --audit).")
    ] = None,
    delta_limit: Annotated[
        float | None, typer.Option(help="Lifetime delta budget (needs --audit).")
    ] = None,
    allowed_functions: Annotated[
        str | None, typer.Option(help="Comma-separated site functions the site runs.")
    ] = None,
    audit: Annotated[Path | None, typer.Option(help="Audit log (JSON lines).")] = None,
    port: Annotated[int, typer.Option(help="Port of the node's local Runtime API.")] = 9094,
) -> None:
    """Serve one site: a SuperNode tuned for fedroc (use it on each site's machine)."""
    from fedroc.federation.flower.deploy import node_config_toml
    from fedroc.federation.flower.node import run_supernode
    from fedroc.federation.flower.site_config import SiteNodeConfig

    if insecure == (root_certificates is not None):
        raise InputError("give --root-certificates CA.pem, or --insecure for a test on loopback")
    config: dict[str, Any] = {"site": site, "data": str(data.resolve()), "label": label}
    config["score"] = score
    if cluster:
        config["cluster"] = cluster
    if pos_label is not None:
        config["pos-label"] = coerce_pos_label(pos_label)
    config.update(
        _policy_config(
            min_count, allow_noisy, allow_shares, epsilon_limit, delta_limit, allowed_functions
        )
    )
    if audit is not None:
        config["audit"] = str(audit.resolve())
    parsed = SiteNodeConfig.from_node_config(config)
    site_obj = parsed.build()  # fail here, with the reason, rather than on the first call
    err.print(f"{site_obj!r}: connecting to the SuperLink at {superlink} ...")
    with tempfile.TemporaryDirectory(prefix="fedroc-node-") as tmp:
        node_config = Path(tmp) / "node-config.toml"
        node_config.write_text(node_config_toml(config))
        args = ["--superlink", superlink, "--node-config", str(node_config), "--port", str(port)]
        args += ["--insecure"] if insecure else ["--root-certificates", str(root_certificates)]
        run_supernode(args)


@flower_app.command("certs")
def certs(
    directory: Annotated[Path, typer.Argument(help="Where to write ca.crt, server.pem/.key.")],
    host: Annotated[
        list[str] | None,
        typer.Option("--host", help="A name or IP address of the SuperLink; repeat."),
    ] = None,
    days: Annotated[int, typer.Option(help="Validity in days.")] = 365,
) -> None:
    """Generate a CA and a SuperLink certificate (for tests and pilots; use your PKI later)."""
    from fedroc.federation.flower.deploy import generate_certificates

    files = generate_certificates(directory, host or [], days=days)
    out.print(f"CA certificate (give it to every party): {files.ca_cert}", highlight=False)
    out.print(f"SuperLink certificate: {files.server_cert}", highlight=False)
    out.print(f"SuperLink private key (keep it private): {files.server_key}", highlight=False)
