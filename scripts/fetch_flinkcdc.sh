#!/usr/bin/env bash
# Fetches the peer of bench/vs_flinkcdc.py: Flink CDC's MySQL SQL connector and a MySQL JDBC
# driver, pinned in jars/flinkcdc/pom.xml, into jars/flinkcdc/lib/ (Maven Central), beside Flink
# SQL's MiniCluster (scripts/fetch_flink.sh, run first). The bench runs it on first use; no test
# needs it. Safe to run twice.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch_flink.sh >/dev/null
LIB=jars/flinkcdc/lib
if [ ! -f "$LIB/.complete" ] || [ jars/flinkcdc/pom.xml -nt "$LIB/.complete" ]; then
  rm -rf "$LIB"
  mvn -q -B -s jars/settings.xml -f jars/flinkcdc/pom.xml dependency:copy-dependencies \
    -DoutputDirectory=lib -DincludeScope=runtime
  touch "$LIB/.complete"
fi
ls "$LIB"/*.jar
