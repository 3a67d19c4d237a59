"""README.md's examples work as written for a new user.

Its Python blocks run top to bottom in one namespace, as a reader pastes them, in a
directory holding the files they name (north.csv, south.parquet, east.csv with the columns
outcome, risk and patient). The names the README leaves to the reader (y, score, sites,
...) are given here; any other undefined name, an error or a refusal fails the test. Before
this test the README's rocglm block asked the same sites for clear confusion tables after
their secure releases (refused: exact counts go one way) and its clustered block ran
``evaluate(fed, "clustered")`` on a federation without a cluster column.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _cli import run_main
from sklearn.metrics import average_precision_score, roc_auc_score

README_DIR = Path(__file__).resolve().parents[1]
README = (README_DIR / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    """The fenced blocks of ``lang`` ("" for plain fences), in order."""
    blocks, current, kind = [], [], None
    for line in README.splitlines(keepends=True):
        fence = re.match(r"\s*```(\w*)\s*$", line)
        if fence and kind is None:
            kind, current = fence.group(1), []
        elif fence:
            if kind == lang:
                blocks.append("".join(current))
            kind = None
        elif kind is not None:
            current.append(line)
    return blocks


@pytest.fixture
def reader_dir(tmp_path, monkeypatch):
    """The README's site files in the working directory, and the reader's own names.

    Every calibration bin holds at least 5 rows of each class at every site, so that no
    bin is withheld and the README's confusion table at 0.5 and calibration bins of the
    same sites do not subtract to withheld rows (a site would refuse the second).
    """
    rng = np.random.default_rng(3)
    frames = {}
    for name, n in (("north", 600), ("south", 500), ("east", 700)):
        risk = np.round(rng.random(n), 6)
        outcome = (rng.random(n) < 0.15 + 0.7 * risk).astype(int)
        patient = [f"{name}-{i // 3}" for i in range(n)]  # 3 rows a patient
        frames[name] = pd.DataFrame({"outcome": outcome, "risk": risk, "patient": patient})
        for cls in (0, 1):
            per_bin = np.bincount(
                np.minimum(risk[outcome == cls] * 10, 9).astype(int), minlength=10
            )
            assert per_bin.min() >= 5, (name, cls, per_bin)
    frames["south"].to_parquet(tmp_path / "south.parquet", index=False)
    frames["north"].to_csv(tmp_path / "north.csv", index=False)
    frames["east"].to_csv(tmp_path / "east.csv", index=False)
    monkeypatch.chdir(tmp_path)
    pooled = pd.concat(frames.values(), ignore_index=True)
    y, score = pooled["outcome"].to_numpy(), pooled["risk"].to_numpy()
    edges = np.linspace(0.0, 1.0, 11)
    return {
        "y": y,
        "score": score,
        "prob": score,
        "score_a": score,
        "score_b": np.clip(score + rng.normal(0.0, 0.1, score.size), 0.0, 1.0),
        "patient": pooled["patient"].to_numpy(),
        "sites": [(f["outcome"].to_numpy(), f["risk"].to_numpy()) for f in frames.values()],
        "pos_hist": np.histogram(score[y == 1], edges)[0],
        "neg_hist": np.histogram(score[y == 0], edges)[0],
        "edge_array": edges,
        "features": rng.normal(size=(score.size, 3)),
    }


def test_readme_has_exactly_two_setup_commands():
    setup = _blocks("")[0].splitlines()
    assert [line.split("#")[0].strip() for line in setup] == ["make demo", "make test"]


def test_readme_python_blocks_run_as_written(reader_dir):
    import matplotlib

    matplotlib.use("Agg")
    blocks = _blocks("python")
    assert len(blocks) == 5  # pooled, counts, federation, rocglm, clustered
    namespace = dict(reader_dir)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    # A few of the comments' claims, on the reader's rows.
    fedroc, y, score = namespace["fedroc"], namespace["y"], namespace["score"]
    assert fedroc.roc_auc(y, score) == pytest.approx(roc_auc_score(y, score), abs=1e-12)
    ap = average_precision_score(y, score)
    assert fedroc.average_precision(y, score) == pytest.approx(ap, abs=1e-12)
    assert set(namespace["result"].to_dict()) >= {"method", "auc", "auc_ci", "released"}
    assert namespace["res"].auc == pytest.approx(roc_auc_score(y, score), abs=0.03)
    # "distributed_rocglm(fed, sensitivity=0.01)   # epsilon 1, delta 1/(10 n), analytic"
    rocglm_res = namespace["res"]
    largest = max(len(s[0]) for s in namespace["sites"])
    assert (rocglm_res.epsilon, rocglm_res.calibration) == (1.0, "analytic")
    assert rocglm_res.delta == pytest.approx(1 / (10 * largest))
    # "fm.partial_auc(y, score, max_fpr=0.2)  # McClish-standardised, == roc_auc_score(max_fpr=)"
    fm = namespace["fm"]
    pauc = roc_auc_score(y, score, max_fpr=0.2)
    assert fm.partial_auc(y, score, max_fpr=0.2) == pytest.approx(pauc, abs=1e-12)
    # The summed per-site counts are the pooled rows' counts at the shared thresholds: their
    # AUC is the AUC of the scores floored to the bin edges (the pooled rows are the sites').
    edges = namespace["edges"]
    floored = np.searchsorted(edges, score, side="right")
    assert namespace["counts"].auc() == pytest.approx(roc_auc_score(y, floored), abs=1e-12)
    # "res.confidence_interval()  # default: logit CI, joined below 100 rows of a class ..."
    res = fedroc.delong(y, score)
    assert min(np.sum(y == 1), np.sum(y == 0)) >= 100  # so the default is the logit CI alone
    assert res.confidence_interval() == pytest.approx(res.confidence_interval(method="logit"))
    few = np.r_[np.flatnonzero(y == 1)[:15], np.flatnonzero(y == 0)]  # 15 positives
    small = fedroc.delong(y[few], score[few])
    logit, union = small.confidence_interval(method="logit"), small.confidence_interval()
    scored = small.confidence_interval(method="score")
    assert union == pytest.approx((min(logit[0], scored[0]), max(logit[1], scored[1])))


def test_readme_error_example_is_what_the_cli_prints(capsys):
    [example] = [b for b in _blocks("") if b.lstrip().startswith('{"error"')]
    code, out, _ = run_main(capsys, ["metrics", "--bogus", "--json"])
    assert code == 2
    assert json.loads(out) == json.loads(example)


def test_the_roster_line_flower_keys_prints_is_one_toml_line(tmp_path, capsys):
    """docs/privacy.md and docs/flower.md: `fedroc flower keys` prints the site's roster line
    (`north = "ed25519:…"`) to copy into the other sites' roster.toml. Piped, it came out
    cut at 120 columns after "north = ", the key on the next line."""
    import tomllib

    from fedroc.federation.roster import KEY_NAME, load_signing_key, public_key_text

    node = tmp_path / "a-node-directory-with-a-long-enough-name"
    code, out, _ = run_main(capsys, ["flower", "keys", "--site", "north", "--node-dir", str(node)])
    assert code == 0
    [line] = [text for text in out.splitlines() if "north = " in text]
    roster_line = line[line.index("north = ") :].split(";")[0]
    key = public_key_text(load_signing_key(node / KEY_NAME))
    assert tomllib.loads(roster_line) == {"north": key}


DOCS = [README, *(p.read_text() for p in sorted(README_DIR.glob("docs/*.md")))]


def _help_options(capsys, command: list[str]) -> tuple[set[str], list[str]]:
    """The --options and subcommands `fedroc COMMAND --help` names."""
    code, out, _ = run_main(capsys, [*command, "--help"])
    assert code == 0, command
    options = set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", out))
    commands = (
        re.findall(r"^│ ([a-z][a-z-]*) ", out.split("Commands", 1)[1], re.M)
        if ("─ Commands" in out)
        else []
    )
    return options, commands


def test_every_option_the_docs_give_a_command_is_in_its_help(capsys, monkeypatch):
    """README.md and docs/*.md name an option beside `fedroc COMMAND` only where
    `fedroc COMMAND --help` lists it (`flower superlink` passes flower-superlink's flags
    through and names its own, --link-state, in its help text)."""
    monkeypatch.setenv("COLUMNS", "200")  # a narrow help cuts long option names
    helps: dict[str, set[str]] = {}

    def walk(command: list[str]) -> None:
        options, subcommands = _help_options(capsys, command)
        helps[" ".join(command)] = options
        for sub in subcommands:
            walk([*command, sub])

    walk([])
    passthrough = {"--host", "--port", "--ssl-ca-certfile", "--ssl-certfile", "--ssl-keyfile"}
    passthrough |= {"--enable-supernode-auth", "--database"}  # flower-superlink's own
    helps["flower superlink"] |= passthrough
    missing = []
    for text in DOCS:
        text = re.sub(r"\\\n\s*", " ", text)  # continued command lines
        for line in text.splitlines():
            for part in re.split(r"(?=\bfedroc [a-z])", line)[1:]:
                words = re.match(r"fedroc ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", part)
                assert words is not None
                name = " ".join(w for w in words.groups() if w)
                command = name if name in helps else words.group(1)
                if command not in helps:
                    continue  # `fedroc metrics` as a word in prose, `fedroc.x` modules
                # The command's own words: up to the end of its inline code or sentence.
                span = re.split(r"`|;|\. |\)", part)[0] if "`" in line else part
                for option in re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", span):
                    if option not in helps[command] and option != "--bogus":
                        missing.append(f"fedroc {command} {option}: {part.strip()[:80]}")
    assert not missing, missing


def test_readme_sequester_plan_comment_is_what_the_plan_gives(capsys):
    """README's `fedroc sequester plan ...  # subset size 4188, budget 2.09, DP epsilon 0.32,
    AUC SE 0.012`: the figures of its comment are those the command prints (the DP epsilon is
    the service's, thresholdout's, from the capped draw's sensitivity), to the digits given."""
    text = re.sub(r"\\\n\s*", " ", README)
    [line] = [x for x in text.splitlines() if x.startswith("fedroc sequester plan --images")]
    command, comment = line.split("#", 1)
    code, out, _ = run_main(capsys, [*command.split()[1:], "--json"])
    assert code == 0
    plan = json.loads(out)
    said = dict(re.findall(r"([A-Za-z][A-Za-z ]*?) ([0-9.]+)(?:,|$)", comment.strip()))
    assert set(said) == {"subset size", "budget", "DP epsilon", "AUC SE"}, said
    keys = {
        "subset size": "subset_size",
        "budget": "budget",
        "DP epsilon": "epsilon_thresholdout",
        "AUC SE": "auc_se",
    }
    for name, key in keys.items():
        digits = len(said[name].partition(".")[2])
        assert round(plan[key], digits) == float(said[name]), (name, plan[key], said[name])
