"""Each invoice keeps its better offer check and its usage compared, and its billing period
what later checks need of its usage (issue 34).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None


def upgrade() -> None:
    op.add_column("documents", sa.Column("better_offer", sa.Text(), nullable=True))
    op.add_column("documents", sa.Column("usage", sa.Text(), nullable=True))
    op.add_column("billing_periods", sa.Column("usage", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("billing_periods") as batch:
        batch.drop_column("usage")
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("usage")
        batch.drop_column("better_offer")
