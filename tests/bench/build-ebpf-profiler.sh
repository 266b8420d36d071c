#!/usr/bin/env bash
# Build the OpenTelemetry eBPF profiler (the standalone binary at the root of
# the Go module go.opentelemetry.io/ebpf-profiler) once, and print its path.
# The peer of the `agent` section of tests/bench/run.sh (issue 27).
#
#   tests/bench/build-ebpf-profiler.sh            -> prints .../ebpf-profiler/<version>/ebpf-profiler
#   tests/bench/build-ebpf-profiler.sh --memlock-eperm
#                                   -> prints .../ebpf-profiler-memlock-eperm, the same
#                                      source with one change (below)
#   tests/bench/build-ebpf-profiler.sh --version  -> prints the pinned version
#
# --memlock-eperm: the profiler raises RLIMIT_MEMLOCK to infinity before it
# loads its programs (rlimit.MaximizeMemlock) and gives up when that fails.
# Root without CAP_SYS_RESOURCE (a container, this sandbox) cannot raise a
# finite hard limit: "failed to adjust rlimit: failed to set temporary
# rlimit: operation not permitted". Since Linux 5.11 BPF memory is charged
# to the memory cgroup and RLIMIT_MEMLOCK is not consulted, so the variant
# treats EPERM there as "nothing to raise" (rlimit/rlimit.go, one `if`);
# nothing else differs.
#
# Cache: ${GSYMPROF_TEST_CACHE:-/var/cache/gsymprof-tests}/ebpf-profiler/<version>/,
# holding the binary and gomod/, gocache/ (GOMODCACHE, GOCACHE). Built from
# the module's own tree with its own go.mod and go.sum, as published (checked
# against the Go checksum database as usual). Its eBPF programs are committed in the module
# (support/ebpf/tracer.ebpf.amd64), so no clang is needed. Idempotent;
# concurrent callers wait on a lock; build output goes to stderr, only the
# path to stdout. Needs Go >= 1.25 ($GO, else /usr/local/go/bin/go, else go
# on PATH) and the Go module proxy the first time (about 2 minutes here).
set -euo pipefail

# Pinned: the newest tag (v0.0.YYYYWW, one a release week) at the time of
# writing; its go.mod asks for go 1.25 and Collector pdata v1.64.0 (OTLP
# profiles as in opentelemetry-proto v1.10+, what the test Collector in
# tests/support/otelcol speaks).
EBPF_PROFILER_VERSION=v0.0.202633
MODULE=go.opentelemetry.io/ebpf-profiler

variant=ebpf-profiler
case ${1:-} in
  --version) echo "$EBPF_PROFILER_VERSION"; exit 0 ;;
  --memlock-eperm) variant=ebpf-profiler-memlock-eperm ;;
  "") ;;
  *) echo "usage: $0 [--memlock-eperm|--version]" >&2; exit 2 ;;
esac

go_bin=${GO:-}
if [[ -z $go_bin ]]; then
  if [[ -x /usr/local/go/bin/go ]]; then go_bin=/usr/local/go/bin/go
  elif command -v go >/dev/null 2>&1; then go_bin=$(command -v go)
  else echo "build-ebpf-profiler.sh: no Go toolchain (set GO=/path/to/go, Go >= 1.25)" >&2; exit 1
  fi
fi
go_version=$("$go_bin" env GOVERSION 2>/dev/null || true)
if [[ ! $go_version =~ ^go1\.(2[5-9]|[3-9][0-9]) ]]; then
  echo "build-ebpf-profiler.sh: $go_bin is ${go_version:-unknown}; $MODULE $EBPF_PROFILER_VERSION needs Go >= 1.25" >&2
  exit 1
fi

cache=${GSYMPROF_TEST_CACHE:-/var/cache/gsymprof-tests}/ebpf-profiler/$EBPF_PROFILER_VERSION
out=$cache/$variant
if [[ -x $out ]]; then echo "$out"; exit 0; fi

mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9
if [[ ! -x $out ]]; then
  start=$(date +%s)
  echo "build-ebpf-profiler.sh: building $variant from $MODULE@$EBPF_PROFILER_VERSION with $("$go_bin" version) (first time only)" >&2
  tmp=$(mktemp "$cache/.$variant.XXXXXX")
  (
    export GOMODCACHE=$cache/gomod GOCACHE=$cache/gocache
    # GOPROXY without "direct" (the module's vanity host is not reachable
    # here, the proxy is). Not `go install MODULE@VERSION`: that asks the
    # proxy for the module's @latest (deprecation notices), which the proxy
    # does not serve for this module. So: download the exact version, copy
    # its tree out of the read-only module cache and build it there with its
    # own go.mod and go.sum (-mod=readonly).
    export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOPROXY=${GOPROXY_EBPF_PROFILER:-https://proxy.golang.org}
    cd "$cache"
    dir=$("$go_bin" mod download -json "$MODULE@$EBPF_PROFILER_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    [[ -d $dir ]] || { echo "build-ebpf-profiler.sh: go mod download gave no module directory" >&2; exit 1; }
    rm -rf "$cache/src"
    cp -r "$dir" "$cache/src"
    chmod -R u+w "$cache/src"
    cd "$cache/src"
    if [[ $variant == ebpf-profiler-memlock-eperm ]]; then
      python3 - rlimit/rlimit.go <<'PY' || exit 1
import sys
p = sys.argv[1]
s = open(p).read()
old = """\tif err := unix.Prlimit(0, unix.RLIMIT_MEMLOCK, &tmpLimit, &oldLimit); err != nil {
"""
if s.count(old) != 1:
    sys.exit("build-ebpf-profiler.sh: rlimit/rlimit.go is not as expected; no --memlock-eperm variant")
s = s.replace(old, old + """\t\tif err == unix.EPERM {
\t\t\treturn func() {}, nil // gsymprof bench: no CAP_SYS_RESOURCE; memlock unused since 5.11
\t\t}
""")
open(p, "w").write(s)
PY
    fi
    "$go_bin" build -mod=readonly -trimpath -ldflags "-s -w" -o "$tmp" .
  ) >&2 || { rm -f "$tmp"; echo "build-ebpf-profiler.sh: build failed" >&2; exit 1; }
  chmod 0755 "$tmp"
  mv -f "$tmp" "$out"
  rm -rf "$cache/src"
  echo "build-ebpf-profiler.sh: built $out in $(( $(date +%s) - start )) s" >&2
fi
echo "$out"
