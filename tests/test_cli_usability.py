"""What a new user's walkthrough of the command line found (ux17): a DP budget refused half
spent, degenerate intervals without a word, options taken and ignored, and a privacy status
in internal names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedroc.exceptions import InputError
from fedroc.privacy.ledger import read_ledger_status
from tests._cli import run_main
from tests._flower_stub import stub_flower_deployment


@pytest.fixture
def csv(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    y = np.repeat([0, 1], 30)
    path = tmp_path / "x.csv"
    score = np.clip(0.5 + 0.2 * (rng.normal(size=60) + y), 0.0, 1.0)
    pd.DataFrame({"label": y, "score": score}).to_csv(path, index=False)
    return path


def evaluate3(csv: Path, audit: Path, *more: str) -> list[str]:
    sites = [x for name in "abc" for x in ("--site", f"{name}={csv}")]
    return ["evaluate", *sites, "--audit-dir", str(audit), *more]


def spent(audit: Path) -> list[float]:
    return [read_ledger_status(p).epsilon for p in sorted(audit.glob("*.ledger.jsonl"))]


def one_line_error(code: int, err: str) -> str:
    assert code == 2
    assert "Traceback" not in err
    line = err.strip()
    assert "\n" not in line, err
    return line


# -- 1. the histogram's DP budget, refused before anything is spent -------------------------


def test_histogram_dp_run_over_the_sites_budget_is_refused_before_any_release(
    capsys, csv, tmp_path
):
    """--dp-epsilon 6 under the default limit of 10 spent the class counts' 0.92, then was
    refused "this release needs 11.08 more" without saying the run needs 2 x 6."""
    audit = tmp_path / "audit"
    code, _, err = run_main(
        capsys, evaluate3(csv, audit, "--method", "histogram", "--dp-epsilon", "6")
    )
    line = one_line_error(code, err)
    assert "--dp-epsilon 6 charges each site's privacy ledger epsilon 12 in all" in line
    assert "'a', 'b', 'c': 10" in line  # what each site has left
    assert "give --dp-epsilon 5 or less" in line
    assert spent(audit) == [0.0, 0.0, 0.0]  # nothing was released

    # What the message says fits does fit, and takes the whole limit.
    code, _, err = run_main(
        capsys, evaluate3(csv, audit, "--method", "histogram", "--dp-epsilon", "5")
    )
    assert code == 0, err
    assert spent(audit) == pytest.approx([10.0, 10.0, 10.0])

    code, _, err = run_main(
        capsys, evaluate3(csv, audit, "--method", "histogram", "--dp-epsilon", "0.5")
    )
    line = one_line_error(code, err)
    assert "'a', 'b', 'c': 0;" in line and "no --dp-epsilon fits" in line
    assert spent(audit) == pytest.approx([10.0, 10.0, 10.0])


def test_histogram_dp_budget_refusal_counts_the_comparison(capsys, csv, tmp_path):
    """--compare-score under DP charges the joint counts 2 epsilon more: 4 x in all."""
    frame = pd.read_csv(csv)
    frame["score2"] = frame["score"][::-1].to_numpy()
    frame.to_csv(csv, index=False)
    audit = tmp_path / "audit"
    args = ["--method", "histogram", "--compare-score", "score2"]
    code, _, err = run_main(capsys, evaluate3(csv, audit, *args, "--dp-epsilon", "3"))
    line = one_line_error(code, err)
    assert "epsilon 12 in all (4 x 3" in line and "give --dp-epsilon 2.5 or less" in line
    assert spent(audit) == [0.0, 0.0, 0.0]
    code, _, err = run_main(capsys, evaluate3(csv, audit, *args, "--dp-epsilon", "2.5"))
    assert code == 0, err
    assert spent(audit) == pytest.approx([10.0, 10.0, 10.0])


# -- 2. a point or undefined interval says why -------------------------------------------


def write(path: Path, label: list[int], score: list[float]) -> Path:
    pd.DataFrame({"label": label, "score": score}).to_csv(path, index=False)
    return path


def test_metrics_says_why_a_constant_score_has_a_point_interval(capsys, tmp_path):
    """n=4, every score 0.5: SE 0 and CI [0.5, 0.5], without a word."""
    path = write(tmp_path / "c.csv", [0, 0, 1, 1], [0.5] * 4)
    code, out, err = run_main(capsys, ["metrics", str(path), "--json"])
    assert code == 0, err
    res = json.loads(out)
    # pROC's ci.auc gives 0.5-0.5 here too: the point is kept, and said.
    assert res["auc"] == 0.5 and res["auc_se"] == 0.0 and res["auc_ci"] == [0.5, 0.5]
    (caveat,) = res["caveats"]
    assert "every score ties" in caveat and "DeLong's variance is 0" in caveat
    code, out, err = run_main(capsys, ["metrics", str(path)])
    assert code == 0 and "caveat" in out and "every score ties" in " ".join(out.split())


def test_metrics_says_why_separated_classes_have_no_default_interval(capsys, tmp_path):
    """AUC 1: the default and logit intervals are null (logit(1) is infinite), and nothing
    said so, nor that the score interval is defined there."""
    from fedroc import delong

    y, s = [0, 0, 0, 1, 1, 1], [0.1, 0.2, 0.3, 0.7, 0.8, 0.9]
    path = write(tmp_path / "s.csv", y, s)
    code, out, err = run_main(capsys, ["metrics", str(path), "--json"])
    assert code == 0, err
    res = json.loads(out)
    assert res["auc"] == 1.0 and res["auc_ci"] == [None, None]
    (caveat,) = res["caveats"]
    assert "the AUC is 1" in caveat and "logit interval is undefined" in caveat
    lo, hi = delong(np.array(y), np.array(s)).confidence_interval(method="score")
    assert 0.4 < lo < 0.6 and hi == 1.0  # Newcombe's method 5 stays defined at AUC 1
    assert f"[{lo:.4f}, {hi:.4f}]" in caveat
    code, out, err = run_main(capsys, ["metrics", str(path)])
    assert code == 0 and "caveat" in out and "logit interval is undefined" in " ".join(out.split())


def test_metrics_without_a_degenerate_interval_has_no_caveats(capsys, csv):
    code, out, err = run_main(capsys, ["metrics", str(csv), "--json"])
    assert code == 0, err
    assert "caveats" not in json.loads(out)


def test_evaluate_pooled_says_why_tied_scores_give_a_point_interval(capsys, tmp_path):
    path = write(tmp_path / "c.csv", [0] * 6 + [1] * 6, [0.3] * 12)
    sites = [x for name in "abc" for x in ("--site", f"{name}={path}")]
    code, out, err = run_main(capsys, ["evaluate", *sites, "--method", "pooled", "--json"])
    assert code == 0, err
    res = json.loads(out)
    assert res["auc_ci"] == [0.5, 0.5]
    assert any("every score ties" in c for c in res["caveats"])


# -- 3. options taken and ignored ------------------------------------------------------


def test_pooled_refuses_min_count_and_audit_dir_which_it_ignored(capsys, csv, tmp_path):
    """--method pooled reads the rows itself: no site releases an aggregate (nothing for a
    minimum count to hold back: --min-count 50 passed on sites of 60 rows with 30 a class)
    and nothing is audited or charged (--audit-dir wrote only the sites' limits)."""
    audit = tmp_path / "audit"
    sites = ["--site", f"a={csv}", "--site", f"b={csv}"]
    for option, value in (("--min-count", "50"), ("--audit-dir", str(audit))):
        code, out, err = run_main(capsys, ["evaluate", *sites, "--method", "pooled", option, value])
        line = one_line_error(code, err)
        assert out == ""
        assert line.startswith(f"error: {option} {value} does not apply to --method pooled")
    assert not audit.exists()  # refused before any site was built


@pytest.mark.parametrize("method", ["rocglm", "clustered"])
def test_methods_without_analyst_randomness_give_the_same_result_whatever_the_seed(method):
    """What the refusal of --seed rests on: the seed changes nothing in these methods."""
    from fedroc.datasets import make_multisite
    from fedroc.federation import Federation
    from fedroc.methods import evaluate, get_method

    frames = make_multisite(seed=5)
    options = dict(get_method(method).demo_options)
    if method == "clustered":
        frames = {k: f.assign(cluster=np.arange(len(f)) // 3) for k, f in frames.items()}
    results = []
    for seed in (1, 2):
        fed = Federation.from_frames(
            frames, cluster="cluster" if method == "clustered" else None, noise_seed=7
        )
        results.append(evaluate(fed, method, seed=seed, **options).to_dict())
    assert results[0] == results[1]


@pytest.mark.parametrize(
    ("method", "more"),
    [
        ("rocglm", ["--sensitivity", "0.01"]),
        ("mpc", []),
        ("clustered", ["--cluster", "label"]),
    ],
)
def test_seed_is_refused_by_methods_that_draw_no_random_numbers(capsys, csv, method, more):
    sites = [x for name in "abc" for x in ("--site", f"{name}={csv}")]
    args = ["evaluate", *sites, "--method", method, *more, "--seed", "3"]
    code, out, err = run_main(capsys, args)
    line = one_line_error(code, err)
    assert out == ""
    assert line.startswith(f"error: --seed 3 does not apply to --method {method}: ")
    assert "leave --seed out" in line


def test_seed_is_refused_before_any_file_is_read_or_ledger_written(capsys, csv, tmp_path):
    """--seed's refusal came after the sites' files were read and the sites built:
    --audit-dir got a ledger per site (their limits) for a command that ran nothing. Now it
    is refused where --min-count and --audit-dir are for pooled, before either."""
    audit = tmp_path / "audit"
    sites = [x for name in "abc" for x in ("--site", f"{name}={csv}")]
    args = ["evaluate", *sites, "--method", "rocglm", "--sensitivity", "0.01", "--seed", "3"]
    code, _, err = run_main(capsys, [*args, "--audit-dir", str(audit)])
    line = one_line_error(code, err)
    assert line.startswith("error: --seed 3 does not apply to --method rocglm: ")
    assert not audit.exists()
    # An option the method lacks is still named first.
    code, _, err = run_main(capsys, [*args, "--quantiles", "8"])
    line = one_line_error(code, err)
    assert "--quantiles" in line and "--seed" not in line


def test_bins_the_sites_refuse_are_refused_before_the_method_spends(capsys, csv, tmp_path):
    """--method rocglm --bins 1: the method released its noisy scores (epsilon 1 charged
    at each site), then the sites refused the calibration's n_bins (2 to 100) and the run
    ended in that refusal, the result lost and the budget spent."""
    audit = tmp_path / "audit"
    for bins in ("1", "101"):
        args = ["--method", "rocglm", "--sensitivity", "0.05", "--bins", bins]
        code, _, err = run_main(capsys, evaluate3(csv, audit, *args))
        line = one_line_error(code, err)
        assert f"--bins must be an integer from 2 to 100; got {bins}" in line
        assert spent(audit) == [0.0, 0.0, 0.0]
    code, _, err = run_main(capsys, evaluate3(csv, audit, "--method", "rocglm",
                                              "--sensitivity", "0.05", "--bins", "2"))  # fmt: skip
    assert code == 0, err


# -- 4. privacy status in the words of a site operator ---------------------------------------


def test_privacy_status_names_what_the_spending_was_for(capsys, csv, tmp_path):
    """The histogram's spending was listed under 'fedroc.secagg.advertise_keys' (the secure
    sum's first stage, which carries its input's DP events) and the bindings as hashes."""
    audit = tmp_path / "audit"
    code, _, err = run_main(
        capsys, evaluate3(csv, audit, "--method", "histogram", "--dp-epsilon", "4")
    )
    assert code == 0, err
    code, out, err = run_main(capsys, ["privacy", "status", "--audit-dir", str(audit)])
    assert code == 0, err
    text = " ".join(out.split())
    assert "fedroc.secagg.advertise_keys" not in text
    assert "a: epsilon 0.6154 for histogram, noisy class counts (secure sum)" in text
    assert "a: epsilon 7.385 for histogram, noisy tree (secure sum)" in text
    status = ["privacy", "status", "--audit-dir", str(audit), "--json"]
    raw = json.loads(run_main(capsys, status)[1])
    site = raw["sites"][0]
    # The rows' digest is in neither (H13-3: with the rows but one label, it tells the
    # label); the ledger file keeps it, keyed by the ledger's salt (kept beside it).
    ledger = next(audit.glob("a*.ledger.jsonl")).read_text()
    digest = next(
        json.loads(line)["value"] for line in ledger.splitlines()
        if json.loads(line).get("key") == "rows"
    )  # fmt: skip
    assert digest.startswith("keyed:") and len(digest) == 70 and digest[6:18] not in text
    assert site["bindings"]["rows"] == "(a digest of its rows, kept in its ledger, not shown)"
    assert digest[6:18] not in json.dumps(raw)
    assert "a: holds its exact releases to one version of its rows" in text
    assert "a: secure sums only with a, b, c" in text
    # R12-2's record of the set each session's masked input went over (b696d11) was listed
    # as "a: secagg-masked:<session id> = a, b, c" and "secagg-unmasked:<id> = True".
    assert "secagg-masked:" not in text and "secagg-unmasked:" not in text
    session = next(k for k in site["bindings"] if k.startswith("secagg-masked:")).split(":")[1]
    assert f"a: sent its masked input over a, b, c in secure session {session[:12]}..." in text
    assert f"a: unmasked secure session {session[:12]}..." in text
    assert session not in text  # the whole id stays in --json
    # The raw names stay in --json, and the spending by what it was for adds up to them.
    assert site["epsilon_by_function"] == {"fedroc.secagg.advertise_keys": pytest.approx(8.0)}
    spending = {s["function"]: s for s in site["spending"]}
    assert set(spending) == {"fedroc.histogram.class_counts", "fedroc.histogram.tree"}
    assert spending["fedroc.histogram.class_counts"]["epsilon"] == pytest.approx(8 / 13)
    assert spending["fedroc.histogram.tree"]["epsilon"] == pytest.approx(96 / 13)
    assert spending["fedroc.histogram.tree"]["releases"] == 12  # one per level
    assert spending["fedroc.histogram.tree"]["for"] == "histogram, noisy tree (secure sum)"
    assert site["binding_notes"]["rows"].startswith("holds its exact releases")


def test_privacy_status_reads_a_ledger_written_before_inputs_were_recorded(capsys, tmp_path):
    """Older ledgers list a secure sum's spending under its stage only: the table says what
    the events' note says they were."""
    entry = {
        "kind": "dp",
        "function": "fedroc.secagg.advertise_keys",
        "event": {
            "mechanism": "discrete-laplace-share",
            "epsilon": 0.5,
            "delta": 0.0,
            "sensitivity": 2.0,
            "noise_scale": 4.0,
            "size": 2,
            "note": "histogram class counts, before the tree; one of 3 shares",
            "sampler": "os-entropy",
        },
        "limits": [10.0, 0.001],
    }
    (tmp_path / "a.ledger.jsonl").write_text(json.dumps(entry) + "\n")
    code, out, err = run_main(capsys, ["privacy", "status", "--audit-dir", str(tmp_path)])
    assert code == 0, err
    text = " ".join(out.split())
    assert "a: epsilon 0.5 for a secure sum (histogram class counts, before the tree)" in text


def test_privacy_status_says_every_binding_of_the_methods_in_words(capsys, csv, tmp_path):
    """After rocglm and clustered runs, `privacy status` still printed their bindings as
    ledger keys: 'rocglm.scale:range:[0.0, 1.0] = ...', 'argument:fedroc.calibration:n_bins
    = 10', 'clustered-secure:edges = ...' (review of the day's diff). Each is a sentence now;
    the keys stay in --json."""
    audit = tmp_path / "audit"
    frame = pd.read_csv(csv)
    frame["pid"] = np.arange(len(frame)) % 20  # 20 clusters of 3 rows, both classes in each
    clustered = tmp_path / "c.csv"
    frame.to_csv(clustered, index=False)
    runs = [
        evaluate3(csv, audit, "--method", "rocglm", "--sensitivity", "0.05"),
        evaluate3(clustered, audit, "--method", "clustered", "--cluster", "pid"),
    ]
    for args in runs:
        code, _, err = run_main(capsys, args)
        assert code == 0, err
    code, out, err = run_main(capsys, ["privacy", "status", "--audit-dir", str(audit)])
    assert code == 0, err
    raw = json.loads(run_main(capsys, ["privacy", "status", "--audit-dir", str(audit),
                                       "--json"])[1])  # fmt: skip
    keys = set(raw["sites"][0]["bindings"])
    assert any(k.startswith("rocglm.scale:") for k in keys), keys
    assert any(k.startswith("clustered") for k in keys), keys
    text = " ".join(out.split())
    for key in keys:
        assert f"{key} =" not in text, key  # no binding left as its raw key
    assert "a: rocglm noisy scores only on the score range" in text


def test_histogram_local_dp_run_over_the_sites_budget_is_refused_before_any_release(
    capsys, csv, tmp_path
):
    """Under --dp-mode local there was no pre-check (it asked through secure aggregation,
    which local DP does not use): --dp-epsilon 6 on two sites of limit 10 released each
    site's noisy class counts (epsilon 0.923 charged at each), then every site refused the
    tree ("this release needs 11.08 more"), naming no --dp-epsilon that fits. Now the sites
    are asked what they have left (fedroc.epsilon_left) and the run is refused before any
    release, as under distributed DP."""
    audit = tmp_path / "audit"
    sites = [x for name in "ab" for x in ("--site", f"{name}={csv}")]
    run = ["evaluate", *sites, "--audit-dir", str(audit), "--method", "histogram",
           "--dp-mode", "local"]  # fmt: skip
    code, _, err = run_main(capsys, [*run, "--dp-epsilon", "6"])
    line = one_line_error(code, err)
    assert "--dp-epsilon 6 charges each site's privacy ledger epsilon 12 in all" in line
    assert "'a', 'b': 10" in line and "nothing was released" in line
    assert "give --dp-epsilon 5 or less" in line
    assert spent(audit) == [0.0, 0.0]
    code, _, err = run_main(capsys, [*run, "--dp-epsilon", "5"])
    assert code == 0, err
    assert spent(audit) == pytest.approx([10.0, 10.0])


def _three_probability_sites(seed: int, policies: dict) -> tuple:
    """In-process sites of 600 probability-scored rows each, by name with their policies:
    the federation and the sites (to read their ledgers)."""
    from fedroc.data import SiteData
    from fedroc.federation import Federation
    from fedroc.federation.site import Site

    rng = np.random.default_rng(seed)
    sites = []
    for name, policy in policies.items():
        y = rng.random(600) < 0.4
        data = SiteData.from_arrays(y, np.clip(0.5 + 0.2 * (rng.normal(size=600) + y), 0, 1))
        sites.append(Site(name, data, policy=policy))
    return Federation.from_sites(sites), sites


def test_histogram_local_dp_is_refused_at_every_site_when_one_site_is_short():
    """One site short of budget: the sites with enough spent nothing either (the counts went
    to every site at once, and the others' spend was wasted)."""
    import math

    from fedroc.methods import evaluate
    from fedroc.privacy import DisclosurePolicy

    limits = {"a": math.inf, "b": 3.0, "c": 10.0}
    fed, sites = _three_probability_sites(
        5, {k: DisclosurePolicy(epsilon_limit=v) for k, v in limits.items()}
    )
    with pytest.raises(InputError) as exc:
        evaluate(fed, "histogram", dp_epsilon=2.0, dp_mode="local")
    msg = str(exc.value)
    assert "more than the epsilon left at site(s) 'b': 3;" in msg, msg
    assert "give dp_epsilon 1.5 or less" in msg, msg
    assert [s.ledger.spent()[0] for s in sites] == [0.0, 0.0, 0.0]
    # What the message says fits does fit: the counts and the tree, b's whole limit.
    res = evaluate(fed, "histogram", dp_epsilon=1.5, dp_mode="local")
    assert res.released.epsilon == pytest.approx({"a": 3.0, "b": 3.0, "c": 3.0})
    assert sites[1].ledger.spent()[0] == pytest.approx(3.0)


def test_histogram_local_dp_under_a_sites_epsilon_floor_is_refused_before_any_release():
    """The local-DP pre-check of 97b1203 compared the run's charge with what each site's
    limit leaves, not with the other thing a site refuses the local tree for: an epsilon
    below its policy's floor (histogram_min_epsilon). Site b's floor 2, dp_epsilon 1 (the
    tree at 12/13 of it): measured on main 913f1c7, every site released its noisy class
    counts, then a and c their trees, and b refused its tree; a and c charged 2.0 each
    (a fifth of a default lifetime), b 0.154, for a run that gave nothing. The sites' answer
    to fedroc.epsilon_left now carries the floor (a setting of its operator's, which the
    refusal tells too), and the run is refused before any release, naming b and the
    dp_epsilon that reaches its floor; nothing is charged. At that epsilon it runs."""
    from fedroc.methods import evaluate
    from fedroc.privacy import DisclosurePolicy

    floors = {"a": 0.01, "b": 2.0, "c": 0.01}
    fed, sites = _three_probability_sites(
        6,
        {
            k: DisclosurePolicy(histogram_min_epsilon=v, epsilon_limit=20.0)
            for k, v in floors.items()
        },
    )
    with pytest.raises(InputError) as exc:
        evaluate(fed, "histogram", dp_epsilon=1.0, dp_mode="local")
    msg = str(exc.value)
    assert "local-DP tree at epsilon 0.9231 (12/13 of dp_epsilon 1)" in msg, msg
    assert "below the floor of site(s) 'b': 2 (histogram_min_epsilon)" in msg, msg
    assert "nothing was released; give dp_epsilon 2.17 or more" in msg, msg
    assert [s.ledger.spent()[0] for s in sites] == [0.0, 0.0, 0.0]
    res = evaluate(fed, "histogram", dp_epsilon=2.17, dp_mode="local")
    assert res.released.epsilon == pytest.approx({k: 2 * 2.17 for k in "abc"})


def test_privacy_status_describes_every_binding_key_the_privacy_layer_names():
    """`fedroc privacy status` spelt the ledger keys as literals of its own, beside the ones
    the sites bind under: a key renamed where it is bound would have fallen back to the raw
    ``key = value`` line without a word. It now reads fedroc.privacy.keys (and the MPC
    owners' JOB_BINDING); every key named there is told in a sentence."""
    from fedroc.cli.privacy_cmd import describe_binding
    from fedroc.mpc.owner import JOB_BINDING
    from fedroc.privacy import keys

    job = {"job": "j", "terms": "t"}
    values = {"HISTOGRAM_RANGE": [0.0, 1.0, None], "HISTOGRAM_TREE": [2, 12], "MPC_JOB": job}
    # ROCGLM_SCALE is the two scale keys' common prefix, bound by neither alone; the module
    # names the keys' marks too (SHOWN, KEPT, VALUE_NOT_SHOWN, value_shown), not keys.
    names = [
        n
        for n in keys.__all__
        if isinstance(getattr(keys, n), str) and n not in ("ROCGLM_SCALE", "VALUE_NOT_SHOWN")
    ] + ["JOB_BINDING"]
    for name in names:
        key = JOB_BINDING if name == "JOB_BINDING" else getattr(keys, name)
        full = key + "fedroc.sum:n" if key.endswith(":") else key
        value = values.get(name, job if name == "JOB_BINDING" else 3)
        line = describe_binding(full, value)
        assert not line.startswith(full), (name, line)


def test_privacy_status_reads_a_flower_deployment_directory(capsys, csv, tmp_path):
    """`fedroc flower up --dir DEP` keeps each site's ledger in DEP/nodes/<site>/; `privacy
    status --audit-dir DEP` said "no privacy ledger" (walk)."""
    audit = tmp_path / "audit"
    code, _, err = run_main(capsys, evaluate3(csv, audit, "--method", "histogram"))
    assert code == 0, err
    deployment = tmp_path / "dep"
    for name in "abc":  # the layout flower up writes
        node = deployment / "nodes" / name
        node.mkdir(parents=True)
        (audit / f"{name}.ledger.jsonl").rename(node / "audit.ledger.jsonl")
        (audit / f"{name}.jsonl").rename(node / "audit.jsonl")  # names the site
    code, out, err = run_main(
        capsys, ["privacy", "status", "--audit-dir", str(deployment), "--json"]
    )
    assert code == 0, err
    assert [s["site"] for s in json.loads(out)["sites"]] == ["a", "b", "c"]
    code, _, err = run_main(capsys, ["privacy", "status", "--audit-dir", str(tmp_path / "x")])
    assert code == 2


def test_one_file_given_for_several_sites_is_warned_naming_them(capsys, csv, tmp_path, monkeypatch):
    """`evaluate --site a=x.csv --site b=x.csv` and `flower up --data a=x.csv --data b=x.csv`
    counted the file's rows once per site without a word. Now one stderr line names the
    sites and the file by its resolved path (spelt differently here: ./x.csv), and the run
    goes on; distinct files draw no such line."""
    import os

    other = tmp_path / "y.csv"
    other.write_bytes(csv.read_bytes())
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        sites = ["--site", f"a={csv}", "--site", "b=./x.csv", "--site", f"c={other}"]
        code, out, err = run_main(capsys, ["evaluate", *sites, "--method", "pooled", "--json"])
        assert code == 0, err
        assert json.loads(out)["auc"] is not None
        lines = [line for line in err.splitlines() if "same file" in line]
        assert lines == [
            f"warning: sites 'a', 'b' read the same file {str(csv.resolve())!r}: its rows "
            "count once per site"
        ], err
        code, _, err = run_main(
            capsys, ["evaluate", "--site", f"a={csv}", "--site", f"c={other}", "--method", "pooled"]
        )
        assert code == 0 and "same file" not in err
        # flower up says it before it starts anything (its processes are stubbed here).
        stub_flower_deployment(monkeypatch)
        data = ["--data", f"a={csv}", "--data", "b=./x.csv", "--dir", str(tmp_path / "up")]
        code, _, err = run_main(capsys, ["flower", "up", *data, "--duration", "0"])
        assert code == 0, err
        assert f"sites 'a', 'b' read the same file {str(csv.resolve())!r}" in err
    finally:
        os.chdir(here)
