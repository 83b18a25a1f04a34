"""sparkcdc: change data capture from MySQL/MariaDB into Apache Spark.

>>> import sparkcdc                                   # doctest: +SKIP
>>> spark = sparkcdc.spark_session()                  # doctest: +SKIP
>>> df = (spark.readStream.format("mysql-cdc")        # doctest: +SKIP
...       .option("hostname", "127.0.0.1").option("username", "cdc")
...       .option("password", "...").option("database-name", "app_db")
...       .option("table-name", "orders").load())
"""

from __future__ import annotations

from typing import Any

from sparkcdc.spark.streams import await_restarting

__version__ = "0.1.0"
__all__ = ["__version__", "await_restarting", "register", "spark_session"]


def register(spark: Any) -> None:
    """Register the ``mysql-cdc`` data source with a SparkSession."""
    from sparkcdc.spark.session import register as _register

    _register(spark)


def spark_session(*args: Any, **kwargs: Any) -> Any:
    """A SparkSession set up for sparkcdc (see ``sparkcdc.spark.session.spark_session``)."""
    from sparkcdc.spark.session import spark_session as _spark_session

    return _spark_session(*args, **kwargs)
