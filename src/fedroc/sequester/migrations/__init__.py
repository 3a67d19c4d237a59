"""Alembic migrations of the sequestration service's database (run by ``Store``)."""
