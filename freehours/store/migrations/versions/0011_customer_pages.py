"""Each customer's own page, opened by signed links naming its random id (issue 35).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision: str | None = "0010"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None

_AT = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "customer_pages",
        sa.Column("page_id", sa.String(22), nullable=False),
        sa.Column("nmi", sa.String(10), nullable=False),
        sa.Column("created_at", _AT, nullable=False),
        sa.Column("revoked_at", _AT, nullable=True),
        sa.ForeignKeyConstraint(
            ["nmi"], ["customers.nmi"], name=op.f("fk_customer_pages_nmi_customers")
        ),
        sa.PrimaryKeyConstraint("page_id", name=op.f("pk_customer_pages")),
    )
    op.create_index(op.f("ix_customer_pages_nmi"), "customer_pages", ["nmi"])


def downgrade() -> None:
    op.drop_table("customer_pages")
