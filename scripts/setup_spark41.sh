#!/usr/bin/env bash
# The second Spark line (DESIGN.md §2.2): a virtual
# environment with PySpark 4.1, where Iceberg's Spark runtime loads, beside the default 4.2.
# It sees the main interpreter's packages (sparkcdc, installed editable by scripts/setup.sh,
# and the rest) and shadows only pyspark. Then the 4.1 connector jars (jars/pom.xml profile
# spark-4.1). Safe to run twice. Prints the environment's Python last.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
venv="tools/spark-4.1"
if [ ! -x "$venv/bin/python" ]; then
  "$PYTHON" -m venv --system-site-packages "$venv"
fi
if ! "$venv/bin/python" -c 'import pyspark, sys; sys.exit(not pyspark.__version__.startswith("4.1."))' 2>/dev/null; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    'pyspark>=4.1.4,<4.2'
fi
PYTHON="$venv/bin/python" bash scripts/fetch_jars.sh >/dev/null
echo "$PWD/$venv/bin/python"
