"""TLS on every source connection, against the dev MariaDB (its own CA) and a second one
with ``require_secure_transport=ON``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_snapshot_stream import check_against_source, ordered, prepare, snapshot_options
from test_stream import start_collecting, wait_for
from workload import MultiWorkload, background_writes

from sparkcdc.errors import SourceError
from sparkcdc.model.tls import TlsSettings
from sparkcdc.mysql.protocol.connection import ConnectionSettings, sql_connection
from sparkcdc.mysql.protocol.replication import BinlogClient
from sparkcdc_dev.devserver import DevServer, TlsFiles

pytestmark = pytest.mark.integration

# below the ephemeral range, as test_server_continuity's servers
SECURE_PORT = 23077


def settings_for(server: DevServer, **tls: Any) -> ConnectionSettings:
    s = server.settings
    return ConnectionSettings(s.host, s.port, s.user, s.password, tls=TlsSettings.parse(**tls))


def session_cipher(settings: ConnectionSettings) -> str:
    with sql_connection(settings) as conn, conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        return str(cur.fetchone()[1])


@pytest.fixture(scope="module")
def secure_server() -> Iterator[DevServer]:
    """A MariaDB that refuses connections without TLS."""
    dev = DevServer(
        Path("/tmp/sparkcdc-dev-tls-secure"),
        SECURE_PORT,
        server_id=4,
        extra_args=("--require-secure-transport=ON",),
    )
    dev.start()
    yield dev
    dev.stop()


@pytest.mark.parametrize(
    "mode", ["disabled", "preferred", "required", "verify-ca", "verify-identity"]
)
def test_every_mode_on_sql_and_replication_connections(dev_server: DevServer, mode: str) -> None:
    ca = str(dev_server.tls.ca) if mode.startswith("verify") else None
    settings = settings_for(dev_server, mode=mode, ca=ca)
    # the server's view of each session: which cipher it negotiated
    sql = session_cipher(settings)
    replication = BinlogClient(settings, 5811).session_tls()
    if mode == "disabled":
        assert sql == replication == ""
    else:
        assert sql.startswith("TLS_"), sql
        assert replication.startswith("TLSv1") and " TLS_" in replication, replication


def test_a_wrong_ca_fails_before_anything_is_read(
    spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Path
) -> None:
    other = TlsFiles.under(tmp_path / "other-ca")
    other.ensure(common_name="not the server's")
    settings = settings_for(dev_server, mode="verify-ca", ca=str(other.ca))
    with pytest.raises(SourceError, match=r"failed verification.*ssl-ca"):
        sql_connection(settings)
    with pytest.raises(SourceError, match=r"failed verification.*ssl-ca"):
        BinlogClient(settings, 5812).session_tls()
    workload = MultiWorkload(dev_server.connection(database), seed=31, key_space=50)
    prepare(sql, workload, 20)
    opts = snapshot_options(dev_server, database, tmp_path / "state")
    opts.update({"ssl-mode": "verify-ca", "ssl-ca": str(other.ca)})
    with pytest.raises(Exception, match="failed verification") as raised:
        query, batches = start_collecting(spark, opts, wait=False)
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        assert batches == {}
    assert "ssl-ca" in str(raised.value)
    assert not list((tmp_path / "state").rglob("*.arrow"))


def test_snapshot_and_binlog_over_verified_tls_equal_the_source(
    spark: Any, dev_server: DevServer, database: str, sql: Any, tmp_path: Path
) -> None:
    workload = MultiWorkload(dev_server.connection(database), seed=41, key_space=300)
    prepare(sql, workload, 300)
    opts = snapshot_options(dev_server, database, tmp_path / "state")
    opts.update({"ssl-mode": "verify-ca", "ssl-ca": str(dev_server.tls.ca)})
    writer, stop = background_writes(
        dev_server.connection(database), seed=42, key_space=300, seconds=60
    )
    query, batches = start_collecting(spark, opts, wait=False)
    try:
        wait_for(lambda: len(batches) >= 4, 240, "four batches")
        stop.set()
        writer.join()
        query.processAllAvailable()
    finally:
        stop.set()
        query.stop()
    rows = ordered(batches)
    assert {"r", "c", "u", "d"} <= {r["op"] for r in rows}
    check_against_source(rows, dev_server, database)


def test_require_secure_transport_server(secure_server: DevServer) -> None:
    # the default mode (preferred) logs in over TLS on every connection
    default = settings_for(secure_server)
    assert session_cipher(default).startswith("TLS_")
    assert BinlogClient(default, 5813).session_tls().startswith("TLSv1")
    # disabled: a message that says to enable TLS, not to check the password
    plain = settings_for(secure_server, mode="disabled")
    for connect in (
        lambda: sql_connection(plain),
        lambda: BinlogClient(plain, 5814).session_tls(),
    ):
        with pytest.raises(SourceError, match="require_secure_transport") as raised:
            connect()
        assert "enable TLS" in str(raised.value)
        assert "username/password" not in str(raised.value)


TLS_PIPELINE = """
source:
  type: mysql
  hostname: {host}
  port: {port}
  username: cdc
  password: ${{SPARKCDC_TEST_PASSWORD}}
  tables: {database}.\\.*
  server-id: 5850-5859
  scan.incremental.snapshot.chunk.size: 25
  scan.incremental.snapshot.chunks-per-batch: 4
  ssl-mode: verify-ca
  ssl-ca: {source_ca}
sink:
  type: jdbc
  url: jdbc:postgresql://127.0.0.1:{pg_port}/sink_db
  username: cdc
  password: ${{SPARKCDC_TEST_PG_PASSWORD}}
  schema: {schema}
  sslmode: verify-ca
  sslrootcert: {sink_ca}
route:
  - source-table: {database}.orders_[0-9]+
    sink-table: {database}.all_orders
transform:
  - source-table: {database}.items
    projection: "*, UPPER(name) AS name_uc, __table_name__ AS src"
    filter: qty >= 0
pipeline:
  name: jdbc-tls
  checkpoint: {checkpoint}
  trigger.interval: 200ms
"""


def test_pipeline_into_postgresql_over_tls_equals_the_source(
    spark: Any, server: DevServer, tmp_path: Path
) -> None:
    import os

    from pipelines import burst, create_shop
    from test_pipeline_jdbc import DATABASE, SCHEMA, assert_target_equals_source, drop_schema

    from sparkcdc.errors import SinkError
    from sparkcdc.pipeline.config import parse_pipeline
    from sparkcdc.pipeline.runner import run_pipeline
    from sparkcdc_dev.devpostgres import DEV_PASSWORD as PG_PASSWORD
    from sparkcdc_dev.devpostgres import DevPostgres
    from sparkcdc_dev.devserver import DEV_PASSWORD

    pg = DevPostgres.from_env()
    pg.start()
    drop_schema(pg)
    source = create_shop(server, DATABASE)
    env = {
        **os.environ,
        "SPARKCDC_TEST_PASSWORD": DEV_PASSWORD,
        "SPARKCDC_TEST_PG_PASSWORD": PG_PASSWORD,
    }
    other = TlsFiles.under(tmp_path / "other-ca")
    other.ensure(common_name="not the target's")

    def config(name: str, sink_ca: Path) -> Any:
        text = TLS_PIPELINE.format(
            host=server.settings.host,
            port=server.settings.port,
            database=DATABASE,
            pg_port=pg.port,
            schema=SCHEMA,
            checkpoint=tmp_path / name,
            source_ca=server.tls.ca,
            sink_ca=sink_ca,
        )
        return parse_pipeline(text, env=env, base_dir=tmp_path)

    try:
        # a target whose certificate the given CA did not sign: stopped, naming the cause
        with pytest.raises(SinkError, match="certificate verify failed"):
            run_pipeline(config("wrong", other.ca), available_now=True, spark=spark)
        good = config("checkpoint", pg.tls.ca)
        run_pipeline(good, available_now=True, spark=spark)
        burst(source, seed=37)  # after the snapshot: these come from the binlog
        last = run_pipeline(good, available_now=True, spark=spark)
        assert last.total_rows > 0
        assert_target_equals_source(pg, source)
    finally:
        source.close()
        drop_schema(pg)


def test_validate_reports_the_tls_of_each_connection(
    dev_server: DevServer, secure_server: DevServer, tmp_path: Path
) -> None:
    from test_cli import PIPELINE, sparkcdc

    def pipeline(server: DevServer, extra: str) -> Path:
        path = tmp_path / f"pipeline-{server.port}.yaml"
        text = PIPELINE.format(
            host=server.settings.host,
            port=server.settings.port,
            database="mysql",
            lake=tmp_path / "lake",
            checkpoint=tmp_path / "checkpoint",
        ).replace("  server-id:", f"{extra}  server-id:")
        path.write_text(text)
        return path

    verified = sparkcdc(
        "validate",
        str(pipeline(dev_server, f"  ssl-mode: verify-ca\n  ssl-ca: {dev_server.tls.ca}\n")),
    )
    out = verified.stdout
    for connection in ("SQL connections", "replication connection"):
        line = next(x for x in out.splitlines() if f"source {connection}:" in x)
        assert "TLS TLSv1" in line and "certificate verified against" in line, out
    plain = sparkcdc("validate", str(pipeline(dev_server, "  ssl-mode: disabled\n")))
    assert "source replication connection: plain TCP, not encrypted" in plain.stdout, (
        plain.stdout + plain.stderr
    )
    refused = sparkcdc("validate", str(pipeline(secure_server, "  ssl-mode: disabled\n")))
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "require_secure_transport=ON" in refused.stderr and "enable TLS" in refused.stderr
    assert "check username/password" not in refused.stderr


ED25519_USER, ED25519_PASSWORD = "cdc_ed25519", "an ed25519 pass, of any length"


@pytest.mark.parametrize("mode", ["disabled", "preferred"])
def test_a_user_of_mariadbs_ed25519_plugin_logs_in_and_reads_the_binlog(
    dev_server: DevServer, database: str, sql: Any, mode: str
) -> None:
    """MariaDB's ed25519 (client_ed25519): the password signs the server's scramble, over
    plain TCP and TLS alike, on SQL connections and on the replication client."""
    from sparkcdc.model.events import RowChanges
    from sparkcdc.mysql.admin.server import current_position, server_info
    from sparkcdc.mysql.stream.binlog_range import read_range

    with dev_server.root_connection() as root, root.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME='ed25519'")
        if not cur.fetchone()[0]:
            cur.execute("INSTALL SONAME 'auth_ed25519'")
        cur.execute(f"DROP USER IF EXISTS '{ED25519_USER}'@'%'")
        cur.execute(
            f"CREATE USER '{ED25519_USER}'@'%' IDENTIFIED VIA ed25519 "
            f"USING PASSWORD('{ED25519_PASSWORD}')"
        )
        cur.execute(
            f"GRANT SELECT, RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.* "
            f"TO '{ED25519_USER}'@'%'"
        )
        cur.execute(
            "SELECT JSON_VALUE(Priv, '$.plugin') FROM mysql.global_priv WHERE User=%s",
            (ED25519_USER,),
        )
        assert cur.fetchone()[0] == "ed25519"
    s = dev_server.settings
    settings = ConnectionSettings(
        s.host, s.port, ED25519_USER, ED25519_PASSWORD, tls=TlsSettings.parse(mode=mode)
    )
    sql.execute("CREATE TABLE signed (id INT PRIMARY KEY, v VARCHAR(20))")
    with sql_connection(settings) as conn:
        info = server_info(conn)
        start = current_position(conn, info)
        sql.execute("INSERT INTO signed VALUES (1, 'by ed25519'), (2, 'x')")
        end = current_position(conn, info)
    changes = [
        c
        for c in read_range(settings, 5821, start, end, lambda d, t: d == database)
        if isinstance(c, RowChanges)
    ]
    assert [row for c in changes for _, row in c.rows] == [(1, "by ed25519"), (2, "x")]
    wrong = ConnectionSettings(s.host, s.port, ED25519_USER, "not it", tls=settings.tls)
    with pytest.raises(SourceError, match=r"(?i)access denied"):
        sql_connection(wrong)
