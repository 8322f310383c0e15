"""Webhooks: endpoints, the outbox of events, deliveries and their attempts (docs/webhooks.md).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_AT = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("description", sa.String(200), nullable=False),
        sa.Column("events", sa.String(200), nullable=False),
        sa.Column("secret", sa.String(64), nullable=False),
        sa.Column("previous_secret", sa.String(64), nullable=True),
        sa.Column("previous_until", _AT, nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("disabled_at", _AT, nullable=True),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.Column("failing_since", _AT, nullable=True),
        sa.Column("final_failures", sa.Integer(), nullable=False),
        sa.Column("created_at", _AT, nullable=False),
        sa.Column("updated_at", _AT, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_endpoints")),
    )
    op.create_table(
        "webhook_events",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("type", sa.String(40), nullable=False),
        sa.Column("created_at", _AT, nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_events")),
    )
    op.create_index(op.f("ix_webhook_events_created_at"), "webhook_events", ["created_at"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", _ID, nullable=False),
        sa.Column("event_id", sa.String(40), nullable=False),
        sa.Column("endpoint_id", sa.String(32), nullable=False),
        sa.Column("status", sa.String(9), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", _AT, nullable=False),
        sa.Column("started_at", _AT, nullable=False),
        sa.Column("next_attempt_at", _AT, nullable=True),
        sa.Column("finished_at", _AT, nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("replays", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["webhook_events.id"],
            name=op.f("fk_webhook_deliveries_event_id_webhook_events"),
        ),
        sa.ForeignKeyConstraint(
            ["endpoint_id"],
            ["webhook_endpoints.id"],
            name=op.f("fk_webhook_deliveries_endpoint_id_webhook_endpoints"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sa.UniqueConstraint(
            "event_id", "endpoint_id", name=op.f("uq_webhook_deliveries_event_id_endpoint_id")
        ),
    )
    op.create_index(
        op.f("ix_webhook_deliveries_endpoint_id_id"), "webhook_deliveries", ["endpoint_id", "id"]
    )
    op.create_table(
        "webhook_attempts",
        sa.Column("id", _ID, nullable=False),
        sa.Column("delivery_id", _ID, nullable=False),
        sa.Column("at", _AT, nullable=False),
        sa.Column("outcome", sa.String(9), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["webhook_deliveries.id"],
            name=op.f("fk_webhook_attempts_delivery_id_webhook_deliveries"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_attempts")),
    )
    op.create_index(
        op.f("ix_webhook_attempts_delivery_id_id"), "webhook_attempts", ["delivery_id", "id"]
    )


def downgrade() -> None:
    op.drop_table("webhook_attempts")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_events")
    op.drop_table("webhook_endpoints")
