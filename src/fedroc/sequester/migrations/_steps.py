"""Steps the schema revisions share: adding columns and dropping them again, in place.

A revision calls these inside its ``upgrade``/``downgrade`` (Alembic's ``op`` is bound
then); they do what each revision did itself, so a database migrated before gets the same
schema.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


def add_columns(table: str, *columns: sa.Column) -> None:
    """Add ``columns`` to ``table``, in order, each by a plain ADD COLUMN.

    With NULL or a constant default, SQLite adds a column in place, where a batch copy
    would have to drop a table that others reference.
    """
    for column in columns:
        op.add_column(table, column)


def drop_columns(table: str, *names: str) -> None:
    """Drop the columns ``names`` of ``table``, in order, in place.

    Batch mode's copy of a table would drop the original, which other tables reference:
    with SQLite's foreign keys on, "FOREIGN KEY constraint failed". SQLite drops a plain
    column in place since 3.35 (PostgreSQL always has).
    """
    with op.batch_alter_table(table, recreate="never") as batch:
        for name in names:
            batch.drop_column(name)
