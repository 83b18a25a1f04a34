"""The registry of source types: each name and where its dialect lives, imported by nothing.

Light on purpose: the processes Spark's Python side forks from (``spark/forkserver.py``,
``spark/worker_daemon.py``) read it before their imports to preload every dialect, which
``model/dialect.py`` otherwise imports on first use.

>>> dialect_modules()
('sparkcdc.mysql.dialect', 'sparkcdc.postgres.dialect')
"""

from __future__ import annotations

SOURCE_TYPES = {
    "mysql-cdc": "sparkcdc.mysql.dialect:MySqlDialect",
    "postgres-cdc": "sparkcdc.postgres.dialect:PostgresDialect",
}
"""Source type name -> ``module:class`` of its ``SourceDialect``, imported on first use."""


def dialect_modules() -> tuple[str, ...]:
    """The modules of the registered dialects: what a process that forks the source's
    planners and readers imports once for them (a reader imported its dialect, ~0.9 s
    here, in each planner process and each new worker)."""
    return tuple(target.partition(":")[0] for target in SOURCE_TYPES.values())
