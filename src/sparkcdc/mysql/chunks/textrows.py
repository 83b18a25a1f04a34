"""A chunk's SELECT read into Arrow without a Python object per value.

pymysql reads a result row by row: a packet object, a Python value per column, a converter
call per value. Over TLS, where connectorx cannot be trusted (``select.select_chunk``), that made
chunk reads several times slower than in clear. Here the query goes out on the same pymysql
connection (so TLS, auth and the session stay pymysql's), its column definitions are read
by pymysql, and the rows' bytes are taken from the connection in blocks and framed by the
compiled splitter (``mysql/protocol/_textrows.c``): each column becomes an Arrow binary array of
the server's text for its values.

Each column is then cast to its decoder-form type (``row_values.arrow_type``) by Arrow's
vectorised casts where the cast is exact: integers, floats (a FLOAT through double, as
pymysql's ``float()`` and the float32 round do), DECIMAL, DATE, DATETIME, TIMESTAMP (UTC
sessions), UTF-8 text and binary-charset bytes. A column the casts refuse (a zero date, a
year 0, invalid UTF-8 under the binary charset) and every other type (TIME, BIT, MariaDB's
plugin types) is converted value by value exactly as :func:`select.select_pymysql` converts
it: pymysql's own converter for the field, then ``sql_converter``. So both readers give the
same values, which the reader tests check type by type.

Without the compiled splitter (no C compiler at install) chunks are read by pymysql, as
before.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pymysql

from sparkcdc.errors import ProtocolError, SnapshotError
from sparkcdc.model.row_values import arrow_schema, arrow_type, is_integer
from sparkcdc.model.schema import PLUGIN_TEXT_TYPES, TEXT_TYPES, Column
from sparkcdc.mysql.binlog.arrowrows import buffers_array
from sparkcdc.mysql.chunks.sql_values import sql_converter

try:
    from sparkcdc.mysql.protocol import _textrows  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler
    _textrows = None

log = logging.getLogger(__name__)
COMPILED = _textrows is not None
READ_BYTES = 1 << 18  # asked of the connection at a time (a TLS record is at most 16 KiB)
BATCH_ROWS = 65_536  # rows, or
BATCH_BYTES = 64 << 20  # value bytes, a record batch holds at most
BINARY_CHARSET = 63  # a result field's charsetnr for bytes (binary collation)
_YEAR_ZERO = "0000"  # dates Arrow takes (year 0) and Python's date refuses: pymysql's text


_announced = False


def available(conn: Any) -> bool:
    """Whether ``conn`` can be read by this reader: the splitter is built (the log says
    once when it is not) and the connection is sparkcdc's utf8mb4 pymysql connection
    (``connection.sql_connection``)."""
    global _announced
    if not COMPILED and not _announced:
        _announced = True
        log.info(
            "the compiled result splitter (sparkcdc.mysql.protocol._textrows) is not built: "
            "snapshot chunks over TLS are read by pymysql (same results, slower). Reinstall the "
            "package where a C compiler is present (pip install -e . with gcc) to build it"
        )
    return COMPILED and hasattr(conn, "start_result") and conn.encoding == "utf8"


def select_text(conn: Any, sql: str, columns: Sequence[Column]) -> pa.Table:
    """The rows of ``sql`` (a SELECT of ``columns``, in order) as an Arrow table of their
    decoder-form values.

    >>> select_text(conn, "SELECT id, name FROM t", schema.columns)  # doctest: +SKIP
    pyarrow.Table
    """
    assert _textrows is not None
    result, seq = conn.start_result(sql)
    if result.field_count != len(columns):
        conn.abandon()
        raise SnapshotError(
            f"the chunk query returned {result.field_count} column(s) where "
            f"{len(columns)} were selected; the table changed under the read"
        )
    fields = list(zip(result.fields, result.converters, strict=True))
    target = arrow_schema(tuple(columns))
    splitter = _textrows.Splitter(len(columns), seq)
    batches: list[pa.RecordBatch] = []
    buffer = bytearray()
    pos = 0
    try:
        while True:
            del buffer[:pos]
            buffer += conn.read_some(READ_BYTES)
            try:
                pos, state, *end = splitter.feed(buffer, 0)
            except ValueError as exc:  # the splitter's: rows not as the protocol lays out
                raise ProtocolError(
                    f"the rows of a snapshot chunk could not be read ({exc}); the "
                    "connection was closed. The query fails without a row of that chunk "
                    "delivered: restart it to read the chunk again"
                ) from None
            if state == _textrows.ERROR:
                pymysql.err.raise_mysql_exception(bytes(buffer[pos : end[0]]))
            if (
                state == _textrows.END
                or splitter.rows >= BATCH_ROWS
                or splitter.buffered >= BATCH_BYTES
            ):
                batches.append(_batch(splitter.finish(), columns, fields, target))
            if state == _textrows.END:
                if pos != len(buffer):
                    raise SnapshotError(
                        f"{len(buffer) - pos} byte(s) followed the end of a chunk's rows on "
                        "the connection; it is out of step and was closed"
                    )
                return pa.Table.from_batches(batches, schema=target)
    except pymysql.MySQLError:
        raise  # the server ended the result with an error: the connection is in step
    except BaseException:
        conn.abandon()  # rows left unread: the connection cannot serve another query
        raise


def _batch(
    finished: tuple[int, list[tuple[int, bytes | None, bytes, bytes]]],
    columns: Sequence[Column],
    fields: Sequence[tuple[Any, tuple[str | None, Any]]],
    target: pa.Schema,
) -> pa.RecordBatch:
    rows, raw = finished
    arrays = []
    for column, (field, converter), buffers in zip(columns, fields, raw, strict=True):
        text = buffers_array(pa.large_binary(), rows, *buffers)
        arrays.append(typed(text, column, field.charsetnr, converter))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def typed(
    text: pa.Array, column: Column, charsetnr: int, converter: tuple[str | None, Any]
) -> pa.Array:
    """One column's server text (a large_binary array) as its decoder-form values."""
    target = arrow_type(column)
    try:
        fast = _cast(text, column, target, charsetnr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        fast = None  # values the casts refuse: each one as pymysql reads it
    if fast is not None:
        return fast
    return per_value(text, column, converter, target)


def _cast(text: pa.Array, column: Column, target: pa.DataType, charsetnr: int) -> pa.Array | None:
    t = column.data_type
    if t in PLUGIN_TEXT_TYPES or t in ("time", "bit"):
        return None
    if pa.types.is_binary(target):
        return text.cast(pa.binary()) if charsetnr == BINARY_CHARSET else None
    if t in TEXT_TYPES:
        # pymysql decodes bytes of the binary charset with "replace" (sql_converter): only
        # valid UTF-8, which the cast checks, is the same either way
        return text.cast(pa.large_string()).cast(pa.string())
    digits = text.cast(pa.large_string())
    if is_integer(column) or t in ("double", "real") or t in ("decimal", "numeric"):
        return pc.cast(digits, target)
    if t == "float":  # pymysql: float(text), then rounded to float32
        return pc.cast(pc.cast(digits, pa.float64()), pa.float32())
    if t in ("date", "datetime", "timestamp"):
        if pc.any(pc.starts_with(digits, _YEAR_ZERO)).as_py():
            return None
        if t == "date":
            return pc.cast(digits, pa.date32())
        naive = pc.cast(digits, pa.timestamp("us"))
        return naive if t == "datetime" else naive.cast(target)  # UTC sessions: UTC text
    return None


def per_value(
    text: pa.Array, column: Column, converter: tuple[str | None, Any], target: pa.DataType
) -> pa.Array:
    """The column converted value by value as ``select_pymysql`` converts it: pymysql's
    decoding and converter for the field, then ``sql_converter``."""
    encoding, convert = converter
    ours = sql_converter(column)
    values: list[Any] = []
    for raw in text.to_pylist():
        if raw is None:
            values.append(None)
            continue
        try:
            value: Any = raw if encoding is None else raw.decode(encoding)
            if convert is not None:
                value = convert(value)
            values.append(value if ours is None else ours(value))
        except (ValueError, ArithmeticError, TypeError) as exc:
            raise _not_a_value(column, raw, exc) from None
    try:
        return pa.array(values, type=target)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise _not_a_value(column, None, exc) from None


def _not_a_value(column: Column, raw: bytes | None, exc: Exception) -> ProtocolError:
    """The server's text for ``column`` is not a value of its type: the bytes are not what
    the protocol promised (UnicodeDecodeError is a ValueError, Decimal's an ArithmeticError)."""
    sent = "" if raw is None else f" {raw[:40]!r}"
    return ProtocolError(
        f"a snapshot chunk's column {column.name!r} ({column.column_type}) received{sent} from "
        f"the server, which is not a value of that type ({type(exc).__name__}: {exc}); the "
        "connection was closed and no row of the chunk was delivered. Restart the query to "
        "read the chunk again"
    )
