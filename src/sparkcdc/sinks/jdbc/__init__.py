"""``type: jdbc``: keeps tables in MySQL, MariaDB or PostgreSQL up to date with the source.

Option names follow Flink's JDBC connector::

    sink:
      type: jdbc
      url: jdbc:postgresql://db.example.com:5432/analytics   # or jdbc:mysql:// / jdbc:mariadb://
      username: cdc
      password: ${PG_PASSWORD}
      schema: public                  # PostgreSQL only; MySQL's target is the url's database
      table.create: true              # create missing tables from the sink table's columns
      sink.commit-table: sparkcdc_commits

Every sink table lands in a target table of its short name (``app_db.orders`` → ``orders``).
Per batch, every Spark partition of the last change of every key (:func:`final_states`) loads
its rows into a *staging table* over a connection of its own (PostgreSQL: ``COPY``; MySQL:
multi-row ``INSERT``), nothing is collected to the driver; then one driver-side transaction
moves staging → target (deletes, then ``INSERT ... SELECT`` upserts) together with a row of
the *commit table*, which records the last batch id applied per (pipeline's writer id, sink
table); a replayed batch finds its id there and is skipped. The staging table is dropped
after the move; it is named for (writer, sink table, batch), so one a crash left behind is
dropped and refilled by the replay. Snapshot rows of keys the target does not hold yet
(``append``) take the same path with a plain ``INSERT ... SELECT`` and a commit-table row of
their own (writer id + ``/append``), so a replay skips an append and a write each on its own.
The writer id (``SinkContext.writer_id``: name ``@`` run id) is new with every new checkpoint,
so a new stream's batch ids never meet an old stream's record. Python drivers (pymysql,
psycopg) do the writing, so no JDBC jar is needed: the URL only names the target.
"""

from sparkcdc.sinks.jdbc.options import JdbcOptions, JdbcUrl, SinkTls
from sparkcdc.sinks.jdbc.sink import JdbcSink
from sparkcdc.sinks.jdbc.types import target_type

__all__ = ["JdbcOptions", "JdbcSink", "JdbcUrl", "SinkTls", "target_type"]
