#!/usr/bin/env bash
# Fetches the third side of bench/vs_flinkcdc.py: Debezium's embedded engine and its MariaDB
# connector, pinned in jars/debezium/pom.xml, with what they pull in, into jars/debezium/lib/
# (Maven Central). The bench runs it on first use; no test needs it. Safe to run twice.
set -euo pipefail
cd "$(dirname "$0")/.."
LIB=jars/debezium/lib
if [ ! -f "$LIB/.complete" ] || [ jars/debezium/pom.xml -nt "$LIB/.complete" ]; then
  rm -rf "$LIB"
  mvn -q -B -s jars/settings.xml -f jars/debezium/pom.xml dependency:copy-dependencies \
    -DoutputDirectory=lib -DincludeScope=runtime
  touch "$LIB/.complete"
fi
ls "$LIB"/*.jar
