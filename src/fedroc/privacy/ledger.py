"""Privacy as data: a release is a frozen event; a ledger composes them.

Composition is basic (sums of epsilon and delta), which is valid for any mix of
mechanisms; tighter accounting can be added without changing the events.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

__all__ = ["BudgetLedger", "DPEvent"]


@dataclass(frozen=True)
class DPEvent:
    """One differentially private release.

    Attributes
    ----------
    mechanism : str
        ``"gaussian"``, ``"analytic-gaussian"``, ``"laplace"``, ``"discrete-laplace"``, ...
    epsilon, delta : float
        Guarantee of this release alone.
    sensitivity : float
        The sensitivity the noise was calibrated to.
    noise_scale : float
        Standard deviation (Gaussian) or scale b (Laplace family) of the noise.
    size : int
        Number of noisy values released.
    note : str
        What was released (for the audit log and the result).
    """

    mechanism: str
    epsilon: float
    delta: float
    sensitivity: float
    noise_scale: float
    size: int = 1
    note: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DPEvent:
        return cls(**json.loads(text))


@dataclass
class BudgetLedger:
    """Events spent so far, composed by summing epsilon and delta."""

    events: list[DPEvent] = field(default_factory=list)

    def spent(self) -> tuple[float, float]:
        return (sum(e.epsilon for e in self.events), sum(e.delta for e in self.events))

    def spent_with(self, more: Iterable[DPEvent]) -> tuple[float, float]:
        extra = list(more)
        eps, delta = self.spent()
        return (eps + sum(e.epsilon for e in extra), delta + sum(e.delta for e in extra))

    def record(self, events: Iterable[DPEvent]) -> None:
        self.events.extend(events)
