"""A test set's noisy prevalence, counted once, on its own row.

Revision ID: 0004
Revises: 0003

A test set's count of positives is released with differential privacy at most once (R40),
and plans without the custodian's prevalence reuse it. Since 0003 the first plan that
counted it held it; "once" was kept by a lock inside one process, and two workers of one
service could each count it. The test set's row now holds the count, set only where none
is (one conditional UPDATE). Backfilled from each set's first plan that counted one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from fedroc.sequester.migrations._steps import add_columns, drop_columns

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``test_sets.counted_prevalence`` and ``test_sets.prevalence_epsilon``, backfilled."""
    add_columns(
        "test_sets",
        sa.Column("counted_prevalence", sa.Float, nullable=True),
        sa.Column("prevalence_epsilon", sa.Float, nullable=True),
    )
    first = (
        "(SELECT MIN(p.id) FROM plans p WHERE p.test_set_id = test_sets.id "
        "AND p.prevalence_epsilon IS NOT NULL)"
    )
    op.execute(
        "UPDATE test_sets SET "
        f"counted_prevalence = (SELECT prevalence FROM plans WHERE plans.id = {first}), "
        f"prevalence_epsilon = (SELECT prevalence_epsilon FROM plans WHERE plans.id = {first})"
    )


def downgrade() -> None:
    """Drop what :func:`upgrade` added, in place.

    Batch mode's copy of test_sets would drop the original, which every plan references:
    with SQLite's foreign keys on, "FOREIGN KEY constraint failed". SQLite drops a plain
    column in place since 3.35 (PostgreSQL always has).
    """
    drop_columns("test_sets", "prevalence_epsilon", "counted_prevalence")
