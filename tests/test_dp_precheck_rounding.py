"""The DP pre-checks offer only values they accept: one rounding rule for both.

Before a run of several releases, the histogram's local-DP check and the ROC-GLM's check
ask the sites what their limits leave (``fedroc.epsilon_left``) and, where one is short,
name the epsilon that would fit ("give ... X or less"). They rounded differently: the
ROC-GLM floored to 4 decimals then printed 4 significant digits (12.34567 left offered
"12.35", which it then refused), and the histogram rounded down to 3 significant digits
with a relative nudge upwards (599.9999999996 left at a charge of 2 per unit offered "300",
which it then refused: 600 > 599.9999999996 + 1e-12). Both now take the largest value of
3 significant digits whose charge, as the user types it back, passes the one comparison
the sites use too (:func:`fedroc.privacy.policy.largest_fitting`).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from fedroc.data import SiteData
from fedroc.exceptions import InputError
from fedroc.federation import Federation, Site
from fedroc.methods import evaluate
from fedroc.methods.rocglm import distributed_rocglm
from fedroc.privacy import DisclosurePolicy
from tests.test_cli_usability import _three_probability_sites
from tests.test_rocglm import flipped

DELTA = 1.0 / (10 * 300)


def _offered(message: str, name: str) -> float:
    found = re.search(rf"give {name} ([0-9.e+-]+) or less", message)
    assert found, message
    return float(found.group(1))


def _rocglm_refusal_with_12_34567_left() -> tuple[str, list[Site], Federation]:
    """The ROC-GLM pre-check's refusal of epsilon 20 where site 'b' has 12.34567 left (and
    the sites and federation refused)."""
    rng = np.random.default_rng(23)
    y, s = flipped(rng, 900, 0.5)
    limits = (("a", 50.0), ("b", 12.34567), ("c", 50.0))
    sites = [
        Site(name, SiteData.from_arrays(y[i::3], s[i::3]),
             policy=DisclosurePolicy(epsilon_limit=limit))
        for i, (name, limit) in enumerate(limits)
    ]  # fmt: skip
    fed = Federation.from_sites(sites)
    with pytest.raises(InputError) as exc:
        distributed_rocglm(fed, epsilon=20.0, delta=DELTA, sensitivity=0.03, bootstrap=5)
    return str(exc.value), sites, fed


def test_the_rocglm_precheck_accepts_the_epsilon_it_offers():
    message, sites, fed = _rocglm_refusal_with_12_34567_left()
    offered = _offered(message, "epsilon")
    assert offered <= 12.34567, message
    assert [site.ledger.spent()[0] for site in sites] == [0, 0, 0]
    res = distributed_rocglm(fed, epsilon=offered, delta=DELTA, sensitivity=0.03, bootstrap=5)
    assert res.epsilon == offered
    assert [site.ledger.spent()[0] for site in sites] == [offered] * 3


def test_the_histogram_local_precheck_accepts_the_dp_epsilon_it_offers():
    limit = 599.9999999996  # a charge of 2 x 300 is 4e-10 over it
    policies = {k: DisclosurePolicy(epsilon_limit=v) for k, v in {"a": 1e4, "b": limit}.items()}
    fed, _ = _three_probability_sites(7, policies)
    with pytest.raises(InputError) as exc:
        evaluate(fed, "histogram", dp_epsilon=1000.0, dp_mode="local")
    offered = _offered(str(exc.value), "dp_epsilon")
    assert 2 * offered <= limit + 1e-12, str(exc.value)
    res = evaluate(fed, "histogram", dp_epsilon=offered, dp_mode="local")
    assert res.released.epsilon == pytest.approx({"a": 2 * offered, "b": 2 * offered})


def test_largest_fitting_is_the_largest_value_of_three_digits_that_fits():
    """Against brute force: every value of 3 significant digits around it, as printed."""
    from fedroc.privacy.policy import epsilon_fits, largest_fitting

    rng = np.random.default_rng(5)
    cases = [(12.34567, 1.0), (599.9999999996, 2.0), (0.5, 1.0), (3.0, 2.0), (1e-9, 1.0)]
    cases += [
        (float(10 ** rng.uniform(-4, 3)), float(rng.choice([1, 2, 4, 26 / 13]))) for _ in range(300)
    ]
    for left, per_unit in cases:
        x = largest_fitting(left, per_unit)
        assert (
            x == float(f"{x:g}") and len(f"{x:.3e}".split("e")[0].rstrip("0").replace(".", "")) <= 3
        )
        if x > 0:
            assert epsilon_fits(x * per_unit, left), (left, per_unit, x)
        exponent = int(np.floor(np.log10(max(left / per_unit, 1e-300))))
        for e in (exponent - 1, exponent, exponent + 1):
            for k in range(100, 1000):
                v = float(f"{k}e{e - 2}")
                if v > x:
                    assert not epsilon_fits(v * per_unit, left), (left, per_unit, x, v)
                    break
    assert largest_fitting(0.0, 2.0) == 0.0


def test_the_refusals_show_what_is_left_rounded_down():
    """Before: the ROC-GLM refusal said a site "has left of its epsilon limit (12.35)" with
    12.34567 left, and the histogram's list of sites short of budget "'b': 12.35": more
    than is left. Both now round down (fedroc.privacy.policy.shown_left)."""
    message, _, _ = _rocglm_refusal_with_12_34567_left()
    assert "site 'b' has left of its epsilon limit (12.34)" in message, message
    policies = {k: DisclosurePolicy(epsilon_limit=v) for k, v in {"a": 1e4, "b": 12.34567}.items()}
    fed, _ = _three_probability_sites(7, policies)
    with pytest.raises(InputError) as exc:
        evaluate(fed, "histogram", dp_epsilon=1000.0, dp_mode="local")
    assert "the epsilon left at site(s) 'b': 12.34;" in str(exc.value), str(exc.value)


def test_shown_left_is_the_largest_four_digit_value_not_above_what_is_left():
    """Against brute force on the decimal digits: never more than left, one step up is."""
    from decimal import Decimal

    from fedroc.privacy.policy import shown_left

    rng = np.random.default_rng(8)
    cases = [12.34567, 0.99996, 0.3, 5.0, 99999.9, 1e-9, 0.0025]
    cases += [float(10 ** rng.uniform(-6, 5)) for _ in range(500)]
    for left in cases:
        shown = Decimal(shown_left(left))
        exact = Decimal(repr(left))
        assert shown <= exact, (left, shown)
        assert len(shown.normalize().as_tuple().digits) <= 4, (left, shown)
        step = Decimal(1).scaleb(exact.adjusted() - 3)
        assert shown + step > exact, (left, shown)
    assert shown_left(-2.0) == "0" and shown_left(0.0) == "0"
