"""Documents sent by email: each send and resend of a finalised document (issue 35).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_AT = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "mail_deliveries",
        sa.Column("id", _ID, nullable=False),
        sa.Column("number", sa.String(40), nullable=False),
        sa.Column("nmi", sa.String(10), nullable=False),
        sa.Column("sequence", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(6), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", _AT, nullable=False),
        sa.Column("attempt_started_at", _AT, nullable=True),
        sa.Column("finished_at", _AT, nullable=True),
        sa.Column("last_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("possible_duplicate", sa.Boolean(), nullable=False),
        sa.Column("requested_by", sa.String(200), nullable=True),
        sa.CheckConstraint(
            "status IN ('queued', 'sent', 'failed')", name=op.f("ck_mail_deliveries_status")
        ),
        sa.ForeignKeyConstraint(
            ["number"], ["documents.number"], name=op.f("fk_mail_deliveries_number_documents")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mail_deliveries")),
        sa.UniqueConstraint("number", "sequence", name=op.f("uq_mail_deliveries_number_sequence")),
    )
    op.create_index(op.f("ix_mail_deliveries_status_id"), "mail_deliveries", ["status", "id"])


def downgrade() -> None:
    op.drop_table("mail_deliveries")
