#!/usr/bin/env bash
# Builds the pinned MinIO, the tests' private S3-compatible store for s3a:// paths
# (dev/sparkcdc_dev/devminio.py), from the Go module proxy into
#   ${SPARKCDC_TOOLS_DIR:-<project>/tools}/minio/<version>/minio
# and prints that path. Safe to run twice: nothing is built when the binary is there.
#   --path   print the path only, build nothing (devminio asks first, to warn before a build)
# The first build takes ~7 minutes on 2 cores; Go's module and build caches (~/go/pkg/mod,
# ~/.cache/go-build) make a rebuild for another clone on the same machine much faster.
# Needs Go >= 1.24 (the module's `go` directive): Debian's golang-go is installed when
# missing if its version is new enough.
set -euo pipefail
# MinIO publishes no tagged Go module versions; this pseudo-version is what @latest resolved
# to on 2026-11-24 (commit 7aac2a2c5b7c of 2026-02-12)
MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
GO_MINIMUM="1.24"
cd "$(dirname "$0")/.."
TOOLS_DIR="${SPARKCDC_TOOLS_DIR:-$PWD/tools}"
BIN_DIR="$TOOLS_DIR/minio/$MINIO_VERSION"
BINARY="$BIN_DIR/minio"

if [ "${1:-}" = "--path" ]; then
  echo "$BINARY"
  exit 0
fi
if [ -x "$BINARY" ]; then
  echo "$BINARY"
  exit 0
fi

# "1.24.3" >= "1.24"? (major.minor only: patch releases share the go directive)
version_at_least() {
  local have_major have_minor want_major want_minor
  IFS=. read -r have_major have_minor _ <<<"$1."
  IFS=. read -r want_major want_minor _ <<<"$2."
  have_minor="${have_minor%%[!0-9]*}"  # go1.26rc1
  [ "$have_major" -gt "$want_major" ] ||
    { [ "$have_major" -eq "$want_major" ] && [ "${have_minor:-0}" -ge "$want_minor" ]; }
}

find_go() {
  command -v go 2>/dev/null || { [ -x /usr/local/go/bin/go ] && echo /usr/local/go/bin/go; } || true
}

GO="$(find_go)"
if [ -z "$GO" ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # "Candidate: 2:1.19~1" -> 1.19 (epoch and Debian revision dropped)
  candidate="$(apt-cache policy golang-go | sed -n 's/^ *Candidate: *//p' | sed 's/^[0-9]*://; s/[~+-].*//')"
  if [ -z "$candidate" ] || [ "$candidate" = "(none)" ] || ! version_at_least "$candidate" "$GO_MINIMUM"; then
    echo "fetch_minio: building MinIO needs Go >= $GO_MINIMUM, and 'go' is not installed;" \
      "Debian's golang-go is ${candidate:-not available} here. Install Go $GO_MINIMUM or newer" \
      "(https://go.dev/dl/, into /usr/local/go) and run this again." >&2
    exit 1
  fi
  echo "fetch_minio: installing Debian's golang-go $candidate" >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends golang-go >/dev/null
  GO="$(find_go)"
fi
have="$("$GO" env GOVERSION | sed 's/^go//')"
if ! version_at_least "$have" "$GO_MINIMUM"; then
  echo "fetch_minio: building MinIO needs Go >= $GO_MINIMUM, but $GO is go$have; install a" \
    "newer Go (https://go.dev/dl/) first in PATH and run this again." >&2
  exit 1
fi

echo "fetch_minio: building MinIO $MINIO_VERSION with go$have (~7 minutes the first time)" >&2
mkdir -p "$TOOLS_DIR/minio"
# built beside its final place and moved in whole: a concurrent or interrupted run never
# leaves a half-written binary where the check above would take it as done
staging="$(mktemp -d "$TOOLS_DIR/minio/.build.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
# GOTOOLCHAIN=local: the version check above decides, never a toolchain downloaded on the side
GOBIN="$staging" GOTOOLCHAIN=local "$GO" install "github.com/minio/minio@$MINIO_VERSION" >&2
mkdir -p "$BIN_DIR"
mv -f "$staging/minio" "$BINARY"
echo "$BINARY"
