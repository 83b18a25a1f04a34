"""``sparkcdc verify`` on a sink it cannot read: a configuration error (exit 2) before it
connects anywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkcdc.cli.main import EXIT_CONFIG, main


@pytest.mark.parametrize(
    "sink", ["type: kafka\n  topic: t\n  properties.bootstrap.servers: h:9092", "type: console"]
)
def test_verify_of_a_sink_without_tables_exits_2(
    tmp_path: Path, sink: str, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "p.yaml"
    file.write_text(
        "source:\n  type: mysql\n  hostname: 127.0.0.1\n  port: 1\n  username: u\n"
        f"  tables: a.b\nsink:\n  {sink}\n"
    )
    assert main(["verify", str(file)]) == EXIT_CONFIG
    assert "verify does not support the" in capsys.readouterr().err
