"""``fedroc evaluate``: one method over several sites."""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fedroc.cli._common import (
    DATA_SUFFIXES,
    ProgressLine,
    calibration_rounds,
    calibration_table,
    check_audit_dir,
    check_site_files,
    coerce_pos_label,
    command_line,
    emit_json,
    err,
    grid_table,
    kv_table,
    live_progress,
    load_site_data,
    name_options,
    note_mixed_score_scales,
    operating_points_table,
    out,
    parse_sites,
    report_output,
    row_label,
    sites_table,
    warn_shared_files,
)
from fedroc.cli._method_options import (
    ASK_OPTIONS,
    FLOWER_TAKES,
    ask_keywords,
    check_seed,
    method_keywords,
    option_names,
)
from fedroc.cli._options import (
    DEFAULT_CALIBRATION_BINS,
    NO_OPTIONS,
    CalibrationBinsOption,
    CompareScoreOption,
    ConfidenceOption,
    JsonOption,
    takes_options,
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
    """Build an in-process federation of the command line's sites.

    Parameters
    ----------
    data : dict of str to SiteData
        Each site's validated rows.
    min_count : int
        Every site's minimum cell count q.
    audit_dir : Path or None
        Where each site writes ``NAME.jsonl`` (and its ledger); None keeps them in memory.
    mpc_owner_keys : Path, optional
        Folder of the sites' MPC owner keys (``owner-NAME.key``), for ``--method mpc``.
    """
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


@contextmanager
def show_progress(method: str, federation: Federation) -> Iterator[None]:
    """Show on a terminal (stderr) which round and site the method is at.

    Nothing is written when stderr is not a terminal (a pipe or a log), and never to stdout.
    """
    line = ProgressLine(method, f"starting over {len(federation.site_names)} site(s)")
    with live_progress(err, line) as show:
        federation.progress = show
        try:
            yield
        finally:
            federation.progress = None


class _StderrLines(logging.Handler):
    """Print each record's message as one line on the command's stderr console."""

    def emit(self, record: logging.LogRecord) -> None:
        err.print(record.getMessage(), markup=False, highlight=False)


@contextmanager
def mpc_notices() -> Iterator[None]:
    """Print the MPC method's notices on stderr while the block runs.

    With --mpc-cluster: "MPC job ...: trying to reach party 0 (proxy 0) at HOST:PORT ..."
    when party 0 has not answered within half a second, as ``fedroc mpc run`` prints it;
    it waited the whole connect time-out in silence before "could not reach party 0".
    """
    from fedroc.methods.mpc import NOTICES

    handler = _StderrLines(logging.INFO)
    level, propagate = NOTICES.level, NOTICES.propagate
    NOTICES.addHandler(handler)
    NOTICES.setLevel(logging.INFO)
    NOTICES.propagate = False  # once, not again by a handler of "fedroc"
    try:
        yield
    finally:
        NOTICES.removeHandler(handler)
        NOTICES.setLevel(level)
        NOTICES.propagate = propagate


def check_options(
    method: str, options: dict[str, Any], takes: Collection[str] | None = None
) -> None:
    """Refuse method options that the chosen method does not take, naming them.

    ``takes``: the keywords the method takes; by default its runner's signature (which loads
    the method modules).
    """
    # flower run gives the keywords of its methods (FLOWER_TAKES); evaluate the signatures.
    takes_of = None if takes is None else FLOWER_TAKES
    if takes is None:
        from fedroc.methods import get_method

        params = get_method(method).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return
        takes = set(params)
    wrong = [k for k in options if k not in takes]
    if "compare" in wrong or "mpc_compare" in wrong:
        raise InputError(
            f"--method {method} cannot compare two models (--compare-score): it releases no "
            "paired statistic of two scores; pooled, histogram and mpc can (docs/analysis.md)"
        )
    asks = [ASK_OPTIONS[k] for k in wrong if k in ASK_OPTIONS]
    if asks:
        raise InputError(
            f"--method {method} cannot give {', '.join(asks)}: it does not release the class "
            "counts they need; pooled, histogram and mpc can (docs/analysis.md)"
        )
    if wrong:
        # The option each keyword came from (n_bins only from --cluster-bins here: where
        # --bins sets it, the method takes it).
        names = {**option_names("clustered"), "secure": "--plain"}
        flags = ", ".join(names.get(k, "--" + k.replace("_", "-")) for k in wrong)
        raise InputError(
            f"option(s) {flags} do not apply to --method {method}"
            + _taken_by(wrong, names, takes_of)
        )
    if ("epsilon" in options) != ("delta" in options):  # rocglm's message names its keywords
        raise InputError("give both --epsilon and --delta, or neither (the default setting)")
    _check_ignored(options)


def _taken_by(
    wrong: list[str], names: Mapping[str, str], takes_of: Mapping[str, Collection[str]] | None
) -> str:
    """Say which methods take each of the options ``wrong``, or ``""`` where none does.

    "option(s) --dp-epsilon do not apply to --method pooled" said what was wrong but not what
    to do instead. ``takes_of``: each method's keywords; by default its runner's signature.
    """
    if takes_of is None:
        from fedroc.methods import get_method, method_names

        takes_of = {m: set(get_method(m).parameters) for m in method_names()}
    groups: dict[tuple[str, ...], list[str]] = {}
    for key in wrong:
        # n_bins comes from --cluster-bins here: pooled's n_bins is set by --bins.
        takers = tuple(
            m for m in takes_of if key in takes_of[m] and not (key == "n_bins" and m == "pooled")
        )
        if takers:
            groups.setdefault(takers, []).append(names.get(key, "--" + key.replace("_", "-")))
    parts = []
    for takers, flags in groups.items():
        methods = " or ".join([", ".join(takers[:-1]), takers[-1]] if len(takers) > 1 else takers)
        what = "is an option" if len(flags) == 1 else "are options"
        parts.append(f"{', '.join(flags)} {what} of --method {methods}")
    return "".join(f"; {part}" for part in parts)


def _check_pooled_site_options(
    method: str, needs_pooled: bool, min_count: int | None, audit_dir: Path | None
) -> None:
    """Refuse the sites' options for a method that reads the pooled rows itself.

    ``--method pooled`` calls no site: no aggregate is released for a minimum count to hold
    back (``--min-count 50`` passed on sites of 60 rows), and nothing is audited or charged
    (``--audit-dir`` only had the sites note their limits in new ledgers), yet both were
    taken without a word, as if the run had been checked and logged.
    """
    why = {
        "--min-count": "no aggregate is released for a minimum count to hold back",
        "--audit-dir": "nothing is released for the sites to audit or charge to a ledger",
    }
    given = [
        (option, value)
        for option, value in (("--min-count", min_count), ("--audit-dir", audit_dir))
        if value is not None
    ]
    if needs_pooled and given:
        option, value = given[0]
        raise InputError(
            f"{option} {value} does not apply to --method {method}: it reads every site's rows "
            f"itself and calls no site, so {why[option]}; leave it out (the other methods "
            "take it)"
        )


def _check_given_options(method: str, options: dict[str, Any], seed: int | None) -> None:
    """Refuse the options the method lacks, then ``--seed`` where it draws nothing.

    Before the sites are built: a refusal there left each site's ledger in ``--audit-dir``
    (their limits noted) for a command that ran nothing.
    """
    try:
        check_options(method, options)
        check_seed(method, seed)  # after: an option the method lacks is the first mistake
    except InputError as exc:
        raise name_options(exc, option_names(method)) from None


def _check_ignored(options: dict[str, Any]) -> None:
    """Refuse an option that only shapes what another option given (or a default) turns off.

    The methods take such a keyword and ignore it without a word (their defaults make a
    keyword given indistinguishable from one left out); here what the user typed is known.
    A value the method refuses anyway (``--dp-noise gaussian``) is left to its message.
    """
    from fedroc.cli._method_options import CHOICES

    noise = options.get("dp_noise")
    if noise in CHOICES["dp_noise"] and "dp_epsilon" not in options:
        raise InputError(
            f"--dp-noise {noise!r} needs --dp-epsilon (without it the counts carry no noise)"
        )
    if options.get("correction") == "none" and "bootstrap" in options:
        raise InputError(
            "--bootstrap does not apply with --correction none: it sets the resamples of the "
            "deconvolution, which 'none' leaves out"
        )
    if options.get("thresholds") == "positives" and "n_thresholds" in options:
        raise InputError(
            "--n-thresholds does not apply with --thresholds positives: it sets the size of "
            "the grid rule"
        )
    if options.get("privacy") == "paper" and "epsilon" in options:  # check_options: delta too
        # The values given replaced the paper's (epsilon, delta), and the paper's classic
        # calibration stayed, without a word: neither the paper's setting nor the values
        # alone. ('default' with values is what the values alone give: the default mechanism.)
        raise InputError(
            "--privacy 'paper' does not apply with --epsilon and --delta: it chooses the "
            "(epsilon, delta) of a run without them (paper 1's table); give one or the other "
            "(paper 1's Gaussian mechanism at your own values: --dp-calibration classic)"
        )
    if "score_levels" in options and "score_range" in options:
        raise InputError(
            "--score-range does not apply with --score-levels: the levels' lowest and highest "
            "values are the public score range"
        )
    if "mpc_delta" in options and options.get("mpc_sort") != "delta":
        raise InputError("--mpc-delta applies to --mpc-sort delta (the paper's merge) only")


# Why a method cannot weight its rows (docs/analysis.md, "Sample weights").
_NO_WEIGHTS = {
    "histogram": "its sites release counts of rows per leaf, which the disclosure policy and "
    "the DP noise are calibrated to",
    "mpc": "the secret lists carry 0/1 labels, not weights",
    "rocglm": "its DP noise and its fit are per row",
    "clustered": "its estimators weight clusters by design",
}


def check_weights(method: str, column: str | None) -> dict[str, Any]:
    """Map --sample-weight to the method's option; refuse it where the method takes no weights."""
    from fedroc.methods import get_method

    if column is None:
        return {}
    if "sample_weight" in get_method(method).parameters:
        return {"sample_weight": True}
    why = _NO_WEIGHTS.get(method, "it takes no weights")
    raise InputError(f"--sample-weight does not apply to --method {method}: {why}; use pooled")


# Keys a method leaves None because it keeps them from the analyst (the MPC method's class
# counts), not because they are missing.
_SECRET_WHEN_NONE = frozenset({"n_pos", "n_neg"})


def _extra_rows(result: EvaluationResult, level: str) -> list[tuple[str, Any]]:
    """Give the rows of the method's own scalar keys (the tables below show the rest).

    Each row is labelled in words (:func:`row_label`), never by its JSON key.
    """
    from fedroc.methods import ALIAS_KEYS

    extra = result.extra
    # Under DP the histogram's class counts are noisy floats: "n 1009.4689" read as exact.
    noisy = result.method == "histogram" and extra.get("mode") not in (None, "secure-aggregation")
    rows: list[tuple[str, Any]] = []
    for key, value in extra.items():
        if key in {"calibration", "calibration_released", "comparison", "operating_points"}:
            continue
        if key in ALIAS_KEYS.get(result.method, ()):  # shown under their other name
            continue
        if key == "max_fpr":  # in the partial AUC's label
            continue
        if key == "ci_withheld" and value is None:  # "withheld because -": nothing withheld
            continue
        if key == "epsilon" and value is None:  # the method can add DP; this run did not
            value = "none (no differential privacy)"
        value = _value_words(key, value, extra)
        label = _label(key, result, level)
        if key == "caveats":  # plain sentences: one row each
            rows += [("caveat", str(c)) for c in value]
        elif key == "auc_test" and isinstance(value, Mapping):  # rocglm --a0: a dict
            rows.append((f"H0 AUC <= {value['a0']:g}: z (logit scale)", value.get("z")))
            rows.append(("  p (one-sided)", value.get("p_value")))
        elif value is None and key in _SECRET_WHEN_NONE:  # "-" read as a missing value
            rows.append((label, "not released"))
        elif noisy and key in _COUNTS and isinstance(value, float):
            rows.append((f"{label} (noisy)", f"{value:.1f}"))
        elif isinstance(value, (int, float, str, tuple)) or value is None:
            rows.append((label, value))
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            rows += [(label, v) for v in value]  # caveats and notes, one per row
        elif isinstance(value, list) and value and len(value) <= 4:
            rows.append((label, tuple(value) if len(value) == 2 else str(value)))
    return rows


def _label(key: str, result: EvaluationResult, level: str) -> str:
    """Label a row: in words, with what another key of the result adds to it."""
    extra = result.extra
    if key == "partial_auc" and "max_fpr" in extra:
        return f"partial AUC (FPR <= {extra['max_fpr']:g}, McClish)"
    if key == "auc_ci_bootstrap" and isinstance(extra.get("bootstrap"), Mapping):
        boot = extra["bootstrap"]
        seeded = "unseeded" if boot.get("seed") is None else f"seed {boot['seed']}"
        return f"AUC {level} CI, bootstrap ({boot.get('samples')} samples, {seeded})"
    return row_label(key, result.method, level)


# The clustered method's settings in the words of `fedroc clustered`'s table: the JSON's
# names ("corollary6", "corrected") are the options' values, not a reader's words.
_VALUE_WORDS = {
    "population_estimator": {
        "corrected": "eq. 5 x I/(I-1)",
        "eq5": "eq. 5",
        "between": "between-cluster pairs",
    },
    "sigma11": {"corollary6": "I-1 (Corollary 6)", "authors": "(I-1)^2/I (the authors' code)"},
}


def _value_words(key: str, value: Any, extra: Mapping[str, Any]) -> Any:
    """Say a method's setting in words (clustered's estimator, divisor and intervals)."""
    if key == "interval" and isinstance(extra.get("n_clusters"), int):
        df = f"t, {extra['n_clusters'] - 1} df"
        return {"logit": f"{df}, logit scale", "t": df, "wald": "Wald (normal)"}.get(value, value)
    return _VALUE_WORDS.get(key, {}).get(value, value) if isinstance(value, str) else value


_COUNTS = frozenset({"n", "n_pos", "n_neg"})

# The histogram's errors of its curves and areas against the pooled rows (docs/json.md),
# in the words of the note under the table.
_POOLED_ERRORS = {
    "roc_area_error": "ROC area",
    "pr_area_error": "PR area",
    "auc_error": "AUC",
    "pr_auc_error": "PR-AUC",
    "ap_error": "average precision",
}


def render_result(result: EvaluationResult) -> None:
    """Print a result as tables: sites, the estimates, then comparison, points, calibration."""
    out.print(sites_table(result.sites))
    level = f"{result.confidence_level:.0%}"
    rows: list[tuple[str, Any]] = [("method", result.method), ("AUC", result.auc)]
    rows.append((f"{level} CI", result.auc_ci))
    rows += _extra_rows(result, level)
    rel = result.released
    rows.append(("rounds", rel.rounds))
    rows += calibration_rounds(result.extra)
    if rel.bytes_received:
        rows.append(("bytes sent by sites", sum(rel.bytes_received.values())))
    if rel.epsilon:
        rows.append(("epsilon spent (max over sites)", max(rel.epsilon.values())))
    for note in rel.notes:
        rows.append(("released", note))
    out.print(kv_table(f"Evaluation: {result.method}", rows))
    errors = [words for key, words in _POOLED_ERRORS.items() if key in result.extra]
    if errors:
        what = ", ".join(errors[:-1]) + " and " + errors[-1] if len(errors) > 1 else errors[0]
        areas = "roc_area_error" in result.extra or "pr_area_error" in result.extra
        out.print(
            f"{what} errors against the pooled rows, which this command read "
            "from the --site files (an analyst of remote sites has no such check)"
            + ("; the area errors are paper 5's Definition 1" if areas else ""),
            highlight=False,
            markup=False,
        )
    comparison = result.extra.get("comparison")
    if comparison is not None:
        out.print(
            grid_table(
                "Comparison of two models on the same rows",
                ["AUC difference (score - compare score)", f"{level} CI", "p-value", "method"],
                [
                    (
                        comparison["auc_difference"],
                        comparison["ci"],
                        comparison["p_value"],
                        comparison["method"],
                    )
                ],
            )
        )
    points = result.extra.get("operating_points")
    if points:
        out.print(operating_points_table(points, level))
    cal = result.extra.get("calibration")
    if cal is not None:
        out.print(
            calibration_table(
                "Calibration",
                cal,
                result.extra.get("calibration_noise_sd"),
                count_sd=result.extra.get("calibration_count_noise_sd"),
            )
        )


def write_report(
    path: Path,
    result: EvaluationResult,
    *,
    provenance: Any = None,
    site_data: dict[str, SiteData] | None = None,
    audit_dir: Path | None = None,
    seed: int | None = None,
) -> Path:
    """Write the HTML report of one result (fedroc.report.evaluation_report).

    Per-site figures come from ``site_data`` only for the pooled method: it holds the rows;
    a private method's report shows what its result released about each site.
    """
    from fedroc.report import evaluation_report

    site_rows = None
    if result.method == "pooled" and site_data is not None:
        from fedroc.metrics import ScoreCounts

        site_rows = []
        for name, d in site_data.items():
            auc = ScoreCounts.from_scores(d.label, d.score).auc() if 0 < d.n_pos < d.n else None
            site_rows.append({"name": name, "n": d.n, "n_pos": d.n_pos, "auc": auc})
    report = evaluation_report(
        result,
        provenance=provenance,
        site_rows=site_rows,
        audit_summary=audit_summary(audit_dir) if audit_dir is not None else None,
        seed=seed,
    )
    return report.write(path)


def audit_summary(audit_dir: Path) -> dict[str, dict[str, int]]:
    """Per site (NAME.jsonl in ``audit_dir``), the number of audit records per outcome."""
    import json

    summary: dict[str, dict[str, int]] = {}
    for log in sorted(audit_dir.glob("*.jsonl")):
        if log.name.endswith(".ledger.jsonl"):
            continue
        counts: dict[str, int] = {}
        # A line that is not UTF-8 counts as unreadable too (it ended the run in a traceback).
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                outcome = str(json.loads(line).get("outcome", "unknown"))
            except (ValueError, AttributeError):
                outcome = "unreadable"
            counts[outcome] = counts.get(outcome, 0) + 1
        summary[log.stem] = counts
    return summary


def provenance(
    *,
    inputs: dict[str, str],
    columns: dict[str, Any],
    method: str,
    options: dict[str, Any],
    seed: int | None,
) -> Any:
    """Describe this command line for the report's provenance block."""
    from fedroc import __version__
    from fedroc.report import Provenance

    shown = {k: v for k, v in options.items() if k != "site_sizes"}
    return Provenance(
        inputs=inputs,
        columns=columns,
        options={"method": method, **shown},
        seed=seed,
        command=command_line(),
        date=Provenance.now(),
        version=__version__,
    )


def _federation_from_file(
    path: Path,
    label: str | None,
    score: str | None,
    pos_label: str | None,
    min_count: int | None,
    audit_dir: Path | None,
    cluster: str | None = None,
    score_b: str | None = None,
) -> Federation:
    """Build the --sites federation, the options given on the command line winning."""
    from fedroc.federation import Federation

    columns = {
        "label": label,
        "score": score,
        "pos_label": coerce_pos_label(pos_label),
        "cluster": cluster,
        "score_b": score_b,
    }
    columns = {k: v for k, v in columns.items() if v is not None}
    policy = {} if min_count is None else {"min_count": min_count}
    flags = {"score_b": "compare_score"}
    given = [f"--{flags.get(k, k).replace('_', '-')}" for k in [*columns, *policy]]
    if audit_dir is not None:
        given.append("--audit-dir")
    if given:
        err.print(
            f"note: {', '.join(given)} given on the command line "
            f"{'overrides' if len(given) == 1 else 'override'} {str(path)!r} for every site",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    return Federation.from_toml(path, columns=columns, policy=policy, audit_dir=audit_dir)


def _note_unused_clusters(path: Path, method: str, needs_clusters: bool) -> None:
    """Say on stderr that the --sites file's cluster column goes unused by ``method``.

    ``--cluster`` on the command line is refused for such a method; a file's column is a
    setting shared by every method run on the file, so it gets a note, not a refusal: the
    interval treats a cluster's correlated rows as independent (too narrow).
    """
    import tomllib

    if needs_clusters:
        return
    with path.open("rb") as fh:  # read by Federation.from_toml just before
        config = tomllib.load(fh)
    tables = [config.get("columns", {})]
    tables += [cfg.get("columns", {}) for cfg in config.get("sites", {}).values()]
    names = sorted({str(t["cluster"]) for t in tables if isinstance(t, dict) and "cluster" in t})
    if names:
        err.print(
            f"note: {str(path)!r} names a cluster column ({', '.join(map(repr, names))}); "
            f"--method {method} treats the rows as independent and ignores it, so its interval "
            "is too narrow where rows of a cluster are correlated: --method clustered uses it",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


# The names fedroc.methods registers, in its order (tests/test_cli_errors.py checks that they
# are the same): a missing or mistyped --method is refused without loading every method
# module (numpy, pandas, scipy: three seconds on a busy machine).
METHOD_NAMES = ("clustered", "histogram", "mpc", "pooled", "rocglm")


def _check_method_name(method: str | None) -> str:
    """Refuse a missing or unknown ``--method``, naming the option, before any heavy import.

    A method registered in this process by other code (register_method) is known once
    fedroc.methods is loaded; the registry is asked only then.
    """
    names = list(METHOD_NAMES)
    if "fedroc.methods" in sys.modules:
        from fedroc.methods import method_names

        names += [m for m in method_names() if m not in names]
    if not method:
        raise InputError(f"--method is required; one of {names}")
    if method not in names:
        raise InputError(f"--method: unknown method {method!r}; one of {names}")
    return method


def _check_usage(
    method: str, site: list[str] | None, sites_file: Path | None, cluster: str | None
) -> None:
    """Check what needs no method module, so that a usage error is reported at once.

    Loading the methods (numpy, pandas, scipy) takes seconds on a busy machine.
    """
    _check_method_name(method)
    if method == "clustered" and cluster is None and sites_file is None:
        raise InputError("--method clustered needs --cluster COL (the cluster id column)")
    if sites_file is not None and site:
        raise InputError("give either --site NAME=PATH options or --sites FILE, not both")
    if sites_file is not None and sites_file.suffix.lower() in DATA_SUFFIXES:
        raise InputError(
            f"--sites {str(sites_file)!r} is a data file; --sites takes a TOML file describing "
            f"the sites (README, 'federation.toml'); give each data file as --site NAME=PATH: "
            f"--site {sites_file.stem}={sites_file}"
        )
    if sites_file is None:
        if not site:
            raise InputError("give at least one --site NAME=PATH (or --sites FILE)")
        check_site_files(parse_sites(site))


@takes_options
def evaluate_command(
    site: Annotated[
        list[str] | None,
        typer.Option(
            "--site",
            metavar="NAME=PATH",
            help="A site as NAME=PATH (CSV or Parquet); repeat per site.",
        ),
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
            help="Seed of the analyst's own randomness (pooled and histogram: the bootstraps "
            "of --bootstrap, of the operating points' intervals and of the report's ROC "
            "band; rocglm, mpc and clustered draw none and refuse it). The sites' DP noise is "
            "theirs: a site seeds it only from its own configuration (noise_seed in TOML).",
            min=0,
        ),
    ] = None,
    confidence: ConfidenceOption = 0.95,
    bins: CalibrationBinsOption = None,
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
    report: Annotated[
        Path | None,
        typer.Option(
            help="Write an HTML report here.",
            # checked as the command line is read, not after the sites have answered
            callback=lambda path: None if path is None else report_output("--report", path),
        ),
    ] = None,
    # --- beyond the AUC (methods that release enough; others refuse, naming the method) ---
    compare_score: CompareScoreOption = None,
    asks: Mapping[str, Any] = NO_OPTIONS,  # ASK_OPTIONS: --max-fpr, --at-specificity, ...
    sample_weight: Annotated[
        str | None,
        typer.Option(
            "--sample-weight",
            help="pooled: Column of sample weights (AUC, partial AUC, average precision, "
            "Brier score and operating points as scikit-learn's; no CI; default: every row "
            "weighs 1).",
        ),
    ] = None,
    # --- rocglm (paper 1), histogram (paper 5), clustered (paper 3): SHARED_METHOD_OPTIONS
    method_options: Mapping[str, Any] = NO_OPTIONS,
    # --- mpc (paper 4) ---
    mpc_cluster: Annotated[
        Path | None,
        typer.Option(help="mpc: Cluster file of running parties (default: 3 local processes)."),
    ] = None,
    mpc_sort: Annotated[
        str | None, typer.Option(help="mpc: Merge, 'oblivious' (default) or 'delta' (the paper's).")
    ] = None,
    mpc_delta: Annotated[
        int | None, typer.Option(help="mpc: The paper's delta (odd; default 1).")
    ] = None,
    mpc_owner_keys: Annotated[
        Path | None,
        typer.Option(
            help="mpc: Directory of the sites' owner keys (owner-NAME.key), registered with "
            "--mpc-cluster (default: a fresh key per site, which only local parties accept)."
        ),
    ] = None,
    mpc_precision: Annotated[
        int | None, typer.Option(help="mpc: Bits of the opened values (default 14).")
    ] = None,
    mpc_min_class_count: Annotated[
        int | None,
        typer.Option(
            help="mpc: Open nothing unless both classes have this many samples (default 5)."
        ),
    ] = None,
    mpc_calibration: Annotated[
        bool,
        typer.Option(
            "--mpc-calibration",
            help="mpc: Add the calibration curve (secure aggregation); its counts give the "
            "class counts P and N, which the MPC job otherwise keeps secret.",
        ),
    ] = False,
    cluster: Annotated[
        str | None,
        typer.Option(help="clustered: Cluster id column (each cluster inside one site; required)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Evaluate a score over several sites with one method.

    Sites come from --site NAME=PATH options or from a --sites TOML file. With --sites,
    --label, --score, --pos-label, --min-count and --audit-dir given on the command line
    override the file's values for every site (a note on stderr says which); the file's
    values apply only where the command line is silent.
    """
    _check_usage(method, site, sites_file, cluster)
    check_audit_dir(audit_dir)
    from fedroc.methods import evaluate, get_method

    spec = get_method(method)  # before any file is read
    _check_pooled_site_options(method, spec.needs_pooled, min_count, audit_dir)
    if cluster is not None and not spec.needs_clusters:
        # The method would read the column and ignore it: its interval treats the rows as
        # independent, which a user who named the clusters did not ask for.
        raise InputError(
            f"--cluster {cluster!r} does not apply to --method {method}: it treats the rows "
            "as independent and would ignore the clusters; use --method clustered (across "
            "sites) or `fedroc clustered FILE` (one file)"
        )
    if method == "mpc" and bins is not None and not mpc_calibration:
        raise InputError(
            "--bins applies to --method mpc with --mpc-calibration (without it the MPC job "
            "adds no calibration curve)"
        )
    n_bins = DEFAULT_CALIBRATION_BINS if bins is None else bins
    options: dict[str, Any] = check_weights(method, sample_weight)
    if sites_file is not None and spec.needs_pooled:
        raise InputError(
            f"--method {method} reads the rows itself: give the sites as --site NAME=PATH, "
            "not --sites FILE"
        )
    # The method options given, under the methods' keywords (the ServerApp's evaluate job
    # takes the same from `fedroc flower run`).
    options.update(
        method_keywords(
            **method_options,
            mpc_cluster=None if mpc_cluster is None else str(mpc_cluster),
            mpc_sort=mpc_sort,
            mpc_delta=mpc_delta,
            mpc_precision=mpc_precision,
            mpc_min_class_count=mpc_min_class_count,
            mpc_calibration=mpc_calibration,
        )
    )
    options.update(ask_keywords(**asks, compare_score=compare_score))
    if method == "mpc" and options.pop("compare", False):
        options["mpc_compare"] = True  # paired DeLong under MPC
    _check_given_options(method, options, seed)  # before any file is read or site built
    pooled: SiteData | None
    site_data: dict[str, SiteData] | None = None
    paths: dict[str, Path] = {}  # the --site files (none with --sites FILE)
    if sites_file is not None:
        if mpc_owner_keys is not None:
            raise InputError("--mpc-owner-keys configures sites given with --site only")
        federation = _federation_from_file(
            sites_file, label, score, pos_label, min_count, audit_dir, cluster, compare_score
        )
        _note_unused_clusters(sites_file, method, spec.needs_clusters)
        pooled = None
    else:
        from fedroc.data import Columns
        from fedroc.methods import pool_site_data

        paths = parse_sites(site or [])
        data = load_site_data(
            paths,
            Columns(
                label or DEFAULT_LABEL,
                score or DEFAULT_SCORE,
                cluster,
                compare_score,
                sample_weight,
            ),
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
        note_mixed_score_scales(data)
        pooled = pool_site_data(data)
        site_data = data
        if method == "mpc" and mpc_min_class_count is None:
            # The sites built here refuse an MPC job below their --min-count.
            options["mpc_min_class_count"] = max(
                5, DEFAULT_MIN_COUNT if min_count is None else min_count
            )
        if method == "pooled":
            if "n_bins" in options:  # --cluster-bins: pooled's n_bins is --bins
                raise InputError("option(s) --cluster-bins do not apply to --method pooled")
            options["site_sizes"] = {k: v.n for k, v in data.items()}
            options["n_bins"] = n_bins
    if method == "mpc":
        options["mpc_calibration_bins"] = n_bins
    try:
        check_options(method, options)  # again: the options the sites' data added
        notices = mpc_notices() if method == "mpc" else nullcontext()
        with show_progress(method, federation), notices:
            result = evaluate(
                federation,
                method,
                pooled=pooled,
                seed=seed,
                confidence_level=confidence,
                calibration_bins=n_bins,
                **options,
            )
    except InputError as exc:
        raise name_options(exc, option_names(method)) from None
    # Said of a run that went ahead (a refusal stays its one line); none with --sites FILE.
    warn_shared_files(paths)
    if report is not None:
        inputs = (
            {"sites file": str(sites_file)}
            if sites_file is not None
            else {name: str(p) for name, p in paths.items()}
        )
        prov = provenance(
            inputs=inputs,
            columns={
                "label": label or DEFAULT_LABEL if sites_file is None else label,
                "score": score or DEFAULT_SCORE if sites_file is None else score,
                "compared score": compare_score,
                "sample weight": sample_weight,
                "positive label": pos_label,
                "cluster": cluster,
            },
            method=method,
            options=options,
            seed=seed,
        )
        written = write_report(
            report,
            result,
            provenance=prov,
            site_data=site_data,
            audit_dir=audit_dir,
            seed=seed,
        )
        err.print(f"report written to {written}", highlight=False, markup=False, soft_wrap=True)
    if as_json:
        emit_json(result.to_dict())
    else:
        render_result(result)
