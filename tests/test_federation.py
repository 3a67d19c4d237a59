"""The federation runtime: sites, policy, audit log, records, transports, first methods."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fedroc import metrics as fm
from fedroc.data import Columns, SiteData
from fedroc.exceptions import DisclosureError, InputError, SiteError
from fedroc.federation import AuditLog, Federation, Reply, Site, basic, site_function
from fedroc.federation.records import decode, encode
from fedroc.federation.schema import ArgumentRefused, Choice, Float, Text
from fedroc.privacy import DisclosurePolicy, laplace_noise
from fedroc.secagg import secure_sum


def frames(seed=0, sizes=(120, 80, 200)):
    rng = np.random.default_rng(seed)
    out = {}
    for k, n in enumerate(sizes):
        y = rng.integers(0, 2, n)
        p = np.clip(rng.beta(2, 3, n) + 0.25 * y, 0, 1)
        out[f"s{k}"] = pd.DataFrame({"y": y, "p": p})
    return out


def pooled(fr):
    df = pd.concat(fr.values())
    return df["y"].to_numpy(), df["p"].to_numpy()


@site_function("test.echo_rows", schema={})
def _echo_rows(ctx, args):  # declares a count per row: the policy must refuse it
    return Reply({"scores": ctx.data.score.copy()}, counts={"rows": np.ones(ctx.data.n)})


@site_function("test.noisy_mean", schema={"epsilon": Float(0.0, 100.0, open_lo=True)})
def _noisy_mean(ctx, args):
    noise, event = laplace_noise(
        1, epsilon=float(args["epsilon"]), sensitivity=1.0, rng=ctx.noise_rng("mean")
    )
    return Reply({"mean": float(ctx.data.score.mean() + noise[0])}, kind="noisy", dp=(event,))


@site_function("test.counter", schema={"session": Text()})
def _counter(ctx, args):
    state = ctx.state.setdefault(str(args["session"]), {"n": 0})
    state["n"] += 1
    return Reply({"calls": state["n"]}, kind="shares")


@site_function("test.boom", schema={"fail_at": Text()})
def _boom(ctx, args):
    if ctx.site == args["fail_at"]:
        raise RuntimeError("disk on fire")
    return Reply({"ok": True}, counts={"rows": ctx.data.n})


@site_function("test.bound_mode", schema={"mode": Choice("a", "b", default=None, bind=True)})
def _bound_mode(ctx, args):
    return Reply({"mode": args["mode"]}, counts={"rows": ctx.data.n})


@site_function("test.rng", schema={})
def _rng(ctx, args):
    rng = ctx.noise_rng("stream") or np.random.default_rng()
    return Reply({"draw": rng.random(4)}, kind="shares")


def test_records_round_trip_and_refuse_objects():
    rec = {
        "a": np.arange(6, dtype=np.int32).reshape(2, 3),
        "b": np.array([1.5, np.nan, -np.inf]),
        "c": np.array([True, False]),
        "d": 3,
        "e": float("nan"),
        "f": "text",
        "g": b"\x00\xff",
        "h": [1, 2.5, "x"],
        "i": None,
        "j": np.float32(2.5),
    }
    back = decode(encode(rec))
    np.testing.assert_array_equal(back["a"], rec["a"])
    assert back["a"].dtype == np.int32
    np.testing.assert_array_equal(back["b"], rec["b"])
    assert back["c"].dtype == bool and np.isnan(back["e"])
    assert back["g"] == b"\x00\xff" and back["h"] == [1, 2.5, "x"] and back["i"] is None
    assert back["j"] == 2.5 and back["f"] == "text" and back["d"] == 3
    with pytest.raises(InputError, match="value 'df' has type DataFrame"):
        encode({"df": pd.DataFrame()})
    with pytest.raises(InputError, match="only numeric arrays"):
        encode({"s": np.array(["a"])})


def test_distributed_moments_brier_match_pooled():
    fr = frames()
    fed = Federation.from_frames(fr, label="y", score="p")
    y, p = pooled(fr)
    mom = basic.distributed_variance(fed)
    assert mom.mean == pytest.approx(p.mean(), abs=1e-12)
    assert mom.variance == pytest.approx(p.var(ddof=1), abs=1e-12)
    assert mom.n == p.size
    pos = basic.distributed_variance(fed, subset="positive")
    assert pos.variance == pytest.approx(p[y == 1].var(ddof=1), abs=1e-12)
    brier, n = basic.distributed_brier(fed)
    assert brier == pytest.approx(fm.brier_score(y, p), abs=1e-12) and n == p.size
    assert basic.site_sizes(fed) == {k: len(v) for k, v in fr.items()}
    released = fed.released()
    assert released.rounds == 6  # two for each variance, one for Brier, one for sizes
    assert released.functions == ["fedroc.sum", "fedroc.centered_ss", "fedroc.brier", "fedroc.info"]
    assert set(released.bytes_received) == set(fr)


def test_moments_of_huge_scores_are_a_clear_error_not_inf():
    """Scores more than ~1e154 from their mean: fedroc.centered_ss squared them into inf
    (with a RuntimeWarning), and distributed_variance returned variance=inf, which the JSON
    of flower run --job moments showed as null. Sites whose sums overflow only together
    gave mean=inf, which the sites then refused as the argument 'mean'."""
    import warnings

    def fed_of(big):
        fr = {k: pd.DataFrame({"y": [0, 1] * 10, "p": np.r_[np.linspace(0, 1, 19), big]})
              for k in "abc"}  # fmt: skip
        return Federation.from_frames(fr, label="y", score="p")

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning on the way either
        with pytest.raises(SiteError, match=r"sum of squares of its 'score' column overflows.*res"):
            basic.distributed_variance(fed_of(1e200))
        with pytest.raises(InputError, match=r"'score' column's sum over the sites overflows"):
            basic.distributed_variance(fed_of(1.5e308))
        # One site's own sum overflows (over q rows: a site under q refuses in the policy's
        # words first, review 17's H17-1).
        big = {"y": [0, 1] * 5, "p": [1e308] * 10}
        fed = Federation.from_frames({k: pd.DataFrame(big) for k in "ab"}, label="y", score="p")
        with pytest.raises(SiteError, match=r"sum of its 'score' column overflows"):
            basic.distributed_variance(fed)
        # Large but representable: the variance is finite and right.
        mom = basic.distributed_variance(fed_of(1e150))
        pooled = np.tile(np.r_[np.linspace(0, 1, 19), 1e150], 3)
        assert mom.variance == pytest.approx(pooled.var(ddof=1), rel=1e-12)


def test_progress_names_each_call_and_each_site_as_it_is_reached():
    fr = frames()
    fed = Federation.from_frames(fr, label="y", score="p")
    seen = []
    fed.progress = seen.append
    basic.site_sizes(fed)
    fed.call("test.counter", sites=["s2", "s0"], session="x")
    functions = [c.function for c in fed.transcript]
    everyone, two = ("s0", "s1", "s2"), ("s2", "s0")
    assert [(s.round, s.function, s.sites, s.site, s.done) for s in seen] == [
        (1, functions[0], everyone, None, False),
        (1, functions[0], everyone, "s0", False),
        (1, functions[0], everyone, "s1", False),
        (1, functions[0], everyone, "s2", False),
        (1, functions[0], everyone, None, True),
        (2, "test.counter", two, None, False),
        (2, "test.counter", two, "s2", False),
        (2, "test.counter", two, "s0", False),
        (2, "test.counter", two, None, True),
    ]
    assert fed.transport.on_site is None  # not left behind for a federation without progress
    with pytest.raises(SiteError):
        fed.call("test.boom", fail_at="s1")
    assert seen[-1].function == "test.boom" and not seen[-1].done  # a failed call is not done
    assert fed.transport.on_site is None
    fed.progress = None
    fed.call("test.counter", session="x")
    assert seen[-1].function == "test.boom"


@pytest.mark.parametrize("method", ["rocglm", "clustered", "histogram", "mpc"])
def test_progress_rounds_are_the_rounds_the_result_reports(method):
    """ROC-GLM's progress line reached round 17 where its result's released.rounds is 10:
    the Brier score and calibration that evaluate runs after the method (7 calls, its
    calibration_released.rounds) were numbered on. They are a phase of their own now."""
    import fedroc
    from fedroc.cli._common import ProgressLine
    from fedroc.datasets import make_multisite

    fr = make_multisite([300, 370, 440], seed=1)
    rng = np.random.default_rng(0)
    for frame in fr.values():
        frame["patient"] = rng.integers(0, 60, len(frame))
    fed = Federation.from_frames(fr, cluster="patient")
    seen = []
    fed.progress = seen.append
    result = fedroc.evaluate(fed, method)
    last: dict[str | None, int] = {}
    for step in seen:
        assert step.round == last.get(step.phase, 0) + (step.site is None and not step.done)
        last[step.phase] = step.round
    after = result.extra.get("calibration_released")
    assert last.pop(None) == result.released.rounds
    assert last == ({} if after is None else {"Brier and calibration": after["rounds"]})
    assert len(fed.transcript) == result.released.rounds + (0 if after is None else after["rounds"])
    if after is not None:
        line = ProgressLine(method, "starting")
        line.update(seen[-1])
        assert line.text == (
            f"{method}: Brier and calibration, round {after['rounds']}, "
            f"{seen[-1].function} answered by 3 site(s); analyst computing"
        )


def test_calibration_uses_only_releasing_sites():
    fr = frames(seed=3, sizes=(300, 40, 250))
    # Site s1 is small: most of its bins hold fewer than q = 8 rows and are withheld.
    fed = Federation.from_frames(fr, label="y", score="p", policy=DisclosurePolicy(min_count=8))
    res = basic.distributed_calibration(fed, n_bins=10)
    # Brute force: per bin, pool the rows of the sites whose bin count reached q.
    count = np.zeros(10)
    sp = np.zeros(10)
    so = np.zeros(10)
    withheld = {}
    for name, df in fr.items():
        idx = fm.bin_index(df["p"].to_numpy(), 10)
        c = np.bincount(idx, minlength=10)
        ok = c >= 8
        if 0 < c[~ok].sum() < 8:  # the withheld bins hold q rows or none together
            ok[np.flatnonzero(ok)[np.argmin(c[ok])]] = False
        withheld[name] = np.flatnonzero(~ok).tolist()
        count += np.where(ok, c, 0)
        sp += np.where(ok, np.bincount(idx, df["p"].to_numpy(), 10), 0)
        so += np.where(ok, np.bincount(idx, df["y"].to_numpy().astype(float), 10), 0)
    assert res.suppressed_by_site == withheld
    assert withheld["s1"], "the test needs a site that withholds bins"
    np.testing.assert_array_equal(res.curve.count, count)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(res.curve.mean_predicted, sp / count, equal_nan=True)
        np.testing.assert_allclose(res.curve.observed_fraction, so / count, equal_nan=True)
    assert res.curve.suppressed.tolist() == [
        bool(any(b in w for w in withheld.values())) for b in range(10)
    ]
    # Without suppression the distributed curve is the pooled one.
    full = basic.distributed_calibration(
        Federation.from_frames(fr, label="y", score="p", policy=DisclosurePolicy(min_count=1))
    ).curve
    y, p = pooled(fr)
    ref = fm.calibration_curve(y, p)
    np.testing.assert_allclose(full.observed_fraction, ref.observed_fraction, equal_nan=True)
    np.testing.assert_allclose(full.mean_predicted, ref.mean_predicted, equal_nan=True)


def test_policy_refusal_names_site_function_and_count(tmp_path):
    fr = frames()
    fed = Federation.from_frames(fr, label="y", score="p", audit_dir=tmp_path)
    with pytest.raises(DisclosureError) as info:
        fed.call("test.echo_rows")
    msg = str(info.value)
    assert "site 's0'" in msg and "'test.echo_rows'" in msg and "rows count is below" in msg
    assert "count is 1" not in msg  # the value is a number of the site's rows
    for name in fr:
        entries = AuditLog(tmp_path / f"{name}.jsonl").entries()
        assert entries[-1]["outcome"] == "refused" and "released" not in entries[-1]


def test_small_site_refuses_class_counts():
    fr = frames()
    fr["tiny"] = pd.DataFrame({"y": [1, 1, 0, 0, 0, 0, 0, 0], "p": np.linspace(0, 1, 8)})
    fed = Federation.from_frames(fr, label="y", score="p")
    with pytest.raises(DisclosureError, match="site 'tiny'.*positive count is below") as info:
        fed.call("fedroc.class_counts")
    # The site is named once, followed by its reason (it read "site 'tiny': site 'tiny'
    # refuses ..." before), and the reason carries no count of the site's rows.
    msg = str(info.value)
    assert "is 2" not in msg, msg
    assert msg.count("'tiny'") == 1, msg
    assert "site 'tiny' refuses 'fedroc.class_counts': the positive count is below" in msg


def test_sites_refusing_alike_are_named_together_with_one_reason():
    # Every site refuses a two-site federation alike (secagg_min_sites); the message gave
    # the same sentence once per site. Now once, naming the others; a different reason
    # stands apart.
    fr = {k: v for k, v in list(frames().items())[:2]}
    fed = Federation.from_frames(fr, label="y", score="p")
    names = fed.site_names
    with pytest.raises(DisclosureError) as info:
        secure_sum(fed, "fedroc.class_counts")
    msg = str(info.value)
    assert msg.count("secagg_min_sites") == 1, msg
    assert f"site {names[0]!r} refuses" in msg and f"(and alike at {names[1]!r})" in msg
    # It says what a two-site federation can run instead (the walkthrough found no hint).
    assert msg.count("--method mpc") == 1, msg


def test_sites_whose_reason_already_names_them_with_a_colon_are_named_once_and_grouped():
    # The histogram's range check says "site 'a': scores lie outside ..."; the failure
    # message read "site 'a': site 'a': scores ..." once per site, three sentences alike.
    from fedroc.exceptions import InputError
    from fedroc.federation.transport import raise_site_failures

    failures = {
        name: InputError(f"site {name!r}: scores lie outside the public score range [0, 1]")
        for name in ("a", "b", "c")
    }
    with pytest.raises(SiteError) as info:
        raise_site_failures("fedroc.secagg.advertise_keys", failures)
    msg = str(info.value)
    assert "site 'a': site 'a'" not in msg, msg
    assert msg.count("scores lie outside") == 1, msg
    assert "(and alike at 'b', 'c')" in msg, msg


def test_failure_at_one_site_names_it_and_returns_nothing():
    fed = Federation.from_frames(frames(), label="y", score="p")
    with pytest.raises(SiteError, match="failed at 1 site.*site 's1': disk on fire"):
        fed.call("test.boom", fail_at="s1")
    assert fed.transcript == []  # no partial call recorded as done
    # It says how a method's functions are registered (the review of 384d1a1 called
    # rocglm.noisy_scores before importing fedroc.methods.rocglm and got only the name).
    with pytest.raises(InputError, match="unknown site function 'nope': .* fedroc.apps.app"):
        Site("x", SiteData.from_arrays([0, 1], [0.1, 0.2])).handle("nope", {})
    with pytest.raises(SiteError, match="unknown site function"):
        fed.call("nope")


def test_audit_log_records_every_release(tmp_path):
    fr = frames()
    fed = Federation.from_frames(fr, label="y", score="p", audit_dir=tmp_path)
    basic.distributed_variance(fed)
    fed.call("test.noisy_mean", epsilon=0.5)
    log = AuditLog(tmp_path / "s2.jsonl")
    entries = log.entries()
    assert [e["function"] for e in entries] == [
        "fedroc.sum",
        "fedroc.centered_ss",
        "test.noisy_mean",
    ]
    p = fr["s2"]["p"].to_numpy()
    assert entries[0]["released"]["sum"] == pytest.approx(p.sum())
    assert entries[1]["args"]["mean"] == pytest.approx(pooled(fr)[1].mean())
    assert entries[2]["kind"] == "noisy" and entries[2]["dp"][0]["epsilon"] == 0.5
    assert [e["seq"] for e in entries] == [0, 1, 2]
    # Lines are plain JSON, appended: a reopened log continues the sequence.
    raw = (tmp_path / "s2.jsonl").read_text().splitlines()
    assert all(json.loads(line)["site"] == "s2" for line in raw)
    again = AuditLog(tmp_path / "s2.jsonl")
    again.append({"site": "s2", "function": "manual", "outcome": "note"})
    assert again.entries()[-1]["seq"] == 3


def test_large_arrays_go_to_blobs(tmp_path):
    log = AuditLog(tmp_path / "a.jsonl")
    big = np.arange(10000.0)
    log.append({"function": "f"}, released={"v": big, "small": np.arange(3)})
    entry = log.entries()[0]
    blob = np.load(tmp_path / entry["released"]["v"]["file"])
    np.testing.assert_array_equal(blob, big)
    assert entry["released"]["small"] == [0, 1, 2]


def test_dp_releases_are_in_the_transcript_and_the_ledger():
    sites = [
        Site(
            k, SiteData.from_frame(v, Columns("y", "p")), policy=DisclosurePolicy(epsilon_limit=1.0)
        )
        for k, v in frames().items()
    ]
    fed = Federation.from_sites(sites)
    fed.call("test.noisy_mean", epsilon=0.6)
    rel = fed.released()
    assert rel.epsilon == {"s0": 0.6, "s1": 0.6, "s2": 0.6}
    assert rel.kinds == {"noisy": 3}
    with pytest.raises(DisclosureError, match="its privacy budget is epsilon 1, it has spent 0.6"):
        fed.call("test.noisy_mean", epsilon=0.6)


def test_site_rng_is_per_site_reproducible_by_site_config_only():
    seeded = Federation.from_frames(frames(), label="y", score="p", noise_seed=5)
    again = Federation.from_frames(frames(), label="y", score="p", noise_seed=5)
    a, b = seeded.call("test.rng"), again.call("test.rng")
    c = Federation.from_frames(frames(), label="y", score="p").call("test.rng")
    for name in seeded.site_names:
        np.testing.assert_array_equal(a[name]["draw"], b[name]["draw"])
        assert not np.array_equal(a[name]["draw"], c[name]["draw"])
    assert not np.array_equal(a["s0"]["draw"], a["s1"]["draw"])
    # The analyst cannot pass a seed: the site refuses the argument.
    with pytest.raises(DisclosureError, match="argument 'seed' is not an argument"):
        seeded.call("test.rng", seed=5)


def test_site_state_persists_between_calls_and_per_site_args():
    fed = Federation.from_frames(frames(), label="y", score="p")
    fed.call("test.counter", session="x")
    out = fed.call_each("test.counter", {"s0": {"session": "x"}, "s2": {"session": "y"}})
    assert out == {"s0": {"calls": 2}, "s2": {"calls": 1}}
    with pytest.raises(InputError, match=r"unknown site\(s\) \['zz'\]"):
        fed.call_each("test.counter", {"zz": {}})


def test_allowed_functions_policy():
    site = Site(
        "a",
        SiteData.from_arrays([0, 1] * 5, np.linspace(0, 1, 10)),
        policy=DisclosurePolicy(allowed_functions=frozenset({"fedroc.info"})),
    )
    assert site.handle("fedroc.info", {})["n"] == 10
    with pytest.raises(DisclosureError, match="not among the functions its policy allows"):
        site.handle("fedroc.sum", {})


def test_an_allow_list_without_a_pre_check_says_why_the_run_asks_it():
    """Before: a DP run at a site whose ``allowed_functions`` lacked ``fedroc.epsilon_left``
    (or ``fedroc.secagg.check``) was refused with "not among the functions its policy
    allows" alone: nothing said why a run wanted it or what to do. The pre-checks are named
    in the privacy layer, which cannot import them: their spelling is checked here."""
    from fedroc.federation.basic import FN_EPSILON_LEFT
    from fedroc.methods import evaluate
    from fedroc.privacy.policy import _PRE_CHECKS
    from fedroc.secagg.protocol import FN_CHECK

    assert set(_PRE_CHECKS) == {FN_EPSILON_LEFT, FN_CHECK}
    rng = np.random.default_rng(3)
    allowed = frozenset({"fedroc.info", "fedroc.class_counts"})
    sites = [
        Site(
            name,
            SiteData.from_arrays(rng.random(300) < 0.4, rng.random(300)),
            policy=DisclosurePolicy(allowed_functions=allowed if name == "b" else None),
        )
        for name in ("a", "b", "c")
    ]
    fed = Federation.from_sites(sites)
    start = fed.mark()
    with pytest.raises(DisclosureError) as refused:
        evaluate(fed, "histogram", dp_epsilon=1.0, dp_mode="local", calibration_bins=None)
    message = str(refused.value)
    assert f"site 'b' refuses '{FN_EPSILON_LEFT}'" in message, message
    assert "add it to the site's allowed_functions" in message, message
    assert fed.released(start).kinds.get("noisy", 0) == 0
    # Another function is refused as before, with no such hint.
    with pytest.raises(DisclosureError) as other:
        sites[1].handle("fedroc.sum", {})
    assert "allowed_functions)" not in str(other.value)


def test_an_argument_first_bound_to_none_stays_none(tmp_path):
    # main 6176649 read a binding with ``bindings.get(key)``: one first bound to None (the
    # argument's default) looked unbound, so a later "a" was answered as a second choice.
    data = SiteData.from_arrays([0, 1] * 10, np.linspace(0, 1, 20))
    site = Site("s0", data, audit=tmp_path / "s0.jsonl")
    assert site.handle("test.bound_mode", {})["mode"] is None
    with pytest.raises(ArgumentRefused, match=r"argument 'mode' was None .*\(got 'a'\)"):
        site.handle("test.bound_mode", {"mode": "a"})
    assert site.handle("test.bound_mode", {"mode": None})["mode"] is None
    # A restarted site reads the None binding back from its ledger.
    reborn = Site("s0", data, audit=tmp_path / "s0.jsonl")
    with pytest.raises(ArgumentRefused, match="argument 'mode' was None"):
        reborn.handle("test.bound_mode", {"mode": "b"})


def test_from_files_and_toml(tmp_path):
    fr = frames()
    fr["s0"].to_csv(tmp_path / "a.csv", index=False)
    fr["s1"].to_parquet(tmp_path / "b.parquet")
    fr["s2"].to_csv(tmp_path / "c.tsv", sep="\t", index=False)
    toml = tmp_path / "fed.toml"
    toml.write_text(
        '[columns]\nlabel = "y"\nscore = "p"\n[policy]\nmin_count = 3\n'
        '[sites.a]\npath = "a.csv"\naudit = "logs/a.jsonl"\n'
        '[sites.b]\npath = "b.parquet"\n[sites.b.policy]\nmin_count = 10\n'
        '[sites.c]\npath = "c.tsv"\n'
    )
    fed = Federation.from_toml(toml)
    assert fed.site_names == ["a", "b", "c"]
    _, p = pooled(fr)
    assert basic.distributed_mean(fed)[0] == pytest.approx(p.mean(), abs=1e-12)
    assert (tmp_path / "logs" / "a.jsonl").exists()
    fed2 = Federation.from_files(
        {"a": tmp_path / "a.csv", "b": tmp_path / "b.parquet"}, label="y", score="p"
    )
    assert basic.distributed_mean(fed2)[1] == len(fr["s0"]) + len(fr["s1"])
    with pytest.raises(InputError, match="label column 'label' not found in site 'a'"):
        Federation.from_files({"a": tmp_path / "a.csv"})
    with pytest.raises(InputError, match="does not exist"):
        Federation.from_files({"a": tmp_path / "nope.csv"})
    with pytest.raises(InputError, match="no \\[sites.NAME\\] tables"):
        (tmp_path / "empty.toml").write_text("x = 1\n")
        Federation.from_toml(tmp_path / "empty.toml")


def test_site_data_validation_names_the_source():
    df = pd.DataFrame({"label": [0, 1, 2], "score": [0.1, 0.2, 0.3]})
    with pytest.raises(InputError, match="label column 'label' of site 'x'.*must be binary"):
        Site.from_frame("x", df)
    df = pd.DataFrame({"label": [0, 1, None], "score": [0.1, 0.2, 0.3]})
    with pytest.raises(InputError, match="label column 'label' in site 'x' has 1 missing"):
        Site.from_frame("x", df)
    data = SiteData.from_arrays([0, 1], [0.2, 0.4])
    with pytest.raises(ValueError, match="read-only"):
        data.score[0] = 1.0


def test_brier_refuses_non_probabilities():
    fed = Federation.from_frames(
        {"a": pd.DataFrame({"label": [0, 1] * 5, "score": np.linspace(-1, 3, 10)})}
    )
    with pytest.raises(SiteError, match=r"scores of site 'a' lie outside \[0, 1\]") as info:
        basic.distributed_brier(fed)
    # The refusal reaches the analyst: it must not carry any row's score, position or count.
    assert "index" not in str(info.value) and "-1.0" not in str(info.value)
    assert "8" not in str(info.value)


def test_toml_policy_error_names_the_site_and_file(tmp_path):
    (tmp_path / "a.csv").write_text("label,score\n1,0.9\n0,0.1\n")
    toml = tmp_path / "fed.toml"
    toml.write_text('[sites.a]\npath = "a.csv"\n[sites.a.policy]\nmin_cont = 3\n')
    with pytest.raises(InputError, match=r"^site 'a' in '.*fed\.toml': unknown policy setting"):
        Federation.from_toml(toml)


def test_toml_mpc_paths_are_relative_to_the_file_like_its_other_paths(tmp_path, monkeypatch):
    """Before: ``path``, ``audit``, ``secagg_key`` and ``roster`` were read relative to the
    federation file, but ``mpc_proxies`` and ``mpc_owner_key`` in its policy relative to the
    process's working directory: run from elsewhere, ``mpc_proxies = "cluster/cluster.toml"``
    pinned whatever cluster file that directory held (or none), and the owner key was another
    file. Both now resolve against the file's folder; "any" and "none" stay words."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "a.csv").write_text("label,score\n" + "1,0.9\n0,0.1\n" * 5)
    (conf / "b.csv").write_text("label,score\n" + "1,0.9\n0,0.1\n" * 5)
    toml = conf / "fed.toml"
    toml.write_text(
        '[policy]\nmpc_proxies = "cluster/cluster.toml"\n'
        '[sites.a]\npath = "a.csv"\n[sites.a.policy]\nmpc_owner_key = "keys/a.key"\n'
        '[sites.b]\npath = "b.csv"\n[sites.b.policy]\nmpc_proxies = "none"\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    policies = {n: s.policy for n, s in Federation.from_toml(toml).transport._sites.items()}
    assert policies["a"].mpc_proxies == str(conf / "cluster" / "cluster.toml")
    assert policies["a"].mpc_owner_key == str(conf / "keys" / "a.key")
    assert policies["b"].mpc_proxies == "none" and policies["b"].mpc_owner_key is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('policy = "strict"\n[sites.a]\npath = "a.csv"\n', "policy must be a table"),
        ('columns = "y"\n[sites.a]\npath = "a.csv"\n', "columns must be a table"),
        ('[sites.a]\npath = "a.csv"\npolicy = "strict.toml"\n', "policy must be a table"),
        ('[sites]\na = "a.csv"\n', r"site 'a' .*must be a table"),
        ('[sites.a]\npath = "a.csv"\naudit = ""\n', "audit must be a path"),
        ('[sites.a]\npath = "a.csv"\naudit = ["a.jsonl"]\n', "audit must be a path"),
        ('[sites.a]\npath = ""\n', "path must be a path"),
        ('[sites.a]\npath = "a.csv"\nnoise_seed = 7.5\n', "noise_seed must be"),
        ('[sites.a]\npath = "a.csv"\nnoise_seed = "7"\n', "noise_seed must be"),
    ],
)
def test_toml_settings_of_the_wrong_shape_are_refused_naming_the_file(tmp_path, text, message):
    """Before: a ``policy`` or ``columns`` that is not a table ended in TypeError ('str' object
    is not a mapping), ``audit = ""`` in IsADirectoryError on the file's folder, a list in
    TypeError; ``noise_seed = 7.5`` seeded the noise with 7 and ``noise_seed = "7"`` with 7
    (the seed is for simulations; a value the operator did not write is not taken)."""
    (tmp_path / "a.csv").write_text("label,score\n" + "1,0.9\n0,0.1\n" * 5)
    toml = tmp_path / "fed.toml"
    toml.write_text(text)
    with pytest.raises(InputError, match=message) as info:
        Federation.from_toml(toml)
    assert repr(str(toml)) in str(info.value)
