"""Exact AUROC, AUPR and DeLong CI by secure three-party computation (paper 4, ppAURORA).

Threat model: that of :mod:`fedroc.mpc` (semi-honest computing parties, at most one of
them corrupted; a curious analyst who may submit any job). What each party learns is
stated there; in short the analyst learns the sites' list lengths, the AUROC and AUPR
rounded to ``2**-frac_bits`` (default 14 bits), DeLong's variance of the AUROC (rounded to
``2**-2 frac_bits``) and whether both classes have at least ``min_class_count`` samples;
with ``max_fpr`` or operating points asked, those values too (a point's threshold is the
exact score value of one row).

How the shares travel. The analyst asks every site for its shares with the site function
``fedroc.mpc.share``, passing the job's terms: a fresh job id, the list of co-owners (the
federation's sites), the two proxies' X25519 public keys and the job's parameters
(precision, minimum class count, CI, merge). The site checks the terms against its own
settings (:mod:`fedroc.mpc.owner`: it is an owner, at least two owners, the minimum class
count at least its policy's ``min_count``, the precision within its limit, at most one job
by default), sorts its rows, splits them into two additive shares, seals each for its proxy
and signs the bundle with its owner key. Its reply (kind ``"shares"``) holds the list
length, its public key, the signature and two ciphertexts. The analyst relays them to
proxy 0, which forwards proxy 1's part; each proxy checks the job (registered owners,
signatures, exactly the signed co-owners, a job id never run before) before it starts.

Where the parties run. By default the method starts three local processes talking TLS on
127.0.0.1 (certificates made for the run, the sites' owner keys registered) and stops them
afterwards; whoever runs that holds every key, so it protects nothing against the analyst.
With ``mpc_cluster`` it uses a running cluster described by its TOML file (``fedroc mpc
party`` on each machine), which accepts only the owners registered in it.

Brier score and calibration come through secure aggregation
(:func:`fedroc.secagg.secure_brier`, :func:`~fedroc.secagg.secure_calibration`) for
probability scores, unless a site's policy refuses (then they are reported as missing and
the reason is noted).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedroc._docs import fill_doc
from fedroc.exceptions import DisclosureError, FedrocError, InputError
from fedroc.federation import Reply, SiteContext, site_function
from fedroc.federation.records import Record
from fedroc.federation.schema import Bool, Bytes, Choice, Int, Names, Text
from fedroc.methods import EvaluationInputs, EvaluationResult, register_method

__all__ = ["OPT_IN_POINTS", "MpcDetails", "paired_comparison", "run_mpc"]

SHARE_FUNCTION = "fedroc.mpc.share"
#: The policy's opt-in for jobs that open operating points (each opens a row's exact score).
OPT_IN_POINTS = "mpc.operating_points"


_JOB_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_"
SHARE_SCHEMA = {
    "job": Text(64, alphabet=_JOB_ALPHABET),
    "owners": Names(1024),
    "proxy0_key": Bytes(32),
    "proxy1_key": Bytes(32),
    "frac_bits": Int(1, 52),
    "min_class_count": Int(1, (1 << 28) - 1),
    "ci": Bool(),
    "sort": Choice("oblivious", "delta"),
    "delta": Int(1, (1 << 28) - 1),
    "noties": Bool(),
    "compare": Bool(default=False),
    "asks": Text(400, alphabet="abcdefghijklmnopqrstuvwxyz0123456789: ", default=""),
}


def _check_proxies(ctx: SiteContext, keys: tuple[bytes, bytes]) -> None:
    """Refuse a job whose proxies the site's policy does not name (``mpc_proxies``).

    Both shares of a row are sealed for the job's two proxies: whoever holds both keys (the
    analyst, when it names keys of its own) opens every row. Checked before the site reads
    its rows or counts the job.
    """
    setting = ctx.policy.mpc_proxies
    if setting == "any":
        return
    if setting != "none":
        from fedroc.mpc.net import ClusterConfig

        try:
            pinned = ClusterConfig.load(setting).proxy_key_bytes()
        except InputError as exc:
            # The operator's file, not the analyst's input: its path stays at the site.
            raise DisclosureError(
                f"site {ctx.site!r} refuses {SHARE_FUNCTION}: the cluster file its policy "
                f"pins (mpc_proxies) cannot be read ({type(exc).__name__})",
                site=ctx.site,
                function=SHARE_FUNCTION,
            ) from None
        if tuple(keys) == tuple(pinned):
            return
    why = (
        "its policy takes part in no MPC job (mpc_proxies = 'none')"
        if setting == "none"
        else "they are not the proxies of the cluster its policy pins (mpc_proxies)"
    )
    raise DisclosureError(
        f"site {ctx.site!r} refuses {SHARE_FUNCTION}: its shares would be sealed for the "
        f"job's proxy keys, and {why}; whoever holds both keys opens every row",
        site=ctx.site,
        function=SHARE_FUNCTION,
    )


@site_function(SHARE_FUNCTION, schema=SHARE_SCHEMA)
def share_site(ctx: SiteContext, args: Record) -> Reply:
    """Split the site's sorted records into two shares, sealed and signed for one job."""
    from fedroc.mpc.auc import JOB_PARAMETERS
    from fedroc.mpc.bundle import make_bundle
    from fedroc.mpc.owner import JobTerms, authorise

    where = f"site {ctx.site!r}: {SHARE_FUNCTION}"
    owners = args["owners"]
    try:
        terms = JobTerms(
            args["job"],
            tuple(owners),
            (bytes(args["proxy0_key"]), bytes(args["proxy1_key"])),
            **{k: args[k] for k in JOB_PARAMETERS if args.get(k) is not None},
        )
    except (InputError, TypeError) as exc:
        raise InputError(f"{where}: {exc}") from None
    _check_proxies(ctx, terms.proxy_keys)
    if terms.min_class_count < ctx.policy.min_count:
        raise DisclosureError(
            f"site {ctx.site!r} refuses {SHARE_FUNCTION}: the job's minimum class count "
            f"{terms.min_class_count} is below the site's minimum of {ctx.policy.min_count}",
            site=ctx.site,
            function=SHARE_FUNCTION,
        )
    if args["asks"] and not ctx.policy.allows(OPT_IN_POINTS):
        from fedroc.mpc.asks import Asks

        if Asks.parse(args["asks"]).n_points:
            # Each point opens its threshold, the exact score of one row: the analyst's
            # targets choose which rows (an extreme positive, any order statistic).
            raise DisclosureError(
                f"site {ctx.site!r} refuses {SHARE_FUNCTION}: the job asks for operating "
                "points, whose thresholds are exact scores of rows; its policy does not opt "
                f"in to {OPT_IN_POINTS!r} (a site that accepts this sets opt_in = "
                f"[{OPT_IN_POINTS!r}] in its policy ([policy] of a --sites file))",
                site=ctx.site,
                function=SHARE_FUNCTION,
            )
    scores_b = None
    if terms.compare:
        # A second model's scores of the same rows (the site's data must carry them).
        scores_b = getattr(ctx.data, "score_b", None)
        if scores_b is None:
            raise InputError(f"{where}: the site holds one score column; it cannot compare two")
    owner: dict[str, Any] = {}
    if ctx.policy.mpc_owner_key is not None:  # the operator's registered key, in every run
        owner["key"] = ctx.policy.mpc_owner_key
    if ctx.policy.mpc_max_jobs is not None:
        owner["max_jobs"] = ctx.policy.mpc_max_jobs
    if owner:
        from fedroc.mpc.owner import configure_owner

        configure_owner(ctx.state, **owner)
    with ctx.ledger.transaction() as ledger:  # counted across restarts and processes
        key = authorise(ctx.state, ctx.site, terms, ledger)
    bundle = make_bundle(ctx.site, ctx.data.label, ctx.data.score, terms, key, scores_b=scores_b)
    return Reply(
        {
            "n": bundle.n,
            "owner_key": bundle.owner_key,
            "signature": bundle.signature,
            "box0": np.frombuffer(bundle.box0, dtype=np.uint8),
            "box1": np.frombuffer(bundle.box1, dtype=np.uint8),
        },
        kind="shares",
        counts={"rows": bundle.n},
    )


def request_bundles(fed: Any, terms: Any) -> list[Any]:
    """Ask every site of ``fed`` for its bundle of the job ``terms`` (one call)."""
    from fedroc.mpc.bundle import Bundle

    replies = fed.call(
        SHARE_FUNCTION,
        job=terms.job,
        owners=list(terms.owners),
        proxy0_key=terms.proxy_keys[0],
        proxy1_key=terms.proxy_keys[1],
        **terms.params(),
    )
    return [
        Bundle(
            name,
            int(r["n"]),
            terms,
            bytes(r["owner_key"]),
            bytes(r["signature"]),
            r["box0"].tobytes(),
            r["box1"].tobytes(),
        )
        for name, r in replies.items()
    ]


@dataclass(frozen=True)
class MpcDetails:
    """What the MPC run produced: the opened values and each party's traffic.

    Attributes
    ----------
    values : dict of str to float
        The values opened to the analyst (AUC, PR AUC, variances, ...), by name.
    parties : list of dict
        One entry per computing party: its ``party`` number, ``role`` and traffic.
    sort : {"oblivious", "delta"}
        The merge the parties ran.
    delta : int or None
        The paper's delta with ``sort="delta"``; None otherwise.
    cluster : str
        Description of the parties that ran the job (local processes or a cluster file).
    seconds : float
        Wall-clock time of the MPC job.
    spec : dict, default {}
        The computation's parameters (list sizes, fixed-point bits, ...), as a record.
    """

    values: dict[str, float]
    parties: list[dict[str, Any]]
    sort: str
    delta: int | None
    cluster: str
    seconds: float
    spec: dict[str, Any] = field(default_factory=dict)


@fill_doc
def paired_comparison(outputs: Any, confidence_level: float = 0.95) -> dict[str, Any]:
    """Build the comparison of two models from a job's opened values (``compare=True``).

    Paired DeLong (DeLong et al. 1988): the variance of ``AUC_a - AUC_b`` was computed under
    MPC from the differences of the two models' placement values row by row (opened rounded
    like the other variances). Returns ``auc_difference``, its ``se``, the Wald ``ci`` (also as
    ``ci_wald``) and the two-sided ``p_value`` of H0: equal AUCs, and the second model's AUC
    and logit CI. The pooled and secure-histogram comparisons default to the MOVER interval
    below 100 rows of a class (:class:`~fedroc.metrics.PairedDeLongResult`); it needs the
    class counts and each score's tie pattern, which the MPC job keeps secret, so the
    interval here stays Wald at every size (it covered 0.90 for a nominal 0.95 with 15
    positives at AUCs 0.95 and 0.90 in scripts/results/paired_small_sample.md).
    The evaluate layer's ``--compare-score`` reads this dictionary as its ``comparison``.

    Parameters
    ----------
    outputs : AucOutputs
        The opened values of an MPC job run with ``compare=True``.
    {confidence_level}

    Returns
    -------
    dict
        ``auc_difference``, ``se``, ``ci`` and ``ci_wald`` (lists of two floats, equal),
        ``p_value``, ``auc_b``, ``auc_b_ci`` and ``method``; NaN everywhere when the job
        released nothing.

    Raises
    ------
    InputError
        The job did not compare two models.
    """
    from scipy import stats

    from fedroc.metrics import logit_ci

    nan = float("nan")
    if outputs.auc_b is None:
        raise InputError("the job did not compare two models (compare=False)")
    if not outputs.released:
        return {
            "auc_difference": nan,
            "se": nan,
            "ci": [nan, nan],
            "ci_wald": [nan, nan],
            "p_value": nan,
            "auc_b": nan,
            "auc_b_ci": [nan, nan],
            "method": "paired DeLong under MPC",
        }
    diff = outputs.auc - outputs.auc_b
    se = outputs.se_difference
    z = diff / se if se and se > 0 else nan
    q = float(stats.norm.ppf(0.5 + confidence_level / 2))
    ci = [diff - q * se, diff + q * se] if se is not None else [nan, nan]
    return {
        "auc_difference": diff,
        "se": se,
        "ci": ci,
        "ci_wald": list(ci),
        "p_value": float(2 * stats.norm.sf(abs(z))) if z == z else nan,
        "auc_b": outputs.auc_b,
        "auc_b_ci": list(logit_ci(outputs.auc_b, outputs.se_b, confidence_level)),
        "method": "paired DeLong under MPC",
    }


def _point(p: dict[str, Any]) -> dict[str, Any]:
    """Format an opened operating point with the other methods' keys (counts stay secret)."""

    def finite(v: float) -> float | None:
        return v if np.isfinite(v) else None

    out: dict[str, Any] = {"criterion": p["criterion"], "threshold": finite(p["threshold"])}
    out.update(dict.fromkeys(("tp", "fp", "tn", "fn")))
    names = ("sensitivity", "specificity", "ppv", "npv")
    out.update({k: finite(p[k]) for k in names})
    out.update({f"{k}_ci": None for k in names})
    out["ci_method"] = None
    out["selection_ci"] = None
    return out


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


# Why the MPC method adds no calibration curve unless asked: the curve's counts times its
# observed fractions sum to P exactly (tests/test_attacks_review.py, R20).
_CALIBRATION_GIVES_P = (
    "its counts give or narrow the class counts P and N (the sum over bins of count times "
    "observed fraction is P, but for the rows of bins a site withholds)"
)


def _without_mpc_advice(exc: Exception) -> str:
    """Give the sites' refusal of a secure aggregation without its advice to use this method."""
    from fedroc.privacy.policy import MPC_INSTEAD

    return str(exc).replace(f". {MPC_INSTEAD}", "")


def _not_probabilities_note(yes: list[str], no: list[str]) -> str:
    """Name the sites whose scores are not probabilities, and warn where others' are."""
    note = (
        f"scores are not probabilities at site(s) {', '.join(map(repr, no))}: no Brier "
        "score or calibration"
    )
    if yes:
        note += (
            f"; those at {', '.join(map(repr, yes))} lie in [0, 1]: if the sites' scores "
            "are on two scales (logits and probabilities), the AUC ranks them together and "
            "means nothing"
        )
    return note


def _secure_probability_metrics(
    fed: Any, n_bins: int, calibration: bool
) -> tuple[Any, Any, list[str]]:
    """Brier score (and, if asked, calibration) by secure aggregation, with notes."""
    from fedroc import secagg

    # Public functions of fedroc.secagg (loaded lazily there, hence typed Any here).
    secure_brier: Any = secagg.secure_brier
    secure_calibration: Any = secagg.secure_calibration
    from fedroc.federation.basic import probability_sites

    answer = probability_sites(fed)
    if answer is None:  # a site with a wider grid: no (H15-2)
        return None, None, ["scores are not probabilities: no Brier score or calibration"]
    yes, no = answer
    if no:
        return None, None, [_not_probabilities_note(yes, no)]
    try:
        brier, _ = secure_brier(fed)
    except FedrocError as exc:
        return None, None, [f"Brier score withheld: {_without_mpc_advice(exc)}"]
    notes = [
        "Brier score by secure aggregation (the analyst saw the sums of n and of squared "
        "errors over sites)"
    ]
    if not calibration:
        notes.append(
            f"calibration not added: {_CALIBRATION_GIVES_P}, which the MPC job keeps secret; "
            "where the sites may reveal them, ask for the curve with --mpc-calibration "
            "(in Python, mpc_calibration)"
        )
        return brier, None, notes
    try:
        curve = secure_calibration(fed, n_bins=n_bins).curve
    except FedrocError as exc:
        return brier, None, [*notes, f"calibration withheld: {_without_mpc_advice(exc)}"]
    notes.append(
        f"calibration by secure aggregation, as asked: {_CALIBRATION_GIVES_P}, so the "
        "analyst knows them"
    )
    return brier, curve, notes


#: Where the MPC method says it is still trying to reach party 0 of a cluster (INFO);
#: ``fedroc evaluate`` prints these records on stderr, as ``fedroc mpc run`` its own line.
NOTICES = logging.getLogger("fedroc.mpc")


def _connecting_notice(job: str) -> Callable[[str], None]:
    def notice(line: str) -> None:
        NOTICES.info("MPC job %s: %s", job, line)

    return notice


@register_method(
    "mpc",
    "exact AUROC, AUPR and DeLong CI by secure 3-party computation (ppAURORA; only the "
    "rounded results opened)",
)
@fill_doc
def run_mpc(
    inputs: EvaluationInputs,
    *,
    mpc_cluster: str | None = None,
    mpc_sort: str = "oblivious",
    mpc_delta: int = 1,
    mpc_noties: bool = False,
    mpc_timeout: float = 60.0,
    mpc_precision: int | None = None,
    mpc_min_class_count: int | None = None,
    mpc_ci: bool = True,
    mpc_compare: bool = False,
    mpc_calibration: bool = False,
    mpc_calibration_bins: int = 10,
    max_fpr: float | None = None,
    at_specificity: Sequence[float] = (),
    at_sensitivity: Sequence[float] = (),
    youden: bool = False,
) -> EvaluationResult:
    """Run the MPC AUC (and its DeLong CI) over the federation's sites.

    Parameters
    ----------
    {inputs}
    mpc_cluster : path, optional
        Cluster file of running parties; by default three local processes are started.
    mpc_sort : {"oblivious", "delta"}
        Bitonic merge (nothing opened) or the paper's merge with ``mpc_delta``.
    mpc_delta : int
        The paper's delta (odd), used with ``mpc_sort="delta"``.
    mpc_noties : bool
        Also open the paper's no-tie AUROC (Algorithm 5), for comparison.
    mpc_timeout : float
        Seconds a local party waits for a peer before it gives up.
    mpc_precision : int, optional
        Bits of the opened values (default 14; every site must agree to it).
    mpc_min_class_count : int, optional
        Minimum class count checked under MPC before anything is opened (default 5; a site
        refuses a job below its policy's ``min_count``).
    mpc_ci : bool
        Compute DeLong's variance and the logit CI (paper 1, eq. 3) under MPC.
    mpc_compare : bool
        Compare the sites' second score (``SiteData.score_b``) with the first: paired
        DeLong under MPC, reported as ``comparison`` (:func:`paired_comparison`).
    mpc_calibration : bool
        Also add the calibration curve by secure aggregation. Off by default: its counts
        give the pooled class counts P and N, which the MPC job keeps secret. The Brier
        score (n and the sum of squared errors, by secure aggregation) is always added.
    mpc_calibration_bins : int
        Bins of that curve.
    max_fpr : float, optional
        Adds ``partial_auc`` (scikit-learn's McClish-standardised partial AUC, exact, opened
        rounded like the AUC); at most six decimals.
    at_specificity, at_sensitivity : sequence of float
        Adds ``operating_points`` at these targets (the cuts of
        :class:`~fedroc.metrics.ScoreCounts`, exact): the threshold (a score value) and the
        four proportions are opened; the 2x2 counts stay secret, so there are no intervals.
    youden : bool
        Adds Youden's cut to ``operating_points``.

    Returns
    -------
    {evaluation_result}
    """
    from fedroc.metrics import logit_ci
    from fedroc.mpc.asks import Asks
    from fedroc.mpc.auc import DEFAULT_FRAC_BITS, DEFAULT_MIN_CLASS_COUNT, check_job_parameters
    from fedroc.mpc.cluster import Cluster, LocalCluster, RemoteCluster
    from fedroc.mpc.owner import JobTerms
    from fedroc.mpc.runtime import ROLE

    fed = inputs.federation
    precision = DEFAULT_FRAC_BITS if mpc_precision is None else mpc_precision
    min_count = DEFAULT_MIN_CLASS_COUNT if mpc_min_class_count is None else mpc_min_class_count
    try:
        asks = Asks.from_floats(max_fpr, at_specificity, at_sensitivity, youden)
        if asks.max_fpr is not None:
            # Before any site shares (a job spends its budget): the exact partial AUC's
            # denominator must fit; the list lengths are public to the job anyway.
            from fedroc.federation.basic import site_sizes

            asks.check_size(sum(site_sizes(fed).values()))
        params: dict[str, Any] = {
            "sort": mpc_sort,
            "delta": mpc_delta,
            "noties": mpc_noties,
            "frac_bits": precision,
            "min_class_count": min_count,
            "ci": mpc_ci,
            "compare": mpc_compare,
            "asks": asks.encode(),
        }
        check_job_parameters(**params)
    except InputError as exc:
        # The engine names its parameters (sort, delta, frac_bits, min_class_count); the caller
        # passed mpc_sort, mpc_delta, mpc_precision and mpc_min_class_count (--mpc-sort, ...:
        # the CLI names them so).
        # min_class_count may come mid-sentence ("a confidence interval needs ...").
        word, sep, rest = str(exc).partition(" ")
        word = {"sort": "mpc_sort", "delta": "mpc_delta", "frac_bits": "mpc_precision"}.get(
            word, word
        )
        message = re.sub(r"(?<!mpc_)\bmin_class_count\b", "mpc_min_class_count", word + sep + rest)
        raise InputError(f"mpc: {message}") from None
    cluster: Cluster = (
        LocalCluster(timeout=mpc_timeout, start=False)
        if mpc_cluster is None
        else RemoteCluster(mpc_cluster)
    )
    with cluster:
        terms = JobTerms.create(list(fed.site_names), cluster.proxy_key_bytes(), **params)
        start = fed.mark()
        bundles = request_bundles(fed, terms)
        if isinstance(cluster, LocalCluster):
            # The local parties trust the sites' keys as the sites sent them (the analyst
            # runs those parties anyway); a remote cluster has its owners registered.
            cluster.register_owners({b.owner: b.owner_key for b in bundles})
        outcome = cluster.run(bundles, connecting=_connecting_notice(terms.job))
        description = cluster.description
    out = outcome.outputs
    spec = terms.spec(tuple(b.n for b in bundles))
    parties = [
        {"party": pid, "role": ROLE[pid], **stats.to_dict()}
        for pid, stats in enumerate(outcome.stats)
    ]
    # In words (the note is read in the table and the report): it listed the JSON's keys,
    # "auc, pr_auc, auc_variance", and the co-owners as a Python list.
    opened = ["the AUC", "the PR-AUC"] + (["the no-tie AUC"] if mpc_noties else [])
    opened += ["the AUC's variance"] if mpc_ci else []
    opened += ["the partial AUC"] if asks.max_fpr is not None else []
    opened += ["the operating points' proportions"] if asks.n_points else []
    notes = [
        "shares sealed by each site for its proxy (X25519 + ChaCha20-Poly1305) and signed "
        f"for job {terms.job} with co-owners {', '.join(terms.owners)}; the analyst relayed "
        "ciphertext only",
        f"opened to the analyst only: {', '.join(opened)} rounded to 2^-{precision}"
        + (f" (variance to 2^-{spec.var_frac_bits})" if mpc_ci else "")
        + f", and whether both classes have at least {min_count} samples"
        + ("" if mpc_calibration else " (class counts stay secret)"),
        f"computed by {description}; sort: {mpc_sort}"
        + (
            f" (delta = {mpc_delta}; proxies saw selection comparisons)"
            if mpc_sort == "delta"
            else ""
        ),
    ]
    if asks.n_points:
        notes.append(
            f"opened for each of {asks.n_points} operating point(s): its threshold, the exact "
            "score value of one row at some site (or inf), and whether the cut predicts every "
            "row positive; its 2x2 counts stay secret"
        )
    if not out.released:
        notes.append(f"withheld: fewer than {min_count} positives or negatives (checked under MPC)")
    elif out.partial_auc is not None and math.isnan(out.partial_auc):
        notes.append(
            f"partial AUC withheld: fewer than {min_count} negatives up to max_fpr "
            f"{(asks.max_fpr or 0) / 1e6:g} (checked under MPC; below 1/N it would give t/P, a "
            "fraction of the secret P); the other values are opened"
        )
    notes += [
        f"MPC party {p['party']} ({p['role']}): {p['rounds']} rounds, "
        f"{_megabytes(p['bytes_sent'])} sent, {_megabytes(p['bytes_received'])} received"
        for p in parties
    ]
    brier, calibration, how = _secure_probability_metrics(
        fed, mpc_calibration_bins, mpc_calibration
    )
    notes += how
    released = fed.released(start).with_notes(*notes)
    se = out.se
    auc_ci = None
    if mpc_ci and out.released and se is not None:
        auc_ci = logit_ci(out.auc, se, inputs.confidence_level)
    # n, n_pos, n_neg under the names every method gives them: the rows are the list
    # lengths the sites shared (sites[].n); the class counts stay secret (None).
    extra: dict[str, Any] = {
        "n": sum(b.n for b in bundles),
        "n_pos": None,
        "n_neg": None,
        "pr_auc": out.pr_auc,
    }
    if mpc_ci:
        extra["auc_se"] = se
        extra["auc_variance"] = out.variance
    if mpc_noties:
        extra["auc_noties"] = out.auc_noties
    if mpc_compare:
        extra["comparison"] = paired_comparison(out, inputs.confidence_level)
    if asks.max_fpr is not None:
        extra["max_fpr"] = max_fpr
        extra["partial_auc"] = out.partial_auc
    if asks.n_points:
        extra["operating_points"] = [_point(p) for p in out.operating_points]
    extra["mpc"] = {
        "job": terms.job,
        "sort": mpc_sort,
        "delta": mpc_delta if mpc_sort == "delta" else None,
        "precision_bits": precision,
        "min_class_count": min_count,
        "released": out.released,
        "seconds": outcome.seconds,
        "parties": parties,
    }
    extra["brier"] = brier
    extra["calibration"] = calibration
    details = MpcDetails(
        dict(out.values()),
        parties,
        mpc_sort,
        mpc_delta if mpc_sort == "delta" else None,
        description,
        outcome.seconds,
        spec.to_record(),
    )
    return EvaluationResult(
        method="mpc",
        sites=[{"name": b.owner, "n": b.n} for b in bundles],
        auc=out.auc,
        auc_ci=auc_ci,
        released=released,
        extra=extra,
        confidence_level=inputs.confidence_level,
        details=details,
    )
