"""A site's declared score range (policy ``score_range``): answers from the declaration.

Since H14-2 (docs/privacy.md) every clear answer a site gives about where its scores lie
binds its grid of exact counts, whatever the answer. On scores that are not probabilities
the first such question (``fedroc.is_probability`` in any evaluate run's Brier step, a
ROC-GLM run without a score range) bound the grid over [0, 1], and the site refused every
histogram and ROC-GLM over the scores' real range for its ledger's lifetime. A site whose
operator declares its range answers those questions from the declaration, checked against
its rows when the site is built, and its grid is the declared range whatever an analyst asks.
"""

from __future__ import annotations

import numpy as np
import pytest

import fedroc
import fedroc.apps.application  # (registers every site function)
from fedroc.data import SiteData
from fedroc.exceptions import FedrocError, InputError
from fedroc.federation import Federation
from fedroc.federation.site import Site
from fedroc.privacy import DisclosurePolicy

DECLARED = (-10.0, 10.0)


def _try(f, *args, **kwargs):
    """``f(*args, **kwargs)``, or the refusal (a FedrocError) as a value."""
    try:
        return f(*args, **kwargs)
    except FedrocError as exc:
        return exc


def _logits(seed: int, n: int = 300, spread: float = 2.0) -> SiteData:
    """Logit-like scores in (-9.9, 9.9); ``spread`` 0: probabilities in [0, 1] instead."""
    rng = np.random.default_rng([2207, seed])
    y = rng.random(n) < 0.4
    if spread == 0:
        return SiteData.from_arrays(y, np.clip(rng.random(n) * 0.8 + 0.2 * y, 0.0, 1.0))
    s = np.clip(rng.normal(0.0, spread, n) + 1.5 * y, -9.9, 9.9)
    return SiteData.from_arrays(y, s)


def _federation(declared: tuple[float, float] | None, seed: int = 0, spread: float = 2.0):
    policy = DisclosurePolicy(score_range=declared)
    sites = [Site(f"s{i}", _logits(10 * seed + i, spread=spread), policy=policy) for i in range(3)]
    fed = Federation.from_sites(sites)
    fed.test_sites = sites  # the Site objects, for the checks of their ledgers and rows
    return fed


# -- (a) the cost of H14-2 is gone at a declared site ----------------------------------------


@pytest.mark.parametrize("first", ["mpc", "rocglm-default-range"])
def test_a_first_question_no_longer_locks_a_declared_sites_grid(first):
    """On logit scores, a first MPC evaluate run (its Brier step asks fedroc.is_probability)
    or a ROC-GLM run without a score range bound every undeclared site's grid to [0, 1]: a
    histogram and a ROC-GLM over [-10, 10] are then refused (asserted). At sites that
    declare [-10, 10] both run, and the grid bound is the declared one."""
    from fedroc.federation.basic import BIND_RANGE

    for declared in (None, DECLARED):
        fed = _federation(declared)
        if first == "mpc":
            result = fedroc.evaluate(fed, method="mpc")
            assert result.extra.get("brier") is None  # not probabilities: no Brier score
        else:
            out = _try(fedroc.evaluate, fed, method="rocglm", sensitivity=1.0)
            assert isinstance(out, FedrocError), out  # [0, 1] holds no logits
        hist = _try(fedroc.evaluate, fed, method="histogram", score_range=DECLARED)
        glm = _try(fedroc.evaluate, fed, method="rocglm", score_range=DECLARED, sensitivity=1.0)
        if declared is None:
            assert isinstance(hist, FedrocError) and "may not change" in str(hist), hist
            assert "declaring score_range in its policy" in str(hist)  # the way out
            assert isinstance(glm, FedrocError), glm
        else:
            assert not isinstance(hist, FedrocError), hist
            assert not isinstance(glm, FedrocError), glm
            assert 0.5 < hist.auc < 1 and 0.5 < glm.auc < 1
            bound = [s.ledger.bindings[BIND_RANGE] for s in fed.test_sites]
            assert bound == [[-10.0, 10.0, None]] * 3


def test_a_declared_site_holds_requests_to_its_range_naming_it():
    """A histogram over another range than the declared one is refused (as any request off
    the bound grid), naming the declared range and the policy; nothing else is bound."""
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA
    from fedroc.secagg import secure_sum

    fed = _federation(DECLARED)
    out = _try(secure_sum, fed, INPUT_NAME, mode=MODE_SA, branching=2, height=12, lo=-20.0,
               hi=20.0)  # fmt: skip
    assert isinstance(out, FedrocError), out
    assert "declared its score range [-10, 10] (score_range in its policy)" in str(out), out
    assert "--score-range=-10,10" in str(out)


# -- (b) the answers do not depend on the rows -----------------------------------------------


def _answers(fed: Federation) -> list[object]:
    """Every reply or refusal (its text) of the questions about where the scores lie."""
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA
    from fedroc.secagg import secure_sum

    def one(f, *args, **kwargs):
        out = _try(f, *args, **kwargs)
        return str(out) if isinstance(out, FedrocError) else out

    # A narrower range first: refused before any grid request bound the declared range.
    out: list[object] = [
        one(fed.call, "rocglm.scale", score_range=np.array([lo, hi]))
        for lo, hi in ((-5.0, 5.0), (0.0, 1.0), (-20.0, 20.0), (-10.0, 10.0), (-10.0, 5.0))
    ]
    out += [
        one(fed.call, "fedroc.is_probability"),
        one(fed.call, "fedroc.brier"),
        one(fed.call, "rocglm.sensitivity"),
    ]
    for lo, hi in ((0.0, 1.0), (-3.0, 3.0), (-20.0, 20.0)):
        out.append(one(secure_sum, fed, INPUT_NAME, mode=MODE_SA, branching=2, height=12,
                       lo=lo, hi=hi))  # fmt: skip
    return out


def test_two_declared_sites_with_different_rows_answer_alike():
    """Sites of one declaration [-10, 10], one federation's rows spread over (-9.9, 9.9),
    the second's within (-5, 5), the third's in [0, 1] (probabilities): every answer to
    is_probability, brier, the sensitivity heuristic, rocglm.scale over five ranges (two
    narrower than the declaration, one of them holding every row of the second and third
    federations) and secure trees over three other ranges is the same reply or the same
    refusal. Undeclared, the same rows answer rocglm.scale over [-5, 5] and is_probability
    differently (what the rows would show)."""
    wide, narrow = _federation(DECLARED, seed=1, spread=4.0), _federation(DECLARED, seed=2,
                                                                          spread=0.5)  # fmt: skip
    assert max(abs(s._data.score).max() for s in narrow.test_sites) < 5
    assert min(abs(s._data.score).max() for s in wide.test_sites) > 5
    unit = _federation(DECLARED, seed=3, spread=0)
    assert all(((s._data.score >= 0) & (s._data.score <= 1)).all() for s in unit.test_sites)
    a, b, c = _answers(wide), _answers(narrow), _answers(unit)
    assert a == b == c
    assert [isinstance(x, str) for x in a[:5]] == [True, True, False, False, True]
    assert all("score_range in its policy" in str(x) for x in (a[0], a[1], a[4])), a
    assert all(r["in_range"] for x in a[2:4] for r in x.values())
    assert a[5] == {f"s{i}": {"ok": False} for i in range(3)}
    assert all("not inside [0, 1]" in str(x) for x in a[6:8]), a[6:8]
    assert all(isinstance(x, str) for x in a[8:])
    undeclared = [
        _federation(None, seed=s, spread=w).call("rocglm.scale", score_range=np.array([-5, 5]))
        for s, w in ((1, 4.0), (2, 0.5))
    ]
    assert [all(r["in_range"] for r in u.values()) for u in undeclared] == [False, True]
    said = _federation(None, seed=3, spread=0).call("fedroc.is_probability")
    assert all(r["ok"] for r in said.values())


def test_a_declaration_inside_0_1_answers_probabilities_without_binding():
    """Declared [0, 1]: is_probability says yes and binds nothing (the declaration is
    public); brier and the sensitivity heuristic are answered; a secure tree over a wider
    range is refused (the grid is the declared [0, 1]), H15-2's tree included."""
    from fedroc.federation.basic import BIND_RANGE
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA
    from fedroc.secagg import secure_sum

    rng = np.random.default_rng(5)
    policy = DisclosurePolicy(score_range=(0.0, 1.0))
    sites = [
        Site(f"p{i}", SiteData.from_arrays(rng.random(200) < 0.4, rng.random(200)), policy=policy)
        for i in range(3)
    ]
    fed = Federation.from_sites(sites)
    assert all(r["ok"] for r in fed.call("fedroc.is_probability").values())
    assert all(BIND_RANGE not in s.ledger.bindings for s in sites)
    assert not isinstance(_try(fed.call, "fedroc.brier"), FedrocError)
    assert not isinstance(_try(fed.call, "rocglm.sensitivity"), FedrocError)
    tree = _try(secure_sum, fed, INPUT_NAME, mode=MODE_SA, branching=2, height=12, lo=-0.5,
                hi=1.5)  # fmt: skip
    assert isinstance(tree, FedrocError) and "declared its score range [0, 1]" in str(tree)


# -- (d) the operator's checks when the site is built ----------------------------------------


def test_a_site_refuses_to_start_with_a_score_outside_its_declared_range(tmp_path):
    """One line naming the site, the file and the declared range (no score, no row)."""
    from fedroc.federation.flower.site_config import SiteNodeConfig

    data = _logits(0)
    with pytest.raises(InputError) as info:
        Site("north", data, policy=DisclosurePolicy(score_range=(-5.0, 5.0)))
    assert "site 'north'" in str(info.value) and "[-5, 5]" in str(info.value)
    path = tmp_path / "north.csv"
    path.write_text(
        "label,score\n"
        + "".join(f"{int(y)},{float(s)!r}\n" for y, s in zip(data.label, data.score, strict=True))
    )
    config = SiteNodeConfig(
        site="north", data=path, policy=DisclosurePolicy(score_range=(-5.0, 5.0)),
        node_dir=tmp_path / "node",
    )  # fmt: skip
    with pytest.raises(InputError) as info:
        config.build()
    text = str(info.value)
    assert "site 'north'" in text and str(path) in text and "[-5, 5]" in text
    assert "\n" not in text and str(float(data.score.max())) not in text
    # A range that holds the scores starts it.
    Site("north", data, policy=DisclosurePolicy(score_range=DECLARED))


def test_a_site_refuses_a_declaration_other_than_the_range_its_ledger_bound():
    """The grid is bound for the ledger's lifetime: declared after a request bound [0, 1],
    another range would let two grids' sums subtract; the operator is told at start."""
    from fedroc.privacy.ledger import BudgetLedger

    ledger = BudgetLedger()
    site = Site("north", _logits(0), ledger=ledger)
    Federation.from_sites([site]).call("fedroc.is_probability")  # binds [0, 1]
    with pytest.raises(InputError, match=r"declares score_range \[-10, 10\].*new ledger"):
        Site("north", _logits(0), ledger=ledger, policy=DisclosurePolicy(score_range=DECLARED))


@pytest.mark.parametrize(
    "value", [(1.0, 0.0), (0.0, 0.0), (0.0, float("inf")), (float("nan"), 1.0), "0,1", (0, 1, 2),
              (True, 2.0), ("a", "b")],
)  # fmt: skip
def test_a_bad_score_range_is_refused_by_name(value):
    with pytest.raises(InputError, match="score_range must be two finite numbers"):
        DisclosurePolicy(score_range=value)


def test_a_policy_file_and_a_node_config_carry_the_declaration(tmp_path):
    from fedroc.federation.flower.site_config import SiteNodeConfig

    path = tmp_path / "policy.toml"
    path.write_text("[policy]\nscore_range = [-10, 10]\n")
    assert DisclosurePolicy.from_toml(path).score_range == DECLARED
    path.write_text("[policy]\nscore_range = [10, -10]\n")
    with pytest.raises(InputError, match="policy.toml.*score_range must be"):
        DisclosurePolicy.from_toml(path)
    node = {"site": "north", "data": "north.csv", "score-range": "-10,10"}
    assert SiteNodeConfig.from_node_config(node).policy.score_range == DECLARED
    with pytest.raises(InputError, match="score-range must be 'LO,HI'"):
        SiteNodeConfig.from_node_config({**node, "score-range": "-10"})


def _supernode(monkeypatch, capsys, tmp_path, *option):
    pytest.importorskip("flwr")
    from _cli import run_main

    import fedroc.federation.flower.node as node

    monkeypatch.setattr(node, "supervise", lambda args, **_: 0)
    monkeypatch.setattr("fedroc.cli.flower_cmd._check_port", lambda port: None)
    frame = tmp_path / "north.csv"
    rng = np.random.default_rng(3)
    frame.write_text(
        "label,score\n"
        + "".join(f"{int(rng.random() < 0.4)},{rng.normal(0, 3)}\n" for _ in range(40))
    )
    node_dir = str(tmp_path / "node")
    args = ["flower", "supernode", "--superlink", "127.0.0.1:9093", "--insecure", "--site",
            "north", "--data", str(frame), "--node-dir", node_dir, *option]  # fmt: skip
    return frame, run_main(capsys, args)


def test_supernode_takes_the_declaration_as_an_option_and_checks_the_rows_at_start(
    monkeypatch, capsys, tmp_path
):
    """``--score-range`` declares it (one policy option among the others: refused beside
    --policy-file); a range that misses a score stops the node at start, exit 2, one line
    naming the site, the data file and the range."""
    frame, (code, out, err) = _supernode(monkeypatch, capsys, tmp_path, "--score-range=-1,1")
    assert code == 2, out + err
    line = " ".join(err.split())  # the console wraps long lines
    assert "site 'north'" in line and frame.name in line and "[-1, 1]" in line, err
    assert "Traceback" not in err
    _, (code, out, err) = _supernode(monkeypatch, capsys, tmp_path, "--score-range=-100,100")
    assert code == 0, out + err
    node_config = (tmp_path / "node" / "node-config.toml").read_text()
    assert 'score-range = "-100,100"' in node_config
    policy = tmp_path / "policy.toml"
    policy.write_text("[policy]\nscore_range = [-100, 100]\n")
    _, (code, out, err) = _supernode(
        monkeypatch, capsys, tmp_path, "--policy-file", str(policy), "--score-range=-100,100"
    )
    assert code == 2 and "--score-range" in err and "--policy-file" in err, err


def test_every_grid_binding_of_a_declared_site_is_the_declared_range():
    """``bound_grid`` (what a computation that rounds to the grid binds) and ``bind_tree``
    (a first histogram, calibration or clustered request) bind the declared range, not the
    one they are given; ``range_holds_grid`` holds a narrower asked range against it, as a
    bound grid's, before any other request."""
    from fedroc.federation.basic import bind_tree, bound_grid, range_holds_grid
    from fedroc.federation.schema import ArgumentRefused

    policy = DisclosurePolicy(score_range=DECLARED)
    ctx = Site("a", _logits(0), policy=policy).context()
    assert bound_grid(ctx, 0.0, 1.0) == (-10.0, 10.0, None, 4096)
    ctx = Site("b", _logits(1), policy=policy).context()
    with pytest.raises(ArgumentRefused, match=r"declared its score range \[-10, 10\]"):
        bind_tree(ctx, "fedroc.histogram.tree", 0.0, 1.0, None, (2, 12))
    ctx = Site("c", _logits(2), policy=policy).context()
    with pytest.raises(ArgumentRefused, match=r"declared by its operator \(score_range"):
        range_holds_grid(ctx, "rocglm.scale", -5.0, 5.0)
    assert range_holds_grid(ctx, "rocglm.scale", -10.0, 10.0)


def test_a_sites_file_declares_it_in_its_policy_table(capsys, tmp_path):
    """``fedroc evaluate --sites FILE``: a ``[policy]`` score_range reaches every site; one
    that misses a score stops the run before any call, exit 2, naming site, file, range."""
    from _cli import run_main

    for k in range(3):
        data = _logits(k)
        rows = zip(data.label, data.score, strict=True)
        (tmp_path / f"s{k}.csv").write_text(
            "label,score\n" + "".join(f"{int(y)},{float(s)!r}\n" for y, s in rows)
        )
    sites = "".join(f'[sites.s{k}]\npath = "s{k}.csv"\n' for k in range(3))
    for declared, code_wanted in (("[-5, 5]", 2), ("[-10, 10]", 0)):
        fed = tmp_path / "fed.toml"
        fed.write_text(f"[policy]\nscore_range = {declared}\n{sites}")
        args = ["evaluate", "--sites", str(fed), "--method", "histogram", "--score-range=-10,10"]
        code, out, err = run_main(capsys, args)
        assert code == code_wanted, out + err
        if code == 2:
            line = " ".join(err.split())
            assert "site 's0'" in line and "s0.csv" in line and "[-5, 5]" in line, err


def test_the_brier_score_and_the_clear_curve_are_refused_in_one_way():
    """A site declared outside [0, 1] refused the Brier score with a DisclosureError ("its
    operator declared ... this function needs probabilities") and the clear calibration
    curve with an InputError of other words, for the same public declaration. Now one
    refusal, naming the function each time."""
    from fedroc.exceptions import DisclosureError

    fed = _federation((-10.0, 10.0))
    said = {}
    for function, args in (("fedroc.brier", {}), ("fedroc.calibration", {"n_bins": 10})):
        got = _try(fed.call, function, **args)
        assert isinstance(got, DisclosureError), (function, got)
        said[function] = str(got)
    words = [w.replace(f"'{f}'", "'F'") for f, w in said.items()]
    assert words[0] == words[1] and "declared its scores in [-10, 10]" in words[0], said
