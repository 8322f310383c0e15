"""Invoicing: billing cycles on customers, document counters, runs, billing periods, documents,
and the triggers that keep a finalised document from being changed or deleted.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None

#: The tables whose rows are finalised documents: inserted once, never updated or deleted.
IMMUTABLE = ("documents",)
REFUSAL = "finalised documents are immutable: a correction is a new document"


def upgrade() -> None:
    with op.batch_alter_table("customers") as batch:
        batch.add_column(
            sa.Column("billing_frequency", sa.String(9), nullable=False, server_default="monthly")
        )
        batch.add_column(
            sa.Column("anchor_day", sa.SmallInteger(), nullable=False, server_default="1")
        )
        batch.add_column(
            sa.Column("payment_term_days", sa.SmallInteger(), nullable=False, server_default="21")
        )
        batch.create_check_constraint(
            "billing_frequency", "billing_frequency IN ('monthly', 'quarterly')"
        )
        batch.create_check_constraint("anchor_day", "anchor_day BETWEEN 1 AND 28")
        batch.create_check_constraint("payment_term_days", "payment_term_days BETWEEN 13 AND 90")
    counters = op.create_table(
        "document_counters",
        sa.Column("series", sa.String(20), nullable=False),
        sa.Column("next_number", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "series IN ('invoice', 'credit_note')", name=op.f("ck_document_counters_series")
        ),
        sa.CheckConstraint("next_number >= 1", name=op.f("ck_document_counters_next_number")),
        sa.PrimaryKeyConstraint("series", name=op.f("pk_document_counters")),
    )
    op.bulk_insert(
        counters,
        [{"series": "invoice", "next_number": 1}, {"series": "credit_note", "next_number": 1}],
    )
    op.create_table(
        "invoice_runs",
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("state", sa.String(9), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("as_of", sa.DateTime(timezone=True), nullable=False),
        sa.Column("batches", sa.Integer(), nullable=True),
        sa.Column("batches_done", sa.Integer(), nullable=False),
        sa.Column("accounts", sa.Integer(), nullable=False),
        sa.Column("invoices", sa.Integer(), nullable=False),
        sa.Column("credit_notes", sa.Integer(), nullable=False),
        sa.Column("adjustment_invoices", sa.Integer(), nullable=False),
        sa.Column("waiting", sa.Integer(), nullable=False),
        sa.Column("held", sa.Integer(), nullable=False),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("state IN ('RUNNING', 'COMPLETED')", name=op.f("ck_invoice_runs_state")),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_invoice_runs")),
    )
    op.create_index(op.f("ix_invoice_runs_requested_at"), "invoice_runs", ["requested_at"])
    op.create_table(
        "invoice_run_batches",
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("batch", sa.Integer(), nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["invoice_runs.run_id"],
            name=op.f("fk_invoice_run_batches_run_id_invoice_runs"),
        ),
        sa.PrimaryKeyConstraint("run_id", "batch", name=op.f("pk_invoice_run_batches")),
    )
    op.create_table(
        "billing_periods",
        sa.Column("nmi", sa.String(10), nullable=False),
        sa.Column("period_start", sa.Date(), nullable=False),
        sa.Column("period_end", sa.Date(), nullable=False),
        sa.Column("documents", sa.Integer(), nullable=False),
        sa.Column("versions", sa.Text(), nullable=False),
        sa.Column("data_stamp", sa.String(64), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("nmi", "period_start", name=op.f("pk_billing_periods")),
    )
    op.create_table(
        "documents",
        sa.Column("number", sa.String(40), nullable=False),
        sa.Column("series", sa.String(20), nullable=False),
        sa.Column("serial", sa.BigInteger(), nullable=False),
        sa.Column("document_type", sa.String(20), nullable=False),
        sa.Column("nmi", sa.String(10), nullable=False),
        sa.Column("period_start", sa.Date(), nullable=False),
        sa.Column("period_end", sa.Date(), nullable=False),
        sa.Column("sequence", sa.Integer(), nullable=False),
        sa.Column("corrects", sa.String(40), nullable=True),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("issue_date", sa.Date(), nullable=False),
        sa.Column("due_date", sa.Date(), nullable=True),
        sa.Column("finalised_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("plan_id", sa.String(100), nullable=False),
        sa.Column("region", sa.String(3), nullable=False),
        sa.Column("time_zone", sa.String(64), nullable=False),
        sa.Column("subtotal", sa.Text(), nullable=False),
        sa.Column("gst", sa.Text(), nullable=False),
        sa.Column("total", sa.Text(), nullable=False),
        sa.Column("consumption_kwh", sa.Text(), nullable=False),
        sa.Column("free_kwh", sa.Text(), nullable=False),
        sa.Column("free_value", sa.Text(), nullable=False),
        sa.Column("over_cap_kwh", sa.Text(), nullable=False),
        sa.Column("export_kwh", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("lines", sa.Text(), nullable=False),
        sa.Column("days", sa.Text(), nullable=False),
        sa.Column("plan_document", sa.Text(), nullable=False),
        sa.Column("retailer", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "series IN ('invoice', 'credit_note')", name=op.f("ck_documents_series")
        ),
        sa.CheckConstraint(
            "document_type IN ('invoice', 'credit_note', 'adjustment_invoice')",
            name=op.f("ck_documents_document_type"),
        ),
        sa.CheckConstraint(
            "(sequence = 0) = (corrects IS NULL)", name=op.f("ck_documents_corrects")
        ),
        sa.ForeignKeyConstraint(
            ["corrects"], ["documents.number"], name=op.f("fk_documents_corrects_documents")
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["invoice_runs.run_id"], name=op.f("fk_documents_run_id_invoice_runs")
        ),
        sa.PrimaryKeyConstraint("number", name=op.f("pk_documents")),
        sa.UniqueConstraint("series", "serial", name=op.f("uq_documents_series_serial")),
        sa.UniqueConstraint(
            "nmi", "period_start", "sequence", name=op.f("uq_documents_nmi_period_start_sequence")
        ),
    )
    op.create_index(op.f("ix_documents_run_id"), "documents", ["run_id"])
    op.create_index(op.f("ix_documents_period_start"), "documents", ["period_start"])
    op.create_index(op.f("ix_documents_corrects"), "documents", ["corrects"])
    _refuse_changes()


def _refuse_changes() -> None:
    """Triggers that refuse an UPDATE or DELETE of a finalised document, whatever sends it."""
    if op.get_context().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION freehours_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$"
            f" BEGIN RAISE EXCEPTION '{REFUSAL} (% on %)', TG_OP, TG_TABLE_NAME"
            " USING ERRCODE = 'integrity_constraint_violation'; END $$"
        )
        for table in IMMUTABLE:
            op.execute(
                f"CREATE TRIGGER {table}_immutable BEFORE UPDATE OR DELETE ON {table}"
                " FOR EACH ROW EXECUTE FUNCTION freehours_refuse_change()"
            )
            # TRUNCATE fires no row trigger: refused by a statement trigger of its own.
            op.execute(
                f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}"
                " FOR EACH STATEMENT EXECUTE FUNCTION freehours_refuse_change()"
            )
        return
    for table in IMMUTABLE:
        for event in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {table}_no_{event.lower()} BEFORE {event} ON {table}"
                f" BEGIN SELECT RAISE(ABORT, '{REFUSAL} ({event} on {table})'); END"
            )


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        for table in IMMUTABLE:
            op.execute(f"DROP TRIGGER {table}_no_truncate ON {table}")
            op.execute(f"DROP TRIGGER {table}_immutable ON {table}")
        op.execute("DROP FUNCTION freehours_refuse_change()")
    op.drop_index(op.f("ix_documents_corrects"), table_name="documents")
    op.drop_index(op.f("ix_documents_period_start"), table_name="documents")
    op.drop_index(op.f("ix_documents_run_id"), table_name="documents")
    op.drop_table("documents")
    op.drop_table("billing_periods")
    op.drop_table("invoice_run_batches")
    op.drop_index(op.f("ix_invoice_runs_requested_at"), table_name="invoice_runs")
    op.drop_table("invoice_runs")
    op.drop_table("document_counters")
    with op.batch_alter_table("customers") as batch:
        batch.drop_constraint("payment_term_days", type_="check")
        batch.drop_constraint("anchor_day", type_="check")
        batch.drop_constraint("billing_frequency", type_="check")
        batch.drop_column("payment_term_days")
        batch.drop_column("anchor_day")
        batch.drop_column("billing_frequency")
