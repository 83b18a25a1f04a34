"""The canonical row text and hash ``sparkcdc verify`` computes on both sides: in the
source's SQL over the source table (its dialect's ``canonical_value`` and checksums: for
MariaDB ``mysql/admin/checksums.py``), as Spark SQL over the sink table, and in Python over a
sink table read as Arrow (``arrow_*``: delta-rs, no Spark). Pure builders: no I/O, no pyspark.

A value's canonical text depends on the sink column's Spark type (the source side produces
what the pipeline writes from its MySQL column):

| Spark type                      | canonical text                                          |
|---------------------------------|---------------------------------------------------------|
| BOOLEAN                         | ``true`` / ``false``                                    |
| TINYINT .. BIGINT, DECIMAL(p,s) | decimal text, scale kept (``1.50``)                     |
| FLOAT, DOUBLE                   | ``<m>p<k>``: the value is exactly ``m * 2^k`` with the  |
|                                 | integer ``m`` in [2^52, 2^53) (or k = -1074); ``0``     |
| DATE                            | ``YYYY-MM-DD``                                          |
| TIMESTAMP, TIMESTAMP_NTZ        | microseconds since 1970-01-01 00:00:00 (UTC, wall time) |
| STRING                          | the text (hashed as UTF-8)                              |
| BINARY                          | upper-case hex                                          |

Floats: MariaDB and Java print doubles differently, and neither prints every double
exactly, so the canonical form is the exact binary value, computed by division by a power
of two (exact in IEEE arithmetic on both sides) and one correction step for ``LOG2``'s last
bit. The sign of zero is not kept.

A field is ``N`` for NULL, else ``<UTF-8 byte length>:<text>``, so NULL, ``''`` and
``'NULL'`` differ and no two rows share a text; the row text is its fields in sink column
order. The row hash is the first 60 bits of the row text's MD5, as an integer; a row's
bucket is the CRC-32 of its key's fields (the same on both sides, and cheap) modulo the
number of buckets.

>>> spark_value("x", "INT")
'CAST(`x` AS STRING)'
>>> spark_field("v")
"COALESCE(CONCAT(CAST(OCTET_LENGTH(v) AS STRING), ':', v), 'N')"
"""

from __future__ import annotations

import hashlib
import math
import zlib
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sparkcdc.model.canonical import EPOCH, HASH_HEX_DIGITS, float_text
from sparkcdc.model.identifiers import quote_spark

_INTEGRAL = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT"})
_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1}
_ARROW_OTHER = frozenset(
    {"BOOLEAN", "FLOAT", "DOUBLE", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "STRING", "BINARY"}
)

if TYPE_CHECKING:
    import pyarrow as pa


# -------------------------------------------------------------------------------- Spark


def spark_value(column: str, spark_type: str) -> str:
    """Spark SQL: the canonical text of a sink column of ``spark_type`` (NULL for NULL).

    >>> spark_value("b", "BINARY")
    'HEX(`b`)'
    """
    return spark_value_of(quote_spark(column), spark_type)


def spark_value_of(c: str, spark_type: str) -> str:
    """:func:`spark_value` of a Spark SQL expression ``c`` of ``spark_type``."""
    t = spark_type.upper()
    if t in _INTEGRAL or t == "BOOLEAN" or t.startswith("DECIMAL") or t == "DATE":
        return f"CAST({c} AS STRING)"
    if t in ("FLOAT", "DOUBLE"):
        return float_text(f"CAST({c} AS DOUBLE)", "CAST({} AS BIGINT)", "CAST({} AS STRING)")
    if t == "TIMESTAMP":
        return f"CAST(UNIX_MICROS({c}) AS STRING)"
    if t == "TIMESTAMP_NTZ":
        return f"CAST(TIMESTAMPDIFF(MICROSECOND, TIMESTAMP_NTZ{EPOCH}, {c}) AS STRING)"
    if t == "BINARY":
        return f"HEX({c})"
    if t == "STRING":
        return c
    return f"CAST({c} AS STRING)"


def spark_field(value: str) -> str:
    return f"COALESCE(CONCAT(CAST(OCTET_LENGTH({value}) AS STRING), ':', {value}), 'N')"


def spark_row_text(values: Sequence[str]) -> str:
    return "CONCAT(" + ", ".join(spark_field(v) for v in values) + ")" if values else "''"


def spark_hash(text: str) -> str:
    return f"CAST(CONV(SUBSTR(MD5({text}), 1, {HASH_HEX_DIGITS}), 16, 10) AS BIGINT)"


def spark_bucket(key_text: str, buckets: int) -> str:
    return f"PMOD(CRC32({key_text}), {int(buckets)})"


# -------------------------------------------------------------------------------- Arrow


def arrow_values(values: pa.Array | pa.ChunkedArray, spark_type: str) -> list[str | None] | None:
    """The canonical texts of a sink column of ``spark_type`` read as Arrow (what
    :func:`spark_value` computes in Spark); None for a type this form does not cover (verify
    then reads the table with Spark).

    >>> import pyarrow as pa
    >>> arrow_values(pa.array([1.5, None, 0.0]), "DOUBLE")
    ['6755399441055744p-52', None, '0']
    """
    texts = arrow_texts(values, spark_type)
    return None if texts is None else texts.to_pylist()


def arrow_texts(values: pa.Array | pa.ChunkedArray, spark_type: str) -> pa.Array | None:
    """:func:`arrow_values` as a string array, computed by Arrow's kernels where they give
    Spark's text (decimals and binary values go through Python)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = spark_type.upper()
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    kind = values.type
    if not arrow_supported(t):
        return None
    if pa.types.is_null(kind):
        return pa.nulls(len(values), pa.string())
    if pa.types.is_timestamp(kind):
        if kind.unit not in _MICROS:  # nanoseconds: Spark keeps whole microseconds
            ticks = pc.cast(values, pa.int64()).to_pylist()
            return pa.array([None if v is None else str(v // 1000) for v in ticks], pa.string())
        micros = pc.multiply(pc.cast(values, pa.int64()), _MICROS[kind.unit])
        return pc.cast(micros, pa.string())
    if t == "BOOLEAN":
        return pc.if_else(pc.cast(values, pa.bool_()), "true", "false")
    if t in _INTEGRAL:
        return pc.cast(pc.cast(values, pa.int64()), pa.string())
    if t in ("FLOAT", "DOUBLE"):
        return _float_arrow(pc.cast(values, pa.float64()))
    if t in ("DATE", "STRING"):  # a date32 cast to string is ISO, the year in four digits
        return pc.cast(values, pa.string())
    python = values.to_pylist()
    if t == "BINARY":
        return pa.array([None if v is None else bytes(v).hex().upper() for v in python])
    # DECIMAL: Arrow writes some (zero among them) with an exponent, Spark never does
    return pa.array([None if v is None else _decimal_text(v) for v in python], pa.string())


def _float_arrow(values: pa.Array) -> pa.Array:
    """:func:`_float_python` over a float64 array (numpy's ``frexp``, exact)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    x = values.to_numpy(zero_copy_only=False)
    finite = np.isfinite(x) & (x != 0)
    exponent = np.frexp(np.where(finite, x, 1.0))[1].astype(np.int64)
    k = np.maximum(exponent - 53, -1074)
    m = np.ldexp(np.where(finite, x, 0.0), -k).astype(np.int64)
    text = pc.binary_join_element_wise(
        pc.cast(pa.array(m), pa.string()), pc.cast(pa.array(k), pa.string()), "p"
    )
    other = pc.if_else(pa.array(x == 0), "0", pc.cast(values, pa.string()))  # 0, NaN, inf
    text = pc.if_else(pa.array(finite), text, other)
    return pc.if_else(pc.is_null(values), pa.nulls(len(values), pa.string()), text)


def arrow_fields(texts: pa.Array) -> pa.Array:
    """:func:`arrow_field` over a string array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lengths = pc.cast(pc.binary_length(pc.cast(texts, pa.binary())), pa.string())
    return pc.fill_null(pc.binary_join_element_wise(lengths, texts, ":"), "N")


def arrow_supported(spark_type: str) -> bool:
    """Whether :func:`arrow_values` covers a sink column of ``spark_type``."""
    t = spark_type.upper()
    return t in _INTEGRAL or t.startswith("DECIMAL") or t in _ARROW_OTHER


def _decimal_text(value: Decimal) -> str:
    # as Spark casts a DECIMAL to STRING: plain notation, the scale kept, no negative zero
    return format(abs(value) if value == 0 else value, "f")


def _float_python(x: float) -> str:
    """``m p k`` of ``x`` (``model.canonical.float_text``'s form, exact: ``math.frexp``)."""
    if x == 0 or math.isnan(x) or math.isinf(x):
        return "0" if x == 0 else repr(x)
    exponent = math.frexp(x)[1]  # x = f * 2^exponent with 0.5 <= |f| < 1
    k = max(exponent - 53, -1074)
    return f"{int(math.ldexp(x, -k))}p{k}"


def arrow_field(value: str | None) -> str:
    """:func:`spark_field` of one value."""
    return "N" if value is None else f"{len(value.encode())}:{value}"


def arrow_row_text(values: Sequence[str | None]) -> str:
    return "".join(arrow_field(v) for v in values)


def arrow_hash(text: str) -> int:
    return int(hashlib.md5(text.encode()).hexdigest()[:HASH_HEX_DIGITS], 16)


def arrow_bucket(key_text: str, buckets: int) -> int:
    return zlib.crc32(key_text.encode()) % int(buckets)


def arrow_cast(values: Any, like: Any) -> Any:
    """``values`` cast to the Arrow type of ``like`` (a lenient column's older values read
    as the newer column's type, as Spark's TRY_CAST: NULL where one does not convert)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if values.type == like.type:
        return values
    try:
        return pc.cast(values, like.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        out = []
        for value in values.to_pylist():
            try:
                out.append(pc.cast(pa.array([value], values.type), like.type)[0].as_py())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                out.append(None)
        return pa.array(out, like.type)
