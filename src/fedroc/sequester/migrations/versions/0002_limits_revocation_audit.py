"""Answer noise and rounding, limits, revocation, DP events, the custodian's audit.

Revision ID: 0002
Revises: 0001

Plans of 0001 keep their behaviour: no rounding, no limits, the sensitivity computed when
loaded. Developers of 0001 stay active with unlimited quotas; their submissions are
counted.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from fedroc.sequester.migrations._steps import add_columns, drop_columns

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add rounding, limits, revocation, DP events and the custodian's audit table."""
    # Plain ADD COLUMN (constant defaults): SQLite does it in place, where a batch copy
    # would have to drop tables that others reference.
    add_columns(
        "plans",
        sa.Column("answer_noise_rate", sa.Float, nullable=True),
        sa.Column("answer_step", sa.Float, nullable=False, server_default="0"),
        sa.Column("sensitivity", sa.Float, nullable=True),
        sa.Column("max_queries", sa.Integer, nullable=True),
        sa.Column("max_submissions", sa.Integer, nullable=True),
        sa.Column("min_changed_images", sa.Float, nullable=False, server_default="0"),
    )
    add_columns(
        "developers",
        sa.Column("active", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("max_queries", sa.Integer, nullable=True),
        sa.Column("max_submissions", sa.Integer, nullable=True),
        sa.Column("n_submissions", sa.Integer, nullable=False, server_default="0"),
        sa.Column("token_rotated_at", sa.Float, nullable=True),
    )
    add_columns("queries", sa.Column("events", sa.Text, nullable=False, server_default="[]"))
    op.create_table(
        "admin_actions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("action", sa.String(40), nullable=False),
        sa.Column("target", sa.String(80), nullable=False),
        sa.Column("details", sa.Text, nullable=False),
    )
    op.execute(
        "UPDATE developers SET n_submissions = (SELECT COUNT(*) FROM submissions "
        "WHERE submissions.developer_id = developers.id)"
    )


def downgrade() -> None:
    """Drop what :func:`upgrade` added."""
    op.drop_table("admin_actions")
    drop_columns("queries", "events")
    drop_columns("developers", "token_rotated_at", "n_submissions", "max_submissions",
                 "max_queries", "active")  # fmt: skip
    drop_columns("plans", "min_changed_images", "max_submissions", "max_queries", "sensitivity",
                 "answer_step", "answer_noise_rate")  # fmt: skip
