"""The sequestered test-set service (paper 2), an application on :mod:`fedroc.methods.sequester`.

- :mod:`fedroc.sequester.service`: the REST API (FastAPI; ``fedroc sequester serve``),
  its guard (authentication before the body, body size, rate limits) and a small client.
- :mod:`fedroc.sequester.db`: its state in SQLite or PostgreSQL, migrated with Alembic.

Both need the ``service`` extra (``pip install 'fedroc[service]'``) and are not imported
here. The method itself (planner, hash table, mechanisms, figures) lives in
:mod:`fedroc.methods.sequester`; its public names are re-exported here so that
``from fedroc.sequester import plan, Session, ...`` keeps working. The threat model is in
:mod:`fedroc.methods.sequester`.
"""

from fedroc.methods.sequester import (
    DEFAULT_MECHANISM,
    MECHANISMS,
    Answer,
    BudgetExhausted,
    Limits,
    Mechanism,
    NearDuplicate,
    Plan,
    PlanWarning,
    QuotaExceeded,
    Session,
    SubsetTable,
    answer_step,
    auc_se_at,
    auc_sensitivity,
    draw_subsets,
    engine,
    epsilon_of,
    figures,
    load_factor,
    load_factor_for_budget,
    mechanism,
    min_subset_size,
    noise_rate_for_budget,
    plan,
    planner,
    power_grid,
    rank_distance,
    subset_auc,
    subset_aucs,
    subset_size,
    subset_size_for_budget,
    suggested_noise_rate,
    thresholdout_budget,
)

__all__ = [
    "DEFAULT_MECHANISM",
    "MECHANISMS",
    "Answer",
    "BudgetExhausted",
    "Limits",
    "Mechanism",
    "NearDuplicate",
    "Plan",
    "PlanWarning",
    "QuotaExceeded",
    "Session",
    "SubsetTable",
    "answer_step",
    "auc_se_at",
    "auc_sensitivity",
    "draw_subsets",
    "engine",
    "epsilon_of",
    "figures",
    "load_factor",
    "load_factor_for_budget",
    "mechanism",
    "min_subset_size",
    "noise_rate_for_budget",
    "plan",
    "planner",
    "power_grid",
    "rank_distance",
    "subset_auc",
    "subset_aucs",
    "subset_size",
    "subset_size_for_budget",
    "suggested_noise_rate",
    "thresholdout_budget",
]
