"""MySQL partial JSON updates: decode a logged diff vector and apply it to the before image.

With ``binlog_row_value_options=PARTIAL_JSON`` MySQL 8.0 logs, for a JSON column changed
only by JSON_SET / JSON_REPLACE / JSON_REMOVE, the list of changes instead of the new
document (PARTIAL_UPDATE_ROWS events). Layout (MySQL ``sql-common/json_diff.cc``,
``Json_diff_vector::write_binary`` and ``Json_diff::write_binary``)::

    diff-vector ::= length(4 bytes, little-endian: size of the diffs that follow) diff*
    diff        ::= operation(1) path-length(packed int) path
                    [value-length(packed int) value]        -- absent for REMOVE

``operation`` is :class:`JsonDiffOperation`; ``path`` is MySQL's text form of a JSON path
(``$``, ``.member``, ``."quoted member"``, ``[n]``); ``value`` is one binary JSON document
(:mod:`sparkcdc.mysql.binlog.jsonb`). Packed ints are MySQL's ``net_field_length`` encoding.

:func:`apply_json_diffs` applies the diffs with the semantics of MySQL's
``apply_json_diff`` (what a replica does) and renders the result exactly as
:func:`sparkcdc.mysql.binlog.jsonb.to_json_text` renders the full document the server would have
logged without the option: same separators, object keys in MySQL's storage order (shorter
keys first, then bytewise), numbers and strings of untouched members kept as they were.
Anything it cannot apply exactly raises :class:`JsonDiffError`.

>>> parse_json_path('$.items[0]."unit price"')
('items', 0, 'unit price')
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from sparkcdc.errors import ProtocolError
from sparkcdc.mysql.binlog.jsonb import to_json_text
from sparkcdc.mysql.protocol.wire import read_lenenc_int

# the 4-byte little-endian size that starts a logged diff vector (ENCODED_LENGTH_BYTES)
DIFF_VECTOR_LENGTH = struct.Struct("<I")
_ROOT = "$"


class JsonDiffOperation(IntEnum):
    """``enum_json_diff_operation`` (sql-common/json_diff.h)."""

    REPLACE = 0
    INSERT = 1
    REMOVE = 2


class JsonDiffError(ProtocolError):
    """A partial JSON update that cannot be applied exactly to the before image."""


class _Number(str):
    """A JSON number kept as the text the binary-JSON decoder produced (no float rounding)."""

    __slots__ = ()


# A path leg: a member name (str) or an array index (int).
PathLeg = str | int


@dataclass(frozen=True, slots=True)
class JsonDiff:
    """One logged change: ``operation`` at ``path`` (``legs`` after ``$``); ``value`` is JSON."""

    operation: JsonDiffOperation
    path: str
    legs: tuple[PathLeg, ...]
    value: str | None


# ------------------------------------------------------------------------------ decoding


def _packed_int(data: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    if pos >= end:
        raise JsonDiffError(f"partial JSON diff ends before its {what}")
    value, nxt = read_lenenc_int(data, pos)
    if value is None or nxt > end:
        raise JsonDiffError(f"partial JSON diff has an invalid {what} at byte {pos}")
    return value, nxt


def parse_json_path(path: str) -> tuple[PathLeg, ...]:
    """The legs of a MySQL JSON path of the forms partial updates log.

    >>> parse_json_path('$.a[2]."b c"')
    ('a', 2, 'b c')
    """
    if not path.startswith(_ROOT):
        raise JsonDiffError(f"partial JSON diff path {path!r} does not start with '$'")
    legs: list[PathLeg] = []
    pos, end = len(_ROOT), len(path)
    while pos < end:
        char = path[pos]
        if char == "." and pos + 1 < end and path[pos + 1] == '"':
            try:
                name, pos = json.decoder.scanstring(path, pos + 2)  # type: ignore[attr-defined]
            except json.JSONDecodeError:
                raise JsonDiffError(
                    f"partial JSON diff path {path!r} has a malformed quoted member"
                ) from None
            legs.append(name)
        elif char == ".":
            stop = pos + 1
            while stop < end and path[stop] not in '.["*':
                stop += 1
            name = path[pos + 1 : stop]
            if not name or name.strip() != name or (stop < end and path[stop] in '"*'):
                raise _unsupported_path(path)
            legs.append(name)
            pos = stop
        elif char == "[":
            close = path.find("]", pos)
            index = path[pos + 1 : close] if close > 0 else ""
            if not index.isascii() or not index.isdigit():
                raise _unsupported_path(path)
            legs.append(int(index))
            pos = close + 1
        else:
            raise _unsupported_path(path)
    return tuple(legs)


def _unsupported_path(path: str) -> JsonDiffError:
    return JsonDiffError(
        f"partial JSON diff path {path!r} is not of the forms sparkcdc applies "
        '($, .member, ."quoted member", [n])'
    )


def parse_json_diffs(data: bytes, start: int, end: int) -> list[JsonDiff]:
    """Decode the diffs in ``data[start:end]`` (after the 4-byte diff-vector length)."""
    if end > len(data):
        raise JsonDiffError(
            f"partial JSON diff vector of {end - start} bytes runs past the event "
            f"({len(data) - start} bytes left)"
        )
    diffs = []
    pos = start
    while pos < end:
        code = data[pos]
        try:
            operation = JsonDiffOperation(code)
        except ValueError:
            raise JsonDiffError(
                f"partial JSON diff has operation {code}, expected 0 (REPLACE), 1 (INSERT) "
                "or 2 (REMOVE)"
            ) from None
        path_len, pos = _packed_int(data, pos + 1, end, "path length")
        if pos + path_len > end:
            raise JsonDiffError(
                f"partial JSON diff path of {path_len} bytes runs past the diff vector"
            )
        path = data[pos : pos + path_len].decode("utf-8", "replace")
        pos += path_len
        value = None
        if operation is not JsonDiffOperation.REMOVE:
            value_len, pos = _packed_int(data, pos, end, "value length")
            if pos + value_len > end:
                raise JsonDiffError(
                    f"partial JSON diff value of {value_len} bytes at {path!r} runs past the "
                    "diff vector"
                )
            value = to_json_text(data[pos : pos + value_len])
            pos += value_len
        diffs.append(JsonDiff(operation, path, parse_json_path(path), value))
    return diffs


# ------------------------------------------------------------------------------ applying


def _parse_doc(text: str) -> Any:
    return json.loads(text, parse_int=_Number, parse_float=_Number)


def _render(node: Any) -> str:
    """JSON text in :func:`sparkcdc.mysql.binlog.jsonb.to_json_text`'s form."""
    if isinstance(node, _Number):
        return str.__str__(node)
    if isinstance(node, str):
        return json.dumps(node, ensure_ascii=False)
    if node is True:
        return "true"
    if node is False:
        return "false"
    if node is None:
        return "null"
    if isinstance(node, dict):
        items = (f"{json.dumps(k, ensure_ascii=False)}: {_render(v)}" for k, v in node.items())
        return "{" + ", ".join(items) + "}"
    return "[" + ", ".join(_render(v) for v in node) + "]"


def _key_order(item: tuple[str, Any]) -> tuple[int, bytes]:
    # MySQL's Json_key_comparator: shorter keys first, equal lengths bytewise (utf8mb4)
    raw = item[0].encode("utf-8")
    return len(raw), raw


def _seek(doc: Any, legs: tuple[PathLeg, ...], path: str) -> Any:
    """The container at ``legs`` (MySQL's seek_exact_path: no auto-wrapping)."""
    node = doc
    for leg in legs:
        in_array = isinstance(leg, int) and isinstance(node, list) and leg < len(node)
        in_object = isinstance(leg, str) and isinstance(node, dict) and leg in node
        if not (in_array or in_object):
            raise JsonDiffError(
                f"partial JSON diff path {path!r} does not exist in the before image"
            )
        node = node[leg]
    return node


def _apply_one(doc: Any, diff: JsonDiff) -> Any:
    """Apply ``diff`` to ``doc`` (mutated in place); returns the new document root."""
    legs, path = diff.legs, diff.path
    value = _parse_doc(diff.value) if diff.value is not None else None
    if not legs:
        if diff.operation is JsonDiffOperation.REPLACE:
            return value
        raise JsonDiffError(f"partial JSON diff {diff.operation.name} on the whole document '$'")
    parent = _seek(doc, legs[:-1], path)
    last = legs[-1]
    op = diff.operation
    if isinstance(parent, dict) and isinstance(last, str):
        exists = last in parent
        if op is JsonDiffOperation.REPLACE and exists:
            parent[last] = value
        elif op is JsonDiffOperation.REMOVE and exists:
            del parent[last]
        elif op is JsonDiffOperation.INSERT and not exists:
            parent[last] = value
            ordered = sorted(parent.items(), key=_key_order)
            parent.clear()
            parent.update(ordered)
        else:
            state = "exists" if exists else "does not exist"
            raise JsonDiffError(f"partial JSON diff {op.name} at {path!r}: the member {state}")
        return doc
    if isinstance(parent, list) and isinstance(last, int):
        inside = last < len(parent)
        if op is JsonDiffOperation.REPLACE and inside:
            parent[last] = value
        elif op is JsonDiffOperation.REMOVE and inside:
            del parent[last]
        elif op is JsonDiffOperation.INSERT:
            # MySQL inserts past the end as an append (Json_array_index clamps)
            parent.insert(min(last, len(parent)), value)
        else:
            raise JsonDiffError(
                f"partial JSON diff {op.name} at {path!r}: index {last} is outside the "
                f"array of {len(parent)} elements"
            )
        return doc
    kind = "object" if isinstance(parent, dict) else "array"
    if not isinstance(parent, dict | list):
        kind = "scalar"
    raise JsonDiffError(
        f"partial JSON diff {op.name} at {path!r}: the parent is a JSON {kind}, which that "
        "path leg does not address"
    )


def apply_json_diffs(before: object, data: bytes, start: int, end: int) -> str:
    """Apply the diffs in ``data[start:end]`` to the JSON text ``before``; the new JSON text.

    ``before`` is the column's value in the before image (JSON text); NULL or a column
    missing from the before image cannot be patched.

    >>> from sparkcdc.mysql.protocol.wire import lenenc_int
    >>> diff = bytes([JsonDiffOperation.REMOVE]) + lenenc_int(4) + b"$.bb"
    >>> apply_json_diffs('{"a": 1, "bb": [2]}', diff, 0, len(diff))
    '{"a": 1}'
    """
    if not isinstance(before, str):
        state = "is NULL" if before is None else "is not in the before image"
        raise JsonDiffError(f"the JSON column {state}, so its partial update cannot be applied")
    doc = _parse_doc(before)
    for diff in parse_json_diffs(data, start, end):
        doc = _apply_one(doc, diff)
    return _render(doc)


def json_diff_applier(column: str) -> Callable[[object, bytes, int, int], str]:
    """:func:`apply_json_diffs` whose errors name ``column`` (used by generated row decoders)."""

    def apply(before: object, data: bytes, start: int, end: int) -> str:
        try:
            return apply_json_diffs(before, data, start, end)
        except JsonDiffError as exc:
            raise JsonDiffError(f"column {column}: {exc}") from None

    return apply
