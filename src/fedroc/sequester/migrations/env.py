"""Alembic environment of the sequestration database.

Migrations run on the connection :func:`fedroc.sequester.db.migrate` hands over
(``config.attributes["connection"]``), inside its transaction.
"""

from __future__ import annotations

from alembic import context


def run() -> None:
    """Run the migrations on the connection :func:`fedroc.sequester.db.migrate` gave."""
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("run the migrations through fedroc.sequester.db.migrate(engine)")
    # render_as_batch: SQLite cannot ALTER most things; batch mode copies the table instead.
    context.configure(connection=connection, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


# Alembic executes this file with its context set; anything else (a doctest collector)
# only imports it.
if getattr(context, "config", None) is not None:
    run()
