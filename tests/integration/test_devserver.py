"""The private MariaDB of the tests (``sparkcdc_dev.devserver``)."""

from __future__ import annotations

from pathlib import Path

from sparkcdc_dev.devserver import DevServer


def test_temporary_tables_live_in_the_servers_own_folder(dev_server: DevServer) -> None:
    """A mariadbd starting removes the stale ``#sql*`` files of its tmpdir: in a shared /tmp
    they were another lane's bootstrap's, whose mariadb-install-db then failed (a whole CI
    lane lost its server so)."""
    with dev_server.root_connection() as conn, conn.cursor() as cur:
        cur.execute("SELECT @@global.tmpdir")
        (tmpdir,) = cur.fetchone()
    assert Path(tmpdir) == dev_server.tmpdir != Path("/tmp")
