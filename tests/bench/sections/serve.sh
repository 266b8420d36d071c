# tests/bench/sections/serve.sh - the `serve` section of tests/bench/run.sh
# (issue 32): `gsymprof serve` naming a 10,000-location profile, cold and
# warm, over OTLP/HTTP and pprof; then the OpenTelemetry eBPF profiler's
# native frames named before and after passing through serve.
# Sourced by run.sh after tests/bench/common.sh; defines section_serve.
#
# The request (tests/bench/serve_request.py build): SERVE_LOCATIONS
# (default 10000) distinct addresses inside the functions of real binaries
# with GNU build IDs, each at its own base as a process maps it: a copy of
# $GSYMPROF, cppcheck and speedtest1 (the corpus, when built), libc (its
# libc6-dbg debug file, when installed, beside the executable) and
# libstdc++ (.dynsym only); stacks of 20, as one OTLP
# ExportProfilesServiceRequest and one gzipped pprof.
#
# Cold: a store holding those files (DIR/debug/ID.executable and
# .debuginfo, as uploads leave them) but no GSYM; the request is POSTed
# again and again (no pause) until one answer names every location: the
# seconds from the first POST to that answer (the conversions, one at a
# time, by serve's worker), and how many requests it took. Warm: serve
# restarted on the same store (GSYMs on disk, none open), SERVE_REQUESTS
# (default 50) requests one after another on one connection: p50 / p99 of
# their latency (the client's clock, from the request sent to the answer
# read), frames named per second (locations per request / median
# latency), and the first request's latency (GSYMs opened). Cold and warm
# rounds alternate OTLP and pprof; ROUNDS of each, medians.
#
# OTel: with root, the OTel eBPF profiler (tests/bench/build-ebpf-profiler.sh)
# and the test Collector (tests/support/otelcol): a burner built -O2 -g,
# then stripped, its debug file (objcopy --only-keep-debug) and libc's
# uploaded to serve (PUT /buildid/ID/debuginfo); two runs of
# SERVE_OTEL_SECONDS (default 20) each: the profiler to the Collector, and
# the profiler to serve's --otlp-listen with --forward to the Collector.
# The share of the burner's native frames (not kernel) that have a name,
# in each run's Collector output.
# shellcheck shell=bash

SERVE_LOCATIONS=${SERVE_LOCATIONS:-10000}
SERVE_REQUESTS=${SERVE_REQUESTS:-50}
SERVE_OTEL_SECONDS=${SERVE_OTEL_SECONDS:-20}
SERVE_PID="" SERVE_URL="" SERVE_GRPC="" SERVE_ERR=/dev/null

# serve_start NAME ARGS...: `gsymprof serve --listen 127.0.0.1:0 ARGS...`;
# sets SERVE_PID, SERVE_URL (http://127.0.0.1:PORT), SERVE_GRPC.
serve_start() {
  local name=$1 n=0
  shift
  SERVE_ERR=$TMP/serve-$name.err
  # Removed first: the address is read from it, and the shell may run the
  # loop below before the new process has truncated the previous run's.
  rm -f "$SERVE_ERR"
  "$GSYMPROF" serve --listen 127.0.0.1:0 "$@" 2> "$SERVE_ERR" &
  SERVE_PID=$! SERVE_URL="" SERVE_GRPC=""
  while ((n < 100)); do
    SERVE_URL=$(grep -so 'http://127.0.0.1:[0-9]*' "$TMP/serve-$name.err" | head -n 1)
    [[ -n $SERVE_URL ]] && break
    kill -0 "$SERVE_PID" 2>/dev/null || break
    sleep 0.1; ((n++))
  done
  [[ -n $SERVE_URL ]] || { log "serve did not start: $(tail -n 2 "$TMP/serve-$name.err")"; serve_stop; return 1; }
  SERVE_GRPC=$(grep -so 'OTLP/gRPC on 127.0.0.1:[0-9]*' "$TMP/serve-$name.err" | sed 's/.* on //')
  return 0
}

# serve_stop: SIGTERM; a serve that had exited already, or that exits
# with a status other than 0, is reported with its last lines.
serve_stop() {
  [[ -n $SERVE_PID ]] || return 0
  local rc=0
  kill -TERM "$SERVE_PID" 2>/dev/null || log "serve had exited before SIGTERM"
  wait "$SERVE_PID" 2>/dev/null || rc=$?
  ((rc == 0)) || log "serve exited with status $rc: $(tail -n 5 "$SERVE_ERR" | tr '\n' ' ')"
  SERVE_PID=""
}

serve_metric() {
  curl -sf "$SERVE_URL/metrics" | awk -v key="$1" '$1 == key { print $2; found = 1 } END { if (!found) print 0 }'
}

# The binaries of the request, FILE[:SYMFILE] each, in SERVE_TARGETS.
serve_targets() {
  SERVE_TARGETS=()
  cp -p "$GSYMPROF" "$TMP/gsymprof-target" && SERVE_TARGETS+=("$TMP/gsymprof-target")
  [[ -x $CPPCHECK/cppcheck ]] && SERVE_TARGETS+=("$CPPCHECK/cppcheck")
  [[ -x $SQLITE/speedtest1-nofp ]] && SERVE_TARGETS+=("$SQLITE/speedtest1-nofp")
  local libc libcxx id debug
  libc=$(ldd /bin/true | awk '$1 == "libc.so.6" { print $3 }')
  libcxx=$(ldd "$GSYMPROF" | awk '$1 ~ /^libstdc\+\+/ { print $3 }')
  if [[ -n $libc ]]; then
    id=$(LC_ALL=C readelf -n "$libc" | awk '/Build ID:/ { print $3 }')
    debug=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
    if [[ -f $debug ]]; then SERVE_TARGETS+=("$libc:$debug"); else SERVE_TARGETS+=("$libc"); fi
  fi
  [[ -n $libcxx ]] && SERVE_TARGETS+=("$(readlink -f "$libcxx")")
  ((${#SERVE_TARGETS[@]} > 0))
}

# serve_seed DIR: the store: every target (and its separate debug file) in
# DIR/debug as an upload leaves it, no GSYM.
serve_seed() {
  local dir=$1 bid path sym n
  rm -rf "$dir"; mkdir -p "$dir/debug"; chmod 0700 "$dir" "$dir/debug"
  while read -r bid path sym n; do
    cp "$path" "$dir/debug/$bid.executable"
    [[ $sym != "$path" ]] && cp "$sym" "$dir/debug/$bid.debuginfo"
  done < "$TMP/serve-modules"
  chmod 0600 "$dir"/debug/*
}

# serve_post KIND COUNT OUT: KIND otlp|pprof, COUNT requests, lines to OUT
# ("seconds status named total lines").
serve_post() {
  local kind=$1 count=$2 out=$3 path=/v1development/profiles body=$TMP/serve-request.otlp
  [[ $kind == pprof ]] && { path=/symbolize/pprof; body=$TMP/serve-request.pb.gz; }
  python3 "$HERE/serve_request.py" post "$SERVE_URL$path" "$body" --count "$count" --metrics "$SERVE_URL/metrics" > "$out"
}

# serve_cold KIND RESULT: one cold round; appends "seconds requests named total" to RESULT.
serve_cold() {
  local kind=$1 result=$2 store=$TMP/serve-store path=/v1development/profiles body=$TMP/serve-request.otlp
  [[ $kind == pprof ]] && { path=/symbolize/pprof; body=$TMP/serve-request.pb.gz; }
  rm -rf "$store/cache"; find "$store" -maxdepth 1 -name '*.gsym' -delete
  serve_start cold --gsym-dir "$store" || return 1
  python3 "$HERE/serve_request.py" post "$SERVE_URL$path" "$body" --count 5000 --until-all-named \
    --metrics "$SERVE_URL/metrics" > "$TMP/serve-cold.out" 2> "$TMP/serve-client.err" ||
    log "serve: cold $kind: the client failed: $(tail -n 1 "$TMP/serve-client.err")"
  serve_stop
  awk '{ printf("%.3f %d %d %d\n", $1, $2, $3, $4) }' "$TMP/serve-cold.out" >> "$result"
}

# serve_warm KIND RESULT: the warm run; appends "p50_ms p99_ms mean_ms first_ms named total lines".
serve_warm() {
  local kind=$1 result=$2 store=$TMP/serve-store
  serve_start warm --gsym-dir "$store" || return 1
  serve_post "$kind" $((SERVE_REQUESTS + 1)) "$TMP/serve-warm.out" 2> "$TMP/serve-client.err" ||
    { log "serve: warm $kind: the client failed: $(tail -n 1 "$TMP/serve-client.err")"; serve_stop; return 1; }
  serve_stop
  local first stats named total lines
  first=$(awk 'NR == 1 { printf("%.2f", $1 * 1000) }' "$TMP/serve-warm.out")
  tail -n +2 "$TMP/serve-warm.out" > "$TMP/serve-warm.rest"
  stats=$(python3 "$HERE/serve_request.py" stats "$TMP/serve-warm.rest")
  # named: the fewest any of the requests named
  read -r named total lines < <(awk 'NR == 1 || $3 < m { m = $3 } END { print m, $4, $5 }' "$TMP/serve-warm.rest")
  awk '$2 != 200 { bad++ } END { exit bad > 0 }' "$TMP/serve-warm.out" || log "serve: warm $kind: some answers were not 200"
  echo "$stats $first $named $total $lines" >> "$result"
}

serve_throughput() {
  local ms=$1 locations=$2
  awk -v ms="$ms" -v n="$locations" 'BEGIN { if (ms == "-" || ms + 0 == 0) print "-"; else printf("%.0f", n / (ms / 1000)) }'
}

# ------------------------------------------------------------ OTel part --

SERVE_OTEL_WHY="" SERVE_OTEL_VERSION="" SERVE_OTEL_BIN=""

# serve_named_native FILE FROM TO: "frames named% samples" of the burner's
# samples in the Collector's records FROM..TO: its user frames (not
# kernel) by name: MODULE+0xADDRESS, 0xADDRESS or [unknown] are unnamed.
serve_named_native() {
  local file=$1 from=$2 to=$3
  ((to >= from)) || { echo "0 - 0"; return; }
  sed -n "${from},${to}p" "$file" > "$TMP/serve-otlp-slice.jsonl"
  python3 "$ROOT/tests/support/otelcol/decode.py" "$TMP/serve-otlp-slice.jsonl" 2>/dev/null | python3 -c '
import re, sys
unnamed = re.compile(r"^(\S*\+0x[0-9a-f]+|0x[0-9a-f]+|\[unknown\])$")
frames = named = samples = 0
for line in sys.stdin:
    f = line.rstrip("\n").split("\t")
    if f[0] != "sample" or not f[1].startswith("samples/"): continue
    exe = next((a.split("=", 1)[1] for a in f[5:] if a.startswith("process.executable.name=")), "")
    comm = next((a.split("=", 1)[1] for a in f[5:] if a.startswith("thread.name=")), "")
    if "serve_burn" not in (exe, comm): continue
    samples += int(f[2])
    seen = set()
    for x in f[4].split(";") if f[4] else []:
        if x.endswith("_[k]"): continue
        base = re.sub(r"(_\[[i]\])+$", "", x)
        frames += int(f[2]); named += 0 if unnamed.match(base) else int(f[2])
print(frames, "%.1f" % (100.0 * named / frames) if frames else "-", samples)'
}

# serve_call_lines FILE FROM TO: for the burner's functions that call
# (burn_outer, burn_inner, main), the lines their named frames give, "FUNCTION:LINE=SAMPLES ...",
# from the Collector's records FROM..TO (its OTLP/JSON).
serve_call_lines() {
  sed -n "${2},${3}p" "$1" | python3 -c '
import collections, json, sys
seen = collections.Counter()
for raw in sys.stdin:
    rec = json.loads(raw)
    d = rec.get("dictionary", {})
    strings = d.get("stringTable", [])
    funcs = d.get("functionTable", [])
    locs = d.get("locationTable", [])
    stacks = d.get("stackTable", [])
    for rp in rec.get("resourceProfiles", []):
        for sp in rp.get("scopeProfiles", []):
            for prof in sp.get("profiles", []):
                for smp in prof.get("samples", []):
                    n = len(smp.get("timestampsUnixNano", [])) or 1
                    st = stacks[smp.get("stackIndex", 0)] if stacks else {}
                    for li in st.get("locationIndices", []):
                        for line in locs[li].get("lines", []):
                            f = funcs[line.get("functionIndex", 0)]
                            name = strings[f.get("nameStrindex", 0)]
                            if name in ("burn_outer", "burn_inner", "main"):
                                seen["%s:%s" % (name, line.get("line", 0))] += n
print(" ".join("%s=%d" % kv for kv in sorted(seen.items())) or "-")'
}

serve_burn_source() {
  cat > "$TMP/serve_burn.c" <<'EOF'
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
__attribute__((noinline)) static uint64_t burn_mix(uint64_t x) {
  for (int i = 0; i < 64; i++) { x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 29; }
  return x;
}
static inline uint64_t burn_step(uint64_t x, int i) { return burn_mix(x + i) ^ (uint64_t)i; }
__attribute__((noinline)) static uint64_t burn_inner(uint64_t x) { for (int i = 0; i < 16; i++) x = burn_step(x, i); return x; }
__attribute__((noinline)) static uint64_t burn_copy(uint64_t x) {
  static char a[1 << 16], b[1 << 16];
  memset(a, (int)x, sizeof a); memcpy(b, a, sizeof b);
  return x + (uint64_t)b[x % sizeof b];
}
__attribute__((noinline)) static uint64_t burn_outer(uint64_t x) {
  for (int i = 0; i < 16; i++) x = burn_inner(x ^ i);
  return burn_copy(x);
}
int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 10, t0 = now();
  uint64_t x = 1;
  while (now() - t0 < seconds) x = burn_outer(x);
  printf("%llu\n", (unsigned long long)(x & 1));
  return 0;
}
EOF
  gcc -O2 -g -fomit-frame-pointer "$TMP/serve_burn.c" -o "$TMP/serve_burn.full" || return 1
  objcopy --only-keep-debug "$TMP/serve_burn.full" "$TMP/serve_burn.debug" || return 1
  objcopy --strip-all "$TMP/serve_burn.full" "$TMP/serve_burn" || return 1
}

# serve_otel_run MODE: MODE direct|serve; one run of the burner under the
# OTel profiler; prints "frames named% samples" from the Collector's output.
serve_otel_run() {
  local mode=$1 endpoint=$OTELCOL_GRPC rec0 n=0
  [[ $mode == serve ]] && endpoint=$SERVE_GRPC
  rec0=$(otelcol_records)
  "$SERVE_OTEL_BIN" -collection-agent "$endpoint" -disable-tls -samples-per-second 99 \
    -reporter-interval 5s > "$TMP/serve-otel-$mode.err" 2>&1 &
  local pid=$!
  while ((n < 600)) && kill -0 "$pid" 2>/dev/null; do
    grep -q 'Attached sched monitor' "$TMP/serve-otel-$mode.err" && break
    sleep 0.1; ((n++))
  done
  sleep 2
  "$TMP/serve_burn" "$SERVE_OTEL_SECONDS" > /dev/null
  # It reports every 5 s (+ jitter) and nothing on SIGTERM.
  sleep 8
  kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  sleep 1
  local rec1
  rec1=$(otelcol_records)
  serve_call_lines "$OTELCOL_OUT" $((rec0 + 1)) "$rec1" > "$TMP/serve-otel-$mode.lines"
  serve_named_native "$OTELCOL_OUT" $((rec0 + 1)) "$rec1"
}

serve_otel() {
  md
  md "### The OpenTelemetry eBPF profiler through serve"
  md
  [[ $(id -u) -eq 0 ]] || { md "Not measured: needs root (BPF)."; return 0; }
  local bin
  SERVE_OTEL_VERSION=$("$HERE/build-ebpf-profiler.sh" --version)
  # The stock binary when it starts here; else the variant that tolerates
  # the EPERM of its memlock raise (see build-ebpf-profiler.sh).
  if bin=$("$HERE/build-ebpf-profiler.sh" 2> "$TMP/otel-build.err"); then
    if [[ $(ulimit -Hl) != unlimited ]] && ! (ulimit -l unlimited) 2>/dev/null; then
      bin=$("$HERE/build-ebpf-profiler.sh" --memlock-eperm 2>> "$TMP/otel-build.err") || bin=""
      SERVE_OTEL_WHY=" (the build that tolerates EPERM from raising RLIMIT_MEMLOCK: root here lacks CAP_SYS_RESOURCE)"
    fi
  else
    bin=""
  fi
  [[ -n $bin ]] || { md "Not measured: go.opentelemetry.io/ebpf-profiler $SERVE_OTEL_VERSION does not build here: $(tail -n 2 "$TMP/otel-build.err" | tr '\n' ' ')"; return 0; }
  SERVE_OTEL_BIN=$bin
  # It attaches to sched:sched_process_free through tracefs (unmounted again below).
  local tracefs_mounted=""
  if [[ ! -e /sys/kernel/tracing/events/sched ]] && mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null; then
    tracefs_mounted=1
  fi
  serve_otel_measure
  [[ -z $tracefs_mounted ]] || umount /sys/kernel/tracing 2>/dev/null
}

serve_otel_measure() {
  serve_burn_source || { md "Not measured: cannot build the burner."; return 0; }
  # shellcheck source=tests/support/otelcol/otelcol.bash
  source "$ROOT/tests/support/otelcol/otelcol.bash"
  unset OTELCOL_GRPC_PORT OTELCOL_HTTP_PORT
  mkdir -p "$TMP/serve-otelcol"
  otelcol_start "$TMP/serve-otelcol/profiles.jsonl" "$TMP/serve-otelcol" || { md "Not measured: the test Collector did not start."; return 0; }
  local store=$TMP/serve-otel-store
  rm -rf "$store"; mkdir -p "$store"
  if ! serve_start otel --gsym-dir "$store" --otlp-listen 127.0.0.1:0 --forward "$OTELCOL_GRPC" --forward-insecure; then
    otelcol_stop; md "Not measured: serve did not start."; return 0
  fi
  local file id code uploads=0 libc libc_id libc_debug
  id=$(LC_ALL=C readelf -n "$TMP/serve_burn" | awk '/Build ID:/ { print $3 }')
  code=$(curl -s -o "$TMP/serve-put.txt" -w '%{http_code}' -T "$TMP/serve_burn.debug" "$SERVE_URL/buildid/$id/debuginfo")
  if [[ $code == 201 ]]; then ((++uploads)); else log "serve: upload of the burner's debug file: $code $(cat "$TMP/serve-put.txt")"; fi
  libc=$(ldd "$TMP/serve_burn" | awk '$1 == "libc.so.6" { print $3 }')
  libc_id=$(LC_ALL=C readelf -n "$libc" | awk '/Build ID:/ { print $3 }')
  libc_debug=/usr/lib/debug/.build-id/${libc_id:0:2}/${libc_id:2}.debug
  [[ -f $libc_debug ]] || libc_debug=$libc
  code=$(curl -s -o "$TMP/serve-put.txt" -w '%{http_code}' -T "$libc_debug" "$SERVE_URL/buildid/$libc_id/debuginfo")
  if [[ $code == 201 ]]; then ((++uploads)); else log "serve: upload of libc: $code $(cat "$TMP/serve-put.txt")"; fi
  local n=0
  while ((n < 240)) && [[ $(serve_metric 'gsymprof_serve_conversions_total{outcome="converted"}') != "$uploads" ]]; do sleep 0.5; ((n++)); done
  local direct via
  direct=$(serve_otel_run direct)
  via=$(serve_otel_run serve)
  local outcomes sep=""
  outcomes=$(curl -sf "$SERVE_URL/metrics" | awk -F'[{}" ]+' '$1 == "gsymprof_serve_frames_total" && $NF > 0 { printf("%s%s %s", sep, $3, $NF); sep = ", " }')
  serve_stop
  otelcol_stop
  md "\`ebpf-profiler -collection-agent ENDPOINT -disable-tls -samples-per-second 99 -reporter-interval 5s\`, go.opentelemetry.io/ebpf-profiler $SERVE_OTEL_VERSION$SERVE_OTEL_WHY,"
  md "on \`serve_burn\` (C, \`-O2 -g\` without frame pointers, then \`objcopy --strip-all\`; its debug file and libc's (libc6-dbg) uploaded to serve with"
  md "\`PUT /buildid/ID/debuginfo\`) for $SERVE_OTEL_SECONDS s at 99 Hz: straight to the test Collector, then through \`gsymprof serve --otlp-listen ... --forward COLLECTOR\`."
  md "*Frames*: the burner's user frames in the Collector's output, weighted by samples; *named*: those with a function name"
  md "(not MODULE+0xADDRESS, an address or [unknown]; inline frames count as frames)."
  md
  md "| path | samples | user frames | named % |"
  md "|---|---:|---:|---:|"
  local f p s
  read -r f _ _ <<< "$direct"
  if [[ $f == 0 ]]; then
    md "The profiler sent no frame of the burner here: $(grep -m 1 -E 'level=(ERROR|FATAL)' "$TMP/serve-otel-direct.err" || tail -n 1 "$TMP/serve-otel-direct.err")"
    md
  fi
  read -r f p s <<< "$direct"; md "| OTel profiler -> Collector | $s | $f | $p |"
  read -r f p s <<< "$via"; md "| OTel profiler -> serve -> Collector | $s | $f | $p |"
  md
  md "serve's /metrics over the run, locations by outcome (every process of this shared host): $outcomes."
  local calls
  calls=$(for pat in 'x = burn_outer(x)' 'x = burn_inner(x ^ i)' 'return burn_copy(x)' 'x = burn_step(x, i)'; do
    # shellcheck disable=SC2016 # backquotes of markdown
    printf '%s`%s`: %s' "$sep" "$pat" "$(grep -nF "$pat" "$TMP/serve_burn.c" | cut -d: -f1)"; sep="; "; done)
  md
  md "Lines of the burner's calling frames as named through serve (FUNCTION:LINE=samples): $(cat "$TMP/serve-otel-serve.lines" 2>/dev/null || echo -);"
  md "the calls in its source are at lines $calls. The profiler sends a return address minus one for every frame"
  md "but the leaf, so a caller's frame is its call's line, not the line after it: serve looks addresses up as sent."
}

section_serve() {
  section_begin serve
  subcommand_works serve || { log "gsymprof has no serve subcommand: skipped"; return 0; }
  command -v curl >/dev/null || { log "serve section needs curl: skipped"; return 0; }
  # A private copy: a rebuild of $GSYMPROF during the section would mix builds.
  private_gsymprof gsymprof-serve || { log "cannot copy $GSYMPROF"; return 0; }
  local GSYMPROF=$TMP/gsymprof-serve
  serve_targets || { log "serve: no target binaries"; return 0; }
  python3 "$HERE/serve_request.py" build --otlp "$TMP/serve-request.otlp" --pprof "$TMP/serve-request.pb.gz" \
    --locations "$SERVE_LOCATIONS" "${SERVE_TARGETS[@]}" > "$TMP/serve-modules" || { log "serve: cannot build the request"; return 0; }
  serve_seed "$TMP/serve-store"

  md "## Symbolization service: \`gsymprof serve\` (issue 32)"
  md
  machine_line
  md
  md "One profile of $SERVE_LOCATIONS distinct native locations (addresses inside functions, stacks of 20) in $(wc -l < "$TMP/serve-modules") binaries,"
  md "as OTLP/HTTP ($(stat -c %s "$TMP/serve-request.otlp") bytes, \`POST /v1development/profiles\`, no \`--forward\`: named, answered, dropped)"
  md "and as a gzipped pprof ($(stat -c %s "$TMP/serve-request.pb.gz") bytes, \`POST /symbolize/pprof\`, answered with the named pprof, gzipped):"
  md
  md "| binary | build ID | symbols from | locations |"
  md "|---|---|---|---:|"
  local bid path sym n
  while read -r bid path sym n; do
    md "| $(basename "$path") | ${bid:0:12}… | $( [[ $sym == "$path" ]] && echo "the file" || echo "its debug file" ) | $n |"
  done < "$TMP/serve-modules"
  md
  md "*Cold*: the store holds those files (as uploads leave them) but no GSYM; the request is POSTed again and again until an answer names"
  md "every location (serve converts off the request path, one file at a time, and answers meanwhile with what it has): seconds from the first"
  md "POST to that answer. *Warm*: serve restarted on the filled store; $SERVE_REQUESTS requests one after another on one keep-alive connection"
  md "(Python client: latency from sending the request to reading the whole answer); *first*: the request before them (GSYMs opened)."
  md "*named*: the fewest locations any warm answer named; *frames/s*: locations named per request / p50; *lines*: frames with inline ones"
  md "(from the pprof answer). Medians of $ROUNDS alternating rounds."
  md

  local r kind
  for kind in otlp pprof; do : > "$TMP/serve-cold-$kind"; : > "$TMP/serve-warm-$kind"; done
  for ((r = 0; r < ROUNDS; r++)); do
    for kind in otlp pprof; do
      log "serve: round $((r + 1))/$ROUNDS, $kind cold"
      serve_cold "$kind" "$TMP/serve-cold-$kind" || log "serve: cold $kind failed"
      log "serve: round $((r + 1))/$ROUNDS, $kind warm"
      serve_warm "$kind" "$TMP/serve-warm-$kind" || log "serve: warm $kind failed"
    done
  done
  md "| protocol | cold: s to all named | cold: requests | warm p50 ms | warm p99 ms | warm mean ms | first ms | named / locations | frames/s (locations) | lines / answer |"
  md "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for kind in otlp pprof; do
    local c=$TMP/serve-cold-$kind w=$TMP/serve-warm-$kind label p50
    [[ $kind == otlp ]] && label="OTLP/HTTP" || label="pprof"
    p50=$(column "$w" 1)
    md "| $label | $(fmt "$(column "$c" 1)" 2) | $(fmt "$(column "$c" 2)" 0) | $(fmt "$p50" 1) | $(fmt "$(column "$w" 2)" 1) | $(fmt "$(column "$w" 3)" 1) | $(fmt "$(column "$w" 4)" 1) | $(column "$w" 5) / $(column "$w" 6) | $(serve_throughput "$p50" "$(column "$w" 5)") | $(column "$w" 7) |"
  done
  md
  md "Every round: cold s (requests), warm p50 / p99 ms:"
  for kind in otlp pprof; do
    md "- $kind: cold $(awk '{ printf("%s%.2f (%d)", sep, $1, $2); sep = ", " }' "$TMP/serve-cold-$kind"); warm $(awk '{ printf("%s%.1f / %.1f", sep, $1, $2); sep = ", " }' "$TMP/serve-warm-$kind")"
  done

  serve_otel
  write_section serve "$SECTION_MD"
}
