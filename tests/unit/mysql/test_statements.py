"""Statement classification for QUERY events (table-driven)."""

from __future__ import annotations

import pytest

from sparkcdc.mysql.stream.statements import RowEffect, row_effect, statement_kind, xa_statement


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
        ("SELECT `aux`.`f`()", "dml"),  # logged only when the function changed rows
        ("(SELECT aux.f()) UNION (SELECT 1)", "dml"),
        ("DO aux.f()", "dml"),
        ("SET STATEMENT max_statement_time=1 FOR DELETE FROM t", "dml"),
        ("BEGIN NOT ATOMIC UPDATE t SET a = 1; END", "dml"),
        ("SET sql_mode = 'ANSI'", "other"),
        ("ALTER TABLE t ADD COLUMN c INT", "other"),
        ("CREATE TABLE t (id INT)", "other"),
        ("GRANT SELECT ON *.* TO 'u'@'%'", "other"),
        ("FLUSH PRIVILEGES", "other"),
    ],
)
def test_statement_kind(statement: str, kind: str) -> None:
    assert statement_kind(statement) == kind


T = ("app", "t")
U = ("app", "u")


@pytest.mark.parametrize(
    ("statement", "tables", "writes"),
    [
        ("INSERT INTO t VALUES (1)", [T], [T]),
        ("INSERT INTO shop.t SELECT * FROM u", [("shop", "t"), U], [("shop", "t")]),
        ("REPLACE INTO `my.db`.`t``x` VALUES (1)", [("my.db", "t`x")], [("my.db", "t`x")]),
        (
            "UPDATE a x, b y SET x.n = y.n",
            [("app", "a"), ("app", "b")],
            [("app", "a"), ("app", "b")],
        ),
        ("UPDATE `s`.o JOIN i ON o.id = i.id SET o.n = 1", [("s", "o"), ("app", "i")], None),
        ("DELETE t1, t2 FROM t1 JOIN t2 JOIN t3", None, [("app", "t1"), ("app", "t2")]),
        ("DELETE FROM t1 USING t1 JOIN t2 ON t1.id = t2.id", None, [("app", "t1")]),
        ("DELETE FROM t WHERE note = 'INTO secret FROM u'", [T], [T]),
        # modifiers are no table names (issue 57: UPDATE IGNORE t read as a table IGNORE)
        ("UPDATE IGNORE t SET v = 1", [T], [T]),
        ("UPDATE LOW_PRIORITY t SET v = 1", [T], [T]),
        ("UPDATE LOW_PRIORITY IGNORE t SET v = 1", [T], [T]),
        ("DELETE LOW_PRIORITY QUICK IGNORE FROM t WHERE a = 1", [T], [T]),
        ("INSERT DELAYED IGNORE INTO t VALUES (1)", [T], [T]),
        ("INSERT HIGH_PRIORITY INTO t SET a = 1", [T], [T]),
        ("REPLACE LOW_PRIORITY INTO t VALUES (1)", [T], [T]),
        ("UPDATE ignore_me SET v = 1", [("app", "ignore_me")], [("app", "ignore_me")]),
        ("SET STATEMENT max_statement_time=1 FOR UPDATE t SET v = 1", [T], [T]),
        ("WITH c AS (SELECT a FROM u) UPDATE t JOIN c SET t.a = c.a", [T, U], [T]),
        ("INSERT INTO t PARTITION (p0) VALUES (1)", [T], [T]),
        ("INSERT INTO db.t (a, b) VALUES (1, 2)", [("db", "t")], [("db", "t")]),
        ("UPDATE t SET a = 1 ORDER BY id LIMIT 2", [T], [T]),
        # built-in functions, also those named by keywords, and the server's own NAME_CONST
        (
            "INSERT INTO t VALUES (NOW(), CONCAT('a', 1), IF(1, LEFT('ab', 1), 'c'), "
            "REPLACE('a', 'a', 'b'), UUID(), JSON_OBJECT('a', 1), ST_GeomFromText('POINT(1 1)'))"
            " ON DUPLICATE KEY UPDATE a = VALUES(a)",
            [T],
            [T],
        ),
        ("UPDATE t SET a = NAME_CONST('x', 5) WHERE b IN (1, 2)", [T], [T]),
    ],
)
def test_row_effect_of_provable_statements(
    statement: str,
    tables: list[tuple[str, str]] | None,
    writes: list[tuple[str, str]] | None,
) -> None:
    effect = row_effect("app", statement)
    assert effect is not None and effect.unprovable is None
    if tables is not None:
        assert list(effect.tables) == tables
    if writes is not None:
        assert list(effect.writes) == writes


@pytest.mark.parametrize(
    ("statement", "why"),
    [
        ("SELECT `aux`.`f`()", "it calls aux.f(), a stored function"),
        ("SELECT aux.f() FROM DUAL", "it calls aux.f(), a stored function"),
        ("DO aux.f()", "it calls aux.f(), a stored function"),
        ("(SELECT aux.f())", "it calls aux.f(), a stored function"),
        ("SET @x = aux.f()", "it calls aux.f(), a stored function"),
        ("SELECT f(1)", "it calls f(), not a built-in function"),
        ("SELECT `f`(1)", "it calls f(), not a built-in function"),
        ("INSERT INTO t VALUES (my_func(1))", "it calls my_func(), not a built-in function"),
        ("INSERT INTO db.t(a) SELECT db.f(1)", "it calls db.f(), a stored function"),
        ("UPDATE t SET a = status(1)", "it calls status(), not a built-in function"),
        ("CALL refresh()", "it calls a stored procedure"),
        ("LOAD DATA INFILE 'x' INTO TABLE db.t", "LOAD DATA's rows are not in the binlog"),
        ("BEGIN NOT ATOMIC UPDATE t SET a = 1; END", "compound statement"),
        ("UPDATE t SET a = 1 WHERE", "sparkcdc cannot parse it"),
        ("INSERT INTO t VALUES (1", "sparkcdc cannot parse it"),
        ("DELETE FROM", "sparkcdc cannot parse it"),
    ],
)
def test_row_effect_of_unprovable_statements(statement: str, why: str) -> None:
    effect = row_effect("app", statement)
    assert effect is not None and effect.unprovable is not None
    assert why in effect.unprovable


@pytest.mark.parametrize(
    "statement",
    [
        "BEGIN",
        "COMMIT",
        "XA START 'x'",
        "SELECT 1",
        "SELECT NOW(), CONCAT('a', 'b')",
        "DO sleep(1)",
        "SET @x = 1",
        "SET SESSION sql_mode = 'ANSI'",
        "SET PASSWORD FOR 'u'@'%' = PASSWORD('x')",
        "ALTER TABLE t ADD COLUMN c INT",
        "CREATE TABLE t (id INT)",
        "DROP TABLE t",
        "GRANT SELECT ON *.* TO 'u'@'%'",
    ],
)
def test_statements_that_change_no_rows(statement: str) -> None:
    assert row_effect("app", statement) is None


def test_row_effect_is_a_value() -> None:
    assert row_effect("app", "DELETE FROM t") == RowEffect((T,), (T,))


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
