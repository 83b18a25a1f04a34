#!/usr/bin/env bash
# Fetches the JVM jars pinned in jars/pom.xml for the Spark line of the installed pyspark
# (profile spark-<major.minor>) into jars/lib/spark-<line>/ (Maven Central). Safe to run twice.
# Jars that pyspark already ships (same artifact, any version) are left out: Spark's classes
# must come from one place. PYTHON names the interpreter whose pyspark decides the line.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if ! command -v mvn >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq maven >/dev/null
fi
line="$("$PYTHON" -c 'import pyspark; print(".".join(pyspark.__version__.split(".")[:2]))')"
if ! grep -q "<id>spark-$line</id>" jars/pom.xml; then
  echo "fetch_jars: pyspark $line is not a Spark line sparkcdc pins jars for (jars/pom.xml profiles)" >&2
  exit 2
fi
lib="jars/lib/spark-$line"
if [ ! -f "$lib/.complete" ] || [ jars/pom.xml -nt "$lib/.complete" ]; then
  rm -rf "$lib"
  mvn -q -B -s jars/settings.xml -f jars/pom.xml -P "spark-$line" dependency:copy-dependencies \
    -DoutputDirectory="lib/spark-$line" -DincludeScope=runtime
  LIB="$lib" "$PYTHON" - <<'PY'
import os, re, pathlib, pyspark
shipped = {re.sub(r"-\d[\w.\-]*\.jar$", "", j) for j in os.listdir(pathlib.Path(pyspark.__file__).parent / "jars")}
for jar in pathlib.Path(os.environ["LIB"]).glob("*.jar"):
    if re.sub(r"-\d[\w.\-]*\.jar$", "", jar.name) in shipped:
        jar.unlink()
PY
  touch "$lib/.complete"
fi
ls "$lib"/*.jar
