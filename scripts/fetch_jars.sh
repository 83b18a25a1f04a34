#!/usr/bin/env bash
# Fetches the JVM jars pinned in jars/pom.xml into jars/lib/ (Maven Central). Safe to run twice.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v mvn >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq maven >/dev/null
fi
if [ ! -f jars/lib/.complete ] || [ jars/pom.xml -nt jars/lib/.complete ]; then
  rm -rf jars/lib
  mvn -q -B -f jars/pom.xml dependency:copy-dependencies -DoutputDirectory=lib -DincludeScope=runtime
  touch jars/lib/.complete
fi
ls jars/lib/*.jar
