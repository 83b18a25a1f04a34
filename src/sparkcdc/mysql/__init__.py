"""The MySQL/MariaDB source, in rooms by layer (each imports only the rooms listed before it;
tests/unit/test_layers.py checks it):

- ``protocol``: the client side of the protocols: packets and authentication (``wire``,
  ``ed25519``, ``constants``), SQL connections and TLS (``connection``), the replication
  client that streams the binlog (``replication``), text-protocol result rows in C
  (``_textrows``);
- ``binlog``: the codec, bytes of binlog events to decoded events (``decoder``,
  ``decoded_events``, ``table_map`` for TABLE_MAP events, ``metadata_from_schema`` for the
  column metadata a TABLE_MAP lacks), row images (``rowcodec`` in Python, ``arrowrows`` with
  the C kernel ``_rowkernel``), column values, JSON, character sets, compression;
- ``admin``: SQL-side questions to the server (``server``: version, settings, positions,
  files; ``catalog``; ``validator``; ``server_ids``);
- ``ddl``: DDL statements of the binlog (``table_names`` they name, ``schema_changes`` they
  make);
- ``stream``: the rules of reading the binlog (``binlog_range``: a range of it to the changes
  of captured tables; ``statements``, ``write_effects``: what a statement does to them;
  ``continuity``: whether an offset is still a place on the server; ``positions``: places
  found by short reads of the binlog, as a file's tag, a timestamp's or a batch's cut);
- ``chunks``: the SQL side of a snapshot chunk read: its watermarks and binlog backfill
  (``reads``), its SELECT into Arrow (``select``, with the text splitter ``textrows``), the
  splitter's queries (``queries``), an added column read back by key (``read_back``), SQL
  values in the decoder's form (``sql_values``);
- ``dialect`` (directly here, over the rooms): the MySQL source's implementation of the
  source interface (``model/dialect.py``).

``_arrowbuf.h`` holds the Arrow buffers both C kernels build.
"""
