#!/usr/bin/env bash
# Sets up everything (scripts/setup.sh), starts the private MariaDB, and runs the tests.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k decoder`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
bash scripts/setup.sh
"$PYTHON" -m sparkcdc.devserver start
exec "$PYTHON" -m pytest -q -p no:cacheprovider "$@"
