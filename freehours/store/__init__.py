"""The persistent store: SQLAlchemy Core tables, Alembic migrations, repositories.

    database.Store      one database, opened ready to use; ``read()`` and ``write()`` transactions
    engine              the engine factory: SQLite (embedded default) or PostgreSQL via psycopg 3
    schema              migrations: ``upgrade``, ``prepare``, ``require_current``
    tables              the one ``metadata`` every migration is checked against
    meter               meter data: NEM12 day rows in bulk, JSON reads merged per interval
    catalog             plans and customers

Repositories are functions of a connection, so that one transaction can span several.
"""
