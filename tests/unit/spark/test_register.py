"""register(): the class it registers carries the session's parallelism, when there is one."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pyspark import cloudpickle
from pyspark.errors import PySparkNotImplementedError

from sparkcdc.spark.session import register
from sparkcdc.spark.source import MySqlCdcDataSource


class _Session:
    def __init__(self, context: Any) -> None:
        self._context = context
        self.registered: list[type] = []
        self.dataSource = SimpleNamespace(register=self.registered.append)

    @property
    def sparkContext(self) -> Any:
        if self._context is None:
            raise PySparkNotImplementedError(
                errorClass="JVM_ATTRIBUTE_NOT_SUPPORTED", messageParameters={"attr_name": "sc"}
            )
        return self._context


def test_the_registered_class_carries_the_default_parallelism_by_value() -> None:
    session = _Session(SimpleNamespace(defaultParallelism=3))
    register(session)
    assert [cls.name() for cls in session.registered] == ["mysql-cdc", "postgres-cdc"]
    for cls in session.registered:
        assert issubclass(cls, MySqlCdcDataSource)
        shipped = cloudpickle.loads(cloudpickle.dumps(cls))  # as Spark ships it to its workers
        assert shipped.default_parallelism == 3


def test_a_session_without_a_spark_context_registers_without_a_parallelism() -> None:
    session = _Session(None)
    register(session)
    assert session.registered[0].default_parallelism is None
