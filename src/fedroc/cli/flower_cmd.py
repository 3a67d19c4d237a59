"""``fedroc flower``: fedroc across machines on Flower.

* ``fedroc flower up``: a SuperLink and N SuperNodes on this machine (TLS or insecure).
* ``fedroc flower run``: run a method (or another job) on a running federation.
* ``fedroc flower supernode``: a site's SuperNode, configured from options (real machines).
* ``fedroc flower executor``: fedroc's ClientApp beside a stock ``flower-supernode``.
* ``fedroc flower certs``: a CA and a SuperLink certificate for a real deployment.
"""

from __future__ import annotations

import signal
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from fedroc.cli._common import (
    ProgressLine,
    calibration_rounds,
    coerce_pos_label,
    emit_json,
    err,
    grid_table,
    kv_table,
    live_progress,
    name_options,
    out,
    row_label,
    sites_table,
    split_name_value,
)
from fedroc.cli._options import (
    DEFAULT_CALIBRATION_BINS,
    NO_OPTIONS,
    CalibrationBinsOption,
    ConfidenceOption,
    JsonOption,
    LabelOption,
    MinCountOption,
    PosLabelOption,
    RootCertificatesOption,
    ScoreOption,
    takes_options,
)
from fedroc.exceptions import FedrocError, InputError

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
    mpc_proxies: str,
    score_range: str | None = None,
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "min-count": min_count,
        "allow-noisy": allow_noisy,
        "allow-shares": allow_shares,
        "mpc-proxies": mpc_proxies,
    }
    if epsilon_limit is not None:
        config["epsilon-limit"] = epsilon_limit
    if delta_limit is not None:
        config["delta-limit"] = delta_limit
    if allowed_functions is not None:
        if not any(f.strip() for f in allowed_functions.split(",")):
            # Dropped, it allowed every function (a node config's "" allows none).
            raise InputError(
                f"--allowed-functions names no function ({allowed_functions!r}); leave it out "
                "to allow every function"
            )
        config["allowed-functions"] = allowed_functions
    if score_range is not None:
        config["score-range"] = score_range
    return config


# The options of `flower supernode` that set a piece of the site's policy (the node config's
# policy keys): beside --policy-file, any of them given is refused.
_POLICY_OPTIONS = (
    "min_count",
    "allow_noisy",
    "allow_shares",
    "epsilon_limit",
    "delta_limit",
    "allowed_functions",
    "mpc_proxies",
    "mpc_owner_key",
    "mpc_max_jobs",
    "mpc_only",
    "score_range",
)


def _given_options(names: tuple[str, ...]) -> list[str]:
    """Return the options among ``names`` the user gave (command line or environment)."""
    import click
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return []
    given = []
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source is not ParameterSource.DEFAULT:
            given.append("--" + name.replace("_", "-"))
    return given


def _with_policy_file(policy: dict[str, Any], policy_file: Path | None) -> dict[str, Any]:
    """Return the node config's policy: the options' keys, or ``policy-file`` alone.

    A site's operator could set only the policy options of ``flower supernode``; what else a
    policy holds (allow_exact = false, secagg_min_sites, opt_in, the minimum DP settings)
    only a node config's ``policy-file`` reached, which ``flower supernode`` did not take.
    A policy option typed beside it is refused whatever its value: compared with the
    option's default, `--min-count 5` beside a file of min_count 3 started a node of 3.
    """
    if policy_file is None:
        return policy
    given = _given_options(_POLICY_OPTIONS)
    if given:
        raise InputError(
            f"give the policy either as --policy-file or as options ({', '.join(given)}), not both"
        )
    return {"policy-file": str(policy_file.resolve())}


def _up_policy(
    min_count: int, policy_file: Path | None, data: Mapping[str, Any], paths: Mapping[str, Path]
) -> Any:
    """Return the policy of every site of ``flower up``: ``--policy-file``, or ``--min-count``'s.

    A declared ``score_range`` that misses a row is refused here, before any process starts,
    naming the site and its file, rather than by each node as it starts.
    """
    from fedroc.federation.site import check_score_range
    from fedroc.privacy import DisclosurePolicy

    if policy_file is None:
        return DisclosurePolicy(min_count=min_count)
    if _given_options(("min_count",)):
        # As for flower supernode: --min-count 5 beside a file of min_count 3 is one or the other.
        raise InputError("give the policy either as --policy-file or as --min-count, not both")
    policy = DisclosurePolicy.from_toml(policy_file)
    for name, site_data in data.items():
        check_score_range(name, site_data, policy, paths[name])
    return policy


def _check_declared_grids(policy: Any, deployment: Any) -> None:
    """Refuse a declared ``score_range`` that a site's ledger in ``--dir`` bound otherwise.

    Each node refuses it when it builds its site, after ``flower up`` said every node was
    connected and running: the first job then waited 60 s for sites "misconfigured on
    their SuperNode", the reason only in the nodes' logs.
    """
    from fedroc.federation.site import check_declared_grid
    from fedroc.privacy.ledger import BudgetLedger, ledger_path_for

    if policy.score_range is None:
        return
    for name, config in deployment.sites.items():
        ledger = ledger_path_for(config.audit_path)
        if ledger.exists():
            check_declared_grid(name, policy, BudgetLedger(path=ledger))


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
    label: LabelOption = "label",
    score: ScoreOption = "score",
    cluster: Annotated[
        str | None,
        typer.Option(help="Cluster column of every site's data (for --method clustered)."),
    ] = None,
    pos_label: PosLabelOption = None,
    min_count: MinCountOption = 5,
    policy_file: Annotated[
        Path | None,
        typer.Option(
            help="Every site's disclosure policy as a TOML file (score_range, allow_exact, "
            "secagg_min_sites, ...; docs/privacy.md), instead of --min-count.",
        ),
    ] = None,
    directory: Annotated[
        Path | None,
        typer.Option("--dir", help="Working directory (certificates, logs, audit logs)."),
    ] = None,
    insecure: Annotated[
        bool, typer.Option(help="No TLS (plain HTTP on loopback), for quick tests.")
    ] = False,
    stock: Annotated[
        bool,
        typer.Option(
            help="Run stock flower-supernode processes (in process isolation, with fedroc's "
            "executor) instead of fedroc's tuned ones."
        ),
    ] = False,
    port: Annotated[int | None, typer.Option(help="SuperLink port (default: a free one).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic data.")] = 2024,
    duration: Annotated[
        float | None,
        typer.Option(help="Stop after this many seconds (default: run until Ctrl-C)."),
    ] = None,
    no_restart: Annotated[
        bool,
        typer.Option(
            "--no-restart", help="Report processes that exit but do not start them again."
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the connection as one JSON object.")
    ] = False,
) -> None:
    """Start a SuperLink and one SuperNode per site on loopback; stop them on Ctrl-C.

    With TLS (the default) each site gets its own key pair, registered with the SuperLink
    under the site's name (SuperNode authentication); the SuperLink keeps the node
    registrations in DIR/superlink/state.db (runs in flight are lost with it). Processes
    that exit are reported and restarted.
    """
    from fedroc.datasets import make_multisite
    from fedroc.federation.flower.deploy import LocalDeployment
    from fedroc.federation.flower.site_config import SiteNodeConfig

    if port is not None:
        _check_port(port, serves="the SuperLink")
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
    from fedroc.cli._common import (
        check_site_files,
        load_site_data,
        note_mixed_score_scales,
        warn_shared_files,
    )
    from fedroc.data import Columns

    if paths:
        check_site_files(paths)
    else:
        count = sites or 3
        (work / "data").mkdir(parents=True, exist_ok=True)
        sizes = [300 + 70 * (k % 4) for k in range(count)]
        for name, frame in make_multisite(sizes, seed=seed).items():
            paths[name] = work / "data" / f"{name}.csv"
            frame.to_csv(paths[name], index=False)
    # A missing file, a mistyped column or a bad label was found only by the first job, as
    # "site 'north' is misconfigured on its SuperNode (details in its log)"; the synthetic
    # sites' columns (label, score, patient) too.
    loaded = load_site_data(paths, Columns(label, score, cluster), coerce_pos_label(pos_label))
    note_mixed_score_scales(loaded)  # before a site's ledger binds the rows of a mistake
    policy = _up_policy(min_count, policy_file, loaded, paths)
    # No audit path: each site's audit log (and privacy ledger) lives in its node directory.
    configs = [
        SiteNodeConfig(
            site=name,
            data=path,
            label=label,
            score=score,
            cluster=cluster,
            pos_label=coerce_pos_label(pos_label),
            policy=policy,
        )
        for name, path in paths.items()
    ]
    deployment = LocalDeployment(configs, work, insecure=insecure, tuned=not stock, port=port)
    _check_declared_grids(policy, deployment)
    warn_shared_files(paths)  # after the checks: a refusal stays its one line
    err.print(f"starting a SuperLink and {len(configs)} SuperNode(s) in {work} ...")
    stop = {"now": False}

    def _stop(signum: int, frame: Any) -> None:
        stop["now"] = True

    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        deployment.start(progress=lambda step: err.print(f"  {step}", highlight=False))
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
                        (
                            "SuperNodes",
                            "stock flower-supernode, fedroc executor" if stock else "fedroc tuned",
                        ),
                        (
                            "SuperNode authentication",
                            "on (a key pair per site)" if deployment.node_auth else "off",
                        ),
                        ("node directories", str(work / "nodes")),
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
            time.sleep(0.5)
            # A process that died is reported and started again (the SuperLink keeps the
            # node registrations in its database, the nodes their keys and audit logs).
            for event in deployment.supervise(restart=not no_restart):
                err.print(f"[bold yellow]{time.strftime('%H:%M:%S')}[/] {event}", highlight=False)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        deployment.stop()
        err.print("stopped")


def _connection(
    deployment: Path | None,
    superlink: str | None,
    root_certificates: Path | None,
    insecure: bool,
    sites: list[str] | None,
) -> Any:
    """Choose the SuperLink to submit to: a deployment's, or one given by address."""
    from fedroc.federation.flower.deploy import FlowerConnection, check_address

    if deployment is not None and superlink is not None:
        raise InputError("give --deployment or --superlink, not both")
    if deployment is not None:
        connection = FlowerConnection.from_file(deployment)
    elif superlink is not None:
        check_address(superlink, "--superlink")
        if root_certificates is None and not insecure:  # the API's message named its keywords
            raise InputError(
                "give --root-certificates CA.pem (the CA of the SuperLink's certificate), or "
                "--insecure for a SuperLink without TLS"
            )
        connection = FlowerConnection(superlink, root_certificates, insecure)
    else:
        raise InputError("give --deployment DIR (from `fedroc flower up`) or --superlink HOST:PORT")
    return connection.with_sites(sites) if sites else connection


def _check_certificates(path: Path) -> None:
    """Refuse a --root-certificates file that is not PEM certificates, naming it.

    ``flwr run`` was started with it and failed in a boxed message of its own ("`flwr run`
    started no run: ...╮ │ 'ascii' codec can't decode byte 0xff"), naming no file for a
    file that was not a certificate.
    """
    from cryptography import x509

    from fedroc._files import reading

    with reading(path, "--root-certificates file") as p:
        data = p.read_bytes()
    try:
        x509.load_pem_x509_certificates(data)
    except ValueError:
        raise InputError(
            f"--root-certificates {str(path)!r} holds no PEM certificate (a CA certificate, "
            "e.g. ca.crt of `fedroc flower certs`)"
        ) from None


def _site_key_files(specs: list[str]) -> list[tuple[str, str]]:
    """``--site-key NAME=PUBLIC_KEY_FILE`` options as (site, public key file) pairs."""
    return [split_name_value(spec, "--site-key", "NAME=PUBLIC_KEY_FILE") for spec in specs]


def _site_keys(specs: list[str]) -> dict[str, tuple[str, ...]]:
    """``--site-key NAME=PUBLIC_KEY_FILE`` options as {site: key fingerprints}."""
    from fedroc.federation.flower.identity import public_key_fingerprint

    keys: dict[str, tuple[str, ...]] = {}
    for name, path in _site_key_files(specs):
        keys[name] = (*keys.get(name, ()), public_key_fingerprint(path))
    return keys


# The jobs `flower run` can give options to (fedroc.federation.flower.jobs registers them,
# with `calls` and `batch`, whose scripts only the Python API can pass: submit_job), and
# the methods a ServerApp can run: every registered one but `pooled`, whose rows never
# leave the sites. Checked here, at once: the ServerApp refused them only after a run's
# start-up (3.5 s on a loopback deployment).
CLI_JOBS = ("evaluate", "moments", "sites")
SCRIPT_JOBS = ("batch", "calls")


def _check_job(job: str, method: str | None) -> None:
    """Refuse an unknown ``--job`` or ``--method``, naming the option and the value."""
    from fedroc.cli.evaluate_cmd import METHOD_NAMES

    if job in SCRIPT_JOBS:
        raise InputError(
            f"--job {job} takes a script of site-function calls, which the command line cannot "
            "give; run it from Python with fedroc.federation.flower.submit_job"
        )
    if job not in CLI_JOBS:
        raise InputError(f"--job: unknown job {job!r}; one of {list(CLI_JOBS)}")
    if job != "evaluate":
        return
    methods = [m for m in METHOD_NAMES if m != "pooled"]
    if not method:
        raise InputError(f"--method is required with --job evaluate; one of {methods}")
    if method == "pooled":
        raise InputError(
            f"--method pooled needs the pooled rows, which never leave the sites on Flower; "
            f"one of {methods} (or `fedroc metrics` on a table you hold)"
        )
    if method not in methods:
        raise InputError(f"--method: unknown method {method!r}; one of {methods}")


#: Said before a moments job with --bins: what its clear calibration curve costs the sites.
CLEAR_CURVE_NOTICE = (
    "note: --bins asks each site for its calibration curve in the clear; a site that answers "
    "it refuses, for its ledger's lifetime, the secure binned counts that rocglm and "
    "histogram need (docs/flower.md)"
)


def _job_options(
    job: str,
    method: str | None,
    seed: int | None,
    confidence: float,
    bins: int | None,
    method_options: dict[str, Any],
) -> dict[str, Any]:
    """Return the job's options; refuse those of the evaluate job given to another job.

    The method's own options (``method_options``, the keywords of ``fedroc evaluate``'s,
    fedroc.cli._method_options) reach the method as ``fedroc evaluate`` gives them in
    process: the ServerApp's evaluate job passes them on, and the method checks them there
    (what depends on the sites' data only there). They are checked here first, before any
    connection, without loading the methods (pandas, scipy), which ``flower run`` does not
    import: a bad value was refused only by the ServerApp, after a run's start-up.
    """
    from fedroc.cli._method_options import (
        FLOWER_TAKES,
        KEYWORD_OPTIONS,
        check_seed,
        check_values,
        option_names,
    )
    from fedroc.cli.evaluate_cmd import check_options

    if job == "evaluate":
        assert method is not None  # _check_job
        if method == "mpc" and bins is not None:
            raise InputError(
                "--bins applies to --method mpc with --mpc-calibration, which flower run does "
                "not offer: the MPC job adds no calibration curve here"
            )
        try:
            check_options(method, method_options, FLOWER_TAKES[method])
            check_values(method_options)
            check_seed(method, seed)
        except InputError as exc:
            raise name_options(exc, option_names(method)) from None
        return {
            "method": method,
            "seed": seed,
            "confidence_level": confidence,
            "calibration_bins": DEFAULT_CALIBRATION_BINS if bins is None else bins,
            **({"options": method_options} if method_options else {}),
        }
    # These were ignored: `--job moments --seed 1` ran unseeded and said nothing.
    flags = {**KEYWORD_OPTIONS, "n_bins": "--cluster-bins", "secure": "--plain"}
    given = [
        option
        for option, value in (
            ("--method", method is not None),
            ("--seed", seed is not None),
            ("--confidence", confidence != 0.95),
            ("--bins", job != "moments" and bins is not None),
        )
        if value
    ] + [flags[k] for k in method_options]
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        jobs = "--job evaluate or moments" if given == ["--bins"] else "--job evaluate"
        raise InputError(f"{', '.join(given)} {verb} to {jobs}, not --job {job}")
    # Given --bins, the moments job adds the calibration curve of probability scores. Not by
    # default: a clear curve binds a site to clear calibration for its lifetime, where
    # evaluate's goes through secure aggregation first.
    if job != "moments" or bins is None:
        return {}
    from fedroc.federation.basic import MAX_CALIBRATION_BINS, check_calibration_bins

    try:
        check_calibration_bins(bins)
    except InputError:
        raise InputError(
            f"--bins {bins}: the sites' calibration curve takes 2 to {MAX_CALIBRATION_BINS} "
            "bins (the job would ask it after the mean, variance and Brier score)"
        ) from None
    return {"calibration_bins": bins}


def _check_seconds(options: dict[str, float | None]) -> None:
    """Refuse a time limit that is not positive (submit_job named its keyword, ``timeout``)."""
    for name, value in options.items():
        if value is not None and not value > 0:
            raise InputError(f"{name} must be a positive number of seconds; got {value:g}")


def _check_sites(sites: list[str] | None, connection: Any, deployment: Path | None) -> None:
    """Refuse a ``--site`` that no node of the run can serve, naming it, before the run.

    A site outside the deployment's (its connection.json lists them) or without a pinned
    key (``--site-key``, or the deployment's keys) was refused only by the ServerApp, once
    its discovery gave up waiting for the site: 60 s.
    """
    if not sites:
        return
    if any(not s.strip() for s in sites):
        raise InputError(f"--site needs a site name; got {sites}")
    twice = sorted({s for s in sites if sites.count(s) > 1})
    if twice:
        raise InputError(f"--site names {twice[0]!r} twice")
    listed = None
    if deployment is not None:
        from fedroc.federation.flower.deploy import FlowerConnection

        listed = FlowerConnection.from_file(deployment).sites
    if listed is not None:
        unknown = [s for s in sites if s not in listed]
        if unknown:
            raise InputError(
                f"--site {unknown[0]!r} is not a site of the deployment {str(deployment)!r}: "
                f"{sorted(listed)} (a node started beside it: give --superlink instead)"
            )
    if connection.site_keys is not None:
        unknown = [s for s in sites if s not in connection.site_keys]
        if unknown:
            raise InputError(
                f"--site {unknown[0]!r} has no key (--site-key), so its node would be "
                f"refused; sites with a key: {sorted(connection.site_keys)}"
            )


@flower_app.command("run")
@takes_options
def run(
    deployment: Annotated[
        Path | None,
        typer.Option(help="Directory of `fedroc flower up` (or its connection.json)."),
    ] = None,
    superlink: Annotated[
        str | None, typer.Option(help="SuperLink address HOST:PORT (instead of --deployment).")
    ] = None,
    root_certificates: RootCertificatesOption = None,
    insecure: Annotated[bool, typer.Option(help="Connect without TLS.")] = False,
    site: Annotated[
        list[str] | None,
        typer.Option("--site", help="A site the run needs; repeat (default: every node)."),
    ] = None,
    job: Annotated[str, typer.Option(help="evaluate, moments or sites.")] = "evaluate",
    method: Annotated[
        str | None,
        typer.Option(help="Method of the evaluate job: clustered, histogram, mpc or rocglm."),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            help="Seed of the analyst's statistical randomness (bootstrap, SIMEX); the sites "
            "draw their DP noise from their own entropy.",
            min=0,
        ),
    ] = None,
    confidence: ConfidenceOption = 0.95,
    bins: CalibrationBinsOption = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds a site may take to answer one call.")
    ] = 60.0,
    run_timeout: Annotated[
        float | None, typer.Option(help="Wall-clock limit of the whole run (seconds).")
    ] = None,
    discovery_timeout: Annotated[
        float,
        typer.Option(
            help="Seconds to wait for the sites' SuperNodes to connect and name their sites."
        ),
    ] = 60.0,
    site_key: Annotated[
        list[str] | None,
        typer.Option(
            "--site-key",
            help="NAME=PUBLIC_KEY_FILE: accept site NAME only from a node with this key; "
            "repeat per site.",
        ),
    ] = None,
    no_node_auth: Annotated[
        bool,
        typer.Option(
            "--no-node-auth",  # named: typer made it --no-node-auth/--no-no-node-auth
            help="Accept SuperNodes that are not registered under the site they declare "
            "(a SuperLink without --enable-supernode-auth).",
        ),
    ] = False,
    # --- beyond the AUC, and the methods' own options: those of `fedroc evaluate` ---
    asks: Mapping[str, Any] = NO_OPTIONS,  # ASK_OPTIONS: --max-fpr, --at-specificity, ...
    compare_score: Annotated[
        str | None,
        typer.Option(
            hidden=True,  # refused, with the reason: a SuperNode serves one score column
            help="Not on Flower: each SuperNode serves the one score column of its node config.",
        ),
    ] = None,
    # rocglm (paper 1), histogram (paper 5), clustered (paper 3): SHARED_METHOD_OPTIONS
    method_options: Mapping[str, Any] = NO_OPTIONS,
    mpc_min_class_count: Annotated[
        int | None,
        typer.Option(
            help="mpc: Open nothing unless both classes have this many samples (default 5; "
            "a site refuses a job below its --min-count)."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run a fedroc job (by default: evaluate one method) on a Flower federation."""
    from dataclasses import replace

    from fedroc.cli._method_options import ask_keywords, method_keywords, option_names
    from fedroc.federation.flower.deploy import submit_job

    _check_seconds(
        {
            "--timeout": timeout,
            "--run-timeout": run_timeout,
            "--discovery-timeout": discovery_timeout,
        }
    )
    connection = _connection(deployment, superlink, root_certificates, insecure, site)
    if site_key:
        connection = replace(connection, site_keys=_site_keys(site_key))
    if no_node_auth:
        connection = replace(connection, node_auth=False, site_keys=None)
    _check_job(job, method)
    if compare_score is not None:
        raise InputError(
            "--compare-score does not apply on Flower: each SuperNode serves the one score "
            "column of its node config (`fedroc flower supernode --score`); compare two "
            "models with `fedroc evaluate --compare-score` where the rows are at hand"
        )
    # Without it an MPC job over sites whose --min-count exceeds 5 could not run: each refused
    # "the job's minimum class count 5 is below the site's minimum of 10", and no option of
    # flower run could raise it (`fedroc evaluate --mpc-min-class-count` can).
    given_options = method_keywords(**method_options, mpc_min_class_count=mpc_min_class_count)
    given_options.update(ask_keywords(**asks))
    options = _job_options(job, method, seed, confidence, bins, given_options)
    _check_sites(site, connection, deployment)
    if root_certificates is not None:  # last: the options' own errors come first
        _check_certificates(root_certificates)
    if "calibration_bins" in options and job == "moments":
        # A clear curve binds every site that answers it for its ledger's lifetime, which
        # only docs/flower.md said: the walkthrough ran it first and lost rocglm and
        # histogram at every site for good.
        err.print(CLEAR_CURVE_NOTICE, highlight=False, markup=False, soft_wrap=True)
    # The job runs in the ServerApp's process; its log reports each call to the sites, and
    # the line shows them as `fedroc evaluate` shows its in-process calls.
    line = ProgressLine(method or job, f"submitted to Flower ({connection.address})")

    def status_only(step: Any) -> None:
        # Off a terminal (a log, CI) no progress line is drawn, but a wait of up to
        # --discovery-timeout for a site no node serves is said, once, as a line.
        if isinstance(step, str):
            err.print(f"{line.label}: {step}", highlight=False, markup=False, soft_wrap=True)

    with live_progress(err, line) as show:
        try:
            payload = submit_job(
                connection,
                job,
                options,
                timeout=timeout,
                discovery_timeout=discovery_timeout,
                run_timeout=run_timeout,
                progress=show or status_only,
            )
        except InputError as exc:  # the method's refusal in the ServerApp names its keywords
            raise name_options(exc, option_names(method or "")) from None
        except FedrocError as exc:
            raise _stopped_deployment(exc, deployment) from None
    result = dict(payload["result"])
    refused = payload.get("refused") or {}
    result["flower"] = {
        "run_id": payload["run_id"],
        "nodes": payload["node_ids"],
        "refused_nodes": refused,
    }
    for why in refused.values():
        err.print(f"[bold yellow]warning:[/] {why}", highlight=False)
    if as_json:
        emit_json(result)
        return
    rows = _result_rows(result, f"{confidence:.0%}")
    rows.append(("Flower run", payload["run_id"]))
    out.print(kv_table(f"fedroc on Flower: {job}", rows))
    sites_rows = result.get("sites")
    if isinstance(sites_rows, list) and sites_rows and isinstance(sites_rows[0], dict):
        out.print(sites_table(sites_rows))


def _stopped_deployment(exc: FedrocError, deployment: Path | None) -> FedrocError:
    """Add what to run when nothing listens at a deployment's SuperLink.

    `flower run --deployment DIR` on a stopped `fedroc flower up` said only Flower's
    "Connection to the SuperLink is unavailable" and "Connection refused".
    """
    if deployment is None or type(exc) is not FedrocError or "Connection refused" not in str(exc):
        return exc
    return FedrocError(
        f"{exc}; is the deployment in {str(deployment)!r} still up? Its SuperLink stops with "
        f"`fedroc flower up` (Ctrl-C or --duration); start it again with `fedroc flower up "
        f"--dir {deployment}` (and the same --data)"
    )


def _result_rows(result: dict[str, Any], level: str | None = None) -> list[tuple[str, Any]]:
    """Return a job's table rows: its values, caveats and notes as fedroc evaluate shows them.

    ``level`` ("90%") puts the intervals' level in their labels, as fedroc evaluate does:
    `flower run --confidence 0.9` labelled its 90% interval "AUC confidence interval".
    """
    # Each row in words (row_label), as fedroc evaluate labels it: not by its JSON key.
    method = result.get("method")
    rows: list[tuple[str, Any]] = []
    for key, value in result.items():
        if isinstance(value, (int, float, str)) or value is None:
            rows.append((row_label(key, method, level), value))
        if key == "auc" and isinstance(result.get("auc_ci"), list):
            # Under the AUC, as fedroc evaluate shows it: it came last, below the counts.
            rows.append((row_label("auc_ci", method, level), tuple(result["auc_ci"])))
    # As fedroc evaluate prints them: a caveat, a list of names or notes, one per row.
    for key, value in result.items():
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            rows += [("caveat" if key == "caveats" else row_label(key, method), v) for v in value]
    released = result.get("released")
    if isinstance(released, dict):
        rows.append(("rounds", released.get("rounds")))
        rows += calibration_rounds(result)
        rows.append(("bytes sent by sites", sum(released.get("bytes_received", {}).values())))
        rows += [("released", str(note)) for note in released.get("notes") or []]
    return rows


def _owner_key(site: str, path: Path | None, home: Path) -> Path:
    """Return the node's MPC owner key file: ``path`` (checked) or NODE_DIR/owner.key (made)."""
    from fedroc.mpc.certs import owner_line
    from fedroc.mpc.owner import load_owner_key, owner_public_bytes, write_owner_key

    if path is not None:
        try:
            public = owner_public_bytes(load_owner_key(path))
        except InputError as exc:
            raise InputError(f"--mpc-owner-key: {exc}") from None
        key = path.resolve()
    else:
        key = home / "owner.key"
        if key.exists():
            public = owner_public_bytes(load_owner_key(key))
        else:
            home.mkdir(parents=True, exist_ok=True)
            public = write_owner_key(key)
    err.print(
        f"MPC owner key {key}; the cluster's operator registers it under [owners]: "
        + owner_line(site, public),
        highlight=False,
    )
    return key


def _check_port_number(port: int | str) -> int:
    """Return ``--port`` as a number; refuse one outside 1-65535 or not in ASCII digits."""
    if isinstance(port, str):
        if not (port.isascii() and port.isdigit()):
            raise InputError(f"--port must be a port number from 1 to 65535; got {port!r}")
        port = int(port)
    if not 1 <= port <= 65535:
        raise InputError(f"--port must be a port number from 1 to 65535; got {port}")
    return port


def _check_port(port: int, host: str = "127.0.0.1", serves: str = "its local Runtime API") -> None:
    """Refuse a ``--port`` that is out of range or taken on ``host``, naming it, at once.

    The node's (``flower supernode``): out of range, Flower's argument parser printed its
    whole usage after the site was loaded; taken (a second node on the machine kept the
    default 9094), the node printed a traceback ("SuperNode Runtime HTTP API failed to
    start") and was restarted forever. The SuperLink's (``flower up``, ``flower
    superlink``): "process [...] exited with status 2", or a failed key registration that
    quoted Flower's "Connection to the SuperLink is unavailable" three times.
    """
    import socket

    _check_port_number(port)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise InputError(
                f"--port {port}: {host}:{port}, where it would serve {serves}, is not free "
                f"({exc.strerror}; another process listens there? give another --port)"
            ) from None


@flower_app.command("supernode")
def supernode(
    superlink: Annotated[str, typer.Option(help="SuperLink Fleet address HOST:PORT.")],
    site: Annotated[str, typer.Option(help="This site's name.")],
    data: Annotated[Path, typer.Option(help="This site's data (CSV or Parquet).")],
    root_certificates: RootCertificatesOption = None,
    insecure: Annotated[bool, typer.Option(help="Connect without TLS (tests only).")] = False,
    node_dir: Annotated[
        Path | None,
        typer.Option(
            help="The node's directory: its key pair, audit log, privacy ledger and status "
            "(default: ./fedroc-node-SITE). Keep it across restarts and back it up.",
        ),
    ] = None,
    auth_key: Annotated[
        Path | None,
        typer.Option(
            help="The node's private key (OpenSSH, EC P-384); default NODE_DIR/node-auth.key, "
            "created on first start. Register its .pub with the SuperLink under --site."
        ),
    ] = None,
    no_node_auth: Annotated[
        bool,
        typer.Option(
            "--no-node-auth",  # named: typer made it --no-node-auth/--no-no-node-auth
            help="Connect without a key (SuperLink without node auth).",
        ),
    ] = False,
    label: LabelOption = "label",
    score: ScoreOption = "score",
    cluster: Annotated[str | None, typer.Option(help="Cluster column.")] = None,
    pos_label: PosLabelOption = None,
    min_count: MinCountOption = 5,
    allow_noisy: Annotated[bool, typer.Option(help="Allow DP-noisy releases.")] = True,
    allow_shares: Annotated[bool, typer.Option(help="Allow secret shares.")] = True,
    epsilon_limit: Annotated[
        float | None,
        typer.Option(help="Lifetime epsilon budget (the ledger beside the audit log keeps it)."),
    ] = None,
    delta_limit: Annotated[
        float | None,
        typer.Option(help="Lifetime delta budget (the ledger beside the audit log keeps it)."),
    ] = None,
    allowed_functions: Annotated[
        str | None, typer.Option(help="Comma-separated site functions the site runs.")
    ] = None,
    mpc_proxies: Annotated[
        str,
        typer.Option(
            help="MPC shares only for the proxies of this cluster file (fedroc mpc certs); "
            "'none' (default): no MPC job; 'any': the job's proxies (trusts the analyst)."
        ),
    ] = "none",
    mpc_owner_key: Annotated[
        Path | None,
        typer.Option(
            help="The site's MPC owner key (PEM), registered under [owners] in the cluster "
            "file; default with --mpc-proxies CLUSTER: NODE_DIR/owner.key, created on first "
            "start (its [owners] line is printed)."
        ),
    ] = None,
    mpc_max_jobs: Annotated[
        int | None,
        typer.Option(help="MPC jobs the site authorises in its lifetime (default 1).", min=0),
    ] = None,
    mpc_only: Annotated[
        bool | None,
        typer.Option(
            "--mpc-only/--no-mpc-only",
            help="Serve only MPC jobs (default where --mpc-proxies names a cluster: the job "
            "keeps the class counts secret, the other methods give them).",
        ),
    ] = None,
    score_range: Annotated[
        str | None,
        typer.Option(
            help="A public range LO,HI that holds every score of the site (policy "
            "score_range; checked at start): the site then answers whether its scores are "
            "probabilities or lie in a range from it, not from its rows, and its one grid of "
            "exact counts is over it (docs/privacy.md).",
        ),
    ] = None,
    policy_file: Annotated[
        Path | None,
        typer.Option(
            help="The site's disclosure policy as a TOML file (every setting: allow_exact, "
            "secagg_min_sites, opt_in, ...; docs/privacy.md), instead of the policy options."
        ),
    ] = None,
    audit: Annotated[
        Path | None, typer.Option(help="Audit log (JSON lines); default NODE_DIR/audit.jsonl.")
    ] = None,
    port: Annotated[int, typer.Option(help="Port of the node's local Runtime API.")] = 9094,
    no_restart: Annotated[
        bool,
        typer.Option(
            "--no-restart",
            help="Exit when the SuperNode exits (leave restarts to systemd or Docker); by "
            "default it is started again, backing off up to 30 s, e.g. after a SuperLink outage.",
        ),
    ] = False,
) -> None:
    """Serve one site: a SuperNode tuned for fedroc (use it on each site's machine)."""
    from fedroc.federation.flower.deploy import check_address, node_config_toml
    from fedroc.federation.flower.identity import generate_node_key
    from fedroc.federation.flower.node import supervise
    from fedroc.federation.flower.site_config import SiteNodeConfig
    from fedroc.federation.roster import KEY_NAME, ROSTER_NAME, public_key_text, write_signing_key

    check_address(superlink, "--superlink")
    _check_port_number(port)
    if insecure == (root_certificates is not None):
        raise InputError("give --root-certificates CA.pem, or --insecure for a test on loopback")
    if root_certificates is not None:  # a bad CA made the node retry as if the link were down
        _check_certificates(root_certificates)
    if insecure and not no_node_auth:
        no_node_auth = True  # Flower authenticates SuperNodes only over TLS
    home = (node_dir or Path(f"fedroc-node-{site}")).resolve()
    config: dict[str, Any] = {"site": site, "data": str(data.resolve()), "label": label}
    config["score"] = score
    if cluster:
        config["cluster"] = cluster
    if pos_label is not None:
        config["pos-label"] = coerce_pos_label(pos_label)
    if mpc_proxies not in ("any", "none"):
        from fedroc.mpc.net import ClusterConfig

        cluster_file = Path(mpc_proxies).resolve()
        try:
            ClusterConfig.load(cluster_file).proxy_key_bytes()  # refused now, not per job
        except InputError as exc:
            raise InputError(f"--mpc-proxies: {exc}") from None
        mpc_proxies = str(cluster_file)
    policy = _policy_config(
        min_count,
        allow_noisy,
        allow_shares,
        epsilon_limit,
        delta_limit,
        allowed_functions,
        mpc_proxies,
        score_range,
    )
    config.update(_with_policy_file(policy, policy_file))
    if mpc_only is not None:
        config["mpc-only"] = mpc_only
    if mpc_max_jobs is not None:
        config["mpc-max-jobs"] = mpc_max_jobs
    if mpc_owner_key is not None or mpc_proxies not in ("any", "none"):
        config["mpc-owner-key"] = str(_owner_key(site, mpc_owner_key, home))
    config["node-dir"] = str(home)
    config["audit"] = str((audit or home / "audit.jsonl").resolve())
    parsed = SiteNodeConfig.from_node_config(config)
    if (home / ROSTER_NAME).exists():
        write_signing_key(home / KEY_NAME)  # a roster is configured: the site needs its key
    site_obj = parsed.build()  # fail here, with the reason, rather than on the first call
    _check_port(port)  # after the site's own checks: a taken port is the machine's state
    # Its secure-aggregation key: the other sites' operators list its public key in their
    # rosters, and this site aggregates only with the sites in NODE_DIR/roster.toml.
    secagg = write_signing_key(home / KEY_NAME)
    err.print(
        f'secure-aggregation key: {site} = "{public_key_text(secagg)}" (give this line to the '
        f"other sites' operators; list theirs in {home / ROSTER_NAME})",
        highlight=False,
    )
    home.mkdir(parents=True, exist_ok=True)
    node_config = home / "node-config.toml"
    node_config.write_text(node_config_toml(config))
    args = ["--superlink", superlink, "--node-config", str(node_config), "--port", str(port)]
    args += ["--insecure"] if insecure else ["--root-certificates", str(root_certificates)]
    if not no_node_auth:
        if auth_key is None:
            key = generate_node_key(home, site)
            auth_key = key.private_key
            err.print(
                f"node key {key.public_key} ({key.fingerprint}); the SuperLink's operator must "
                f"register it: fedroc flower register --superlink {superlink} "
                f"--root-certificates CA --site-key {site}={key.public_key} (or flwr supernode "
                f"register {key.public_key} --name {site})",
                highlight=False,
            )
        elif not auth_key.is_file():
            raise InputError(f"--auth-key {str(auth_key)!r} does not exist")
        args += ["--auth-supernode-private-key", str(Path(str(auth_key)).resolve())]
    err.print(f"{site_obj!r}: connecting to the SuperLink at {superlink} ...")
    raise typer.Exit(supervise(args, restart=not no_restart, log=err.print))


@flower_app.command("keys")
def keys(
    site: Annotated[str, typer.Option(help="The site's name (a comment in the public key).")],
    node_dir: Annotated[
        Path, typer.Option(help="Where to write node-auth.key (private) and node-auth.pub.")
    ],
    rotate: Annotated[
        bool,
        typer.Option(help="Replace an existing SuperNode key pair (node key rotation)."),
    ] = False,
    rotate_secagg: Annotated[
        bool,
        typer.Option(
            help="Replace the site's secure-aggregation key; the other sites' operators must "
            "put the new roster line in their rosters."
        ),
    ] = False,
) -> None:
    """Create a site's SuperNode key pair and its secure-aggregation key (on the site's machine).

    Existing keys are kept unless rotated: ``--rotate`` replaces the SuperNode key pair
    (register the new public key, pin its fingerprint), ``--rotate-secagg`` the
    secure-aggregation key (send the new roster line to the other sites). Either can be
    rotated alone.
    """
    from fedroc.federation.flower.identity import generate_node_key
    from fedroc.federation.roster import KEY_NAME, ROSTER_NAME, public_key_text, write_signing_key

    key_file, roster_file = Path(node_dir) / KEY_NAME, Path(node_dir) / ROSTER_NAME
    old_line = None
    if rotate_secagg and key_file.exists():
        old_line = public_key_text(write_signing_key(key_file))
    key = generate_node_key(node_dir, site, overwrite=rotate)
    out.print(f"private key (stays on this machine): {key.private_key}", highlight=False)
    out.print(
        f"public key (send it to the SuperLink's operator): {key.public_key}", highlight=False
    )
    out.print(f"fingerprint: {key.fingerprint}", highlight=False)
    secagg = write_signing_key(key_file, overwrite=rotate_secagg)
    if old_line is not None and roster_file.exists():
        # The site's own roster line must name its key, or the site refuses to start.
        text = roster_file.read_text()
        if old_line in text:
            roster_file.write_text(text.replace(old_line, public_key_text(secagg)))
            out.print(f"{roster_file}: this site's line now holds the new key", highlight=False)
    # One line, as TOML (the roster's syntax), never wrapped: the operator copies it whole.
    out.print(
        f"secure-aggregation roster line (send it to the other sites' operators): {site} = "
        f'"{public_key_text(secagg)}"; list theirs in {roster_file}',
        highlight=False,
        soft_wrap=True,
    )


@flower_app.command("register")
def register(
    superlink: Annotated[str, typer.Option(help="SuperLink address HOST:PORT.")],
    root_certificates: Annotated[Path, typer.Option(help="CA certificate of the SuperLink.")],
    site_key: Annotated[
        list[str],
        typer.Option("--site-key", help="NAME=PUBLIC_KEY_FILE; repeat per site."),
    ],
    as_json: JsonOption = False,
) -> None:
    """Register sites' public keys with a SuperLink under the sites' names."""
    from fedroc.federation.flower.deploy import (
        CONNECTION_NAME,
        FlowerConnection,
        check_address,
        flwr_executable,
        flwr_home,
        unavailable_why,
    )
    from fedroc.federation.flower.identity import public_key_fingerprint, register_sites

    check_address(superlink, "--superlink")
    keys: dict[str, Path] = {}
    for name, path in _site_key_files(site_key):
        public_key_fingerprint(path)  # a readable key, or an error naming the file
        keys[name] = Path(path).resolve()
    _check_certificates(root_certificates)  # else a boxed 'ascii' codec error of flwr's
    connection = FlowerConnection(superlink, root_certificates)
    with tempfile.TemporaryDirectory(prefix="fedroc-flwr-") as tmp:
        import os

        env = {**os.environ, **flwr_home(connection, Path(tmp))}
        try:
            nodes = register_sites([flwr_executable()], env, keys, connection_name=CONNECTION_NAME)
        except FedrocError as exc:  # Flower's "unavailable" also stood for a wrong CA
            raise FedrocError(str(exc) + unavailable_why(connection, str(exc))) from None
    rows = [(n, nodes[n], public_key_fingerprint(keys[n])) for n in keys]
    if as_json:
        emit_json({"sites": [{"name": n, "node_id": i, "fingerprint": f} for n, i, f in rows]})
        return
    out.print(
        grid_table(
            "Registered SuperNode keys",
            ["site", "node id (None: already registered)", "fingerprint"],
            rows,
        )
    )


@flower_app.command("health")
def health(
    superlink: Annotated[
        str | None, typer.Option(help="Check the SuperLink at HOST:PORT (its /health).")
    ] = None,
    root_certificates: RootCertificatesOption = None,
    insecure: Annotated[bool, typer.Option(help="The SuperLink speaks plain HTTP.")] = False,
    node_dir: Annotated[
        Path | None,
        typer.Option(help="Check the SuperNode whose directory this is (its status.json)."),
    ] = None,
    max_age: Annotated[
        float, typer.Option(help="Seconds since the node's last contact with the SuperLink.")
    ] = 60.0,
    as_json: JsonOption = False,
) -> None:
    """Health check for Docker/systemd: exit 0 when healthy, 1 when not."""
    from fedroc.federation.flower.health import check_node, check_superlink

    if (superlink is None) == (node_dir is None):
        raise InputError("give --superlink HOST:PORT or --node-dir DIR")
    if superlink is not None:
        from fedroc.federation.flower.deploy import check_address

        check_address(superlink, "--superlink")
        if not insecure and root_certificates is None:
            raise InputError("give --root-certificates CA.pem (or --insecure)")
        if not insecure and root_certificates is not None:
            _check_certificates(root_certificates)
        report = check_superlink(superlink, None if insecure else root_certificates)
    else:
        assert node_dir is not None
        report = check_node(node_dir, max_age=max_age)
    if as_json:
        emit_json(report)
    else:
        (out if report["healthy"] else err).print(
            f"{'healthy' if report['healthy'] else 'unhealthy'}: {report['detail']}",
            highlight=False,
        )
    raise typer.Exit(0 if report["healthy"] else 1)


def _check_node_config(path: Path) -> None:
    """Build the site of a node-config file, as the node's first message would, or refuse it.

    A wrong data path, a misspelt key (``min_count``) or a missing policy file was found only
    by the first job, which the analyst saw as "site 'north' is misconfigured on its
    SuperNode (details in its log)", while the executor waited without a word.

    Built through :func:`~fedroc.federation.flower.site_config.cached_site`, as the
    executor's preload and the node's messages build it in this process: the site is built
    (its data read, its ledger opened) once, not again by the preload. Its files are where
    the node's site has them: a relative path of the node config is read from this
    process's working directory, where the ClientApp runs.
    """
    import tomllib

    from fedroc.federation.flower.site_config import cached_site

    try:
        config = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"--node-config {str(path)!r} is not readable TOML: {exc}") from None
    try:
        cached_site(config)
    except InputError as exc:
        raise InputError(f"--node-config {str(path)!r}: {exc}") from None


@flower_app.command("executor")
def executor_command(
    runtime_api_address: Annotated[
        str,
        typer.Option(help="The stock node's Runtime API HOST:PORT (its --host and --port)."),
    ] = "127.0.0.1:9094",
    superexec_auth_secret_file: Annotated[
        Path | None,
        typer.Option(help="The node's --superexec-auth-secret-file (the same file)."),
    ] = None,
    node_config: Annotated[
        Path | None,
        typer.Option(
            help="The node's --node-config file (the site is loaded before its first task)."
        ),
    ] = None,
    insecure: Annotated[
        bool, typer.Option(help="Plain HTTP to the Runtime API (the node has no --ssl-certfile).")
    ] = False,
    root_certificates: Annotated[
        Path | None,
        typer.Option(help="CA certificate (PEM) of the node's Runtime API (--ssl-certfile)."),
    ] = None,
) -> None:
    """Run fedroc's ClientApp for a stock flower-supernode started with --isolation process.

    Flower's own executor (the node's default, --isolation subprocess) runs the ClientApp
    each run's app bundle names: the analyst's code, which can read the site's data file.
    This one runs only fedroc's installed ClientApp and answers any other with an error.
    """
    from fedroc.federation.flower.executor import serve

    if insecure == (root_certificates is not None):
        raise InputError(
            "give --insecure (a Runtime API on loopback without TLS) or --root-certificates "
            "CA.pem (a node with --ssl-certfile)"
        )
    if root_certificates is not None:
        _check_certificates(root_certificates)
    for option, path in (
        ("--superexec-auth-secret-file", superexec_auth_secret_file),
        ("--node-config", node_config),
    ):
        if path is not None and not path.is_file():
            raise InputError(f"{option} {str(path)!r} does not exist")
    if node_config is not None:
        _check_node_config(node_config)
    err.print(f"fedroc executor: fedroc's ClientApp for the node at {runtime_api_address}")
    serve(
        runtime_api_address,
        secret_file=superexec_auth_secret_file,
        node_config=node_config,
        insecure=insecure,
        root_certificates=root_certificates,
    )


@flower_app.command(
    "superlink",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def superlink_command(ctx: typer.Context) -> None:
    """Run Flower's SuperLink with fedroc's logs and defaults (flags as flower-superlink).

    Beside flower-superlink's flags: --link-state memory (the default on Flower 1.41: the
    node registrations written through to --database) or sql (Flower's own SQL state).
    """
    from fedroc.federation.flower.superlink import check_flower_flags, requested_address
    from fedroc.federation.flower.superlink import main as superlink_main

    port, host = requested_address(ctx.args)
    number = None if port is None else _check_port_number(port)
    check_flower_flags(ctx.args)  # a misspelt flag: Flower printed its usage
    if number is not None:  # Flower's parser printed its usage; a taken port exited with 1
        _check_port(number, host, "the SuperLink")
    superlink_main(list(ctx.args))


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
