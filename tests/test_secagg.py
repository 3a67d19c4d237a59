"""Secure aggregation: exact sums, uniform masked inputs, dropouts, aborts, stage order."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from scipy import stats

from fedroc.data import SiteData
from fedroc.exceptions import DisclosureError, InputError, ProtocolError, SiteError
from fedroc.federation import Federation, Reply, Site, SiteContext, basic, site_function
from fedroc.federation.records import Record
from fedroc.federation.transport import Exchange, Transport, raise_site_failures
from fedroc.metrics import brier_score
from fedroc.privacy import DisclosurePolicy
from fedroc.secagg import (
    FUNCTIONS,
    SecAggServer,
    _crypto,
    check_secure_sum,
    secure_brier,
    secure_calibration,
    secure_sum,
    shamir,
)
from fedroc.secagg.protocol import (
    FN_ABORT,
    KEY_ACTIVE,
    KEY_SESSION,
    STAGE_ABORTED,
    STAGE_ADVERTISE_KEYS,
    STAGE_MASKED_INPUT,
    STAGE_SHARE_KEYS,
    STAGE_UNMASK,
)

# Vectors the test input returns, per site name (a test stands in for the sites' data).
VECTORS: dict[str, Any] = {}


@site_function("test.secagg.vector", schema={}, release="secure")
def _vector_input(ctx: SiteContext, args: dict[str, Any]) -> Reply:
    value = VECTORS[ctx.site]
    return Reply(value if isinstance(value, dict) else {"x": value}, counts={"rows": ctx.data.n})


class SeededEntropy:
    """A ChaCha20 stream standing in for OS entropy, so a statistical test is reproducible."""

    def __init__(self, seed: int) -> None:
        key = hashlib.sha256(f"secagg-test-{seed}".encode()).digest()
        self._stream = Cipher(algorithms.ChaCha20(key, bytes(16)), mode=None).encryptor()

    def __call__(self, n: int) -> bytes:
        return self._stream.update(bytes(n))


class FlakyTransport(Transport):
    """An in-process transport on which chosen sites fail chosen functions (drop out)."""

    def __init__(self, inner: Transport, fail: Mapping[str, set[str]]) -> None:
        self.inner = inner
        self.fail = {k: set(v) for k, v in fail.items()}

    @property
    def site_names(self) -> list[str]:
        return self.inner.site_names

    def call(
        self,
        function: str,
        args_by_site: Mapping[str, Record],
        *,
        requester: str = "analyst",
        timeout: float | None = None,
    ) -> dict[str, Exchange]:
        down = [n for n in args_by_site if function in self.fail.get(n, set())]
        up = {n: a for n, a in args_by_site.items() if n not in down}
        out = self.inner.call(function, up, requester=requester) if up else {}
        raise_site_failures(function, {n: SiteError(f"{n} is unreachable", site=n) for n in down})
        return out


def make_sites(n: int, *, policy: DisclosurePolicy | None = None) -> list[Site]:
    rng = np.random.default_rng(n)
    sites = []
    for k in range(n):
        y = np.r_[np.ones(10, bool), np.zeros(10, bool)]
        sites.append(Site(f"s{k}", SiteData.from_arrays(y, rng.random(20)), policy=policy))
    return sites


def federation(n: int, fail: Mapping[str, set[str]] | None = None) -> Federation:
    sites = make_sites(n)
    transport: Transport = Federation.from_sites(sites).transport
    if fail:
        transport = FlakyTransport(transport, fail)
    return Federation(transport)


def drop_from(stage: str) -> set[str]:
    """Every secagg function from ``stage`` on (a site that is gone stays gone)."""
    order = [STAGE_ADVERTISE_KEYS, STAGE_SHARE_KEYS, STAGE_MASKED_INPUT, STAGE_UNMASK]
    return {FUNCTIONS[s] for s in order[order.index(stage) :]} | {FN_ABORT}


@pytest.fixture
def vectors():
    VECTORS.clear()
    yield VECTORS
    VECTORS.clear()


# -- Shamir ------------------------------------------------------------------------------
def test_shamir_any_threshold_subset_rebuilds_the_secret():
    secret = int.from_bytes(b"\x07" * 32, "big")
    shares = shamir.split(secret, n=6, threshold=4)
    points = dict(enumerate(shares, start=1))
    for subset in ([1, 2, 3, 4], [3, 4, 5, 6], [1, 3, 5, 6], [6, 5, 4, 3, 2, 1]):
        assert shamir.reconstruct({x: points[x] for x in subset}, threshold=4) == secret
    with pytest.raises(ProtocolError, match="cannot reconstruct"):
        shamir.reconstruct({x: points[x] for x in (1, 2, 3)}, threshold=4)


def test_shamir_fewer_shares_are_consistent_with_any_secret():
    # Degree t-1 = 1: one share fits every secret, so it tells nothing; two fix it.
    shares = shamir.split(12345, n=3, threshold=2)
    a, b = shares[0], shares[1]
    assert shamir.reconstruct({1: a, 2: b}, threshold=2) == 12345
    slope = (b - a) % shamir.PRIME
    assert (a - slope) % shamir.PRIME == 12345  # the line through both points hits 12345


# -- exact sums --------------------------------------------------------------------------
@pytest.mark.parametrize("bits", [64, 32])
def test_sum_is_exact(vectors, bits):
    rng = np.random.default_rng(7)
    fed = federation(5)
    limit = 2 ** (bits - 4)
    for name in fed.site_names:
        vectors[name] = {
            "counts": rng.integers(-limit, limit, size=(3, 50)),
            "total": int(rng.integers(0, 1000)),
            "sums": rng.normal(size=7) * 1e3,
        }
    # A site keeps 2^31 of integer headroom: a 32-bit ring carries no fraction bits.
    frac_bits = 0 if bits == 32 else 32
    result = secure_sum(fed, "test.secagg.vector", bits=bits, frac_bits=frac_bits)
    expected = {k: sum(vectors[n][k] for n in fed.site_names) for k in ("counts", "total", "sums")}
    np.testing.assert_array_equal(result["counts"], expected["counts"])
    assert result["total"] == expected["total"]
    tol = 5 * 2.0**-frac_bits
    np.testing.assert_allclose(result["sums"], expected["sums"], rtol=0, atol=tol)
    assert result.sites == fed.site_names and result.dropped == {}
    assert result.released.rounds == 4
    assert result.released.kinds == {"shares": 20}


def test_secure_brier_and_calibration_match_the_pooled_values():
    sites = make_sites(4)
    fed = Federation.from_sites(sites)
    y = np.concatenate([s._data.label for s in sites])
    p = np.concatenate([s._data.score for s in sites])
    brier, n = secure_brier(fed)
    assert n == y.size
    assert brier == pytest.approx(brier_score(y, p), abs=1e-9)
    assert basic.distributed_brier(fed)[0] == pytest.approx(brier, abs=1e-9)
    cal = secure_calibration(fed, n_bins=5)
    # A site answers calibration one way in its lifetime (a secure total minus the sites'
    # clear bins would be the bins they withheld): the clear curve comes from fresh sites
    # with the same rows.
    with pytest.raises(DisclosureError, match="through secure aggregation before"):
        basic.distributed_calibration(fed, n_bins=5)
    from fedroc.metrics import calibration_curve

    plain = basic.distributed_calibration(Federation.from_sites(make_sites(4)), n_bins=5)

    # Each site leaves the scores of the bins it withholds in the clear (under q rows) out
    # of the secure sum of predictions (R21: a pooled bin of one row gave its score) and
    # puts their rows in at the bin's middle, with no count of them apart (H13-2: the
    # pooled count was the one withholding site's); every row's count and label are summed
    # (R25), so the counts and observed fractions are the pooled ones.
    assert plain.curve.suppressed.any()  # 20 rows a site, 5 bins: some bins under q = 5
    everyone = calibration_curve(y, p, n_bins=5)
    np.testing.assert_array_equal(cal.curve.count, everyone.count)
    np.testing.assert_allclose(cal.curve.observed_fraction, everyone.observed_fraction, atol=1e-9)
    edges = everyone.edges
    middle = (edges[:-1] + edges[1:]) / 2.0
    predicted = np.zeros(5)
    for site in sites:  # by hand: each site's bins, its withheld ones at the middle
        score = site._data.score
        k = np.clip(np.searchsorted(edges, score, side="right") - 1, 0, 4)
        count = np.bincount(k, minlength=5)
        withheld = count < 5
        if 0 < count[withheld].sum() < 5:  # the secondary bin, as the clear curve's
            kept = np.flatnonzero(~withheld)
            withheld[kept[np.argmin(count[kept])]] = True
        sums = np.bincount(k, weights=score, minlength=5)
        predicted += np.where(withheld, count * middle, sums)
    np.testing.assert_allclose(cal.curve.mean_predicted, predicted / everyone.count, atol=1e-9)
    np.testing.assert_array_equal(cal.curve.suppressed, plain.curve.suppressed)
    # Sites that withhold nothing (q = 1, the same rows): the secure curve is the pooled one.
    ones = Federation.from_sites(make_sites(4, policy=DisclosurePolicy(min_count=1)))
    whole = secure_calibration(ones, n_bins=5).curve
    pooled = calibration_curve(y, p, n_bins=5)
    np.testing.assert_array_equal(whole.count, pooled.count)
    np.testing.assert_allclose(whole.mean_predicted, pooled.mean_predicted, atol=1e-9)
    np.testing.assert_allclose(whole.observed_fraction, pooled.observed_fraction, atol=1e-9)
    assert not whole.suppressed.any() and whole.count.sum() == y.size


# -- what the server sees -----------------------------------------------------------------
def _masked_view(monkeypatch, vectors, x_target: np.ndarray, seed: int) -> np.ndarray:
    """The masked vector the server receives from site s0 holding ``x_target``."""
    monkeypatch.setattr(_crypto, "random_bytes", SeededEntropy(seed))
    fed = federation(4)
    rng = np.random.default_rng(seed)
    for name in fed.site_names:
        vectors[name] = rng.integers(0, 50, size=x_target.size)
    vectors["s0"] = x_target
    server = SecAggServer(fed, "test.secagg.vector")
    server.advertise_keys()
    server.share_keys()
    server.collect_masked_inputs()
    seen = server.state.masked["s0"].copy()
    total = server.unmask()["x"]
    np.testing.assert_array_equal(total, sum(vectors[n] for n in fed.site_names))
    return seen


def _byte_counts(values: np.ndarray, shift: int) -> np.ndarray:
    return np.bincount(
        ((values >> np.uint64(shift)) & np.uint64(255)).astype(np.int64), minlength=256
    )


def test_masked_input_is_uniform_and_independent_of_the_input(monkeypatch, vectors):
    m = 2**14
    x_a = np.zeros(m, np.int64)  # nothing
    x_b = (np.arange(m) % 97) * 1000 + 7  # structured, large
    seen_a = _masked_view(monkeypatch, vectors, x_a, seed=1)
    seen_b = _masked_view(monkeypatch, vectors, x_b, seed=2)
    for shift in (0, 8, 28, 56):  # low bytes carry the input, high bytes its carries
        ca, cb = _byte_counts(seen_a, shift), _byte_counts(seen_b, shift)
        assert stats.chisquare(ca).pvalue > 1e-3
        assert stats.chisquare(cb).pvalue > 1e-3
        # Same distribution whatever the input: a 2 x 256 homogeneity test.
        assert stats.chi2_contingency(np.vstack([ca, cb])).pvalue > 1e-3
    # The same tests see the input at once when it is not masked (they can fail).
    assert stats.chisquare(_byte_counts(x_b.astype(np.uint64), 0)).pvalue < 1e-12
    # Masks of two sessions are unrelated: the difference of the views is uniform too.
    assert stats.chisquare(_byte_counts(seen_a - seen_b, 0)).pvalue > 1e-3


# -- dropouts -----------------------------------------------------------------------------
@pytest.mark.parametrize("n_drop", [1, 2, 3])
def test_dropouts_after_sharing_keys_give_the_sum_of_the_survivors(vectors, n_drop):
    n, t = 7, 4
    dropped = {f"s{k}" for k in range(1, 1 + n_drop)}
    fed = federation(n, {name: drop_from(STAGE_MASKED_INPUT) for name in dropped})
    rng = np.random.default_rng(n_drop)
    for name in fed.site_names:
        vectors[name] = rng.integers(0, 1000, size=64)
    result = secure_sum(fed, "test.secagg.vector", threshold=t, allow_dropouts=True)
    survivors = [s for s in fed.site_names if s not in dropped]
    assert result.sites == survivors
    assert set(result.dropped) == dropped
    np.testing.assert_array_equal(result["x"], sum(vectors[s] for s in survivors))


def test_dropouts_while_unmasking_keep_their_inputs_in_the_sum(vectors):
    fed = federation(5, {"s3": drop_from(STAGE_UNMASK), "s4": drop_from(STAGE_UNMASK)})
    for k, name in enumerate(fed.site_names):
        vectors[name] = np.full(10, k + 1)
    result = secure_sum(fed, "test.secagg.vector", threshold=3, allow_dropouts=True)
    assert result.sites == fed.site_names  # all five masked inputs arrived
    assert set(result.dropped) == {"s3", "s4"}
    np.testing.assert_array_equal(result["x"], np.full(10, 15))


def test_dropouts_at_every_stage(vectors):
    fail = {
        "s1": drop_from(STAGE_ADVERTISE_KEYS),
        "s2": drop_from(STAGE_SHARE_KEYS),
        "s3": drop_from(STAGE_MASKED_INPUT),
        "s4": drop_from(STAGE_UNMASK),
    }
    # Nine sites: the sites accept no threshold below a majority (5), and five answer the
    # unmasking stage.
    fed = federation(9, fail)
    for k, name in enumerate(fed.site_names):
        vectors[name] = np.array([k, 10 * k])
    result = secure_sum(fed, "test.secagg.vector", threshold=5, allow_dropouts=True)
    assert result.sites == ["s0", "s4", "s5", "s6", "s7", "s8"]
    np.testing.assert_array_equal(result["x"], [30, 300])


def test_below_threshold_aborts_and_reveals_nothing(vectors):
    sites = make_sites(5)
    transport = FlakyTransport(
        Federation.from_sites(sites).transport,
        {f"s{k}": drop_from(STAGE_MASKED_INPUT) for k in (1, 2, 3)},
    )
    fed = Federation(transport)
    for name in fed.site_names:
        vectors[name] = np.arange(4) + 100
    server = SecAggServer(fed, "test.secagg.vector", threshold=3, allow_dropouts=True)
    with pytest.raises(ProtocolError, match=r"2 of 5 sites remain.*threshold of 3.*nothing"):
        server.run()
    assert server.state.stage == STAGE_ABORTED
    assert server.state.masked == {}  # the masked inputs it had are discarded
    assert FUNCTIONS[STAGE_UNMASK] not in [c.function for c in fed.transcript]
    # The surviving sites erased their secrets and refuse to go on.
    key = "fedroc.secagg/" + server.state.session
    for site in (sites[0], sites[4]):
        state = site.state[key]
        assert state["status"] == STAGE_ABORTED
        assert state["s_sk"] == b"" and state["b_shares"] == b"" and len(state["vector"]) == 0
    with pytest.raises(ProtocolError, match="aborted"):
        sites[0].handle(
            FUNCTIONS[STAGE_UNMASK], {KEY_SESSION: server.state.session, KEY_ACTIVE: ["s0", "s4"]}
        )


def test_a_site_refuses_to_unmask_for_fewer_survivors_than_the_threshold(vectors):
    sites = make_sites(4)
    fed = Federation.from_sites(sites)
    for name in fed.site_names:
        vectors[name] = np.arange(3)
    server = SecAggServer(fed, "test.secagg.vector", threshold=3)
    server.advertise_keys()
    server.share_keys()
    server.collect_masked_inputs()
    # A server that lies about who survived, to collect mask keys, is refused.
    with pytest.raises(ProtocolError, match="below the threshold of 3"):
        sites[0].handle(
            FUNCTIONS[STAGE_UNMASK], {KEY_SESSION: server.state.session, KEY_ACTIVE: ["s0", "s1"]}
        )


def test_without_dropout_tolerance_a_failing_site_aborts_with_its_name(vectors):
    fed = federation(4, {"s2": drop_from(STAGE_MASKED_INPUT)})
    for name in fed.site_names:
        vectors[name] = np.arange(3)
    with pytest.raises(SiteError, match="'s2'"):
        secure_sum(fed, "test.secagg.vector")


def test_policy_refusals_stop_the_protocol_before_keys_are_exchanged(vectors):
    fed = Federation.from_sites(make_sites(3, policy=DisclosurePolicy(allow_shares=False)))
    for name in fed.site_names:
        vectors[name] = np.arange(3)
    with pytest.raises(DisclosureError, match="forbids releasing shares"):
        secure_sum(fed, "test.secagg.vector")
    small = Federation.from_sites(make_sites(3, policy=DisclosurePolicy(min_count=50)))
    with pytest.raises(DisclosureError, match="rows count is below the minimum of 50"):
        secure_sum(small, "test.secagg.vector")
    assert {c.function for c in small.transcript} == {FN_ABORT}  # no key left any site


def test_inputs_of_different_layouts_abort(vectors):
    fed = federation(3)
    vectors.update({"s0": np.arange(3), "s1": np.arange(3), "s2": np.arange(4)})
    with pytest.raises(ProtocolError, match="different layouts"):
        secure_sum(fed, "test.secagg.vector")


def test_overflowing_inputs_are_refused_at_the_site(vectors):
    fed = federation(3)
    for name in fed.site_names:
        vectors[name] = np.array([2**40])
    with pytest.raises(SiteError, match="does not fit the 32-bit ring") as refused:
        secure_sum(fed, "test.secagg.vector", bits=32, frac_bits=0)
    # The refusal names no magnitude: that would be a number computed from the rows.
    assert "1.1e+12" not in str(refused.value) and str(2**40) not in str(refused.value)


def test_bad_parameters_are_named():
    fed = federation(3)
    with pytest.raises(InputError, match="threshold must lie in"):
        SecAggServer(fed, "test.secagg.vector", threshold=5)
    with pytest.raises(InputError, match="at least 2 sites"):
        SecAggServer(fed, "test.secagg.vector", sites=["s0"])
    with pytest.raises(InputError, match="unknown site"):
        SecAggServer(fed, "test.secagg.vector", sites=["s0", "nowhere"])
    with pytest.raises(SiteError, match="unknown site function .no.such.input."):
        secure_sum(fed, "no.such.input")


# -- stage order -------------------------------------------------------------------------
def test_server_rejects_every_stage_out_of_order(vectors):
    fed = federation(3)
    for name in fed.site_names:
        vectors[name] = np.arange(3)
    server = SecAggServer(fed, "test.secagg.vector")
    methods = [
        server.advertise_keys,
        server.share_keys,
        server.collect_masked_inputs,
        server.unmask,
    ]
    for done in range(len(methods) + 1):
        for k, method in enumerate(methods):
            if k != done:
                with pytest.raises(ProtocolError, match="needs stage"):
                    method()
        if done < len(methods):
            methods[done]()
    assert server.state.stage == "done"


def test_sites_reject_every_stage_out_of_order(vectors):
    sites = make_sites(3)
    fed = Federation.from_sites(sites)
    for name in fed.site_names:
        vectors[name] = np.arange(3)
    server = SecAggServer(fed, "test.secagg.vector")
    session = server.state.session
    site = sites[0]
    order = [STAGE_ADVERTISE_KEYS, STAGE_SHARE_KEYS, STAGE_MASKED_INPUT, STAGE_UNMASK]
    steps = [
        server.advertise_keys,
        server.share_keys,
        server.collect_masked_inputs,
        server.unmask,
    ]
    names = ["s0", "s1", "s2"]
    # Well-formed requests (they pass the stages' argument schemas), sent out of order.
    well_formed = {
        STAGE_ADVERTISE_KEYS: {
            KEY_SESSION: session,
            "sites": names,
            "threshold": 3,  # the server asked for 2: not a retransmission
            "bits": 64,
            "frac_bits": 32,
            "input": "test.secagg.vector",
        },
        STAGE_SHARE_KEYS: {
            KEY_SESSION: session,
            KEY_ACTIVE: names,
            "c_pks": bytes(96),
            "s_pks": bytes(96),
        },
        STAGE_MASKED_INPUT: {
            KEY_SESSION: session,
            KEY_ACTIVE: names,
            "senders": names[1:],
            "ciphertexts": b"",
        },
        # Not the server's own request (that one is a retransmission, answered again).
        STAGE_UNMASK: {KEY_SESSION: session, KEY_ACTIVE: names[:2]},
    }
    for done in range(len(order) + 1):
        for k, stage in enumerate(order):
            if k == done:
                continue  # the one valid next stage
            with pytest.raises(ProtocolError, match="refuses stage"):
                site.handle(FUNCTIONS[stage], well_formed[stage])
        if done < len(steps):
            steps[done]()
    # A retransmitted request gets the identical reply; a different one is refused.
    last = fed.transcript[-1]
    assert last.function == FUNCTIONS[STAGE_UNMASK]
    args = {KEY_SESSION: session, KEY_ACTIVE: ["s0", "s1", "s2"]}
    first = site.handle(FUNCTIONS[STAGE_UNMASK], args)
    again = site.handle(FUNCTIONS[STAGE_UNMASK], args)
    assert first["b_shares"] == again["b_shares"]
    with pytest.raises(ProtocolError, match="refuses stage"):
        site.handle(FUNCTIONS[STAGE_UNMASK], {**args, KEY_ACTIVE: ["s0", "s1"]})


def test_misrouted_shares_fail_authentication(vectors):
    fed = federation(3)
    for name in fed.site_names:
        vectors[name] = np.arange(3)
    server = SecAggServer(fed, "test.secagg.vector")
    server.advertise_keys()
    server.share_keys()
    inbox = server.state.inbox
    # A server that hands s0 the share s1 sent to s2 is caught by the AEAD tag.
    inbox["s0"]["s1"] = inbox["s2"]["s1"]
    with pytest.raises(SiteError, match="failed authentication"):
        server.collect_masked_inputs()


def test_policy_allowlist_covers_aggregate_inputs() -> None:
    # Attack: a site's policy allows secure aggregation's stages but not the class counts;
    # the analyst asks for the class counts as the input of a secure sum. The allowlist is
    # middleware around every site function, so the input is refused like a direct call.
    allowed = frozenset({*FUNCTIONS.values(), FN_ABORT})
    sites = make_sites(3, policy=DisclosurePolicy(allowed_functions=allowed))
    fed = Federation.from_sites(sites)
    with pytest.raises(DisclosureError, match="not among the functions its policy allows"):
        fed.call("fedroc.class_counts")
    with pytest.raises(DisclosureError, match="not among the functions its policy allows"):
        secure_sum(fed, "fedroc.class_counts")
    # The allowed input goes through.
    open_sites = make_sites(
        3, policy=DisclosurePolicy(allowed_functions=allowed | {"fedroc.class_counts"})
    )
    assert int(secure_sum(Federation.from_sites(open_sites), "fedroc.class_counts")["n_pos"]) == 30


def test_bound_arguments_hold_for_aggregate_inputs_too() -> None:
    # Attack: the site binds the calibration's number of bins to its first value, so that
    # two binnings cannot be subtracted. Asking for the other binning as the input of a
    # secure sum would get around it if only direct calls were checked.
    fed = Federation.from_sites(make_sites(3))
    first = secure_sum(fed, "fedroc.calibration", n_bins=4)
    # Every row counted (R25); the rows whose scores a site left out counted apart too.
    assert int(np.sum(first["count"])) == 60
    assert 0 <= int(np.sum(first["withheld"])) <= 60
    with pytest.raises(DisclosureError, match="'n_bins' was 4"):
        secure_sum(fed, "fedroc.calibration", n_bins=5)
    with pytest.raises(DisclosureError, match="'n_bins' was 4"):
        fed.call("fedroc.calibration", n_bins=5)


def test_check_secure_sum_gives_the_sessions_refusals_and_binds_nothing():
    """check_secure_sum asks the members what the session's first stage would answer
    (secagg_min_sites, the one set of partners, the roster, the allowed functions), with
    nothing computed, bound or charged; what it lets pass, the sum then serves."""
    sites = make_sites(4)
    fed = Federation.from_sites(sites)
    with pytest.raises(DisclosureError, match="over 2 site.*secagg_min_sites"):
        check_secure_sum(fed, "fedroc.class_counts", sites=["s0", "s1"])
    with pytest.raises(SiteError, match="unknown site function 'no.such'"):
        check_secure_sum(fed, "no.such")
    with pytest.raises(InputError, match="threshold must lie in"):
        check_secure_sum(fed, "fedroc.class_counts", threshold=9)
    check_secure_sum(fed, "fedroc.class_counts", sites=["s0", "s1", "s2"])
    assert all(s.ledger.partners("fedroc.class_counts") is None for s in sites)
    assert fed.transcript[-1].function == "fedroc.secagg.check"
    total = secure_sum(fed, "fedroc.class_counts", sites=["s0", "s1", "s2"])
    assert int(total["n_pos"]) == 30
    # Bound now: another set is refused by the check as by the session, before anything.
    with pytest.raises(DisclosureError, match="over the sites \\['s0', 's1', 's2'\\] before"):
        check_secure_sum(fed, "fedroc.class_counts", sites=["s1", "s2", "s3"])
    with pytest.raises(DisclosureError, match="over the sites \\['s0', 's1', 's2'\\] before"):
        secure_sum(fed, "fedroc.class_counts", sites=["s1", "s2", "s3"])
    # A policy that lists its functions refuses an input it does not list, and the check
    # itself unless listed with the protocol's stages.
    stages = set(FUNCTIONS.values()) | {FN_ABORT}
    strict = DisclosurePolicy(allowed_functions=frozenset(stages | {"fedroc.secagg.check"}))
    fed = Federation.from_sites(make_sites(3, policy=strict))
    with pytest.raises(DisclosureError, match="refuses 'fedroc.class_counts': not among"):
        check_secure_sum(fed, "fedroc.class_counts")
    fed = Federation.from_sites(make_sites(3, policy=DisclosurePolicy(allowed_functions=stages)))
    with pytest.raises(DisclosureError, match="refuses 'fedroc.secagg.check': not among"):
        check_secure_sum(fed, "fedroc.class_counts")


def test_check_secure_sum_with_dropouts_leaves_out_the_gone_not_the_refusing():
    """With allow_dropouts a member that fails the check is left out (the sum drops it
    too); one error names gone and refusing members together, so a refusal among them
    stays a refusal, and fewer answers than the threshold are still an error."""
    from fedroc.federation.transport import raise_site_failures

    class Merged(FlakyTransport):  # a real transport: every site's failure in one error
        def call(self, function, args_by_site, *, requester="analyst", timeout=None):
            try:
                out = self.inner.call(
                    function,
                    {n: a for n, a in args_by_site.items() if function not in self.fail.get(n, ())},
                    requester=requester,
                )
                failures: dict[str, BaseException] = {}
            except DisclosureError as exc:
                out, failures = {}, {exc.site: exc}
            for n in args_by_site:
                if function in self.fail.get(n, ()):
                    failures[n] = SiteError(f"{n} is unreachable", site=n)
            raise_site_failures(function, failures)
            return out

    gone = {"fedroc.secagg.check"}
    fed = Federation(Merged(Federation.from_sites(make_sites(4)).transport, {"s3": gone}))
    with pytest.raises(SiteError, match="s3 is unreachable"):
        check_secure_sum(fed, "fedroc.class_counts", threshold=3, budget=True)
    left = check_secure_sum(
        fed, "fedroc.class_counts", threshold=3, budget=True, allow_dropouts=True
    )
    assert sorted(left) == ["s0", "s1", "s2"]
    with pytest.raises(SiteError, match="s2 is unreachable"):  # 2 answers, threshold 3
        fed2 = Federation(
            Merged(Federation.from_sites(make_sites(4)).transport, {"s3": gone, "s2": gone})
        )
        check_secure_sum(fed2, "fedroc.class_counts", threshold=3, allow_dropouts=True)
    # s0 bound to another set refuses: the merged error is a SiteError (s3 is gone), and
    # the check must still end in s0's refusal, not leave s0 out as gone.
    sites = make_sites(4)
    secure_sum(Federation.from_sites(sites), "fedroc.class_counts", sites=["s0", "s1", "s2"])
    fed3 = Federation(Merged(Federation.from_sites(sites).transport, {"s3": gone}))
    with pytest.raises(DisclosureError, match="site 's0' refuses"):
        check_secure_sum(fed3, "fedroc.class_counts", threshold=2, allow_dropouts=True)


def test_a_method_calibration_does_not_bind_the_sites_two_ways():
    """One site released its calibration bins in the clear (bound to the clear way); the
    others had released no exact counts. The curve a method adds (sites_calibration) asks
    before the secure sum, so the bound site's refusal comes before the others bind the
    secure way: the curve comes in the clear, every site on one way, and again next time.
    (Before, the others bound the secure way inside the refused sum, refused the clear
    curve after it, and the federation's curve was withheld for good.)"""
    from fedroc.federation.basic import EXACT_COUNTS_KEY
    from fedroc.methods import sites_calibration

    sites = make_sites(3)
    fed = Federation.from_sites(sites)
    fed.call("fedroc.calibration", sites=["s0"], n_bins=10)
    for _ in range(2):
        curve, note = sites_calibration(fed, n_bins=10)
        assert curve is not None, note
        assert note.startswith("calibration in the clear") and "released exact binned" in note
        assert [s.ledger.bindings.get(EXACT_COUNTS_KEY) for s in sites] == ["clear"] * 3
    # The ROC-GLM's secure table is refused before its noisy release, for the same reason.
    from fedroc.methods.rocglm import distributed_rocglm

    start = fed.mark()
    with pytest.raises(DisclosureError, match="refuses 'rocglm.table'.*exact binned counts"):
        distributed_rocglm(fed, epsilon=1.0, delta=1e-5, sensitivity=0.02, bootstrap=5)
    assert fed.released(start).kinds.get("noisy", 0) == 0


def test_a_withheld_method_calibration_says_why_the_secure_curve_was_refused():
    """A tree over the public range [-0.5, 1.5] binds the sites' grid of exact counts there
    (bind_tree), so they refuse the secure curve, over [0, 1]; the clear one too (secure
    way). The note of the withheld curve names both refusals: it named the clear one only
    ("released exact binned counts through secure aggregation before"), which sent the user
    after the wrong cause."""
    from fedroc.methods import sites_calibration
    from fedroc.methods.histogram import INPUT_NAME, MODE_SA

    fed = Federation.from_sites(make_sites(3))
    secure_sum(fed, INPUT_NAME, mode=MODE_SA, branching=2, height=4, lo=-0.5, hi=1.5)
    curve, note = sites_calibration(fed, n_bins=10)
    assert curve is None and note.startswith("calibration curve withheld")
    assert "were bound to [-0.5, 1.5] by" in note
    assert "released exact binned counts through secure aggregation" in note
