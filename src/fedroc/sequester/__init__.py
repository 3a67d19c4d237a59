"""Sequestered test data with Thresholdout answers and the load-factor planner (paper 2).

Tang, Whitney, Myers & Giger, "Sequestration of imaging studies in MIDRC: controlling for
ingenuous and disingenuous use of sequestered data" (papers/thresholdout-auc-midrc-tang.md,
papers/NOTES.md section 2).

- :mod:`fedroc.sequester.planner`: load factor, subset size, eq.-3 budget, epsilon, power,
  AUC SE, the inverse questions, and the paper's Figures 3 and 5.
- :mod:`fedroc.sequester.engine`: the image <-> subset hash table, h-Thresholdout_AUC and
  Dwork's Thresholdout (threat model there).
- :mod:`fedroc.sequester.db` and :mod:`fedroc.sequester.service`: the REST service
  (FastAPI, SQLAlchemy; ``fedroc sequester serve``). They need the ``service`` extra and
  are not imported here.
"""

from fedroc.sequester.engine import (
    Answer,
    BudgetExhausted,
    Mechanism,
    Session,
    SubsetTable,
    draw_subsets,
    subset_auc,
    subset_aucs,
)
from fedroc.sequester.planner import (
    Plan,
    auc_se_at,
    epsilon_of,
    load_factor,
    load_factor_for_budget,
    min_subset_size,
    noise_rate_for_budget,
    plan,
    power_grid,
    subset_size,
    subset_size_for_budget,
    thresholdout_budget,
)

__all__ = [
    "Answer",
    "BudgetExhausted",
    "Mechanism",
    "Plan",
    "Session",
    "SubsetTable",
    "auc_se_at",
    "draw_subsets",
    "epsilon_of",
    "load_factor",
    "load_factor_for_budget",
    "min_subset_size",
    "noise_rate_for_budget",
    "plan",
    "power_grid",
    "subset_auc",
    "subset_aucs",
    "subset_size",
    "subset_size_for_budget",
    "thresholdout_budget",
]
