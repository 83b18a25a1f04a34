"""Statement classification for QUERY events (table-driven)."""

from __future__ import annotations

import pytest

from sparkcdc.mysql.statements import dml_tables, statement_kind, xa_statement


@pytest.mark.parametrize(
    ("statement", "kind"),
    [
        ("BEGIN", "control"),
        ("COMMIT", "control"),
        ("XA START 'x'", "control"),
        ("XA COMMIT 'x'", "control"),
        ("XA ROLLBACK 'x'", "xa_rollback"),
        ("SAVEPOINT s1", "control"),
        ("INSERT INTO t VALUES (1)", "dml"),
        ("  /* app=shop */ update t set a = 1", "dml"),
        ("# note\nDELETE FROM t", "dml"),
        ("-- note\nREPLACE INTO t VALUES (1)", "dml"),
        ("/*!40000 INSERT INTO t VALUES (1) */", "dml"),
        ("LOAD DATA INFILE '/x' INTO TABLE t", "dml"),
        ("WITH c AS (SELECT 1) UPDATE t SET a = 1", "dml"),
        ("CALL refresh_orders()", "dml"),
        ("ALTER TABLE t ADD COLUMN c INT", "other"),
        ("CREATE TABLE t (id INT)", "other"),
        ("GRANT SELECT ON *.* TO 'u'@'%'", "other"),
        ("FLUSH PRIVILEGES", "other"),
    ],
)
def test_statement_kind(statement: str, kind: str) -> None:
    assert statement_kind(statement) == kind


@pytest.mark.parametrize(
    ("statement", "tables"),
    [
        ("INSERT INTO t VALUES (1)", [("app", "t")]),
        ("INSERT INTO shop.t SELECT * FROM u", [("shop", "t"), ("app", "u")]),
        ("REPLACE INTO `my.db`.`t``x` VALUES (1)", [("my.db", "t`x")]),
        ("UPDATE a x, b y SET x.n = y.n", [("app", "a"), ("app", "b")]),
        ("UPDATE `s`.o JOIN i ON o.id = i.id SET o.n = 1", [("s", "o"), ("app", "i")]),
        ("DELETE t1, t2 FROM t1 JOIN t2 JOIN t3", [("app", "t1"), ("app", "t2"), ("app", "t3")]),
        ("DELETE FROM t WHERE note = 'INTO secret'", [("app", "t")]),
        ("LOAD DATA INFILE 'x' INTO TABLE db.t", [("db", "t")]),
        ("CALL refresh()", None),
        ("DO sleep(1)", None),
    ],
)
def test_dml_tables(statement: str, tables: list[tuple[str, str]] | None) -> None:
    assert dml_tables("app", statement) == tables


@pytest.mark.parametrize(
    ("statement", "parsed"),
    [
        ("XA START 'a'", ("START", "'a'")),
        ("XA BEGIN 'a' JOIN", ("START", "'a'")),
        ("XA END X'7a7a',X'',1", ("END", "X'7a7a',X'',1")),
        ("XA END 'a' SUSPEND FOR MIGRATE", ("END", "'a'")),
        ("XA ROLLBACK X'7a7a', X'', 1", ("ROLLBACK", "X'7a7a',X'',1")),
        ("XA COMMIT 'a' ONE PHASE", ("COMMIT", "'a'")),
        ("COMMIT", None),
    ],
)
def test_xa_statement(statement: str, parsed: tuple[str, str] | None) -> None:
    assert xa_statement(statement) == parsed
