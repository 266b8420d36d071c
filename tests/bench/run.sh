#!/bin/bash
# tests/bench/run.sh - the benchmarks behind `make bench` (never part of make
# test). Every number is measured side by side with a peer tool in the same
# run, ours and the peer's runs alternating, and quoted as a median.
#
#   tests/bench/run.sh [lookup] [convert] [profile] [symbolize] [perfdata] [stacks] [deepstacks] [memory] [tail] [offcpu] [agent] [rust_peers] [syscalls] [diff] [serve]   (none: all)
#
# Sections (each prints a markdown table and replaces its own block in
# tests/bench/RESULTS.md; a section whose tool is not ready says so and skips):
#   lookup   gsym::Reader vs LLVM 22 GsymReader, in process and whole process
#   convert  gsymprof gsym convert vs llvm-gsymutil --convert
#   profile  profiler overhead vs bpftrace / perf
#   symbolize  symbolizing a cppcheck profile (cold/warm) vs perf script
#   perfdata   gsymprof symbolize perf.data vs perf script --inline, one perf.data
#   stacks   stack completeness with and without frame pointers
#   deepstacks  deep stacks (sqlite3 CLI, clang++) and cost per sample vs perf dwarf
#               (the sampling interrupt timed with bpftrace, when installed)
#   memory   peak RSS per unique stack (unique_stacks.c) vs perf / bpftrace
#   tail     seconds from the end of sampling to the output, cold and warm, vs perf
#   offcpu   --off-cpu cost on perf bench sched pipe vs bcc offcputime / bpftrace /
#            perf --off-cpu, and agreement with them on the offcpu_waits fixture
#   agent    gsymprof agent's CPU (process + BPF) and RSS, whole host at 19/99 Hz
#            under stress-ng, vs the OpenTelemetry eBPF profiler (to the test
#            Collector), named-frame share, and an RSS soak (AGENT_SOAK_MINUTES)
#   rust_peers  our GSYM reader and converter vs gsym-rs (reader, gsymtool) and
#            blazesym (over GSYM, and over ELF + DWARF, cold and warm), crates
#            pinned in tests/bench/rust_peers/Cargo.lock, built with cargo into
#            CARGO_TARGET (default $BENCH_DIR/cargo-target)
#   syscalls getppid() and dd bs=1 loops alone, under gsymprof profile and perf
#            record -a -g of every process at 99 Hz (and gsymprof --off-cpu)
#   diff     gsymprof diff vs go tool pprof -diff_base on two 100k-stack pprof
#            files: time, RSS, agreement of the top changes
#   serve    gsymprof serve on a 10k-location OTLP / pprof profile: cold (conversions)
#            and warm latency, frames named per second; the OTel eBPF profiler's
#            native frames named before and after passing through serve
#
# Environment: BUILD (build dir, default build), GSYMPROF (default
# $BUILD/gsymprof), BENCH_DIR (corpus cache, default
# /var/cache/gsymprof-bench), ROUNDS (alternating rounds, default 5),
# RESULTS (default tests/bench/RESULTS.md), DEEP_HZ (deepstacks rates, default "999 9999"),
# TAIL_PERF_ROUNDS (rounds with perf in the tail section, default 1),
# AGENT_HZ / AGENT_RUN_SECONDS / AGENT_SOAK_MINUTES / AGENT_PEERS (the agent
# section: rates "19 99", 60 s runs, a 5-minute soak; see sections/agent.sh),
# SERVE_LOCATIONS / SERVE_REQUESTS / SERVE_OTEL_SECONDS (the serve section:
# 10000 locations, 50 warm requests, 20 s OTel runs; see sections/serve.sh).
#
# The configuration below is used by the sections (sourced files).
# shellcheck disable=SC2034
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD
GSYMPROF=${GSYMPROF:-$BUILD/gsymprof}
[[ $GSYMPROF == /* ]] || GSYMPROF=$ROOT/$GSYMPROF
export BENCH_DIR=${BENCH_DIR:-/var/cache/gsymprof-bench}
ROUNDS=${ROUNDS:-5}
RESULTS=${RESULTS:-$HERE/RESULTS.md}
LLVM_GSYMUTIL=${LLVM_GSYMUTIL:-/usr/lib/llvm-22/bin/llvm-gsymutil}
LLVM_PREFIX=/usr/lib/llvm-22
WORK=$BENCH_DIR/work
BIN=$BUILD/bench
SQLITE=$BENCH_DIR/sqlite3
CPPCHECK=$BENCH_DIR/cppcheck

TMP=$(mktemp -d /tmp/gsymprof-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# Layout: tests/bench/common.sh holds what sections share (statistics,
# timing, the RESULTS.md writer, readiness checks, the corpus, the gated
# speedtest1 run); tests/bench/sections/NAME.sh holds section NAME
# (section_NAME and its own helpers), sourced only when it runs.
# shellcheck source=tests/bench/common.sh
source "$HERE/common.sh"

# ------------------------------------------------------------------- main --

# Every section, in the order a run without arguments takes them.
ALL_SECTIONS=(lookup convert profile symbolize perfdata stacks deepstacks memory tail offcpu agent rust_peers syscalls bystanders reader diff serve)
is_section() {
  local name
  for name in "${ALL_SECTIONS[@]}"; do [[ $1 == "$name" ]] && return 0; done
  return 1
}

sections=("$@")
[[ ${#sections[@]} -gt 0 ]] || sections=("${ALL_SECTIONS[@]}")
for s in "${sections[@]}"; do
  is_section "$s" || { echo "usage: tests/bench/run.sh$(printf ' [%s]' "${ALL_SECTIONS[@]}")" >&2; exit 2; }
done
for s in "${sections[@]}"; do
  # shellcheck source=/dev/null
  source "$HERE/sections/$s.sh" || die "cannot load $HERE/sections/$s.sh"
done
# Whole-process CPU, wall and peak RSS, as GNU time's -f/-o measure them but
# to the microsecond (cputime.c): what sections time with "$CPUTIME".
mkdir -p "$BIN" || die "cannot create $BIN"
cc -O2 -o "$BIN/cputime" "$HERE/cputime.c" || die "cannot build tests/bench/cputime.c"
CPUTIME=$BIN/cputime
gsymprof_ready || log "$GSYMPROF not built: sections measure the peers only where ours is missing"
for s in "${sections[@]}"; do
  log "== $s"
  "section_$s"
done
log "results in $RESULTS"
