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

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("plans") as batch:
        batch.add_column(sa.Column("answer_noise_rate", sa.Float, nullable=True))
        batch.add_column(sa.Column("answer_step", sa.Float, nullable=False, server_default="0"))
        batch.add_column(sa.Column("sensitivity", sa.Float, nullable=True))
        batch.add_column(sa.Column("max_queries", sa.Integer, nullable=True))
        batch.add_column(sa.Column("max_submissions", sa.Integer, nullable=True))
        batch.add_column(
            sa.Column("min_changed_images", sa.Float, nullable=False, server_default="0")
        )
    with op.batch_alter_table("developers") as batch:
        batch.add_column(sa.Column("active", sa.Boolean, nullable=False, server_default=sa.true()))
        batch.add_column(sa.Column("max_queries", sa.Integer, nullable=True))
        batch.add_column(sa.Column("max_submissions", sa.Integer, nullable=True))
        batch.add_column(sa.Column("n_submissions", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("token_rotated_at", sa.Float, nullable=True))
    with op.batch_alter_table("queries") as batch:
        batch.add_column(sa.Column("events", sa.Text, nullable=False, server_default="[]"))
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
    op.drop_table("admin_actions")
    with op.batch_alter_table("queries") as batch:
        batch.drop_column("events")
    with op.batch_alter_table("developers") as batch:
        for col in ("token_rotated_at", "n_submissions", "max_submissions", "max_queries",
                    "active"):  # fmt: skip
            batch.drop_column(col)
    with op.batch_alter_table("plans") as batch:
        for col in ("min_changed_images", "max_submissions", "max_queries", "sensitivity",
                    "answer_step", "answer_noise_rate"):  # fmt: skip
            batch.drop_column(col)
