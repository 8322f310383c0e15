"""Initial schema: meter data as day rows, plans, customers.

Revision ID: 0001
Revises: none
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None


def upgrade() -> None:
    op.create_table(
        "meter_days",
        sa.Column("nmi", sa.String(10), nullable=False),
        sa.Column("suffix", sa.String(2), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("interval_minutes", sa.SmallInteger(), nullable=False),
        sa.Column("uom", sa.String(5), nullable=False),
        sa.Column("interval_values", sa.Text(), nullable=False),
        sa.Column("qualities", sa.Text(), nullable=False),
        sa.Column("update_datetime", sa.DateTime(timezone=True), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "interval_minutes IN (5, 15, 30)", name=op.f("ck_meter_days_interval_minutes")
        ),
        sa.CheckConstraint(
            "length(qualities) * interval_minutes = 1440", name=op.f("ck_meter_days_whole_day")
        ),
        sa.PrimaryKeyConstraint("nmi", "suffix", "day", name=op.f("pk_meter_days")),
    )
    op.create_index(op.f("ix_meter_days_day"), "meter_days", ["day"])
    op.create_table(
        "plans",
        sa.Column("plan_id", sa.String(100), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("plan_id", name=op.f("pk_plans")),
    )
    op.create_table(
        "customers",
        sa.Column("nmi", sa.String(10), nullable=False),
        sa.Column("plan_id", sa.String(100), nullable=False),
        sa.Column("region", sa.String(3), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plans.plan_id"], name=op.f("fk_customers_plan_id_plans")
        ),
        sa.PrimaryKeyConstraint("nmi", name=op.f("pk_customers")),
    )
    op.create_index(op.f("ix_customers_plan_id"), "customers", ["plan_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_customers_plan_id"), table_name="customers")
    op.drop_table("customers")
    op.drop_table("plans")
    op.drop_index(op.f("ix_meter_days_day"), table_name="meter_days")
    op.drop_table("meter_days")
