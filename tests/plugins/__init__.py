"""The suite's pytest plugins, loaded by the root conftest.py, one job each:

gating      markers by folder, the ``needs``/``sm``/``slow`` skips, the report header
fixtures    the fixtures tests share: ``skip_if_refused``, the GPU device or its CPU dry run, the profile
beside      checks that need a process of their own (fresh interpreters, ``python -m fp8ref``,
            the tiny fine-tune comparison), run beside the tests
summaries   what a run observed, printed at its end (and sent back by pytest-xdist workers)
"""
