#!/usr/bin/env bash
# Fetches the Kafka broker pinned in jars/kafka-broker/pom.xml (and its runtime dependencies) into
# jars/kafka-broker/lib/ (Maven Central), for `python -m sparkcdc_dev.devkafka start`. Safe to run twice.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v mvn >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq maven >/dev/null
fi
LIB=jars/kafka-broker/lib
if [ ! -f "$LIB/.complete" ] || [ jars/kafka-broker/pom.xml -nt "$LIB/.complete" ]; then
  rm -rf "$LIB"
  mvn -q -B -s jars/settings.xml -f jars/kafka-broker/pom.xml dependency:copy-dependencies \
    -DoutputDirectory=lib -DincludeScope=runtime
  touch "$LIB/.complete"
fi
ls "$LIB"/*.jar
