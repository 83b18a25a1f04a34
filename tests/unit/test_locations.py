"""The filesystem layer: locations as users spell them for Spark, on their filesystems."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from sparkcdc.errors import ConfigError
from sparkcdc.locations import (
    open_location,
    s3_options,
    s3a_settings,
    state_options,
    supported_location,
)
from sparkcdc.model.options import SourceOptions

SECRET = "s3cret-value"


def test_a_local_location_is_private_and_written_whole(tmp_path: Path) -> None:
    root = open_location(str(tmp_path / "ck"))
    (root / "schema" / "000000000001.json").write('{"a": 1}')
    (root / "schema" / "000000000001.json").write('{"a": 2}')  # replaced, not appended
    assert (root / "schema").children() == ["000000000001.json"]
    assert (root / "schema" / "000000000001.json").read_text() == '{"a": 2}'
    assert stat.S_IMODE(os.stat(tmp_path / "ck").st_mode) == 0o700
    assert (root / "nothing").read_text() is None and (root / "nothing").children() == []
    (root / "schema").remove_tree()
    assert not (root / "schema").exists()
    (root / "schema").remove_tree()  # twice: nothing to do


def test_file_uris_and_relative_paths_are_local_absolute_paths(tmp_path: Path) -> None:
    assert open_location(f"file://{tmp_path}/x").path == f"{tmp_path}/x"
    assert open_location("rel/x").uri == os.path.abspath("rel/x")


def test_s3a_and_s3_uris_are_kept_for_spark_and_opened_from_hadoops_settings() -> None:
    hadoop = {
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:29000",
        "spark.hadoop.fs.s3a.access.key": "AKIA",
        "spark.hadoop.fs.s3a.secret.key": SECRET,
    }
    location = open_location("s3a://lake/cdc/", hadoop)
    assert location.uri == "s3a://lake/cdc/" and location.path == "lake/cdc"
    assert location.fs.type_name == "s3"
    assert (location / "status.json").uri == "s3a://lake/cdc/status.json"
    assert SECRET not in str(open_location("s3a://AKIA:" + SECRET + "@lake/x", hadoop))


@pytest.mark.parametrize(
    ("hadoop", "expected"),
    [
        ({}, {}),
        (
            {"fs.s3a.endpoint": "minio:9000", "fs.s3a.connection.ssl.enabled": "false"},
            {"endpoint_override": "minio:9000", "scheme": "http"},
        ),
        (
            {"fs.s3a.endpoint": "https://s3.example.com/", "fs.s3a.path.style.access": "false"},
            {
                "endpoint_override": "s3.example.com",
                "scheme": "https",
                "force_virtual_addressing": True,
            },
        ),
        (
            {
                "fs.s3a.access.key": "A",
                "fs.s3a.secret.key": "S",
                "fs.s3a.session.token": "T",
                "fs.s3a.region": "eu-west-1",
            },
            {"access_key": "A", "secret_key": "S", "session_token": "T", "region": "eu-west-1"},
        ),
        ({"fs.s3a.access.key": "A"}, {}),  # half a key pair: the default chain, as S3A
        (
            {
                "fs.s3a.aws.credentials.provider": (
                    "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"
                )
            },
            {"anonymous": True},
        ),
        (  # a bucket's own settings win
            {"fs.s3a.endpoint": "a:1", "fs.s3a.bucket.lake.endpoint": "b:2"},
            {"endpoint_override": "b:2", "scheme": "https"},
        ),
        (  # another bucket's do not count
            {"fs.s3a.bucket.other.endpoint": "b:2"},
            {},
        ),
    ],
    ids=[
        "none",
        "no-ssl",
        "virtual-hosts",
        "keys",
        "half-keys",
        "anonymous",
        "per-bucket",
        "other-bucket",
    ],
)
def test_s3a_settings_become_pyarrows(hadoop: dict[str, str], expected: dict[str, object]) -> None:
    assert s3_options("lake", hadoop) == expected


def test_executors_get_the_s3a_settings_of_the_state_location_as_source_options() -> None:
    hadoop = {
        "fs.s3a.endpoint": "http://127.0.0.1:29000",
        "fs.s3a.secret.key": SECRET,
        "fs.s3a.bucket.lake.region": "eu-west-1",
        "fs.s3a.bucket.other.region": "us-east-2",
        "fs.s3a.block.size": "32M",
    }
    settings = s3a_settings("s3a://lake/state", hadoop)
    assert settings == {
        "fs.s3a.endpoint": "http://127.0.0.1:29000",
        "fs.s3a.secret.key": SECRET,
        "fs.s3a.bucket.lake.region": "eu-west-1",
    }
    assert s3a_settings("/data/state", hadoop) == {}
    assert s3a_settings("s3://lake/state?endpoint_override=h:1", hadoop) == {}
    options = SourceOptions.from_options(
        {"hostname": "h", "username": "u", "tables": "a.b", "state.location": "s3a://lake/s"}
        | state_options(settings)
    )
    assert options.state_hadoop() == settings
    assert SECRET not in repr(options)


def test_other_schemes_are_refused_showing_only_the_scheme() -> None:
    assert supported_location("gs://b/x", "x") == "gs://b/x"
    with pytest.raises(ValueError, match="a ftp: URI") as info:
        supported_location(f"ftp://u:{SECRET}@host/x", "pipeline.checkpoint")
    assert SECRET not in str(info.value)
    with pytest.raises(ConfigError, match="a ftp: URI"):
        open_location("ftp://host/x")


def test_a_probe_writes_reads_and_deletes_leaving_nothing(tmp_path: Path) -> None:
    open_location(str(tmp_path / "not" / "made" / "yet")).probe()
    assert list(tmp_path.iterdir()) == []  # probed in its nearest existing directory


def test_a_probe_of_an_unreachable_store_says_which_step_failed() -> None:
    hadoop = {
        "fs.s3a.endpoint": "http://127.0.0.1:1",  # nothing listens on port 1
        "fs.s3a.access.key": "A",
        "fs.s3a.secret.key": SECRET,
    }
    started = time.monotonic()
    with pytest.raises(ConfigError, match="s3a://lake/cdc: cannot write a file there") as info:
        open_location("s3a://lake/cdc", hadoop).probe()
    assert SECRET not in str(info.value)
    assert time.monotonic() - started < 60
