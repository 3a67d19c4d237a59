"""DP mechanisms have the stated distribution; the policy refuses what it forbids."""

from __future__ import annotations

import json
import math
import multiprocessing

import numpy as np
import pytest
from scipy import stats

from fedroc.cli import main
from fedroc.data import SiteData
from fedroc.exceptions import DisclosureError, InputError
from fedroc.federation import Reply, Site, site_function
from fedroc.federation.schema import Float
from fedroc.privacy import (
    BudgetLedger,
    DisclosurePolicy,
    DPEvent,
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    continuous_laplace_shares,
    discrete_laplace_mechanism,
    discrete_laplace_shares,
    discrete_laplace_variance,
    gaussian_mechanism,
    gaussian_noise,
    laplace_mechanism,
    laplace_noise,
    ledger_path_for,
)
from fedroc.privacy.ledger import read_ledger_status


def test_classic_gaussian_sigma_formula():
    assert classic_gaussian_sigma(epsilon=0.2, delta=0.1, sensitivity=0.01) == pytest.approx(
        math.sqrt(2 * math.log(12.5)) * 0.01 / 0.2, rel=1e-15
    )


@pytest.mark.parametrize("epsilon", [0.05, 0.2, 1.0, 5.0, 30.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-5, 0.01, 0.1])
def test_analytic_gaussian_is_tight_and_beats_classic(epsilon, delta):
    sigma = analytic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=0.3)
    # Theorem 8 of Balle & Wang: the delta of sigma is exactly the target ...
    assert analytic_gaussian_delta(sigma, epsilon=epsilon, sensitivity=0.3) <= delta
    assert analytic_gaussian_delta(sigma * (1 - 1e-6), epsilon=epsilon, sensitivity=0.3) > delta
    # ... and never needs more noise than the classic calibration (where that is valid).
    if epsilon < 1:
        assert sigma < classic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=0.3)


def test_analytic_delta_by_privacy_loss_integration():
    # Independent check of the closed form: delta = P[L > eps] - e^eps P[L' < -eps] for the
    # privacy loss L of N(0, s^2) vs N(D, s^2), which is normal with mean D^2/(2 s^2) and
    # variance D^2 / s^2; integrate the hockey-stick divergence numerically.
    d, s, eps = 1.0, 1.3, 0.7
    xs = np.linspace(-15, 15, 600001)
    p = stats.norm.pdf(xs, 0, s)
    q = stats.norm.pdf(xs, d, s)
    hockey = np.trapezoid(np.maximum(p - math.exp(eps) * q, 0), xs)
    assert analytic_gaussian_delta(s, epsilon=eps, sensitivity=d) == pytest.approx(hockey, rel=1e-6)


def test_gaussian_and_laplace_noise_have_the_stated_law():
    noise, event = gaussian_noise(
        20000, epsilon=0.5, delta=1e-5, sensitivity=2.0, calibration="analytic", rng=1
    )
    assert event.mechanism == "analytic-gaussian" and event.size == 20000
    assert stats.kstest(noise, "norm", args=(0, event.noise_scale)).pvalue > 0.01
    lap, ev = laplace_noise(20000, epsilon=0.5, sensitivity=2.0, rng=2)
    assert ev.noise_scale == 4.0
    assert stats.kstest(lap, "laplace", args=(0, 4.0)).pvalue > 0.01
    # A wrong scale is detected: the test can fail.
    assert stats.kstest(lap, "laplace", args=(0, 3.0)).pvalue < 1e-6
    with pytest.raises(InputError, match="calibration"):
        gaussian_noise(3, epsilon=1, delta=0.1, sensitivity=1, calibration="optimal")


@pytest.mark.parametrize("seeded", [False, True])
def test_discrete_laplace_mechanism_follows_the_two_sided_geometric_law(seeded):
    # Unseeded: OpenDP's integer Laplace (the service's noisy prevalence); seeded: numpy.
    eps, size = 0.7, 3000
    rng = np.random.default_rng(4) if seeded else None
    draws = [discrete_laplace_mechanism(50, epsilon=eps, rng=rng) for _ in range(size)]
    noise = np.array([d[0] for d in draws]) - 50
    assert all(isinstance(d[0], int) for d in draws)
    alpha = math.exp(-eps)
    ks = np.arange(-6, 7)
    pmf = (1 - alpha) / (1 + alpha) * alpha ** np.abs(ks)
    observed = np.array([(noise == k).sum() for k in ks] + [(np.abs(noise) > 6).sum()])
    expected = np.r_[pmf, 1 - pmf.sum()] * size
    assert stats.chisquare(observed, expected).pvalue > 1e-4
    event = draws[0][1]
    assert (event.epsilon, event.delta, event.sensitivity) == (eps, 0.0, 1)
    assert event.sampler == ("site-seed" if seeded else "opendp")
    assert event.noise_scale == pytest.approx(math.sqrt(discrete_laplace_variance(epsilon=eps)))
    with pytest.raises(InputError, match="whole number"):
        discrete_laplace_mechanism(1.5, epsilon=1.0)  # type: ignore[arg-type]


def test_discrete_laplace_shares_sum_to_two_sided_geometric():
    n_sites, eps, size = 7, 0.8, 40000
    total = sum(
        discrete_laplace_shares(size, n_shares=n_sites, epsilon=eps, rng=np.random.default_rng(k))[
            0
        ]
        for k in range(n_sites)
    )
    alpha = math.exp(-eps)
    ks = np.arange(-8, 9)
    pmf = (1 - alpha) / (1 + alpha) * alpha ** np.abs(ks)
    observed = np.array([(total == k).sum() for k in ks] + [(np.abs(total) > 8).sum()])
    expected = np.r_[pmf, 1 - pmf.sum()] * size
    assert stats.chisquare(observed, expected).pvalue > 0.01
    assert np.var(total) == pytest.approx(discrete_laplace_variance(epsilon=eps), rel=0.05)
    # One share alone is far from the full noise: its variance is about 1/n of it.
    share, _ = discrete_laplace_shares(size, n_shares=n_sites, epsilon=eps, rng=99)
    assert np.var(share) < np.var(total) / 3


def test_independent_generators_give_independent_shares():
    a, _ = discrete_laplace_shares(2000, n_shares=5, epsilon=1.0, rng=np.random.default_rng(1))
    b, _ = discrete_laplace_shares(2000, n_shares=5, epsilon=1.0, rng=np.random.default_rng(2))
    assert not np.array_equal(a, b)


def test_continuous_laplace_shares_sum_to_laplace():
    total = sum(
        continuous_laplace_shares(20000, n_shares=4, epsilon=0.5, rng=k)[0] for k in range(4)
    )
    assert stats.kstest(total, "laplace", args=(0, 2.0)).pvalue > 0.01


def test_a_full_continuous_draw_in_production_is_opendps_laplace_on_its_grid():
    """One share of one (a local release, in the clear) without a site seed: OpenDP's
    Laplace of scale sensitivity / epsilon, every value a multiple of 2^GRID_EXPONENT; the
    seeded simulation and the shares of several parties keep their samplers."""
    from fedroc.privacy import GRID_EXPONENT

    full, event = continuous_laplace_shares(20000, n_shares=1, epsilon=0.5)
    assert event.sampler == "opendp" and event.noise_scale == 2.0
    assert np.all(np.mod(full * 2.0**-GRID_EXPONENT, 1.0) == 0.0)
    # Unseeded (production draws): a bound that fails 1 run in 10,000, not 1 in 100; a
    # wrong scale (1 or 4) gives p < 1e-30 at this size.
    assert stats.kstest(full, "laplace", args=(0, 2.0)).pvalue > 1e-4
    assert continuous_laplace_shares(3, n_shares=1, epsilon=0.5, rng=1)[1].sampler == "site-seed"
    assert continuous_laplace_shares(3, n_shares=2, epsilon=0.5)[1].sampler == "os-entropy"


def test_a_full_discrete_draw_in_production_is_opendps_discrete_laplace():
    """One discrete share of one without a site seed (a local tree or local class counts,
    released in the clear) is OpenDP's, as the docs say of every clear release: it was
    numpy's negative binomial from the operating system's entropy. Its law is the two-sided
    geometric ``P(k) ~ exp(-epsilon |k|)``; the seeded simulation keeps numpy."""
    eps = 0.5
    full, event = discrete_laplace_shares(40000, n_shares=1, epsilon=eps)
    assert event.sampler == "opendp" and full.dtype == np.int64
    a = math.exp(-eps)
    ks = np.arange(-12, 13)
    expected = (1 - a) / (1 + a) * a ** np.abs(ks) * full.size
    observed = np.array([(full == k).sum() for k in ks])
    # Unseeded (production draws): a bound that fails 1 run in 10,000; epsilon 0.4 or 0.6
    # gives p < 1e-12 at this size.
    assert stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue > 1e-4
    assert discrete_laplace_shares(3, n_shares=1, epsilon=eps, rng=1)[1].sampler == "site-seed"
    assert discrete_laplace_shares(3, n_shares=2, epsilon=eps)[1].sampler == "os-entropy"


@pytest.mark.parametrize("n_shares", [1, 3])
def test_discrete_noise_too_wide_for_64_bits_is_refused_naming_epsilon(n_shares):
    """At epsilon 1e-20, 1 - exp(-epsilon) rounded to 0 and numpy raised "p <= 0, p > 1 or
    p contains NaNs", which names no parameter (found by the review of main 384d1a1)."""
    with pytest.raises(InputError, match=r"epsilon 1e-20 over sensitivity 1 is below 1e-12"):
        discrete_laplace_shares(4, n_shares=n_shares, epsilon=1e-20)
    share, _ = discrete_laplace_shares(4, n_shares=n_shares, epsilon=1e-11, rng=3)
    assert share.dtype == np.int64


def test_policy_refuses_small_counts_noise_shares_and_budget():
    policy = DisclosurePolicy(min_count=5)
    ledger = BudgetLedger()
    with pytest.raises(
        DisclosureError,
        match=r"site 'north' refuses 'f': the bin count is below the minimum of 5 rows",
    ):
        policy.check_release(
            site="north",
            function="f",
            kind="aggregate",
            counts={"bin": [7, 3, 9]},
            dp=[],
            ledger=ledger,
            n_rows=100,
        )
    policy.check_release(
        site="north",
        function="f",
        kind="aggregate",
        counts={"bin": [5, 6]},
        dp=[],
        ledger=ledger,
        n_rows=100,
    )
    event = DPEvent("laplace", 1.0, 0.0, 1.0, 1.0)
    with pytest.raises(DisclosureError, match="must state its differential-privacy mechanism"):
        policy.check_release(
            site="s", function="f", kind="noisy", counts={}, dp=[], ledger=ledger, n_rows=100
        )
    strict = DisclosurePolicy(allow_noisy=False, allow_shares=False, epsilon_limit=1.5)
    with pytest.raises(DisclosureError, match="forbids releasing noisy"):
        strict.check_release(
            site="s", function="f", kind="noisy", counts={}, dp=[event], ledger=ledger, n_rows=100
        )
    with pytest.raises(DisclosureError, match="forbids releasing shares"):
        strict.check_release(
            site="s", function="f", kind="shares", counts={}, dp=[], ledger=ledger, n_rows=100
        )
    ledger.record([event])
    budget = DisclosurePolicy(epsilon_limit=1.5)
    with pytest.raises(
        DisclosureError,
        match=r"privacy budget is epsilon 1.5, it has spent 1 and this release needs 1 more",
    ):
        budget.check_release(
            site="s", function="f", kind="noisy", counts={}, dp=[event], ledger=ledger, n_rows=100
        )
    with pytest.raises(InputError, match="min_count"):
        DisclosurePolicy(min_count=0)
    with pytest.raises(InputError, match="unknown policy setting"):
        DisclosurePolicy.from_mapping({"min_cuont": 3})


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"min_count": "ten"}, "min_count must be an integer; got 'ten'"),
        ({"secagg_min_sites": "3x"}, "secagg_min_sites must be an integer"),
        ({"epsilon_limit": "5"}, "epsilon_limit must be a number; got '5'"),
        ({"delta_limit": "1e-6"}, "delta_limit must be a number"),
        ({"min_count": True}, "min_count must be an integer; got True"),
        ({"allow_noisy": "false"}, "allow_noisy must be true or false; got 'false'"),
        ({"clear_histograms": "no"}, "clear_histograms must be true or false"),
        ({"opt_in": "rocglm.positives_rule"}, r"opt_in must be a list of names"),
        ({"allowed_functions": "fedroc.info"}, r"allowed_functions must be a list of names"),
    ],
)
def test_policy_refuses_a_setting_of_the_wrong_type(setting, message):
    """A site's TOML policy with a string where a number or a boolean belongs: before, a
    ValueError/TypeError escaped (`fedroc evaluate --sites` exited 1 with a traceback on
    min_count = "ten"), or the value was taken as given: allow_noisy = "false" allowed noisy
    releases (a non-empty string is true) and opt_in = "x.y" became the set of its letters."""
    with pytest.raises(InputError, match=message):
        DisclosurePolicy.from_mapping(setting)


def test_a_policy_file_with_settings_beside_its_policy_table_is_refused(tmp_path):
    """Before: a policy file with ``min_count = 20`` and ``allow_noisy = false`` at the top and
    a ``[policy]`` table below them was read as the table alone: the site ran at the defaults
    (min_count 5, noisy releases allowed) without a word. Settings outside the table, and a
    ``policy`` that is not a table, are refused naming the file."""
    path = tmp_path / "policy.toml"
    path.write_text("min_count = 20\nallow_noisy = false\n[policy]\nepsilon_limit = 1.0\n")
    with pytest.raises(InputError) as info:
        DisclosurePolicy.from_toml(path)
    assert repr(str(path)) in str(info.value)
    assert "['allow_noisy', 'min_count']" in str(info.value)
    path.write_text('policy = "strict"\n')
    with pytest.raises(InputError, match="policy must be a table"):
        DisclosurePolicy.from_toml(path)
    # Either form alone is read as before.
    path.write_text("[policy]\nmin_count = 20\nallow_noisy = false\n")
    assert DisclosurePolicy.from_toml(path) == DisclosurePolicy(min_count=20, allow_noisy=False)
    path.write_text("min_count = 20\nallow_noisy = false\n")
    assert DisclosurePolicy.from_toml(path) == DisclosurePolicy(min_count=20, allow_noisy=False)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "does not exist"),
        ("min_count = \n", "is not valid TOML"),
        ('min_count = "20"\n', "min_count must be an integer; got '20'"),
        ("[policy]\nmin-count = 20\n", "unknown policy setting(s) ['min-count']"),
    ],
)
def test_a_policy_file_refusal_names_the_file(tmp_path, text, message):
    """Before: a missing file raised FileNotFoundError, bad TOML a TOMLDecodeError, and a bad
    setting an InputError that did not say which file (a node's ``policy-file``)."""
    path = tmp_path / "policy.toml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(InputError) as info:
        DisclosurePolicy.from_toml(path)
    assert message in str(info.value) and repr(str(path)) in str(info.value)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"min_count": math.inf}, "min_count must be a positive integer; got inf"),
        ({"min_count": math.nan}, "min_count must be a positive integer; got nan"),
        ({"secagg_min_sites": math.inf}, "secagg_min_sites must be an integer >= 2; got inf"),
        ({"opt_in": [1]}, r"opt_in must be a list of names; got \[1\]"),
        ({"opt_in": {"rocglm.positives_rule": True}}, "opt_in must be a list of names"),
        ({"allowed_functions": {"fedroc.info": True}}, "allowed_functions must be a list"),
        ({"allowed_functions": [""]}, "allowed_functions must be a list of names"),
    ],
)
def test_policy_refuses_non_finite_counts_and_lists_that_are_not_names(setting, message):
    """Before: min_count = inf (TOML) ended in OverflowError, nan in ValueError (tracebacks,
    not a refusal naming the setting); opt_in = {"rocglm.positives_rule" = true} (a table)
    was taken as its keys and opt_in = [1] as the set {1}."""
    with pytest.raises(InputError, match=message):
        DisclosurePolicy.from_mapping(setting)


# -- the persistent ledger -------------------------------------------------------------------
@site_function("test.privacy.noisy", schema={"epsilon": Float(0.0, 10.0, open_lo=True)})
def _noisy(ctx, args):
    value, event = laplace_mechanism(
        np.array([ctx.data.score.mean()]),
        epsilon=args["epsilon"],
        sensitivity=1.0,
        rng=ctx.noise_rng("mean"),
    )
    return Reply({"mean": float(value[0])}, kind="noisy", dp=(event,))


def _site(path, limit=10.0):
    data = SiteData.from_arrays([0, 1] * 10, np.linspace(0, 1, 20))
    return Site("north", data, audit=path, policy=DisclosurePolicy(epsilon_limit=limit))


def test_ledger_lies_beside_the_audit_log_and_survives_a_restart(tmp_path):
    site = _site(tmp_path / "north.jsonl")
    site.handle("test.privacy.noisy", {"epsilon": 4.0})
    assert ledger_path_for(tmp_path / "north.jsonl") == tmp_path / "north.ledger.jsonl"
    assert (tmp_path / "north.ledger.jsonl").stat().st_mode & 0o777 == 0o600
    # A crash mid-write leaves a torn last line: it is not an entry.
    with (tmp_path / "north.ledger.jsonl").open("a") as fh:
        fh.write('{"kind": "dp", "event": {"epsilon": 100')
    again = _site(tmp_path / "north.jsonl")
    assert again.ledger.spent()[0] == pytest.approx(4.0)
    again.handle("test.privacy.noisy", {"epsilon": 4.0})
    with pytest.raises(DisclosureError, match="budget is epsilon 10, it has spent 8"):
        again.handle("test.privacy.noisy", {"epsilon": 4.0})
    status = read_ledger_status(tmp_path / "north.ledger.jsonl")
    assert status.releases == 2 and status.epsilon == pytest.approx(8.0)
    assert status.epsilon_limit == 10.0 and status.delta_limit == pytest.approx(1 / 20)


def _spend(path, tries, out, start):
    site = _site(path)
    start.wait(60)  # all four spend at once
    ok = 0
    for _ in range(tries):
        try:
            site.handle("test.privacy.noisy", {"epsilon": 1.0})
            ok += 1
        except DisclosureError:
            pass
    out.put(ok)


def test_budget_holds_when_processes_of_one_site_race(tmp_path):
    # Spawned, not forked: a fork of a pytest worker that runs other threads (xdist's own)
    # can leave a lock held in the child, which then hangs.
    ctx = multiprocessing.get_context("spawn")
    queue, start = ctx.Queue(), ctx.Barrier(4)
    procs = [
        ctx.Process(target=_spend, args=(tmp_path / "north.jsonl", 6, queue, start))
        for _ in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    accepted = sum(queue.get(timeout=5) for _ in procs)
    assert accepted == 10  # 24 attempts at epsilon 1 against a limit of 10
    assert read_ledger_status(tmp_path / "north.ledger.jsonl").epsilon == pytest.approx(10.0)


def test_privacy_status_command(tmp_path, capsys):
    site = _site(tmp_path / "north.jsonl")
    site.handle("test.privacy.noisy", {"epsilon": 2.5})
    main(["privacy", "status", "--audit-dir", str(tmp_path), "--json"])
    [row] = json.loads(capsys.readouterr().out)["sites"]
    assert row["site"] == "north" and row["epsilon"] == pytest.approx(2.5)
    assert row["epsilon_limit"] == 10.0 and row["epsilon_by_function"] == {
        "test.privacy.noisy": 2.5
    }
    main(["privacy", "status", "--audit-dir", str(tmp_path)])
    assert "north" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["privacy", "status", "--audit-dir", str(tmp_path / "nowhere")])
    assert exc.value.code == 2


def test_privacy_status_warns_of_ledger_lines_that_are_not_entries(tmp_path, capsys):
    """A torn or damaged line is skipped when a site reads its ledger (a crash mid-write
    released nothing); damage in the middle would drop the spending it recorded, silently.
    The status counts such lines and warns of them."""
    site = _site(tmp_path / "north.jsonl")
    site.handle("test.privacy.noisy", {"epsilon": 2.5})
    site.handle("test.privacy.noisy", {"epsilon": 1.5})
    main(["privacy", "status", "--audit-dir", str(tmp_path), "--json"])
    assert json.loads(capsys.readouterr().out)["sites"][0]["unreadable_lines"] == 0

    ledger = tmp_path / "north.ledger.jsonl"
    lines = ledger.read_text().splitlines(keepends=True)
    spend = [k for k, line in enumerate(lines) if '"kind": "dp"' in line]
    lines[spend[0]] = lines[spend[0]].replace('"kind": "dp"', '"kind": "dp', 1)  # damaged
    ledger.write_text("".join(lines))
    main(["privacy", "status", "--audit-dir", str(tmp_path), "--json"])
    [row] = json.loads(capsys.readouterr().out)["sites"]
    assert row["unreadable_lines"] == 1 and row["epsilon"] == pytest.approx(1.5)
    main(["privacy", "status", "--audit-dir", str(tmp_path)])
    captured = capsys.readouterr()
    assert "warning: 1 line(s) of" in captured.err and "not ledger entries" in captured.err


def test_privacy_status_shows_a_sites_limits_before_its_first_dp_release(tmp_path, capsys):
    """The limits were read from the site's DP entries only: a site that had released
    nothing under DP (or only counts) showed no budget, and its min count never."""
    data = SiteData.from_arrays([0, 1] * 10, np.linspace(0, 1, 20))
    policy = DisclosurePolicy(epsilon_limit=3.5, delta_limit=1e-4, min_count=7)
    Site("north", data, audit=tmp_path / "north.jsonl", policy=policy)
    main(["privacy", "status", "--audit-dir", str(tmp_path), "--json"])
    [row] = json.loads(capsys.readouterr().out)["sites"]
    assert row["releases"] == 0 and row["epsilon"] == 0.0
    assert (row["epsilon_limit"], row["delta_limit"], row["min_count"]) == (3.5, 1e-4, 7)
    main(["privacy", "status", "--audit-dir", str(tmp_path)])
    table = capsys.readouterr().out
    assert "min count" in table and "3.5" in table and "0.0001" in table

    # Restarted with the same policy: nothing new is written; with another: it is shown.
    ledger = tmp_path / "north.ledger.jsonl"
    lines = ledger.read_text().splitlines()
    Site("north", data, audit=tmp_path / "north.jsonl", policy=policy)
    assert ledger.read_text().splitlines() == lines
    site = Site("north", data, audit=tmp_path / "north.jsonl", policy=DisclosurePolicy(min_count=9))
    status = read_ledger_status(ledger)
    assert (status.epsilon_limit, status.delta_limit, status.min_count) == (10.0, 1 / 20, 9)
    site.handle("test.privacy.noisy", {"epsilon": 1.0})  # a DP release records the same
    assert read_ledger_status(ledger).min_count == 9


def test_privacy_status_names_a_node_directory_site_by_its_audit_log(tmp_path, capsys):
    """A Flower SuperNode keeps audit.jsonl and audit.ledger.jsonl in its node directory:
    `fedroc privacy status --audit-dir NODE_DIR` named the site "audit"."""
    site = _site(tmp_path / "audit.jsonl")
    site.handle("test.privacy.noisy", {"epsilon": 1.5})
    main(["privacy", "status", "--audit-dir", str(tmp_path), "--json"])
    [row] = json.loads(capsys.readouterr().out)["sites"]
    assert row["site"] == "north" and row["epsilon"] == pytest.approx(1.5)


def test_production_noise_is_opendp_and_a_site_seed_is_labelled():
    values = np.full(4000, 0.5)
    noisy, event = gaussian_mechanism(values, epsilon=1.0, delta=1e-5, sensitivity=0.1)
    assert event.sampler == "opendp"
    # OpenDP releases values on its 2^-30 grid, never the float sum x + noise.
    grid = noisy * 2.0**30
    assert np.array_equal(grid, np.round(grid))
    assert np.std(noisy - values) == pytest.approx(event.noise_scale, rel=0.05)
    _, seeded = gaussian_mechanism(
        values, epsilon=1.0, delta=1e-5, sensitivity=0.1, rng=np.random.default_rng(1)
    )
    assert seeded.sampler == "site-seed"


@pytest.mark.parametrize("epsilon", [0.05, 1.0, 30.0])
def test_analytic_delta_is_scipy_stats_normal_form_to_the_bit(epsilon):
    # Phi comes from scipy.special; scipy.stats.norm's cdf and logcdf are the reference.
    for sigma in np.geomspace(1e-4, 1e3, 57):
        a, b = 0.3 / (2 * sigma), epsilon * sigma / 0.3
        want = float(stats.norm.cdf(a - b)) - math.exp(epsilon + float(stats.norm.logcdf(-a - b)))
        assert analytic_gaussian_delta(sigma, epsilon=epsilon, sensitivity=0.3) == want


def test_a_ledger_transaction_inside_another_of_the_same_thread_does_not_wait_for_itself(
    tmp_path,
):
    """A seeded site's noise reads its ledger in a transaction (A2 in
    tests/test_attacks_review2.py); inside another transaction of the same thread, a file lock
    taken through a second descriptor of the file waited for the first forever."""
    import threading

    from fedroc.privacy.ledger import BudgetLedger

    ledger = BudgetLedger(path=tmp_path / "site.ledger.jsonl")

    def nested() -> None:
        with ledger.transaction():
            ledger.bind("outer", 1)
            with ledger.transaction():
                ledger.bind("inner", 2)

    worker = threading.Thread(target=nested, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert BudgetLedger(path=tmp_path / "site.ledger.jsonl").bindings == {"outer": 1, "inner": 2}


@pytest.mark.parametrize(
    ("setting", "value", "named"),
    [
        ("min_count", 2, "min_count = 2"),
        ("epsilon_limit", 50.0, "epsilon_limit = 50"),
        ("delta_limit", 0.05, "delta_limit = 0.05 is above 1/n = 0.01"),
        ("secagg_min_sites", 2, "secagg_min_sites = 2"),
        ("secagg_rebind", True, "secagg_rebind = true"),
        ("clear_histograms", True, "clear_histograms = true"),
        ("rocglm_min_sensitivity", 0.001, "rocglm_min_sensitivity = 0.001"),
        ("histogram_min_epsilon", 0.001, "histogram_min_epsilon = 0.001"),
        ("mpc_proxies", "any", "mpc_proxies = 'any'"),
        ("mpc_max_jobs", 2, "mpc_max_jobs = 2"),
        ("opt_in", frozenset({"rocglm.positives_rule"}), "'rocglm.positives_rule'"),
    ],
)
def test_a_policy_names_each_setting_that_protects_the_rows_less_than_the_default(
    setting, value, named
):
    """An operator who loosens a setting is told which, with its value and what leaves; a
    node's defaults (``mpc_proxies = "none"``) and tighter settings say nothing."""
    node = {"mpc_proxies": "none"}
    assert DisclosurePolicy(**node).warnings(n_rows=100) == []
    tighter = DisclosurePolicy(
        **node, min_count=10, epsilon_limit=1.0, delta_limit=0.001, secagg_min_sites=5
    )
    assert tighter.warnings(n_rows=100) == []
    said = DisclosurePolicy(**{**node, setting: value}).warnings(n_rows=100)
    assert len(said) == 1 and named in said[0], said


def test_a_policy_names_mpc_only_off_where_it_pins_a_cluster():
    """``mpc_only = false`` protects less only where the site is an MPC owner (its policy
    pins a cluster's proxies): there its other functions give P and N; elsewhere it says
    nothing (the site takes part in no job, or trusts the analyst's proxies anyway). One
    job (``mpc_max_jobs`` 1 or 0) says nothing either."""
    pinned = {"mpc_proxies": "cluster.toml"}
    assert DisclosurePolicy(**pinned).warnings(n_rows=100) == []
    said = DisclosurePolicy(**pinned, mpc_only=False).warnings(n_rows=100)
    assert len(said) == 1 and "mpc_only = false" in said[0], said
    assert DisclosurePolicy(mpc_proxies="none", mpc_only=False).warnings(n_rows=100) == []
    for jobs in (0, 1):
        assert DisclosurePolicy(mpc_proxies="none", mpc_max_jobs=jobs).warnings() == []
