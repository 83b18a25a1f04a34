#!/usr/bin/env bash
# Installs what the quickstart (scripts/demo.sh) needs on a fresh Debian machine; what only
# the tests need is scripts/setup_tests.sh's, which scripts/test.sh runs after this. Safe to
# run twice.
#   - Debian packages: mariadb-server (the private quickstart/test server), a JDK for Spark;
#     maven (by fetch_jars.sh) for the jars
#   - the Python packages: sparkcdc (pyspark from PyPI among its dependencies) and its dev
#     tools (the demo's private MariaDB; deltalake, which the demo reads its result with)
#   - the pinned connector jars from Maven Central (jars/pom.xml)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

packages=()
if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
  packages+=(mariadb-server mariadb-client)
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

echo "setup: installing the sparkcdc Python package and its dev tools (pip install -e . -e dev)"
# pyproject.toml allows both Spark lines; the main environment is on the default, 4.2, even
# where an older pyspark is installed already (docs/install.md, "Spark lines")
"$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore -e . -e dev \
  'pyspark>=4.2,<4.3'
echo "setup: fetching the pinned connector jars (jars/pom.xml)"
bash scripts/fetch_jars.sh >/dev/null
# No class-data archive (sparkcdc prepare) here: writing one takes ~40 s and saves ~2.5 s a
# driver start, and the quickstart starts one or two drivers. scripts/setup_tests.sh writes
# them for the tests' many runs.
echo "setup: done"
