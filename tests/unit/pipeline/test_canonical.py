"""The canonical forms verify hashes, computed without Spark or a database: the float form
evaluated in Python with the same steps the SQL takes, the field encoding, and the SQL each
type gets on each side (table-driven)."""

from __future__ import annotations

import hashlib
import math
import struct
import zlib

import pytest

from sparkcdc.model.schema import Column
from sparkcdc.mysql.chunks import checksums
from sparkcdc.pipeline import canonical as cn


def float_form(x: float) -> str:
    """The SQL's steps in Python (FLOOR(LOG2), POW, one correction) for a double."""
    if x == 0:
        return "0"
    k = max(math.floor(math.log2(abs(x))) - 52, -1074)
    m = x / 2.0**k
    if abs(m) >= 2**53:
        m, k = m / 2, k + 1
    elif abs(m) < 2**52 and k > -1074:
        m, k = m * 2, k - 1
    return f"{int(m)}p{k}"


@pytest.mark.parametrize(
    "value",
    [1.1, -3.4e38, 1e-30, 0.1, 8.0, 1.7976931348623157e308, -2.2250738585072014e-308, 5e-324,
     2.0**-1022, 2.0**52, 2.0**53 - 1, 1 / 3, struct.unpack("f", struct.pack("f", 1.1))[0]],
)  # fmt: skip
def test_float_form_is_the_exact_value(value: float) -> None:
    mantissa, _, exponent = float_form(value).partition("p")
    assert int(mantissa) * 2.0 ** int(exponent) == value  # exact: m * 2^k is the double
    assert abs(int(mantissa)) < 2**53


def test_float_form_is_unique_per_value() -> None:
    # values next to each other (one ulp apart) never share a form; -0.0 is 0
    values = [0.1, math.nextafter(0.1, 1), math.nextafter(0.1, 0), 1.0, math.nextafter(1.0, 2)]
    assert len({float_form(v) for v in values}) == len(values)
    assert float_form(-0.0) == float_form(0.0) == "0"


def test_field_tells_null_from_empty_and_from_the_text_null() -> None:
    # NULL -> 'N'; '' -> '0:'; 'NULL' -> '4:NULL'; and length prefixes keep
    # ('a', 'bc') apart from ('ab', 'c')
    assert "'N'" in cn.spark_field("v") and "OCTET_LENGTH(v)" in cn.spark_field("v")
    assert checksums.field("v") == "IFNULL(CONCAT(LENGTH(v), ':', v), 'N')"


def _column(data_type: str, column_type: str) -> Column:
    return Column.from_mysql("c", data_type, column_type, True)


@pytest.mark.parametrize(
    ("data_type", "column_type", "mysql", "spark"),
    [
        ("bigint", "bigint(20) unsigned", "CAST(`c` AS CHAR)", "CAST(`c` AS STRING)"),
        ("decimal", "decimal(5,2)", "CAST(`c` AS CHAR)", "CAST(`c` AS STRING)"),
        ("decimal", "decimal(65,30)", "CAST(`c` AS CHAR)", "`c`"),
        ("year", "year(4)", "CAST(`c` + 0 AS CHAR)", "CAST(`c` AS STRING)"),
        ("varchar", "varchar(20)", "CONVERT(`c` USING utf8mb4)", "`c`"),
        ("blob", "blob", "HEX(`c`)", "HEX(`c`)"),
        ("geometry", "geometry", "HEX(`c`)", "HEX(`c`)"),
        ("bit", "bit(10)", "LPAD(HEX(`c` + 0), 4, '0')", "HEX(`c`)"),
        ("uuid", "uuid", "CONVERT(CAST(`c` AS CHAR) USING utf8mb4)", "`c`"),
        ("date", "date", "(CASE WHEN NOT (MONTH(`c`) = 0 OR DAYOFMONTH(`c`) = 0) THEN "
         "CAST(`c` AS CHAR) END)", "CAST(`c` AS STRING)"),
        ("timestamp", "timestamp(6)", None, "CAST(UNIX_MICROS(`c`) AS STRING)"),
    ],
)  # fmt: skip
def test_each_type_has_a_form_on_both_sides(
    data_type: str, column_type: str, mysql: str | None, spark: str
) -> None:
    column = _column(data_type, column_type)
    got = checksums.canonical_value(column, column.spark_type)
    assert got is not None
    if mysql is not None:
        assert got == mysql
    assert cn.spark_value("c", column.spark_type) == spark


def test_timestamps_are_micros_on_both_sides_whatever_the_session_zone() -> None:
    column = _column("datetime", "datetime(6)")
    assert "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', `c`)" in str(
        checksums.canonical_value(column, "TIMESTAMP_NTZ")
    )
    assert "TIMESTAMPDIFF(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', `c`)" in (
        cn.spark_value("c", "TIMESTAMP_NTZ")
    )


def test_widened_types_follow_the_sink_type() -> None:
    # merged shards: INT into DECIMAL(12,2) prints the sink's scale, FLOAT into DOUBLE
    assert checksums.canonical_value(_column("int", "int(11)"), "DECIMAL(12,2)") == (
        "CAST(CAST(`c` AS DECIMAL(65,2)) AS CHAR)"
    )
    assert "LOG2" in str(checksums.canonical_value(_column("float", "float"), "DOUBLE"))
    assert checksums.canonical_value(_column("date", "date"), "STRING") is None  # read into Spark


def test_no_percent_sign_in_pushed_down_sql() -> None:
    # pymysql formats parameters with '%': a literal one would break the statement
    for data_type, column_type in [("date", "date"), ("time", "time(6)"), ("double", "double")]:
        assert "%" not in str(checksums.canonical_value(_column(data_type, column_type), "STRING"))
    assert "%" not in checksums.bucket("k", 7)


# -- Arrow (a sink table read without Spark) ----------------------------------------------


@pytest.mark.parametrize(
    "value",
    [1.1, -3.4e38, 1e-30, 0.1, 8.0, 1.7976931348623157e308, -2.2250738585072014e-308, 5e-324,
     2.0**-1022, 2.0**52, 2.0**53 - 1, 1 / 3, 0.0, -0.0],
)  # fmt: skip
def test_arrow_float_form_is_the_sql_form(value: float) -> None:
    import pyarrow as pa

    assert cn.arrow_values(pa.array([value]), "DOUBLE") == [float_form(value)]


def test_arrow_values_are_what_spark_casts_to_text() -> None:
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa

    utc = dt.UTC
    cases = [
        (pa.array([True, False, None]), "BOOLEAN", ["true", "false", None]),
        (pa.array([-128, 0, 2**63 - 1]), "BIGINT", ["-128", "0", str(2**63 - 1)]),
        (pa.array([Decimal("1.50"), Decimal("0.00"), Decimal("-12345678901234567890.12")],
                  pa.decimal128(22, 2)), "DECIMAL(22,2)",
         ["1.50", "0.00", "-12345678901234567890.12"]),
        (pa.array([dt.date(1, 1, 1), dt.date(2024, 2, 29)]), "DATE", ["0001-01-01", "2024-02-29"]),
        (pa.array([dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=utc)],
                  pa.timestamp("us", "UTC")), "TIMESTAMP", ["-1"]),
        (pa.array([dt.datetime(1970, 1, 1, 0, 0, 1)], pa.timestamp("ns")), "TIMESTAMP_NTZ",
         ["1000000"]),
        (pa.array(["", "é", None], pa.string_view()), "STRING", ["", "é", None]),
        (pa.array([b"\x00\xff", b""]), "BINARY", ["00FF", ""]),
    ]  # fmt: skip
    for values, spark_type, expected in cases:
        assert cn.arrow_values(values, spark_type) == expected, spark_type
    assert cn.arrow_values(pa.array([[1]]), "ARRAY<INT>") is None  # read with Spark instead


def test_arrow_row_text_hash_and_bucket_are_the_sql_ones() -> None:
    # the SQL side: CONCAT of 'N' / '<UTF-8 length>:<text>', MD5's first 15 hex digits, CRC32
    text = cn.arrow_row_text([None, "", "é", "12"])
    assert text == "N0:2:é2:12"
    assert cn.arrow_hash(text) == int(hashlib.md5(text.encode()).hexdigest()[:15], 16)
    assert cn.arrow_bucket("1:7", 10) == zlib.crc32(b"1:7") % 10


@pytest.mark.parametrize(
    "spark_type",
    ["BOOLEAN", "TINYINT", "BIGINT", "DECIMAL(38,10)", "FLOAT", "DOUBLE", "DATE", "TIMESTAMP",
     "TIMESTAMP_NTZ", "STRING", "BINARY"],
)  # fmt: skip
def test_every_type_the_pipeline_writes_has_an_arrow_form(spark_type: str) -> None:
    import pyarrow as pa

    assert cn.arrow_supported(spark_type)
    assert cn.arrow_values(pa.array([None, None], pa.null()), spark_type) == [None, None]
