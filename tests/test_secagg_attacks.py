"""The analyst as an actively malicious secure-aggregation server (attack review, hole 1).

The server relays every message of secure aggregation, so before sites authenticated each
other it decided who took part, whose keys were whose, what each site computed and which
threshold held. Each test plays one such server through fedroc's public calls
(``Federation.call_each``, :class:`~fedroc.secagg.SecAggServer`, the published primitives)
and measures what it recovers. Each attack recovered a site's input exactly on main 0e2da79
(``/tmp/attack/p2``, ``p3``, ``p9``); now the sites refuse, because each joins only peers on
the roster its own operator configured, every advertisement is signed over the session's
parameters, and the threshold is at least a majority of the members.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_secagg import FlakyTransport, drop_from

from fedroc.data import SiteData
from fedroc.exceptions import DisclosureError, FedrocError, SiteError
from fedroc.federation import Federation, Reply, Site, SiteContext, site_function
from fedroc.federation.schema import Int
from fedroc.federation.transport import InProcessTransport
from fedroc.methods.histogram import (
    INPUT_NAME,
    MODE_DDP,
    MODE_SA,
    count_leaves,
    levels_from_leaves,
)
from fedroc.privacy import DisclosurePolicy, discrete_laplace_variance
from fedroc.secagg import FUNCTIONS, SecAggServer, _crypto, secure_sum, shamir
from fedroc.secagg.protocol import (
    FN_ABORT,
    KEY_INPUT,
    KEY_INPUT_ARGS,
    KEY_SITES,
    KEY_THRESHOLD,
    STAGE_ADVERTISE_KEYS,
    STAGE_MASKED_INPUT,
    _decode_sum,
)

H = 12  # 4096 leaves: each of a site's 100 rows nearly alone in its leaf, with its label
LEAVES = 2**H
TREE = {"branching": 2, "height": H, "lo": 0.0, "hi": 1.0, "mode": MODE_SA}
LAX = DisclosurePolicy(min_count=1, secagg_min_sites=2)


def _sites(n_sites: int = 3, n: int = 100, seed: int = 0) -> list[Site]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n_sites):
        y = rng.random(n) < 0.4
        s = np.clip(rng.normal(0.35 + 0.3 * y, 0.15), 0.0, 1.0)
        out.append(Site(f"s{k}", SiteData.from_arrays(y, s)))
    return out


def _leaves(site: Site, leaves: int = LEAVES, lo: float = 0.0, hi: float = 1.0) -> np.ndarray:
    d = site._data
    pos, neg = count_leaves(d.label, d.score, leaves, lo, hi)
    return np.concatenate([pos, neg])


def _attempt(attack: Callable[[], Any]) -> Any:
    """Run an attack; return what it recovered, or the refusal that stopped it."""
    try:
        return attack()
    except FedrocError as exc:
        return exc


def _fake(name: str) -> Site:
    """A site the analyst runs itself, with two rows it knows (both at 0.5)."""
    return Site(name, SiteData.from_arrays([True, False], [0.5, 0.5]), policy=LAX)


# -- p9: partners the analyst runs itself ------------------------------------------------------
def _sybil(victim: Site, fake_names: tuple[str, ...]) -> np.ndarray:
    """Sum the victim with fakes at t = n and subtract the fakes' known rows."""
    fakes = [_fake(n) for n in fake_names]
    n = 1 + len(fakes)
    summed = secure_sum(Federation.from_sites([victim, *fakes]), INPUT_NAME, threshold=n, **TREE)
    pos, neg = np.asarray(summed["pos"]).copy(), np.asarray(summed["neg"]).copy()
    pos[LEAVES // 2] -= len(fakes)  # the fakes' rows, one per class, in the leaf of 0.5
    neg[LEAVES // 2] -= len(fakes)
    return np.concatenate([pos, neg])


def test_partners_the_analyst_runs_itself_are_refused():
    sites = _sites(3)
    fed = Federation.from_sites(sites)  # each site's roster: these three sites and their keys
    s0 = sites[0]
    truth = _leaves(s0)
    # Fakes under their own names: on main the sum minus their rows was s0's own leaf
    # counts, exactly, and s0's partner set was then bound to the fakes.
    got = _attempt(lambda: _sybil(s0, ("f1", "f2")))
    assert not isinstance(got, np.ndarray) or not np.array_equal(got, truth)
    assert isinstance(got, DisclosureError) and "not on the roster" in str(got)
    # Fakes that take the names of s0's real partners: their keys are not the roster's.
    got = _attempt(lambda: _sybil(s0, ("s1", "s2")))
    assert not isinstance(got, np.ndarray) or not np.array_equal(got, truth)
    assert isinstance(got, SiteError) and "do not carry their signature" in str(got)
    # Nothing was bound: the real federation still sums, and its sum is the plain sum.
    assert s0.ledger.partners(INPUT_NAME) is None
    summed = secure_sum(fed, INPUT_NAME, **TREE)
    total = sum(_leaves(s) for s in sites)
    np.testing.assert_array_equal(np.r_[summed["pos"], summed["neg"]], total)


@site_function("test.secagg_attacks.zeros", schema={"size": Int(1, 1 << 20)}, release="secure")
def _zeros(ctx: SiteContext, args: dict[str, Any]) -> Reply:
    z = np.zeros(int(args["size"]), np.int64)
    return Reply({"pos": z, "neg": z.copy()}, counts={})


class _SwapInputServer(SecAggServer):
    """A server that asks every site but ``victim`` for zeros of the right layout."""

    def __init__(self, *args: Any, victim: str, size: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.victim, self.size = victim, size

    def _call(self, stage: str, args_by_site: dict) -> dict:
        if stage == STAGE_ADVERTISE_KEYS:
            zeros = {
                KEY_INPUT: "test.secagg_attacks.zeros",
                KEY_INPUT_ARGS: json.dumps({"size": self.size}),
            }
            args_by_site = {
                n: a if n == self.victim else {**a, **zeros} for n, a in args_by_site.items()
            }
        return super()._call(stage, args_by_site)


def test_fake_partners_cannot_thin_a_sites_distributed_dp_noise():
    # On main: s1 with 49 fakes at t = 50 split its noise into 50 shares; its counts came
    # back with 1/50 of a draw's variance (98% exact) while it was charged the full epsilon.
    sites = _sites(3)
    Federation.from_sites(sites)
    s1 = sites[1]
    h, eps, t = 5, 3.0, 20
    fakes = [_fake(f"z{k:02d}") for k in range(t - 1)]
    ddp = {"branching": 2, "height": h, "lo": 0.0, "hi": 1.0, "mode": MODE_DDP}
    ddp |= {"epsilon": eps, "noise": "discrete"}
    server = _SwapInputServer(
        Federation.from_sites([s1, *fakes]),
        INPUT_NAME,
        ddp,
        threshold=t,
        victim="s1",
        size=2 ** (h + 1) - 2,
    )
    got = _attempt(server.run)
    if not isinstance(got, FedrocError):
        d = s1._data
        pos, neg = count_leaves(d.label, d.score, 2**h, 0.0, 1.0)
        exact = np.concatenate([*levels_from_leaves(pos, 2), *levels_from_leaves(neg, 2)])
        noise = np.concatenate([got["pos"], got["neg"]]) - exact
        # The sum holds s1's input alone: at least one full draw of noise on it.
        assert noise.var() > 0.5 * discrete_laplace_variance(epsilon=eps / h)
    assert isinstance(got, DisclosureError) and "not on the roster" in str(got)
    assert s1.ledger.spent() == (0, 0)  # refused before it computed (or charged) anything


# -- p3: keys the analyst substitutes ----------------------------------------------------------
def _mitm(fed: Federation, threshold: int, *, resign: bool = False) -> dict[str, dict]:
    """Relay the analyst's own share-encryption keys in place of the other sites' keys.

    Opens every Shamir share, re-seals it for its recipient, then removes the masks of
    every masked input: each site's own input, in one session. With ``resign`` the analyst
    also signs the substituted keys with an Ed25519 key of its own.
    """
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    names = fed.site_names
    session = _crypto.random_bytes(16).hex()
    sess = session.encode()
    adv = {"session": session, "sites": names, "threshold": threshold, "bits": 64}
    adv |= {"frac_bits": 32, "input": INPUT_NAME, "input_args": json.dumps(TREE)}
    r0 = fed.call_each(FUNCTIONS["advertise_keys"], {n: adv for n in names})
    c_pk = {n: bytes(r0[n]["c_pk"]) for n in names}
    s_pk = {n: bytes(r0[n]["s_pk"]) for n in names}
    layout = r0[names[0]]["layout"]
    fake = {n: _crypto.new_private_key() for n in names}
    forger = Ed25519PrivateKey.generate()
    args1 = {}
    for v in names:
        cp = [c_pk[u] if u == v else _crypto.public_key(fake[u]) for u in names]
        args1[v] = {
            "session": session,
            "active": names,
            "c_pks": b"".join(cp),
            "s_pks": b"".join(s_pk[u] for u in names),
        }
        if "signature" in r0[v]:  # relay the sites' signatures (or forge new ones)
            sigs = [bytes(r0[u]["signature"]) for u in names]
            if resign:
                sigs = [
                    sig if u == v else forger.sign(b"any")
                    for u, sig in zip(names, sigs, strict=True)
                ]
            args1[v]["signatures"] = b"".join(sigs)
    r1 = fed.call_each(FUNCTIONS["share_keys"], args1)
    plain: dict[tuple[str, str], bytes] = {}
    sk_sh: dict[str, dict[int, int]] = {n: {} for n in names}
    b_sh: dict[str, dict[int, int]] = {n: {} for n in names}
    size_share = shamir.SHARE_BYTES
    for v in names:
        blobs = bytes(r1[v]["ciphertexts"])
        size = len(blobs) // len(r1[v]["recipients"])
        for i, u in enumerate(r1[v]["recipients"]):
            key = _crypto.agree(fake[u], c_pk[v], purpose=_crypto.PURPOSE_SHARES, session=sess)
            aad = json.dumps([session, v, u]).encode()
            p = _crypto.open_sealed(key, blobs[i * size : (i + 1) * size], aad)
            plain[(v, u)] = p
            x = int.from_bytes(p[2:4], "big")
            sk_sh[v][x] = shamir.share_from_bytes(p[4 : 4 + size_share])
            b_sh[v][x] = shamir.share_from_bytes(p[4 + size_share :])
    args2 = {}
    for u in names:
        senders = [v for v in names if v != u]
        blobs2 = b"".join(
            _crypto.seal(
                _crypto.agree(fake[v], c_pk[u], purpose=_crypto.PURPOSE_SHARES, session=sess),
                plain[(v, u)],
                json.dumps([session, v, u]).encode(),
            )
            for v in senders
        )
        args2[u] = {"session": session, "active": names, "senders": senders}
        args2[u]["ciphertexts"] = blobs2
    r2 = fed.call_each(FUNCTIONS["masked_input"], args2)
    out = {}
    for idx, v in enumerate(names):
        y = np.asarray(r2[v]["masked"], np.uint64).copy()
        b = shamir.reconstruct(b_sh[v], threshold=threshold).to_bytes(32, "big")
        sk = shamir.reconstruct(sk_sh[v], threshold=threshold).to_bytes(32, "big")
        self_mask = _crypto.derive(b, purpose=_crypto.PURPOSE_SELF_MASK, session=sess)
        y -= _crypto.expand_mask(self_mask, y.size, 64)
        for jdx, u in enumerate(names):
            if u != v:
                seed = _crypto.agree(sk, s_pk[u], purpose=_crypto.PURPOSE_MASK, session=sess)
                m = _crypto.expand_mask(seed, y.size, 64)
                y = y - m if idx < jdx else y + m
        out[v] = _decode_sum(y, layout, bits=64, frac_bits=32)
    fed.call_each(FN_ABORT, {n: {"session": session} for n in names})
    return out


@pytest.mark.parametrize("resign", [False, True])
def test_keys_the_server_substitutes_are_refused(resign):
    sites = _sites(3)
    fed = Federation.from_sites(sites)
    # On main: every site's own leaf counts, exactly, in one session at t = 2, without
    # an unmasking stage (no partner binding) and without any charge.
    got = _attempt(lambda: _mitm(fed, threshold=2, resign=resign))
    if isinstance(got, dict):
        for s in sites:
            mine = np.concatenate([got[s.name]["pos"], got[s.name]["neg"]])
            assert not np.array_equal(mine, _leaves(s))
    assert isinstance(got, SiteError) and "do not carry their signature" in str(got)
    assert all(s.ledger.partners(INPUT_NAME) is None for s in sites)


# -- p2: a different input for each site -------------------------------------------------------
class _PerSiteServer(SecAggServer):
    """A server that rewrites stage 0's request per site (arguments, threshold, members)."""

    def __init__(self, fed: Federation, per_site: dict[str, dict], **kwargs: Any) -> None:
        super().__init__(fed, INPUT_NAME, TREE, **kwargs)
        self.per_site = per_site

    def _call(self, stage: str, args_by_site: dict) -> dict:
        if stage == STAGE_ADVERTISE_KEYS:
            args_by_site = {n: {**a, **self.per_site.get(n, {})} for n, a in args_by_site.items()}
        return super()._call(stage, args_by_site)


def test_a_different_input_for_one_site_is_refused():
    sites = _sites(3)
    fed = Federation.from_sites(sites)
    s0 = sites[0]
    # s0 gets the range [-1, 1]; s1 and s2 a range whose first leaf holds all their rows.
    victim = {**TREE, "lo": -1.0, "hi": 1.0}
    others = {**TREE, "lo": -0.5, "hi": -0.5 + 2.0 * LEAVES}
    per_site = {
        "s0": {KEY_INPUT_ARGS: json.dumps(victim)},
        "s1": {KEY_INPUT_ARGS: json.dumps(others)},
        "s2": {KEY_INPUT_ARGS: json.dumps(others)},
    }
    got = _attempt(_PerSiteServer(fed, per_site).run)
    if not isinstance(got, FedrocError):
        # On main: leaves 1.. of the "pooled" sum were s0's own histogram, with labels.
        pos, neg = count_leaves(s0._data.label, s0._data.score, LEAVES, -1.0, 1.0)
        assert not np.array_equal(np.asarray(got["pos"])[1:], pos[1:])
        assert not np.array_equal(np.asarray(got["neg"])[1:], neg[1:])
    assert isinstance(got, SiteError) and "do not carry their signature" in str(got)
    # Every other session parameter is signed too: a threshold or a member order of its own.
    # (Fresh sites: the first attempt bound each site's tree to the range it was given.)
    every = list(sites)
    for change in ({KEY_THRESHOLD: 3}, {KEY_SITES: ["s1", "s0", "s2"]}):
        fresh = _sites(3)
        every += fresh
        got = _attempt(_PerSiteServer(Federation.from_sites(fresh), {"s0": change}).run)
        assert isinstance(got, SiteError) and "do not carry their signature" in str(got)
    assert all(s.ledger.partners(INPUT_NAME) is None for s in every)
    assert all(s.ledger.spent() == (0, 0) for s in every)


# -- lying about dropouts ----------------------------------------------------------------------
def _split_view(fed: Federation, threshold: int, victim: str = "s4") -> dict | None:
    """Tell some sites ``victim`` dropped (they reveal its mask key's shares) and the others
    that it survived (they reveal its self-mask seed's shares), then open its masked input.

    Returns the victim's input, or None when the shares do not reach the threshold.
    """
    server = SecAggServer(fed, INPUT_NAME, TREE, threshold=threshold)
    server.advertise_keys()
    server.share_keys()
    server.collect_masked_inputs()
    s = server.state
    names, session = s.sites, s.session
    survived_view = names[-2:]  # s3 and the victim
    dropped_view = [n for n in names if n not in survived_view]
    u3 = [n for n in names if n != victim]
    unmask = FUNCTIONS["unmask"]
    told_dropped = fed.call_each(
        unmask, {n: {"session": session, "active": u3} for n in dropped_view}
    )
    told_alive = fed.call_each(
        unmask, {n: {"session": session, "active": names} for n in survived_view}
    )
    sk_shares: dict[int, int] = {}
    b_shares: dict[int, int] = {}
    for replies, kind, target in (
        (told_dropped, "sk", sk_shares),
        (told_alive, "b", b_shares),
    ):
        for w, r in replies.items():
            owners = list(r[f"{kind}_owners"])
            blob = bytes(r[f"{kind}_shares"])
            if victim in owners:
                i = owners.index(victim)
                target[names.index(w) + 1] = shamir.share_from_bytes(
                    blob[i * shamir.SHARE_BYTES : (i + 1) * shamir.SHARE_BYTES]
                )
    if len(sk_shares) < threshold or len(b_shares) < threshold:
        return None
    sess = session.encode()
    sk = shamir.reconstruct(sk_shares, threshold=threshold).to_bytes(32, "big")
    b = shamir.reconstruct(b_shares, threshold=threshold).to_bytes(32, "big")
    y = s.masked[victim].copy()
    y -= _crypto.expand_mask(
        _crypto.derive(b, purpose=_crypto.PURPOSE_SELF_MASK, session=sess), y.size, 64
    )
    me = names.index(victim)
    for j, u in enumerate(names):
        if u != victim:
            seed = _crypto.agree(sk, s.s_pks[u], purpose=_crypto.PURPOSE_MASK, session=sess)
            m = _crypto.expand_mask(seed, y.size, 64)
            y = y - m if me < j else y + m
    return _decode_sum(y, s.layout, bits=64, frac_bits=32)


def test_lying_about_dropouts_cannot_open_an_input():
    # Five sites. At t = 2 (the analyst's number on main) three sites told "s4 dropped"
    # and two told "s4 survived" gave enough shares of both of s4's secrets: its input.
    sites = _sites(5)
    fed = Federation.from_sites(sites)
    truth = _leaves(sites[4])
    got = _attempt(lambda: _split_view(fed, threshold=2))
    if isinstance(got, dict):
        assert not np.array_equal(np.r_[got["pos"], got["neg"]], truth)
    assert isinstance(got, DisclosureError) and "needs at least 3 (a majority)" in str(got)
    # At the sites' minimum (a majority) the same lie yields too few shares of one secret:
    # each site answers the unmasking stage once, and two groups of 3 need 6 of 5 sites.
    assert _split_view(Federation.from_sites(_sites(5, seed=1)), threshold=3) is None


# -- what still works --------------------------------------------------------------------------
def _operator_files(root: Path, names: list[str]) -> dict[str, Path]:
    """What each site's operator configures: its own key file and a roster of the sites."""
    from fedroc.federation.roster import Roster, public_key_bytes, write_signing_key

    keys = {n: write_signing_key(root / f"{n}.key") for n in names}
    Roster({n: public_key_bytes(k) for n, k in keys.items()}).write(root / "roster.toml")
    return {n: root / f"{n}.key" for n in names}


def test_configured_rosters_sum_exactly_with_dropouts_up_to_the_threshold(tmp_path):
    sites = _sites(5, seed=4)
    names = [s.name for s in sites]
    _operator_files(tmp_path, names)
    lines = ['roster = "roster.toml"']
    for s in sites:
        d = s._data
        path = tmp_path / f"{s.name}.csv"
        path.write_text(
            "label,score\n"
            + "".join(f"{int(y)},{float(x)!r}\n" for y, x in zip(d.label, d.score, strict=True))
        )
        lines += [f"[sites.{s.name}]", f'path = "{path.name}"', f'secagg_key = "{s.name}.key"']
    (tmp_path / "federation.toml").write_text("\n".join(lines) + "\n")
    fed = Federation.from_toml(tmp_path / "federation.toml")
    transport = fed.transport
    assert isinstance(transport, InProcessTransport)
    # Two of five drop after sharing keys: the threshold (3, the sites' minimum) still holds.
    flaky = Federation(
        FlakyTransport(transport, {n: drop_from(STAGE_MASKED_INPUT) for n in ("s1", "s3")})
    )
    summed = secure_sum(flaky, INPUT_NAME, threshold=3, allow_dropouts=True, **TREE)
    survivors = [s for s in sites if s.name not in ("s1", "s3")]
    assert summed.sites == [s.name for s in survivors]
    np.testing.assert_array_equal(
        np.r_[summed["pos"], summed["neg"]], sum(_leaves(s) for s in survivors)
    )


def test_a_site_without_a_roster_refuses_secure_aggregation():
    sites = _sites(3)
    fed = Federation(InProcessTransport(sites))  # nobody gave these sites an identity
    with pytest.raises(DisclosureError, match="no roster of sites to aggregate with"):
        secure_sum(fed, "fedroc.class_counts")


def test_deeply_nested_input_arguments_are_refused_as_input_not_a_crash():
    """Since secure aggregation carries 1 MiB of input arguments (1a45066), an analyst can
    send JSON nested 200,000 deep; ``json.loads`` then raises RecursionError at the site,
    which reached the analyst as an unexplained failure. It is an InputError naming the
    input arguments now, and the site stays usable."""
    fed = Federation.from_sites(_sites(3))
    names = fed.site_names
    session = _crypto.random_bytes(16).hex()
    nested = "[" * 200_000 + "]" * 200_000
    adv = {"session": session, "sites": names, "threshold": 2, "bits": 64, "frac_bits": 32,
           "input": INPUT_NAME, "input_args": '{"a": ' + nested + "}"}  # fmt: skip
    with pytest.raises(FedrocError, match="input arguments are not JSON") as refused:
        fed.call_each(FUNCTIONS["advertise_keys"], {n: adv for n in names})
    assert "RecursionError" not in str(refused.value)
    assert fed.call("fedroc.info")["s0"]["n"] == 100
