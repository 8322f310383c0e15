"""The persistent store: the only package that speaks SQL.

    database.Store      one database, opened ready to use; ``read()``, ``write()`` and
                        ``autocommit()`` yield a ``Unit`` of work whose repositories share its
                        connection
    driver              what PostgreSQL and SQLite do differently, behind one interface:
      postgresql        psycopg 3: timeouts, COPY, advisory locks, NOTIFY/LISTEN
      sqlite            the embedded default: BEGIN IMMEDIATE, one writer at a time
    engine              which driver a URL names
    timeouts            how long to wait on the database
    errors              the database's failures, for callers that import no SQLAlchemy
    repository          the base of every repository: a connection and its driver
    quotas              quota versions and the ledger (``unit.quotas``)
    meter               meter data: NEM12 day rows in bulk, JSON reads merged (``unit.meter``)
    catalog             plans and customers (``unit.catalog``)
    jobs                the job table (``unit.jobs``)
    invoices            accounts, periods, document numbers, documents, runs (``unit.invoices``)
    invoice_records     their records, and how each is written to its row and read back
    document_json       a stored document as the API and the command line write it in JSON
    console             the operations console's reads (``unit.console``)
    audit               the audit log (``unit.audit``)
    sessions            console sessions (``unit.sessions``)
    keys                API keys, hashed (``unit.keys``)
    idempotency         Idempotency-Keys and their saved answers (``unit.idempotency``)
    ingestions          what meter data arrived, per upload (``unit.ingestions``)
    agents              what each meter agent last said of itself (``unit.agents``)
    partitions          PostgreSQL's partitioned history and its upkeep (``unit.partitions``)
    webhooks            endpoints, the outbox of events, deliveries, attempts (``unit.webhooks``)
    mail                documents sent by email: each send, its outcome, resends (``unit.mail``)
    pages               customers' own pages: the ids signed links name (``unit.pages``)
    maintenance         the upkeep over them: retention and partitions, each step on its own
    locks               names of locks that order work sharing no row
    prepared            hot-path statements compiled once per dialect
    schema              migrations: ``upgrade``, ``prepare``, ``require_current``
    tables              the one ``metadata`` every migration is checked against

A new table gets a repository here (a ``Repository`` subclass, and a ``Unit`` attribute); a
statement that must differ between the databases gets a ``Driver`` method, written in both
drivers, and a case in ``tests/store/test_conformance.py``.
"""
