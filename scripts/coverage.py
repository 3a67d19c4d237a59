"""One coverage harness for every federated method (issue "Honest statistics by default").

Each replicate simulates one federation from a design whose true AUC is known, runs every
requested method on it through ``fedroc.evaluate`` (the same call a user makes), and
records the AUC and its interval. The table gives, per design, size and method: the
coverage of the true AUC by the nominal 95% interval, the mean bias, the mean width, and
how many runs failed (an error: never hidden) and how many withheld their AUC or interval
with a reason (a method's own rule, or a site's policy refusing before anything was
released because a class is smaller than its minimum count). The pooled DeLong interval
is the reference row. The table's header names the command, seed and commit.

Designs (scores are probabilities, so that every method applies):

- ``binormal``: X ~ N(mu y, 1), score = Phi(X), mu = sqrt(2) Phi^-1(AUC): the AUC is exact.
- ``rare``: the same with prevalence 0.1 and AUC 0.96 (small, high-AUC data, where the
  histogram DP interval undercovered).
- ``ties``: the binormal score rounded to 5 levels (ratings); the truth is the AUC of the
  rounded scores with ties counted 1/2, computed on a large sample.
- ``paired``: two correlated binormal models on the same rows (AUC 0.8 and 0.75, latent
  correlation 0.6); methods that compare two models (``pooled-compare``,
  ``histogram-compare``) are measured on the AUC difference and its interval, the others
  on the first model's AUC.
- ``clustered``: several observations per patient (paper 3): section 6.1's allocation of
  controls and cases to clusters (rho_MN = 0.4) and the exchangeable binormal model (11)
  with population AUC theta12 = 0.7 and personalized AUC theta11 = 0.8; whole clusters are
  dealt to the sites, n counts rows (about n / 5.5 clusters). The truth is theta12, the
  AUC of the pooled population, which every method's ``auc`` estimates; only the
  ``clustered`` method's interval accounts for the clustering.

Simulated sites are configured as simulations are: their DP noise seeded from their own
configuration (``noise_seed``), budgets lifted (``epsilon_limit=inf``, ``delta_limit=1``)
so that paper settings can be measured. The analyst's seed drives SIMEX and bootstraps.

Usage::

    python scripts/coverage.py [--reps 200] [--sizes 500 5000] [--designs binormal rare]
        [--methods pooled rocglm histogram histogram-dp] [--out scripts/results]
        [--name coverage] [--extend-to 400]

``--name`` names the result files (``<name>.md``, ``<name>.csv``), so that a study of some
designs does not overwrite another's table.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _results import command_line, git_commit
from scipy import special

from fedroc.data import Columns, SiteData
from fedroc.exceptions import DisclosureError
from fedroc.federation import Federation
from fedroc.methods import evaluate, method_names, pool_site_data
from fedroc.methods.clustered.models import (
    binormal_parameters,
    sample_allocation,
    sample_binormal,
)
from fedroc.metrics import roc_auc
from fedroc.privacy import DisclosurePolicy, is_class_count_refusal


@dataclass(frozen=True)
class Design:
    name: str
    auc: float
    prevalence: float
    sites: int = 5
    levels: int | None = None  # round scores to this many levels (ties)
    cluster_column: str | None = None

    @property
    def mu(self) -> float:
        return math.sqrt(2.0) * float(special.ndtri(self.auc))

    def simulate(self, n: int, rng: np.random.Generator) -> dict[str, pd.DataFrame]:
        y = rng.random(n) < self.prevalence
        score = special.ndtr(rng.normal(self.mu * y, 1.0))
        if self.levels is not None:
            score = np.floor(score * self.levels).clip(0, self.levels - 1) / (self.levels - 1)
        parts = np.array_split(rng.permutation(n), self.sites)
        return {
            f"site{k}": pd.DataFrame({"label": y[i].astype(int), "score": score[i]})
            for k, i in enumerate(parts)
        }

    def truth(self) -> float:
        if self.levels is None:
            return self.auc
        rng = np.random.default_rng(12345)
        frames = self.simulate(2_000_000, rng)
        df = pd.concat(frames.values())
        return roc_auc(df["label"].to_numpy(), df["score"].to_numpy())


@dataclass(frozen=True)
class ClusteredDesign:
    """Clusters inside sites: allocation of paper 3's section 6.1 and binormal model (11)."""

    name: str
    auc: float  # theta12, the population AUC
    personalized: float  # theta11
    rho_mn: float = 0.4
    sites: int = 5
    cluster_column: str | None = "cluster"
    mean_cluster_size: float = 5.5  # k uniform on {2, ..., 5}, plus one of each class

    def simulate(self, n: int, rng: np.random.Generator) -> dict[str, pd.DataFrame]:
        n_clusters = max(4 * self.sites, round(n / self.mean_cluster_size))
        delta, rho = binormal_parameters(self.auc, self.personalized)
        m, n_cases = sample_allocation(n_clusters, self.rho_mn, rng=rng)
        smp = sample_binormal(m, n_cases, delta=delta, rho=rho, rng=rng)
        score = special.ndtr(smp.y_score)  # probabilities: a monotone map keeps the AUCs
        site_of = rng.permutation(n_clusters) % self.sites
        frames = {}
        for k in range(self.sites):
            rows = site_of[smp.cluster] == k
            frames[f"site{k}"] = pd.DataFrame(
                {
                    "label": smp.y_true[rows].astype(int),
                    "score": score[rows],
                    "cluster": smp.cluster[rows],
                }
            )
        return frames

    def truth(self) -> float:
        return self.auc  # eq. 12: theta12 = Phi(delta / sqrt 2), whatever the allocation


@dataclass(frozen=True)
class PairedDesign:
    """Two correlated models on the same rows (issue 14.2: compare two models).

    Latent scores ``X_a = mu_a y + Z_a`` and ``X_b = mu_b y + Z_b`` with ``(Z_a, Z_b)``
    standard bivariate normal of correlation ``rho`` in each class; the scores are
    ``Phi(X)``. Each AUC is ``Phi(mu / sqrt 2)`` exactly, so the true difference
    ``auc - auc_b`` is known. Methods that compare (``compares``) are measured on the
    difference; the others on the first model's AUC.
    """

    name: str
    auc: float
    auc_b: float
    rho: float
    prevalence: float
    sites: int = 5
    cluster_column: str | None = None
    score_b: str | None = "score_b"

    def scores(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        """Draw ``n`` rows: labels and the two models' scores."""
        y = rng.random(n) < self.prevalence
        z_a = rng.normal(size=n)
        z_b = self.rho * z_a + math.sqrt(1.0 - self.rho**2) * rng.normal(size=n)
        mu_a = math.sqrt(2.0) * float(special.ndtri(self.auc))
        mu_b = math.sqrt(2.0) * float(special.ndtri(self.auc_b))
        return y, special.ndtr(mu_a * y + z_a), special.ndtr(mu_b * y + z_b)

    def simulate(self, n: int, rng: np.random.Generator) -> dict[str, pd.DataFrame]:
        y, a, b = self.scores(n, rng)
        parts = np.array_split(rng.permutation(n), self.sites)
        return {
            f"site{k}": pd.DataFrame({"label": y[i].astype(int), "score": a[i], "score_b": b[i]})
            for k, i in enumerate(parts)
        }

    def truth(self) -> float:
        return self.auc

    def truth_difference(self) -> float:
        return self.auc - self.auc_b


DESIGNS: dict[str, Design | ClusteredDesign | PairedDesign] = {
    "binormal": Design("binormal", auc=0.75, prevalence=0.3),
    "rare": Design("rare", auc=0.96, prevalence=0.1),
    "ties": Design("ties", auc=0.8, prevalence=0.4, levels=5),
    "clustered": ClusteredDesign("clustered", auc=0.7, personalized=0.8),
    "paired": PairedDesign("paired", auc=0.8, auc_b=0.75, rho=0.6, prevalence=0.3),
}


@dataclass(frozen=True)
class MethodSpec:
    """A row of the table: a registered method with its options.

    ``designs`` restricts it to the designs it applies to (None: all).
    """

    label: str
    method: str
    options: dict[str, Any] = field(default_factory=dict)
    designs: tuple[str, ...] | None = None
    needs_clusters: bool = False
    compares: bool = False  # measured on the comparison (difference, its CI), not the AUC
    interval_key: str | None = None  # the interval of ``extra[interval_key]``, not ``auc_ci``


def _rocglm_paper(sensitivity: float, **options: Any) -> MethodSpec:
    from fedroc.methods.rocglm import recommended_privacy

    eps, delta = recommended_privacy(sensitivity)
    tag = "paper estimate, uncorrected" if options.get("correction") == "none" else "corrected"
    return MethodSpec(
        f"rocglm (paper: l2 {sensitivity:g}, eps {eps:g}, delta {delta:g}; {tag})",
        "rocglm",
        {"sensitivity": sensitivity, "privacy": "paper", **options},
    )


METHODS = {
    "pooled": MethodSpec("pooled (DeLong, reference)", "pooled"),
    "rocglm": MethodSpec(
        "rocglm (default: l2 0.03, eps 1, delta 1/(10 n))", "rocglm", {"sensitivity": 0.03}
    ),
    # Paper 1's four recommended settings (section 5.3.1), each at the largest
    # sensitivity of its range.
    "rocglm-paper-0.01": _rocglm_paper(0.01),
    "rocglm-paper": _rocglm_paper(0.03),
    "rocglm-paper-0.05": _rocglm_paper(0.05),
    "rocglm-paper-0.07": _rocglm_paper(0.07),
    "rocglm-uncorrected": _rocglm_paper(0.03, correction="none"),
    "rocglm-levels": MethodSpec(
        "rocglm (paper: l2 0.03; rating levels declared)",
        "rocglm",
        {"sensitivity": 0.03, "privacy": "paper", "score_levels": [0, 0.25, 0.5, 0.75, 1]},
        designs=("ties",),
    ),
    "histogram": MethodSpec("histogram (secure aggregation)", "histogram", {"quantiles": 256}),
    "histogram-dp": MethodSpec(
        "histogram (DP, eps 1)", "histogram", {"quantiles": 256, "dp_epsilon": 1.0}
    ),
    # The two settings of issue 13 where the DP interval undercovered on small data.
    "histogram-dp-q1024": MethodSpec(
        "histogram (DP, eps 1, Q 1024)", "histogram", {"quantiles": 1024, "dp_epsilon": 1.0}
    ),
    "histogram-dp-eps0.1": MethodSpec(
        "histogram (DP, eps 0.1, Q 64)", "histogram", {"quantiles": 64, "dp_epsilon": 0.1}
    ),
    "histogram-ldp": MethodSpec(
        "histogram (local DP, eps 1)",
        "histogram",
        {"quantiles": 256, "dp_epsilon": 1.0, "dp_mode": "local"},
    ),
    "mpc": MethodSpec("mpc (exact)", "mpc"),
    "pooled-compare": MethodSpec(
        "pooled paired DeLong (AUC difference)", "pooled", {"compare": True}, compares=True
    ),
    "histogram-compare": MethodSpec(
        "histogram paired DeLong, 64 x 64 joint bins (AUC difference)",
        "histogram",
        {"quantiles": 256, "compare": True},
        compares=True,
    ),
    "histogram-compare-dp": MethodSpec(
        "histogram paired DeLong, 16 x 16 joint bins, distributed DP eps 1 (AUC difference)",
        "histogram",
        {"quantiles": 256, "compare": True, "dp_epsilon": 1.0},
        compares=True,
    ),
    "clustered": MethodSpec(
        "clustered (population AUC, secure aggregation)",
        "clustered",
        {"n_bins": 1000},
        needs_clusters=True,
    ),
}


def simulation_policy() -> DisclosurePolicy:
    return DisclosurePolicy(epsilon_limit=math.inf, delta_limit=1.0)


@dataclass
class Cell:
    design: str
    n: int
    method: str
    truth: float
    aucs: list[float] = field(default_factory=list)
    lows: list[float] = field(default_factory=list)
    highs: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    withheld: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, auc: float, ci: Sequence[float] | None, reason: str | None = None) -> None:
        """One run; a method that withholds its estimate or interval says why (``reason``)."""
        if ci is None or not math.isfinite(auc):
            key = reason or "no interval"
            self.withheld[key] = self.withheld.get(key, 0) + 1
        if not math.isfinite(auc):
            return
        self.aucs.append(auc)
        self.lows.append(np.nan if ci is None else float(ci[0]))
        self.highs.append(np.nan if ci is None else float(ci[1]))

    def fail(self, exc: BaseException) -> None:
        key = f"{type(exc).__name__}: {_group_key(str(exc))}"
        self.failures[key] = self.failures.get(key, 0) + 1

    def refuse(self, exc: BaseException) -> None:
        """A site's policy refused before anything was released: the data cannot support
        the method (a class smaller than a site's minimum count). Counted as withheld."""
        key = f"refused before any release: {_group_key(str(exc))}"
        self.withheld[key] = self.withheld.get(key, 0) + 1

    def row(self) -> dict[str, Any]:
        a, lo, hi = (np.asarray(v, np.float64) for v in (self.aucs, self.lows, self.highs))
        has_ci = np.isfinite(lo) & np.isfinite(hi)
        covered = (lo <= self.truth) & (self.truth <= hi)
        no_estimate = sum(self.withheld.values()) - int((~has_ci).sum())
        runs = a.size + sum(self.failures.values()) + no_estimate
        cover = float(covered[has_ci].mean()) if has_ci.any() else float("nan")
        # Monte-Carlo standard error of the coverage, to read the table honestly.
        mc = math.sqrt(max(cover * (1 - cover), 1e-12) / max(has_ci.sum(), 1))
        return {
            "design": self.design,
            "n": self.n,
            "method": self.method,
            "runs": runs,
            "failed": sum(self.failures.values()),
            "no_ci": sum(self.withheld.values()),
            "coverage": cover,
            "coverage_mcse": mc,
            "bias": float(np.mean(a - self.truth)) if a.size else float("nan"),
            "bias_mcse": float(np.std(a, ddof=1) / math.sqrt(a.size)) if a.size > 1 else math.nan,
            "mean_width": float(np.mean((hi - lo)[has_ci])) if has_ci.any() else float("nan"),
            "seconds_per_run": self.seconds / max(runs, 1),
        }


def _group_key(text: str) -> str:
    """The cause without the run's site names and numbers, so that equal causes group."""
    text = re.sub(r"site '[^']*'", "site '#'", text)
    text = re.sub(r"\[[^\]]*'[^\]]*\]", "[#]", text)  # lists of site names
    return re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", text)[:320]


def _withheld_reason(res: Any) -> str | None:
    extra = res.extra
    reason = extra.get("ci_withheld")
    if reason is None and extra.get("caveats"):
        reason = extra["caveats"][0]
    if reason is None:
        return None
    # Keep the cause, drop the run's own numbers, so that equal reasons count together.
    return _group_key(reason)


def _run_one(
    spec: MethodSpec,
    cell: Cell,
    design: Design | ClusteredDesign | PairedDesign,
    frames: dict[str, pd.DataFrame],
    rep: int,
    seed: int,
) -> None:
    """One method on one replicate, recorded in its cell (a result, a refusal or a failure)."""
    score_b = getattr(design, "score_b", None)
    start = time.perf_counter()
    try:
        fed = Federation.from_frames(
            frames,
            policy=simulation_policy(),
            noise_seed=seed * 100_003 + rep,
            cluster=design.cluster_column,
            score_b=score_b,
        )
        pooled = None
        if spec.method == "pooled":  # the reference holds the rows
            columns = Columns(score_b=score_b)
            pooled = pool_site_data({k: SiteData.from_frame(v, columns) for k, v in frames.items()})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = evaluate(
                fed, spec.method, pooled=pooled, seed=rep, calibration_bins=None, **spec.options
            )
        estimate, ci = res.auc, res.auc_ci
        if spec.interval_key is not None:
            ci = res.extra[spec.interval_key]
        reason = _withheld_reason(res)
        if spec.compares:  # the difference of two models and its CI
            comparison = res.extra["comparison"]
            estimate, ci = comparison["auc_difference"], comparison["ci"]
            if estimate is None:  # withheld, with the reason in its note
                estimate = math.nan
                reason = _group_key(comparison["note"])
        cell.add(estimate, ci, reason)
    except DisclosureError as exc:
        if is_class_count_refusal(exc):
            cell.refuse(exc)
        else:
            cell.fail(exc)
    except Exception as exc:  # counted and shown, never hidden
        cell.fail(exc)
    cell.seconds += time.perf_counter() - start


def _near(row: dict[str, Any], target: float) -> bool:
    """Whether a cell's coverage lies within one MCSE of ``target`` (it needs more runs)."""
    cover, mcse = row["coverage"], row["coverage_mcse"]
    return bool(math.isfinite(cover) and abs(cover - target) <= mcse)


def run_study(
    designs: Sequence[str],
    sizes: Sequence[int],
    methods: Sequence[str],
    reps: int,
    seed: int,
    progress: Callable[[str], None] | None = None,
    extend_to: int | None = None,
    target: float = 0.93,
) -> pd.DataFrame:
    """Every (design, size) replicate runs every method on the same simulated data.

    With ``extend_to``, a cell whose coverage after ``reps`` runs lies within one MCSE of
    ``target`` runs on to ``extend_to`` replicates (the same data stream: replicates
    ``reps`` to ``extend_to - 1`` of its design and size), so that the table can tell it
    from the target.
    """
    available = set(method_names())
    rows = []
    for design_name in designs:
        design = DESIGNS[design_name]
        truth = design.truth()
        # A method for clustered data has nothing to estimate on unclustered designs.
        applicable = [
            m
            for m in methods
            if (design.cluster_column or not METHODS[m].needs_clusters)
            and (METHODS[m].designs is None or design_name in METHODS[m].designs)
        ]
        score_b = getattr(design, "score_b", None)  # only a paired design has a second model
        applicable = [m for m in applicable if score_b or not METHODS[m].compares]
        for n in sizes:
            cells = {
                m: Cell(
                    design_name,
                    n,
                    METHODS[m].label,
                    design.truth_difference()  # type: ignore[union-attr]
                    if METHODS[m].compares
                    else truth,
                )
                for m in applicable
            }
            rng = np.random.default_rng([seed, n, list(DESIGNS).index(design_name)])
            running = list(applicable)
            total = reps
            rep = 0
            while rep < total:
                frames = design.simulate(n, rng)
                for m in running:
                    if METHODS[m].method not in available:
                        cells[m].fail(
                            RuntimeError(f"method {METHODS[m].method!r} is not installed")
                        )
                    else:
                        _run_one(METHODS[m], cells[m], design, frames, rep, seed)
                rep += 1
                if progress is not None and rep % max(1, reps // 10) == 0:
                    progress(f"{design_name} n={n}: {rep}/{total} ({len(running)} methods)")
                if rep == reps and extend_to is not None and extend_to > reps:
                    running = [m for m in running if _near(cells[m].row(), target)]
                    if running:
                        total = extend_to
            rows += [
                c.row() | {"failures": c.failures, "withheld": c.withheld} for c in cells.values()
            ]
    return pd.DataFrame(rows)


def to_markdown(
    table: pd.DataFrame,
    *,
    reps: int,
    seed: int,
    command: str,
    commit: str = "",
    extend_to: int | None = None,
) -> str:
    more = (
        f"; {extend_to} where the coverage after {reps} lay within one MCSE of 0.93"
        if extend_to
        else ""
    )
    lines = [
        "# Coverage of the 95% AUC intervals, every method on the same simulated data",
        "",
        f"Command: `{command}` ({reps} replicates per cell{more}; seed {seed}; commit "
        f"{commit or git_commit()}).",
        "Coverage of the true AUC (the design's), with its Monte-Carlo standard error; bias of",
        "the AUC estimate; mean interval width; failed runs (errors) are counted, and their",
        "reasons listed below the table; runs where the method withheld its interval (or its",
        "estimate), or a site's policy refused before anything was released, are counted under",
        "'no CI' with their reasons below, and coverage is over the runs with an interval.",
        "",
        "| design | n | method | runs | failed | no CI | coverage (MCSE) | bias (MCSE) | width "
        "| s/run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table.to_dict("records"):
        lines.append(
            f"| {r['design']} | {r['n']} | {r['method']} | {r['runs']} | {r['failed']} | "
            f"{r['no_ci']} | "
            f"{r['coverage']:.3f} ({r['coverage_mcse']:.3f}) | "
            f"{r['bias']:+.4f} ({r['bias_mcse']:.4f}) | {r['mean_width']:.4f} | "
            f"{r['seconds_per_run']:.2f} |"
        )
    notes = [
        f"- {r['design']} n={r['n']} {r['method']}: {k} ({v}x)"
        for r in table.to_dict("records")
        for k, v in r["failures"].items()
    ]
    if notes:
        lines += ["", "Failures:", "", *notes]
    withheld = [
        f"- {r['design']} n={r['n']} {r['method']}: {k} ({v}x)"
        for r in table.to_dict("records")
        for k, v in r["withheld"].items()
    ]
    if withheld:
        lines += ["", "Runs without an interval (the method or a site said why):", "", *withheld]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument(
        "--designs",
        nargs="+",
        default=[k for k, d in DESIGNS.items() if d.cluster_column is None],
        choices=list(DESIGNS),
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["pooled", "rocglm", "rocglm-paper", "histogram", "histogram-dp"],
        choices=list(METHODS),
    )
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--out", type=Path, default=Path("scripts/results"))
    parser.add_argument("--name", default="coverage", help="stem of the result files")
    parser.add_argument(
        "--extend-to",
        type=int,
        default=None,
        help="run cells whose coverage lies within one MCSE of 0.93 on to this many replicates",
    )
    args = parser.parse_args(argv)
    command = command_line("coverage.py", argv)
    commit = git_commit()  # before the run: the code it measured
    start = time.perf_counter()
    table = run_study(
        args.designs,
        args.sizes,
        args.methods,
        args.reps,
        args.seed,
        progress=lambda msg: print(msg, file=sys.stderr, flush=True),
        extend_to=args.extend_to,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    text = to_markdown(
        table,
        reps=args.reps,
        seed=args.seed,
        command=command,
        commit=commit,
        extend_to=args.extend_to,
    )
    (args.out / f"{args.name}.md").write_text(text)
    table.drop(columns=["failures", "withheld"]).to_csv(args.out / f"{args.name}.csv", index=False)
    print(text)
    print(f"{time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
