"""The public cap on one image's copies in a subset.

Revision ID: 0005
Revises: 0004

Drawn with replacement and uncapped, the most copies of one image in a subset set the AUC's
sensitivity, hence the plan's public epsilon, and that maximum depends on the class sizes:
in small test sets it told one image's label (scripts/results/sequester_neighbours.md).
Plans now draw at most ``max_copies`` copies, a public setting the sensitivity follows
from. Plans stored before keep NULL, their table and the sensitivity they stored.
"""

from __future__ import annotations

import sqlalchemy as sa

from fedroc.sequester.migrations._steps import add_columns, drop_columns

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``plans.max_copies`` (NULL for the plans already stored)."""
    add_columns("plans", sa.Column("max_copies", sa.Integer, nullable=True))


def downgrade() -> None:
    """Drop ``plans.max_copies``."""
    drop_columns("plans", "max_copies")
