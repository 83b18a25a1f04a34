"""What verify found, per sink table and in all (text and JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TableReport:
    """What verify found for one sink table."""

    sink_table: str
    sources: tuple[str, ...]
    mode: str  # 'pushdown' (source aggregated in the database) or 'spark'
    sink_reader: str = "spark"  # 'spark', or the library that read it without Spark
    columns: int = 0  # sink columns compared
    # columns not compared, each {"column", "side": "sink" | "source", "why"}
    not_compared: list[dict[str, str]] = field(default_factory=list)
    position: str | None = None  # the source position of the first look
    source_rows: int = 0
    sink_rows: int = 0
    buckets: int = 0
    differing_buckets: int = 0  # at the first look (under live writes: rows in flight)
    rechecked: int = 0  # keys of those buckets read again, row by row
    missing: list[dict[str, Any]] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)
    different: list[dict[str, Any]] = field(default_factory=list)
    # keys the source changed during each of the KEY_ROUNDS looks: in flight, not compared
    unsettled: list[dict[str, Any]] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not (self.missing or self.extra or self.different)

    def text(self, max_keys: int) -> list[str]:
        """What was compared, at which position, and what was found (one line each)."""
        source = "aggregated in the database" if self.mode == "pushdown" else "read by Spark"
        at = f" at {self.position}" if self.position else ""
        lines = [
            f"{self.sink_table} <- {', '.join(self.sources)}: "
            + ("equal" if self.equal else "DIFFERENT"),
            f"  compared {self.source_rows} source row(s) read{at} with {self.sink_rows} sink "
            f"row(s) read once the pipeline had passed that position; {self.columns} "
            f"column(s); source {source}, sink read by {self.sink_reader}",
        ]
        for item in self.not_compared:
            where = "sink column" if item["side"] == "sink" else "source column"
            lines.append(f"  not compared: {where} {item['column']}: {item['why']}")
        if self.differing_buckets:
            settled = self.rechecked - len(self.unsettled)
            found = len(self.missing) + len(self.extra) + len(self.different)
            lines.append(
                f"  {self.differing_buckets}/{self.buckets} bucket(s) differed at that first "
                "look (rows written since the source was read, or differences); their "
                f"{self.rechecked} differing key(s) were read again on both sides after the "
                f"pipeline caught up: {found} of the {settled} that settled differ"
            )
        for kind in ("missing", "extra", "different", "unsettled"):
            keys: list[dict[str, Any]] = getattr(self, kind)
            if keys:
                shown = ", ".join(_key_text(k) for k in keys[:max_keys])
                more = f", ... ({len(keys) - max_keys} more)" if len(keys) > max_keys else ""
                why = (
                    " (the source changed them at every look: in flight, not compared)"
                    if kind == "unsettled"
                    else ""
                )
                lines.append(f"  {kind} {len(keys)}{why}: {shown}{more}")
        return lines

    def to_json(self, max_keys: int) -> dict[str, Any]:
        return {
            "sink_table": self.sink_table,
            "sources": list(self.sources),
            "mode": self.mode,
            "sink_reader": self.sink_reader,
            "equal": self.equal,
            "position": self.position,
            "columns": self.columns,
            "not_compared": self.not_compared,
            "rechecked": self.rechecked,
            "source_rows": self.source_rows,
            "sink_rows": self.sink_rows,
            "buckets": self.buckets,
            "differing_buckets": self.differing_buckets,
            "counts": {
                "missing": len(self.missing),
                "extra": len(self.extra),
                "different": len(self.different),
                "unsettled": len(self.unsettled),
            },
            "missing": self.missing[:max_keys],
            "extra": self.extra[:max_keys],
            "different": self.different[:max_keys],
            "unsettled": self.unsettled[:max_keys],
        }


@dataclass
class VerifyReport:
    """The whole answer: per sink table, and how in-flight changes were waited for."""

    tables: list[TableReport]
    position: str | None = None  # the source position after the source pass
    waited: list[str] = field(default_factory=list)  # what the waits for the pipeline said
    seconds: float = 0.0
    spark: str | None = None  # the Spark session verify used, if any: master and application

    @property
    def equal(self) -> bool:
        return all(t.equal for t in self.tables)

    def to_json(self, max_keys: int = 20) -> dict[str, Any]:
        return {
            "equal": self.equal,
            "position": self.position,
            "waited": self.waited,
            "seconds": round(self.seconds, 3),
            "spark": self.spark,
            "tables": [t.to_json(max_keys) for t in self.tables],
        }

    def text(self, max_keys: int = 5) -> str:
        lines = []
        for t in self.tables:
            lines.extend(t.text(max_keys))
        lines.extend(f"note: {w}" for w in self.waited)
        if self.spark is not None:
            lines.append(f"note: Spark used: {self.spark}")
        lines.append(
            f"verify: {'EQUAL' if self.equal else 'DIFFERENCES FOUND'} in {self.seconds:.1f}s"
        )
        return "\n".join(lines)


def _key_text(found: dict[str, Any]) -> str:
    key = ", ".join(f"{k}={v}" for k, v in found["key"].items())
    columns = found.get("columns")
    return f"({key})" + (f" [{', '.join(columns)}]" if columns else "")
