"""The install under test: what it is, what it can do, and how a refusal is told from a bug."""
