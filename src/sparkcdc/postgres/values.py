"""pgoutput's text-format tuple values decoded into Arrow, a column at a time.

``decode_text_column(values, column, where)`` is a pure function of one column's values
(text, or None for SQL NULL) and its ``ColumnType``; numbers are cast by Arrow's own
kernels, the rest parsed once each. The text forms are the output functions' under the
session settings the replication connection pins (``replication.SESSION_SETTINGS``:
DateStyle ISO, IntervalStyle iso_8601, bytea_output hex, TimeZone UTC, extra_float_digits
3); a value in another form is refused, never guessed at. ``UNCHANGED_TOAST`` is refused
too: whoever has the row's last image resolves it before decoding (DESIGN.md §12).

    >>> from sparkcdc.postgres.types import TypeCatalog, column_type
    >>> ints = column_type(TypeCatalog.builtin(), 1007, -1, where="t.c")
    >>> decode_text_column(["{1,NULL}", None, "{}"], ints, "t.c").to_pylist()
    [[1, None], None, []]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import pyarrow as pa
import pyarrow.compute as pc

from sparkcdc.errors import SourceError
from sparkcdc.postgres.pgoutput import ColumnValue, Relation
from sparkcdc.postgres.types import (
    ColumnType,
    DecimalHandlingMode,
    TypeCatalog,
    ValueKind,
    column_type,
)

# What ±infinity dates and timestamps become: the Arrow type's largest and smallest value.
DATE_INFINITY = 2**31 - 1
TIMESTAMP_INFINITY = 2**63 - 1
_MICROS_PER_DAY = 86_400_000_000

_DATE_RE = re.compile(r"^(\d{4,})-(\d\d)-(\d\d)( BC)?$")
_TIMESTAMP_RE = re.compile(
    r"^(\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?"
    r"(?:([+-])(\d\d)(?::(\d\d))?(?::(\d\d))?)?( BC)?$"
)


class ValueDecodeError(SourceError):
    """A value the column's type cannot hold, or in a text form the decoder does not read."""


def _refuse(where: str, value: object, expected: str, fix: str) -> ValueDecodeError:
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    return ValueDecodeError(f"column {where}: received {shown}, expected {expected}; {fix}")


def _texts(values: Sequence[ColumnValue], where: str) -> list[str | None]:
    for value in values:
        if value is not None and not isinstance(value, str):
            kind = "an unchanged TOASTed value" if not isinstance(value, bytes) else "binary"
            raise _refuse(
                where,
                value,
                "a text-format value",
                f"{kind} must be resolved (from the row's last image) or the stream read "
                "with text values (binary off) before decoding",
            )
    return values  # type: ignore[return-value]


def decode_text_column(values: Sequence[ColumnValue], column: ColumnType, where: str) -> pa.Array:
    """One column's text values as an Arrow array of ``column.arrow_type``.

    >>> from sparkcdc.postgres.types import TypeCatalog, column_type
    >>> ts = column_type(TypeCatalog.builtin(), 1184, -1, where="t.c")
    >>> decode_text_column(["2024-02-29 23:59:59.5+01"], ts, "t.c")[0].value
    1709247599500000
    """
    texts = _texts(values, where)
    kind = column.kind
    if kind is ValueKind.ARRAY:
        assert column.element is not None
        return _array(texts, column, column.element, where)
    if kind in (ValueKind.TEXT, ValueKind.NUMERIC_TEXT):
        return pa.array(texts, type=pa.string())
    if kind in (ValueKind.INTEGER, ValueKind.FLOAT, ValueKind.NUMERIC_DOUBLE, ValueKind.DECIMAL):
        return _cast(texts, column, where)
    if kind in (ValueKind.DATE, ValueKind.TIMESTAMP, ValueKind.TIMESTAMPTZ):
        return _temporal(texts, column, where)
    return _parsed(texts, column, where)


def _parsed(texts: Sequence[str | None], column: ColumnType, where: str) -> pa.Array:
    """Each value parsed by the column kind's Python parser."""
    parse = _PARSERS[column.kind]
    parsed = []
    for text in texts:
        try:
            parsed.append(None if text is None else parse(text))
        except ValueError as error:
            raise _refuse(where, text, f"a {column.spark_type} value ({error})", _FORMS) from None
    return pa.array(parsed, type=column.arrow_type)


# What Arrow's ISO 8601 cast does not read: BC, years past 9999, ±infinity.
_SPECIAL_TEMPORAL = r"(^-?infinity$)|( BC$)|(^\d{5})"


def _temporal(texts: list[str | None], column: ColumnType, where: str) -> pa.Array:
    """Dates and timestamps by Arrow's ISO 8601 cast; the values it does not read (BC,
    years past 9999, ±infinity) by the Python parser, put in their places."""
    strings = pa.array(texts, type=pa.string())
    special = pc.fill_null(pc.match_substring_regex(strings, _SPECIAL_TEMPORAL), False)
    try:
        ordinary = pc.if_else(special, None, strings).cast(column.arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return _parsed(texts, column, where)  # finds the value in another form and names it
    if not pc.any(special).as_py():
        return ordinary
    rare = [texts[int(i)] for i in pc.indices_nonzero(special).to_pylist()]
    return pc.replace_with_mask(ordinary, special, _parsed(rare, column, where))


_FORMS = (
    "read the stream through sparkcdc's replication connection, which sets DateStyle ISO, "
    "IntervalStyle iso_8601, bytea_output hex and TimeZone UTC"
)


def _cast(texts: list[str | None], column: ColumnType, where: str) -> pa.Array:
    """Numbers by Arrow's cast kernel; a value it refuses is found and named."""
    strings = pa.array(texts, type=pa.string())
    try:
        return strings.cast(column.arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    for text in texts:
        if text is None:
            continue
        try:
            pa.array([text], type=pa.string()).cast(column.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            if column.kind is ValueKind.DECIMAL:
                fix = _decimal_fix(text)
            else:
                fix = "the server sent a value outside the column's type"
            raise _refuse(where, text, f"a {column.spark_type} value", fix) from None
    raise _refuse(where, texts, f"{column.spark_type} values", "report this as a bug")


def _decimal_fix(text: str) -> str:
    try:
        finite = Decimal(text).is_finite()
    except InvalidOperation:
        finite = False
    what = (
        "a number that does not fit" if finite else "NaN or infinity, which a DECIMAL cannot hold"
    )
    return (
        f"{what} exactly; set the source option decimal.handling.mode to 'string' (exact "
        "text) or 'double' (NaN and infinities kept, precision lost)"
    )


def _bool(text: str) -> bool:
    if text == "t":
        return True
    if text == "f":
        return False
    raise ValueError("'t' or 'f'")


def _bit(text: str) -> bool:
    if text in ("0", "1"):
        return text == "1"
    raise ValueError("'0' or '1'")


def _bytea(text: str) -> bytes:
    if not text.startswith("\\x"):
        raise ValueError("bytea in hex form, '\\x…'")
    return bytes.fromhex(text[2:])


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (year 0 is 1 BC), for the years
    Python's ``date`` does not have (Howard Hinnant's ``days_from_civil``).

    >>> days_from_civil(1970, 1, 1), days_from_civil(0, 12, 31)
    (0, -719163)
    """
    year -= month <= 2
    era = year // 400  # floor division: the proleptic era of negative years too
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def _year(digits: str, bc: str | None) -> int:
    return 1 - int(digits) if bc else int(digits)  # 1 BC is year 0


def _date(text: str) -> int:
    if text == "infinity":
        return DATE_INFINITY
    if text == "-infinity":
        return -DATE_INFINITY
    match = _DATE_RE.match(text)
    if not match:
        raise ValueError("ISO 'YYYY-MM-DD[ BC]'")
    year, month, day, bc = match.groups()
    return days_from_civil(_year(year, bc), int(month), int(day))


def timestamp_micros(text: str, *, with_zone: bool) -> int:
    """Microseconds since 1970-01-01 00:00 (UTC for ``with_zone``) of a timestamp's ISO
    text, BC and years past 9999 included; ±infinity as ±TIMESTAMP_INFINITY.

    >>> timestamp_micros("0001-01-01 00:00:00+01 BC", with_zone=True)
    -62167222800000000
    """
    if text == "infinity":
        return TIMESTAMP_INFINITY
    if text == "-infinity":
        return -TIMESTAMP_INFINITY
    match = _TIMESTAMP_RE.match(text)
    if not match or (match.group(8) is not None) != with_zone:
        raise ValueError("ISO 'YYYY-MM-DD HH:MM:SS[.ffffff]" + ("+HH[:MM]" if with_zone else ""))
    year, month, day, hour, minute, second, fraction = match.groups()[:7]
    sign, off_h, off_m, off_s, bc = match.groups()[7:]
    days = days_from_civil(_year(year, bc), int(month), int(day))
    seconds = int(hour) * 3600 + int(minute) * 60 + int(second)
    if sign:
        offset = int(off_h) * 3600 + int(off_m or 0) * 60 + int(off_s or 0)
        seconds -= offset if sign == "+" else -offset
    micros = days * _MICROS_PER_DAY + seconds * 1_000_000 + int((fraction or "").ljust(6, "0"))
    if not -TIMESTAMP_INFINITY < micros < TIMESTAMP_INFINITY:
        # PostgreSQL's range ends in 294276 AD; 64-bit microseconds since 1970 in 294247
        raise ValueError("at most 294247-01-10 04:00:54.775806 UTC, Spark's latest timestamp")
    return micros


_PARSERS: dict[ValueKind, Callable[[str], object]] = {
    ValueKind.BOOLEAN: _bool,
    ValueKind.BIT: _bit,
    ValueKind.BYTEA: _bytea,
    ValueKind.DATE: _date,
    ValueKind.TIMESTAMP: lambda text: timestamp_micros(text, with_zone=False),
    ValueKind.TIMESTAMPTZ: lambda text: timestamp_micros(text, with_zone=True),
}


# --------------------------------------------------------------------------- whole rows


@dataclass(frozen=True)
class RowsDecoder:
    """A table's tuples (as a Relation describes them) into Arrow record batches, a
    column at a time; the columns' types are mapped once, when the Relation arrives.

        >>> decoder = RowsDecoder.for_relation(relation, catalog)   # doctest: +SKIP
        >>> decoder.record_batch([insert.new for insert in inserts])  # doctest: +SKIP
    """

    relation: Relation
    columns: tuple[ColumnType, ...]

    @classmethod
    def for_relation(
        cls,
        relation: Relation,
        catalog: TypeCatalog,
        mode: DecimalHandlingMode = DecimalHandlingMode.PRECISE,
    ) -> RowsDecoder:
        """Raises SourceError naming the column of a type outside the mapping."""
        return cls(
            relation,
            tuple(
                column_type(
                    catalog,
                    column.type_oid,
                    column.type_modifier,
                    where=cls._where(relation, column.name),
                    mode=mode,
                )
                for column in relation.columns
            ),
        )

    @staticmethod
    def _where(relation: Relation, column: str) -> str:
        return f"{relation.namespace}.{relation.name}.{column}"

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(
            pa.field(column.name, mapped.arrow_type)
            for column, mapped in zip(self.relation.columns, self.columns, strict=True)
        )

    def record_batch(self, rows: Sequence[Sequence[ColumnValue]]) -> pa.RecordBatch:
        """``rows`` (tuples of the Relation's columns, text values) as one record batch."""
        width = len(self.columns)
        for row in rows:
            if len(row) != width:
                raise ValueDecodeError(
                    f"a row of {self._where(self.relation, '')[:-1]} has {len(row)} values, "
                    f"expected {width} as its Relation says: the Relation is stale (a column "
                    "was added or dropped) and must be the one the server sent last"
                )
        arrays = [
            decode_text_column(
                [row[index] for row in rows],
                mapped,
                self._where(self.relation, self.relation.columns[index].name),
            )
            for index, mapped in enumerate(self.columns)
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


# ------------------------------------------------------------------------------- arrays


def parse_array(text: str) -> list[str | None]:
    """The elements of a one-dimensional array's text form, unquoted; None for NULL.

    >>> parse_array('{1,NULL,"NULL","a \\\\"b\\\\"",""}')
    ['1', None, 'NULL', 'a "b"', '']
    """
    if text.startswith("["):
        raise ValueError("lower bound 1 (explicit bounds '[m:n]=' are not mapped)")
    if len(text) < 2 or text[0] != "{" or text[-1] != "}":
        raise ValueError("'{…}'")
    body = text[1:-1]
    if not body:
        return []
    elements: list[str | None] = []
    at = 0
    while True:
        if body.startswith("{", at):
            raise ValueError("one dimension (a multi-dimensional array is not mapped)")
        chars: list[str] = []
        quoted = body.startswith('"', at)
        at += quoted
        while at < len(body) and (quoted or body[at] != ","):
            char = body[at]
            if char == "\\":
                at += 1
                char = body[at : at + 1]
            elif quoted and char == '"':
                at += 1
                break
            chars.append(char)
            at += 1
        element = "".join(chars)
        elements.append(None if not quoted and element.upper() == "NULL" else element)
        if at >= len(body):
            return elements
        if body[at] != ",":
            raise ValueError(f"',' after an element at character {at + 1}")
        at += 1


def _array(
    texts: list[str | None], column: ColumnType, element: ColumnType, where: str
) -> pa.Array:
    """Every array's elements decoded as one column, then cut into lists by offsets."""
    offsets = [0]
    flat: list[str | None] = []
    nulls = []
    for text in texts:
        if text is not None:
            try:
                flat.extend(parse_array(text))
            except ValueError as error:
                raise _refuse(
                    where,
                    text,
                    f"a one-dimensional {column.spark_type} value ({error})",
                    "keep such arrays out of the column, or capture it as text",
                ) from None
        nulls.append(text is None)
        offsets.append(len(flat))
    values = decode_text_column(flat, element, where)
    return pa.ListArray.from_arrays(
        pa.array(offsets, type=pa.int32()), values, type=column.arrow_type, mask=pa.array(nulls)
    )
