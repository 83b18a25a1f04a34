#!/usr/bin/env bash
# Sets up everything (scripts/setup.sh: what the quickstart needs; scripts/setup_tests.sh: what
# only the tests need), checks lint, format and types (seconds; any failure
# stops here), starts the private MariaDB, and runs the tests: every tier (unit with the
# doctests, server, fuzz, e2e: conftest.py at the root; a bare `pytest` runs the unit tier
# alone) in one run on the default Spark line (4.2), then those marked `iceberg` (skipped
# there) under PySpark 4.1, the line Iceberg's Spark runtime loads on
# (scripts/setup_spark41.sh). Fails if either run fails.
# Extra arguments go to both pytest runs, e.g. `bash scripts/test.sh -k decoder`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
bash scripts/setup.sh
bash scripts/setup_tests.sh
"$PYTHON" -m ruff check src tests bench dev conftest.py
"$PYTHON" -m ruff format --check src tests bench dev conftest.py
"$PYTHON" -m mypy --strict src dev conftest.py
"$PYTHON" -m sparkcdc_dev.devserver start
status=0
# the tiers run in this order (server before e2e: no Spark is up in the process meanwhile)
"$PYTHON" -m pytest -q -p no:cacheprovider --durations=25 -m "unit or server or fuzz or e2e" "$@" \
  || status=$?
echo "test: the Iceberg tests on the Spark 4.1 line"
SPARK41_PYTHON="$(bash scripts/setup_spark41.sh | tail -1)"
"$SPARK41_PYTHON" -m pytest -q -p no:cacheprovider --durations=10 -m iceberg "$@" || {
  rc=$?
  # 5: nothing selected (e.g. a -k that names no Iceberg test)
  [ "$rc" -eq 5 ] || status=$rc
}
exit "$status"
