#!/usr/bin/env bash
# Sets up everything (scripts/setup.sh), checks lint, format and types (seconds; any failure
# stops here), starts the private MariaDB, and runs the tests.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k decoder`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
bash scripts/setup.sh
"$PYTHON" -m ruff check src tests bench
"$PYTHON" -m ruff format --check src tests bench
"$PYTHON" -m mypy --strict src
"$PYTHON" -m sparkcdc.testing.devserver start
exec "$PYTHON" -m pytest -q -p no:cacheprovider --durations=25 "$@"
