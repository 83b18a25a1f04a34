#!/usr/bin/env bash
# The quickstart: sets up everything, starts a private MariaDB with sample data,
# and runs the main sparkcdc job against it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
bash scripts/setup.sh
exec "$PYTHON" -m sparkcdc_dev.demo "$@"
