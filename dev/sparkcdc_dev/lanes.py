"""Test lanes: several test processes on one machine, each with its own private servers.

The private servers (MariaDB, PostgreSQL, Kafka, MinIO, Kafka Connect, the other MariaDBs the
continuity tests start) take their ports and folders from ``SPARKCDC_DEV_*`` variables, with
the defaults of :data:`DEFAULTS`. Lane 0 is those; lane ``k`` moves every port by
``k * LANE_STEP`` and every folder to ``<folder>-lane<k>``, so that the tests of two lanes
never share a server (a session's first step purges the binlogs of its MariaDB; a test stops
and starts its broker). The root conftest.py puts a pytest process in lane
``SPARKCDC_TEST_LANE`` plus its pytest-xdist worker number (``gw1`` -> 1), before any server
module reads the variables.

>>> lane_environment(0, {})
{}
>>> moved = lane_environment(1, {"SPARKCDC_DEV_PORT": "24106"})
>>> moved["SPARKCDC_DEV_PORT"], moved["SPARKCDC_DEV_KAFKA_PORT"], moved["SPARKCDC_DEV_DIR"]
('24126', '29112', '/tmp/sparkcdc-dev-lane1')
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

LANE_VARIABLE = "SPARKCDC_TEST_LANE"
# every server of a lane uses its port and port+1 at most; the step clears the fixed ports
# of the test files that start servers of their own (23073, 23077, 23078, 25442, 29192)
LANE_STEP = 20
DEFAULT_DIR = "/tmp/sparkcdc-dev"

DEFAULTS: dict[str, str] = {
    "SPARKCDC_DEV_PORT": "23306",  # below the ephemeral ports: see sparkcdc_dev.processes
    "SPARKCDC_DEV_OTHER_PORT": "23075",
    "SPARKCDC_DEV_REPLICA_PORT": "23074",
    "SPARKCDC_DEV_PG_PORT": "25432",
    "SPARKCDC_DEV_KAFKA_PORT": "29092",
    "SPARKCDC_DEV_MINIO_PORT": "29000",
    "SPARKCDC_DEV_CONNECT_PORT": "29150",
    "SPARKCDC_DEV_DIR": DEFAULT_DIR,
    "SPARKCDC_DEV_OTHER_DIR": "/tmp/sparkcdc-dev-ident-other",
    "SPARKCDC_DEV_REPLICA_DIR": "/tmp/sparkcdc-dev-ident-replica",
}


def default_port(variable: str) -> int:
    """The lane-0 port of ``variable`` (a key of :data:`DEFAULTS`)."""
    return int(DEFAULTS[variable])


def setting(variable: str) -> str:
    """The value of ``variable`` (a key of :data:`DEFAULTS`) in this process's environment."""
    return os.environ.get(variable, DEFAULTS[variable])


def lane_of(environ: Mapping[str, str]) -> int:
    """The lane of a test process: ``SPARKCDC_TEST_LANE`` plus its xdist worker number.

    >>> lane_of({"SPARKCDC_TEST_LANE": "2", "PYTEST_XDIST_WORKER": "gw1"})
    3
    """
    worker = re.fullmatch(r"gw(\d+)", environ.get("PYTEST_XDIST_WORKER", ""))
    return int(environ.get(LANE_VARIABLE, "0") or 0) + (int(worker.group(1)) if worker else 0)


def lane_environment(lane: int, environ: Mapping[str, str]) -> dict[str, str]:
    """The ``SPARKCDC_DEV_*`` values of ``lane``, from those of ``environ`` (or the
    defaults): nothing for lane 0."""
    if lane == 0:
        return {}
    moved = {}
    for variable, default in DEFAULTS.items():
        value = environ.get(variable, default)
        if variable.endswith("_PORT"):
            moved[variable] = str(int(value) + lane * LANE_STEP)
        else:
            moved[variable] = f"{value}-lane{lane}"
    return moved
