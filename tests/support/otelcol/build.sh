#!/usr/bin/env bash
# Build the test Collector (main.go: OTLP receiver + file exporter, from the
# Collector's Go modules pinned in go.mod/go.sum) once, and print its path.
#
#   tests/support/otelcol/build.sh            -> prints .../otelcol/<version>/otelcol
#   tests/support/otelcol/build.sh sendtest   -> prints .../otelcol/<version>/sendtest
#   tests/support/otelcol/build.sh promparse  -> prints .../otelcol/<version>/promparse
#                                                 (Prometheus's text parser, for /metrics)
#   tests/support/otelcol/build.sh --check-go -> prints the Go it would use, or
#                                                 exits 1 when there is no Go >= 1.26
#
# Cache: ${GSYMPROF_TEST_CACHE:-/var/cache/gsymprof-tests}/otelcol/, holding
#   <version>/otelcol, <version>/sendtest   the binaries
#   gomod/, gocache/                        GOMODCACHE and GOCACHE, reused by CI
# <version> is the Collector release plus a hash of go.mod, go.sum and the Go
# sources here, so an edit builds anew and an unchanged tree never rebuilds.
# Idempotent; concurrent callers wait on a lock. Build output goes to stderr,
# only the path goes to stdout. Needs Go (>= the go line of go.mod; $GO, else
# go on PATH, else /usr/local/go/bin/go) and the Go module proxy the first time.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
what=${1:-otelcol}
case $what in
  --check-go) pkg= ;;
  otelcol) pkg=. ;;
  sendtest) pkg=./sendtest ;;
  promparse) pkg=./promparse ;;
  *) echo "usage: $0 [otelcol|sendtest|promparse|--check-go]" >&2; exit 2 ;;
esac

COLLECTOR_RELEASE=v0.161.0   # keep in step with go.mod and main.go's Version

# Go >= 1.26 (go.mod's go line). Debian 12's golang-go is 1.19, so the Go in
# /usr/local/go (this machine's image) comes before PATH.
go_bin=${GO:-}
if [[ -z $go_bin ]]; then
  if [[ -x /usr/local/go/bin/go ]]; then go_bin=/usr/local/go/bin/go
  elif command -v go >/dev/null 2>&1; then go_bin=$(command -v go)
  else echo "build.sh: no Go toolchain (set GO=/path/to/go, Go >= 1.26)" >&2; exit 1
  fi
fi
go_version=$("$go_bin" env GOVERSION 2>/dev/null || true)
if [[ ! $go_version =~ ^go1\.(2[6-9]|[3-9][0-9]) ]]; then
  echo "build.sh: $go_bin is ${go_version:-unknown}; the Collector modules need Go >= 1.26 (set GO=...)" >&2
  exit 1
fi
[[ $what == --check-go ]] && { echo "$go_bin"; exit 0; }

cache=${GSYMPROF_TEST_CACHE:-/var/cache/gsymprof-tests}/otelcol
hash=$(cd "$here" && cat go.mod go.sum main.go sendtest/main.go promparse/main.go | sha256sum | cut -c1-12)
version=$COLLECTOR_RELEASE-$hash
out=$cache/$version/$what

if [[ -x $out ]]; then
  echo "$out"
  exit 0
fi

mkdir -p "$cache/$version"
exec 9>"$cache/.build.lock"
flock 9
if [[ ! -x $out ]]; then
  start=$(date +%s)
  echo "build.sh: building $what $version with $("$go_bin" version) (first time only)" >&2
  tmp=$(mktemp "$cache/$version/.$what.XXXXXX")
  (
    cd "$here"
    export GOMODCACHE=$cache/gomod GOCACHE=$cache/gocache
    export GOFLAGS=-mod=readonly GOTOOLCHAIN=local CGO_ENABLED=0
    "$go_bin" build -trimpath -ldflags "-s -w -X main.Version=$COLLECTOR_RELEASE" -o "$tmp" "$pkg"
  ) >&2 || { rm -f "$tmp"; echo "build.sh: build of $what failed" >&2; exit 1; }
  chmod 0755 "$tmp"
  mv -f "$tmp" "$out"
  echo "build.sh: built $out in $(( $(date +%s) - start )) s" >&2
  # Binaries of other versions (other trees) built over a day ago go.
  find "$cache" -mindepth 1 -maxdepth 1 -type d -name 'v*-*' ! -name "$version" -mtime +0 \
    -exec rm -rf {} + 2>/dev/null || true
fi
echo "$out"
