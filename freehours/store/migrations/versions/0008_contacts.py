"""Customer contacts: name, addresses, email address and delivery preference (issue 34); each
document keeps the name and addresses it printed; the retailer's offers, every version.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None


def upgrade() -> None:
    op.create_table(
        "customer_contacts",
        sa.Column("nmi", sa.String(10), nullable=False),
        sa.Column("name", sa.String(80), nullable=False),
        sa.Column("supply_address", sa.Text(), nullable=False),
        sa.Column("billing_address", sa.Text(), nullable=False),
        sa.Column("email", sa.String(254), nullable=True),
        sa.Column("delivery", sa.String(5), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "delivery IN ('email', 'post')", name=op.f("ck_customer_contacts_delivery")
        ),
        sa.CheckConstraint(
            "delivery = 'post' OR email IS NOT NULL",
            name=op.f("ck_customer_contacts_email_delivery"),
        ),
        sa.ForeignKeyConstraint(
            ["nmi"], ["customers.nmi"], name=op.f("fk_customer_contacts_nmi_customers")
        ),
        sa.PrimaryKeyConstraint("nmi", name=op.f("pk_customer_contacts")),
    )

    op.add_column("documents", sa.Column("customer", sa.Text(), nullable=True))
    op.create_table(
        "offers",
        sa.Column("offer_id", sa.String(100), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("source", sa.String(4), nullable=False),
        sa.Column("region", sa.String(3), nullable=False),
        sa.Column("distributors", sa.Text(), nullable=False),
        sa.Column("controlled_load", sa.Boolean(), nullable=False),
        sa.Column("effective_from", sa.Date(), nullable=True),
        sa.Column("effective_to", sa.Date(), nullable=True),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("source IN ('cdr', 'plan')", name=op.f("ck_offers_source")),
        sa.PrimaryKeyConstraint("offer_id", "version", name=op.f("pk_offers")),
    )
    op.create_index(op.f("ix_offers_region"), "offers", ["region"])


def downgrade() -> None:
    op.drop_table("offers")
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("customer")
    op.drop_table("customer_contacts")
