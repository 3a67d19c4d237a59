"""Reference numbers from R's pROC for fedroc.metrics (AUC CIs, partial AUC, Youden, paired test).

Generates two seeded data sets with numpy (the same function the test uses), runs pROC on
them through ``Rscript`` and writes the numbers, with R's and pROC's versions, to
``scripts/results/proc_reference.json`` and a table to ``proc_reference.md``.
tests/test_proc_reference.py holds these numbers (R is not needed to run the tests).

Needs R and pROC: ``apt-get install r-base-core r-cran-proc`` (Debian 12: R 4.2.2,
pROC 1.18.0). Run: ``.venv/bin/python scripts/proc_reference.py [--boot-n 20000]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"

R_PROGRAM = r"""
suppressMessages(library(pROC))
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1])
boot_n <- as.integer(args[2])
fmt <- function(x) formatC(x, digits = 17, format = "g")
out <- list(
  r_version = R.version.string,
  proc_version = as.character(packageVersion("pROC"))
)
r <- roc(d$y, d$a, levels = c(0, 1), direction = "<", quiet = TRUE)
out$auc <- as.numeric(auc(r))
out$delong_var <- var(r, method = "delong")
out$delong_ci <- as.numeric(ci.auc(r, method = "delong"))[c(1, 3)]
set.seed(1)
out$boot_ci <- as.numeric(ci.auc(r, method = "bootstrap", boot.n = boot_n,
                                 boot.stratified = TRUE, progress = "none"))[c(1, 3)]
set.seed(2)
out$boot_var <- var(r, method = "bootstrap", boot.n = boot_n, boot.stratified = TRUE,
                    progress = "none")
for (f in c(0.1, 0.3)) {
  pa <- auc(r, partial.auc = c(1, 1 - f), partial.auc.focus = "specificity",
            partial.auc.correct = TRUE)
  out[[paste0("partial_auc_", f)]] <- as.numeric(pa)
}
best <- coords(r, "best", best.method = "youden",
               ret = c("threshold", "sensitivity", "specificity", "ppv", "npv"))
out$youden <- as.list(best[1, ])
rb <- roc(d$y, d$b, levels = c(0, 1), direction = "<", quiet = TRUE)
t <- roc.test(r, rb, method = "delong", paired = TRUE)
out$paired <- list(auc_b = as.numeric(auc(rb)), z = unname(t$statistic),
                   p_value = t$p.value)
writeLines(paste0(names(out), "=", sapply(out, function(v) paste(fmt(unlist(v)), collapse = ",")),
                  collapse = "\n"))
"""


def datasets() -> dict[str, dict[str, np.ndarray]]:
    """Two seeded data sets: ties (scores on a 0.1 grid) and nearly continuous scores."""
    out = {}
    for name, (seed, n, decimals) in {"ties": (20240, 120, 1), "smooth": (20241, 300, 3)}.items():
        rng = np.random.default_rng(seed)
        y = (rng.random(n) < 0.4).astype(int)
        a = np.round(rng.normal(size=n) + 1.0 * y, decimals)
        b = np.round(0.6 * a + rng.normal(size=n) * 0.8 + 0.3 * y, decimals)
        out[name] = {"y": y, "a": a, "b": b}
    return out


def run_r(data: dict[str, np.ndarray], boot_n: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "d.csv"
        rows = ["y,a,b"] + [
            f"{int(y)},{float(a)!r},{float(b)!r}" for y, a, b in zip(*data.values(), strict=True)
        ]
        csv.write_text("\n".join(rows) + "\n")
        program = Path(tmp) / "ref.R"
        program.write_text(R_PROGRAM)
        text = subprocess.run(
            ["Rscript", str(program), str(csv), str(boot_n)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    out: dict[str, object] = {}
    for line in text.strip().splitlines():
        key, _, value = line.partition("=")
        if key in ("r_version", "proc_version"):
            out[key] = value
            continue
        numbers = [float(v) for v in value.split(",")]
        out[key] = numbers[0] if len(numbers) == 1 else numbers
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--boot-n", type=int, default=20000)
    args = parser.parse_args()
    results = {}
    for name, data in datasets().items():
        ref = run_r(data, args.boot_n)
        ref["boot_n"] = args.boot_n
        ref["checksum"] = float(np.sum(data["a"] * (1 + data["y"])) + np.sum(data["b"]))
        results[name] = ref
        print(name, json.dumps(ref, indent=1))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "proc_reference.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = [
        "# pROC reference numbers",
        "",
        "Produced by `scripts/proc_reference.py` (data from seeded numpy; pROC through Rscript).",
        "",
        "| data | quantity | pROC |",
        "|---|---|---|",
    ]
    for name, ref in results.items():
        for key, value in ref.items():
            lines.append(f"| {name} | {key} | {value} |")
    (RESULTS / "proc_reference.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
