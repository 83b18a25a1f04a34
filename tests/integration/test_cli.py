"""The ``sparkcdc`` command as a user runs it: a subprocess, its output and its exit code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pipelines import fresh_database, write_pipeline

from sparkcdc_dev.devserver import DEV_PASSWORD, DevServer

pytestmark = pytest.mark.e2e  # Spark, in its own processes too (conftest.py: the tiers)

DATABASE = "cli_db"
PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: ${{CLI_TEST_PASSWORD}}
  tables: {database}.\\.*
  server-id: 5860-5869
sink:
  type: delta
  path: {lake}
pipeline:
  name: cli-test
  checkpoint: {checkpoint}
"""


def sparkcdc(
    *args: str, password: str | None = DEV_PASSWORD, **variables: str
) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own; ``password=None``: the variable is not set."""
    env = {k: v for k, v in os.environ.items() if k != "CLI_TEST_PASSWORD"} | variables
    if password is not None:
        env["CLI_TEST_PASSWORD"] = password
    return subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    server = DevServer.from_env()
    with fresh_database(server, DATABASE) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, f"v{i}") for i in range(1, 31)])
    return write_pipeline(PIPELINE, tmp_path, server, DATABASE)


def test_run_available_now_then_status(pipeline: Path, tmp_path: Path) -> None:
    import deltalake
    import pyarrow as pa

    done = sparkcdc("run", str(pipeline), "--available-now")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "30 change row(s) written to delta (cli_db.t)" in done.stdout
    lake_table = deltalake.DeltaTable(str(tmp_path / "lake" / DATABASE / "t"))
    reader = deltalake.QueryBuilder().register("t", lake_table)  # reads deletion vectors
    table = pa.table(reader.execute("SELECT id, v FROM t").read_all()).to_pydict()
    assert sorted(zip(table["id"], table["v"], strict=True)) == [(i, f"v{i}") for i in range(1, 31)]
    # the run's session writes local checkpoint and Delta log files without the checksum
    # file Hadoop's local file system keeps beside each (.<name>.crc; run_plan.RAW_LOCAL_CONTEXT)
    logs = [tmp_path / "checkpoint" / "spark", tmp_path / "lake" / DATABASE / "t" / "_delta_log"]
    assert all(list(d.glob("*/0")) or list(d.glob("*.json")) for d in logs), logs
    assert not [p for d in logs for p in d.rglob(".*.crc")], [list(d.rglob(".*.crc")) for d in logs]

    status = sparkcdc("status", str(pipeline), "--json")
    assert status.returncode == 0, status.stderr[-2000:]
    report = json.loads(status.stdout)
    assert report["phase"] == "binlog"
    assert report["running"] is False
    assert report["tables"] == {f"{DATABASE}.t": {"chunks_done": 1, "chunks_total": 1}}
    assert report["last_committed_batch"] >= 0
    assert report["server"] == "MariaDB server_id 1 (gtid_domain_id 0)"
    source = report["schema"]["sources"][f"{DATABASE}.t"]
    assert source == {
        "versions": 1,
        "last_changed_batch": None,
        "columns": ["id int(11)", "v varchar(10)"],
    }

    # a column added: the schema history shows the new version and the batch that made it
    with DevServer.from_env().root_connection() as conn, conn.cursor() as cur:
        cur.execute(f"ALTER TABLE {DATABASE}.t ADD COLUMN w INT")
        cur.execute(f"INSERT INTO {DATABASE}.t VALUES (31, 'v31', 7)")
    done = sparkcdc("run", str(pipeline), "--available-now")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(sparkcdc("status", str(pipeline), "--json").stdout)
    source = report["schema"]["sources"][f"{DATABASE}.t"]
    assert source["versions"] == 2
    assert source["last_changed_batch"] == report["last_committed_batch"]
    assert [c.split()[0] for c in source["columns"]] == ["id", "v", "w"]
    assert "w INT" in report["schema"]["sinks"][f"{DATABASE}.t"]["columns"]
    assert report["schema"]["sinks"][f"{DATABASE}.t"]["stale"] is False
    text = sparkcdc("status", str(pipeline)).stdout
    assert "on server: MariaDB server_id 1 (gtid_domain_id 0)" in text
    assert "schema: 1 source table(s), 1 changed by DDL" in text
    assert f"{DATABASE}.t: 2 versions, last changed in batch" in text

    # status reads local files: it needs no password, and a damaged status.json is noted
    (tmp_path / "checkpoint" / "status.json").write_text('{"running": tr')
    bare = sparkcdc("status", str(pipeline), password=None)
    assert bare.returncode == 0, bare.stderr[-2000:]
    assert f"last committed batch: {report['last_committed_batch']}" in bare.stdout
    assert "server position: unknown (not asked: the file references CLI_TEST_PASSWORD" in (
        bare.stdout
    )
    assert "status.json: unreadable (" in bare.stdout
    assert "Traceback" not in bare.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_signal_ends_a_running_pipeline_cleanly(
    pipeline: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    env = {**os.environ, "CLI_TEST_PASSWORD": DEV_PASSWORD}
    run = subprocess.Popen(
        [sys.executable, "-m", "sparkcdc.cli.main", "run", str(pipeline)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    status = tmp_path / "checkpoint" / "status.json"
    deadline = time.monotonic() + 300
    while run.poll() is None and time.monotonic() < deadline:
        try:
            if json.loads(status.read_text()).get("last_batch", -1) >= 0:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    assert run.poll() is None, run.communicate()[1][-3000:]
    run.send_signal(sig)
    err = run.communicate(timeout=120)[1]
    assert run.returncode == 128 + sig.value, err[-3000:]  # 130 for Ctrl-C, as shells say
    assert f"stopping on request ({sig.name})" in err, err[-3000:]
    assert "Traceback" not in err and "Py4J" not in err, err[-3000:]
    assert "Exception" not in err and "\tat " not in err, err[-3000:]  # no Java stack
    assert json.loads(status.read_text())["running"] is False


def test_validate_reports_a_wrong_password_as_a_source_problem(pipeline: Path) -> None:
    result = sparkcdc("validate", str(pipeline), password="not-the-password")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "source error" in result.stderr
    assert "not-the-password" not in result.stdout + result.stderr


def test_a_typo_exits_2_naming_the_key(pipeline: Path) -> None:
    pipeline.write_text(pipeline.read_text().replace("  path:", "  pth:"))
    result = sparkcdc("run", str(pipeline), "--available-now")
    assert result.returncode == 2
    assert "sink.pth: unknown key. Did you mean 'path'?" in result.stderr


# -- validate finds what run would hit, and both exit alike ---------------------------------


def add_to(pipeline: Path, text: str) -> Path:
    pipeline.write_text(pipeline.read_text() + text)
    return pipeline


def source_sql(*statements: str) -> None:
    with DevServer.from_env().root_connection() as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def test_a_filter_spark_cannot_resolve_is_one_line_not_a_stack(pipeline: Path) -> None:
    add_to(pipeline, f"transform:\n  - source-table: {DATABASE}.t\n    filter: nosuch(v) > 0\n")
    result = sparkcdc("run", str(pipeline), "--available-now")
    assert result.returncode == 2, result.stderr[-3000:]
    assert (
        f"configuration error: transform for {DATABASE}.t (source-table {DATABASE}.t): Spark "
        "cannot apply it: [UNRESOLVED_ROUTINE] Cannot resolve routine `nosuch`"
    ) in result.stderr
    assert "Traceback" not in result.stderr
    # pyspark's own log of the failed statement: one line of JSON holding the Java stack
    assert "org.apache.spark.sql.AnalysisException" not in result.stderr, result.stderr[-3000:]


# what Spark prints when its JVM starts, unless its log goes to a file (issue 58)
SPARK_START_UP = ("log4j", "WARN Utils", "NativeCodeLoader", "Setting default log level")


def no_start_up_lines(result: subprocess.CompletedProcess[str]) -> bool:
    console = result.stdout + result.stderr
    return not any(line in console for line in SPARK_START_UP)


def test_validate_without_transforms_starts_no_jvm(pipeline: Path) -> None:
    """Configuration, connections, grants, binlog settings and locations need no Spark: with
    no Java to start (JAVA_HOME names none), validate still checks everything and shows the
    sink table's columns, well within a generous bound (a guard: it took 16-70 s with a JVM;
    the target is under 10 s)."""
    began = time.monotonic()
    checked = sparkcdc("validate", str(pipeline), JAVA_HOME="/nonexistent-java")
    seconds = time.monotonic() - began
    assert checked.returncode == 0, checked.stderr[-2000:]
    assert f"{DATABASE}.t <- {DATABASE}.t: key (id); id INT, v STRING" in checked.stdout
    assert "location" in checked.stdout and no_start_up_lines(checked), checked.stderr
    assert seconds < 30, f"validate took {seconds:.0f} s"


def test_validate_types_the_transforms_with_the_files_spark_settings(pipeline: Path) -> None:
    """``id + '1'`` is BIGINT under ANSI mode (Spark 4's default) and DOUBLE without it: the
    file turns it off, so run creates a DOUBLE column, and validate must show the same.
    Before, validate's session ignored the file's spark.conf."""
    text = pipeline.read_text().replace(
        "pipeline:\n", 'pipeline:\n  spark.conf:\n    spark.sql.ansi.enabled: "false"\n'
    )
    pipeline.write_text(text)
    add_to(
        pipeline,
        f"transform:\n  - source-table: {DATABASE}.t\n    projection: \"*, id + '1' AS w\"\n",
    )
    checked = sparkcdc("validate", str(pipeline))
    assert checked.returncode == 0, checked.stderr[-2000:]
    assert "w DOUBLE" in checked.stdout, checked.stdout
    assert no_start_up_lines(checked), checked.stderr  # Spark started: its lines in its log


def test_an_unmatched_route_is_a_warning_in_validate_and_run(pipeline: Path) -> None:
    add_to(pipeline, f"route:\n  - source-table: {DATABASE}.tt\n    sink-table: x.y\n")
    checked = sparkcdc("validate", str(pipeline))
    assert checked.returncode == 0, checked.stderr[-2000:]
    assert "pipeline warning: route[0]: source-table 'cli_db.tt' matches none" in checked.stdout
    done = sparkcdc("run", str(pipeline), "--available-now")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "route[0]: source-table 'cli_db.tt' matches none" in done.stderr


def test_declared_keys_that_rows_share_stop_validate_and_run_alike(pipeline: Path) -> None:
    source_sql(f"UPDATE {DATABASE}.t SET v = 'same' WHERE id <= 3")
    add_to(pipeline, f"transform:\n  - source-table: {DATABASE}.t\n    primary-keys: v\n")
    for command in (["validate"], ["run", "--available-now"]):
        result = sparkcdc(command[0], str(pipeline), *command[1:])
        assert result.returncode == 2, (command, result.stderr[-2000:])
        assert "primary-keys (v) do not identify the rows of cli_db.t" in result.stderr
        assert "('same') in 3 rows" in result.stderr


def test_declared_keys_without_a_unique_index_are_a_warning(pipeline: Path) -> None:
    add_to(pipeline, f"transform:\n  - source-table: {DATABASE}.t\n    primary-keys: v\n")
    checked = sparkcdc("validate", str(pipeline))
    assert checked.returncode == 0, checked.stderr[-2000:]
    assert "primary-keys (v) of cli_db.t are not known to be unique" in checked.stdout
    source_sql(f"ALTER TABLE {DATABASE}.t ADD UNIQUE INDEX (v)")  # NULLs may repeat in it
    assert "not known to be unique" in sparkcdc("validate", str(pipeline)).stdout
    source_sql(f"ALTER TABLE {DATABASE}.t MODIFY v VARCHAR(10) NOT NULL")
    checked = sparkcdc("validate", str(pipeline))
    assert checked.returncode == 0 and "not known to be unique" not in checked.stdout


def test_a_table_without_a_key_or_chunk_key_stops_validate_and_run_at_once(
    pipeline: Path,
) -> None:
    source_sql(f"CREATE TABLE {DATABASE}.nokey (id INT NOT NULL, v INT)")
    add_to(pipeline, f"transform:\n  - source-table: {DATABASE}.nokey\n    primary-keys: id\n")
    for command in (["validate"], ["run", "--available-now"]):
        result = sparkcdc(command[0], str(pipeline), *command[1:])
        assert result.returncode == 2, (command, result.stderr[-2000:])
        assert "table cli_db.nokey has no primary key" in result.stderr
        assert "scan.incremental.snapshot.chunk.key-column" in result.stderr


def test_an_iceberg_sink_on_a_line_without_icebergs_runtime_stops_validate_and_run(
    pipeline: Path, tmp_path: Path
) -> None:
    """As on Spark 4.2, whose jars have no Iceberg runtime: exit 2 before anything connects,
    with what to do, never a stack trace."""
    from sparkcdc.spark.connectors import connector_jars

    jars = tmp_path / "jars-without-iceberg"
    jars.mkdir()
    for jar in map(Path, connector_jars()):
        if not jar.name.startswith("iceberg-spark-runtime"):
            (jars / jar.name).symlink_to(jar)
    text = pipeline.read_text()
    lake = text.split("  path: ", 1)[1].split("\n", 1)[0]
    pipeline.write_text(
        text.replace(
            f"  type: delta\n  path: {lake}\n",
            f"  type: iceberg\n  catalog.properties.type: hadoop\n"
            f"  catalog.properties.warehouse: {tmp_path / 'warehouse'}\n",
        )
    )
    for command in (["validate"], ["run", "--available-now"]):
        result = sparkcdc(command[0], str(pipeline), *command[1:], SPARKCDC_JARS_DIR=str(jars))
        assert result.returncode == 2, (command, result.stderr[-2000:])
        assert "Iceberg's Spark runtime is not among the connector jars" in result.stderr
        assert "pip install 'pyspark>=4.1.4,<4.2'" in result.stderr
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "warehouse").exists()


def test_a_catalog_delta_sink_goes_on_in_the_next_run(pipeline: Path, tmp_path: Path) -> None:
    """Without sink.path the tables live in the session catalog. Spark's default catalog
    forgets them when the run ends while their files stay: the next run registers them
    again instead of failing to create them over their own files."""
    warehouse = tmp_path / "warehouse"
    text = pipeline.read_text().replace(f"  path: {tmp_path / 'lake'}\n", "")
    text += f"  spark.conf:\n    spark.sql.warehouse.dir: {warehouse}\n"
    pipeline.write_text(text)
    first = sparkcdc("run", str(pipeline), "--available-now")
    assert first.returncode == 0, first.stderr[-3000:]
    source_sql(
        f"UPDATE {DATABASE}.t SET v = 'changed' WHERE id = 1",
        f"DELETE FROM {DATABASE}.t WHERE id = 2",
        f"INSERT INTO {DATABASE}.t VALUES (31, 'new')",
    )
    second = sparkcdc("run", str(pipeline), "--available-now")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "3 change row(s) written" in second.stdout, second.stdout
    log = (tmp_path / "checkpoint" / "logs" / "spark.log").read_text(errors="replace")
    assert "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION" not in log
    rows = delta_rows(warehouse / f"{DATABASE}.db" / "t")
    assert rows[1] == "changed" and 2 not in rows and rows[31] == "new" and len(rows) == 30


def delta_rows(path: Path) -> dict[int, str]:
    """``id -> v`` of a Delta table, read by delta-rs (not Spark)."""
    import deltalake
    import pyarrow as pa

    reader = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(path)))
    frame = pa.table(reader.execute('SELECT "id", "v" FROM t').read_all())
    return {row["id"]: row["v"] for row in frame.to_pylist()}


# -- a checkpoint a run cannot write to: one line and exit 2, in validate and run alike -----


@pytest.mark.parametrize(
    ("checkpoint", "said"),
    [
        # sysfs: no file can be made there, not even by root
        ("/sys/sparkcdc-cli-test/checkpoint", "cannot write a file there"),
        ("{tmp}/a-file/checkpoint", "a-file is a file, not a directory"),
    ],
)
def test_a_checkpoint_run_cannot_write_is_one_line_and_exit_2(
    pipeline: Path, tmp_path: Path, checkpoint: str, said: str
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    text = pipeline.read_text()
    pipeline.write_text(
        text.replace(
            f"  checkpoint: {tmp_path / 'checkpoint'}", f"  checkpoint: {checkpoint}"
        ).replace("{tmp}", str(tmp_path))
    )
    for command in (["validate"], ["run", "--available-now"]):
        result = sparkcdc(command[0], str(pipeline), *command[1:])
        errors = [line for line in result.stderr.splitlines() if " INFO " not in line]
        assert result.returncode == 2, (command, result.stderr[-3000:])
        assert len(errors) == 1 and said in errors[0], (command, result.stderr[-3000:])
        assert errors[0].startswith("sparkcdc: configuration error: "), errors
