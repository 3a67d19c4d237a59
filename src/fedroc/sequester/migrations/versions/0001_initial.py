"""The schema of fedroc 0.1 (created then by ``metadata.create_all``).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the tables of fedroc 0.1."""
    op.create_table(
        "test_sets",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("n_images", sa.Integer, nullable=False),
        sa.Column("n_pos", sa.Integer, nullable=False),
        sa.Column("image_ids", sa.Text, nullable=False),
        sa.Column("labels", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "plans",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("test_set_id", sa.Integer, sa.ForeignKey("test_sets.id"), nullable=False),
        sa.Column("mechanism", sa.String(40), nullable=False),
        sa.Column("n_subsets", sa.Integer, nullable=False),
        sa.Column("subset_size", sa.Integer, nullable=False),
        sa.Column("load_factor", sa.Float, nullable=False),
        sa.Column("noise_rate", sa.Float, nullable=False),
        sa.Column("threshold", sa.Float, nullable=False),
        sa.Column("budget", sa.Float, nullable=False),
        sa.Column("budget_units", sa.Integer, nullable=False),
        sa.Column("epsilon", sa.Float, nullable=False),
        sa.Column("prevalence", sa.Float, nullable=False),
        sa.Column("replace", sa.Boolean, nullable=False),
        sa.Column("seed", sa.Text, nullable=False),
        sa.Column("members", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "developers",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("plan_id", sa.Integer, sa.ForeignKey("plans.id"), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("budget_total", sa.Integer, nullable=False),
        sa.Column("budget_remaining", sa.Integer, nullable=False),
        sa.Column("n_queries", sa.Integer, nullable=False),
        sa.Column("threshold_noise", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_developers_token_hash", "developers", ["token_hash"], unique=True)
    op.create_table(
        "submissions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("developer_id", sa.Integer, sa.ForeignKey("developers.id"), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("scores", sa.LargeBinary, nullable=False),
        sa.Column("whole_auc", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_submissions_developer_id", "submissions", ["developer_id"])
    op.create_table(
        "queries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("developer_id", sa.Integer, sa.ForeignKey("developers.id"), nullable=False),
        sa.Column("submission_id", sa.Integer, sa.ForeignKey("submissions.id"), nullable=False),
        sa.Column("subset_id", sa.Integer, nullable=False),
        sa.Column("answer", sa.Float, nullable=False),
        sa.Column("spent", sa.Integer, nullable=False),
        sa.Column("budget_after", sa.Integer, nullable=False),
        sa.Column("holdout", sa.Float, nullable=False),
        sa.Column("reference", sa.Float, nullable=False),
        sa.Column("noise", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_queries_developer_id", "queries", ["developer_id"])


def downgrade() -> None:
    """Drop every table."""
    for table in ("queries", "submissions", "developers", "plans", "test_sets"):
        op.drop_table(table)
