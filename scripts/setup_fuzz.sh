#!/usr/bin/env bash
# Installs what scripts/fuzz.sh needs beyond the dev extras: clang with its sanitizer and
# libFuzzer runtimes (Debian), to build the C kernels with AddressSanitizer, UBSan and
# coverage counters; and atheris (PyPI, also in the dev extras). Safe to run twice.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ! command -v clang >/dev/null 2>&1 \
  || [ ! -f "$(clang -print-resource-dir)/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a" ]; then
  echo "setup_fuzz: installing clang and its runtimes (Debian)"
  $SUDO apt-get update -qq
  version="$(apt-cache policy clang | awk '/Candidate/ {print $2}' | sed -E 's/^[0-9]+://; s/[-.].*//')"
  $SUDO apt-get install -y -qq --no-install-recommends clang "libclang-rt-$version-dev" >/dev/null
fi
"$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore 'atheris>=2.3'
echo "setup_fuzz: done"
