"""The CLI's error contract: one line (or one JSON object with --json) and exit 2 for
anything a user can fix, a named extra when one is missing, command-line options over the
--sites file, and a `fedroc --help` that imports nothing heavy."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import typer

import fedroc
from fedroc.cli import COMMAND_EXTRAS, app, click_command
from fedroc.cli._common import EXTRA_MODULES, MissingExtraError, require_extra
from tests._cli import run_main

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "pandas", "scipy", "matplotlib", "pyarrow", "flwr", "fastapi", "sqlalchemy")


def command_paths() -> list[list[str]]:
    """Every leaf command of the CLI as its words (`["flower", "up"]`), from click's tree."""
    paths: list[list[str]] = []

    def walk(cmd: Any, prefix: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*prefix, name])
        else:
            paths.append(prefix)

    walk(typer.main.get_command(app), [])
    return paths


def json_commands() -> list[list[str]]:
    # One click tree for all the paths: typer builds it anew at each get_command (0.2 s),
    # and once per path this took 5 s, at collection in each pytest process and in tests.
    root: Any = typer.main.get_command(app)

    def has_json(path: list[str]) -> bool:
        cmd = root
        for word in path:
            cmd = cmd.commands[word]
        return any("--json" in p.opts for p in cmd.params)

    return [p for p in command_paths() if has_json(p)]


@pytest.fixture
def csv(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    y = np.repeat([0, 1], 30)
    path = tmp_path / "x.csv"
    # c: a cluster id column of 30 pairs of rows (the label column is not one: a column in
    # two roles is refused)
    frame = pd.DataFrame({"label": y, "score": rng.normal(size=60) + y, "c": np.arange(60) // 2})
    frame.to_csv(path, index=False)
    return path


# -- usage errors ------------------------------------------------------------------------


# `fedroc evaluate` over three sites, all reading the test's CSV.
EVALUATE_3 = ["evaluate", "--site", "a={csv}", "--site", "b={csv}", "--site", "c={csv}"]
# `fedroc clustered` with Obuchowski's estimator, for the options it does not take.
OBUCHOWSKI = ["clustered", "{csv}", "--cluster", "label", "--estimator", "obuchowski"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["metrics", "{csv}", "--bogus"], "--bogus"),
        (["nosuchcommand"], "nosuchcommand"),
        (["evaluate", "--site", "a={csv}", "--method", "pooled", "--seed", "abc"], "--seed"),
        (["evaluate", "--site", "a={csv}", "--method", "pooled", "--seed", "-1"], "--seed"),
        (["metrics", "{csv}", "--confidence", "high"], "--confidence"),
        # out of (0, 1): named as the option, not as the API's confidence_level
        (["metrics", "{csv}", "--confidence", "-0.95"], "'--confidence': must lie"),
        (
            ["evaluate", "--site", "a={csv}", "--method", "pooled", "--confidence", "95"],
            "--confidence': must",
        ),
        (["clustered", "{csv}", "--cluster", "label", "--confidence", "1"], "'--confidence'"),
        (
            ["evaluate", "--site", "a={csv}", "--method", "roc-glm"],
            "--method: unknown method 'roc-glm'",
        ),
        (["metrics"], "DATA"),
        (["metrics", "{csv}", "--label"], "--label"),
        (["flower", "up", "--sites", "x"], "--sites"),
        (["mpc", "party", "--id", "0"], "--cluster"),
        (["metrics", "/no/such/file.csv"], "/no/such/file.csv"),
        (["figures", "--paper", "9", "--out", "/no/such/dir"], "--paper"),  # and no banner
        # ignored before: exit 0 and no figure written
        (
            [*OBUCHOWSKI, "--plot", "{csv}.png"],
            "error: option(s) --plot apply to --estimator joint (population and personalized "
            "AUCs), not --estimator obuchowski (one AUC, no ellipse)",
        ),
        (
            [*OBUCHOWSKI, "--sigma11", "authors", "--no-pair-correction"],
            "error: option(s) --sigma11, --no-pair-correction apply to --estimator joint",
        ),
        # exit 0 before, the JSON's "interval": "jackknife" over the logit interval with
        # Obuchowski's SE (the jackknife SE is the population AUC's)
        (
            [*OBUCHOWSKI, "--interval", "jackknife"],
            "error: option(s) --interval jackknife apply to --estimator joint",
        ),
        # "secure aggregation needs at least 2 sites; got 1" named nothing the user gave
        (
            ["evaluate", "--site", "a={csv}", "--method", "histogram"],
            "error: secure aggregation of 'fedroc.histogram.tree' needs at least 2 sites (and "
            "as many as the sites' policies ask, secagg_min_sites, default 3); got 1 site(s)",
        ),
        # refused by each site after two rounds, naming the API's 'epsilon' (before ux4)
        (
            [*EVALUATE_3, "--method", "rocglm", "--epsilon", "-1", "--delta", "1e-4"],
            "error: --epsilon must be a positive number; got -1.0",
        ),
        (
            [*EVALUATE_3, "--method", "rocglm", "--epsilon", "1", "--delta", "1.5"],
            "error: --delta must lie in (0, 1); got 1.5",
        ),
        # "Got unexpected extra argument (7)" alone: a range typed as two words, sites
        # typed as files. The hint says how to write them (an unrelated extra gets none).
        (
            [*EVALUATE_3, "--method", "histogram", "--score-range", "-6", "7"],
            "--score-range takes one value, its numbers joined by commas: --score-range=-6,7.",
        ),
        (
            [*EVALUATE_3, "--method", "histogram", "--score-levels", "0.1", "0.5", "0.9"],
            "--score-levels=0.1,0.5,0.9.",
        ),
        (
            ["evaluate", "{csv}", "--method", "pooled"],
            "Give each site as --site NAME=PATH: --site x=",
        ),
        # "No such option: --method" alone: the option is evaluate's, over several sites
        (
            ["clustered", "{csv}", "--cluster", "label", "--method", "histogram"],
            "over several sites run fedroc evaluate --method clustered --cluster COL.",
        ),
        (
            ["clustered", "--site", "a={csv}"],
            "fedroc clustered analyses one file",
        ),
        # numpy's "p <= 0, p > 1 or p contains NaNs" from a site before (review of 384d1a1)
        (
            [*EVALUATE_3, "--method", "histogram", "--dp-epsilon", "1e-20"],
            "--dp-epsilon 1e-20 gives each of the tree's",
        ),
    ],
)
def test_usage_errors_are_one_line_exit_2(capsys, csv, args, needle):
    args = [a.replace("{csv}", str(csv)) for a in args]
    code, out, err = run_main(capsys, args)
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0]


def test_a_long_error_is_not_wrapped(capsys, tmp_path):
    deep = tmp_path / ("a-very-long-directory-name-" * 6) / "file.csv"
    code, _, err = run_main(capsys, ["metrics", str(deep)])
    assert code == 2 and len(err.splitlines()) == 1 and str(deep) in err


def test_error_message_keeps_square_brackets(capsys, tmp_path):
    # rich would read "[...]" as markup and drop it
    path = tmp_path / "[weird].csv"
    code, _, err = run_main(capsys, ["metrics", str(path)])
    assert code == 2 and "[weird].csv" in err


def test_every_help_works(capsys):
    code, out, _ = run_main(capsys, ["--help"])
    assert code == 0 and "metrics" in out and "Exit status" in out
    for path in command_paths():
        code, out, err = run_main(capsys, [*path, "--help"])
        assert code == 0, (path, err)
        assert "Usage" in out, path


def check_help_at_80_columns(python: str, env: dict[str, str]) -> None:
    """Run every command's --help at COLUMNS=80 with ``python``; no option name is cut."""
    probe = (
        "import contextlib, io, json, sys\n"
        "from fedroc.cli import click_command, main\n"
        f"paths = {command_paths()!r}\n"
        "root = click_command()\n"
        "report = {}\n"
        "for path in paths:\n"
        "    buf = io.StringIO()\n"
        "    with contextlib.redirect_stdout(buf):\n"
        "        try:\n"
        "            main([*path, '--help'])\n"
        "        except SystemExit:\n"
        "            pass\n"
        "    cmd = root\n"
        "    for word in path:\n"
        "        cmd = cmd.commands[word]\n"
        "    names = [o for p in cmd.params if not getattr(p, 'hidden', False)\n"
        "             for o in (*p.opts, *getattr(p, 'secondary_opts', []))\n"
        "             if o.startswith('--')]\n"
        "    report[' '.join(path)] = [buf.getvalue(), names]\n"
        "print(json.dumps(report))\n"
    )
    env = {k: v for k, v in env.items() if k != "TERMINAL_WIDTH"}  # typer's own override
    proc = subprocess.run(
        [python, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        env={**env, "COLUMNS": "80"},
    )
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(report) == len(command_paths())
    for path, (text, names) in report.items():
        assert "Usage" in text, path
        assert max(len(line) for line in text.splitlines()) <= 80, path  # the width asked for
        assert "…" not in text, (path, [line for line in text.splitlines() if "…" in line])
        words = set(re.findall(r"--[\w-]+", text))
        assert set(names) <= words, (path, set(names) - words)
        # typer >= 0.21 (a plain install) labelled values by Python type and flags as taking
        # one: "--host <list[str]>", "--help <bool>"; they read as click's TEXT and nothing.
        labels = re.findall(r"<(?:bool|str|int|float|path|list\[\w+\])[^>]*>", text, re.I)
        assert labels == [], (path, labels)


def test_help_at_80_columns_keeps_every_option_name_whole():
    """rich's option table narrowed the name columns with the help column when they did not
    fit: at 80 columns `fedroc clustered --help` showed `--population-estim…` and
    `--no-pair-correcti…`, `flower supernode` `--root-certifi…`, `flower executor`
    `--superexec-auth-secret…`. Every name (a flag's negation too) is whole, nothing cut;
    tests/test_cli_install.py checks the same under the typer a plain install gets."""
    check_help_at_80_columns(sys.executable, dict(os.environ))


def test_a_flags_negation_is_said_in_its_help_and_still_parsed(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # each help on one line
    code, out, _ = run_main(capsys, ["flower", "supernode", "--help"])
    assert code == 0
    text = " ".join(out.split())
    assert "--no-allow-shares turns it off" in text and "off, as --no-insecure" in text
    assert "--no-no-node-auth" not in text  # typer's name for --no-node-auth's negation
    flags = {p.name: p for p in click_command().commands["flower"].commands["supernode"].params}
    assert flags["allow_shares"].secondary_opts == ["--no-allow-shares"]  # restored after help
    assert flags["no_node_auth"].secondary_opts == []
    clustered = click_command().commands["clustered"]
    ctx = clustered.make_context("clustered", ["x.csv", "--cluster", "c", "--no-pair-correction"])
    assert ctx.params["pair_correction"] is False


def test_help_reads_as_written(capsys):
    """A bracketed word is shown, not eaten as rich markup; paragraphs are not cut at the
    docstring's line breaks (before: "prints the line to add under ." and `evaluate --help`
    in half-lines: "With --sites," / "--label, ... on the command line" / "override ...")."""
    code, out, _ = run_main(capsys, ["mpc", "owner-key", "--help"])
    assert code == 0 and "under [owners]" in out
    root: Any = click_command()
    for path in command_paths():
        cmd = root
        for word in path:
            cmd = cmd.commands[word]
        for paragraph in (cmd.help or "").split("\n\n"):
            assert "\n" not in paragraph, path


def test_help_shows_what_an_argument_is(capsys):
    """Under typer < 0.21 (which flwr 1.41 requires) and click 8.5, click's Argument set help
    to None after typer had set it: `fedroc metrics --help` listed DATA without a word
    (hence click < 8.5 in the flower extra)."""
    code, out, _ = run_main(capsys, ["metrics", "--help"])
    assert code == 0 and "CSV or Parquet file with labels and scores." in " ".join(out.split())
    code, out, _ = run_main(capsys, ["mpc", "owner-key", "--help"])
    assert code == 0 and "File to write the private key to." in " ".join(out.split())


def test_an_option_given_twice_is_noted_with_both_values(capsys, tmp_path):
    """click keeps the last value, but silently: `metrics f.csv --label label --label score`
    read 'score' as the label and said only that it was not binary."""
    path = tmp_path / "d.csv"
    pd.DataFrame({"label": [0] * 5 + [1] * 5, "score": np.linspace(0, 1, 10)}).to_csv(
        path, index=False
    )
    code, out, err = run_main(capsys, ["metrics", str(path), "--label", "label", "--label=score"])
    assert code == 2 and out == ""
    assert (
        err.splitlines()[0]
        == "note: --label given 2 times ('label', 'score'); the last, 'score', applies"
    )
    assert "the label and score columns of file" in err.splitlines()[1]
    assert "are both 'score'" in err.splitlines()[1]
    code, out, err = run_main(
        capsys, ["metrics", str(path), "--score", "x", "--score", "score", "--json"]
    )
    assert code == 0 and json.loads(out)["auc"] == 1.0  # stdout: the one JSON object
    assert "--score given 2 times ('x', 'score')" in err
    # repeatable options and flags repeat as before, without a note
    args = ["metrics", str(path), "--at-specificity", "0.5", "--at-specificity", "0.8", "--json"]
    code, out, err = run_main(capsys, [*args, "--json"])
    assert code == 0 and len(json.loads(out)["operating_points"]) == 2 and "note" not in err


def test_a_group_without_its_command_shows_help_and_exits_2(capsys):
    code, out, err = run_main(capsys, ["flower"])
    assert code == 2 and "Traceback" not in out + err
    assert "supernode" in out + err


# -- --json errors, for every command that has --json ----------------------------------

# A command line per command whose error is fedroc's own (not a usage error).
JSON_ERRORS: dict[str, list[str]] = {
    "metrics": ["metrics", "/no/such.csv"],
    "evaluate": ["evaluate", "--method", "pooled"],
    "clustered": ["clustered", "/no/such.csv", "--cluster", "c"],
    "demo": ["demo", "--seed", "-5"],
    "sequester plan": [
        "sequester",
        "plan",
        "--images",
        "-1",
        "--subsets",
        "2",
        "--noise-rate",
        "0.1",
        "--load-factor",
        "1",
    ],
    "mpc run": ["mpc", "run", "/no/such.share", "--cluster", "/no/such.toml"],
    "flower up": ["flower", "up", "--sites", "0"],
    "flower run": ["flower", "run"],
    "flower health": ["flower", "health"],
    "flower register": [
        "flower",
        "register",
        "--superlink",
        "127.0.0.1:1",
        "--root-certificates",
        "/no/such.crt",
        "--site-key",
        "a=/no/such.pem",
    ],
    "privacy status": ["privacy", "status", "--audit-dir", "/no/such/dir"],
    "figures": ["figures", "--paper", "9", "--out", "/no/such/dir"],
}


def test_every_json_command_has_a_json_error_case():
    names = {" ".join(p) for p in json_commands()}
    assert names, "no command has --json"
    assert names <= set(JSON_ERRORS), f"add an error case for {sorted(names - set(JSON_ERRORS))}"


def _one_json_object(out: str) -> dict[str, Any]:
    obj = json.loads(out)  # fails on anything besides one JSON document
    assert isinstance(obj, dict)
    return obj


@pytest.mark.parametrize("name", sorted(JSON_ERRORS))
def test_json_errors_are_one_object_on_stdout(capsys, name):
    code, out, err = run_main(capsys, [*JSON_ERRORS[name], "--json"])
    obj = _one_json_object(out)
    assert code == 2 and obj["exit_code"] == 2
    assert isinstance(obj["error"], str) and obj["error"]
    assert obj["type"] != "InternalError"
    assert "Traceback" not in err and "error:" not in err


@pytest.mark.parametrize("path", json_commands(), ids=" ".join)
def test_json_usage_errors_are_one_object_on_stdout(capsys, path):
    code, out, err = run_main(capsys, [*path, "--json", "--no-such-option"])
    obj = _one_json_object(out)
    assert code == 2 and obj["type"] == "UsageError"
    assert "--no-such-option" in obj["error"]
    assert obj["command"] == "fedroc " + " ".join(path)
    assert "Traceback" not in err


def test_json_error_of_a_site_names_the_site(capsys, csv):
    args = ["evaluate", "--method", "histogram", "--min-count", "500"]
    args += [f"--site={name}={csv}" for name in ("north", "south", "east")]
    code, out, _ = run_main(capsys, [*args, "--json"])
    obj = _one_json_object(out)
    assert code == 2 and obj["site"] == "north"
    assert obj["type"] in {"SiteError", "DisclosureError"}
    assert "north" in obj["error"]


def test_json_after_double_dash_is_not_a_flag():
    from fedroc.cli._common import json_requested

    assert json_requested(["metrics", "x", "--json"])
    assert not json_requested(["metrics", "--", "--json"])
    assert not json_requested(["metrics", "--jsonx"])


def test_a_bug_exits_1_with_its_traceback(capsys, csv, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("fedroc.cli.metrics_cmd.metrics_dict", broken)
    code, out, err = run_main(capsys, ["metrics", str(csv)])
    assert code == 1 and out == ""
    assert err.startswith("error: internal error") and "Traceback" in err and "boom" in err
    code, out, err = run_main(capsys, ["metrics", str(csv), "--json"])
    obj = _one_json_object(out)
    assert code == 1 and obj["type"] == "InternalError" and "boom" in obj["error"]
    assert "Traceback" in err


def test_typer_exit_status_is_kept(monkeypatch, capsys, csv):
    def exit_3(*args, **kwargs):
        raise typer.Exit(3)

    monkeypatch.setattr("fedroc.cli.metrics_cmd.metrics_dict", exit_3)
    code, _, _ = run_main(capsys, ["metrics", str(csv)])
    assert code == 3


# -- missing extras ----------------------------------------------------------------------


def _requirement_names(reqs: list[str]) -> set[str]:
    names = set()
    for req in reqs:
        match = re.match(r"[A-Za-z0-9_.\-]+", req)
        assert match
        names.add(match.group(0).lower())
    return names


def test_extra_table_matches_pyproject():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for module, (dist, extra) in EXTRA_MODULES.items():
        assert extra in extras, (module, extra)
        assert dist.lower() in _requirement_names(extras[extra]), (module, dist, extra)


def test_every_command_extra_names_a_registered_command():
    for (group, name), extra in COMMAND_EXTRAS.items():
        infos = [c for c in group.registered_commands if c.name == name]
        assert len(infos) == 1, f"no command {group.info.name} {name}"
        assert hasattr(infos[0].callback, "__wrapped__"), f"{name} does not check {extra!r}"


@pytest.fixture
def no_flwr(monkeypatch):
    # A None entry in sys.modules makes `import flwr` fail and find_spec return None.
    for name in [m for m in sys.modules if m == "flwr" or m.startswith("flwr.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "flwr", None)


@pytest.mark.parametrize(
    "args",
    [
        ["flower", "up"],
        ["flower", "run"],
        ["flower", "supernode", "--superlink", "x:1", "--site", "a", "--data", "a.csv"],
    ],
)
def test_flower_commands_name_the_missing_extra(capsys, no_flwr, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"error: fedroc {' '.join(args[:2])} needs fedroc's 'flower' extra "
        "(flwr is not installed): pip install 'fedroc[flower]'"
    ]
    assert list(tmp_path.iterdir()) == []  # refused before doing anything
    if args[:2] in json_commands():
        code, out, _ = run_main(capsys, [*args, "--json"])
        obj = _one_json_object(out)
        assert code == 2 and obj["extra"] == "flower"
        assert obj["install"] == "pip install 'fedroc[flower]'"
    code, out, _ = run_main(capsys, [*args[:2], "--help"])  # help needs no extra
    assert code == 0 and "Usage" in out


def test_flower_certs_needs_no_extra(capsys, no_flwr, tmp_path):
    code, _, err = run_main(capsys, ["flower", "certs", str(tmp_path / "tls")])
    assert code == 0, err
    assert (tmp_path / "tls" / "ca.crt").exists()


def test_sequester_serve_names_the_missing_extra(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    code, _, err = run_main(capsys, ["sequester", "serve"])
    assert code == 2
    assert "'service' extra" in err and "pip install 'fedroc[service]'" in err


def test_an_import_error_inside_a_command_is_mapped_to_its_extra(capsys, csv, monkeypatch):
    def needs_fastapi(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'fastapi'", name="fastapi")

    monkeypatch.setattr("fedroc.cli.metrics_cmd.metrics_dict", needs_fastapi)
    code, _, err = run_main(capsys, ["metrics", str(csv)])
    assert code == 2 and "pip install 'fedroc[service]'" in err
    # fastapi is installed here, so the message says it does not fit rather than absent
    assert "does not fit" in err


def test_an_import_error_of_a_required_module_is_a_bug(capsys, csv, monkeypatch):
    def broken(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'nosuchmodule'", name="nosuchmodule")

    monkeypatch.setattr("fedroc.cli.metrics_cmd.metrics_dict", broken)
    code, _, err = run_main(capsys, ["metrics", str(csv)])
    assert code == 1 and "Traceback" in err


def test_require_extra(monkeypatch):
    require_extra("flower")  # installed in the dev environment
    monkeypatch.setitem(sys.modules, "sksurv", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'fedroc\[examples\]'"):
        require_extra("examples")
    with pytest.raises(ValueError, match="unknown extra"):
        require_extra("nope")


def test_demo_skips_its_use_case_without_the_examples_extra(capsys, monkeypatch):
    from fedroc.cli.demo_cmd import _use_cases

    monkeypatch.setitem(sys.modules, "sksurv", None)
    assert _use_cases(seed=1) == {}  # the rest of the demo needs no extra
    err = capsys.readouterr().err
    assert "GBSG2 use case skipped" in err and "pip install 'fedroc[examples]'" in err


# -- --sites file against command-line options -------------------------------------------


SITES = ("north", "south", "east")  # secure aggregation needs three by default


@pytest.fixture
def two_scores(tmp_path: Path) -> Path:
    """Two sites whose column 'a' is noise and column 'b' separates the classes."""
    rng = np.random.default_rng(11)
    for name in SITES:
        y = np.repeat([0, 1], 60)
        frame = pd.DataFrame(
            {
                "y": y,
                "y2": 1 - y,
                "a": rng.uniform(size=y.size),
                "b": np.clip(0.3 + 0.4 * y + rng.normal(scale=0.1, size=y.size), 0, 1),
            }
        )
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
    (tmp_path / "fed.toml").write_text(
        '[columns]\nlabel = "y"\nscore = "a"\n[policy]\nmin_count = 5\n'
        '[sites.north]\npath = "north.csv"\n[sites.south]\npath = "south.csv"\n'
        '[sites.south.columns]\nscore = "a"\n[sites.east]\npath = "east.csv"\n'
    )
    return tmp_path / "fed.toml"


def _pooled_auc(fed: Path, label: str, score: str) -> float:
    from sklearn.metrics import roc_auc_score

    frames = [pd.read_csv(fed.parent / f"{n}.csv") for n in SITES]
    pooled = pd.concat(frames)
    return float(roc_auc_score(pooled[label], pooled[score]))


def test_command_line_score_and_label_win_over_the_sites_file(capsys, two_scores):
    base = ["evaluate", "--sites", str(two_scores), "--method", "histogram", "--json"]
    auc_a, auc_b = _pooled_auc(two_scores, "y", "a"), _pooled_auc(two_scores, "y", "b")
    assert auc_b > 0.95 and abs(auc_a - 0.5) < 0.15  # the two columns are far apart

    code, out, err = run_main(capsys, base)
    assert code == 0, err
    assert json.loads(out)["auc"] == pytest.approx(auc_a, abs=0.01)  # the file's column

    code, out, err = run_main(capsys, [*base, "--score", "b"])
    assert code == 0, err
    assert json.loads(out)["auc"] == pytest.approx(auc_b, abs=0.01)
    # one option: "overrides" (it said "--score given on the command line override")
    assert f"note: --score given on the command line overrides {str(two_scores)!r}" in err

    code, out, err = run_main(capsys, [*base, "--score", "b", "--label", "y2"])
    assert code == 0, err
    assert json.loads(out)["auc"] == pytest.approx(1 - auc_b, abs=0.01)


def test_evaluate_help_states_the_precedence(capsys):
    code, out, _ = run_main(capsys, ["evaluate", "--help"])
    assert code == 0
    text = " ".join(out.split())
    assert "override the file's values for every site" in text
    cmd: Any = typer.main.get_command(app)
    helps = {p.opts[0]: p.help for p in cmd.commands["evaluate"].params}
    for opt in ("--label", "--score", "--pos-label", "--min-count", "--audit-dir"):
        assert "overrides --sites" in helps[opt], opt


def test_command_line_min_count_wins_over_the_sites_file(capsys, two_scores):
    base = ["evaluate", "--sites", str(two_scores), "--method", "histogram", "--json"]
    code, out, _ = run_main(capsys, [*base, "--min-count", "500"])
    assert code == 2 and json.loads(out)["site"] in SITES
    strict = two_scores.read_text().replace("min_count = 5", "min_count = 500")
    two_scores.write_text(strict)
    code, out, _ = run_main(capsys, base)
    assert code == 2  # the file's q refuses
    code, out, err = run_main(capsys, [*base, "--min-count", "5"])
    assert code == 0, err


def test_command_line_audit_dir_wins_over_the_sites_file(capsys, two_scores, tmp_path):
    audit = tmp_path / "audit"
    args = ["evaluate", "--sites", str(two_scores), "--method", "histogram"]
    code, _, err = run_main(capsys, [*args, "--audit-dir", str(audit), "--json"])
    assert code == 0, err
    for name in SITES:
        entries = (audit / f"{name}.jsonl").read_text().splitlines()
        assert entries and all(json.loads(e)["site"] == name for e in entries)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("[sites.east]", "[sitse.east]"), "has unknown key(s) ['sitse']; known: sites"),
        (("min_count = 5", 'min_count = "five"'), "min_count must be an integer; got 'five'"),
        (
            ('path = "east.csv"', 'path = "east.csv"\nmin_count = 3\nscore = "b"'),
            "site 'east' in {file} has unknown key(s) ['min_count', 'score']; known: audit, "
            "columns, noise_seed, path, policy, roster, secagg_key; policy settings go under "
            "[sites.east.policy]; column settings under [sites.east.columns]",
        ),
    ],
)
def test_a_sites_file_with_a_typo_is_refused_by_name(capsys, two_scores, edit, message):
    """Before: a misspelt [sitse.east] table dropped that site without a word (the run then
    failed, or ran, on the other sites), and min_count = "five" exited 1 with a traceback."""
    two_scores.write_text(two_scores.read_text().replace(*edit))
    code, _, err = run_main(
        capsys, ["evaluate", "--sites", str(two_scores), "--method", "histogram"]
    )
    assert code == 2 and "Traceback" not in err
    assert message.format(file=repr(str(two_scores))) in err and repr(str(two_scores)) in err


def test_a_sites_file_pos_label_in_quotes_beside_numeric_labels_says_to_drop_them(
    capsys, two_scores
):
    """``pos_label = "1"`` is text in TOML (the command line's --pos-label 1 is read as a
    number): the refusal listed the classes [0, 1] without saying why '1' is not one."""
    text = two_scores.read_text().replace('label = "y"', 'label = "y"\npos_label = "1"', 1)
    two_scores.write_text(text)
    code, _, err = run_main(
        capsys, ["evaluate", "--sites", str(two_scores), "--method", "histogram"]
    )
    assert code == 2 and "Traceback" not in err
    assert "site 'north'" in err and "give pos_label as a number, 1 not '1'" in err


def test_a_sites_file_that_is_a_directory_is_named_as_the_federation_file(capsys, tmp_path):
    code, _, err = run_main(capsys, ["evaluate", "--sites", str(tmp_path), "--method", "histogram"])
    assert code == 2
    assert err.strip() == f"error: cannot read federation file {str(tmp_path)!r}: Is a directory"


def test_a_sites_file_cluster_column_unused_by_the_method_is_noted(capsys, two_scores):
    """--cluster is refused for a method that treats the rows as independent; the same
    column set in a --sites file was ignored without a word (a DeLong interval of clustered
    rows, too narrow). The run goes on, with a note on stderr naming the column."""
    args = ["evaluate", "--sites", str(two_scores), "--method", "histogram", "--json"]
    code, out, err = run_main(capsys, args)
    assert code == 0 and "cluster" not in err
    auc = json.loads(out)["auc"]
    text = two_scores.read_text().replace('score = "a"\n', 'score = "a"\ncluster = "y2"\n', 1)
    two_scores.write_text(text)
    code, out, err = run_main(capsys, args)
    assert code == 0, err
    assert json.loads(out)["auc"] == auc  # the same run
    assert err.startswith(f"note: {str(two_scores)!r} names a cluster column ('y2'); ")
    assert "--method histogram treats the rows as independent and ignores it" in err


def test_pooled_method_with_a_sites_file_is_a_clear_error(capsys, two_scores):
    code, _, err = run_main(capsys, ["evaluate", "--sites", str(two_scores), "--method", "pooled"])
    assert code == 2 and "--site NAME=PATH" in err


# -- fast help: lazy imports -------------------------------------------------------------


def _modules_after(code: str) -> list[str]:
    probe = (
        f"import sys\n{code}\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(proc.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_help_imports_nothing_heavy():
    code = (
        "from fedroc.cli import main\n"
        "for args in (['--help'], ['evaluate', '--help'], ['flower', 'up', '--help']):\n"
        "    try:\n        main(args)\n    except SystemExit:\n        pass"
    )
    assert _modules_after(code) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["metrics", "no-such.csv"], "data file 'no-such.csv' does not exist"),
        (["metrics", "--bogus"], "No such option"),
        (["evaluate", "--site", "a=x.csv"], "--method is required"),
        (["evaluate", "--method", "roc-glm"], "unknown method 'roc-glm'"),
        (["evaluate", "--method", "pooled"], "at least one --site"),
        (["evaluate", "--method", "pooled", "--site", "a"], "--site"),
        (["evaluate", "--method", "clustered", "--site", "a=x.csv"], "needs --cluster"),
        (
            ["evaluate", "--method", "rocglm", "--site", "a=no-such.csv"],
            "site 'a': data file 'no-such.csv' does not exist",
        ),
    ],
)
def test_usage_errors_import_nothing_heavy(args, message):
    """A mistyped option, method or path is reported before numpy, pandas and scipy are loaded:
    `evaluate --method bogus` and `evaluate --site a=missing.csv` took 3 s (every method
    module loaded to check the name), `metrics missing.csv` 1.4 s (pandas)."""
    code = (
        "import contextlib, io\n"
        "from fedroc.cli import main\n"
        "err = io.StringIO()\n"
        "with contextlib.redirect_stderr(err):\n"
        "    try:\n"
        f"        main({args!r})\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 2, exc.code\n"
        f"assert {message!r} in err.getvalue(), err.getvalue()"
    )
    assert _modules_after(code) == []


def test_method_names_of_the_cli_are_the_registered_ones(capsys, monkeypatch):
    from fedroc import methods
    from fedroc.cli.evaluate_cmd import METHOD_NAMES
    from fedroc.methods import Method, get_method, method_names

    # fedroc's own methods (tests register others), in the order of their modules' names
    own = [m for m in method_names() if get_method(m).run.__module__.startswith("fedroc.")]
    assert list(METHOD_NAMES) == sorted(own)

    # A method registered in this process is taken, as the registry takes it (and removed
    # again at the end: other tests run every registered method).
    extra = Method("test.cli-extra", lambda inputs: None, "a test method")
    monkeypatch.setitem(methods._METHODS, "test.cli-extra", extra)
    code, _, err = run_main(capsys, ["evaluate", "--method", "test.cli-extra"])
    assert code == 2 and "at least one --site" in err


def test_import_fedroc_is_lazy_and_complete():
    assert _modules_after("import fedroc") == []
    assert "numpy" in _modules_after("import fedroc; fedroc.roc_auc([0, 1], [0.2, 0.9])")
    assert fedroc.roc_auc([0, 1, 1], [0.1, 0.8, 0.4]) == 1.0
    for name in fedroc.__all__:
        assert getattr(fedroc, name) is not None, name
        assert name in dir(fedroc)
    assert set(fedroc.__all__) == set(fedroc._LAZY)
    assert fedroc.metrics.roc_auc is fedroc.roc_auc  # submodules as attributes
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = fedroc.nope  # type: ignore[attr-defined]


# -- NAME=VALUE options: one splitter, one message naming the option and the value -------------
FLOWER_CONNECTION = ["--superlink", "127.0.0.1:1", "--root-certificates", "/no/such.crt"]


@pytest.mark.parametrize(
    ("args", "option", "value"),
    [
        (["evaluate", "--method", "pooled", "--site", "=x.csv"], "--site", "=x.csv"),
        (["evaluate", "--method", "pooled", "--site", "x.csv"], "--site", "x.csv"),
        (
            ["flower", "run", *FLOWER_CONNECTION, "--site-key", "bad"],
            "--site-key",
            "bad",
        ),
        (
            ["flower", "register", *FLOWER_CONNECTION, "--site-key", "a="],
            "--site-key",
            "a=",
        ),
    ],
)
def test_a_malformed_name_value_option_is_named_with_its_value(capsys, args, option, value):
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert f"{option} must look like NAME=" in line and repr(value) in line


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--seed", "1"], "error: --seed applies to --job evaluate, not --job moments"),
        (
            ["--method", "rocglm", "--bins", "5", "--confidence", "0.9"],
            "error: --method, --confidence apply to --job evaluate, not --job moments",
        ),
        (
            ["--job", "sites", "--bins", "5"],
            "error: --bins applies to --job evaluate or moments, not --job sites",
        ),
    ],
)
def test_flower_run_refuses_evaluate_options_for_another_job(capsys, extra, message):
    """`fedroc flower run --job moments --seed 1` ran the job unseeded and said nothing;
    refused before any connection (nothing listens at FLOWER_CONNECTION)."""
    pytest.importorskip("flwr")
    code, out, err = run_main(capsys, ["flower", "run", *FLOWER_CONNECTION, "--insecure",
                                       "--job", "moments", *extra])  # fmt: skip
    # (a second --job adds a note that the last one applies)
    assert code == 2 and out == "" and err.strip().splitlines()[-1] == message


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--method", "poold"],
            "--method: unknown method 'poold'; one of ['clustered', 'histogram', 'mpc', 'rocglm']",
        ),
        (["--method", "pooled"], "--method pooled needs the pooled rows"),
        ([], "--method is required with --job evaluate; one of ['clustered'"),
        (["--job", "bogus"], "--job: unknown job 'bogus'; one of ['evaluate', 'moments', 'sites']"),
        (["--job", "calls"], "--job calls takes a script of site-function calls"),
        (["--method", "rocglm", "--timeout", "0"], "--timeout must be a positive number"),
        (["--method", "rocglm", "--run-timeout", "-1"], "--run-timeout must be a positive"),
        (["--method", "rocglm", "--discovery-timeout", "0"], "--discovery-timeout must be a"),
        (["--method", "rocglm", "--site", "a", "--site", "a"], "--site names 'a' twice"),
        (["--method", "rocglm", "--seed", "-1"], "Invalid value for '--seed': -1 is not in"),
        # The sites take 2 to 100 calibration bins: the moments job asked after its mean,
        # variance and Brier score were released, and failed on the sites' refusal.
        (["--job", "moments", "--bins", "1"], "--bins 1: the sites' calibration curve takes"),
        (["--job", "moments", "--bins", "101"], "--bins 101: the sites' calibration curve"),
    ],
)
def test_flower_run_refuses_a_bad_job_method_or_site_before_any_run(capsys, extra, message):
    """`flower run --method poold` was refused by the ServerApp after a run's start-up
    (3.4 s on a loopback deployment), `--site a --site a` after it too, naming no option;
    now before any connection (nothing listens at FLOWER_CONNECTION)."""
    pytest.importorskip("flwr")
    args = ["flower", "run", "--superlink", "127.0.0.1:1", "--insecure", *extra]
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("error: " + message), line


def test_flower_run_refuses_a_site_outside_the_deployment_at_once(capsys, tmp_path):
    """`flower run --deployment DIR --site site9` waited for the ServerApp's discovery to
    give up on site9 (63 s) although the deployment's connection.json lists its sites."""
    pytest.importorskip("flwr")
    connection = {"address": "127.0.0.1:1", "insecure": True, "sites": ["site1", "site2"]}
    (tmp_path / "connection.json").write_text(json.dumps(connection))
    args = ["flower", "run", "--deployment", str(tmp_path), "--method", "rocglm"]
    code, out, err = run_main(capsys, [*args, "--site", "site1", "--site", "site9"])
    assert code == 2 and out == ""
    assert err.strip() == (
        f"error: --site 'site9' is not a site of the deployment {str(tmp_path)!r}: "
        "['site1', 'site2'] (a node started beside it: give --superlink instead)"
    )


def test_flower_run_refuses_a_site_without_a_pinned_key(capsys, tmp_path):
    """A node declaring a site without a --site-key is refused at discovery, which then
    waited 60 s for the site."""
    pytest.importorskip("flwr")
    from fedroc.federation.flower.identity import generate_node_key

    key = generate_node_key(tmp_path, "a")
    args = ["flower", "run", "--superlink", "127.0.0.1:1", "--insecure", "--method", "rocglm"]
    args += ["--site-key", f"a={key.public_key}", "--site", "a", "--site", "b"]
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == ""
    assert err.strip().startswith("error: --site 'b' has no key (--site-key)")


@pytest.mark.parametrize(
    ("data", "extra", "message"),
    [
        ("a=missing.csv", [], "error: site 'a': data file "),
        ("a=GOOD", ["--label", "outcome"], "error: label column 'outcome' not found in site 'a'"),
        ("a=BAD", [], "error: score column 'score' of site 'a' (file "),
    ],
)
def test_flower_up_refuses_a_bad_data_file_before_it_starts(
    capsys, tmp_path, monkeypatch, data, extra, message
):
    """`flower up --data north=missing.csv` started the deployment (10 s) and printed it as
    running; the first job then failed with "site 'north' is misconfigured on its
    SuperNode (details in its log)"."""
    pytest.importorskip("flwr")
    from fedroc.federation.flower import deploy

    def started(self: Any, timeout: float = 0, progress: Any = None) -> None:
        raise AssertionError("the deployment was started")

    monkeypatch.setattr(deploy.LocalDeployment, "start", started)
    (tmp_path / "good.csv").write_text("label,score\n1,0.5\n0,0.2\n")
    (tmp_path / "bad.csv").write_text("label,score\n1,0.5\n0,high\n")
    spec = data.replace("GOOD", str(tmp_path / "good.csv")).replace(
        "BAD", str(tmp_path / "bad.csv")
    )
    args = ["flower", "up", "--data", spec, "--insecure", "--dir", str(tmp_path / "dep"), *extra]
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert line.startswith(message), line


def _sites_flower_up_starts(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Stub the deployment's start: the site configs it would start are recorded in the
    returned dict, and it stops at once, as Ctrl-C does."""
    pytest.importorskip("flwr")
    from fedroc.federation.flower import deploy

    seen: dict[str, Any] = {}

    def started(self: Any, timeout: float = 0, progress: Any = None) -> None:
        seen.update(self.sites)
        raise KeyboardInterrupt

    monkeypatch.setattr(deploy.LocalDeployment, "start", started)
    return seen


def test_flower_up_gives_its_sites_a_cluster_column(capsys, tmp_path, monkeypatch):
    """`flower run --method clustered` asked for a cluster column that `flower up` had no
    option to give (only a hand-written node config had one)."""
    seen = _sites_flower_up_starts(monkeypatch)
    data = tmp_path / "a.csv"
    data.write_text("label,score,patient\n1,0.5,p1\n0,0.2,p1\n")
    args = ["flower", "up", "--data", f"a={data}", "--insecure", "--dir", str(tmp_path / "d")]
    code, _, err = run_main(capsys, [*args, "--cluster", "patient"])
    assert code == 0 and seen["a"].cluster == "patient", err
    code, out, err = run_main(capsys, [*args, "--cluster", "patient_id"])
    assert code == 2 and out == ""
    assert err.strip().startswith("error: cluster column 'patient_id' not found in site 'a'")


def test_flower_up_takes_every_sites_policy_from_a_file(capsys, tmp_path, monkeypatch):
    """`flower up` had only --min-count: a site's declared score_range (or any other setting)
    reached its nodes only by hand-written node configs. --policy-file gives every site the
    policy; a declared range that misses a row is refused before any process starts, naming
    the site and its file; --min-count beside the file is refused as flower supernode
    refuses it."""
    seen = _sites_flower_up_starts(monkeypatch)
    data = tmp_path / "a.csv"
    data.write_text("label,score\n1,2.5\n0,-1.5\n")
    policy = tmp_path / "policy.toml"
    policy.write_text("min_count = 7\nscore_range = [-3, 3]\n")
    args = ["flower", "up", "--data", f"a={data}", "--insecure", "--dir", str(tmp_path / "d")]
    code, _, err = run_main(capsys, [*args, "--policy-file", str(policy)])
    assert code == 0, err
    assert seen["a"].policy.score_range == (-3.0, 3.0) and seen["a"].policy.min_count == 7
    policy.write_text("score_range = [0, 1]\n")
    seen.clear()
    code, out, err = run_main(capsys, [*args, "--policy-file", str(policy)])
    assert code == 2 and out == "" and not seen
    [line] = err.strip().splitlines()
    assert line.startswith(f"error: site 'a' ('{data}'): some scores lie outside"), line
    code, out, err = run_main(capsys, [*args, "--policy-file", str(policy), "--min-count", "5"])
    assert code == 2 and out == "" and not seen
    assert err.strip() == (
        "error: give the policy either as --policy-file or as --min-count, not both"
    )


def test_flower_up_refuses_a_declared_range_its_sites_ledgers_bound_otherwise(
    capsys, tmp_path, monkeypatch
):
    """`flower up --dir D --policy-file` declaring [-10, 10] over nodes whose ledgers bound
    the grid [0, 1] (a histogram of an earlier run in D) said every node was connected and
    running and exited 0 when stopped, while each node refused to build its site: the first
    job waited 60 s for sites "misconfigured on its SuperNode" (checked on flower up --sites
    3). It is refused before any process starts, naming the site and the bound range."""
    from fedroc.privacy import keys
    from fedroc.privacy.ledger import BudgetLedger

    seen = _sites_flower_up_starts(monkeypatch)
    data = tmp_path / "a.csv"
    data.write_text("label,score\n1,2.5\n0,-1.5\n")
    policy = tmp_path / "policy.toml"
    policy.write_text("score_range = [-10, 10]\n")
    work = tmp_path / "d"
    args = ["flower", "up", "--data", f"a={data}", "--insecure", "--dir", str(work)]
    args += ["--policy-file", str(policy)]
    code, _, err = run_main(capsys, args)  # a fresh directory: no ledger yet
    assert code == 0 and seen, err
    ledger = BudgetLedger(path=work / "nodes" / "a" / "audit.ledger.jsonl")
    ledger.bind(keys.HISTOGRAM_RANGE, [0.0, 1.0, None])
    seen.clear()
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == "" and not seen
    [line] = err.strip().splitlines()
    assert line.startswith(
        "error: site 'a': its policy declares score_range [-10, 10], but its ledger bound its "
        "one grid of exact counts to [0, 1] before"
    ), line
    policy.write_text("score_range = [0, 1]\n")  # the bound range: runs
    data.write_text("label,score\n1,0.5\n0,0.25\n")
    code, _, err = run_main(capsys, args)
    assert code == 0 and seen, err


def test_flower_run_table_says_what_a_dash_and_the_rounds_are(capsys, monkeypatch):
    """flower run's tables showed 'n -' without the caption of evaluate's (the method does
    not release the row count) and ROC-GLM's 'rounds 10' without the 7 rounds of the Brier
    score and calibration its progress line counts apart."""
    pytest.importorskip("flwr")
    from fedroc.federation.flower import deploy

    result = {
        "method": "histogram",
        "auc": 0.8,
        "sites": [{"name": "a", "n": None}, {"name": "b", "n": None}],
        "released": {"rounds": 10, "bytes_received": {"a": 5, "b": 6}},
        "calibration_released": {"rounds": 7},
    }
    payload = {"result": result, "run_id": 1, "node_ids": {"a": 1, "b": 2}}
    monkeypatch.setattr(deploy, "submit_job", lambda *args, **kwargs: payload)
    args = ["flower", "run", "--superlink", "127.0.0.1:1", "--insecure", "--method", "histogram"]
    code, out, err = run_main(capsys, args)
    assert code == 0, err
    assert "n -: this method does not release the site's row count" in out
    assert re.search(r"│ rounds\s+│\s+10 │", out), out
    assert re.search(r"│ rounds of Brier and calibration\s+│\s+7 │", out), out


def test_flower_run_table_shows_the_caveats_and_notes_evaluate_shows(capsys, monkeypatch):
    """flower run's table listed only a result's scalar keys: the caveats of 8f98e68 and
    d4fbe3a (a point or undefined interval, MPC's small-class caveat) and the released
    notes, which fedroc evaluate prints one per row, were left out, so an interval of
    [0.5, 0.5] showed without its reason."""
    pytest.importorskip("flwr")
    from fedroc.federation.flower import deploy

    result = {
        "method": "mpc",
        "auc": 0.5,
        "auc_ci": [0.5, 0.5],
        "caveats": ["the interval is the point 0.5: every score ties"],
        "sites": [{"name": "a", "n": 10}, {"name": "b", "n": 12}],
        "released": {"rounds": 3, "bytes_received": {"a": 5, "b": 6}, "notes": ["a note"]},
    }
    payload = {"result": result, "run_id": 1, "node_ids": {"a": 1, "b": 2}}
    monkeypatch.setattr(deploy, "submit_job", lambda *args, **kwargs: payload)
    args = ["flower", "run", "--superlink", "127.0.0.1:1", "--insecure", "--method", "mpc"]
    code, out, err = run_main(capsys, args)
    assert code == 0, err
    text = " ".join(out.split())
    assert re.search(r"caveat\s+│\s+the interval is the point 0.5: every score ties", out), out
    assert re.search(r"released\s+│\s+a note", out), out
    assert "AUC 95% CI │ [0.5000, 0.5000]" in text  # the run's level, as evaluate says


def test_flower_run_says_what_discovery_waits_for_off_a_terminal(capsys, monkeypatch):
    """Off a terminal flower run drew no progress, so a --site no connected node serves
    meant 60 s of silence; the ServerApp's status line is printed to stderr."""
    pytest.importorskip("flwr")
    from fedroc.exceptions import SiteError
    from fedroc.federation._progress import CallProgress
    from fedroc.federation.flower import deploy

    def submit(*args: Any, progress: Any = None, **kwargs: Any) -> Any:
        assert progress is not None
        progress(CallProgress(1, "fedroc.info", ("a",)))  # calls are not printed
        progress("waiting up to 59 s for site(s) ['x'], which no connected SuperNode serves")
        raise SiteError("site(s) ['x'] did not answer within 60 s", site="x")

    monkeypatch.setattr(deploy, "submit_job", submit)
    args = ["flower", "run", "--superlink", "127.0.0.1:1", "--insecure", "--job", "sites"]
    code, out, err = run_main(capsys, [*args, "--site", "x"])
    assert code == 2 and out == ""
    assert err.splitlines() == [
        "sites: waiting up to 59 s for site(s) ['x'], which no connected SuperNode serves",
        "error: site(s) ['x'] did not answer within 60 s",
    ]


def test_flower_run_gives_rocglm_the_sensitivity(capsys, monkeypatch):
    """ROC-GLM's result on Flower said its site-estimated sensitivity is a heuristic and
    to 'give the sensitivity of the model', which flower run had no option for."""
    pytest.importorskip("flwr")
    from fedroc.federation.flower import deploy

    sent: dict[str, Any] = {}

    def submit(connection: Any, job: str, options: Any, **kwargs: Any) -> Any:
        sent.update(options)
        return {"result": {"method": "rocglm"}, "run_id": 1, "node_ids": {}}

    monkeypatch.setattr(deploy, "submit_job", submit)
    args = ["flower", "run", "--superlink", "127.0.0.1:1", "--insecure"]
    code, _, err = run_main(capsys, [*args, "--method", "rocglm", "--sensitivity", "0.02"])
    assert code == 0, err
    assert sent["options"] == {"sensitivity": 0.02} and sent["method"] == "rocglm"
    sent.clear()
    assert run_main(capsys, [*args, "--method", "histogram"])[0] == 0
    assert "options" not in sent  # nothing the method did not ask for
    for extra, message in (
        # The message of `fedroc evaluate` (flower run checks the method options as it does).
        (["--method", "histogram", "--sensitivity", "0.02"], "option(s) --sensitivity do not"),
        (["--method", "rocglm", "--sensitivity", "0"], "--sensitivity must be a positive"),
    ):
        code, out, err = run_main(capsys, [*args, *extra])
        assert code == 2 and out == "" and err.startswith("error: " + message), err


def test_flower_run_names_the_superlink_it_cannot_reach_without_flwrs_box(capsys):
    """`flwr run` draws a box around its error; the message quoted its frame ("started no
    run: ─────╮ │ Connection to the SuperLink is unavailable. ... │ ╰───") and no address."""
    pytest.importorskip("flwr")
    from fedroc.federation.flower.deploy import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    args = ["flower", "run", "--superlink", address, "--insecure", "--job", "sites"]
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert f"started no run at the SuperLink {address}: " in line, line
    assert "Connection to the SuperLink is unavailable" in line
    assert not re.search("[\u2500-\u257f]", line), line


def test_flower_run_without_tls_settings_names_the_options(capsys):
    pytest.importorskip("flwr")
    code, out, err = run_main(capsys, ["flower", "run", "--superlink", "h:1", "--job", "sites"])
    assert (
        code == 2
        and out == ""
        and err.strip()
        == (
            "error: give --root-certificates CA.pem (the CA of the SuperLink's certificate), or "
            "--insecure for a SuperLink without TLS"
        )
    )


@pytest.mark.parametrize("command", [["demo"], [*EVALUATE_3, "--method", "histogram"]])
def test_an_audit_dir_that_is_a_file_is_named(capsys, csv, command):
    """`--audit-dir x.csv` (a file) ended in "error: [Errno 17] File exists: 'x.csv'"."""
    args = [a.format(csv=csv) for a in command]
    code, out, err = run_main(capsys, [*args, "--audit-dir", str(csv)])
    assert code == 2 and out == ""
    assert err.strip() == (
        f"error: --audit-dir {str(csv)!r} is a file; give a directory (created if missing)"
    )


@pytest.mark.parametrize(
    "command",
    [["flower", "certs", "{csv}"], ["flower", "keys", "--site", "a", "--node-dir", "{csv}"]],
)
def test_a_directory_argument_that_is_a_file_is_named(capsys, csv, command):
    """A file given where a directory is made failed as "[Errno 17] File exists: 'x.csv'"."""
    code, out, err = run_main(capsys, [a.format(csv=csv) for a in command])
    assert code == 2 and out == ""
    assert err.strip() == f"error: {str(csv)!r} is a file; a directory was expected there"


def test_cli_jobs_of_flower_run_are_registered_jobs():
    pytest.importorskip("flwr")
    import fedroc.apps.application  # noqa: F401  (registers the evaluate job)
    from fedroc.cli.flower_cmd import CLI_JOBS, SCRIPT_JOBS
    from fedroc.federation.flower.jobs import job_names

    assert sorted((*CLI_JOBS, *SCRIPT_JOBS)) == job_names()


def test_supernode_refuses_an_unreadable_mpc_cluster_before_it_starts(capsys, tmp_path):
    """``--mpc-proxies`` names the cluster whose proxies the site seals MPC shares for: a
    file that cannot be read is refused at once, naming the option and the file."""
    pytest.importorskip("flwr")
    data = tmp_path / "a.csv"
    data.write_text("label,score\n1,0.5\n0,0.2\n")
    missing = tmp_path / "nope.toml"
    args = ["flower", "supernode", "--superlink", "127.0.0.1:1", "--site", "a"]
    args += ["--data", str(data), "--insecure", "--mpc-proxies", str(missing)]
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"error: --mpc-proxies: cluster file {str(missing)!r} does not exist"
    ]


@pytest.mark.parametrize("value", ["", " , "])
def test_supernode_refuses_an_empty_allowed_functions(capsys, tmp_path, monkeypatch, value):
    """Before: ``--allowed-functions ""`` (an unset shell variable, say) was dropped and the
    node served every site function, while ``allowed-functions = ""`` in a node config served
    none (measured: the node started, exit 0, with no allowed-functions in its node config);
    now both are refused, naming the option, before the node starts."""
    pytest.importorskip("flwr")
    from fedroc.federation.flower import node

    monkeypatch.setattr(node, "supervise", lambda args, **_: 0)  # never connect
    data = tmp_path / "a.csv"
    data.write_text("label,score\n1,0.5\n0,0.2\n")
    args = ["flower", "supernode", "--superlink", "127.0.0.1:1", "--site", "a"]
    args += ["--data", str(data), "--insecure", "--node-dir", str(tmp_path / "node")]
    code, out, err = run_main(capsys, [*args, "--allowed-functions", value])
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"error: --allowed-functions names no function ({value!r}); leave it out to allow "
        "every function"
    ]
    assert not (tmp_path / "node").exists()


# -- a bad data file: the message names the site, the file and the value -----------------


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "does not exist"),
        ("", "is empty"),  # pandas said only "No columns to parse from file"
    ],
)
def test_an_unreadable_site_file_names_the_site(capsys, csv, tmp_path, content, needle):
    bad = tmp_path / "south.csv"
    if content is not None:
        bad.write_text(content)
    args = ["evaluate", "--method", "pooled", "--site", f"north={csv}", "--site", f"south={bad}"]
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("error: site 'south': ") and repr(str(bad)) in line
    assert needle in line


def test_a_non_numeric_score_names_the_first_bad_value(capsys, tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("label,score\n0,0.1\n1,0.9\n1,high\n0,0.3\n")
    code, out, _ = run_main(capsys, ["metrics", str(path), "--json"])
    obj = _one_json_object(out)
    assert code == 2 and obj["type"] == "InputError"
    # The line of the file where the user finds it (it said "index 2", the row from 0).
    assert "must be numeric" in obj["error"] and "line 4: 'high'" in obj["error"]
    assert obj["error"].startswith(f"score column 'score' of file {str(path)!r}")


def test_a_files_bad_rows_are_named_by_their_line_or_row_from_one(capsys, tmp_path):
    csv = tmp_path / "x.csv"
    csv.write_text("label,score,w\n0,0.1,1\n1,,1\n1,0.4,1\n0,0.3,-2\n")
    code, _, err = run_main(capsys, ["metrics", str(csv)])
    assert code == 2 and "1 missing value(s), first at line 3" in err
    csv.write_text("label,score,w\n0,0.1,1\n1,0.2,1\n1,0.4,1\n0,0.3,-2\n")
    args = ["evaluate", "--site", f"a={csv}", "--method", "pooled", "--sample-weight", "w"]
    code, _, err = run_main(capsys, args)
    assert code == 2 and "non-negative; line 5 has -2.0" in err, err
    pq = tmp_path / "x.parquet"
    pd.DataFrame({"label": [0, 1, 1], "score": [0.1, None, 0.3]}).to_parquet(pq)
    code, _, err = run_main(capsys, ["metrics", str(pq)])
    assert code == 2 and "first at row 2 (counting from 1)" in err, err


def test_a_label_with_three_values_names_the_column(capsys, tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("y,p\n0,0.1\n1,0.9\n2,0.3\n")
    code, _, err = run_main(capsys, ["metrics", str(path), "--label", "y", "--score", "p"])
    assert code == 2
    [line] = err.splitlines()
    assert line.startswith(f"error: label column 'y' of file {str(path)!r} must be binary")


def test_a_pos_label_missing_at_one_site_names_that_site(capsys, tmp_path):
    north, south = tmp_path / "north.csv", tmp_path / "south.csv"
    south.write_text("label,score\n" + "dead,0.9\nalive,0.2\n" * 5)
    north.write_text("label,score\n" + "1,0.9\n0,0.2\n" * 5)
    args = ["evaluate", "--method", "pooled", "--pos-label", "dead"]
    args += ["--site", f"south={south}", "--site", f"north={north}"]
    code, _, err = run_main(capsys, args)
    assert code == 2
    [line] = err.strip().splitlines()
    assert "site 'north'" in line and "--pos-label='dead'" in line and "[0, 1]" in line


# -- warnings: one line each on stderr ----------------------------------------------------


def test_a_warning_is_one_line_naming_no_file_of_typer(capsys, tmp_path):
    # Python's format named typer/main.py (the caller of the command) on a second line;
    # the message named y_true, the Python API's name for what the CLI calls --label.
    path = tmp_path / "one.csv"
    path.write_text("label,score\n" + "1,0.5\n" * 10)
    code, out, err = run_main(capsys, ["metrics", str(path), "--json"])
    assert code == 0 and _one_json_object(out)["auc"] is None
    assert err.splitlines() == [
        "warning: only one class in the label column: the AUC and its variance are NaN"
    ]


def test_a_long_warning_is_not_wrapped(capsys):
    # stderr was cut at 80 columns when it is not a terminal
    args = ["sequester", "plan", "--images", "1047", "--subsets", "100", "--load-factor", "400"]
    args += ["--noise-rate", "0.8", "--auc", "0.81", "--prevalence", "0.12"]
    code, _, err = run_main(capsys, args)
    assert code == 0
    [line] = err.splitlines()
    assert line.startswith("warning: answers are perturbed at 0.8") and line.endswith("AUC")


def test_help_says_what_to_type_for_site_and_operating_points(capsys):
    # typer showed the Python types: "--site TEXT" (or "<list[str]>" on typer >= 0.21)
    code, out, _ = run_main(capsys, ["evaluate", "--help"])
    assert code == 0
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith("│ --")}
    assert rows["--site"].split()[2] == "NAME=PATH"
    assert rows["--at-specificity"].split()[2] == "FLOAT"
    assert "list[" not in out


@pytest.mark.parametrize(
    ("method_args", "line"),
    [
        (["pooled", "--bins", "0"], "Invalid value for '--bins': 0 is not in the range x>=1."),
        # Taken as the pooled method's n_bins, then overwritten by --bins (review s15).
        (["pooled", "--cluster-bins", "5"], "option(s) --cluster-bins do not apply to --method"),
        (["histogram", "--quantiles", "0"], "--quantiles must be an integer >= 2; got 0"),
        (["rocglm", "--epsilon", "1"], "give both --epsilon and --delta, or neither"),
        (["mpc", "--mpc-precision", "99"], "mpc: --mpc-precision (the precision of the opened"),
        # These said "mpc: sort must be ...", "mpc: delta must be ...", the engine's names.
        (["mpc", "--mpc-sort", "foo"], "mpc: --mpc-sort must be 'oblivious' or 'delta'; got"),
        (
            ["mpc", "--mpc-sort", "delta", "--mpc-delta", "2"],
            "mpc: --mpc-delta must be a positive odd integer; got 2",
        ),
        # Taken and ignored: without --mpc-calibration the MPC job draws no curve (s15).
        (["mpc", "--bins", "5"], "--bins applies to --method mpc with --mpc-calibration"),
        # --bins 10, the default, was taken where flower run refuses it (review of 12-07).
        (["mpc", "--bins", "10"], "--bins applies to --method mpc with --mpc-calibration"),
        # Taken and ignored: the oblivious sort (the default) has no delta (review s15).
        (["mpc", "--mpc-delta", "3"], "--mpc-delta applies to --mpc-sort delta"),
        # It named the tree (--branching 2 and height 29) the user did not give.
        (
            ["histogram", "--quantiles", "100000000"],
            "--quantiles 100000000 needs a tree of 2^29 = 536870912 leaves (branching 2, "
            "height 29); at most 2^22 allowed: ask for at most 1048576 quantiles",
        ),
        # Every site refused "argument 'epsilon' must lie in [0.0, 1000.0]", naming rocglm's
        # --epsilon to a reader of the command line (review s15).
        (
            ["histogram", "--dp-epsilon", "1e300"],
            "--dp-epsilon 1e+300 gives each of the tree's 12 levels and the class counts "
            "epsilon 7.69e+298, above 1000",
        ),
        # "--dp-mode 'local' needs --dp-epsilon (--dp-epsilon)"
        (["histogram", "--dp-mode", "local"], "--dp-mode 'local' needs --dp-epsilon"),
        # "mpc: min_class_count must be ...", the engine's name (review s15).
        (
            ["mpc", "--mpc-min-class-count", "0"],
            "mpc: --mpc-min-class-count must be a positive integer; got 0",
        ),
        (
            ["mpc", "--mpc-min-class-count", "1"],
            "mpc: a confidence interval needs --mpc-min-class-count >= 2 (DeLong's",
        ),
        (
            ["rocglm", "--privacy", "foo"],
            "--privacy must be one of ('default', 'paper'); got 'foo'",
        ),
        (
            ["clustered", "--cluster", "c", "--cluster-bins", "0"],
            "--cluster-bins must be a positive integer; got 0",
        ),
        # Its width hi - lo overflowed: the histogram ended in "internal error" (pchip on
        # infinite knots), the clustered method in "argument 'edges' must be a numeric
        # array; got list" from every site (review s15).
        (
            ["histogram", "--score-range=-1e308,1e308"],
            "--score-range must be two finite numbers lo < hi, hi - lo finite too; got",
        ),
        (
            ["clustered", "--cluster", "c", "--score-range=-1e308,1e308"],
            "--score-range must be finite with low < high, high - low finite too; got",
        ),
        # Allocated its edges first: MemoryError, exit 1 and a traceback (review s15).
        (
            ["clustered", "--cluster", "c", "--cluster-bins", "100000000000"],
            "--cluster-bins must be at most 1000000 (the bins the sites take); got 100000000000",
        ),
    ],
)
def test_a_bad_method_option_is_named_as_the_option(capsys, csv, method_args, line):
    # The methods name their keywords (n_bins, quantiles, privacy); the CLI names the option.
    args = ["evaluate", *(f"--site={name}={csv}" for name in "abc"), "--method", *method_args]
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == ""
    assert err.splitlines()[0].startswith(f"error: {line}")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (["--load-factor", "4", "--noise-rate", "-0.8"], "--noise-rate must be a positive number"),
        (["--load-factor", "4", "--noise-rate", "0.1", "--images", "0"], "--images must be a"),
        (["--noise-rate", "0.1"], "give exactly one of --load-factor, --subset-size and --budget"),
        (["--load-factor", "4", "--noise-rate", "0.1", "--auc", "0.8"], "give --auc and --prev"),
    ],
)
def test_sequester_plan_names_its_options(capsys, extra, line):
    # The planner names its keywords (noise_rate, n_images, load_factor); the CLI its options.
    images = [] if "--images" in extra else ["--images", "1047"]  # once: a repeat is noted
    code, out, err = run_main(capsys, ["sequester", "plan", *images, "--subsets", "9", *extra])
    assert code == 2 and out == ""
    [error] = err.splitlines()
    assert error.startswith(f"error: {line}")


@pytest.mark.parametrize("command", [["metrics"], ["clustered", "--cluster", "c"]])
def test_text_labels_ask_for_the_pos_label_option(capsys, tmp_path, command):
    path = tmp_path / "x.csv"
    path.write_text("label,score,c\n" + "dead,0.9,1\nalive,0.2,2\n" * 5)
    code, _, err = run_main(capsys, [command[0], str(path), *command[1:]])
    assert code == 2
    [line] = err.splitlines()
    assert "['alive', 'dead']" in line and "pass --pos-label to say which value" in line


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("label;score\n1;0,9\n0;0,2\n", "separated by ';'"),
        ("label\tscore\n1\t0.9\n0\t0.2\n", "separated by tabs: name the file .tsv"),
    ],
)
def test_a_file_with_another_separator_says_so(capsys, tmp_path, text, hint):
    # Excel in many locales writes ';'; the message listed one column "label;score" only.
    path = tmp_path / "x.csv"
    path.write_text(text)
    code, _, err = run_main(capsys, ["metrics", str(path)])
    assert code == 2
    [line] = err.splitlines()
    assert "label column 'label' not found" in line and hint in line


@pytest.mark.parametrize(
    ("args", "roles"),
    [
        (["metrics", "{csv}", "--label", "label", "--score", "label"], "label and score"),
        (["metrics", "{csv}", "--compare-score", "score"], "score and second score"),
        (["clustered", "{csv}", "--cluster", "score"], "score and cluster"),
        ([*EVALUATE_3, "--method", "histogram", "--score", "label"], "label and score"),
    ],
)
def test_one_column_in_two_roles_is_refused(capsys, csv, args, roles):
    # Exit 0 before: --score label gave an AUC of 1; a score column as the cluster ids made
    # each row its own cluster (population AUC 0.5 over a handful of tied "clusters"); a
    # score compared with itself a difference of 0 in [0, 0].
    args = [a.replace("{csv}", str(csv)) for a in args]
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert line.startswith(f"error: the {roles} columns of ") and str(csv) in line
    assert line.endswith(": each needs a column of its own")


@pytest.mark.parametrize(
    ("header", "near"),
    [("label, score", "' score'"), ("label,Score", "'Score'"), ("label,score ", "'score '")],
)
def test_a_column_named_but_for_spaces_or_case_is_shown_as_it_is(capsys, tmp_path, header, near):
    # "label, score" (a space after the comma, as typed by hand) was refused with
    # "available columns: label,  score": nothing said that the name was ' score'.
    path = tmp_path / "x.csv"
    path.write_text(header + "\n1,0.9\n0,0.2\n")
    code, _, err = run_main(capsys, ["metrics", str(path)])
    assert code == 2
    [line] = err.splitlines()
    assert "score column 'score' not found" in line
    assert line.endswith(f"(the file has {near}: names must match exactly, spaces and case too)")


@pytest.mark.parametrize("path", [["metrics"], ["evaluate"], ["clustered"]])
def test_flags_declare_no_value_in_help(path):
    # typer >= 0.21 (the one `pip install fedroc` gets; the test environment has flwr's pin,
    # 0.20) renders a flag without a metavar as "--json <bool>", and users typed "--json true".
    cmd: Any = typer.main.get_command(app)
    for word in path:
        cmd = cmd.commands[word]
    flags = {p.opts[0]: p for p in cmd.params if p.opts[0] in ("--json", "--youden")}
    assert "--json" in flags
    assert all(p.metavar == "" for p in flags.values()), path


def test_every_option_says_what_it_is_for():
    """`fedroc sequester serve --help` listed --host and --port with a default and no word."""
    root = click_command()
    silent = []
    for path in command_paths():
        cmd = root
        for word in path:
            cmd = cmd.commands[word]
        for param in cmd.params:
            if getattr(param, "param_type_name", "") == "option" and not param.hidden:
                if not (param.help or "").strip():
                    silent.append(f"fedroc {' '.join(path)} {param.opts[0]}")
    assert silent == []


def test_evaluate_help_groups_each_methods_options(capsys):
    """The 60 options of `fedroc evaluate --help` were one list, common and per-method mixed."""
    code, out, _ = run_main(capsys, ["evaluate", "--help"])
    assert code == 0
    panels = re.split(r"╭─ (Options(?: of --method \w+)?) ─", out)
    by_panel = {
        panels[i]: set(re.findall(r"--[\w-]+", panels[i + 1])) for i in range(1, len(panels), 2)
    }
    assert {"--epsilon", "--delta", "--sensitivity", "--a0"} <= by_panel[
        "Options of --method rocglm"
    ]
    assert {"--quantiles", "--dp-epsilon"} <= by_panel["Options of --method histogram"]
    assert {"--mpc-cluster", "--mpc-precision"} <= by_panel["Options of --method mpc"]
    assert {"--cluster", "--cluster-bins"} <= by_panel["Options of --method clustered"]
    assert "--sample-weight" in by_panel["Options of --method pooled"]
    # common options, and those of several methods, stay together
    assert {"--site", "--method", "--seed", "--bootstrap", "--score-range"} <= by_panel["Options"]
    assert "rocglm: DP epsilon" not in out and "DP epsilon of the noisy scores" in out


def test_a_damaged_ledger_is_named_not_a_traceback(capsys, tmp_path, csv):
    """A ledger file that is not UTF-8 text (a disk error, a binary file copied over it) ended
    `fedroc privacy status` and any evaluate with --audit-dir in a UnicodeDecodeError
    traceback (exit 1). It is refused naming the file: skipping it would lose its spending."""
    # histogram, not pooled: pooled calls no site and refuses --audit-dir (ux17)
    sites = [x for n in "abc" for x in ("--site", f"{n}={csv}")]
    evaluate = ["evaluate", *sites, "--method", "histogram", "--score-transform", "logistic"]
    code, _, err = run_main(capsys, [*evaluate, "--audit-dir", str(tmp_path)])
    assert code == 0, err
    ledger = tmp_path / "a.ledger.jsonl"
    ledger.write_bytes(b"\x00\xff" + ledger.read_bytes())
    message = (
        f"error: privacy ledger {str(ledger)!r} is damaged (not UTF-8 text: byte 0xff at "
        "offset 1); the spending it records cannot be read: restore the file from a copy"
    )
    for args in (
        ["privacy", "status", "--audit-dir", str(tmp_path)],
        [*evaluate, "--audit-dir", str(tmp_path)],
    ):
        code, out, err = run_main(capsys, args)
        assert code == 2 and out == "" and err.strip() == message


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["evaluate", "--sites", "{bin}", "--method", "histogram"],
            "error: federation file {bin!r}",
        ),
        (["mpc", "party", "--cluster", "{bin}", "--id", "0"], "error: cluster file {bin!r}"),
    ],
)
def test_a_binary_toml_file_is_named_not_a_traceback(capsys, tmp_path, args, message):
    """A file that is not UTF-8 text ended in 'internal error ... UnicodeDecodeError'."""
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\x00\xff\xfe")
    code, out, err = run_main(capsys, [a.replace("{bin}", str(binary)) for a in args])
    assert code == 2 and out == "" and "Traceback" not in err
    [line] = err.strip().splitlines()
    assert line.startswith(message.format(bin=str(binary)) + " is not valid TOML: ")


def test_policy_file_that_is_binary_is_named(tmp_path):
    from fedroc.exceptions import InputError
    from fedroc.privacy import DisclosurePolicy

    binary = tmp_path / "policy.toml"
    binary.write_bytes(b"\x00\xff\xfe")
    with pytest.raises(InputError, match=f"policy file {str(binary)!r} is not valid TOML"):
        DisclosurePolicy.from_toml(binary)


def test_an_audit_log_line_that_is_not_text_counts_as_unreadable_in_the_report(
    capsys, tmp_path, csv
):
    """--report with --audit-dir read each site's audit log as UTF-8: one binary line ended
    the run, after the method, in a UnicodeDecodeError traceback."""
    audit = tmp_path / "audit"
    audit.mkdir()
    (audit / "a.jsonl").write_bytes(b"\x00\xff\n")
    report = tmp_path / "r.html"
    # histogram, not pooled: pooled calls no site and refuses --audit-dir (ux17)
    sites = [x for n in "abc" for x in ("--site", f"{n}={csv}")]
    args = ["evaluate", *sites, "--method", "histogram", "--score-transform", "logistic"]
    args += ["--audit-dir", str(audit)]
    code, _, err = run_main(capsys, [*args, "--report", str(report)])
    assert code == 0, err
    from fedroc.cli.evaluate_cmd import audit_summary

    assert audit_summary(audit)["a"]["unreadable"] == 1
    # privacy status names a ledger's site by the first line of the audit log beside it:
    # that line, not UTF-8, ended it in 'internal error ... UnicodeDecodeError' (exit 1).
    (audit / "a.jsonl").write_bytes(b"\x00\xff\n")
    code, out, err = run_main(capsys, ["privacy", "status", "--audit-dir", str(audit), "--json"])
    assert code == 0 and "Traceback" not in err, err
    assert [s["site"] for s in json.loads(out)["sites"]] == ["a", "b", "c"]


@pytest.mark.parametrize(
    "args",
    [
        ["flower", "run", "--superlink", "127.0.0.1:1", "--method", "rocglm"],
        ["flower", "register", "--superlink", "127.0.0.1:1", "--site-key", "a={ca}"],
        ["flower", "health", "--superlink", "127.0.0.1:1"],
        ["flower", "executor"],
        ["flower", "supernode", "--superlink", "127.0.0.1:1", "--site", "north", "--data", "{ca}"],
    ],
)
def test_a_root_certificates_file_that_is_no_certificate_is_named(capsys, tmp_path, args):
    """flower run and register failed in flwr's own boxed message ("'ascii' codec can't
    decode byte 0xff"), naming no file; a node retried as if its SuperLink were down."""
    pytest.importorskip("flwr")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"\x00\xff not a certificate")
    pub = tmp_path / "north.pub"  # a good site key: only the CA is wrong
    pub.write_bytes(
        ec.generate_private_key(ec.SECP384R1())
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    args = [a.replace("a={ca}", f"north={pub}").replace("{ca}", str(ca)) for a in args]
    code, out, err = run_main(capsys, [*args, "--root-certificates", str(ca)])
    assert code == 2 and out == ""
    assert err.strip() == (
        f"error: --root-certificates {str(ca)!r} holds no PEM certificate (a CA certificate, "
        "e.g. ca.crt of `fedroc flower certs`)"
    )


def test_sequester_token_file_that_is_binary_is_named(capsys, tmp_path):
    pytest.importorskip("fastapi")
    token = tmp_path / "token"
    token.write_bytes(b"\x00\xff\xfe")
    token.chmod(0o600)
    args = ["sequester", "serve", "--db", str(tmp_path / "s.db"), "--admin-token-file", str(token)]
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.strip() == (
        f"error: --admin-token-file {str(token)!r} is not a text file (the token is one line "
        "of text)"
    )


def test_flower_up_checks_its_synthetic_sites_columns_before_it_starts(
    capsys, tmp_path, monkeypatch
):
    """Without --data, `flower up` writes synthetic sites (label, score, patient): a
    --cluster or --label they lack was found only by the first job, as a misconfigured
    SuperNode (found in review; the --data files were checked, these were not)."""
    pytest.importorskip("flwr")
    from fedroc.federation.flower import deploy

    started: list[bool] = []

    def start(self: Any, timeout: float = 0, progress: Any = None) -> None:
        started.append(True)
        raise KeyboardInterrupt  # stop at once, as Ctrl-C does

    monkeypatch.setattr(deploy.LocalDeployment, "start", start)
    args = ["flower", "up", "--sites", "2", "--insecure", "--dir", str(tmp_path / "d")]
    code, out, err = run_main(capsys, [*args, "--cluster", "patient_id"])
    assert code == 2 and out == "" and started == []
    assert err.strip().startswith("error: cluster column 'patient_id' not found in site 'site1'")
    code, _, err = run_main(capsys, [*args, "--cluster", "patient"])
    assert code == 0 and started == [True], err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # A file where --out's directory goes: "[Errno 20] Not a directory: 'x.csv/sub'"
        # after the banner, naming no option.
        (["figures", "--paper", "3", "--out", "{csv}/sub"], "--out '{csv}/sub': '{csv}' is a file"),
        (["figures", "--paper", "3", "--out", "{csv}"], "--out '{csv}': '{csv}' is a file"),
        (
            ["metrics", "{csv}", "--plot", "{csv}/a/b.png"],
            "--plot '{csv}/a/b.png': '{csv}' is a file",
        ),
        # Paper 4 has no figure: said after the banner, and --out was made anyway.
        (
            ["figures", "--paper", "4", "--out", "{tmp}/f4"],
            "--paper 4: fedroc reproduces no figure of paper 4 (Unal et al., ppAURORA); papers "
            "with figures: 1, 2, 3, 5",
        ),
    ],
)
def test_output_directories_are_checked_before_any_work(capsys, csv, tmp_path, args, expected):
    fill = {"csv": str(csv), "tmp": str(tmp_path)}
    code, out, err = run_main(capsys, [a.format(**fill) for a in args])
    assert code == 2 and out == ""
    assert err.strip() == f"error: {expected.format(**fill)}" + (
        ", not a directory" if "is a file" in expected else ""
    )
    assert not (tmp_path / "f4").exists()


def test_privacy_status_says_whether_the_audit_dir_is_missing_or_a_file(capsys, csv, tmp_path):
    # Both said "is not a directory", which read as if a missing directory were a file.
    missing = tmp_path / "none"
    code, _, err = run_main(capsys, ["privacy", "status", "--audit-dir", str(missing)])
    assert code == 2 and err.strip() == (
        f"error: --audit-dir {str(missing)!r} does not exist; give the directory the sites "
        "wrote their audit logs to (evaluate --audit-dir)"
    )
    code, _, err = run_main(capsys, ["privacy", "status", "--audit-dir", str(csv)])
    assert code == 2
    assert err.strip() == f"error: --audit-dir {str(csv)!r} is a file, not a directory"


def test_clustered_over_two_sites_does_not_suggest_mpc_as_if_it_gave_clustered_aucs(
    capsys, tmp_path
):
    """The refusal of a two-site secure aggregation points to --method mpc, which gives the
    ordinary AUC: for --method clustered it now says so; for histogram it stays as it was."""
    rng = np.random.default_rng(0)
    sites = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.csv"
        pid = np.repeat(np.arange(20), 3)
        y = rng.integers(0, 2, pid.size)
        frame = pd.DataFrame({"label": y, "score": rng.random(pid.size).round(3), "pid": pid})
        frame.to_csv(path, index=False)
        sites += ["--site", f"{name}={path}"]
    code, _, err = run_main(
        capsys, ["evaluate", *sites, "--method", "clustered", "--cluster", "pid"]
    )
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "(--method mpc) needs no secure aggregation; it computes the ordinary AUC, not " in err
    code, _, err = run_main(capsys, ["evaluate", *sites, "--method", "histogram"])
    assert code == 2 and "not the clustered AUCs" not in err and "--method mpc" in err


def test_an_unrelated_extra_argument_gets_no_hint(capsys, csv):
    code, _, err = run_main(capsys, ["evaluate", "--site", f"a={csv}", "--label", "y", "z"])
    assert code == 2 and "(z)" in err
    assert "joined by commas" not in err and "--site NAME=PATH:" not in err, err


def _clustered_csv(tmp_path: Path) -> Path:
    rng = np.random.default_rng(5)
    pid = np.repeat(np.arange(30), 4)
    y = rng.integers(0, 2, pid.size)
    path = tmp_path / "c.csv"
    frame = pd.DataFrame({"label": y, "score": (0.2 + 0.5 * y * rng.random(pid.size)).round(3)})
    frame.assign(pid=pid).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("method", ["pooled", "histogram", "rocglm", "mpc"])
def test_cluster_with_a_method_that_ignores_clusters_is_refused(capsys, tmp_path, method):
    """`evaluate --method pooled --cluster patient` ran and printed a DeLong interval that
    treats the rows as independent, without a word that the clusters were ignored; it is
    refused now, before any site is asked, pointing to --method clustered."""
    path = _clustered_csv(tmp_path)
    sites = [arg for name in "abc" for arg in ("--site", f"{name}={path}")]
    args = ["evaluate", *sites, "--method", method, "--cluster", "pid"]
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: --cluster 'pid' does not apply to --method {method}")
    assert "--method clustered" in err and "fedroc clustered" in err
    assert "Traceback" not in err


def test_an_option_a_method_does_not_take_names_the_methods_that_do(capsys, csv, monkeypatch):
    """ "option(s) --dp-epsilon do not apply to --method pooled" said what was wrong and not
    what to do: it now names the methods that take each option (their runners' keywords)."""
    import fedroc.methods

    # Every registered method is named, a plug-in's too: the Flower tests' plug-in
    # (tests/_flower_plugin.py, registered when pytest collects them) takes an epsilon.
    monkeypatch.delitem(fedroc.methods._METHODS, "flowertest.rounds", raising=False)
    sites = [arg for name in "abc" for arg in ("--site", f"{name}={csv}")]
    base = ["evaluate", *sites, "--label", "label", "--score", "score"]
    code, out, err = run_main(capsys, [*base, "--method", "pooled", "--dp-epsilon", "1"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.strip() == (
        "error: option(s) --dp-epsilon do not apply to --method pooled; "
        "--dp-epsilon is an option of --method histogram"
    )
    args = [*base, "--method", "histogram", "--epsilon", "1", "--delta", "0.01"]
    code, _, err = run_main(capsys, [*args, "--cluster-bins", "10"])
    assert code == 2, err
    assert err.strip().endswith(
        "; --epsilon, --delta are options of --method rocglm; "
        "--cluster-bins is an option of --method clustered"
    ), err


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (["--json", "metrics", "{csv}"], "fedroc metrics"),
        (["sequester", "--json", "plan", "--images", "10"], "fedroc sequester plan"),
    ],
)
def test_an_option_before_its_command_says_where_it_goes(capsys, csv, args, where):
    """`fedroc --json metrics x.csv` said "No such option: --json. Did you mean --version?":
    the option belongs after the command, which the message now says."""
    args = [a.replace("{csv}", str(csv)) for a in args]
    code, out, err = run_main(capsys, args)
    message = json.loads(out)["error"]
    assert code == 2 and err == ""
    assert "Did you mean --version" not in message
    assert f"--json is an option of '{where}': give it after the command" in message


def test_an_unknown_option_before_a_command_gets_no_placement_hint(capsys, csv):
    code, _, err = run_main(capsys, ["--jsn", "metrics", str(csv)])
    assert code == 2 and "No such option: --jsn" in err and "after the command" not in err


def test_sequester_plan_of_no_answers_names_no_keyword_the_command_lacks(capsys):
    """The planner's refusal of 0 perturbed answers ended "or set budget_units", a keyword of
    the Python planner and the service that `fedroc sequester plan` has no option for."""
    args = ["sequester", "plan", "--images", "10", "--subsets", "100", "--load-factor", "400"]
    code, out, err = run_main(capsys, [*args, "--noise-rate", "0.8"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "--load-factor from 400" in err and "--noise-rate to at least" in err
    assert "set budget_units" not in err
    assert "or set the budget_units of the service's plan (which relaxes" in err


def test_sites_that_fail_alike_naming_themselves_are_named_together(capsys, csv):
    """`evaluate --method rocglm --score-range=-6,7` on logits without --sensitivity printed
    the sites' refusal three times in one line (each names its own site inside the reason,
    "scores of site 'a' lie outside [0, 1]"), where identical reasons are joined."""
    sites = [arg for name in "abc" for arg in ("--site", f"{name}={csv}")]
    args = ["evaluate", *sites, "--method", "rocglm", "--score-range=-6,7"]
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.count("the sensitivity heuristic is only defined for probabilities") == 1, err
    assert err.strip().endswith("(and alike at 'b', 'c')"), err


def test_mpc_over_two_sites_does_not_suggest_mpc_for_its_brier_score(capsys, tmp_path):
    """`evaluate --method mpc` over two sites noted "Brier score withheld: ... With fewer
    sites, the MPC method (--method mpc) needs no secure aggregation": the method in use.
    The note keeps why (secure aggregation needs 3 sites) without that advice."""
    path = _clustered_csv(tmp_path)  # probabilities: a Brier score is asked for
    sites = [arg for name in "ab" for arg in ("--site", f"{name}={path}")]
    code, out, err = run_main(capsys, ["evaluate", *sites, "--method", "mpc", "--json"])
    assert code == 0, err
    notes = [n for n in json.dumps(json.loads(out)).split('"') if "Brier score withheld" in n]
    assert notes and "secagg_min_sites" in notes[0], out
    assert "--method mpc" not in notes[0], notes[0]


def test_mpc_operating_points_refusal_says_how_a_site_opts_in(capsys, tmp_path):
    """`evaluate --method mpc --youden` with --site said the sites' policies "do not opt in
    to 'mpc.operating_points'" and not how a site does; it now names the policy key and
    where a --sites file sets it (the refusal itself is unchanged)."""
    path = _clustered_csv(tmp_path)
    sites = [arg for name in "abc" for arg in ("--site", f"{name}={path}")]
    code, out, err = run_main(capsys, ["evaluate", *sites, "--method", "mpc", "--youden"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "does not opt in to 'mpc.operating_points'" in err
    assert "opt_in = ['mpc.operating_points'] in its policy ([policy] of a --sites file)" in err


@pytest.mark.parametrize("value", ["yes", "2"])
def test_a_pos_label_that_is_no_class_gets_no_hint_to_write_it_as_a_number(capsys, tmp_path, value):
    """`fedroc metrics FILE --pos-label yes` on 0/1 labels said "(the classes are numbers:
    give --pos-label as a number, yes not 'yes')"; the hint is for a number written as text
    (a sites file's pos_label = "1"), and only where that number is a class."""
    path = _clustered_csv(tmp_path)
    sites = tmp_path / "sites.toml"
    sites.write_text(
        "[columns]\nlabel = 'label'\nscore = 'score'\n"
        f"pos_label = '{value}'\n[sites.a]\npath = '{path}'\n"
    )
    code, out, err = run_main(capsys, ["metrics", str(path), "--pos-label", value])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    shown = {"yes": "'yes'", "2": "2"}[value]  # the command line reads 2 as a number
    assert f"--pos-label={shown} is not one of its classes [0, 1]" in err
    assert "as a number" not in err
    code, _, err = run_main(capsys, ["evaluate", "--sites", str(sites), "--method", "histogram"])
    assert code == 2 and "is not one of its classes [0, 1]" in err and "as a number" not in err
    sites.write_text(sites.read_text().replace(f"'{value}'", "'1'"))
    code, _, err = run_main(capsys, ["evaluate", "--sites", str(sites), "--method", "histogram"])
    assert code == 2 and "give pos_label as a number, 1 not '1'" in err, err


@pytest.mark.parametrize(
    ("table", "line", "said"),
    [
        ("columns", "scroe = 'score'", "table [columns]: unknown column setting(s) ['scroe']"),
        ("policy", "min_cont = 5", "table [policy]: unknown policy setting(s) ['min_cont']"),
    ],
)
def test_a_typo_in_the_files_shared_tables_is_not_blamed_on_the_first_site(
    capsys, csv, tmp_path, table, line, said
):
    """A misspelt key in the sites file's top [columns] or [policy] was reported as
    "site 'north' in 'sites.toml': unknown ... setting(s)", sending the user to look for a
    [sites.north] table that was right; the message now names the shared table."""
    sites = tmp_path / "sites.toml"
    text = f"[{table}]\n{line}\n" + "".join(
        f"[sites.{name}]\npath = '{csv}'\n" for name in ("north", "south", "east")
    )
    sites.write_text(text)
    code, out, err = run_main(capsys, ["evaluate", "--sites", str(sites), "--method", "histogram"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: federation file {str(sites)!r}"), err
    assert said in err and "site 'north'" not in err, err


@pytest.mark.parametrize("name", ["north.csv", "north.parquet"])
def test_a_data_file_given_as_sites_says_to_use_site(capsys, csv, tmp_path, name):
    """`evaluate --sites north.csv` said "federation file 'north.csv' is not valid TOML:
    Expected '=' after a key ...": --sites was taken for --site."""
    data = tmp_path / name
    data.write_bytes(csv.read_bytes())
    code, out, err = run_main(capsys, ["evaluate", "--sites", str(data), "--method", "pooled"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "is a data file; --sites takes a TOML file describing the sites" in err, err
    assert f"--site north={data}" in err


def test_the_federated_jackknife_refusal_names_the_command_that_gives_it(capsys, tmp_path):
    """`evaluate --method clustered --cluster-interval jackknife` was told the interval "is
    offered by the pooled analysis only", which reads as --method pooled (that ignores
    clusters); it now names `fedroc clustered FILE` (and fedroc.clustered_auc)."""
    path = _clustered_csv(tmp_path)
    sites = [arg for name in "abc" for arg in ("--site", f"{name}={path}")]
    args = ["evaluate", *sites, "--method", "clustered", "--cluster", "pid"]
    code, out, err = run_main(capsys, [*args, "--cluster-interval", "jackknife"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "pooled analysis only (`fedroc clustered FILE`, fedroc.clustered_auc)" in err, err


def test_a_report_named_pdf_is_refused_before_the_run(capsys, csv, tmp_path):
    """`evaluate --report r.pdf` wrote the HTML document into r.pdf, which a PDF viewer
    cannot open; the report is HTML, said at once (before the sites are asked)."""
    report = tmp_path / "r.pdf"
    args = ["evaluate", "--site", f"a={csv}", "--method", "pooled", "--report", str(report)]
    code, out, err = run_main(capsys, args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: --report {str(report)!r}: the report is one HTML file;")
    assert str(tmp_path / "r.html") in err and not report.exists()
    code, _, err = run_main(capsys, [*args[:-1], str(tmp_path / "r.htm")])
    assert code == 0, err


@pytest.mark.parametrize("sep", [",", " "])
def test_sites_joined_in_one_site_option_are_told_to_repeat_it(capsys, csv, sep):
    """`--site north=a.csv,south=b.csv` said only "data file 'a.csv,south=b.csv' does not
    exist"; it now says to give each site its own --site."""
    code, out, err = run_main(
        capsys, ["evaluate", "--site", f"north={csv}{sep}south={csv}", "--method", "pooled"]
    )
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "does not exist" in err
    assert err.strip().endswith(
        f"; give each site its own --site: --site north={csv} --site south={csv}"
    ), err


def test_missing_scores_say_what_to_do(capsys, tmp_path):
    """`fedroc metrics nan.csv` said "score column 'risk' in file 'nan.csv' has 2 missing
    value(s), first at line 5" and stopped there: whether fedroc drops such rows, and what
    the user should do, was left open."""
    path = tmp_path / "nan.csv"
    path.write_text("y,s\n0,0.1\n1,\n0,0.3\n1,0.8\n")
    code, out, err = run_main(capsys, ["metrics", str(path), "--label", "y", "--score", "s"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.strip().endswith(
        "has 1 missing value(s), first at line 3; fedroc drops no rows: remove or impute them first"
    ), err


@pytest.mark.timeout(120)
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_ctrl_c_in_a_long_command_says_so(tmp_path, json_flag):
    """Before: any command stopped by Ctrl-C exited 130 without a word (typer turns the
    KeyboardInterrupt into Exit(130), which click hands back as a status), so a user could not
    tell it from a crash; only ``fedroc mpc party`` said so (the MPC walkthrough). Now one
    line, ``error: interrupted`` (a JSON object with --json), exit 130."""
    import signal

    cmd = [sys.executable, "-m", "fedroc", "figures", "--paper", "5", "--out", str(tmp_path)]
    proc = subprocess.Popen(
        [*cmd, *json_flag],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # SIGINT at its default, as in a terminal: a runner that ignores it (a background
        # job) would pass SIG_IGN on, and Python keeps it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        # Past the imports (Ctrl-C there is Python's own traceback), into Figure 4, which
        # takes about 30 s after the first three's 2 s.
        import time

        start = time.monotonic()
        while len(list(tmp_path.iterdir())) < 3 and time.monotonic() - start < 60:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)  # a loaded machine answers late
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    if json_flag:
        obj = json.loads(out[out.index("{\n") :]) if "{\n" in out else json.loads(out)
        assert obj["error"] == "interrupted" and obj["exit_code"] == 130, out
    else:
        assert err.strip().splitlines()[-1] == "error: interrupted", err
    assert "Traceback" not in err


# A KeyboardInterrupt that lands in a finaliser (here raised by one, as Ctrl-C's does when it
# arrives while a weakref callback of the garbage collector runs) is printed by CPython as
# "Exception ignored in" and dropped: the command ran on. Both scripts end the busy loop
# after 5 s at the latest.
_DROPPED_INTERRUPT = """
import sys, time
class Victim:
    def __del__(self):
        raise KeyboardInterrupt
def busy():
    Victim()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        pass
    print("ran on")
"""


def _sigint_as_in_a_terminal() -> None:
    # A runner that ignores SIGINT (a background job) passes SIG_IGN on; Python then keeps
    # it, and no interrupt can be delivered.
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _python_in_a_terminal(script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a new Python with SIGINT as in a terminal; its output and status."""
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_sigint_as_in_a_terminal,
    )


def test_cpython_drops_an_interrupt_raised_in_a_finaliser():
    """The control for the next two tests: without fedroc's hook the interrupt is lost."""
    proc = _python_in_a_terminal(_DROPPED_INTERRUPT + "busy()")
    assert proc.returncode == 0 and proc.stdout.strip() == "ran on", proc
    assert "Exception ignored in" in proc.stderr


def test_an_interrupt_dropped_in_a_finaliser_is_delivered_again():
    script = _DROPPED_INTERRUPT + (
        "from fedroc.cli._common import redeliver_dropped_interrupts\n"
        "try:\n"
        "    with redeliver_dropped_interrupts():\n"
        "        busy()\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n"
        "    print(sys.unraisablehook is sys.__unraisablehook__)\n"
    )
    proc = _python_in_a_terminal(script)
    # Delivered again, the interrupt ends the loop; the hook is put back; CPython's
    # "Exception ignored" line is not printed for an interrupt that was not ignored.
    assert proc.stdout.split() == ["interrupted", "True"], proc
    assert "Exception ignored" not in proc.stderr, proc.stderr


def test_a_command_whose_interrupt_was_dropped_still_says_so():
    """Through fedroc.cli.main: one line, ``error: interrupted``, exit 130 (before: the
    command ran to its end and exited 0, ``test_ctrl_c_in_a_long_command_says_so``'s flake)."""
    script = _DROPPED_INTERRUPT + (
        "import typer, fedroc.cli as cli\n"
        "app = typer.Typer()\n"
        "app.command()(busy)\n"
        "cli.click_command = lambda: typer.main.get_command(app)\n"
        "cli.main([])\n"
    )
    proc = _python_in_a_terminal(script)
    assert proc.returncode == 130, proc
    assert "ran on" not in proc.stdout
    assert proc.stderr.strip().splitlines() == ["error: interrupted"], proc.stderr
