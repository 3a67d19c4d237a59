"""Disclosure policy, differential-privacy mechanisms and the privacy budget ledger."""

from fedroc.privacy import mechanisms
from fedroc.privacy.ledger import BudgetLedger, DPEvent, ledger_path_for
from fedroc.privacy.mechanisms import *  # noqa: F403  (the mechanisms' public names)
from fedroc.privacy.policy import DEFAULT_EPSILON_LIMIT, DisclosurePolicy, is_class_count_refusal

__all__ = [
    "DEFAULT_EPSILON_LIMIT",
    "BudgetLedger",
    "DPEvent",
    "DisclosurePolicy",
    "is_class_count_refusal",
    "ledger_path_for",
]
__all__ += mechanisms.__all__
