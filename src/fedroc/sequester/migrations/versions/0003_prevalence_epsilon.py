"""The epsilon of a plan's noisy prevalence.

Revision ID: 0003
Revises: 0002

A plan created without the custodian's prevalence now draws its subsets at the test set's
prevalence counted with differential privacy, and stores that count's epsilon (added to
the plan's ``epsilon_guarantee``). Plans of 0002 keep what they stored: NULL here, and
their prevalence is the custodian's or the test set's exact one, which their public part
shows (re-create such a plan to stop publishing its count of positives).
"""

from __future__ import annotations

import sqlalchemy as sa

from fedroc.sequester.migrations._steps import add_columns, drop_columns

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``plans.prevalence_epsilon``."""
    add_columns("plans", sa.Column("prevalence_epsilon", sa.Float, nullable=True))


def downgrade() -> None:
    """Drop ``plans.prevalence_epsilon``."""
    drop_columns("plans", "prevalence_epsilon")
