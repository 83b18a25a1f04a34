"""Read the changes of a binlog range ``[start, end)``: the unit of one Spark partition.

The range is read over one replication connection with a non-blocking dump, so
the read ends by itself; ``end`` is a transaction boundary taken from
``SHOW MASTER STATUS`` at planning, so a transaction is never split, and reading
the same range again yields the same changes (Spark's replay).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from sparkcdc.errors import BinlogResetError, ProtocolError, SchemaChangedError, SourceError
from sparkcdc.model.events import RowChanges, RowsKind, SchemaChange
from sparkcdc.model.position import BinlogPosition, binlog_file_tag
from sparkcdc.model.tables import TablePredicate
from sparkcdc.mysql.admin.server import files_on_server
from sparkcdc.mysql.binlog.decoded_events import (
    BinlogEvent,
    EventHeader,
    FormatDescriptionEvent,
    MariaGtidEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    TransactionPayloadEvent,
    UnknownEvent,
)
from sparkcdc.mysql.binlog.decoder import ROWS_EVENT_TYPES, BinlogDecoder
from sparkcdc.mysql.binlog.metadata_from_schema import (
    TableVersions,
    complete_columns,
    is_incomplete,
    missing_metadata,
)
from sparkcdc.mysql.ddl.table_names import ddl_tables, dropped_database, row_changes
from sparkcdc.mysql.protocol.connection import ConnectionSettings
from sparkcdc.mysql.protocol.constants import EVENT_HEADER, EventType
from sparkcdc.mysql.protocol.replication import BinlogClient, resumed_events
from sparkcdc.mysql.stream.statements import RowEffect, row_effect, statement_kind, xa_statement
from sparkcdc.mysql.stream.write_effects import WriteEffects

# (database, table, written) → None when a statement's use of the table changes nothing
# else, else why that cannot be shown (WriteEffects)
WriteEffectsOf = Callable[[str, str, bool], str | None]

__all__ = ["Share", "changes_of_events", "read_range", "refuse_row_changing_ddl"]


# Event types that carry no row change of their own: statement context (INTVAR, RAND,
# USER_VAR precede a statement-logged DML, which stops the stream by itself), markers and
# MySQL's informational events.
_INERT_EVENTS = frozenset(
    {
        EventType.STOP,
        EventType.INTVAR,
        EventType.RAND,
        EventType.USER_VAR,
        EventType.IGNORABLE,
        EventType.ROWS_QUERY,
        EventType.ANONYMOUS_GTID,
        EventType.TRANSACTION_CONTEXT,
        EventType.VIEW_CHANGE,
        EventType.XA_PREPARE,
        EventType.MARIA_BINLOG_CHECKPOINT,
        EventType.MARIA_START_ENCRYPTION,
    }
)
_SESSION_FIX = (
    "Make every session that writes captured tables log rows: SET GLOBAL binlog_format='ROW' "
    "and remove SET [SESSION] binlog_format=... from the application (or its connection "
    "init), then take a new snapshot of the table (scan.startup.mode=initial with a new "
    "checkpoint), since the changes of this statement cannot be recovered from the binlog"
)


def _refuse_unknown(event: UnknownEvent, here: BinlogPosition) -> None:
    """Stop on an event that may carry changes sparkcdc cannot decode (never skip it)."""
    code = event.header.type_code
    if code in _INERT_EVENTS or event.ignorable:
        return
    try:
        name = EventType(code).name
    except ValueError:
        name = f"type {code}"
    if code == EventType.INCIDENT:
        raise SourceError(
            f"the server wrote an INCIDENT event at binlog position {here}: changes around "
            "it may be missing from the binlog (e.g. a statement that failed half-way on a "
            "non-transactional table). The stream cannot prove it is complete from here; "
            "take a new snapshot (scan.startup.mode=initial with a new checkpoint)"
        )
    if code in (EventType.BEGIN_LOAD_QUERY, EventType.EXECUTE_LOAD_QUERY, EventType.APPEND_BLOCK):
        raise SourceError(
            f"a LOAD DATA statement was logged as a statement ({name}) at binlog position "
            f"{here}: its rows are not in the binlog. {_SESSION_FIX}"
        )
    raise ProtocolError(
        f"binlog event {name} at position {here} ({event.header.event_size} bytes) is not "
        "one sparkcdc can decode, and the server did not mark it ignorable: it may carry "
        "changes, so the stream stops rather than skip it. Check the server's binlog "
        "settings with `sparkcdc validate`; if they are supported, report the event type"
    )


class _XaGroups:
    """XA transactions seen in a read: whether each one's rows touched a captured table.

    A server logs an XA transaction's rows at XA PREPARE (between ``XA START`` and
    ``XA END``), before it is decided; they are delivered there. An ``XA ROLLBACK`` of one
    whose rows touched a captured table, or of one prepared before this read began (its rows
    are unknown here), stops the stream: changes that never committed may have been
    delivered.
    """

    def __init__(self, judge: bool) -> None:
        # False: the reader delivers no rows, or follows XA itself (``on_xa``)
        self.judge = judge
        self.current: str | None = None
        self.touched: dict[str, bool] = {}
        self.seen: set[str] = set()

    def group(self, xa_prepare: bool) -> None:
        """A MariaDB GTID starts an event group; FL_PREPARED_XA: an XA PREPARE's group."""
        self.current = "" if xa_prepare else None
        if xa_prepare:
            self.touched[""] = False

    def rows(self) -> None:
        if self.current is not None:
            self.touched[self.current] = True

    def statement(self, event: QueryEvent, here: BinlogPosition) -> None:
        parsed = xa_statement(event.query)
        if parsed is None:
            return
        verb, xid = parsed
        if verb == "START":  # MySQL logs it; MariaDB starts the group with its GTID
            self.current = xid
            self.touched[xid] = False
        elif verb == "END":
            if self.current is not None:
                self.touched[xid] = self.touched.pop(self.current, False)
                self.seen.add(xid)
            self.current = None
        elif verb == "ROLLBACK" and self.touched.pop(xid, None) is not False and self.judge:
            seen = xid in self.seen
            raise SourceError(
                f"at binlog position {here} a prepared XA transaction was rolled back "
                f"({_preview(event.query)}): its row changes were logged at its XA PREPARE"
                + (
                    ", on a captured table, and were delivered"
                    if seen
                    else " before this read began and may have touched captured tables"
                )
                + ". The stream stops rather than deliver changes that never committed; take "
                "a new snapshot of the affected tables (scan.startup.mode=initial with a new "
                "checkpoint)"
            )


def _statement_change(
    event: QueryEvent,
    here: BinlogPosition,
    table_filter: TablePredicate,
    ddl_filter: TablePredicate,
    xa: _XaGroups,
    stop_database: Callable[[str], bool] | None = None,
    write_effects: WriteEffectsOf | None = None,
) -> list[tuple[str, str]]:
    """The captured (database, table)s a DDL statement acts on, each once, in statement
    order; raises on a statement that may have changed captured rows without row images (a
    session in STATEMENT / MIXED format) unless it is proven not to have."""
    kind = statement_kind(event.query)
    if kind in ("control", "xa_rollback"):
        xa.statement(event, here)
        return []
    effect = row_effect(event.database, event.query)
    if effect is not None:
        _refuse_unproven_statement(event, here, effect, table_filter, write_effects)
        return []
    if stop_database is not None:
        dropped = dropped_database(event.query)
        if dropped is not None and stop_database(dropped):
            raise SourceError(
                f"at binlog position {here} the statement {_preview(event.query)} dropped the "
                f"database {dropped}, which holds tables this stream captures, and the binlog "
                "holds no image of the rows it dropped: the sink still has them. Drop them in "
                "the sink and take a new snapshot (a new checkpoint), or, if the sink should "
                "keep them, set ddl.row-changes=continue and the stream goes on past the "
                "statement"
            )
    return list(dict.fromkeys(t for t in ddl_tables(event.database, event.query) if ddl_filter(*t)))


def _refuse_unproven_statement(
    event: QueryEvent,
    here: BinlogPosition,
    effect: RowEffect,
    table_filter: TablePredicate,
    write_effects: WriteEffectsOf | None,
) -> None:
    """Stop at a statement logged as text that may change rows, unless it is proven to
    touch no captured table: it names none, calls no stored routine, and each table it
    writes changes alone (no trigger, cascading foreign key, view; ``write_effects``), each
    it reads is no view."""
    captured = [t for t in effect.tables if table_filter(*t)]
    if captured:
        what = "a data change to " + ", ".join(f"{d}.{t}" for d, t in captured)
        why = ""
    else:
        what = "a change that may reach captured tables"
        why = effect.unprovable or ""
        for database, table in effect.tables if not why else ():
            written = (database, table) in effect.writes
            found = (
                "no server to ask"
                if write_effects is None
                else write_effects(database, table, written)
            )
            if found is not None:
                why = f"it {'writes' if written else 'reads'} {database}.{table}, and {found}"
                break
        if not why:
            return
        why = f" sparkcdc cannot prove it changed no captured table: {why}."
    raise SourceError(
        f"at binlog position {here} the server logged {what} as a statement, not as row "
        f"images: {_preview(event.query)}.{why} A session with binlog_format=STATEMENT or "
        f"MIXED did this (thread {event.thread_id}); CDC needs the rows it changed, which "
        f"the binlog does not hold. {_SESSION_FIX}"
    )


def _preview(query: str, limit: int = 200) -> str:
    text = " ".join(query.split())
    return repr(text if len(text) <= limit else text[:limit] + "...")


class _ColumnMetadata:
    """Completes TABLE_MAPs that lack column metadata from the stream's schema versions.

    A DDL statement on a table at a position where no known version starts means the
    versions no longer describe the table after it: its next TABLE_MAP without metadata
    stops the stream (SchemaChangedError; the restarted query reads the new schema).
    """

    def __init__(
        self,
        versions: TableVersions | None,
        table_filter: TablePredicate,
        start: BinlogPosition,
        judge_xa: bool,
        stop_table: TablePredicate | None = None,
    ) -> None:
        self.decoder = BinlogDecoder(
            table_filter=table_filter, on_table_map=self.on_table_map, lazy_rows=True
        )
        self.versions = versions
        self.filter = table_filter
        self.stop_table = stop_table
        self.unknown_since: dict[tuple[str, str], BinlogPosition] = {}
        self.here = start  # the position of the event being decoded
        self.xa = _XaGroups(judge_xa)

    def on_table_map(self, event: TableMapEvent) -> None:
        if self.filter(event.database, event.table):
            self.table_map(event, self.here)
        elif self.stop_table is not None and self.stop_table(event.database, event.table):
            raise SourceError(
                f"at binlog position {self.here} rows of {event.database}.{event.table} "
                "changed; the stream captured that table when it last stopped, but the table "
                "did not exist when it started again (dropped or renamed meanwhile), so the "
                "stream has no schema for these rows and cannot deliver them. If the table "
                "exists again (created anew), restart the query: it then captures it. If "
                "not, take a new snapshot of the table's sink (a new checkpoint), or, if the "
                "sink should keep the table as the stream last delivered it, set "
                "ddl.row-changes=continue and the stream goes on past these rows"
            )

    def schema_change(self, database: str, table: str, here: BinlogPosition) -> None:
        if self.versions is None or here.seq() not in self.versions.starts(database, table):
            self.unknown_since.setdefault((database, table), here)

    def table_map(self, event: TableMapEvent, here: BinlogPosition) -> None:
        if not is_incomplete(event.columns):
            return
        key = (event.database, event.table)
        changed = self.unknown_since.get(key)
        if changed is not None:
            raise SchemaChangedError(
                f"table {event.database}.{event.table} changed at binlog position {changed} "
                f"and its TABLE_MAP there carries {missing_metadata(event.columns)}: its rows "
                "from there on decode only with its new schema. Restart the query (same "
                "checkpoint; sparkcdc run restarts it by itself) so it reads the new schema"
            )
        schema = None if self.versions is None else self.versions.at(key[0], key[1], here.seq())
        if schema is None:
            raise SourceError(
                f"the binlog at {here} carries {missing_metadata(event.columns)} for "
                f"{key[0]}.{key[1]}, and the "
                "stream holds no schema for that position to decode its rows with: was "
                "binlog_row_metadata changed while the query ran? Restart the query (it then "
                "reads the schema), or SET GLOBAL binlog_row_metadata='FULL'"
            )
        where = str(here)
        self.decoder.complete_table(
            event.table_id, id(schema), lambda cols: complete_columns(cols, schema, where)
        )


def _changes(
    event: BinlogEvent,
    here: BinlogPosition,
    timestamp: int,
    metadata: _ColumnMetadata,
    table_filter: TablePredicate,
    ddl_filter: TablePredicate,
    stop_database: Callable[[str], bool] | None = None,
    write_effects: WriteEffectsOf | None = None,
) -> Iterator[RowChanges | SchemaChange]:
    """The changes one event (at ``here``) makes to captured tables (and the DDL of the
    tables ``ddl_filter`` adds); stops on anything it cannot deliver exactly."""
    if isinstance(event, RowsEvent):
        if event.rows is not None and event.table is not None:
            if event.absent_before or event.absent_after:
                _refuse_partial_image(event, here)
            metadata.xa.rows()
            yield RowChanges(
                event.table.database,
                event.table.table,
                event.kind,
                event.rows,
                timestamp,
                here,
                event.table.image_columns,
            )
    elif isinstance(event, QueryEvent):
        # a statement on several captured tables (DROP TABLE a, b; RENAME TABLE ...) is
        # a schema change of each
        for database, table in _statement_change(
            event, here, table_filter, ddl_filter, metadata.xa, stop_database, write_effects
        ):
            metadata.schema_change(database, table, here)
            yield SchemaChange.from_binlog(database, table, event.query, timestamp, here)
    elif isinstance(event, UnknownEvent):
        _refuse_unknown(event, here)


def _images(change: RowChanges) -> int:
    return len(change.rows) * (2 if change.kind is RowsKind.UPDATE else 1)


def refuse_row_changing_ddl(
    changes: Iterable[RowChanges | SchemaChange],
) -> Iterator[RowChanges | SchemaChange]:
    """``changes``, stopped at an ALTER TABLE that added or removed rows of a captured table
    with no row image in the binlog (``DROP PARTITION`` and the like: ddl_names.row_changes),
    which the source option ``ddl.row-changes=fail`` asks for."""
    for change in changes:
        if isinstance(change, SchemaChange):
            clause = row_changes(change.statement)
            if clause is not None:
                raise SourceError(
                    f"at {change.where} the statement {_preview(change.statement)} "
                    f"({clause}) added or removed rows of the captured table "
                    f"{change.database}.{change.table}, and the binlog holds no row image of "
                    "them: the stream cannot say which rows changed. Take a new snapshot of "
                    "the table (scan.startup.mode=initial with a new checkpoint), or, if the "
                    "sink should keep its rows as they are (e.g. old partitions dropped for "
                    "retention), set ddl.row-changes=continue: the statement is then delivered "
                    "as a schema change and the stream goes on"
                )
        yield change


def _refuse_partial_image(event: RowsEvent, here: BinlogPosition) -> None:
    table = event.table
    assert table is not None
    absent = sorted(set(event.absent_before) | set(event.absent_after))
    names = ", ".join(table.columns[i].name or f"#{i + 1}" for i in absent)
    raise SourceError(
        f"the {event.kind.value} of {table.database}.{table.table} at binlog position {here} "
        f"was logged without column(s) {names} in its row images: a session with "
        "binlog_row_image=MINIMAL or NOBLOB wrote it, and CDC cannot know those values (it "
        "will not put NULL in their place). SET GLOBAL binlog_row_image='FULL' and remove SET "
        "[SESSION] binlog_row_image=... from the application, then take a new snapshot of the "
        "table (scan.startup.mode=initial with a new checkpoint)"
    )


def _no_table(database: str, table: str) -> bool:
    return False


@dataclass
class Share:
    """Which part of a range one of ``count`` readers decodes (``index`` 0 .. count-1).

    Every reader reads every event of the range and follows everything that is state
    (TABLE_MAPs, schema changes, XA groups, file rotations), but decodes only every
    ``count``-th ROWS event (or compressed transaction), counted from the range's start,
    from the ``index``-th on; schema-change rows are reader 0's. Between them the readers
    yield each change of the range exactly once, with the ``seq`` one reader gives it.
    Reading is cheap, decoding is not (DESIGN.md §2.3).

    >>> share = Share(1, 3)
    >>> [share.takes() for _ in range(6)]
    [False, True, False, False, True, False]
    """

    index: int = 0
    count: int = 1
    _seen: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"share {self.index} of {self.count} does not exist")

    @property
    def first(self) -> bool:
        """Reader 0: the one that yields the range's schema changes."""
        return self.index == 0

    def takes(self) -> bool:
        """Whether this reader decodes the next unit of the range (counts it)."""
        mine = self._seen % self.count == self.index
        self._seen += 1
        return mine


def read_range(
    settings: ConnectionSettings,
    server_id: int,
    start: BinlogPosition,
    end: BinlogPosition,
    table_filter: TablePredicate,
    versions: TableVersions | None = None,
    *,
    rows: bool = True,
    on_xa: Callable[[str, BinlogPosition], None] | None = None,
    share: Share | None = None,
    ddl_filter: TablePredicate | None = None,
    stop_database: Callable[[str], bool] | None = None,
    stop_table: TablePredicate | None = None,
) -> Iterator[RowChanges | SchemaChange]:
    """Yield the changes of captured tables in ``[start, end)``, in binlog order.

    ``share``: this reader's part of the range when several read it (:class:`Share`).

    ``ddl_filter``: the tables whose DDL statements are yielded (default: the captured
    ones), e.g. with the copies an online schema change tool alters.

    ``stop_database``: the databases whose ``DROP DATABASE`` stops the read (SourceError):
    those that may hold captured tables, whose rows leave with no row image.

    ``stop_table``: uncaptured tables whose row changes stop the read (SourceError): those
    the stream captured before and has no schema for now.

    ``rows=False``: only their schema changes (no row is decoded).

    ``versions``: the captured tables' schemas by position, to decode rows of a binlog
    without column metadata (``binlog_row_metadata`` not FULL); without them such rows stop
    the read.

    ``on_xa(kind, position)`` is told of each MariaDB XA event group in the range:
    ``"prepare"`` (an XA PREPARE: its rows, yielded like any, take effect at a later XA
    COMMIT) or ``"complete"`` (the XA COMMIT / XA ROLLBACK of an earlier prepare).

    Raises ProtocolError if the binlog ends before ``end`` (it was truncated or
    the offsets do not belong to this server), and ``BinlogResetError`` before the first
    row if the FORMAT_DESCRIPTION the server sends for ``start``'s (or ``end``'s) file is
    not the one of the file the position was taken in (``file_tag``): the binlog was
    reset or restored, or another server answers, since the batch was planned. Row
    positions take ``start``'s ``seq_file_base``.
    """
    if not start < end:
        return
    check_format = format_check(settings, start, end)
    write_effects = WriteEffects(settings)
    try:
        with BinlogClient(settings, server_id, list_files=files_on_server) as client:
            events = resumed_events(client, start, settings.connect_max_retries)
            yield from changes_of_events(
                events,
                start,
                end,
                table_filter,
                versions,
                rows=rows,
                on_xa=on_xa,
                check_format=check_format,
                share=share,
                ddl_filter=ddl_filter,
                stop_database=stop_database,
                stop_table=stop_table,
                write_effects=write_effects,
            )
    finally:
        write_effects.close()


def format_check(
    settings: ConnectionSettings, start: BinlogPosition, end: BinlogPosition
) -> Callable[[str, EventHeader], None]:
    """``check_format`` for :func:`changes_of_events` of a read of ``[start, end)``: each
    file's FORMAT_DESCRIPTION must be the one of the file the batch was planned in (the
    offsets' ``file_tag``), or, for a file the offsets do not name, the one this read first
    saw of it: a dump the reader opened again after a lost connection (which the server
    begins with the file's FORMAT_DESCRIPTION) reads on in the same file, not in a file of
    that name on another server that answers at the address now."""
    tags = {p.file: p.file_tag for p in (end, start) if p.file_tag is not None}

    def check(file: str, header: EventHeader) -> None:
        _check_file_tag(settings, file, tags.get(file), header, start)
        tags.setdefault(file, binlog_file_tag(header.timestamp, header.server_id))

    return check


def changes_of_events(
    events: Iterable[bytes | memoryview],
    start: BinlogPosition,
    end: BinlogPosition,
    table_filter: TablePredicate,
    versions: TableVersions | None = None,
    *,
    rows: bool = True,
    on_xa: Callable[[str, BinlogPosition], None] | None = None,
    check_format: Callable[[str, EventHeader], None] | None = None,
    share: Share | None = None,
    ddl_filter: TablePredicate | None = None,
    stop_database: Callable[[str], bool] | None = None,
    stop_table: TablePredicate | None = None,
    write_effects: WriteEffectsOf | None = None,
) -> Iterator[RowChanges | SchemaChange]:
    """:func:`read_range` on the events of a dump from ``start`` (checksums stripped): a
    pure function of bytes. ``check_format(file, header)`` judges each file's
    FORMAT_DESCRIPTION before any row of that file is read. ``write_effects`` tells whether
    a write to an uncaptured table changes it alone (:class:`WriteEffects`); without it, a
    statement-logged write to any table stops the read."""
    ddl = ddl_filter or table_filter
    # a caller that reads no rows, or follows XA itself (the chunk backfill reads its chunk
    # again when an XA finishes in its range), has no delivered rows an XA ROLLBACK undoes
    judge_xa = rows and on_xa is None
    metadata = _ColumnMetadata(
        versions, table_filter if rows else _no_table, start, judge_xa, stop_table
    )
    decoder = metadata.decoder
    current_file = start.file
    reached = start
    base = start.seq_file_base
    share = share or Share()
    for raw in events:
        _ts, type_code, _server, size, log_pos, _flags = EVENT_HEADER.unpack_from(raw, 0)
        if log_pos:  # artificial events the server sends at dump start have none
            metadata.here = BinlogPosition(current_file, log_pos - size, seq_file_base=base)
            if share.count > 1 and type_code in ROWS_EVENT_TYPES and not share.takes():
                if metadata.here >= end:
                    return
                reached = BinlogPosition(current_file, log_pos)
                if decoder.rows_of_captured_table(raw):  # another reader's rows
                    metadata.xa.rows()
                continue
        event = decoder.decode(raw)
        header = event.header
        if isinstance(event, RotateEvent):
            current_file = event.next_file
            reached = BinlogPosition(current_file, event.next_pos)
            continue
        if isinstance(event, FormatDescriptionEvent):
            if check_format is not None:
                check_format(current_file, header)
            continue
        if header.log_pos == 0:
            continue
        here = metadata.here
        if here >= end:
            return
        reached = BinlogPosition(current_file, header.log_pos)
        if isinstance(event, MariaGtidEvent):
            metadata.xa.group(event.xa_prepare)
            if on_xa is not None and (event.xa_prepare or event.xa_complete):
                on_xa("prepare" if event.xa_prepare else "complete", here)
        elif isinstance(event, TransactionPayloadEvent):
            # decoded by every reader (it holds the TABLE_MAPs and XA state of its
            # transaction), delivered by one
            mine = share.takes()
            first_row = 0
            for inner in event.events:
                for change in _changes(
                    inner,
                    here,
                    header.timestamp,
                    metadata,
                    table_filter,
                    ddl,
                    stop_database,
                    write_effects,
                ):
                    if isinstance(change, RowChanges):
                        change.first_row = first_row
                        first_row += _images(change)
                    if mine:
                        yield change
        else:
            for change in _changes(
                event,
                here,
                header.timestamp,
                metadata,
                table_filter,
                ddl,
                stop_database,
                write_effects,
            ):
                if share.first or isinstance(change, RowChanges):
                    yield change
    if reached < end:
        raise ProtocolError(
            f"the binlog ended at {reached} before the batch end {end}; the server's binlog "
            "was reset or these offsets belong to another server. Restart the query from a "
            "new checkpoint (scan.startup.mode=latest-offset or a snapshot)."
        )


def _check_file_tag(
    settings: ConnectionSettings,
    file: str,
    expected: str | None,
    header: EventHeader,
    start: BinlogPosition,
) -> None:
    found = binlog_file_tag(header.timestamp, header.server_id)
    if expected is not None and found != expected:
        raise BinlogResetError(
            f"{file} on {settings.endpoint} is not the binlog file the batch was planned in: "
            f"its FORMAT_DESCRIPTION says created:server_id {found}, the offset (or this "
            f"read's first look at the file) says {expected} (reading from {start}). The "
            "binlog was reset or restored, or another server answers at this address, since "
            "the batch was planned; nothing of the batch is delivered. Restart the query: it "
            "checks the server again and follows a failover by GTID, or says what to do"
        )
