"""The PostgreSQL source's protocol library: below any Spark code (DESIGN.md §7).

- ``lsn``: ``Lsn``, a WAL position as a value object.
- ``pgoutput``: a pure decoder of the ``pgoutput`` plugin's messages (protocol versions 1-4)
  into dataclasses; an unchanged TOASTed value is the marker ``UNCHANGED_TOAST``, never a value.
- ``copyboth``: the streaming replication protocol's CopyBoth messages (XLogData, primary
  keepalive, standby status update) as pure functions of bytes.
- ``replication``: a logical replication client over libpq (psycopg's ``pq`` layer carries
  the CopyBoth stream of START_REPLICATION): slots and publications managed explicitly, a
  reader of the transactions committed in ``[start, end)``, and standby status updates that
  confirm only what the caller says is committed.
- ``types``: PostgreSQL column types (by OID and typmod; enums, domains and arrays from
  ``pg_type``) mapped to Spark and Arrow types (docs/postgres.md holds the table).
- ``values``: pgoutput's text values decoded into Arrow a column at a time, exact or stopped.
- ``validator``: what a server lacks for a source, each issue with its fix.
"""
