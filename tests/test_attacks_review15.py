"""Review 15: an adversarial reading of the diff 553c50b..0cd8c05 (main, 2026-12-07).

The analyst is curious and uses fedroc's public calls only; what they send a site (a minimum
class count, a range, a body) is untrusted. Each question of the review has a test here:

- ``fedroc flower run --mpc-min-class-count`` (da30f9a) passes the analyst's value to the
  sites' MPC share function: held, no value under a site's ``min_count`` is sealed (0 of 9
  values 1-9 against sites of min_count 10; the site compares the job's terms, which the
  proxies enforce, with its own policy).
- The rows binding's salt (1a9b5e5): held, its bytes (hex or raw) appear in no reply, no
  refusal, no audit log, no ledger line and no ``fedroc privacy status`` (table or --json)
  after clear, secure, DP and refused calls; the analyst's calls, refused ones included,
  never remove or rewrite it, and the site restarts on its files.
- The typed sequester errors and OpenAPI error bodies (8a93a33, d81e4aa): held, a
  developer's refusals are the same status and body on two test sets one label apart
  (ClassesTooSmall's class sizes reach the custodian's plan route only).
- H14-2's fix (ad77a36: a rocglm.scale 'inside' binds the grid): held as far as locking
  goes, the lock is the one a first histogram request always made (same range, default
  tree, no transform); but the other clear statements about where a site's scores lie
  were left: H15-1 (score_levels' on_levels; partners' 'all among 0..0.8' and a secure
  tree give the victim's rows at 0.9: 20 of 20; a strict xfail until branch lockgrid, 0 of
  20 now that a levels answer holds the site's exact counts to the levels) and H15-2
  (fedroc.is_probability; 20 of 20 -> 0 of 20, closed as H14-2 was).
- Plain bugs: supernode's --policy-file beside a policy option typed at its default
  (started with the file's min_count 3 after --min-count 5: 4 of 6 options), flower run's
  --mpc-min-class-count 1 passed the check and failed after connecting, mpc share's words
  and docs/mpc.md on what a site refuses, check_address's misnamed or passed addresses.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import fedroc.apps.application  # noqa: F401  (registers every site function)
from fedroc.data import SiteData
from fedroc.exceptions import FedrocError
from fedroc.federation import Federation
from fedroc.federation.site import Site


def _try(f, *args, **kwargs):
    """``f(*args, **kwargs)``, or the refusal (a FedrocError) as a value."""
    try:
        return f(*args, **kwargs)
    except FedrocError as exc:
        return exc


# -- the analyst's --mpc-min-class-count against a site's own minimum -------------------------


def test_held_an_analysts_mpc_min_class_count_never_lowers_a_sites_minimum(tmp_path):
    """``flower run --mpc-min-class-count M`` sends M to every site; a site of min_count 10
    must refuse to seal its rows for a job of any M < 10 (the proxies open the AUC once both
    pooled classes hold M rows). Measured: 0 of the 9 values 1..9 sealed; 10 runs."""
    pytest.importorskip("flwr")
    from _flower_sites import write_sites

    from fedroc.federation.flower.jobs import run_job
    from fedroc.privacy import DisclosurePolicy

    paths = write_sites(tmp_path)

    def federation() -> Federation:
        return Federation.from_files(paths, policy=DisclosurePolicy(min_count=10))

    sealed = []
    for m in range(1, 10):
        out = _try(run_job, "evaluate", federation(), {"method": "mpc", "options": {
            "mpc_min_class_count": m}})  # fmt: skip
        if not isinstance(out, FedrocError):
            sealed.append(m)
        elif m > 1:
            assert "below the site's minimum of 10" in str(out), out
        else:  # 1: refused by the method first (its CI divides by P - 1)
            assert "mpc_min_class_count >= 2" in str(out), out
    assert sealed == [], f"sites of min_count 10 sealed their rows for M = {sealed}"
    ok = run_job(
        "evaluate", federation(), {"method": "mpc", "options": {"mpc_min_class_count": 10}}
    )
    assert 0.5 < ok["auc"] < 1


# -- the salt of the rows binding ----------------------------------------------------------


def _site_files(tmp_path, seed: int = 0) -> tuple[SiteData, object]:
    rng = np.random.default_rng([1501, seed])
    y, s = rng.random(150) < 0.4, rng.random(150)
    return SiteData.from_arrays(y, s), tmp_path / "north.jsonl"


def test_held_the_rows_salt_is_in_no_reply_log_ledger_or_status(tmp_path, capsys):
    """After clear, secure, DP and refused calls, the salt (32 bytes kept in
    ``north.ledger.salt``) is nowhere the analyst or an auditor of the ledger looks."""
    from fedroc.secagg import secure_sum
    from tests._cli import run_main

    data, audit = _site_files(tmp_path)
    sites = [Site("north", data, audit=audit)]
    rng = np.random.default_rng(7)
    for name in ("south", "east"):
        sites.append(Site(name, SiteData.from_arrays(rng.random(150) < 0.4, rng.random(150))))
    fed = Federation.from_sites(sites)
    said = [
        _try(fed.call, "fedroc.sum", sites=["north"]),
        _try(secure_sum, fed, "fedroc.calibration", n_bins=10),
        _try(fed.call, "fedroc.calibration", sites=["north"], n_bins=10),  # refused: secure before
        _try(fed.call, "rocglm.scale", sites=["north"], score_range=np.array([0.0, 0.5])),
    ]
    assert any(isinstance(x, FedrocError) for x in said)
    # other rows under the same ledger: refused, "its rows changed"
    changed = data.label.copy()
    changed[0] = not changed[0]
    other = Site("north", SiteData.from_arrays(changed, data.score), audit=audit)
    said.append(_try(Federation.from_sites([other]).call, "fedroc.sum"))
    assert isinstance(said[-1], FedrocError) and "rows changed" in str(said[-1])

    salt_file = tmp_path / "north.ledger.salt"
    salt_hex = salt_file.read_text().strip()
    salt = bytes.fromhex(salt_hex)
    assert len(salt) == 32
    code, table, err = run_main(capsys, ["privacy", "status", "--audit-dir", str(tmp_path)])
    assert code == 0, err
    code, as_json, err = run_main(
        capsys, ["privacy", "status", "--audit-dir", str(tmp_path), "--json"]
    )
    assert code == 0, err
    seen = {
        "replies": repr(said) + " ".join(str(x) for x in said),
        "audit log": audit.read_text(),
        "ledger": (tmp_path / "north.ledger.jsonl").read_text(),
        "status": table + as_json,
    }
    for where, text in seen.items():
        for form in (salt_hex, salt_hex.upper(), salt.hex()[:16], repr(salt)[2:18]):
            assert form not in text, f"the salt in the {where}"
    # the keyed digest is not in the status either (KEPT), the ledger holds it keyed
    assert "keyed:" not in seen["status"] and "keyed:" in seen["ledger"]


def test_held_no_call_of_the_analyst_removes_or_rewrites_the_salt(tmp_path):
    """The 'salt file missing' refusal is for an operator who lost the file; the analyst's
    calls (answered, refused, with damaged arguments) write the salt once and never again,
    and the site restarts on its files."""
    data, audit = _site_files(tmp_path, 1)
    fed = Federation.from_sites([Site("north", data, audit=audit)])
    fed.call("fedroc.sum")
    salt_file = tmp_path / "north.ledger.salt"
    first, mode = salt_file.read_bytes(), salt_file.stat().st_mode & 0o777
    for call in (
        lambda: fed.call("fedroc.sum"),
        lambda: fed.call("fedroc.calibration", n_bins=10),
        lambda: fed.call("fedroc.calibration", n_bins=7),  # refused: n_bins bound
        lambda: fed.call("rocglm.scale", score_range=np.array([2.0, 1.0])),  # refused: lo > hi
        lambda: fed.call("rocglm.scale", score_range=np.array([0.0, 0.1])),
        lambda: fed.call("no.such.function"),
    ):
        _try(call)
    assert (salt_file.read_bytes(), salt_file.stat().st_mode & 0o777) == (first, mode)
    again = Federation.from_sites([Site("north", data, audit=audit)])
    assert json.dumps(again.call("fedroc.sum")["north"], default=str)


# -- plain bugs of the diff --------------------------------------------------------------------


@pytest.mark.parametrize(
    "option",
    [
        ["--min-count", "5"],
        ["--allow-noisy"],
        ["--allow-shares"],
        ["--mpc-proxies", "none"],
        ["--mpc-max-jobs", "1"],
        ["--mpc-only"],
    ],
)
def test_supernode_refuses_a_policy_option_typed_beside_a_policy_file(
    monkeypatch, capsys, tmp_path, option
):
    """464c75c refused a policy option beside --policy-file only when its value differed
    from the option's default: `--policy-file p.toml --min-count 5`, with min_count = 3 in
    the file, started a node of min_count 3 without a word, its operator having typed 5
    (the same for --allow-noisy, --allow-shares, --mpc-proxies none); --mpc-max-jobs and
    --mpc-only were refused by the node config's check in its keys' words
    ('mpc-max-jobs'), not the options'. Now every policy option given is refused, named."""
    pytest.importorskip("flwr")
    from _cli import run_main

    import fedroc.federation.flower.node as node

    monkeypatch.setattr(node, "supervise", lambda args, **_: 0)
    monkeypatch.setattr("fedroc.cli.flower_cmd._check_port", lambda port: None)
    policy = tmp_path / "policy.toml"
    policy.write_text("[policy]\nmin_count = 3\n")
    frame = tmp_path / "north.csv"
    rng = np.random.default_rng(3)
    frame.write_text(
        "label,score\n" + "".join(f"{int(rng.random() < 0.4)},{rng.random()}\n" for _ in range(40))
    )
    args = ["flower", "supernode", "--superlink", "127.0.0.1:9093", "--insecure", "--site",
            "north", "--data", str(frame), "--node-dir", str(tmp_path / "node"),
            "--policy-file", str(policy), *option]  # fmt: skip
    code, out, err = run_main(capsys, args)
    assert code == 2, f"started with {option} beside --policy-file: {out} {err}"
    assert option[0] in err and "--policy-file" in err, err


# -- the sequestration service's typed error bodies --------------------------------------------


def _developer_refusals(tmp_path, flip: bool) -> list[tuple[int, str]]:
    """Every refusal a developer can provoke with their own requests (the typed engine
    errors of 8a93a33 among them), on a test set whose image 0 has label ``flip``."""
    from fastapi.testclient import TestClient

    from fedroc.sequester.service import create_app
    from tests._sequester_server import ADMIN

    app = create_app(str(tmp_path / f"seq{int(flip)}.db"), ADMIN, rate_limit=0)
    rng = np.random.default_rng(15)
    n = 300
    y = (rng.random(n) < 0.3).astype(int)
    y[0] = int(flip)
    ids = [f"img-{i:04d}" for i in range(n)]
    adm = TestClient(app, headers={"Authorization": f"Bearer {ADMIN}"})
    tid = adm.post("/v1/test-sets", json={"image_ids": ids, "labels": y.tolist()}).json()
    plan = adm.post(
        f"/v1/test-sets/{tid['test_set_id']}/plans",
        json={"n_subsets": 10, "noise_rate": 0.05, "budget_units": 2, "subset_size": 100,
              "prevalence": 0.3},
    ).json()  # fmt: skip
    token = adm.post(f"/v1/plans/{plan['plan_id']}/developers", json={"name": "a"}).json()
    dev = TestClient(app, headers={"Authorization": f"Bearer {token['token']}"})
    scores = rng.normal(size=n).tolist()
    sid = dev.post("/v1/submissions", json={"image_ids": ids, "scores": scores}).json()
    sid = sid["submission_id"]
    asks = [
        ("post", "/v1/queries", {"json": {"submission_id": sid, "subset_id": 1}}),
        ("post", "/v1/queries", {"json": {"submission_id": sid, "subset_id": 0,
                                          "reference_auc": 0.5}}),
        ("post", "/v1/queries", {"json": {"submission_id": sid, "subset_id": 11,
                                          "reference_auc": 0.5}}),
        ("post", "/v1/queries", {"json": {"submission_id": sid + 7, "subset_id": 1,
                                          "reference_auc": 0.5}}),
        ("post", "/v1/queries", {"content": b'{"submission_id": 1, ', "headers": {
            "Content-Type": "application/json"}}),
        ("post", "/v1/queries", {"content": b'{"submission_id": "\xff"}', "headers": {
            "Content-Type": "application/json"}}),
        ("post", "/v1/submissions", {"json": {"image_ids": ids, "scores": scores}}),
        ("post", "/v1/submissions", {"json": {"image_ids": ids[:-1], "scores": scores[:-1]}}),
        ("post", "/v1/submissions", {"json": {"image_ids": ids, "scores": scores[:-1]}}),
        ("post", f"/v1/test-sets/{tid['test_set_id']}/plans", {"json": {
            "n_subsets": 10, "noise_rate": 0.05, "subset_size": 600, "replace": False}}),
        ("get", f"/v1/plans/{plan['plan_id']}/subsets/1", {}),
    ]  # fmt: skip
    said = []
    for verb, path, kwargs in asks:
        r = getattr(dev, verb)(path, **kwargs)
        said.append((r.status_code, r.text))
    return said


def test_held_a_developers_refusals_are_the_same_on_two_test_sets_one_label_apart(tmp_path):
    """8a93a33 typed the engine's refusals (ClassesTooSmall carries the test set's class
    sizes, the cap); d81e4aa documented the bodies. A developer's own requests (a missing
    reference, a subset out of range, bad JSON, a bad or repeated submission, a plan or a
    subset's images asked with a developer token) are refused with the same status and body
    on two test sets one label apart: the class sizes reach the custodian only."""
    a, b = _developer_refusals(tmp_path, False), _developer_refusals(tmp_path, True)
    assert all(code >= 400 for code, _ in a), a
    assert a == b
    assert all("positive" not in body for _, body in a), a


def test_flower_run_refuses_an_mpc_min_class_count_of_1_before_it_connects(capsys):
    """da30f9a checked --mpc-min-class-count "1 to 2**28-1 before connecting", but the MPC job
    of `flower run` always computes the AUC's CI (flower run has no --no-mpc-ci), which needs
    2 (DeLong's variance divides by P - 1): 1 passed the check and the ServerApp refused it
    after the run's start-up. Now refused at once, as `fedroc evaluate` refuses it."""
    pytest.importorskip("flwr")
    from _cli import run_main

    run = ["flower", "run", "--superlink", "127.0.0.1:1", "--insecure", "--method", "mpc"]
    code, _, err = run_main(capsys, [*run, "--mpc-min-class-count", "1"])
    assert code == 2 and "--mpc-min-class-count" in err and "got 1" in err, err
    assert "unavailable" not in err and "connect" not in err.lower(), err


# -- H14-2's fix: a scale answer "inside" binds the site's grid --------------------------------


def _lock_sites(seed: int) -> tuple[Federation, list[Site]]:
    rng = np.random.default_rng([1502, seed])
    sites = [Site(n, SiteData.from_arrays(rng.random(150) < 0.4, rng.random(150))) for n in "abc"]
    return Federation.from_sites(sites), sites


def _locked_grid(sites: list[Site]) -> object:
    from fedroc.federation.basic import BIND_RANGE, BIND_TREE

    return [(s.ledger.bindings.get(BIND_RANGE), s.ledger.bindings.get(BIND_TREE)) for s in sites]


def test_held_a_scale_answer_locks_no_grid_a_first_histogram_request_could_not():
    """ad77a36 made ``rocglm.scale`` bind the site's grid over the analyst's range once every
    score lies inside. Can the analyst now lock a site's grid (deny the default calibration
    for the ledger's lifetime) or force releases on a grid of their choosing in a way they
    could not before? The lock is the same as the one their first histogram (the secure tree
    over the same range) always bound: the same range, the default tree, no transform, the
    same refusal of a later calibration over [0, 1] (3 of 3 ranges each). A range the scale
    answered 'outside' bound nothing until branch lockgrid; now every clear answer about
    where a site's scores lie binds its grid, whatever the answer (H14-2 the other way: an
    unbound 'outside' named the site of a pooled lone row, 20 of 20), and the lock is again
    the one a first histogram over that range binds (which the site refuses, its scores
    lying outside, and which binds all the same). What remains: the first request of any
    analyst chooses the grid for good (docs/privacy.md), a denial of service this does not
    widen."""
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA
    from fedroc.secagg import secure_sum

    for lo, hi in ((-1e6, 1e6), (0.0, 1.5), (-0.5, 1.0)):
        (by_scale, scale_sites), (by_tree, tree_sites) = _lock_sites(0), _lock_sites(0)
        said = by_scale.call("rocglm.scale", score_range=np.array([lo, hi]))
        assert all(r["in_range"] for r in said.values())
        secure_sum(by_tree, INPUT_NAME, mode=MODE_SA, branching=2, height=12, lo=lo, hi=hi)
        assert _locked_grid(scale_sites) == _locked_grid(tree_sites)
        for fed in (by_scale, by_tree):
            out = _try(secure_sum, fed, "fedroc.calibration", n_bins=10)
            assert isinstance(out, FedrocError) and "may not change" in str(out), out
    (by_scale, scale_sites), (by_tree, tree_sites) = _lock_sites(1), _lock_sites(1)
    said = by_scale.call("rocglm.scale", score_range=np.array([0.0, 0.5]))
    assert not any(r["in_range"] for r in said.values())
    out = _try(secure_sum, by_tree, INPUT_NAME, mode=MODE_SA, branching=2, height=12, lo=0.0,
               hi=0.5)  # fmt: skip
    assert isinstance(out, FedrocError) and "outside the public score range" in str(out), out
    assert (
        _locked_grid(scale_sites) == _locked_grid(tree_sites) == [([0.0, 0.5, None], [2, 12])] * 3
    )
    for fed in (by_scale, by_tree):
        out = _try(secure_sum, fed, "fedroc.calibration", n_bins=10)
        assert isinstance(out, FedrocError) and "may not change" in str(out), out


def test_mpc_share_says_its_minimum_truly(tmp_path, capsys):
    """cdf1cc1's refusal said "fewer than the minimum count 10 an owner shares by default"
    for an owner who gave --owner-min-count 10, and docs/mpc.md said a site of `fedroc
    evaluate` refuses a file of fewer than q rows of either class: it refuses under q rows in
    all only (a site of 100 rows, 2 of them positive, shares: its class counts stay secret
    under MPC). The owner's check is stricter, and the words now say so."""
    pytest.importorskip("flwr")
    from pathlib import Path

    from fedroc.federation.flower.jobs import run_job

    rng = np.random.default_rng(1)
    sites = []
    for name, n_pos in (("a", 2), ("b", 40), ("c", 40)):
        y = np.zeros(100, bool)
        y[:n_pos] = True
        sites.append(Site(name, SiteData.from_arrays(y, rng.random(100) + 0.3 * y)))
    assert 0.5 < run_job("evaluate", Federation.from_sites(sites), {"method": "mpc"})["auc"] < 1
    docs = (Path(__file__).parents[1] / "docs" / "mpc.md").read_text()
    assert "under which `fedroc evaluate` refuses such a site" not in docs
    assert "a site of 100\nrows with 2 positives shares" in docs

    from fedroc.cli.mpc_cmd import _check_owner_counts
    from fedroc.exceptions import InputError

    with pytest.raises(InputError) as exc:
        _check_owner_counts(tmp_path / "a.csv", 7, 90, 10)
    assert "by default" not in str(exc.value) and "--owner-min-count" in str(exc.value)
    with pytest.raises(InputError, match="by default a site's default minimum count q"):
        _check_owner_counts(tmp_path / "a.csv", 3, 90, 5)


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("[::1]", "a port after the bracketed host"),
        ("host:\u0668\u0660", "the port must be a number"),  # Arabic-Indic 80
        (" host:9093", "give HOST:PORT"),
        ("a b:9093", "give HOST:PORT"),
    ],
)
def test_check_address_refuses_what_it_let_through_or_misnamed(address, words):
    """2ca05bc's check_address told '[::1]' to 'write an IPv6 host in brackets' (it is),
    and passed a port of Arabic-Indic digits (str.isdecimal; int() reads 80, Flower's gRPC
    does not) and a host with spaces to Flower, which failed after its start-up."""
    pytest.importorskip("flwr")
    from fedroc.exceptions import InputError
    from fedroc.federation.flower.deploy import check_address

    with pytest.raises(InputError, match=words):
        check_address(address, "--superlink")
    for good in ("127.0.0.1:9093", "[::1]:9093", "localhost:1", "host.example:65535"):
        assert check_address(good) == good


def test_the_partners_levels_answers_do_not_isolate_a_sites_rows_in_a_secure_tree():
    """H15-1 (H14-2 through score_levels). A rating scale 0, 0.1, ..., 0.9: the victim holds
    k (1 to 4, under q) rows at 0.9, the two partners none. Asked of the partners with
    score_range [0, 1] (which holds any grid) and score_levels 0..0.8, ``rocglm.scale``
    answers ``on_levels`` True: they hold no row at 0.9. The secure exact tree over [0, 1]
    (the default grid, which the scale's 'inside' bound at the partners) then has in its
    leaves above 0.85 the victim's k rows alone, and their classes. Measured on main
    0cd8c05 and 0b40f80: 20 of 20 (a strict xfail until branch lockgrid).

    Now a site that answered a levels question (either answer) is held to those levels for
    its exact counts: it answers a grid only if every cell of its one grid holds one of them
    (or a ROC-GLM setup on those levels, which checks every row is on them). The partners'
    answer bound their grid (4096 cells over [0, 1]) and the levels 0..0.8: most cells hold
    none, so they refuse the tree (0 of 20, 20 refused)."""
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA
    from fedroc.secagg import secure_sum

    found = refused = 0
    for seed in range(20):
        rng = np.random.default_rng([1503, seed])
        k = 1 + seed % 4
        y = rng.random(120) < 0.4
        s = np.r_[np.full(k, 0.9), rng.integers(0, 9, 120 - k) / 10]
        sites = [Site("v", SiteData.from_arrays(y, s))]
        for name in ("p1", "p2"):
            partner = SiteData.from_arrays(rng.random(200) < 0.4, rng.integers(0, 9, 200) / 10)
            sites.append(Site(name, partner))
        fed = Federation.from_sites(sites)
        said = _try(fed.call, "rocglm.scale", sites=["p1", "p2"],
                    score_range=np.array([0.0, 1.0]), score_levels=np.arange(9) / 10)  # fmt: skip
        if isinstance(said, FedrocError) or not all(r["on_levels"] for r in said.values()):
            continue
        tree = _try(secure_sum, fed, INPUT_NAME, mode=MODE_SA, branching=2, height=12, lo=0.0,
                    hi=1.0)  # fmt: skip
        if isinstance(tree, FedrocError):
            refused += 1
            continue
        top = slice(int(0.85 * 4096), 4096)
        pos, neg = int(np.sum(tree["pos"][top])), int(np.sum(tree["neg"][top]))
        found += pos + neg == k and pos == int(y[:k].sum())
    assert found == 0, f"the victim's rows at the top rating (count, positives) in {found} of 20"
    assert refused == 20


def _rated_sites(seed: int) -> tuple[Federation, list[Site]]:
    """Three sites on the ratings 0, 0.1, ..., 0.9; site 'b' holds one row at 0.95, off them."""
    rng = np.random.default_rng([1505, seed])
    scores = [rng.integers(0, 10, 150) / 10 for _ in range(3)]
    scores[1][0] = 0.95
    sites = [
        Site(n, SiteData.from_arrays(rng.random(150) < 0.4, v))
        for n, v in zip("abc", scores, strict=True)
    ]
    return Federation.from_sites(sites), sites


def test_a_site_whose_grid_is_finer_than_the_levels_refuses_the_levels_question_unread():
    """H15-1 the other order: after a secure tree bound the sites' grid (4096 cells over
    [0, 1]), whether their scores all lie on ten levels would say which cells they add no
    row to. The question is refused before the rows are read: the same words at a site
    whose scores are on the levels and at one with a row off them. On a grid each cell of
    which holds a level (a tree of 9 cells, branching 3) it is answered, either way, and
    that tree is still answered after; one set of levels per lifetime."""
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA
    from fedroc.secagg import secure_sum

    levels = np.arange(10) / 10
    fed, _ = _rated_sites(0)
    secure_sum(fed, INPUT_NAME, mode=MODE_SA, branching=2, height=12, lo=0.0, hi=1.0)
    texts = []
    for name in ("a", "b"):
        out = _try(fed.call, "rocglm.scale", sites=[name], score_levels=levels)
        assert isinstance(out, FedrocError), out
        texts.append(str(out).replace(f"'{name}'", "'X'"))
    assert texts[0] == texts[1] and "4096 cells over [0, 1]" in texts[0], texts
    fed, sites = _rated_sites(1)
    secure_sum(fed, INPUT_NAME, mode=MODE_SA, branching=3, height=2, lo=0.0, hi=1.0)
    said = fed.call("rocglm.scale", score_levels=levels)
    assert [said[n]["on_levels"] for n in "abc"] == [True, False, True]
    assert secure_sum(fed, INPUT_NAME, mode=MODE_SA, branching=3, height=2, lo=0.0, hi=1.0)
    from fedroc.federation.basic import SCORE_LEVELS_KEY

    assert [s.ledger.bindings[SCORE_LEVELS_KEY] for s in sites] == [levels.tolist()] * 3
    out = _try(fed.call, "rocglm.scale", sites=["a"], score_levels=levels[:-1])
    assert isinstance(out, FedrocError) and "one set of levels" in str(out), out


def _victim_above_one(seed: list[int], k: int) -> tuple[Federation, np.ndarray]:
    """A victim ``v`` of 120 rows, ``k`` of them scored in (1.05, 1.45], and two partners of
    200 rows whose scores all lie in [0, 1]."""
    rng = np.random.default_rng(seed)
    y = rng.random(120) < 0.4
    s = np.r_[rng.uniform(1.05, 1.45, k), rng.random(120 - k)]
    sites = [Site("v", SiteData.from_arrays(y, s))]
    for name in ("p1", "p2"):
        sites.append(Site(name, SiteData.from_arrays(rng.random(200) < 0.4, rng.random(200))))
    return Federation.from_sites(sites), y


def _pooled_rows_above_one(fed: Federation) -> tuple[int, int] | None:
    """The secure exact tree over [-0.5, 1.5]: its pooled positives and negatives above 1,
    or None where a site refused it."""
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA
    from fedroc.secagg import secure_sum

    tree = _try(secure_sum, fed, INPUT_NAME, mode=MODE_SA, branching=2, height=12, lo=-0.5,
                hi=1.5)  # fmt: skip
    if isinstance(tree, FedrocError):
        return None
    top = slice(int(np.ceil(1.5 / 2.0 * 4096)) + 1, 4096)  # the leaves above 1.0
    return int(np.sum(tree["pos"][top])), int(np.sum(tree["neg"][top]))


def test_the_partners_probability_answers_do_not_isolate_a_sites_rows_in_a_secure_tree():
    """H15-2 (H14-2 through the fixed range [0, 1], which docs/privacy.md left 'not
    measured'). The victim holds k (1 to 4, under q) rows with scores in (1.05, 1.45], the
    partners' scores all lie in [0, 1]. ``fedroc.is_probability`` answers 'ok' at the
    partners; the secure exact tree over [-0.5, 1.5] then has in its leaves above 1 the
    victim's rows alone. Measured on main 0cd8c05: 20 of 20. Now, as H14-2: a yes binds the
    default grid over [0, 1] when none is bound, and the partners refuse the tree (0 of 20,
    20 refused); a site whose grid is wider refuses the question."""
    found = refused = 0
    for seed in range(20):
        k = 1 + seed % 4
        fed, y = _victim_above_one([1504, seed], k)
        said = _try(fed.call, "fedroc.is_probability", sites=["p1", "p2"])
        if isinstance(said, FedrocError) or not all(r["ok"] for r in said.values()):
            continue
        above = _pooled_rows_above_one(fed)
        if above is None:
            refused += 1
            continue
        pos, neg = above
        found += pos + neg == k and pos == int(y[:k].sum())
    assert found == 0, f"the victim's rows above 1 (count, positives) in {found} of 20"
    assert refused == 20


@pytest.mark.parametrize("asked", ["is_probability_no", "brier", "sensitivity"])
def test_no_answer_on_0_1_names_the_site_of_rows_outside_it_in_a_secure_tree(asked):
    """H15-2's statement made the other ways (found with branch lockgrid's fix of H14-2 the
    other way and H15-1; measured on its first commit, 29db4c7, 20 of 20 each):

    - ``fedroc.is_probability`` answered "no" at a victim with one row above 1 and bound
      nothing (only a yes bound [0, 1]): the secure tree over [-0.5, 1.5] then had one
      pooled row above 1, the victim's, and its class;
    - ``fedroc.brier`` and ``rocglm.sensitivity`` (the ROC-GLM's sensitivity heuristic),
      each refused for a score outside [0, 1] and answered otherwise, said at the partners
      that they hold no row outside [0, 1], and bound nothing: the same tree had the
      victim's 1 to 4 rows above 1 alone, their count and classes.

    Now each binds the default grid over [0, 1], before it reads the rows, whatever the
    answer (and is refused at a site whose grid is wider): the site asked refuses the tree
    over [-0.5, 1.5], 0 of 20, 20 refused."""
    found = refused = 0
    for seed in range(20):
        k = 1 if asked == "is_probability_no" else 1 + seed % 4
        fed, y = _victim_above_one([1506, seed], k)
        if asked == "is_probability_no":
            said = fed.call("fedroc.is_probability", sites=["v"])
            assert not said["v"]["ok"]
        else:
            function = "fedroc.brier" if asked == "brier" else "rocglm.sensitivity"
            assert not isinstance(_try(fed.call, function, sites=["p1", "p2"]), FedrocError)
        above = _pooled_rows_above_one(fed)
        if above is None:
            refused += 1
            continue
        pos, neg = above
        found += pos + neg == k and pos == int(y[:k].sum())
    assert found == 0, f"the victim's rows above 1 (count, positives) in {found} of 20"
    assert refused == 20


def test_a_run_on_a_grid_wider_than_0_1_skips_the_brier_score_instead_of_failing():
    """After a histogram over [-0.5, 1.5] bound the sites' grid, the sites refuse
    ``fedroc.is_probability`` (H15-2); ``evaluate`` then treats the scores as not
    probabilities (no Brier score, no calibration) rather than failing after its release."""
    import fedroc
    from fedroc.federation.basic import all_probabilities
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA
    from fedroc.secagg import secure_sum

    fed, _ = _lock_sites(3)
    secure_sum(fed, INPUT_NAME, mode=MODE_SA, branching=2, height=12, lo=-0.5, hi=1.5)
    assert not all_probabilities(fed)
    result = fedroc.evaluate(fed, method="histogram", score_range=(-0.5, 1.5))
    assert result.extra.get("brier") is None and 0.5 < result.auc < 1
