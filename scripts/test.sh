#!/usr/bin/env bash
# Sets up everything (scripts/setup.sh: what the quickstart needs; scripts/setup_tests.sh: what
# only the tests need), checks lint, format and types (seconds; any failure
# stops here), starts the private MariaDB, and runs the tests: every tier (unit with the
# doctests, server, fuzz, e2e: conftest.py at the root; a bare `pytest` runs the unit tier
# alone) on the default Spark line (4.2) in two pytest-xdist workers (whole files to each:
# a module's fixtures stay together), and beside them those marked `iceberg` (skipped there)
# under PySpark 4.1, the line Iceberg's Spark runtime loads on (scripts/setup_spark41.sh).
# Each of the three test processes is a lane (dev/sparkcdc_dev/lanes.py) with private
# servers of its own. Most of a test's time is spent waiting (a JVM, a trigger, a server),
# so three lanes on two cores finish far sooner than one. Fails if either run fails.
# Extra arguments go to both pytest runs, e.g. `bash scripts/test.sh -k decoder`;
# SPARKCDC_TEST_WORKERS=0 runs the first in this process alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
bash scripts/setup.sh
bash scripts/setup_tests.sh
"$PYTHON" -m ruff check src tests bench dev conftest.py
"$PYTHON" -m ruff format --check src tests bench dev conftest.py
"$PYTHON" -m mypy --strict src dev conftest.py
"$PYTHON" -m sparkcdc_dev.devserver start
WORKERS="${SPARKCDC_TEST_WORKERS:-2}"
echo "test: the Iceberg tests on the Spark 4.1 line start beside the others (output at the end)"
SPARK41_PYTHON="$(bash scripts/setup_spark41.sh | tail -1)"
iceberg_log="$(mktemp)"
SPARKCDC_TEST_LANE=2 "$SPARK41_PYTHON" -m pytest -q -p no:cacheprovider --durations=10 -m iceberg \
  "$@" >"$iceberg_log" 2>&1 &
iceberg=$!
status=0
"$PYTHON" -m pytest -q -p no:cacheprovider --durations=25 -n "$WORKERS" --dist loadfile \
  -m "unit or server or fuzz or e2e" "$@" || status=$?
iceberg_status=0
wait "$iceberg" || iceberg_status=$?
echo "test: the Iceberg tests on the Spark 4.1 line"
cat "$iceberg_log"
rm -f "$iceberg_log"
# 5: nothing selected (e.g. a -k that names no Iceberg test)
if [ "$iceberg_status" -ne 0 ] && [ "$iceberg_status" -ne 5 ]; then status=$iceberg_status; fi
exit "$status"
