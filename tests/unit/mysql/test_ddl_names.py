"""Which tables a DDL statement acts on (``ddl_tables``): every QUERY event is asked, and a
table the answer leaves out is a schema change the stream never sees."""

from __future__ import annotations

import pytest

from sparkcdc.mysql.ddl_names import ddl_tables


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
