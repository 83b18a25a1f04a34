"""Which tables a job captures: Flink CDC's two ways of saying it, one matcher.

- ``database-name`` + ``table-name``: two regular expressions (Flink CDC 2.x source options);
- ``tables``: Flink CDC 3.x's comma-separated ``db.table`` patterns, e.g. ``app_db.\\.*,
  shop.order_[0-9]+``, where the first unescaped ``.`` separates database from table and
  ``\\.`` in the table part is the regex ``.``; ``tables.exclude`` takes the same form.

Every regex must match the whole name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from sparkcdc.errors import ConfigError

Pattern = tuple[re.Pattern[str], re.Pattern[str]]


def _compile(text: str, what: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise ConfigError(f"{what} {text!r} is not a valid regular expression: {exc}") from None


def parse_table_patterns(text: str, *, option: str = "tables") -> tuple[Pattern, ...]:
    """Flink CDC 3.x ``tables`` text into (database regex, table regex) pairs.

    >>> [(d.pattern, t.pattern) for d, t in parse_table_patterns(r"app_db.\\.*, shop.orders")]
    [('app_db', '.*'), ('shop', 'orders')]
    """
    patterns: list[Pattern] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        split = re.search(r"(?<!\\)\.", item)
        if split is None:
            raise ConfigError(
                f"{option}: {item!r} has no database part; write 'database.table' patterns, "
                r"e.g. 'app_db.orders' or 'app_db.\.*' (all tables of app_db)"
            )
        database, table = item[: split.start()], item[split.end() :]
        if not database or not table:
            raise ConfigError(
                f"{option}: {item!r} has an empty database or table part; write "
                r"'database.table' patterns, e.g. 'app_db.orders' or 'app_db.\.*'"
            )
        patterns.append(
            (
                _compile(database, f"{option}: database pattern"),
                _compile(table.replace(r"\.", "."), f"{option}: table pattern"),
            )
        )
    if not patterns:
        raise ConfigError(f"{option} is empty; give at least one 'database.table' pattern")
    return tuple(patterns)


# (database, table) -> captured? The question every reader of the binlog asks per table.
TablePredicate = Callable[[str, str], bool]


@dataclass(frozen=True)
class TableFilter:
    """Included minus excluded (database, table) patterns."""

    include: tuple[Pattern, ...]
    exclude: tuple[Pattern, ...] = ()

    @classmethod
    def from_options(
        cls,
        *,
        tables: str | None,
        tables_exclude: str | None,
        database_name: str | None,
        table_name: str,
    ) -> TableFilter:
        if tables:
            include = parse_table_patterns(tables)
        elif database_name:
            include = (
                (
                    _compile(database_name, "database-name"),
                    _compile(table_name, "table-name"),
                ),
            )
        else:
            raise ConfigError(
                "no tables to capture: set 'tables' (e.g. 'app_db.\\.*') or 'database-name' "
                "(and optionally 'table-name')"
            )
        exclude = (
            parse_table_patterns(tables_exclude, option="tables.exclude") if tables_exclude else ()
        )
        return cls(include, exclude)

    def matches(self, database: str, table: str) -> bool:
        """Whether ``database.table`` is captured.

        >>> TableFilter.from_options(tables="a.t_.*", tables_exclude="a.t_old",
        ...     database_name=None, table_name=".*").matches("a", "t_old")
        False
        """

        def hit(patterns: tuple[Pattern, ...]) -> bool:
            return any(d.fullmatch(database) and t.fullmatch(table) for d, t in patterns)

        return hit(self.include) and not hit(self.exclude)

    def matches_database(self, database: str) -> bool:
        """Whether some include pattern's database part matches ``database``."""
        return any(d.fullmatch(database) for d, _ in self.include)

    def describe(self) -> str:
        text = ", ".join(f"{d.pattern}.{t.pattern}" for d, t in self.include)
        if self.exclude:
            text += " excluding " + ", ".join(f"{d.pattern}.{t.pattern}" for d, t in self.exclude)
        return text
