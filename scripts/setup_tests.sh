#!/usr/bin/env bash
# Installs what only the tests need, beside what scripts/setup.sh installs for the quickstart
# (run that first; scripts/test.sh runs both). Safe to run twice.
#   - the dev extras of pyproject.toml (pytest, ruff, mypy, the sinks' independent readers)
#   - Debian's postgresql: the private jdbc-sink target (dev/sparkcdc_dev/devpostgres.py)
#   - PySpark 4.1 in tools/spark-4.1 with its connector jars: the Iceberg tests' Spark line
#   - the Kafka broker's jars (jars/kafka-broker) and Flink SQL (jars/flink), the tests'
#     private Kafka and their independent reader of the Kafka sink's topics
#   - MinIO built from the Go module proxy: the tests' private S3
#   - clang and its sanitizer runtimes (scripts/setup_fuzz.sh): the decoders' fuzz targets
#   - the Spark drivers' class-data archives, one per Spark line (sparkcdc prepare)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

echo "setup_tests: the test tools (pip install -e .[dev]: pytest, linters, independent readers)"
"$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[dev]' -e dev \
  'pyspark>=4.2,<4.3'
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  echo "setup_tests: installing Debian packages: postgresql"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
echo "setup_tests: PySpark 4.1 beside the default line, for the Iceberg sink's tests (scripts/setup_spark41.sh)"
spark41_python="$(bash scripts/setup_spark41.sh | tail -n 1)"
echo "setup_tests: fetching the Kafka broker jars for the tests' private Kafka (jars/kafka-broker/pom.xml)"
bash scripts/fetch_kafka.sh >/dev/null
echo "setup_tests: fetching Flink SQL for the tests that read the Kafka topics with Flink (jars/flink/pom.xml)"
bash scripts/fetch_flink.sh >/dev/null
echo "setup_tests: building MinIO for the tests' private S3 (scripts/fetch_minio.sh; ~7 minutes the first time)"
bash scripts/fetch_minio.sh >/dev/null
echo "setup_tests: clang with its sanitizer and libFuzzer runtimes, for the fuzz tests (scripts/setup_fuzz.sh)"
bash scripts/setup_fuzz.sh >/dev/null
echo "setup_tests: writing the Spark drivers' class-data archives (sparkcdc prepare: ~40 s a line the first time)"
# the driver of `sparkcdc run` maps it and starts seconds sooner (docs/cli.md, "A driver that
# starts sooner"); without it every pipeline still runs. One per Spark line.
for python in "$PYTHON" "$spark41_python"; do
  "$python" -m sparkcdc.cli.main prepare >/dev/null 2>&1 \
    || echo "setup_tests: no class-data archive for $python (its pipelines start without one): see sparkcdc prepare"
done
echo "setup_tests: done"
