"""verify's questions to a MariaDB/MySQL source table (``MySqlDialect``'s checksums): the
canonical text of each compared column in MariaDB SQL (the form of
``sparkcdc.pipeline.canonical``, which the Spark and Arrow sides compute), and the statements
that sum a chunk's row hashes by bucket, list a chunk's rows of some buckets, and read rows
back by key. Statements run with parameters (pymysql formats them with ``%``), each after
setting the session's ``time_zone`` to ``'+00:00'`` (the stream's value form).

>>> field("v")
"IFNULL(CONCAT(LENGTH(v), ':', v), 'N')"
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparkcdc.model.canonical import EPOCH, HASH_HEX_DIGITS, ChecksumTable, float_text
from sparkcdc.model.dialect import ChunkSelect
from sparkcdc.model.identifiers import quote_mysql, quote_mysql_table
from sparkcdc.model.schema import Column, bit_width, spark_decimal
from sparkcdc.mysql.chunks.select import chunk_where
from sparkcdc.mysql.chunks.sql_values import SESSION_TIME_ZONE_SQL

_INTEGRAL = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT"})
_INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"})
_TEXT_TYPES = frozenset(
    {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"}
)
_PLUGIN_TYPES = frozenset({"uuid", "inet4", "inet6"})
FIELDS_PER_STATEMENT = 500  # keys read back per statement


def canonical_value(column: Column, sink_type: str) -> str | None:
    """MariaDB SQL: the canonical text of what the pipeline writes from ``column`` into a
    sink column of ``sink_type``; None where no exact SQL form is known (verify then reads
    the rows into Spark). Expects the session ``time_zone = '+00:00'``; the text is for
    statements run with parameters (a ``%`` in a column name is doubled).

    >>> n = Column.from_mysql("n", "bigint", "bigint(20) unsigned", True)
    >>> canonical_value(n, "DECIMAL(20,0)")
    'CAST(`n` AS CHAR)'
    """
    c = quote_mysql(column.name, pyformat=True)
    data_type, own, sink = column.data_type, column.spark_type, sink_type.upper()
    if sink != own:
        return _widened(column, sink)
    if own == "BOOLEAN":
        return f"(CASE WHEN {c} + 0 <> 0 THEN 'true' WHEN {c} + 0 = 0 THEN 'false' END)"
    if data_type == "year":
        return f"CAST({c} + 0 AS CHAR)"
    if data_type in _INTEGER_TYPES or data_type in ("decimal", "numeric"):
        return f"CAST({c} AS CHAR)"
    if data_type in ("float", "double", "real"):
        return _float(c)
    if data_type == "bit":
        width = 2 * ((bit_width(column.column_type) + 7) // 8)
        return f"LPAD(HEX({c} + 0), {width}, '0')"
    invalid = f"(MONTH({c}) = 0 OR DAYOFMONTH({c}) = 0)"
    if data_type == "date":
        return f"(CASE WHEN NOT {invalid} THEN CAST({c} AS CHAR) END)"
    if data_type in ("datetime", "timestamp"):
        micros = f"TIMESTAMPDIFF(MICROSECOND, {EPOCH}, {c})"
        return f"(CASE WHEN NOT {invalid} THEN CAST({micros} AS CHAR) END)"
    if data_type == "time":  # the pipeline writes the server's own text (its fsp digits)
        return f"CAST({c} AS CHAR)"
    if data_type in _TEXT_TYPES:
        return f"CONVERT({c} USING utf8mb4)"
    if data_type in _PLUGIN_TYPES:
        return f"CONVERT(CAST({c} AS CHAR) USING utf8mb4)"
    if own == "BINARY":
        return f"HEX({c})"
    return None


def _widened(column: Column, sink: str) -> str | None:
    """A column merged into a wider sink type (``widest_type``): integers into a wider
    integer or a DECIMAL, decimals into a wider DECIMAL, FLOAT into DOUBLE."""
    c = quote_mysql(column.name, pyformat=True)
    own = column.spark_type
    decimal = spark_decimal(sink)
    numeric = own in _INTEGRAL or own.startswith("DECIMAL")
    if sink in _INTEGRAL and own in _INTEGRAL:
        return f"CAST({c} AS CHAR)"
    if decimal and numeric and column.data_type != "year":
        return f"CAST(CAST({c} AS DECIMAL(65,{decimal[1]})) AS CHAR)"
    if sink == "DOUBLE" and own == "FLOAT":
        return _float(c)
    return None


def field(value: str) -> str:
    return f"IFNULL(CONCAT(LENGTH({value}), ':', {value}), 'N')"


def row_text(values: Sequence[str]) -> str:
    if not values:
        return "''"
    return "CONCAT(" + ", ".join(field(v) for v in values) + ")"


def row_hash(text: str) -> str:
    return f"CAST(CONV(LEFT(MD5({text}), {HASH_HEX_DIGITS}), 16, 10) AS UNSIGNED)"


def bucket(key_text: str, buckets: int) -> str:
    # MOD, not '%': the statements go through pymysql's parameter formatting
    return f"MOD(CRC32({key_text}), {int(buckets)})"


def _float(x: str) -> str:
    return float_text(x, "CAST({} AS SIGNED)", "CAST({} AS CHAR)")


def _table(table: ChecksumTable) -> str:
    return quote_mysql_table(table.schema.database, table.schema.table, pyformat=True)


def _key_text(table: ChecksumTable) -> str:
    return row_text(table.key_values)


def bucket_sums(
    conn: Any, table: ChecksumTable, chunk: ChunkSelect, buckets: int
) -> list[tuple[int, int, int]]:
    """(bucket, rows, sum of row hashes) of the rows of ``table`` in ``chunk``."""
    where, params = chunk_where(chunk.key_column, chunk.start, chunk.end)
    text = _key_text(table)
    sql = (
        f"SELECT b, COUNT(*), SUM(h) FROM (SELECT {bucket(text, buckets)} AS b, "
        f"{row_hash(row_text(table.values))} AS h FROM {_table(table)} {where}) AS r GROUP BY b"
    )
    with conn.cursor() as cur:
        cur.execute(SESSION_TIME_ZONE_SQL)
        cur.execute(sql, params)
        return [(int(b), int(n), int(h)) for b, n, h in cur.fetchall()]


def bucket_rows(
    conn: Any, table: ChecksumTable, chunk: ChunkSelect, buckets: int, wanted: set[int]
) -> list[tuple[Any, ...]]:
    """The rows of ``chunk`` in the buckets ``wanted``: each (key text, row hash, bucket,
    the key's canonical values..., the key's values as the table has them...)."""
    where, params = chunk_where(chunk.key_column, chunk.start, chunk.end)
    schema = table.schema
    raw = [quote_mysql(schema.primary_key[i], pyformat=True) for i in range(len(table.keys))]
    text = _key_text(table)
    listed = ", ".join(str(b) for b in sorted(wanted))
    sql = (
        f"SELECT * FROM (SELECT {text}, {row_hash(row_text(table.values))}, "
        f"{bucket(text, buckets)} AS b, {', '.join(table.key_values)}, {', '.join(raw)} "
        f"FROM {_table(table)} {where}) AS r WHERE b IN ({listed})"
    )
    with conn.cursor() as cur:
        cur.execute(SESSION_TIME_ZONE_SQL)
        cur.execute(sql, params)
        return [tuple(row) for row in cur.fetchall()]


def row_fields(
    conn: Any, table: ChecksumTable, keys: Sequence[Sequence[Any]]
) -> dict[str, tuple[str, ...]]:
    """Key text -> the canonical fields of the row of each primary key value of ``keys``."""
    schema = table.schema
    key = ", ".join(quote_mysql(k, pyformat=True) for k in schema.primary_key)
    row = "(" + ", ".join("%s" for _ in schema.primary_key) + ")"
    fields = ", ".join(field(v) for v in table.values)
    out: dict[str, tuple[str, ...]] = {}
    with conn.cursor() as cur:
        cur.execute(SESSION_TIME_ZONE_SQL)
        for start in range(0, len(keys), FIELDS_PER_STATEMENT):
            part = keys[start : start + FIELDS_PER_STATEMENT]
            cur.execute(
                f"SELECT {_key_text(table)}, {fields} FROM {_table(table)} "
                f"WHERE ({key}) IN ({', '.join(row for _ in part)})",
                [v for values in part for v in values],
            )
            out.update({str(r[0]): tuple(str(v) for v in r[1:]) for r in cur.fetchall()})
    return out
