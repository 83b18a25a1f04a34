"""Which tables a DDL statement acts on (``ddl_tables``): every QUERY event is asked, and a
table the answer leaves out is a schema change the stream never sees."""

from __future__ import annotations

import pytest

from sparkcdc.mysql.ddl.table_names import ddl_tables, row_changes


@pytest.mark.parametrize(
    ("statement", "tables"),
    [
        ("ALTER TABLE orders ADD COLUMN x INT", [("app", "orders")]),
        ("alter online ignore table `shop`.`orders` drop x", [("shop", "orders")]),
        ("/* gh-ost */ ALTER TABLE orders ADD x INT", [("app", "orders")]),
        ("ALTER TABLE orders RENAME TO orders_old", [("app", "orders"), ("app", "orders_old")]),
        ("ALTER TABLE t RENAME AS shop.u", [("app", "t"), ("shop", "u")]),
        ("ALTER TABLE t RENAME COLUMN a TO b", [("app", "t")]),
        ("ALTER TABLE t RENAME INDEX a TO b, RENAME KEY c TO d", [("app", "t")]),
        ("CREATE TABLE IF NOT EXISTS `we``ird` (id INT)", [("app", "we`ird")]),
        ("CREATE OR REPLACE TABLE t LIKE s", [("app", "t")]),
        ("CREATE TEMPORARY TABLE t (id INT)", [("app", "t")]),
        ("TRUNCATE orders", [("app", "orders")]),
        ("TRUNCATE TABLE shop.orders", [("shop", "orders")]),
        ("DROP TABLE a, orders", [("app", "a"), ("app", "orders")]),
        ("DROP TABLE IF EXISTS a, `shop`.`orders` RESTRICT", [("app", "a"), ("shop", "orders")]),
        ("/*!40005 DROP TEMPORARY TABLE t */", [("app", "t")]),
        (
            "RENAME TABLE orders TO orders_old, shop.orders_new TO orders",
            [("app", "orders"), ("app", "orders_old"), ("shop", "orders_new"), ("app", "orders")],
        ),
        ("rename tables x to orders", [("app", "x"), ("app", "orders")]),
        # not table DDL: no table, whatever the words after the verb
        ("ALTER USER 'cdc'@'%' IDENTIFIED BY 'x'", []),
        ("CREATE INDEX i ON orders (x)", []),
        ("DROP DATABASE shop", []),
        ("RENAME USER a TO b", []),
        ("CREATE VIEW v AS SELECT 1", []),
        ("INSERT INTO orders VALUES (1)", []),
        ("BEGIN", []),
    ],
)
def test_every_table_a_statement_acts_on(statement: str, tables: list[tuple[str, str]]) -> None:
    assert ddl_tables("app", statement) == tables


@pytest.mark.parametrize(
    ("statement", "clause"),
    [
        ("ALTER TABLE logs DROP PARTITION p2023", "DROP PARTITION"),
        ("alter table logs truncate partition all", "truncate partition"),
        ("ALTER TABLE t EXCHANGE PARTITION p WITH TABLE u", "EXCHANGE PARTITION"),
        ("ALTER TABLE t CONVERT PARTITION p TO TABLE u", "CONVERT PARTITION"),
        ("ALTER TABLE t CONVERT TABLE u TO PARTITION p VALUES LESS THAN (9)", "CONVERT TABLE"),
        ("ALTER TABLE t DISCARD TABLESPACE", "DISCARD TABLESPACE"),
        ("ALTER TABLE t IMPORT PARTITION p1 TABLESPACE", "IMPORT PARTITION p1 TABLESPACE"),
        ("/* tool */ ALTER ONLINE TABLE `a b` DROP PARTITION p", "DROP PARTITION"),
        # the rows stay: no clause
        ("ALTER TABLE t REORGANIZE PARTITION p INTO (PARTITION a VALUES LESS THAN (3))", None),
        ("ALTER TABLE t ADD PARTITION (PARTITION p9 VALUES LESS THAN (9))", None),
        ("ALTER TABLE t REMOVE PARTITIONING", None),
        ("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", None),
        ("ALTER TABLE t DROP COLUMN `drop partition`", None),
        ("ALTER TABLE t COMMENT 'we DROP PARTITION p0 monthly'", None),
        ("DROP TABLE t", None),
        ("TRUNCATE TABLE t", None),  # a schema change of its own (truncate.table)
    ],
)
def test_clauses_that_change_rows_without_row_images(statement: str, clause: str | None) -> None:
    assert row_changes(statement) == clause
