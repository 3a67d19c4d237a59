"""Disclosure policy, differential-privacy mechanisms and the privacy budget ledger."""

from fedroc.privacy.ledger import BudgetLedger, DPEvent, ledger_path_for
from fedroc.privacy.mechanisms import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    continuous_laplace_shares,
    discrete_laplace_shares,
    discrete_laplace_variance,
    gaussian_mechanism,
    gaussian_noise,
    laplace_mechanism,
    laplace_noise,
)
from fedroc.privacy.policy import DEFAULT_EPSILON_LIMIT, DisclosurePolicy

__all__ = [
    "DEFAULT_EPSILON_LIMIT",
    "BudgetLedger",
    "DPEvent",
    "DisclosurePolicy",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "continuous_laplace_shares",
    "discrete_laplace_shares",
    "discrete_laplace_variance",
    "gaussian_mechanism",
    "gaussian_noise",
    "laplace_mechanism",
    "laplace_noise",
    "ledger_path_for",
]
