"""A run's documents by number: its print batch reads them page by page (issue 35).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision: str | None = "0011"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None


def upgrade() -> None:
    # (run_id, number) serves every look-up by run that (run_id) did.
    op.create_index(op.f("ix_documents_run_id_number"), "documents", ["run_id", "number"])
    op.drop_index(op.f("ix_documents_run_id"), table_name="documents")


def downgrade() -> None:
    op.create_index(op.f("ix_documents_run_id"), "documents", ["run_id"])
    op.drop_index(op.f("ix_documents_run_id_number"), table_name="documents")
