"""The operations console: sessions, the audit log, quota events, ingestions, agents, each failed
job attempt's error, and the indexes the console's pages walk.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_AT = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(16), nullable=False),
        sa.Column("csrf_token", sa.String(64), nullable=False),
        sa.Column("created_at", _AT, nullable=False),
        sa.Column("expires_at", _AT, nullable=False),
        sa.ForeignKeyConstraint(
            ["key_id"], ["api_keys.id"], name=op.f("fk_console_sessions_key_id_api_keys")
        ),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_console_sessions")),
    )
    op.create_index(op.f("ix_console_sessions_key_id"), "console_sessions", ["key_id"])
    op.create_index(op.f("ix_console_sessions_expires_at"), "console_sessions", ["expires_at"])
    op.create_table(
        "audit_log",
        sa.Column("id", _ID, nullable=False),
        sa.Column("at", _AT, nullable=False),
        sa.Column("key_id", sa.String(16), nullable=False),
        sa.Column("key_name", sa.String(100), nullable=False),
        sa.Column("action", sa.String(40), nullable=False),
        sa.Column("target", sa.String(200), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("before", sa.Text(), nullable=True),
        sa.Column("after", sa.Text(), nullable=True),
        sa.Column("trace_id", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_target_id"), "audit_log", ["target", "id"])
    op.create_table(
        "quota_events",
        sa.Column("id", _ID, nullable=False),
        sa.Column("nmi", sa.String(10), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("at", _AT, nullable=False),
        sa.Column("status", sa.String(9), nullable=False),
        sa.Column("fence", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("trace_id", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quota_events")),
    )
    op.create_index(op.f("ix_quota_events_nmi_day_id"), "quota_events", ["nmi", "day", "id"])
    op.create_index(op.f("ix_quota_events_at"), "quota_events", ["at"])
    op.create_table(
        "ingestions",
        sa.Column("id", _ID, nullable=False),
        sa.Column("received_at", _AT, nullable=False),
        sa.Column("source", sa.String(10), nullable=False),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("key_id", sa.String(16), nullable=True),
        sa.Column("agent", sa.String(100), nullable=True),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("accepted", sa.Integer(), nullable=False),
        sa.Column("superseded", sa.Integer(), nullable=False),
        sa.Column("unchanged", sa.Integer(), nullable=False),
        sa.Column("stale", sa.Integer(), nullable=False),
        sa.Column("trace_id", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ingestions")),
    )
    op.create_index(op.f("ix_ingestions_received_at"), "ingestions", ["received_at"])
    op.create_table(
        "agents",
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("breaker", sa.String(9), nullable=False),
        sa.Column("trips", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(40), nullable=False),
        sa.Column("address", sa.String(64), nullable=False),
        sa.Column("last_seen_at", _AT, nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_agents")),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("errors", sa.Text(), nullable=True))
    op.create_index("ix_quotas_day_nmi", "quotas", ["day", "nmi"])
    op.create_index("ix_quotas_status_day_nmi", "quotas", ["status", "day", "nmi"])
    op.create_index("ix_jobs_state_id", "jobs", ["state", "id"])
    op.create_index("ix_jobs_kind_id", "jobs", ["kind", "id"])
    op.create_index("ix_jobs_key_id", "jobs", ["key", "id"])


def downgrade() -> None:
    op.drop_index("ix_jobs_key_id", "jobs")
    op.drop_index("ix_jobs_kind_id", "jobs")
    op.drop_index("ix_jobs_state_id", "jobs")
    op.drop_index("ix_quotas_status_day_nmi", "quotas")
    op.drop_index("ix_quotas_day_nmi", "quotas")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("errors")
    for table in ("agents", "ingestions", "quota_events", "audit_log", "console_sessions"):
        op.drop_table(table)
