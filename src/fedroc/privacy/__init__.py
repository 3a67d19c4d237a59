"""Disclosure policy, differential-privacy mechanisms and the privacy budget ledger."""

from fedroc.privacy.ledger import BudgetLedger, DPEvent
from fedroc.privacy.mechanisms import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    continuous_laplace_shares,
    discrete_laplace_shares,
    discrete_laplace_variance,
    gaussian_noise,
    laplace_noise,
)
from fedroc.privacy.policy import DisclosurePolicy

__all__ = [
    "BudgetLedger",
    "DPEvent",
    "DisclosurePolicy",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "continuous_laplace_shares",
    "discrete_laplace_shares",
    "discrete_laplace_variance",
    "gaussian_noise",
    "laplace_noise",
]
