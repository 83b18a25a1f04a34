#!/usr/bin/env bash
# Fetches the JVM jars pinned in jars/pom.xml into jars/lib/ (Maven Central). Safe to run twice.
# Jars that pyspark already ships (same artifact, any version) are left out: Spark's classes
# must come from one place.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if ! command -v mvn >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq maven >/dev/null
fi
if [ ! -f jars/lib/.complete ] || [ jars/pom.xml -nt jars/lib/.complete ]; then
  rm -rf jars/lib
  mvn -q -B -s jars/settings.xml -f jars/pom.xml dependency:copy-dependencies -DoutputDirectory=lib -DincludeScope=runtime
  "$PYTHON" - <<'PY'
import os, re, pathlib, pyspark
shipped = {re.sub(r"-\d[\w.\-]*\.jar$", "", j) for j in os.listdir(pathlib.Path(pyspark.__file__).parent / "jars")}
for jar in pathlib.Path("jars/lib").glob("*.jar"):
    if re.sub(r"-\d[\w.\-]*\.jar$", "", jar.name) in shipped:
        jar.unlink()
PY
  touch jars/lib/.complete
fi
ls jars/lib/*.jar
