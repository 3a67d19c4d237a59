"""Why a ROC-GLM interval misses: bias, spread, skew and the sides of the misses.

For one design of ``scripts/coverage.py``, one size and one privacy setting, the script
runs the corrected distributed ROC-GLM (``evaluate``'s code path: the federation in one
process) and reports, over the replicates:

- the bias and the empirical SD of the AUC against the mean reported SE;
- the deconvolution part alone: the SD of ``AUC - empirical AUC`` of the same rows against
  the reported noise SE (``variance_negatives``), and against the SE the same bootstrap
  would give with the true positives' profile (which the analyst does not have);
- the skewness of the AUC, the misses below and above the truth, and the coverage of the
  logit interval and of a Wald interval with the same SE.

``--bins 41`` forces the old 41 deconvolution bins (at the sites and the analyst alike) to
show what the default (``default_bins``) changed. ``--fit single`` replaces the bagged
deconvolution (the default, :func:`fedroc.methods.rocglm._deconvolution.bagged`) by the
single maximum-likelihood fit, everything else equal (the same resamples give the
variance), to show what bagging changed.

Usage::

    python scripts/rocglm_interval_diagnosis.py [--design rare] [--n 5000] [--reps 100]
        [--setting paper-0.03 paper-0.07 default] [--bins 41] [--fit bagged single]
        [--out scripts/results]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import command_line, git_commit, write_result
from coverage import DESIGNS, simulation_policy

from fedroc.federation import Federation
from fedroc.methods.rocglm import _deconvolution, _distributed, _site
from fedroc.metrics import roc_auc

SETTINGS: dict[str, dict[str, Any]] = {
    "default": {"sensitivity": 0.03},
    "paper-0.03": {"sensitivity": 0.03, "privacy": "paper"},
    "paper-0.07": {"sensitivity": 0.07, "privacy": "paper"},
}


def single_fit(noisy: Any, sigma: float, **kwargs: Any) -> Any:
    """What :func:`_deconvolution.bagged` returns, with the single fit for the bagged mean."""
    values = np.asarray(noisy, np.float64).reshape(-1)
    points = _deconvolution.check_levels(kwargs.get("levels"))
    key = _deconvolution._resample_key(
        values,
        sigma,
        kwargs.get("score_range", (0.0, 1.0)),
        kwargs.get("m"),
        points,
        int(kwargs["replicates"]),
    )
    return _deconvolution.bootstrap_weights(
        values,
        sigma,
        score_range=kwargs.get("score_range", (0.0, 1.0)),
        m=kwargs.get("m"),
        levels=points,
        replicates=int(kwargs["replicates"]),
        rng=np.random.default_rng(int.from_bytes(key[:16], "little")),
    )


def diagnose(
    design_name: str, n: int, setting: str, reps: int, seed: int, fit: str = "bagged"
) -> dict[str, Any]:
    design = DESIGNS[design_name]
    truth = design.truth()
    captured: dict[str, Any] = {}
    bagged = _distributed.bagged
    deconvolve = bagged if fit == "bagged" else single_fit

    def keep_weights(*args: Any, **kwargs: Any) -> Any:
        captured["mixture"], captured["weights"] = deconvolve(*args, **kwargs)
        return captured["mixture"], captured["weights"]

    _distributed.bagged = keep_weights  # type: ignore[assignment]
    _site.bagged = deconvolve  # type: ignore[assignment]
    rng = np.random.default_rng([seed, n, list(DESIGNS).index(design_name)])
    rows = []
    try:
        for rep in range(reps):
            frames = design.simulate(n, rng)
            fed = Federation.from_frames(
                frames, policy=simulation_policy(), noise_seed=seed * 100_003 + rep
            )
            y = np.concatenate([f["label"].to_numpy() for f in frames.values()]).astype(bool)
            s = np.concatenate([f["score"].to_numpy() for f in frames.values()])
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = _distributed.distributed_rocglm(fed, seed=rep, **SETTINGS[setting])
            except Exception:  # refusals are counted by coverage.py, not diagnosed here
                continue
            mix, w = captured["mixture"], captured["weights"]
            exact_profile = np.asarray(mix.bin_cdf(s[y]).mean(axis=0))
            rows.append(
                (
                    r.auc,
                    r.se,
                    r.ci[0],
                    r.ci[1],
                    roc_auc(y, s),
                    r.variance_negatives,
                    float(np.std(w @ exact_profile, ddof=1)),
                    r.noise_sd,
                )
            )
    finally:
        _distributed.bagged = bagged  # type: ignore[assignment]
        _site.bagged = bagged  # type: ignore[assignment]
    if len(rows) < 2:  # a replicate the sites refused is skipped, not diagnosed
        raise SystemExit(
            f"rocglm_interval_diagnosis: {len(rows)} of {reps} runs gave a result "
            f"(--design {design_name} --n {n}, setting {setting}); at least 2 are needed, "
            "the others were refused (too few rows of a class at a site?): raise --n or --reps"
        )
    a, se, lo, hi, emp, vneg, se_exact, sd = (np.asarray(v) for v in zip(*rows, strict=True))
    z = (a - truth) / se
    return {
        "runs": a.size,
        "noise sd": float(sd.mean()),
        "bias": float(a.mean() - truth),
        "SD": float(a.std(ddof=1)),
        "mean SE": float(se.mean()),
        "SD(AUC - emp)": float((a - emp).std(ddof=1)),
        "noise SE": float(np.sqrt(vneg).mean()),
        "noise SE, exact profile": float(se_exact.mean()),
        "skew": float(stats.skew(a)),
        "miss below": float((hi < truth).mean()),
        "miss above": float((lo > truth).mean()),
        "coverage (logit)": float(((lo <= truth) & (truth <= hi)).mean()),
        "coverage (Wald)": float((np.abs(z) <= stats.norm.ppf(0.975)).mean()),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--design", default="rare", choices=list(DESIGNS))
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--setting", nargs="+", default=["paper-0.03", "paper-0.07"])
    parser.add_argument("--bins", type=int, nargs="+", default=[0], help="0: default")
    parser.add_argument("--fit", nargs="+", default=["bagged"], choices=["bagged", "single"])
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--out", type=Path, default=Path("scripts/results"))
    args = parser.parse_args(argv)
    command = command_line("rocglm_interval_diagnosis.py", argv)
    start = time.perf_counter()
    default_bins = _deconvolution.default_bins
    results = []
    commit = git_commit()
    for setting in args.setting:
        for bins in args.bins:
            for fit in args.fit:
                if bins:
                    _deconvolution.default_bins = lambda *a, b=bins: b  # type: ignore[misc]
                # The bagged fits are cached by their inputs, among them ``m=None`` but not
                # the bin count default_bins gives it: without this, a row with --bins 41
                # reused the last fits of the row before (the default bins), or the reverse.
                _deconvolution._BAGGED.clear()
                try:
                    res = diagnose(args.design, args.n, setting, args.reps, args.seed, fit)
                finally:
                    _deconvolution.default_bins = default_bins  # type: ignore[assignment]
                    _deconvolution._BAGGED.clear()
                results.append({"setting": setting, "bins": bins or "default", "fit": fit} | res)
                print(f"{setting} bins={bins or 'default'} {fit} done", file=sys.stderr, flush=True)
    keys = list(results[0])
    lines = [
        f"# Why the ROC-GLM interval misses: {args.design} design, n = {args.n}",
        "",
        f"Command: `{command}` (seed {args.seed}, commit {commit}; replicates as coverage.py's, "
        f"the first {args.reps}). 'fit': the bagged deconvolution (the default) or the "
        "single fit; 'emp': the empirical AUC of the same rows; 'noise SE, exact profile': "
        "the bootstrap's noise SE weighted by the true positives (which the analyst lacks).",
        "",
        "| " + " | ".join(keys) + " |",
        "|" + "---|" * len(keys),
    ]
    for r in results:
        cells = [f"{v:.4f}" if isinstance(v, float) else str(v) for v in r.values()]
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    write_result(args.out / f"rocglm_interval_diagnosis_{args.design}_{args.n}.md", text)
    print(text)
    print(f"{time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
