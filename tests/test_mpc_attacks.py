"""The curious analyst of issue 16 against the MPC cluster: every probe must fail.

On the code before bundles were bound to one job (measured in this branch's history with
the same probes): submitting site A's bundle alone returned A's own AUROC; two more jobs,
each mixing A's bundle with one crafted one-sample bundle (a negative at -1e308, a positive
at +1e308), gave A's class counts exactly (P = 145, N = 155) by differencing; a crafted
negative at score t gave A's count of positives above t. And the 52-bit AUROC pinned the
class counts of a pooled job in most random cases.

Here the analyst holds A's and B's genuine bundles of one job (and may ask the sites for
more) and talks to a real cluster (three processes, TLS); each probe is refused, and the
opened AUROC at the default precision leaves the class counts open.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from fedroc.data import SiteData
from fedroc.exceptions import InputError, ProtocolError
from fedroc.federation import Federation, Site
from fedroc.methods.mpc import SHARE_FUNCTION, request_bundles  # registers the site function
from fedroc.metrics import roc_auc
from fedroc.mpc import JobTerms, LocalCluster, make_bundle, new_owner_key
from fedroc.mpc.local import secure_auc_local
from fedroc.mpc.owner import owner_public_bytes

REFUSED = "refused"


@pytest.fixture(scope="module")
def setting():
    rng = np.random.default_rng(16)
    data = {
        "A": (rng.integers(0, 2, 300), np.round(rng.normal(size=300), 2)),
        "B": (rng.integers(0, 2, 200), np.round(rng.normal(size=200), 2)),
    }
    data["A"] = (data["A"][0], data["A"][1] + data["A"][0])
    keys = {name: new_owner_key() for name in data}
    registry = {name: owner_public_bytes(k) for name, k in keys.items()}
    with LocalCluster(owners=registry) as cluster:
        proxies = cluster.proxy_key_bytes()
        terms = JobTerms.create(list(data), proxies)
        bundles = {
            name: make_bundle(name, y, s, terms, keys[name]) for name, (y, s) in data.items()
        }
        yield cluster, data, keys, proxies, terms, bundles


def crafted(owner, labels, scores, terms, key=None):
    """A bundle the analyst makes itself (its own key, its own data)."""
    return make_bundle(owner, labels, scores, terms, key or new_owner_key())


def test_the_genuine_job_runs_once(setting):
    cluster, data, _keys, _p, _terms, bundles = setting
    result = cluster.run([bundles["A"], bundles["B"]])
    y = np.concatenate([data["A"][0], data["B"][0]])
    s = np.concatenate([data["A"][1], data["B"][1]])
    assert result.outputs.auc == round(roc_auc(y, s) * 2**14) / 2**14
    with pytest.raises(ProtocolError, match="was run before"):
        cluster.run([bundles["A"], bundles["B"]])


def test_a_bundle_alone_does_not_give_its_owners_auc(setting):
    cluster, *_rest, bundles = setting
    with pytest.raises(
        ProtocolError, match=r"refused by proxy 0: .*bundles of \['B'\] are missing"
    ):
        cluster.run([bundles["A"]])


def test_class_counts_by_differencing_with_crafted_bundles_fail(setting):
    cluster, _data, _keys, proxies, terms, bundles = setting
    # The analyst re-labels a crafted one-sample bundle as B, under A's terms...
    for label, score in ((0, -1e308), (1, 1e308), (0, 0.5)):
        fake_b = crafted("B", [label], [score], terms)
        with pytest.raises(ProtocolError, match="not the one registered"):
            cluster.run([bundles["A"], fake_b])
    # ... or names a stranger; A's signed owners are A and B.
    stranger = crafted("X", [0], [-1e308], JobTerms(terms.job, ("A", "B", "X"), proxies))
    with pytest.raises(ProtocolError, match="different jobs"):
        cluster.run([bundles["A"], bundles["B"], stranger], strict=False)


def test_altered_terms_subsets_and_duplicates_are_refused(setting):
    cluster, data, keys, proxies, terms, bundles = setting
    # Asking for full precision with bundles signed for 14 bits: the signatures break.
    loud = JobTerms(terms.job, terms.owners, proxies, frac_bits=52)
    forged = [
        type(b)(b.owner, b.n, loud, b.owner_key, b.signature, b.box0, b.box1)
        for b in bundles.values()
    ]
    with pytest.raises(ProtocolError, match="signature of 'A' does not match"):
        cluster.run(forged)
    with pytest.raises(ProtocolError, match=r"owner\(s\) \['A'\] appear more than once"):
        cluster.run([bundles["A"], bundles["A"], bundles["B"]])
    # A's genuine key with crafted data still needs B's genuine bundle and an unused job.
    again = JobTerms.create(["A", "B"], proxies)
    with pytest.raises(ProtocolError, match="bundles of \\['B'\\] are missing"):
        cluster.run([make_bundle("A", *data["A"], again, keys["A"])])


def test_sites_authorise_one_job_with_the_owners_they_are_told():
    """At the site: a second job, a job with fewer owners, or more precision is refused."""
    rng = np.random.default_rng(5)
    sites = [
        Site(n, SiteData.from_arrays(rng.integers(0, 2, 40), rng.normal(size=40))) for n in "AB"
    ]
    fed = Federation.from_sites(sites)
    proxies = (bytes(range(32)), bytes(range(1, 33)))

    def ask(owners, sites=None, **params):
        terms = JobTerms.create(owners, proxies, **params)
        return request_bundles(Federation.from_sites(sites) if sites else fed, terms)

    with pytest.raises(Exception, match="at least 2 data owners"):
        ask(["A"], sites=[sites[0]])
    with pytest.raises(Exception, match="at most 14 bits of precision; asked 52"):
        ask(["A", "B"], frac_bits=52)
    with pytest.raises(Exception, match="minimum class count 2 is below"):
        ask(["A", "B"], min_class_count=2)
    ask(["A", "B"])  # the one job
    with pytest.raises(Exception, match="allow 1"):
        ask(["A", "B"])  # a second job, even with the same owners
    with pytest.raises(Exception, match="not among its owners"):
        ask(["B", "X"], sites=[sites[0]])


def test_a_sites_authorisation_survives_a_restart(tmp_path):
    """The one-job rule is kept in the site's persistent ledger, beside its audit log."""
    rng = np.random.default_rng(6)
    data = SiteData.from_arrays(rng.integers(0, 2, 30), rng.normal(size=30))
    proxies = (bytes(range(32)), bytes(range(1, 33)))

    def ask(site):
        terms = JobTerms.create(["A", "B"], proxies)
        return site.handle(
            SHARE_FUNCTION,
            {
                "job": terms.job,
                "owners": list(terms.owners),
                "proxy0_key": proxies[0],
                "proxy1_key": proxies[1],
                **terms.params(),
            },
        )

    ask(Site("A", data, audit=tmp_path / "A.jsonl"))
    again = Site("A", data, audit=tmp_path / "A.jsonl")  # restarted: a new process, say
    with pytest.raises(InputError, match="has authorised 1 MPC job"):
        ask(again)


def _pinned(auc: float, n: int, bits: int, m: int) -> list[int]:
    """Class counts P (N = n - P) for which some AUROC k / (2 P N) rounds to ``auc``."""
    v = Fraction(auc)
    half = Fraction(1, 2 ** (bits + 1))
    out = []
    for p in range(m, n - m + 1):
        den = 2 * p * (n - p)
        lo, hi = (v - half) * den, (v + half) * den
        k = -((-lo.numerator) // lo.denominator)  # ceil(lo)
        if k <= hi:
            out.append(p)
    return out


def test_full_precision_pins_the_class_counts_and_the_default_does_not():
    rng = np.random.default_rng(20)
    pinned_full, candidates_default = 0, []
    for _ in range(20):
        sizes = rng.integers(60, 140, 3)
        owners = [(rng.integers(0, 2, k), rng.normal(size=k)) for k in sizes]
        for y, s in owners:
            s += y * rng.uniform(0.2, 1.5)
        n = int(sum(sizes))
        p_true = int(sum(y.sum() for y, _ in owners))
        full = roc_auc(
            np.concatenate([y for y, _ in owners]), np.concatenate([s for _, s in owners])
        )
        # P and N enter 2 P N symmetrically: pinned means "to {P, N}".
        pinned_full += set(_pinned(full, n, 52, 5)) <= {p_true, n - p_true}
        rounded = round(full * 2**14) / 2**14
        cands = _pinned(rounded, n, 14, 5)
        assert p_true in cands
        candidates_default.append(len(cands))
    assert pinned_full >= 15  # the attack works on exact AUROCs
    # At 14 bits every case leaves many candidates for P.
    assert min(candidates_default) >= 100, candidates_default


def test_the_engine_opens_the_rounded_value_the_pinning_test_assumes():
    rng = np.random.default_rng(21)
    owners = [(rng.integers(0, 2, 90), rng.normal(size=90)) for _ in range(2)]
    out = secure_auc_local(owners).outputs
    y = np.concatenate([o[0] for o in owners])
    s = np.concatenate([o[1] for o in owners])
    assert out.auc == round(roc_auc(y, s) * 2**14) / 2**14
    with pytest.raises(InputError):
        JobTerms.create(["A"], (b"x" * 32, b"y" * 32), frac_bits=53)
