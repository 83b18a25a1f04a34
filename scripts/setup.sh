#!/usr/bin/env bash
# Installs everything sparkcdc needs on a fresh Debian machine. Safe to run twice.
#   - Debian packages: mariadb-server (the private test/quickstart server), postgresql (the
#     jdbc sink's test target), a JDK for Spark; maven (by the fetch scripts) for the jars
#   - the Python package with its dev extras (pyspark from PyPI among them)
#   - the pinned JVM jars from Maven Central: connectors (jars/pom.xml), Kafka (jars/kafka-broker),
#     Flink SQL for the tests' independent Kafka consumer (jars/flink)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

packages=()
if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
  packages+=(mariadb-server mariadb-client)
fi
# postgresql: the private jdbc-sink target of the tests (dev/sparkcdc_dev/devpostgres.py)
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  packages+=(postgresql)
fi
if ! command -v java >/dev/null 2>&1; then
  packages+=(openjdk-17-jre-headless)
fi
if [ ${#packages[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi

echo "setup: installing the sparkcdc Python package and its dev tools (pip install -e .[dev] -e dev)"
# pyproject.toml allows both Spark lines; the main environment is on the default, 4.2, even
# where an older pyspark is installed already (README, "Spark lines")
"$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[dev]' -e dev \
  'pyspark>=4.2,<4.3'
echo "setup: fetching the pinned connector jars (jars/pom.xml)"
bash scripts/fetch_jars.sh >/dev/null
echo "setup: PySpark 4.1 beside the default line, for the Iceberg sink's tests (scripts/setup_spark41.sh)"
spark41_python="$(bash scripts/setup_spark41.sh | tail -n 1)"
echo "setup: fetching the Kafka broker jars for the tests' private Kafka (jars/kafka-broker/pom.xml)"
bash scripts/fetch_kafka.sh >/dev/null
echo "setup: fetching Flink SQL for the tests that read the Kafka topics with Flink (jars/flink/pom.xml)"
bash scripts/fetch_flink.sh >/dev/null
echo "setup: building MinIO for the tests' private S3 (scripts/fetch_minio.sh; ~7 minutes the first time)"
bash scripts/fetch_minio.sh >/dev/null
echo "setup: writing the Spark drivers' class-data archives (sparkcdc prepare: ~40 s a line the first time)"
# the driver of `sparkcdc run` maps it and starts seconds sooner (README, "The command line");
# without it every pipeline still runs, as it did before. One per Spark line.
for python in "$PYTHON" "$spark41_python"; do
  "$python" -m sparkcdc.cli.main prepare >/dev/null 2>&1 \
    || echo "setup: no class-data archive for $python (its pipelines start without one): see sparkcdc prepare"
done
echo "setup: done"
