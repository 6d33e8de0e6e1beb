"""fp8ref's test suite. A regular package, so that ``tests.plugins`` and the shared check modules
resolve to this folder even where another installed distribution ships a top-level ``tests``."""
