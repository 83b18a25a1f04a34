"""The lock-free incremental snapshot (DESIGN.md §2): splitter, chunk reader, staging, filter.

Pure where possible; no pyspark here. ``spark/`` wires these into micro-batches.
"""
