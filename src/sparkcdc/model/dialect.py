"""The source interface: what a database implements for sparkcdc to capture it.

The incremental snapshot, the Spark source and the pipelines are written once against
:class:`SourceDialect`, as Flink CDC's incremental-snapshot framework is against its
``JdbcDataSourceDialect``; each database implements it in its own package and is found by
its source type name (:func:`dialect_class`, loaded on first use like the sinks). The
MySQL/MariaDB source (``sparkcdc.mysql.dialect``) and the PostgreSQL source
(``sparkcdc.postgres.dialect``) implement it; what each method must guarantee is in
DESIGN.md, "The source interface".

>>> dialect_class("mysql-cdc").__name__
'MySqlDialect'
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import pyarrow as pa

from sparkcdc.errors import ConfigError, SourceError, did_you_mean
from sparkcdc.model.canonical import ChecksumTable
from sparkcdc.model.events import RowChanges, SchemaChange
from sparkcdc.model.identity import ServerIdentity
from sparkcdc.model.options import ServerIdRange, SourceOptions
from sparkcdc.model.schema import Column, TableSchema
from sparkcdc.model.schema_change import SourceDdl
from sparkcdc.model.source_types import SOURCE_TYPES
from sparkcdc.model.tables import TableFilter
from sparkcdc.model.validation import ValidationIssue

T = TypeVar("T")


class Position(Protocol):
    """A place in a source's change stream (a binlog position, a WAL LSN): totally
    ordered, and lossless through its offset form (``from_offset(p.to_offset()) == p``)."""

    def to_offset(self) -> dict[str, Any]: ...

    def seq(self) -> int:
        """A number that orders the changes of one stream (the ``_seq`` of their rows)."""
        ...

    def __lt__(self, other: Any, /) -> bool: ...

    def __le__(self, other: Any, /) -> bool: ...


P = TypeVar("P", bound=Position)

# The ``key_collation`` of string keys compared by Unicode code point with no padding
# (``'a' < 'a '``): PostgreSQL's "C" collation on a UTF-8 database, whose byte order is the
# code points' order. Python reproduces it exactly (snapshot/keys.py).
CODE_POINT_COLLATION = "C"
P_co = TypeVar("P_co", bound=Position, covariant=True)


class Session(Protocol):
    """A SQL connection kept for reads: ``run(work)`` gives ``work`` the open connection
    and does it again, whole, on a new one when the server dropped it."""

    def run(self, work: Callable[[Any], T]) -> T: ...

    def close(self) -> None: ...


class StreamFollower(Protocol[P]):
    """The driver's watch over the change stream a query reads: which server answers, and
    whether an offset is still a place on it. ``view`` is the dialect's own look at the
    server (``observe``), with ``identity``, ``end`` and ``where()``."""

    def run(self, work: Callable[[Any], T]) -> T:
        """``work`` on the driver's kept SQL connection."""
        ...

    def observe(self) -> Any:
        """The server as the driver sees it now."""
        ...

    def end_of(self, view: Any) -> P:
        """Where the server's change stream ends, as a place on it an offset can hold."""
        ...

    def mark(self, view: Any, position: P) -> P:
        """A start position taken elsewhere, as a place on the server of ``view``."""
        ...

    def continued(self, position: P, start: P) -> P:
        """``position`` numbered (``seq``) as the batch that starts at ``start``."""
        ...

    def trust(self, key: str) -> None:
        """The offset named ``key`` was taken here on this server: check it lightly."""
        ...

    def locate(
        self,
        key: str,
        position: P,
        identity: ServerIdentity | None,
        view: Any,
        highs: Callable[[], Sequence[P]],
    ) -> tuple[P, bool]:
        """Where ``position`` (of the offset ``key``, taken on ``identity``) is on the
        server of ``view``, and whether that is another server it was followed to (with
        ``highs()``, the last chunk HWs, followed too). Raises ``ServerContinuityError``
        when it is no place there: another server, a reset, a stream behind it."""
        ...

    def high_on(self, view: Any, old: ServerIdentity, high: P) -> P:
        """A chunk HW taken on ``old`` as a place on the server of ``view``."""
        ...

    def schemas_of(self, view: Any) -> tuple[TableSchema, ...] | None:
        """The captured tables' schemas as of ``end_of(view)``, for a change stream that
        carries no DDL (PostgreSQL's WAL: DESIGN.md §12.2); None: the stream carries its
        own (MySQL's binlog)."""
        ...

    def cut(self, here: P, end: P, view: Any, budget: int, high: Callable[[], P | None]) -> P:
        """``end``, or the first transaction boundary past ``budget`` bytes from ``here``
        (never before ``high()``) when the range is longer (budget <= 0: no bound)."""
        ...

    def close(self) -> None: ...


class ReaderClaim(Protocol):
    """The stream's hold on its reader ids on the server (MySQL: server ids; PostgreSQL:
    a replication slot): ``check`` while a run goes on, ``close`` at its end."""

    def check(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class RangeRead(Generic[P]):
    """One read of a change range ``[start, end)``: what a binlog (WAL) partition reads.

    Built once where the read is planned, picklable (it travels to the executor that reads).
    ``tables``: the captured (database, table)s, whose row changes and DDL are yielded.
    ``gone``: tables the stream captured before and no longer does (dropped or renamed while
    it was stopped): their DDL is yielded; with ``refuse_row_changing_ddl`` their rows, and a
    drop of one of ``databases``, stop the read. ``rows=False``: schema changes only.
    ``follow_copies``: DDL on the copies an online schema change tool alters is yielded too.
    ``versions``: the source's own JSON of the captured tables' schemas by position, for
    rows logged without their columns' metadata ("": none needed). ``share`` of ``shares``:
    this reader's part when several read the range. ``schemas``: the captured tables'
    schemas as the caller knows them at ``start``, for a stream without DDL whose schema
    changes are told by comparing table shapes (PostgreSQL): a change made while no read
    ran is told against them (none given: the first shape a read sees is its base).
    """

    start: P
    end: P
    reader_id: int
    tables: frozenset[tuple[str, str]]
    gone: frozenset[tuple[str, str]] = frozenset()
    databases: frozenset[str] = frozenset()
    rows: bool = True
    follow_copies: bool = False
    refuse_row_changing_ddl: bool = False
    versions: str = ""
    share: int = 0
    shares: int = 1
    schemas: tuple[TableSchema, ...] = ()

    def captures(self, database: str, table: str) -> bool:
        return (database, table) in self.tables


@dataclass(frozen=True)
class CapturedSchemas(Generic[P]):
    """The captured tables' schemas and the position they hold at."""

    tables: tuple[TableSchema, ...]
    position: P
    # whether rows carry their columns' metadata (MySQL: binlog_row_metadata=FULL); without
    # it they are decoded with the schemas kept by position (``RangeRead.versions``)
    rows_carry_columns: bool


@dataclass(frozen=True)
class StreamHold:
    """What the server keeps of the change stream for this source's reader alone, and how
    much (``SourceDialect.stream_hold``): PostgreSQL's replication slot, which keeps the
    WAL its reader has not confirmed for as long as it exists.

    >>> print(StreamHold("replication slot s", 2048, (("active pid", "none"),)).text())
    replication slot s: retains 2,048 bytes of the change log (active pid none)
    """

    what: str  # what holds it, named as the server names it
    retained_bytes: int | None  # the change log kept for it behind the server's end
    facts: tuple[tuple[str, str], ...] = ()  # (name, value)s, in the order shown

    def text(self) -> str:
        kept = "unknown" if self.retained_bytes is None else f"{self.retained_bytes:,} bytes"
        details = ", ".join(f"{name} {value}" for name, value in self.facts)
        return f"{self.what}: retains {kept} of the change log" + (
            f" ({details})" if details else ""
        )

    def to_json(self) -> dict[str, Any]:
        return {"holder": self.what, "retained_bytes": self.retained_bytes, **dict(self.facts)}


# -- the incremental snapshot (DESIGN.md §2, §10) ----------------------------------------


@dataclass(frozen=True)
class ChunkSelect:
    """One chunk's SELECT: the rows of ``schema`` whose ``key_column`` lies in
    ``[start, end)`` (None: unbounded; the chunk without a start holds the NULL keys too),
    every column in ``schema``'s order. ``index``: the chunk's, for messages. ``skip``: the
    source's readers not to use (tests compare them; MySQL: ``connectorx``, ``text``)."""

    schema: TableSchema
    key_column: str
    start: Any = None
    end: Any = None
    index: int = 0
    skip: frozenset[str] = frozenset()


class ChunkReader(Protocol[P_co]):
    """A task's chunk reads on one SQL connection (``SourceDialect.chunk_reader``): the two
    watermarks and the SELECT between them."""

    def low(self) -> P_co:
        """The low watermark: a position before which every transaction is committed and
        visible to a read started after this call (not merely logged)."""
        ...

    def high(self) -> P_co:
        """The high watermark: where the change stream ends now, on a transaction boundary
        (with what locates it on another server after a failover)."""
        ...

    def unsettled(self) -> list[str]:
        """Transactions whose rows are in the stream before they take effect (MySQL: XA
        transactions prepared and not finished); a read around them is read again. A
        source without such transactions returns none."""
        ...

    def select(self, spec: ChunkSelect) -> tuple[pa.Table, str]:
        """The chunk's rows as of this moment, as an Arrow table of the stream's value form
        (``model/row_values.py``), and the name of the reader that read them. Raises
        ``SchemaChangedError`` / ``SnapshotError`` when the table lost a column or is gone."""
        ...


class KeyRanking(Protocol):
    """String keys ordered by the server, under a collation Python cannot reproduce
    (``SourceDialect.key_ranking``): what the backfill and the interleaving filter judge
    chunk membership by, so that they agree with the chunk's SELECT."""

    def ranks(self, collation: str, keys: Sequence[Any], bounds: Sequence[Any]) -> list[int]:
        """For each of ``keys`` (non-NULL, distinct), how many of ``bounds`` (non-NULL,
        ascending in the server's order) are ``<=`` it under ``collation``."""
        ...

    def close(self) -> None: ...


class SplitQueries(Protocol):
    """What the chunk splitter asks of a table (SQL in production, a list in property
    tests); key values in the stream's value form."""

    def bounds(self) -> tuple[Any, Any] | None:
        """``(MIN(k), MAX(k))`` over non-NULL keys, or None if there are none."""
        ...

    def row_count(self) -> int:
        """The number of rows (an estimate is fine: it only picks the splitting method)."""
        ...

    def next_chunk_max(self, start: Any, size: int) -> Any | None:
        """MAX of the first ``size`` keys ``>= start`` in key order, None if none."""
        ...

    def min_above(self, value: Any) -> Any | None:
        """The smallest key ``> value``, None if none."""
        ...

    def compare(self, a: Any, b: Any) -> int:
        """-1, 0 or 1 as ``a`` is below, equal to or above ``b`` in the server's order."""
        ...


class SourceDialect(ABC, Generic[P]):
    """What a database implements for sparkcdc to capture it; one per source type.

    An instance holds one source's settings (from the source options) and no connection:
    it is picklable and travels to executors. Connections are opened by ``session`` (SQL
    look-ups, each method taking the connection ``work`` is given) and by ``read_range``
    (the change stream).
    """

    type_name: str  # the source type: the streaming format and pipeline ``source.type``
    settings: Any  # how its connections are made (the dialect's own type)
    # the options it is built from: SourceOptions or a subclass of the source's own
    options_type: ClassVar[type[SourceOptions]] = SourceOptions
    # the key of the stream position in the Spark source's offsets (``{key: to_offset()}``)
    offset_key: ClassVar[str] = "binlog"

    @abstractmethod
    def __init__(self, options: SourceOptions) -> None: ...

    # -- the server -------------------------------------------------------------------

    @abstractmethod
    def check_server(self) -> None:
        """Raise ``SourceError`` naming the setting or grant to fix when the server cannot
        be captured (its change log off or in a form not read, a privilege missing)."""

    @abstractmethod
    def validate(self) -> list[ValidationIssue]:
        """Every issue ``check_server`` judges, each with its severity and fix (``sparkcdc
        validate`` prints them all); raises only when the server cannot be reached."""

    def tls_report(self) -> list[tuple[str, str]]:
        """(connection, how it is secured) for each kind of connection the source opens,
        for ``sparkcdc validate``; none where the source does not tell."""
        return []

    @abstractmethod
    def server_name(self) -> str:
        """The server as messages name it (no password)."""

    @abstractmethod
    def session(self, database: str | None = None) -> Session:
        """A kept SQL connection to the server (opened on first use)."""

    @abstractmethod
    def follower(self) -> StreamFollower[P]:
        """A driver's watch over the server (no connection until first used)."""

    @abstractmethod
    def claim_readers(self, ids: ServerIdRange) -> ReaderClaim:
        """Claim the stream's reader ids on the server, or raise saying who holds one."""

    # -- tables -----------------------------------------------------------------------

    @abstractmethod
    def match_tables(self, conn: Any, tables: TableFilter) -> list[tuple[str, str]]:
        """The (database, table)s the server has that ``tables`` matches, sorted."""

    @abstractmethod
    def check_databases(self, conn: Any, databases: Iterable[str]) -> None:
        """Raise ``SourceError`` when the change log leaves out one of ``databases``."""

    @abstractmethod
    def load_schema(self, conn: Any, database: str, table: str) -> TableSchema:
        """A table's columns and primary key as the source options type them."""

    @abstractmethod
    def capture_schemas(self, names: Sequence[tuple[str, str]]) -> CapturedSchemas[P]:
        """The schemas of ``names`` and the position they hold at: no schema change of
        theirs between the position and the read."""

    @abstractmethod
    def unique_keys(self, conn: Any, database: str, table: str) -> list[tuple[str, ...]]:
        """A table's unique keys (chunk key candidates when it has no primary key)."""

    @abstractmethod
    def shared_keys(
        self, conn: Any, database: str, table: str, columns: Sequence[str], limit: int
    ) -> list[tuple[Any, ...]]:
        """Up to ``limit`` values of ``columns`` that several rows share, each followed by
        how many rows share it (a scan: for small tables)."""

    @abstractmethod
    def estimated_rows(self, conn: Any, database: str, table: str) -> int:
        """The server's estimate of a table's row count (no scan)."""

    @abstractmethod
    def create_table_statement(self, schema: TableSchema) -> str:
        """The statement that creates a table of ``schema`` in the source's SQL: the schema
        change a table that joins a running stream brings before its rows."""

    # -- positions --------------------------------------------------------------------

    @abstractmethod
    def current_position(self, conn: Any) -> P:
        """Where the change stream ends now: a watermark, on a transaction boundary."""

    @abstractmethod
    def startup_position(self) -> P:
        """Where a new stream starts reading, as the options' ``scan.startup.mode`` says."""

    @abstractmethod
    def position_from_offset(self, offset: dict[str, Any]) -> P:
        """The position of ``offset`` (the inverse of ``Position.to_offset``)."""

    # -- the change stream ------------------------------------------------------------

    @abstractmethod
    def read_range(self, spec: RangeRead[P]) -> Iterator[RowChanges | SchemaChange]:
        """Every change of ``spec.tables`` in ``[spec.start, spec.end)`` once, in stream
        order, each row carrying the ``seq`` of its position; raise when the stream there
        is not the one the positions were taken on."""

    def commit(self, position: P) -> None:
        """Everything before ``position`` is committed by the caller (Spark committed the
        batch that ends there): a source whose server keeps the stream for its reader
        (PostgreSQL's replication slot) may let the server free what lies before it. Never
        called with a position not yet committed; a source that keeps nothing does nothing."""

    def stream_hold(self) -> StreamHold | None:
        """What the server keeps of the change stream for this source's reader, read now
        (``sparkcdc status``); None where it keeps nothing for a reader (MySQL: the binlog
        expires by the server's own settings, whoever reads it), the default."""
        return None

    def release_stream(self) -> list[str]:
        """Drop what the server keeps for this source's reader (``stream_hold``), for a
        pipeline given up with its checkpoint: a line per thing dropped or left, and why.
        Raises ``SourceError`` while a reader holds it. A server that keeps nothing for a
        reader (MySQL) has nothing to drop: the default."""
        return [f"the {self.type_name} source's server keeps nothing for a reader: nothing to drop"]

    # -- rows logged without their columns ---------------------------------------------

    def schema_versions(
        self, start: P, read_at: P, tables: Sequence[TableSchema], reader_id: int, saved: str
    ) -> str:
        """The schemas of ``tables`` by position from ``start`` on (the dialect's JSON, the
        ``RangeRead.versions`` of later reads), for a change stream that logs rows without
        their columns' metadata (``CapturedSchemas.rows_carry_columns`` false); ``saved``:
        what the last run returned. A stream whose rows carry their columns keeps none."""
        return ""

    def versions_with(self, versions: str, added: Sequence[TableSchema]) -> str:
        """``versions`` with tables that joined the stream, each holding from its start."""
        return versions

    # -- the incremental snapshot (DESIGN.md §2) ----------------------------------------

    @abstractmethod
    def chunk_reader(self, conn: Any) -> ChunkReader[P]:
        """Chunk reads on ``conn`` (the connection a ``session`` gave ``work``), set up to
        read values in the stream's form (MySQL: a UTC session time zone)."""

    @abstractmethod
    def split_queries(
        self, conn: Session, schema: TableSchema, key_column: str, collation: str | None
    ) -> SplitQueries:
        """The splitter's queries of a table's chunk key (Flink CDC's ``queryMinMax``,
        ``queryNextChunkMax``) on ``conn`` (a ``session``); ``collation``: the key's
        (``key_collation``), which ``compare`` follows."""

    @abstractmethod
    def key_collation(self, conn: Any, database: str, table: str, column: str) -> str | None:
        """The collation a string column's values are compared by (None: not a string)."""

    @abstractmethod
    def key_ranking(self, conn: Any = None) -> KeyRanking:
        """Keys ranked by the server on ``conn`` (the caller's open connection, which it
        never closes), or on a kept connection of its own opened on first use."""

    @abstractmethod
    def read_backfill(
        self, schema: TableSchema, start: P, end: P, reader_id: int, settled: list[P]
    ) -> Iterator[RowChanges | SchemaChange]:
        """The changes of ``schema``'s table in ``[start, end)`` in stream order, its rows
        decoded with ``schema`` (a schema change of it is yielded, and the chunk is read
        again). Appends to ``settled`` where a transaction whose rows came before took
        effect (MySQL: XA COMMIT / XA ROLLBACK)."""

    # -- decoding the change stream ----------------------------------------------------

    def compiled_rows(self) -> bool:
        """Whether this source's change rows are decoded by compiled code here (its
        ``EncodedRows.kernel``), so that one partition of a parallel read takes a larger
        share of a range. A source without a compiled decoder keeps the default."""
        return False

    # -- what the pipelines ask of the source -----------------------------------------

    @abstractmethod
    def ddl(self) -> SourceDdl:
        """How the schema change statements of the change stream read (``SchemaChange``
        rows): parsed into schema change events, the new columns typed as ``load_schema``
        types them (the source options' say), and their literal defaults."""

    def position_now(self) -> P:
        """Where the change stream ends now, on a connection of its own: the place alone
        (no resume state such as GTIDs need be read), for how far a pipeline has to go
        (status, lag, the end of an available-now run, verify's wait). By default the
        ``current_position`` on a session of its own."""
        session = self.session()
        try:
            return session.run(self.current_position)
        finally:
            session.close()

    def read_column(
        self, schema: TableSchema, keys: Sequence[Column], column: Column
    ) -> Iterator[list[tuple[Any, ...]]]:
        """``keys`` then ``column`` of every row of ``schema``'s table, in the stream's
        value form, in pages (each read whole, again where the server dropped the
        connection): an added column's value for the rows the sink had before it. A source
        that cannot read one back raises ``SourceError`` (the default): the sink keeps NULL
        there, and the divergence is recorded."""
        raise SourceError(f"the {self.type_name} source cannot read a column back by key yet")

    # -- verify: the source's side of a comparison, computed by the database ------------

    def canonical_value(self, column: Column, sink_type: str) -> str | None:
        """The canonical text (``sparkcdc.pipeline.canonical``) of what a pipeline writes
        from ``column`` into a sink column of ``sink_type``, in the source's SQL; None where
        the source has no exact form of it. A source with none (the default) is verified by
        reading its rows into Spark; one with forms answers the three statements below."""
        return None

    def bucket_sums(
        self, conn: Any, table: ChecksumTable, chunk: ChunkSelect, buckets: int
    ) -> list[tuple[int, int, int]]:
        """(bucket, rows, sum of row hashes) of the rows of one chunk of ``table`` (the
        splitter's chunk as a ``ChunkSelect``, of ``table.schema``)."""
        raise NotImplementedError(f"{self.type_name} computes no canonical values")

    def bucket_rows(
        self, conn: Any, table: ChecksumTable, chunk: ChunkSelect, buckets: int, wanted: set[int]
    ) -> list[tuple[Any, ...]]:
        """The rows of one chunk in the buckets ``wanted``: each (key text, row hash,
        bucket, the key's canonical values..., the key's values as the table holds them...)."""
        raise NotImplementedError(f"{self.type_name} computes no canonical values")

    def row_fields(
        self, conn: Any, table: ChecksumTable, keys: Sequence[Sequence[Any]]
    ) -> dict[str, tuple[str, ...]]:
        """Key text -> canonical fields of the rows of ``keys`` (primary key values)."""
        raise NotImplementedError(f"{self.type_name} computes no canonical values")


def dialect_class(type_name: str, *, where: str = "source.type") -> type[SourceDialect[Any]]:
    """The SourceDialect registered for ``type_name`` (imported on first use)."""
    target = SOURCE_TYPES.get(type_name)
    if target is None:
        raise ConfigError(
            f"{where}: unknown source type {type_name!r}.{did_you_mean(type_name, SOURCE_TYPES)}"
            f" Valid types: {', '.join(sorted(SOURCE_TYPES))}"
        )
    module_name, _, class_name = target.partition(":")
    cls: type[SourceDialect[Any]] = getattr(importlib.import_module(module_name), class_name)
    return cls


def options_for(type_name: str, options: Mapping[str, str]) -> SourceOptions:
    """The raw options of a source of ``type_name`` parsed into its options model.

    >>> type(options_for("mysql-cdc", {"hostname": "h", "username": "u",
    ...     "database-name": "app", "scan.startup.mode": "latest-offset"})).__name__
    'SourceOptions'
    """
    return dialect_class(type_name).options_type.from_options(options)


def dialect_for(options: SourceOptions, type_name: str | None = None) -> SourceDialect[Any]:
    """The dialect of one source, from its options (``options_for``'s): of ``type_name``,
    or of the options' own format."""
    return dialect_class(type_name or options.format_name)(options)
