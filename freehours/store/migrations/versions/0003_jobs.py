"""Durable jobs: the ``jobs`` table, its unique-while-unfinished key and its claim indexes.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None

UNFINISHED = "state IN ('AVAILABLE', 'RUNNING', 'RETRYABLE')"
WAITING = "state IN ('AVAILABLE', 'RETRYABLE')"
RUNNING = "state = 'RUNNING'"


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("kind", sa.String(50), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("state", sa.String(9), nullable=False),
        sa.Column("run_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("snoozes", sa.Integer(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(100), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("rerun_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finalized_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("traceparent", sa.String(55), nullable=True),
        sa.CheckConstraint(
            "state IN ('AVAILABLE', 'RUNNING', 'RETRYABLE', 'COMPLETED', 'DISCARDED', 'CANCELLED')",
            name=op.f("ck_jobs_state"),
        ),
        sa.CheckConstraint(
            "attempts >= 0 AND max_attempts >= 1 AND snoozes >= 0 AND runs >= 0",
            name=op.f("ck_jobs_counters"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index(
        "uq_jobs_kind_key_unfinished",
        "jobs",
        ["kind", "key"],
        unique=True,
        postgresql_where=sa.text(UNFINISHED),
        sqlite_where=sa.text(UNFINISHED),
    )
    op.create_index(
        "ix_jobs_due",
        "jobs",
        ["kind", "run_at", "id"],
        postgresql_where=sa.text(WAITING),
        sqlite_where=sa.text(WAITING),
    )
    op.create_index(
        "ix_jobs_leased",
        "jobs",
        ["lease_until"],
        postgresql_where=sa.text(RUNNING),
        sqlite_where=sa.text(RUNNING),
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_leased", table_name="jobs")
    op.drop_index("ix_jobs_due", table_name="jobs")
    op.drop_index("uq_jobs_kind_key_unfinished", table_name="jobs")
    op.drop_table("jobs")
