"""A plain ``pip install .`` (no extras) gives a working CLI that reports user errors in one
line, names missing extras, and never shows a traceback for them.

The development environment hides such failures: the dev extras pull in packages (click
through flwr, for one) that a plain install lacks. So one fresh virtual environment is built
per test session with ``pip install`` of this checkout and nothing else; pip's cache makes
that take about half a minute. It is skipped only when pip cannot reach the package index,
and never when the environment variable CI is set: there a failed install fails the test.
``pytest -m "not install"`` leaves it out on purpose.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.test_cli_errors import HEAVY, check_help_at_80_columns, command_paths

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[1]

# What pip prints when it cannot reach the index (as opposed to a resolution failure).
OFFLINE_SIGNS = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "ConnectTimeoutError",
)


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}
    env["PYTHONDONTWRITEBYTECODE"] = "0"
    return env


@pytest.fixture(scope="session")
def base_bin(tmp_path_factory) -> Path:
    """bin/ of a fresh virtual environment holding `pip install .` and its dependencies."""
    env_dir = tmp_path_factory.mktemp("base-install") / "venv"
    # No pip inside: the running pip installs into it (--python), which saves bootstrapping
    # one; --no-compile skips byte-compiling pandas and scipy, most of the install time.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-compile"]
    cmd += ["--disable-pip-version-check", "--quiet", str(ROOT)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=_clean_env())
    if proc.returncode != 0:
        text = proc.stdout + proc.stderr
        if not os.environ.get("CI") and any(sign in text for sign in OFFLINE_SIGNS):
            pytest.skip(f"pip cannot reach the package index: {text.strip().splitlines()[-1]}")
        pytest.fail(f"pip install . failed:\n{text}")
    return env_dir / "bin"


def fedroc(base_bin: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(base_bin / "fedroc"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=_clean_env(),
        cwd=cwd,
    )


def assert_one_error_line(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0]


@pytest.fixture(scope="module")
def small_csv(tmp_path_factory) -> Path:
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 40)
    y[:2] = [0, 1]
    s = np.round(rng.normal(size=40) + y, 1)  # ties on purpose
    path = tmp_path_factory.mktemp("data") / "x.csv"
    rows = "\n".join(f"{a},{b}" for a, b in zip(y, s, strict=True))
    path.write_text(f"label,score\n{rows}\n")
    return path


def test_metrics_works(base_bin, small_csv):
    proc = fedroc(base_bin, "metrics", str(small_csv), "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    data = np.loadtxt(small_csv, delimiter=",", skiprows=1)
    y, s = data[:, 0] == 1, data[:, 1]
    # AUC by counting every positive-negative pair, ties as one half
    diff = s[y][:, None] - s[~y][None, :]
    assert result["auc"] == pytest.approx(((diff > 0) + 0.5 * (diff == 0)).mean(), abs=1e-12)
    assert result["n"] == 40
    table = fedroc(base_bin, "metrics", str(small_csv))
    assert table.returncode == 0 and "AUC" in table.stdout


def test_unknown_option(base_bin, small_csv):
    proc = fedroc(base_bin, "metrics", str(small_csv), "--bogus")
    assert_one_error_line(proc, "--bogus", "fedroc metrics --help")


def test_unknown_command(base_bin):
    assert_one_error_line(fedroc(base_bin, "nosuchcommand"), "nosuchcommand")


def test_bad_value(base_bin, small_csv):
    proc = fedroc(base_bin, "evaluate", "--site", f"a={small_csv}", "--method", "pooled")
    assert proc.returncode == 0, proc.stderr  # the same command line works with a good seed
    proc = fedroc(
        base_bin, "evaluate", "--site", f"a={small_csv}", "--method", "pooled", "--seed", "abc"
    )
    assert_one_error_line(proc, "--seed")


def test_extra_arguments_get_their_hint_in_the_plain_install(base_bin, small_csv):
    # The click inside typer >= 0.21 says "argument(s) (x)", the dev environment's click
    # "arguments (x y)": the hint matched only the latter, so a plain install gave none.
    proc = fedroc(base_bin, "evaluate", str(small_csv), "--method", "pooled")
    assert_one_error_line(proc, f"Give each site as --site NAME=PATH: --site x={small_csv}")
    site = ["--site", f"a={small_csv}"]
    proc = fedroc(base_bin, "evaluate", *site, "--method", "histogram", "--score-range", "-6", "7")
    assert_one_error_line(proc, "--score-range=-6,7")


def test_missing_file(base_bin, tmp_path):
    assert_one_error_line(fedroc(base_bin, "metrics", str(tmp_path / "no.csv")), "no.csv")


def test_json_usage_error_is_one_object(base_bin, small_csv):
    proc = fedroc(base_bin, "metrics", str(small_csv), "--json", "--bogus")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    obj = json.loads(proc.stdout)
    assert obj["type"] == "UsageError" and "--bogus" in obj["error"]


def test_flower_up_names_its_extra(base_bin, tmp_path):
    proc = fedroc(base_bin, "flower", "up", cwd=tmp_path)
    assert_one_error_line(proc, "'flower' extra", "pip install 'fedroc[flower]'")
    proc = fedroc(base_bin, "flower", "up", "--json", cwd=tmp_path)
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["install"] == "pip install 'fedroc[flower]'"
    assert list(tmp_path.iterdir()) == []


def test_sequester_serve_names_its_extra(base_bin, tmp_path):
    proc = fedroc(base_bin, "sequester", "serve", cwd=tmp_path)
    assert_one_error_line(proc, "'service' extra", "pip install 'fedroc[service]'")


def test_every_help_works_and_imports_nothing_heavy(base_bin):
    # One process for all of them (each --help alone would pay the interpreter start).
    probe = (
        "import json, sys\n"
        "from fedroc.cli import main\n"
        "codes = {}\n"
        f"for path in {[[], *command_paths()]!r}:\n"
        "    try:\n"
        "        main([*path, '--help'])\n"
        "        codes[' '.join(path)] = 0\n"
        "    except SystemExit as exc:\n"
        "        codes[' '.join(path)] = exc.code\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
        "print(json.dumps({'codes': codes, 'heavy': heavy}))\n"
    )
    proc = subprocess.run(
        [str(base_bin / "python"), "-c", probe],
        capture_output=True,
        text=True,
        timeout=300,
        env=_clean_env(),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(code in (0, None) for code in result["codes"].values()), result["codes"]
    assert len(result["codes"]) > 10
    assert result["heavy"] == []


def test_help_at_80_columns_keeps_every_option_name_whole(base_bin):
    # typer >= 0.21 here (flwr keeps the dev environment below it): its own option table.
    check_help_at_80_columns(str(base_bin / "python"), _clean_env())
