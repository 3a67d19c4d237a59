"""Coverage audit of every default interval, in the scenarios a user meets (three sites).

``scripts/coverage.py`` measures each method on two designs of five sites (binormal AUC
0.75 at prevalence 0.3, and AUC 0.96 at prevalence 0.1) at 500 rows and more, with the
options its studies chose (256 quantiles for the histogram, the ROC-GLM's sensitivity
given). This audit fills the gaps: three sites, 100 to 5000 rows, prevalence 5% to 50%,
AUC 0.6 to 0.95, rated scores (5 levels, ties), and every method called as a user calls
it, ``evaluate(fed, method)`` with its defaults (the histogram's DP mode with only
``dp_epsilon=1`` given, the ROC-GLM without a sensitivity, the MPC method's interval,
the clustered method's logit-scale t interval).

Three parts (``--part``), each with its own table:

- ``pooled``: the pooled reference (``evaluate(fed, "pooled")``: DeLong's variance on the
  logit scale, paper 1 eq. 3) on the full grid, 18 designs x 4 sizes, cheap, so 1000
  replicates a cell. The histogram (secure aggregation) and MPC methods compute this very
  interval from exact counts (the ``federated`` part checks that they agree), so its
  coverage is theirs wherever the sites do not refuse.
- ``paired``: the pooled paired DeLong comparison (``evaluate(fed, "pooled",
  compare=True)``, :func:`fedroc.metrics.delong_paired`) and the histogram's (secure
  aggregation, default joint grid), on two correlated models, continuous or rated, at
  prevalence 5% and 30%; coverage of the true AUC difference.
- ``federated``: the private methods with their defaults on selected cells of the grid,
  300 replicates (their runs take 0.1 to 3 s): histogram, histogram under distributed DP
  at epsilon 1, ROC-GLM, MPC (fewer replicates: its interval is checked against the pooled
  one run by run), and the clustered method on clustered data of three sites.

Designs: latent ``X ~ N(mu y, 1)``, score ``Phi(X)`` with ``mu = sqrt(2) Phi^-1(AUC)``;
rated designs round the score to 5 levels (``floor(5 Phi(X)) / 4``, a 1-5 scale mapped
onto [0, 1] so that every method applies), and their truth is the AUC of the rated
scores with ties counted 1/2 (2 million rows). The rows are dealt to three sites.

Usage::

    python scripts/coverage_audit.py --part pooled --reps 1000
    python scripts/coverage_audit.py --part paired --reps 1000
    python scripts/coverage_audit.py --part federated --reps 300 --rocglm-reps 150 --mpc-reps 10

Tables go to ``scripts/results/coverage_audit_<part>.md`` (and ``.csv``) with the command,
seed and commit.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import command_line, git_commit, write_result

from fedroc.data import SiteData
from fedroc.federation import Federation
from fedroc.methods import evaluate, pool_site_data
from fedroc.metrics import roc_auc


def _harness() -> Any:
    """scripts/coverage.py, loaded by path (the name ``coverage`` is also a package's)."""
    path = Path(__file__).resolve().parent / "coverage.py"
    spec = importlib.util.spec_from_file_location("fedroc_coverage_audit_harness", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


_h = _harness()
Cell, ClusteredDesign, Design, MethodSpec = _h.Cell, _h.ClusteredDesign, _h.Design, _h.MethodSpec
_group_key, _run_one = _h._group_key, _h._run_one

SITES = 3
PREVALENCES = (0.05, 0.2, 0.5)
AUCS = (0.6, 0.8, 0.95)
SIZES = (100, 300, 1000, 5000)


def design_name(prevalence: float, auc: float, rated: bool) -> str:
    return f"p{round(prevalence * 100):02d}-a{round(auc * 100)}" + ("-rated" if rated else "")


GRID: dict[str, Design] = {
    design_name(p, a, r): Design(
        design_name(p, a, r), auc=a, prevalence=p, sites=SITES, levels=5 if r else None
    )
    for r in (False, True)
    for a in AUCS
    for p in PREVALENCES
}


@dataclass(frozen=True)
class RatedPairedDesign(_h.PairedDesign):  # type: ignore[misc,name-defined]
    """Two correlated models on the same rows, optionally rated on 5 levels (ties).

    ``coverage.PairedDesign``'s latent model (correlation ``rho`` in each class), with three
    sites; the truth of the difference of rated scores is computed on 2 million rows.
    """

    sites: int = SITES
    levels: int | None = None

    def scores(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        y, a, b = super().scores(n, rng)
        if self.levels is not None:
            k = self.levels
            a = np.floor(a * k).clip(0, k - 1) / (k - 1)
            b = np.floor(b * k).clip(0, k - 1) / (k - 1)
        return y, a, b

    def _truths(self) -> tuple[float, float]:
        if self.levels is None:
            return self.auc, self.auc_b
        y, a, b = self.scores(2_000_000, np.random.default_rng(12345))
        return roc_auc(y, a), roc_auc(y, b)

    def truth(self) -> float:
        return self._truths()[0]

    def truth_difference(self) -> float:
        a, b = self._truths()
        return a - b


PAIRED = {
    d.name: d
    for d in (
        RatedPairedDesign("paired-p30", 0.8, 0.75, 0.6, 0.3),
        RatedPairedDesign("paired-p30-rated", 0.8, 0.75, 0.6, 0.3, levels=5),
        RatedPairedDesign("paired-p05", 0.8, 0.75, 0.6, 0.05),
        RatedPairedDesign("paired-p05-rated", 0.8, 0.75, 0.6, 0.05, levels=5),
        RatedPairedDesign("paired-p05-a95", 0.95, 0.9, 0.6, 0.05),
    )
}

# Every method as a user calls it: no option but what the mode needs.
DEFAULTS = {
    "pooled": MethodSpec("pooled (default: logit, with score below 100 of a class)", "pooled"),
    "pooled-logit": MethodSpec(
        "pooled (logit interval alone, paper 1 eq. 3)", "pooled", interval_key="auc_ci_logit"
    ),
    "histogram": MethodSpec("histogram (default: secure aggregation, Q 1024)", "histogram"),
    "histogram-dp": MethodSpec(
        "histogram (distributed DP, eps 1, other options default)",
        "histogram",
        {"dp_epsilon": 1.0},
    ),
    "rocglm": MethodSpec("rocglm (default: heuristic sensitivity, eps 1)", "rocglm"),
    "mpc": MethodSpec("mpc (default, logit interval)", "mpc"),
    "clustered": MethodSpec(
        "clustered (default: population AUC, t on I - 1 df, logit scale)",
        "clustered",
        needs_clusters=True,
    ),
    "pooled-compare": MethodSpec(
        "pooled paired DeLong (difference)", "pooled", {"compare": True}, compares=True
    ),
    "histogram-compare": MethodSpec(
        "histogram paired DeLong, default joint grid (difference)",
        "histogram",
        {"compare": True},
        compares=True,
    ),
}

# Cells of the federated part: (design, sizes). Chosen where coverage.py has nothing:
# three sites, low prevalence, low and high AUC, rated scores, 100 to 5000 rows.
FEDERATED_CELLS: list[tuple[str, tuple[int, ...]]] = [
    ("p05-a95", (1000,)),
    ("p20-a60", (300, 1000)),
    ("p50-a80-rated", (100, 1000)),
    ("p05-a80-rated", (1000,)),
]
CLUSTERED_SIZES = (100, 300, 1000, 5000)


def _rng(seed: int, part: str, design: str, n: int) -> np.random.Generator:
    key = [ord(c) for c in f"{part}:{design}"]
    return np.random.default_rng([seed, n, *key])


def _pooled_cell(
    design: Design | RatedPairedDesign,
    n: int,
    spec: MethodSpec,
    reps: int,
    seed: int,
    part: str,
    truth: float,
) -> Cell:
    """The pooled reference through ``evaluate`` (the federation is not used by it)."""
    cell = Cell(design.name, n, spec.label, truth)
    rng = _rng(seed, part, design.name, n)
    score_b = getattr(design, "score_b", None)
    fed = Federation.from_frames(design.simulate(60, np.random.default_rng(0)), score_b=score_b)
    from fedroc.data import Columns

    columns = Columns(score_b=score_b)
    start = time.perf_counter()
    for rep in range(reps):
        frames = design.simulate(n, rng)
        pooled = pool_site_data({k: SiteData.from_frame(v, columns) for k, v in frames.items()})
        if pooled.n_pos < 2 or pooled.n_neg < 2:
            cell.add(math.nan, None, "fewer than 2 rows of a class")
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                res = evaluate(fed, "pooled", pooled=pooled, seed=rep, **spec.options)
            except Exception as exc:  # counted and shown, never hidden
                cell.fail(exc)
                continue
        if spec.compares:
            comp = res.extra["comparison"]
            est, ci = comp["auc_difference"], comp["ci"]
            reason = None if ci is not None else _group_key(str(comp.get("note")))
        else:
            est, ci = res.auc, res.auc_ci
            caveats = res.extra.get("caveats") or []
            why = [_group_key(c) for c in caveats if c.startswith("no interval")]
            reason = None if ci is not None else (why or ["no interval"])[0]
        if ci is not None and not all(math.isfinite(v) for v in ci):
            reason = f"interval NaN (estimate {'at a bound' if est in (0.0, 1.0) else est})"
            ci = None
        cell.add(est, ci, reason)
    cell.seconds = time.perf_counter() - start
    return cell


def part_pooled(reps: int, seed: int, progress: Any) -> list[Cell]:
    cells = []
    for name, design in GRID.items():
        truth = design.truth()
        for n in SIZES:
            cells.append(_pooled_cell(design, n, DEFAULTS["pooled"], reps, seed, "pooled", truth))
            progress(f"{name} n={n}: {cells[-1].row()['coverage']:.3f}")
    return cells


def part_paired(
    reps: int, hist_reps: int | None, seed: int, progress: Any, sizes: Sequence[int]
) -> list[Cell]:
    cells = []
    for name, design in PAIRED.items():
        diff = design.truth_difference()
        for n in sizes:
            cells.append(
                _pooled_cell(design, n, DEFAULTS["pooled-compare"], reps, seed, "paired", diff)
            )
            progress(f"{name} n={n} pooled: {cells[-1].row()['coverage']:.3f}")
            cell = Cell(name, n, DEFAULTS["histogram-compare"].label, diff)
            rng = _rng(seed, "paired", name, n)  # the same data as the pooled row
            start = time.perf_counter()
            for rep in range(reps if hist_reps is None else hist_reps):
                _run_one(
                    DEFAULTS["histogram-compare"], cell, design, design.simulate(n, rng), rep, seed
                )  # type: ignore[arg-type]
            cell.seconds = time.perf_counter() - start
            cells.append(cell)
            progress(f"{name} n={n} histogram: {cell.row()['coverage']:.3f}")
    return cells


@dataclass
class Agreement:
    """How far a method's interval lies from the pooled one on the same runs."""

    design: str
    n: int
    method: str
    runs: int = 0
    compared: int = 0
    max_diff: float = 0.0


def part_federated(
    reps: int, rocglm_reps: int, mpc_reps: int, seed: int, progress: Any
) -> tuple[list[Cell], list[Agreement]]:
    cells: list[Cell] = []
    agreements: list[Agreement] = []
    methods = ["pooled", "pooled-logit", "histogram", "histogram-dp", "rocglm"]
    for name, sizes in FEDERATED_CELLS:
        design = GRID[name]
        truth = design.truth()
        for n in sizes:
            row_cells = {m: Cell(name, n, DEFAULTS[m].label, truth) for m in [*methods, "mpc"]}
            agree = {m: Agreement(name, n, DEFAULTS[m].label) for m in ("histogram", "mpc")}
            rng = _rng(seed, "federated", name, n)
            # The ROC-GLM refuses rated scores by default (it needs score_levels): a few runs
            # show it; its runs take 3-10 s at n >= 1000 with 5% prevalence.
            rocglm_runs = rocglm_reps if design.levels is None else 5
            for rep in range(reps):
                frames = design.simulate(n, rng)
                run = [m for m in methods if m != "rocglm" or rep < rocglm_runs]
                run += ["mpc"] if rep < mpc_reps else []
                before = {m: len(row_cells[m].aucs) for m in run}
                for m in run:
                    _run_one(DEFAULTS[m], row_cells[m], design, frames, rep, seed)
                got = {m: len(row_cells[m].aucs) > before[m] for m in run}
                for m in ("histogram", "mpc"):
                    if m not in run:
                        continue
                    # The histogram gives fedroc's default interval, MPC the logit one.
                    r = "pooled" if m == "histogram" else "pooled-logit"
                    c, a, ref = row_cells[m], agree[m], row_cells[r]
                    a.runs += 1
                    if got[m] and got[r] and math.isfinite(c.lows[-1]):
                        if math.isfinite(ref.lows[-1]):
                            a.compared += 1
                            a.max_diff = max(
                                a.max_diff,
                                abs(c.lows[-1] - ref.lows[-1]),
                                abs(c.highs[-1] - ref.highs[-1]),
                            )
                if (rep + 1) % max(1, reps // 5) == 0:
                    progress(f"{name} n={n}: {rep + 1}/{reps}")
            cells += row_cells.values()
            agreements += agree.values()
    design_c = ClusteredDesign("clustered-3sites", auc=0.7, personalized=0.8, sites=SITES)
    for n in CLUSTERED_SIZES:
        for m in ("pooled", "clustered"):
            cell = Cell(design_c.name, n, DEFAULTS[m].label, design_c.truth())
            rng = _rng(seed, "federated", design_c.name, n)
            for rep in range(reps):
                _run_one(DEFAULTS[m], cell, design_c, design_c.simulate(n, rng), rep, seed)
            cells.append(cell)
            progress(f"{design_c.name} n={n} {m}: {cell.row()['coverage']:.3f}")
    return cells, agreements


def to_markdown(cells: list[Cell], header: list[str], extra: list[str] | None = None) -> str:
    lines = [
        *header,
        "",
        "Coverage of the truth by the nominal 95% interval, with its Monte-Carlo standard error",
        "(MCSE, sqrt(c(1-c)/runs with an interval)); '<<' marks a coverage more than 3 MCSE",
        "below 0.95. Runs without an interval (a site's refusal before any release, a method",
        "withholding its interval with a reason, an AUC of 0 or 1 where the logit interval is",
        "undefined) are counted under 'no CI' and left out of the coverage; failures are errors.",
        "",
        "| design | n | method | runs | failed | no CI | coverage (MCSE) | bias (MCSE) "
        "| width | s/run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes, withheld = [], []
    for c in cells:
        r = c.row()
        low = (
            " <<"
            if math.isfinite(r["coverage"])
            and r["coverage"] < 0.95 - 3 * max(r["coverage_mcse"], 1e-9)
            else ""
        )
        lines.append(
            f"| {r['design']} | {r['n']} | {r['method']} | {r['runs']} | {r['failed']} | "
            f"{r['no_ci']} | {r['coverage']:.3f} ({r['coverage_mcse']:.3f}){low} | "
            f"{r['bias']:+.4f} ({r['bias_mcse']:.4f}) | {r['mean_width']:.4f} | "
            f"{r['seconds_per_run']:.3f} |"
        )
        notes += [f"- {c.design} n={c.n} {c.method}: {k} ({v}x)" for k, v in c.failures.items()]
        withheld += [f"- {c.design} n={c.n} {c.method}: {k} ({v}x)" for k, v in c.withheld.items()]
    if extra:
        lines += ["", *extra]
    if notes:
        lines += ["", "Failures:", "", *notes]
    if withheld:
        lines += ["", "Runs without an interval (why):", "", *withheld]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["pooled", "paired", "federated"], required=True)
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--rocglm-reps", type=int, default=150)
    parser.add_argument("--mpc-reps", type=int, default=10)
    parser.add_argument(
        "--paired-histogram-reps",
        type=int,
        default=None,
        help="replicates of the histogram comparison (default: --reps)",
    )
    parser.add_argument("--paired-sizes", type=int, nargs="+", default=[300, 1000])
    parser.add_argument("--seed", type=int, default=20261128)
    parser.add_argument("--out", type=Path, default=Path("scripts/results"))
    args = parser.parse_args(argv)
    command = command_line("coverage_audit.py", argv)
    commit = git_commit()
    start = time.perf_counter()

    def progress(msg: str) -> None:
        print(f"[{time.perf_counter() - start:6.0f} s] {msg}", file=sys.stderr, flush=True)

    extra: list[str] = []
    if args.part == "pooled":
        cells = part_pooled(args.reps, args.seed, progress)
    elif args.part == "paired":
        cells = part_paired(
            args.reps, args.paired_histogram_reps, args.seed, progress, args.paired_sizes
        )
    else:
        cells, agreements = part_federated(
            args.reps, args.rocglm_reps, args.mpc_reps, args.seed, progress
        )
        extra = [
            "Agreement with the pooled interval on the same runs (both gave one): the histogram",
            "and MPC methods compute DeLong's interval from exact counts (the histogram under",
            "secure aggregation fedroc's default, compared with the pooled default; MPC the",
            "logit one, compared with the pooled logit interval); ratings fall on leaf",
            "edges, continuous scores are binned into 4096 leaves.",
            "",
            "| design | n | method | runs | compared | max abs diff of the bounds |",
            "|---|---|---|---|---|---|",
            *[
                f"| {a.design} | {a.n} | {a.method} | {a.runs} | {a.compared} | {a.max_diff:.2e} |"
                for a in agreements
            ],
        ]
    seconds = time.perf_counter() - start
    header = [
        f"# Coverage audit of the default intervals: {args.part}",
        "",
        f"Command: `{command}` (seed {args.seed}; commit {commit}; {seconds:.0f} s on the "
        "shared 2-core machine, nice 10). Three sites; rated designs are 5-level scores.",
    ]
    text = to_markdown(cells, header, extra)
    write_result(args.out / f"coverage_audit_{args.part}.md", text)
    pd.DataFrame([c.row() for c in cells]).to_csv(
        args.out / f"coverage_audit_{args.part}.csv", index=False
    )
    print(text)


if __name__ == "__main__":
    main()
