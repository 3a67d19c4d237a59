"""A site's disclosure policy: what it may release, checked on every reply.

The minimum cell count ``min_count`` (q) follows DataSHIELD's privacy level: no aggregate
computed over fewer than q rows leaves a site. Noisy values (differential privacy) and
secret shares are not aggregates in this sense; the policy decides whether they may leave
at all and caps the privacy budget they spend.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from fedroc.exceptions import DisclosureError, InputError
from fedroc.privacy.ledger import BudgetLedger, DPEvent

__all__ = ["DisclosurePolicy", "ReleaseKind"]

ReleaseKind = Literal["aggregate", "noisy", "shares"]
RELEASE_KINDS: tuple[str, ...] = ("aggregate", "noisy", "shares")


@dataclass(frozen=True)
class DisclosurePolicy:
    """What a site may release.

    Parameters
    ----------
    min_count : int, default 5
        Smallest number of rows an aggregate may be computed from (q).
    allow_noisy : bool, default True
        Whether differentially private noisy values may leave the site.
    allow_shares : bool, default True
        Whether secret shares or masked vectors may leave the site.
    epsilon_limit, delta_limit : float or None
        Total (epsilon, delta) the site will spend over its lifetime (basic composition);
        None for no limit.
    allowed_functions : frozenset of str or None
        If given, the only site functions the site will run.
    """

    min_count: int = 5
    allow_noisy: bool = True
    allow_shares: bool = True
    epsilon_limit: float | None = None
    delta_limit: float | None = None
    allowed_functions: frozenset[str] | None = field(default=None)

    def __post_init__(self) -> None:
        if int(self.min_count) != self.min_count or self.min_count < 1:
            raise InputError(f"min_count must be a positive integer; got {self.min_count!r}")
        for name in ("epsilon_limit", "delta_limit"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise InputError(f"{name} must be >= 0; got {value!r}")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> DisclosurePolicy:
        known = {
            "min_count",
            "allow_noisy",
            "allow_shares",
            "epsilon_limit",
            "delta_limit",
            "allowed_functions",
        }
        unknown = set(values) - known
        if unknown:
            raise InputError(f"unknown policy setting(s) {sorted(unknown)}; known: {sorted(known)}")
        kwargs = dict(values)
        if kwargs.get("allowed_functions") is not None:
            kwargs["allowed_functions"] = frozenset(kwargs["allowed_functions"])
        return cls(**kwargs)

    @classmethod
    def from_toml(cls, path: str | Path) -> DisclosurePolicy:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
        return cls.from_mapping(data.get("policy", data))

    def check_function(self, site: str, function: str) -> None:
        if self.allowed_functions is not None and function not in self.allowed_functions:
            raise DisclosureError(
                f"site {site!r} refuses {function!r}: not among the functions its policy allows",
                site=site,
                function=function,
            )

    def check_release(
        self,
        *,
        site: str,
        function: str,
        kind: str,
        counts: Mapping[str, Any],
        dp: Iterable[DPEvent],
        ledger: BudgetLedger,
    ) -> None:
        """Raise :class:`DisclosureError` if this reply may not leave the site."""
        if kind not in RELEASE_KINDS:
            raise DisclosureError(
                f"site {site!r} refuses the reply of {function!r}: unknown release kind {kind!r}",
                site=site,
                function=function,
            )
        for what, count in counts.items():
            arr = np.atleast_1d(np.asarray(count))
            if arr.size and (arr < self.min_count).any():
                smallest = arr[np.argmin(arr)].item()
                raise DisclosureError(
                    f"site {site!r} refuses {function!r}: the {what} count is {smallest}, below "
                    f"the minimum of {self.min_count} rows per released aggregate",
                    site=site,
                    function=function,
                )
        events = list(dp)
        if kind == "noisy":
            if not self.allow_noisy:
                raise DisclosureError(
                    f"site {site!r} refuses {function!r}: its policy forbids releasing noisy "
                    "values",
                    site=site,
                    function=function,
                )
            if not events:
                raise DisclosureError(
                    f"site {site!r} refuses {function!r}: a noisy release must state its "
                    "differential-privacy mechanism",
                    site=site,
                    function=function,
                )
        if kind == "shares" and not self.allow_shares:
            raise DisclosureError(
                f"site {site!r} refuses {function!r}: its policy forbids releasing shares",
                site=site,
                function=function,
            )
        if events:
            eps, delta = ledger.spent_with(events)
            if self.epsilon_limit is not None and eps > self.epsilon_limit + 1e-12:
                raise DisclosureError(
                    f"site {site!r} refuses {function!r}: it would spend epsilon {eps:.4g} in "
                    f"total, above its limit of {self.epsilon_limit:.4g}",
                    site=site,
                    function=function,
                )
            if self.delta_limit is not None and delta > self.delta_limit + 1e-15:
                raise DisclosureError(
                    f"site {site!r} refuses {function!r}: it would spend delta {delta:.4g} in "
                    f"total, above its limit of {self.delta_limit:.4g}",
                    site=site,
                    function=function,
                )
