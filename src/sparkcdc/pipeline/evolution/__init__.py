"""Schema evolution in pipelines: Flink CDC 3.x's SchemaOperator and MetadataApplier, for Spark.

The source stream carries each DDL statement as a row of kind ``ddl`` at its binlog position
(``seq``). Per micro-batch, :class:`~.evolver.SchemaEvolver` walks those statements in
``seq`` order:

1. the statement is parsed into schema change events by the source's DDL reader
   (``SourceDialect.ddl``, DESIGN.md §10.2) and applied to the source table's schema; the
   table's rows are cut into *segments* at the statement's ``seq``, each decoded with the
   schema of its time;
2. the sink table's wanted shape is computed again (transform, then route merge) and compared
   with the shape it had; the difference becomes sink changes (add / drop / rename / type),
   which ``schema.change.behavior`` and the sink's ``include.schema.changes`` /
   ``exclude.schema.changes`` turn into calls of the sink's metadata applier;
3. every segment remembers which sink column each of its columns lands in, as of the end of
   the batch (a later rename carries earlier rows along; a truncate or drop discards them).

The sink then writes the batch once, in the final shape: for a sink that keeps the last state
per key this is the same result as "rows before the change, the change, rows after", and it
keeps one idempotent write per batch id. The state after each batch that changed something
is kept under ``<checkpoint>/schema/`` so a restart or a replayed batch starts from the shape
of its time.

Behaviours (Flink CDC's): ``exception`` stops on any change; ``evolve`` applies every change
and stops if the sink refuses one; ``try_evolve`` applies, and where the sink refuses, treats
that change as ``lenient`` does; ``lenient`` (default) never loses data in the sink: a new
column is added, a dropped column stays and gets NULLs, a renamed column is added under its
new name (the old one stays), a changed type adds a column ``<name>_<type>`` (the old column
keeps its values), truncate and drop table are not forwarded unless
``exclude.schema.changes`` is set; ``ignore`` keeps the sink as it is.

Modules: :mod:`.state` (the schema state), :mod:`.persistence` (its files in the
checkpoint), :mod:`.schema_diff`, :mod:`.policy` (the behaviours), :mod:`.fills` (added
columns' existing rows), :mod:`.online_schema_change` (gh-ost / pt-osc cut-overs) and
:mod:`.evolver` (the walk over a batch's statements).
"""
