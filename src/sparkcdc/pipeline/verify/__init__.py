"""``sparkcdc verify``: is every sink table equal to its source tables (routes and transforms
applied)? Lock-free, chunked, and tolerant of changes still in flight.

For each sink table both sides compute, per row, the canonical row text and hash of
:mod:`sparkcdc.pipeline.canonical`, and put the row in a bucket by a hash of its key:

1. **Buckets.** Per bucket, COUNT(*) and SUM(hash). The source side runs in the database:
   one plain SELECT per snapshot chunk (``snapshot/splitter.py``), ``GROUP BY bucket``,
   ``pipeline.parallelism`` at a time, no locks. A table with a transform (or a column the
   SQL form cannot produce) is read into Spark chunk by chunk and goes through the
   pipeline's own transform instead. The sink side is one Spark ``GROUP BY bucket``.
2. **In flight.** Each phase reads the source, records the binlog position, and reads the
   sink once the pipeline's committed offset has passed it (the pipeline must be running;
   waited for up to ``timeout_s``). Buckets that differ are drilled down: key and row hash
   of every row of those buckets on both sides give the keys that differ.
3. **Keys.** Those keys are read field by field: source, sink (once the pipeline caught
   up), source again. A key is reported when two looks in a row saw the same unchanged
   source row and the same other sink row: ``missing`` (in the source, not in the sink),
   ``extra`` (in the sink only), ``different`` (with the columns that differ). Keys the
   source keeps changing are ``unsettled`` after ``KEY_ROUNDS`` looks: in flight.
"""
