"""``fedroc mpc``: run the three MPC parties on separate machines, share owners' data.

A deployment: ``fedroc mpc certs DIR`` writes keys, certificates and ``cluster.toml`` (edit
the hosts, then give each machine the public files and its own keys); ``fedroc mpc party
--cluster cluster.toml --id N`` on each of the three machines; each data owner runs
``fedroc mpc share DATA --cluster cluster.toml --owner NAME --out NAME.share`` (the bundle
holds two ciphertexts, one per proxy); the analyst runs ``fedroc mpc run --cluster
cluster.toml *.share``. ``fedroc evaluate --method mpc --mpc-cluster cluster.toml`` does the
sharing through the sites instead.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from fedroc.cli._common import coerce_pos_label, emit_json, err, grid_table, kv_table, out
from fedroc.exceptions import InputError

mpc_app = typer.Typer(
    name="mpc",
    help="Secure 3-party computation of exact AUROC and AUPR (ppAURORA).",
    no_args_is_help=True,
)


def _pairs(values: list[str] | None, what: str) -> dict[int, str]:
    result: dict[int, str] = {}
    for spec in values or []:
        pid, sep, value = spec.partition("=")
        if not sep or pid not in ("0", "1", "2") or not value:
            raise InputError(f"--{what} must look like ID=VALUE with ID 0, 1 or 2; got {spec!r}")
        result[int(pid)] = value
    return result


@mpc_app.command("certs")
def certs(
    directory: Annotated[Path, typer.Argument(help="Directory to write into (created).")],
    host: Annotated[
        list[str] | None, typer.Option(help="Party address as ID=HOST (default 127.0.0.1).")
    ] = None,
    port: Annotated[
        list[str] | None, typer.Option(help="Party port as ID=PORT (default 7400 + ID).")
    ] = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds a party waits for a peer before giving up.")
    ] = 60.0,
) -> None:
    """Write a CA, party and client certificates, proxy keys and cluster.toml."""
    from fedroc.mpc.certs import generate_cluster

    ports: dict[int, int] = {}
    for pid, value in _pairs(port, "port").items():
        try:
            ports[pid] = int(value)
        except ValueError:
            raise InputError(f"--port {pid}={value!r}: the port must be an integer") from None
    path = generate_cluster(directory, hosts=_pairs(host, "host"), ports=ports, timeout=timeout)
    err.print(f"cluster file written to {path}")
    out.print(str(path))


@mpc_app.command("party")
def party(
    cluster: Annotated[Path, typer.Option(help="Cluster file (TOML).")],
    id: Annotated[int, typer.Option("--id", help="This party: 0, 1 (proxies) or 2 (helper).")],
    startup_timeout: Annotated[
        float, typer.Option(help="Seconds to wait for the other parties to come up.")
    ] = 60.0,
) -> None:
    """Run one party until shut down (exit 0) or until a job fails (exit 1)."""
    from fedroc.mpc.net import ClusterConfig, PartyServer

    server = PartyServer(ClusterConfig.load(cluster), id, startup_timeout=startup_timeout)
    raise typer.Exit(server.serve())


@mpc_app.command("share")
def share(
    data: Annotated[Path, typer.Argument(help="The owner's CSV or Parquet file.")],
    cluster: Annotated[Path, typer.Option(help="Cluster file (for the proxies' public keys).")],
    owner: Annotated[str, typer.Option(help="Name of this data owner.")],
    out_path: Annotated[Path, typer.Option("--out", help="Bundle file to write.")],
    label: Annotated[str, typer.Option(help="Label column.")] = "label",
    score: Annotated[str, typer.Option(help="Score column.")] = "score",
    pos_label: Annotated[str | None, typer.Option(help="Positive label value.")] = None,
) -> None:
    """Sort, split and seal an owner's rows: one share for each proxy, in one file."""
    from fedroc.data import Columns, SiteData, load_table
    from fedroc.mpc.bundle import make_bundle, write_bundle
    from fedroc.mpc.net import ClusterConfig

    frame = load_table(data)
    rows = SiteData.from_frame(
        frame, Columns(label, score), pos_label=coerce_pos_label(pos_label), source=str(data)
    )
    keys = ClusterConfig.load(cluster).proxy_keys()
    bundle = make_bundle(owner, rows.label, rows.score, keys, secrets.token_hex(16))
    write_bundle(bundle, out_path)
    err.print(f"{rows.n} rows of {owner!r} sealed for the two proxies in {out_path}")


def _result_rows(values: dict[str, float], stats: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (f"party {pid}", s.rounds, s.bytes_sent, s.bytes_received, s.seconds)
        for pid, s in enumerate(stats)
    ]


@mpc_app.command("run")
def run(
    bundles: Annotated[list[Path], typer.Argument(help="Owners' bundle files.")],
    cluster: Annotated[Path, typer.Option(help="Cluster file of the running parties.")],
    sort: Annotated[str, typer.Option(help="'oblivious' or 'delta' (the paper's merge).")] = (
        "oblivious"
    ),
    delta: Annotated[int, typer.Option(help="The paper's delta (odd), with --sort delta.")] = 1,
    noties: Annotated[
        bool, typer.Option("--noties", help="Also open the paper's no-tie AUROC.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Compute AUROC and AUPR of the pooled owners on a running cluster."""
    from fedroc.mpc.auc import AucSpec
    from fedroc.mpc.bundle import read_bundle
    from fedroc.mpc.net import ClusterClient, ClusterConfig

    items = [read_bundle(p) for p in bundles]
    names = [b.owner for b in items]
    if len(set(names)) != len(names):
        raise InputError(f"owner names must differ; got {names}")
    spec = AucSpec(tuple(b.n for b in items), sort=sort, delta=delta, noties=noties)
    result = ClusterClient(ClusterConfig.load(cluster)).run(spec, items)
    record = {
        "method": "mpc",
        "sites": [{"name": b.owner, "n": b.n} for b in items],
        **{k: v for k, v in result.values.items()},
        "seconds": result.seconds,
        "parties": [{"party": pid, **s.to_dict()} for pid, s in enumerate(result.stats)],
    }
    if as_json:
        emit_json(record)
        return
    out.print(kv_table("MPC result", [*result.values.items(), ("seconds", result.seconds)]))
    out.print(
        grid_table(
            "Parties",
            ["party", "rounds", "bytes sent", "bytes received", "seconds"],
            _result_rows(result.values, result.stats),
        )
    )


@mpc_app.command("stop")
def stop(
    cluster: Annotated[Path, typer.Option(help="Cluster file of the running parties.")],
) -> None:
    """Ask a running cluster to shut down."""
    from fedroc.mpc.net import ClusterClient, ClusterConfig

    ClusterClient(ClusterConfig.load(cluster), connect_timeout=5.0).shutdown()
    err.print("shutdown sent")
    sys.stdout.flush()
