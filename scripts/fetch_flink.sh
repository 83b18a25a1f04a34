#!/usr/bin/env bash
# Fetches Flink SQL (a MiniCluster with the Kafka connector and the JSON formats) pinned in
# jars/flink/pom.xml into jars/flink/lib/ (Maven Central), for the tests that read the Kafka sink's
# topics with Flink (tests/integration/flink_consumer.py). Safe to run twice.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v mvn >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq maven >/dev/null
fi
LIB=jars/flink/lib
if [ ! -f "$LIB/.complete" ] || [ jars/flink/pom.xml -nt "$LIB/.complete" ]; then
  rm -rf "$LIB"
  mvn -q -B -s jars/settings.xml -f jars/flink/pom.xml dependency:copy-dependencies \
    -DoutputDirectory=lib -DincludeScope=runtime
  touch "$LIB/.complete"
fi
ls "$LIB"/*.jar
