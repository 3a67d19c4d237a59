"""Schema revisions, oldest first: 0001 is the schema of fedroc 0.1."""
