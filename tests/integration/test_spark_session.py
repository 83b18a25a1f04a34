"""The Python workers spark_session starts: the project's interpreter, without Spark's archives."""

from __future__ import annotations

import sys
from typing import Any

import pytest

pytestmark = pytest.mark.integration


def test_workers_import_installed_pyspark_without_zip_importers(spark: Any) -> None:
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class Probe(DataSourceReader):
        def read(self, partition: Any) -> Any:
            import os
            import sys
            import zipimport

            import pyspark

            zips = [
                k
                for k, v in sys.path_importer_cache.items()
                if isinstance(v, zipimport.zipimporter)
            ]
            arenas = os.environ.get("MALLOC_ARENA_MAX", "")
            yield (sys.executable, pyspark.__file__, len(zips), ";".join(sys.path), arenas)

    class ProbeSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "sparkcdc_worker_probe"

        def schema(self) -> str:
            return (
                "executable STRING, pyspark STRING, zip_importers INT, path STRING, arenas STRING"
            )

        def reader(self, schema: Any) -> Probe:
            return Probe()

    spark.dataSource.register(ProbeSource)
    row = spark.read.format("sparkcdc_worker_probe").load().collect()[0]
    assert row.executable == sys.executable
    assert ".zip" not in row.pyspark, row.pyspark
    assert row.zip_importers == 0
    assert row.arenas == "2"  # glibc arenas bounded (snapshot worker memory)
    assert not any(p.endswith((".zip", ".jar")) and "pyspark" in p for p in row.path.split(";"))
