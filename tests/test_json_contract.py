"""The JSON contract of docs/json.md: every key a command emits is listed there, and every key
listed as present is emitted.

The tables of docs/json.md are read here (``| `key` | present | meaning |`` under a heading);
each command runs in-process on a small seeded federation in its default form and with the
options that add keys, and its object (and the objects inside it) is checked against them:
``always`` keys must be there, ``with --OPT`` keys only when the run gives ``--OPT``,
``without --OPT`` keys unless it does, ``if ...`` keys may be; no other key may appear.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fedroc.cli import main
from tests._site_files import clustered_two_scores

DOC = Path(__file__).resolve().parents[1] / "docs" / "json.md"
_ROW = re.compile(r"^\|\s*`([A-Za-z0-9_]+)`\s*\|\s*([^|]+?)\s*\|")


def doc_tables(text: str) -> dict[str, dict[str, str]]:
    """Each heading's table of docs/json.md: key -> its "present" rule."""
    tables: dict[str, dict[str, str]] = {}
    heading = ""
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip().replace("`", "")
        elif m := _ROW.match(line):
            table = tables.setdefault(heading, {})
            assert m.group(1) not in table, f"{m.group(1)!r} listed twice under {heading!r}"
            table[m.group(1)] = m.group(2)
    return tables


TABLES = doc_tables(DOC.read_text(encoding="utf-8"))


def _given(option: str, args: list[str]) -> bool:
    """Whether ``option`` (``--opt`` or ``--opt value``) occurs in ``args``."""
    words = option.split()
    return any(args[i : i + len(words)] == words for i in range(len(args)))


def required(rule: str, args: list[str]) -> bool | None:
    """True: the key must be there; False: it must not; None: it may."""
    if rule == "always":
        return True
    if rule.startswith("if "):
        return None
    for head, wanted in (("with ", True), ("without ", False)):
        if rule.startswith(head):
            options = rule[len(head) :].split(" or ")
            assert all(o.startswith("--") for o in options), f"unreadable rule {rule!r}"
            return wanted == any(_given(o, args) for o in options)
    raise AssertionError(f"unreadable rule {rule!r} in {DOC.name}")


def check(obj: dict[str, Any], tables: list[str], args: list[str], where: str) -> None:
    """Compare ``obj``'s keys with the union of ``tables``, for a run with ``args``."""
    rules: dict[str, str] = {}
    for name in tables:
        assert name in TABLES, f"{DOC.name} has no table under the heading {name!r}"
        rules.update(TABLES[name])
    undocumented = sorted(set(obj) - set(rules))
    assert not undocumented, f"{where}: keys not in {DOC.name} ({tables}): {undocumented}"
    for key, rule in rules.items():
        need = required(rule, args)
        if need is True:
            assert key in obj, f"{where}: {key!r} ({rule}) is missing"
        elif need is False:
            assert key not in obj, f"{where}: {key!r} ({rule}) appeared"


def check_evaluate(obj: dict[str, Any], args: list[str]) -> None:
    """The top-level keys of one method, then the objects inside them."""
    method = obj["method"]
    check(obj, ["Keys of every method", f"--method {method}"], args, f"evaluate {method}")
    check(obj["released"], ["released"], args, "released")
    for entry in obj["sites"]:
        check(entry, ["sites (each entry)"], args, "sites entry")
    if obj.get("calibration") is not None:
        check(obj["calibration"], ["calibration"], args, "calibration")
    for key in ("calibration_released", "auc_test", "mpc"):
        if key in obj:
            check(obj[key], [key], args, key)
    check_asks(obj, args)


def check_asks(obj: dict[str, Any], args: list[str]) -> None:
    """The objects the options beyond the AUC add (metrics and evaluate)."""
    if obj.get("comparison") is not None:
        check(obj["comparison"], ["comparison"], args, "comparison")
    for point in obj.get("operating_points") or []:
        check(point, ["operating_points (each entry)"], args, "operating point")
    if "bootstrap" in obj:
        check(obj["bootstrap"], ["bootstrap"], args, "bootstrap")


def run(args: list[str]) -> tuple[int, dict[str, Any]]:
    """Exit status and the JSON object of one in-process ``fedroc ARGS``."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, json.loads(buf.getvalue())


def ok(args: list[str]) -> dict[str, Any]:
    code, obj = run(args)
    assert code == 0, obj
    return obj


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three sites of 100-140 rows in clusters of 4: labels, two scores, weights."""
    tmp = tmp_path_factory.mktemp("json")
    rng = np.random.default_rng(3)
    paths = {}
    for name, clusters in (("north", 30), ("south", 25), ("east", 35)):
        frame = clustered_two_scores(rng, clusters)
        frame.insert(3, "w", rng.uniform(0.5, 2, len(frame)).round(3))  # before pid, as was
        paths[name] = tmp / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    # The MPC sites' operating points need each site's opt-in, which only a sites file sets.
    toml = tmp / "sites.toml"
    toml.write_text(
        '[policy]\nopt_in = ["mpc.operating_points"]\n'
        + "".join(f'[sites.{k}]\npath = "{v.name}"\n' for k, v in paths.items()),
        encoding="utf-8",
    )
    paths["toml"] = toml
    return paths


def _sites(files: dict[str, Path]) -> list[str]:
    return [a for k in ("north", "south", "east") for a in ("--site", f"{k}={files[k]}")]


ASKS = ["--compare-score", "score2", "--max-fpr", "0.2", "--at-specificity", "0.9"]
ASKS += ["--at-sensitivity", "0.8", "--youden"]

# (method, its options) of each evaluate run: the default form, then the options that add
# or remove keys.
EVALUATE_RUNS = [
    ("pooled", []),
    ("pooled", [*ASKS, "--bootstrap", "20", "--seed", "1"]),
    ("pooled", ["--sample-weight", "w", "--max-fpr", "0.2", "--youden"]),
    ("rocglm", ["--sensitivity", "0.01", "--bootstrap", "5"]),  # --seed: refused (ux17)
    ("rocglm", ["--sensitivity", "0.01", "--correction", "none", "--a0", "0.6"]),
    ("histogram", []),
    ("histogram", ASKS),
    ("histogram", ["--dp-epsilon", "2", "--quantiles", "64", *ASKS]),
    ("clustered", ["--cluster", "pid"]),
    ("mpc", []),
]


@pytest.mark.parametrize(
    ("method", "options"),
    EVALUATE_RUNS,
    ids=[f"{m}-{' '.join(o[:1]) or 'default'}-{i}" for i, (m, o) in enumerate(EVALUATE_RUNS)],
)
def test_evaluate_keys_are_documented(files, method, options):
    args = ["evaluate", *_sites(files), "--method", method, *options, "--json"]
    obj = ok(args)
    check_evaluate(obj, args)
    check_common(obj, files)


# One quantity, one key (docs/json.md, conventions): every method gives these.
COMMON = ("auc", "auc_ci", "auc_se", "n", "n_pos", "n_neg")


def _rows(files: dict[str, Path]) -> tuple[int, int]:
    """Rows and positive rows of the three site files."""
    labels = np.concatenate([pd.read_csv(files[k])["label"] for k in ("north", "south", "east")])
    return labels.size, int(labels.sum())


def check_common(obj: dict[str, Any], files: dict[str, Path]) -> None:
    """The common keys are there and mean the same thing whatever the method."""
    method = obj["method"]
    missing = [k for k in COMMON if k not in obj]
    assert not missing, f"evaluate {method}: common keys missing: {missing}"
    rows, positives = _rows(files)
    n, n_pos, n_neg = obj["n"], obj["n_pos"], obj["n_neg"]
    if n_pos is not None and n_neg is not None:
        assert n == pytest.approx(n_pos + n_neg, rel=1e-12), method
    if all(site["n"] is not None for site in obj["sites"]):
        assert n == sum(site["n"] for site in obj["sites"]), method
    if method == "mpc":  # the class counts are what the MPC job keeps secret
        assert n == rows and n_pos is None and n_neg is None
    elif method == "clustered":  # the rows of the clusters holding both classes
        assert 0 < n < rows and n_pos < positives
        assert obj["auc"] == obj["population_auc"] and obj["auc_se"] == obj["population_se"]
        assert obj["auc_ci"] == obj["population_ci"]
    elif obj.get("mode") in ("distributed-dp", "local-dp"):  # noisy counts, floats
        assert isinstance(n, float) and abs(n - rows) < 0.2 * rows
    else:  # exact counts
        assert (n, n_pos) == (rows, positives), method
        assert all(isinstance(v, int) for v in (n, n_pos, n_neg)), method


def test_evaluate_mpc_asks_and_histogram_from_a_sites_file(files):
    # MPC operating points need the sites' opt-in (a sites file); with --sites the analyst
    # holds no rows, so the histogram's errors against the pooled curves are left out.
    toml = ["--sites", str(files["toml"])]
    args = ["evaluate", *toml, "--method", "mpc", *ASKS, "--mpc-calibration", "--json"]
    obj = ok(args)
    check_evaluate(obj, args)
    assert obj["operating_points"] and obj["calibration"] is not None
    args = ["evaluate", *toml, "--method", "histogram", "--json"]
    check_evaluate(ok(args), args)


def test_metrics_keys_are_documented(files):
    for extra in ([], [*ASKS, "--bootstrap", "20", "--seed", "1"]):
        args = ["metrics", str(files["north"]), *extra, "--json"]
        obj = ok(args)
        check(obj, ["fedroc metrics --json"], args, "metrics")
        check_asks(obj, args)


def test_flower_up_keys_are_documented(tmp_path, monkeypatch, capsys):
    """`flower up --json` gave a `directory` key that docs/json.md did not list (it had no
    table: "the connection, as its connection.json", which has no `directory`). Its
    processes are stubbed, as test_flower_walk's; both --insecure and TLS runs."""
    from tests._flower_stub import stub_flower_deployment

    stub_flower_deployment(monkeypatch)
    for extra in ([], ["--insecure"]):
        work = tmp_path / f"up{len(extra)}"
        args = ["flower", "up", "--sites", "2", "--dir", str(work), "--duration", "0", *extra]
        main([*args, "--json"])
        obj = json.loads(capsys.readouterr().out)
        check(obj, ["fedroc flower up --json"], args, "flower up")
        assert obj["directory"] == str(work.resolve())
        assert (obj["site_keys"] is None) == bool(extra)


def test_clustered_keys_are_documented(files):
    args = ["clustered", str(files["north"]), "--cluster", "pid", "--json"]
    joint = ok(args)
    check(joint, ["joint (default)"], args, "clustered")
    args = [*args[:-1], "--estimator", "obuchowski", "--json"]
    obu = ok(args)
    check(obu, ["--estimator obuchowski"], args, "clustered obuchowski")
    # The same quantity under the same key as evaluate's: auc is the population AUC of the
    # joint analysis and Obuchowski's AUC of --estimator obuchowski; n = n_pos + n_neg.
    for key, alias in (("auc", "population_auc"), ("auc_ci", "population_ci")):
        assert joint[key] == joint[alias]
    assert joint["auc_se"] == joint["population_se"]
    assert joint["n"] == joint["n_pos"] + joint["n_neg"]
    for key, alias in (("auc_se", "se"), ("auc_ci", "ci"), ("obuchowski_auc", "auc")):
        assert obu[key] == obu[alias]
    assert (obu["obuchowski_se"], obu["obuchowski_ci"]) == (obu["se"], obu["ci"])
    assert obu["n"] == obu["n_pos"] + obu["n_neg"] == pd.read_csv(files["north"]).shape[0]
    assert obu["obuchowski_auc"] == pytest.approx(joint["obuchowski_auc"])


def test_clustered_and_evaluate_clustered_share_their_keys(files, tmp_path):
    """fedroc clustered on the pooled file and evaluate --method clustered over its three
    parts give every quantity they both report under one key, with the same value (up to
    the federated method's score bins, bounded by its binning bounds)."""
    frames = [pd.read_csv(files[k]).assign(pid=lambda f, k=k: k + f["pid"].astype(str))
              for k in ("north", "south", "east")]  # fmt: skip
    pooled = tmp_path / "pooled.csv"
    pd.concat(frames).to_csv(pooled, index=False)
    cli = ok(["clustered", str(pooled), "--cluster", "pid", "--json"])
    fed = ok(["evaluate", *_sites(files), "--method", "clustered", "--cluster", "pid", "--json"])
    shared = (set(cli) & set(fed)) - {"caveats", "notes"}
    assert set(COMMON) | {"population_auc", "obuchowski_auc", "obuchowski_se"} <= shared
    bounds = {"obuchowski": fed["obuchowski_binning_bound"]}
    for key in sorted(shared):
        a, b = cli[key], fed[key]
        if a is None or (isinstance(a, (int, str)) and not isinstance(a, bool)):
            assert a == b, key
        else:  # estimates: the federated ones are of binned scores
            bound = bounds.get(key.split("_")[0], fed["population_binning_bound"])
            tol = 0.02 if key in ("covariance", "equality_z", "equality_p") else 1e-9
            assert np.allclose(a, b, atol=max(bound, tol)), (key, a, b)


def test_sequester_plan_keys_are_documented():
    base = ["sequester", "plan", "--images", "1047", "--subsets", "100", "--noise-rate", "0.8"]
    for size in (["--load-factor", "400"], ["--budget", "3"]):
        for assumed in ([], ["--auc", "0.81", "--prevalence", "0.12"]):
            args = [*base, *size, *assumed, "--json"]
            check(ok(args), ["fedroc sequester plan --json"], args, "sequester plan")


def test_privacy_status_keys_are_documented(files, tmp_path):
    audit = ["--audit-dir", str(tmp_path)]
    ok(["evaluate", *_sites(files), "--method", "histogram", "--dp-epsilon", "2", *audit, "--json"])
    args = ["privacy", "status", *audit, "--json"]
    obj = ok(args)
    check(obj, ["fedroc privacy status --json"], args, "privacy status")
    assert len(obj["sites"]) == 3
    for entry in obj["sites"]:
        check(entry, ["sites of privacy status (each entry)"], args, "privacy status entry")


# (job, flower run's options) of each run: the ServerApp's evaluate job for every method it
# runs, in the forms that add or remove keys, then its other jobs.
FLOWER_RUNS = [
    ("evaluate", ["--method", "histogram"]),
    ("evaluate", ["--method", "histogram", "--dp-epsilon", "2", "--quantiles", "64"]),
    ("evaluate", ["--method", "rocglm", "--sensitivity", "0.01"]),
    ("evaluate", ["--method", "clustered"]),
    ("evaluate", ["--method", "mpc"]),
    ("moments", ["--job", "moments", "--bins", "5"]),
    ("sites", ["--job", "sites"]),
]


@pytest.mark.parametrize(("job", "options"), FLOWER_RUNS, ids=[" ".join(o) for _, o in FLOWER_RUNS])
def test_flower_run_keys_are_documented(files, monkeypatch, job, options):
    """flower run --json: the ServerApp's result and the `flower` object the CLI adds to it.

    The job runs here on an in-process federation of the same files (the Flower tests show
    the transports give equal results), with the options flower run sends. This test used to
    hand the CLI the result of `fedroc evaluate --site`, which held the histogram's errors
    against the pooled rows that a ServerApp never has, and so checked no job's keys: the
    moments and sites jobs had no table at all. A job's keys are checked as for
    `fedroc evaluate --sites FILE` (docs/json.md): the ServerApp holds no rows either.
    """
    pytest.importorskip("flwr")
    import fedroc.apps.application  # noqa: F401  (registers the evaluate job)
    from fedroc.federation import Federation
    from fedroc.federation.flower import deploy
    from fedroc.federation.flower.jobs import run_job

    paths = {k: files[k] for k in ("north", "south", "east")}
    federation = Federation.from_files(paths, cluster="pid" if "clustered" in options else None)
    results = []

    def submit(connection: Any, job: str, options: Any, **kwargs: Any) -> Any:
        results.append(run_job(job, federation, json.loads(json.dumps(options))))
        return {"result": results[-1], "run_id": 7, "node_ids": {"north": 1}, "refused": {}}

    monkeypatch.setattr(deploy, "submit_job", submit)
    args = ["flower", "run", "--superlink", "127.0.0.1:1", "--insecure", *options]
    obj = ok([*args, "--json"])
    flower = obj.pop("flower")
    assert [obj] == results
    check(flower, ["flower of flower run"], args, "flower run")
    check({"flower": flower}, ["fedroc flower run --json"], args, "flower run")
    if job == "evaluate":
        check_evaluate(obj, [*args, "--sites"])
        check_common(obj, files)
    else:
        check(obj, [f"--job {job} of flower run"], args, f"flower run --job {job}")
    if job == "moments":
        check(obj["released"], ["released"], args, "released")
        calibration = obj["calibration"]
        check(calibration, ["calibration of flower run --job moments"], args, "calibration")
        check(calibration["curve"], ["calibration"], args, "calibration curve")
        assert len(calibration["curve"]["edges"]) == 6  # --bins 5
    if job == "sites":
        for entry in obj["sites"]:
            check(entry, ["sites (each entry)"], args, "sites entry")


def test_error_keys_are_documented(files):
    for args in (
        ["metrics", "--bogus", "--json"],  # usage error: names the command
        ["metrics", str(files["north"]), "--score", "nope", "--json"],
        # a site refuses: names the site and the function
        ["evaluate", *_sites(files), "--method", "histogram", "--min-count", "500", "--json"],
    ):
        code, obj = run(args)
        assert code == 2, obj
        check(obj, ["Errors"], args, f"error of {args[0]}")
        assert obj["exit_code"] == 2


def test_the_contract_fails_on_an_undocumented_or_a_missing_key():
    # The checks themselves: a key the doc does not list, one it lists as always present but
    # missing, and one that appears without its option are each caught.
    rules = TABLES["fedroc sequester plan --json"]
    full = dict.fromkeys(k for k, r in rules.items() if r == "always")
    check(full, ["fedroc sequester plan --json"], [], "ok")
    with pytest.raises(AssertionError, match="not in json.md"):
        check({**full, "new_key": 1}, ["fedroc sequester plan --json"], [], "extra")
    with pytest.raises(AssertionError, match="'budget' .* is missing"):
        check(
            {k: v for k, v in full.items() if k != "budget"},
            ["fedroc sequester plan --json"],
            [],
            "missing",
        )
    with pytest.raises(AssertionError, match="'requested_budget' .* appeared"):
        check({**full, "requested_budget": 3}, ["fedroc sequester plan --json"], [], "appeared")


def test_every_table_of_the_doc_is_checked():
    # A table no test reads would drift unnoticed.
    read = {
        "fedroc metrics --json",
        "Keys of every method",
        *(f"--method {m}" for m, _ in EVALUATE_RUNS),
        "released",
        "sites (each entry)",
        "calibration",
        "comparison",
        "operating_points (each entry)",
        "bootstrap",
        "auc_test",
        "calibration_released",
        "mpc",
        "joint (default)",
        "--estimator obuchowski",
        "fedroc mpc run --json",  # tests/test_mpc_cluster.py
        "fedroc sequester plan --json",
        "fedroc privacy status --json",
        "sites of privacy status (each entry)",
        "fedroc flower run --json",
        "flower of flower run",
        "--job moments of flower run",
        "calibration of flower run --job moments",
        "--job sites of flower run",
        "fedroc flower up --json",
        "Errors",
    }
    assert set(TABLES) == read


def test_aliases_are_shown_once_in_the_table_and_the_report(files, tmp_path, capsys):
    """The JSON repeats clustered's population AUC under `auc`; the table and the HTML
    report show the AUC, CI and SE rows once, not a second time as population_*."""
    report = tmp_path / "r.html"
    args = ["evaluate", *_sites(files), "--method", "clustered", "--cluster", "pid"]
    main([*args, "--report", str(report)])
    table = capsys.readouterr().out
    assert "population_auc" not in table and "population_se" not in table
    assert table.count("standard error of the AUC") == 1 and "personalized AUC" in table
    html = report.read_text(encoding="utf-8")
    from fedroc.report import human_label

    for alias in ("population_auc", "population_ci", "population_se"):
        assert f">{human_label(alias)}<" not in html, alias
    assert f">{human_label('auc_se')}<" in html and ">Population estimator<" in html
