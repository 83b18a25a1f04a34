"""Which Spark master a pipeline's session runs on: the command line's, the file's, the one
spark-submit configured, else local; a file and spark-submit that disagree stop the run."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sparkcdc.errors import ConfigError
from sparkcdc.pipeline.config import parse_pipeline
from sparkcdc.pipeline.run_plan import pipeline_session, session_master

PIPELINE = """
source: {type: mysql, hostname: db, username: cdc, password: pw, tables: app.t}
sink: {type: console}
pipeline:
  name: p
  parallelism: 3
"""
CLUSTER = "spark://10.1.2.3:7077"


def config(extra: str = "") -> Any:
    return parse_pipeline(PIPELINE + extra, env={})


@pytest.mark.parametrize(
    ("extra", "flag", "configured", "chosen"),
    [
        ("", None, None, "local[3]"),
        ("", None, "yarn", "yarn"),  # spark-submit's, not overridden
        (f"  spark.master: {CLUSTER}\n", None, None, CLUSTER),
        (f"  spark.conf: {{spark.master: '{CLUSTER}'}}\n", None, None, CLUSTER),
        (f"  spark.master: {CLUSTER}\n", None, CLUSTER, CLUSTER),
        (f"  spark.master: {CLUSTER}\n", "local[1]", "yarn", "local[1]"),  # the flag wins
    ],
)
def test_the_master_chosen(
    extra: str, flag: str | None, configured: str | None, chosen: str
) -> None:
    assert session_master(config(extra), flag, configured) == chosen


def test_a_file_and_spark_submit_naming_different_masters_stop() -> None:
    with pytest.raises(ConfigError, match="remove one of them") as caught:
        session_master(config(f"  spark.master: {CLUSTER}\n"), None, "yarn")
    assert CLUSTER in str(caught.value) and "'yarn'" in str(caught.value)


def test_two_masters_in_one_file_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="keep one of them"):
        config(f"  spark.master: {CLUSTER}\n  spark.conf: {{spark.master: yarn}}\n")


def test_the_session_gets_the_master_and_py_files(
    monkeypatch: pytest.MonkeyPatch, new_session: SimpleNamespace
) -> None:
    made: dict[str, Any] = {}

    def spark_session(name: str, master: str, *, conf: dict[str, str], **kw: Any) -> Any:
        made.update(master=master, conf=conf)
        return new_session

    monkeypatch.setattr("sparkcdc.spark.session.spark_session", spark_session)
    monkeypatch.setattr("sparkcdc.spark.jvm.configured_master", lambda: None)
    text = f"  spark.master: {CLUSTER}\n  spark.conf: {{spark.submit.pyFiles: /libs/a.zip}}\n"
    pipeline_session(config(text), py_files=["dist/sparkcdc-0.1.0.zip"])
    assert made["master"] == CLUSTER
    assert made["conf"]["spark.submit.pyFiles"] == "/libs/a.zip,dist/sparkcdc-0.1.0.zip"
    assert "spark.master" not in made["conf"]
