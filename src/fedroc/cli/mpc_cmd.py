"""``fedroc mpc``: run the three MPC parties on separate machines, share owners' data.

A deployment: ``fedroc mpc certs DIR [--owner NAME ...]`` writes keys, certificates and
``cluster.toml`` (edit the hosts, then give each machine the public files and its own keys;
each data owner gets its ``owner-NAME.key``, or makes its own with ``fedroc mpc owner-key``
and has its public key added under ``[owners]``); ``fedroc mpc party --cluster cluster.toml
--id N`` on each of the three machines. For a job, the analyst picks a job id (``fedroc mpc
new-job``) and tells the owners the id and the list of co-owners; each owner runs ``fedroc
mpc share DATA --cluster cluster.toml --owner NAME --owner-key NAME.key --job ID --owners
a,b,c --out NAME.share`` (two ciphertexts and the owner's signature of the job); the
analyst runs ``fedroc mpc run --cluster cluster.toml *.share``. ``fedroc evaluate --method
mpc --mpc-cluster cluster.toml`` does the sharing through the sites instead.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from fedroc.cli._common import (
    INTERRUPT_SAID,
    INTERRUPTED,
    coerce_pos_label,
    emit_json,
    err,
    grid_table,
    kv_table,
    out,
    read_data,
    row_label,
    sites_table,
)
from fedroc.cli._options import (
    ClusterFileOption,
    CompareScoreOption,
    ConfidenceOption,
    JsonOption,
    LabelOption,
    PosLabelOption,
    ScoreOption,
)
from fedroc.exceptions import InputError

mpc_app = typer.Typer(
    name="mpc",
    help="Secure 3-party computation of exact AUROC, AUPR and DeLong CI (ppAURORA).",
    no_args_is_help=True,
)


# Seconds between `fedroc mpc run`'s "waiting for the cluster" lines on stderr.
PROGRESS_EVERY = 10.0
# Seconds `fedroc mpc run` keeps trying to reach party 0 (it says so on stderr at once).
CONNECT_TIMEOUT = 10.0
#: What `mpc share` asks of each class by default: a site's default minimum count q
#: (DisclosurePolicy().min_count; spelt here so that the command line loads no privacy
#: layer, a test holds them equal).
DEFAULT_OWNER_MIN_COUNT = 5


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
    owner: Annotated[
        list[str] | None,
        typer.Option(help="A data owner to make a key for and register (repeat per owner)."),
    ] = None,
) -> None:
    """Write a CA, party and client certificates, proxy keys, owner keys and cluster.toml."""
    from fedroc.mpc.certs import generate_cluster

    ports: dict[int, int] = {}
    for pid, value in _pairs(port, "port").items():
        try:
            ports[pid] = int(value)
        except ValueError:
            raise InputError(f"--port {pid}={value!r}: the port must be an integer") from None
    if not timeout > 0:
        raise InputError(f"--timeout must be positive; got {timeout}")
    names = list(owner or [])
    if len(set(names)) != len(names):
        raise InputError(f"--owner names must differ; got {names}")
    path = generate_cluster(
        directory, hosts=_pairs(host, "host"), ports=ports, timeout=timeout, owner_keys=names
    )
    err.print(f"cluster file written to {path}")
    out.print(str(path))


@mpc_app.command("owner-key")
def owner_key(
    out_path: Annotated[Path, typer.Argument(help="File to write the private key to.")],
    name: Annotated[str, typer.Option(help="The owner's name (as in its bundles).")],
) -> None:
    """Make a data owner's signing key; prints the line to add under [owners]."""
    from fedroc.mpc.certs import owner_line
    from fedroc.mpc.owner import check_owner_name, write_owner_key

    check_owner_name(name)
    if out_path.exists():
        raise InputError(f"{str(out_path)!r} exists already; choose another file")
    public = write_owner_key(out_path)
    err.print(
        f"owner key of {name!r} written to {out_path}; add this line under [owners] in "
        "cluster.toml and restart the parties:"
    )
    sys.stdout.write(owner_line(name, public) + "\n")


@mpc_app.command("new-job")
def new_job() -> None:
    """Print a fresh job id (the analyst gives it to the owners with the list of owners)."""
    from fedroc.mpc.owner import new_job_id

    sys.stdout.write(new_job_id() + "\n")


@mpc_app.command("party")
def party(
    cluster: Annotated[Path, typer.Option(help="Cluster file (TOML).")],
    id: Annotated[int, typer.Option("--id", help="This party: 0, 1 (proxies) or 2 (helper).")],
    startup_timeout: Annotated[
        float, typer.Option(help="Seconds to wait for the other parties to come up.")
    ] = 60.0,
) -> None:
    """Run one party until shut down (exit 0) or until a peer is lost (exit 1).

    A party that cannot listen on its address, or whose peer's certificate this cluster's
    CA did not sign (another cluster's files), exits 2 (fix the cluster file); one whose
    peers do not connect within --startup-timeout exits 1. Ctrl-C stops it with a line
    naming the job it interrupted (exit 130); its peers then stop too (exit 1).
    """
    from fedroc.mpc.net import ClusterConfig, PartyServer

    if id not in (0, 1, 2):
        raise InputError(f"--id must be 0, 1 or 2; got {id}")
    if not startup_timeout > 0:
        raise InputError(f"--startup-timeout must be positive; got {startup_timeout}")
    server = PartyServer(ClusterConfig.load(cluster), id, startup_timeout=startup_timeout)
    code = server.serve()
    if code == INTERRUPTED:  # the party named the job it interrupted
        INTERRUPT_SAID.set()
    raise typer.Exit(code)


def _owners_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise InputError(f"--owners must list the job's owners, comma-separated; got {text!r}")
    if len(set(names)) != len(names):
        raise InputError(f"--owners lists a name twice: {names}")
    return names


@mpc_app.command("share")
def share(
    data: Annotated[Path, typer.Argument(help="The owner's CSV or Parquet file.")],
    cluster: Annotated[Path, typer.Option(help="Cluster file (for the proxies' public keys).")],
    owner: Annotated[str, typer.Option(help="Name of this data owner.")],
    owner_key: Annotated[Path, typer.Option(help="This owner's private key (owner-key).")],
    job: Annotated[str, typer.Option(help="The job id the analyst gave (one job per bundle).")],
    owners: Annotated[str, typer.Option(help="All owners of the job, comma-separated.")],
    out_path: Annotated[Path, typer.Option("--out", help="Bundle file to write.")],
    label: LabelOption = "label",
    score: ScoreOption = "score",
    pos_label: PosLabelOption = None,
    precision_bits: Annotated[
        int, typer.Option(help="Bits of the opened values the owner agrees to (1-52).")
    ] = 14,
    min_class_count: Annotated[
        int, typer.Option(help="Open nothing unless both classes have this many samples.")
    ] = 5,
    ci: Annotated[bool, typer.Option("--ci/--no-ci", help="Compute DeLong's CI.")] = True,
    sort: Annotated[str, typer.Option(help="'oblivious' or 'delta' (the paper's merge).")] = (
        "oblivious"
    ),
    delta: Annotated[int, typer.Option(help="The paper's delta (odd), with --sort delta.")] = 1,
    noties: Annotated[
        bool, typer.Option("--noties", help="Also open the paper's no-tie AUROC.")
    ] = False,
    compare_score: CompareScoreOption = None,
    owner_min_count: Annotated[
        int,
        typer.Option(
            help="Share nothing unless this file holds this many rows of each class (the "
            "owner's own minimum; default a site's default minimum count q). Lower it only "
            "knowingly: --min-class-count is over all owners' rows.",
        ),
    ] = DEFAULT_OWNER_MIN_COUNT,
) -> None:
    """Sort, split, seal and sign an owner's rows for one job: one bundle file."""
    from fedroc.data import Columns
    from fedroc.mpc.bundle import make_bundle, write_bundle
    from fedroc.mpc.net import ClusterConfig
    from fedroc.mpc.owner import JobTerms, load_owner_key

    if owner_min_count < 0:
        raise InputError(f"--owner-min-count must be 0 or more; got {owner_min_count}")
    key = load_owner_key(owner_key)
    terms = JobTerms.create(
        _owners_list(owners),
        ClusterConfig.load(cluster).proxy_key_bytes(),
        job=job,
        frac_bits=precision_bits,
        min_class_count=min_class_count,
        ci=ci,
        sort=sort,
        delta=delta,
        noties=noties,
        compare=compare_score is not None,
    )
    rows = read_data(
        data, Columns(label, score, score_b=compare_score), coerce_pos_label(pos_label)
    )
    _check_owner_counts(data, rows.n_pos, rows.n - rows.n_pos, owner_min_count)
    bundle = make_bundle(owner, rows.label, rows.score, terms, key, scores_b=rows.score_b)
    write_bundle(bundle, out_path)
    err.print(f"{rows.n} rows of {owner!r} sealed for job {terms.job} in {out_path}")


def _check_owner_counts(data: Path, n_pos: int, n_neg: int, minimum: int) -> None:
    """Refuse to seal a file with fewer than ``minimum`` rows of either class.

    An owner sharing by hand sealed its 3 rows without a word (the job's --min-class-count
    is over all owners' rows, checked under MPC). Through `fedroc evaluate --method mpc` a
    site refuses only under q rows in all (its class counts stay secret under MPC): this
    check of the owner's own file is stricter, and says so.
    """
    count, what = min((n_pos, "positive"), (n_neg, "negative"))  # the smaller class
    if count < minimum:
        default = (
            ", by default a site's default minimum count q"
            if minimum == DEFAULT_OWNER_MIN_COUNT
            else ""
        )
        raise InputError(
            f"data file {str(data)!r} has {count} {what} row(s), fewer than the minimum "
            f"count {minimum} (--owner-min-count{default}); nothing was sealed. To share it "
            f"anyway, give --owner-min-count {count}"
        )


_PARTY_COLUMNS = ("rounds", "bytes_sent", "bytes_received", "seconds")


def render_run(record: dict[str, Any], confidence: float) -> None:
    """Print ``fedroc mpc run``'s result: owners, values, comparison and parties, in words.

    Before, the rows were the JSON's keys (``auc_ci``, ``auc_variance``,
    ``precision_bits``, ``comparison: p_value``) and the class counts a bare "-".
    """
    level = f"{confidence:.0%}"
    job = record["mpc"]
    out.print(sites_table(record["sites"]))
    rows: list[tuple[str, Any]] = [
        ("AUC", record["auc"]),
        (f"{level} CI (logit, paper 1 eq. 3)", record["auc_ci"]),
        (row_label("auc_se"), record["auc_se"]),
        (row_label("auc_variance") + " (DeLong)", record["auc_variance"]),
        (row_label("pr_auc"), record["pr_auc"]),
    ]
    if "auc_noties" in record:
        rows.append((row_label("auc_noties"), record["auc_noties"]))
    rows += [
        ("rows", record["n"]),
        # The job keeps the class counts secret: "-" read as missing data.
        ("positives", "not released (secret in the job)"),
        ("negatives", "not released (secret in the job)"),
        ("job", job["job"]),
        ("merge", job["sort"] + (f" (the paper's, delta {job['delta']})" if job["delta"] else "")),
        ("opened values rounded to", f"2^-{job['precision_bits']}"),
        ("least rows of each class to open them", job["min_class_count"]),
        ("values opened", job["released"]),
        ("seconds", job["seconds"]),
    ]
    out.print(kv_table(f"MPC result of job {job['job']}", rows))
    comparison = record.get("comparison")
    if comparison is not None:
        out.print(
            kv_table(
                "Comparison of two models on the same rows (score minus compared score)",
                [
                    ("AUC difference", comparison["auc_difference"]),
                    ("  SE", comparison["se"]),
                    (f"  {level} CI", comparison["ci"]),
                    ("  p-value (two-sided, equal AUCs)", comparison["p_value"]),
                    ("AUC of the compared score", comparison["auc_b"]),
                    (f"  {level} CI", comparison["auc_b_ci"]),
                    ("test", comparison["method"]),
                ],
            )
        )
    out.print(
        grid_table(
            "Parties",
            ["party", "rounds", "bytes sent", "bytes received", "seconds"],
            [
                (f"{p['party']} ({p['role']})", *(p[k] for k in _PARTY_COLUMNS))
                for p in job["parties"]
            ],
        )
    )


@mpc_app.command("run")
def run(
    bundles: Annotated[list[Path], typer.Argument(help="Owners' bundle files (one job).")],
    cluster: ClusterFileOption,
    confidence: ConfidenceOption = 0.95,
    as_json: JsonOption = False,
) -> None:
    """Compute AUROC, AUPR and DeLong CI of the pooled owners on a running cluster."""
    from fedroc.methods.mpc import paired_comparison
    from fedroc.metrics import logit_ci
    from fedroc.mpc.bundle import read_bundle
    from fedroc.mpc.net import ClusterClient, ClusterConfig, job_of
    from fedroc.mpc.runtime import ROLE

    if not 0 < confidence < 1:
        raise InputError(f"--confidence must lie in (0, 1); got {confidence}")
    items = [read_bundle(p) for p in bundles]
    seen: dict[str, Path] = {}
    for path, bundle in zip(bundles, items, strict=True):
        if bundle.owner in seen:
            raise InputError(
                f"bundles {str(seen[bundle.owner])!r} and {str(path)!r} are both of owner "
                f"{bundle.owner!r}; give one bundle per owner"
            )
        seen[bundle.owner] = path
    terms, _ = job_of(items)
    n = sum(b.n for b in items)

    def waiting(seconds: float) -> None:
        err.print(f"MPC job {terms.job} over {n} rows: waiting for the cluster, {seconds:.0f} s")

    def connecting(line: str) -> None:
        err.print(f"MPC job {terms.job}: {line}", markup=False, highlight=False)

    client = ClusterClient(
        ClusterConfig.load(cluster), connect_timeout=CONNECT_TIMEOUT, connecting=connecting
    )
    result = client.run(items, progress=waiting, every=PROGRESS_EVERY)
    o = result.outputs
    ci = logit_ci(o.auc, o.se, confidence) if o.se is not None and o.released else None
    # The keys of `fedroc evaluate --method mpc` for the same values (docs/json.md): the
    # job's facts under `mpc`, where `released` is whether the values were opened (at the
    # top level, `released` of evaluate is what left the sites).
    record = {
        "method": "mpc",
        "job": terms.job,
        "sites": [{"name": b.owner, "n": b.n} for b in items],
        "auc": o.auc,
        "auc_ci": None if ci is None else list(ci),
        "n": sum(b.n for b in items),
        "n_pos": None,  # the class counts stay secret
        "n_neg": None,
        "pr_auc": o.pr_auc,
        "auc_se": o.se,
        "auc_variance": o.variance,
        **({"auc_noties": o.auc_noties} if o.auc_noties is not None else {}),
        **({"comparison": paired_comparison(o, confidence)} if o.auc_b is not None else {}),
        "mpc": {
            "job": terms.job,
            "sort": terms.sort,
            "delta": terms.delta if terms.sort == "delta" else None,
            "precision_bits": o.frac_bits,
            "min_class_count": o.min_class_count,
            "released": o.released,
            "seconds": result.seconds,
            "parties": [
                {"party": pid, "role": ROLE[pid], **s.to_dict()}
                for pid, s in enumerate(result.stats)
            ],
        },
    }
    if not o.released:
        # As `fedroc evaluate --method mpc` notes it: the check's one opened bit, no more.
        err.print(
            f"withheld: fewer than {o.min_class_count} positives or negatives (checked under "
            "MPC); nothing else was opened"
        )
    if as_json:
        emit_json(record)
        return
    render_run(record, confidence)


@mpc_app.command("stop")
def stop(
    cluster: ClusterFileOption,
) -> None:
    """Ask a running cluster to shut down."""
    from fedroc.mpc.net import ClusterClient, ClusterConfig

    config = ClusterConfig.load(cluster)
    ClusterClient(
        config,
        connect_timeout=5.0,
        connecting=lambda line: err.print(line, markup=False, highlight=False),
    ).shutdown()
    err.print("shutdown sent")
    sys.stdout.flush()
