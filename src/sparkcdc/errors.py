"""One exception root for sparkcdc, with a subclass per area.

Messages say what was received, what was expected, where, and what to do.
Every exception pickles (it may cross from a Spark executor to the driver): each
subclass keeps the single-message constructor of ``Exception``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class SparkCdcError(Exception):
    """Root of every error sparkcdc raises on purpose."""


class ConfigError(SparkCdcError):
    """An option or pipeline file is wrong (name, value, combination)."""


class SourceError(SparkCdcError):
    """The source server is unreachable, misconfigured, or refuses what we need."""


class SourceConnectionError(SourceError):
    """A connection to the source could not be opened or was lost (refused, timed out,
    killed, the server restarting): the same connection tried again later may succeed."""


class SchemaChangedError(SourceError):
    """A typed stream's table changed shape; restart the query to go on with the new one."""


class DdlParseError(SourceError):
    """A DDL statement of the change stream that sparkcdc cannot read."""


class ProtocolError(SparkCdcError):
    """The replication stream broke or carried bytes we cannot decode."""


class PositionError(SourceError):
    """A binlog position is malformed or no longer available on the server."""


class ServerContinuityError(PositionError):
    """An offset is no longer a place on the server the source reaches: another server
    answers (and no GTID leads from the offset to it), or the binlog was reset, restored
    or went backwards. Nothing is read; the message says what to do."""


class DifferentServerError(ServerContinuityError):
    """The server's identity is not the one the offset was taken on."""


class BinlogResetError(ServerContinuityError):
    """The offset's binlog file was replaced (RESET MASTER, a restore): same name, other file."""


class PositionBehindError(ServerContinuityError):
    """The server's binlog (or GTID state) ends before the offset: it went back in time."""


class ReplicationSlotError(SourceError):
    """A PostgreSQL replication slot is missing, of another plugin or database, in use, or
    already past the position a read asks for."""


class PublicationError(SourceError):
    """A PostgreSQL publication is missing or does not publish what the source reads."""


class ServerIdClashError(SourceError):
    """Another replica reads the source's binlog with a server id this stream would use."""


class SnapshotError(SparkCdcError):
    """The chunked snapshot cannot go on (no primary key, DDL conflict, ...)."""


class SinkError(SparkCdcError):
    """A sink refused or lost a write."""


class CheckpointInUseError(SparkCdcError):
    """Another run of the pipeline holds the checkpoint (its lease is live)."""


class SparkMasterError(SparkCdcError):
    """The Spark master a session is to run on cannot be reached."""


class PrivateDirectoryError(SparkCdcError):
    """A local directory sparkcdc keeps code or state in is not this user's alone."""


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """Return the candidate closest to ``name``, or None if nothing is near.

    >>> closest("hostnme", ["hostname", "port"])
    'hostname'
    """
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """A ' Did you mean 'x'?' suffix for an error message, or ''."""
    match = closest(name, candidates)
    return f" Did you mean '{match}'?" if match else ""


def error_class(name: str) -> type[SparkCdcError]:
    """sparkcdc's error class named ``name``; SparkCdcError when there is none of that name
    (an error's name as a failed query's text holds it).

    >>> error_class("SinkError").__name__, error_class("KeyError").__name__
    ('SinkError', 'SparkCdcError')
    """
    kind = globals().get(name)
    if isinstance(kind, type) and issubclass(kind, SparkCdcError):
        return kind
    return SparkCdcError
