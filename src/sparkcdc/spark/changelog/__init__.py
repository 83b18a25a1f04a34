"""Change rows as Arrow record batches: the typed changelog and the envelope (DESIGN.md §4).

Typed changelog (one table): ``_op, _op_ts, _seq, _database, _table`` then the
table's columns. An update gives a ``-U`` row (before image) then a ``+U`` row.

Tables (several tables, typed; what pipelines read): ``_op, _op_ts, _seq, _database,
_table, _ddl, _text``, then one struct column per captured table (``<i>:<database>.<table>``)
holding its row image in typed fields (see :class:`TablesBuilder`).

Envelope (several tables): ``database, table, op, before, after, op_ts, seq,
schema_version, ddl`` with row images as JSON text; ``op`` is ``r``/``c``/``u``/``d``,
or ``ddl`` for a schema change (its statement in ``ddl``).

Modules: :mod:`.typed`, :mod:`.tables` and :mod:`.envelope` build the three shapes;
:mod:`.arrow` (Spark types as Arrow types), :mod:`.decoded` (decoded rows on their way in),
:mod:`.compiled` (the compiled decoder's path) and :mod:`.text` (values as text) serve them.
"""
