"""torch's native float8 ops and API surface, discovered from the install: which ops run, each held
to the definition by its kind, and the promotion rules, scalars and GEMM schemas pinned."""
