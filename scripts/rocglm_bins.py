"""How wide the deconvolution's bins should be: bias, spread and skew of the corrected AUC.

The ROC-GLM's correction (``fedroc.methods.rocglm._deconvolution``) deconvolves the noisy
negatives on bins over the score range; the AUC is the mean placement of the true
positives in that distribution. This script measures, without the federation (the same
estimator, the sites' part done in one place), the deconvolution error
``AUC_deconvolved - mean_i F0(p_i)`` (F0 the true negatives' cdf, so the positives' own
sampling noise is left out) for several numbers of bins ``m``:

- ``rare``: scripts/coverage.py's rare design (negatives uniform, positives Phi(N(mu, 1)),
  AUC 0.96, prevalence 0.1), where the positives pile up at the end of the range;
- ``smooth``: negatives Phi(N(-1.2, 0.5)), positives Phi(N(-0.6, 0.6)) (AUC 0.779, prevalence
  0.3): a non-uniform density near the lower end, where coarse bins could misrepresent it.

at the noise sd of fedroc's default release (0.11 at five sites of 1000 rows) and of paper
1's settings for l2-sensitivity 0.03 and 0.07 (0.151, 0.19).

Usage::

    python scripts/rocglm_bins.py [--reps 300] [--out scripts/results]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import special, stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import command_line, write_result

from fedroc.methods.rocglm._deconvolution import deconvolve, default_bins


def errors(design: str, sd: float, n: int, m: int | None, reps: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)  # the same data for every m
    out = np.empty(reps)
    for r in range(reps):
        if design == "rare":
            n_pos = rng.binomial(n, 0.1)
            neg = rng.random(n - n_pos)
            pos = special.ndtr(rng.normal(math.sqrt(2) * special.ndtri(0.96), 1, n_pos))
            exact = pos.mean()  # F0 is the identity
        else:
            n_pos = rng.binomial(n, 0.3)
            neg = special.ndtr(rng.normal(-1.2, 0.5, n - n_pos))
            pos = special.ndtr(rng.normal(-0.6, 0.6, n_pos))
            exact = special.ndtr((special.ndtri(pos) + 1.2) / 0.5).mean()
        noisy = neg + rng.normal(0, sd, neg.size)
        out[r] = deconvolve(noisy, sd, m=m).cdf(pos).mean() - exact
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--out", type=Path, default=Path("scripts/results"))
    args = parser.parse_args(argv)
    command = command_line("rocglm_bins.py", argv)
    start = time.perf_counter()
    lines = [
        "# Deconvolution error of the corrected ROC-GLM AUC by number of bins",
        "",
        f"Command: `{command}` ({args.reps} replicates per row, seed {args.seed}; the same",
        "data for every number of bins). Error = deconvolved AUC minus the positives' mean",
        "placement in the true negatives; 'default' is `default_bins(sd)` (bins sd/2 wide).",
        "",
        "| design | n | noise sd | bins | bias (MCSE) | sd | skew |",
        "|---|---|---|---|---|---|---|",
    ]
    for design in ("rare", "smooth"):
        for n in (500, 5000):
            for sd in (0.11, 0.151, 0.19):
                for m in (None, 21, 41):
                    e = errors(design, sd, n, m, args.reps, args.seed)
                    label = f"{default_bins(sd)} (default)" if m is None else str(m)
                    lines.append(
                        f"| {design} | {n} | {sd:g} | {label} | {e.mean():+.4f} "
                        f"({e.std(ddof=1) / math.sqrt(e.size):.4f}) | {e.std(ddof=1):.4f} | "
                        f"{stats.skew(e):+.2f} |"
                    )
            print(f"{design} n={n} done", file=sys.stderr, flush=True)
    text = "\n".join(lines) + "\n"
    write_result(args.out / "rocglm_bins.md", text)
    print(text)
    print(f"{time.perf_counter() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
