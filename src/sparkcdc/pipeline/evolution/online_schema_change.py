"""Online schema change tools (gh-ost, pt-online-schema-change) followed through their
cut-over (``scan.parse.online.schema.changes.enabled``): the statements on the tool's copy of
a source table are kept, and applied to the table when the copy is swapped in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sparkcdc.errors import DdlParseError, SourceError
from sparkcdc.model.events import SchemaChange
from sparkcdc.model.schema_change import (
    CreateTable,
    DropTable,
    RenameTable,
    SchemaChangeEvent,
    SchemaOf,
    SourceDdl,
    TableChange,
    TruncateTable,
)
from sparkcdc.pipeline.evolution.state import SchemaState


def tool_statement(
    state: SchemaState,
    row: SchemaChange,
    schema_now: SchemaOf,
    ddl: SourceDdl,
) -> bool:
    """Whether ``row`` is a statement on a table an online schema change tool made beside
    a source table (scan.parse.online.schema.changes.enabled), which it then takes in:
    the copy's statements are kept for the cut-over, the tool's other tables (and the
    copy's swap out of its name) are left alone, and none of them joins the pipeline."""
    tool = ddl.tool_table_of(row.table)
    if tool is None or f"{row.database}.{tool[0]}" not in state.sources:
        return False
    original, is_copy = tool
    copy = f"{row.database}.{row.table}"
    if not is_copy:
        return True
    try:
        changes = ddl.parse(row.database, row.statement, schema_now)
    except DdlParseError:
        changes = None  # kept as written: the cut-over says what it cannot read
    own = [c.event for c in changes or [] if c.qualified_name == copy]
    if any(isinstance(e, RenameTable) for e in own):
        return True  # the cut-over: the table's own row of the statement takes the copy
    if any(isinstance(e, DropTable) for e in own):
        state.shadows.pop(copy, None)
        return True
    created = [e for e in own if isinstance(e, CreateTable)]
    if created:
        model = schema_now(row.database, original)
        if model is not None and replace(created[0].schema, table=original) == model:
            state.shadows[copy] = []  # a copy of the table: its statements follow
        else:
            state.shadows.pop(copy, None)  # not a copy: a cut-over stops
        return True
    kept = state.shadows.get(copy)
    if kept is not None and (not kept or kept[-1][0] < row.seq):
        kept.append((row.seq, row.database, row.statement))
    return True


def swapped_in(state: SchemaState, own: str, changes: Sequence[TableChange]) -> str | None:
    """The followed copy a statement renames into ``own`` (the cut-over), or None."""
    for c in changes:
        event = c.event
        if (
            isinstance(event, RenameTable)
            and f"{event.database}.{event.table}" == own
            and c.qualified_name in state.shadows
            and own in state.sources
        ):
            return c.qualified_name
    return None


def copy_events(
    state: SchemaState, copy: str, own: str, seq: int, ddl: SourceDdl
) -> list[SchemaChangeEvent]:
    """The column changes the tool made to its copy, as changes of ``own`` at the
    cut-over (rows before it have the old shape, rows after it the new one)."""
    events: list[SchemaChangeEvent] = []
    for at, database, statement in state.shadows[copy]:
        try:
            changes = ddl.parse(database, statement)
        except DdlParseError as exc:
            raise DdlParseError(
                f"{exc}. The online schema change tool ran it on {copy} (seq {at}), the "
                f"copy it swapped in for {own} at seq {seq}; sparkcdc cannot tell what it "
                "did to the columns, so the pipeline stops. Report the statement; to go "
                "on, take a new snapshot (delete the pipeline's checkpoint and run it again)"
            ) from None
        for c in changes:
            if c.qualified_name != copy:
                continue
            if isinstance(c.event, CreateTable | DropTable | RenameTable | TruncateTable):
                raise replaced_error(own, copy, seq, statement)
            events.append(c.event)
    return events


def replaced_error(table: str, by: str, seq: int, statement: str) -> SourceError:
    return SourceError(
        f"{table} was replaced at seq {seq} by {statement!r}: the table {by} took its name. "
        "The pipeline knows neither the rows nor the columns of that table (an online schema "
        "change tool, gh-ost or pt-online-schema-change, copies the rows into it and alters "
        "it, then swaps the names), so writing on would leave the sink's rows and columns "
        "wrong. The pipeline stops; take a new snapshot (delete the pipeline's checkpoint and "
        "run it again), or alter the table in place (ALTER TABLE, ALGORITHM=INPLACE or "
        "INSTANT)"
    )
