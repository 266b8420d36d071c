# tests/bench/common.sh - helpers shared by the sections of tests/bench/run.sh
# (sourced by it, after its configuration: ROOT, BUILD, GSYMPROF, TMP, ...):
# statistics and formatting, timing, the RESULTS.md writer, readiness
# checks, the corpus, the cppcheck workload, and the gated speedtest1 run
# that the profile and stacks sections share.
# shellcheck shell=bash
# Variables set here are read by the sections.
# shellcheck disable=SC2034

log() { echo "bench: $*" >&2; }
die() { echo "bench: $*" >&2; exit 1; }

# ---------------------------------------------------------------- helpers --

# Median of the numbers on stdin ("-" when there are none).
median() {
  sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "-"; exit }
    if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# "median (min-max)" of the numbers on stdin, rounded to $1 digits.
spread() {
  sort -g | awk -v d="${1:-1}" '{ v[NR] = $1 } END {
    if (NR == 0) { print "-"; exit }
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf("%.*f (%.*f-%.*f)\n", d, m, d, v[1], d, v[NR]) }'
}

# ratio A B [DIGITS]: A / B, "-" when either is missing or B is zero.
ratio() {
  awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN {
    if (a == "-" || b == "-" || a == "" || b == "" || b + 0 == 0) print "-";
    else printf("%.*f\n", d, a / b) }'
}

# fmt NUMBER [DIGITS]: rounds, passes "-" through.
fmt() {
  awk -v a="$1" -v d="${2:-1}" 'BEGIN { if (a == "-" || a == "") print "-"; else printf("%.*f\n", d, a) }'
}

# measure FILE CMD...: runs CMD (stdin/stdout as given), appends
# "wall_s cpu_s maxrss_kb exit" to FILE: wall, CPU (user+sys) and peak RSS
# from cputime.c, of CMD and its waited-for children.
measure() {
  local out=$1
  shift
  local rc
  "$CPUTIME" -f '%e %U %S %M' -o "$TMP/time.out" "$@"
  rc=$?
  awk -v rc="$rc" '{ printf("%.4f %.5f %d %d\n", $1, $2 + $3, $4, rc) }' "$TMP/time.out" >> "$out"
  return $rc
}

# measure_n N FILE CMD...: as measure, for a command of a few milliseconds,
# where one run is mostly the noise of starting a process: CMD runs N times
# in one timed shell, and the wall and CPU seconds appended are per run
# (peak RSS: the largest run).
# MEASURE_STDIN=FILE: each run reads FILE on stdin.
measure_n() {
  local n=$1 out=$2
  shift 2
  measure "$TMP/measure_n.tmp" bash -c 'n=$1 in=$2; shift 2
    for ((i = 0; i < n; i++)); do
      if [[ -n $in ]]; then "$@" < "$in" || exit; else "$@" || exit; fi
    done' _ "$n" "${MEASURE_STDIN:-}" "$@"
  local rc=$?
  awk -v n="$n" '{ printf("%.5f %.5f %d %d\n", $1 / n, $2 / n, $3, $4) }' "$TMP/measure_n.tmp" >> "$out"
  rm -f "$TMP/measure_n.tmp"
  return $rc
}

# column FILE N: the median of column N of FILE.
column() { awk -v n="$2" '{ print $n }' "$1" | median; }

# Replaces the block of section $1 in $RESULTS with the file $2 (markdown).
write_section() {
  local name=$1 body=$2
  local begin="<!-- bench:$name -->" end="<!-- /bench:$name -->"
  if [[ ! -f $RESULTS ]]; then
    {
      echo "# gsymprof benchmark results"
      echo
      echo "Written by \`tests/bench/run.sh\` (\`make bench\`); each section is replaced when it runs."
      echo "Medians of alternating runs on a shared, noisy 2-vCPU KVM guest."
    } > "$RESULTS"
  fi
  awk -v begin="$begin" -v end="$end" -v body="$body" '
    $0 == begin { skip = 1; while ((getline line < body) > 0) buf = buf line "\n"; printf("%s\n%s%s\n", begin, buf, end); done = 1; next }
    $0 == end { skip = 0; next }
    !skip { print }
    END { if (!done) { printf("\n%s\n", begin); while ((getline line < body) > 0) print line; print end } }
  ' "$RESULTS" > "$RESULTS.tmp" && mv "$RESULTS.tmp" "$RESULTS"
}

# The section's markdown is collected here and printed as it goes.
section_begin() { SECTION_MD=$TMP/section-$1.md; : > "$SECTION_MD"; }
md() { printf '%s\n' "$*" | tee -a "$SECTION_MD"; }

machine_line() {
  md "_$(date -u +%Y-%m-%d) on $(nproc) CPUs, kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); tree at commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), gsymprof built $(date -u -r "$GSYMPROF" '+%H:%M UTC' 2>/dev/null || echo "-")._"
}

gsymprof_ready() { [[ -x $GSYMPROF ]]; }

# tracefs_ready: the tracepoints' formats are readable (bpftrace needs them
# for tracepoint:* probes): tracefs is mounted at /sys/kernel/tracing, or is
# mounted there now (Debian mounts it with systemd; a bare guest may not),
# for tracefs_release to unmount at the end of the section. False, with a
# line saying so, when it cannot be.
TRACEFS_MOUNTED_BY_BENCH=""
tracefs_ready() {
  [[ -d /sys/kernel/tracing/events ]] && return 0
  if mount -t tracefs tracefs /sys/kernel/tracing 2> /dev/null; then
    TRACEFS_MOUNTED_BY_BENCH=1
    log "mounted tracefs on /sys/kernel/tracing for bpftrace (unmounted at the end of the section)"
    [[ -d /sys/kernel/tracing/events ]] && return 0
  fi
  log "no tracefs at /sys/kernel/tracing (and it cannot be mounted): tracepoint probes skipped"
  return 1
}
tracefs_release() {
  [[ -n $TRACEFS_MOUNTED_BY_BENCH ]] || return 0
  umount /sys/kernel/tracing 2> /dev/null
  TRACEFS_MOUNTED_BY_BENCH=""
}

subcommand_has() {
  local flag=$1
  shift
  # grep reads it all: with pipefail, grep -q leaving early would fail the pipeline (SIGPIPE)
  gsymprof_ready && "$GSYMPROF" "$@" --help 2>&1 | grep -- "$flag" >/dev/null
}
subcommand_works() { gsymprof_ready && "$GSYMPROF" "$@" --help >/dev/null 2>&1; }

corpus() { "$HERE/build-corpus.sh" "$@" || die "corpus build failed"; }

# ------------------------------------------------------ shared workloads --

# cppcheck checking two of its own sources: ~11 s of C++ work, ~10k
# samples at 999 Hz (the size of the profile in field-notes.md).
CPPCHECK_WORKLOAD=()
set_cppcheck_workload() {
  CPPCHECK_WORKLOAD=(--quiet "$CPPCHECK/src/lib/check64bit.cpp" "$CPPCHECK/src/lib/checkstring.cpp")
}

SPEEDTEST_SIZE=${SPEEDTEST_SIZE:-60}

# Runs speedtest1 variant $2 (fp|nofp) held at a gate, so that the profiler
# started by $3... attaches before the first instruction of the workload:
#   run_gated RESULTFILE VARIANT PROFILER-KIND HZ
# PROFILER-KIND: none | gsymprof | bpftrace | perf | perf-dwarf | gsymprof-fp | gsymprof-dwarf
# Appends "workload_cpu_s workload_wall_s profiler_cpu_s profiler_rss_kb" to
# RESULTFILE and leaves the profiler's output in $TMP/prof.out.
run_gated() {
  local result=$1 variant=$2 kind=$3 hz=$4
  local gate=$TMP/gate
  rm -f "$gate" "$TMP/prof.out" "$TMP/prof.err" "$TMP/prof.time" "$TMP/work.time" "$TMP/work.out"
  mkfifo "$gate"
  # The gated shell execs speedtest1 in place, so its pid is the workload's.
  "$CPUTIME" -f '%U %S' -o "$TMP/work.time" \
    bash -c 'read -r _ < "$1"; exec "$2" --memdb --size "$3"' _ "$gate" "$SQLITE/speedtest1-$variant" "$SPEEDTEST_SIZE" \
    > "$TMP/work.out" 2>&1 &
  local timer=$! pid=""
  for _ in $(seq 100); do pid=$(pgrep -P "$timer" | head -n 1); [[ -n $pid ]] && break; sleep 0.05; done
  [[ -n $pid ]] || { log "workload did not start"; return 1; }
  local prof=""
  local ptime=("$CPUTIME" -f '%U %S %M' -o "$TMP/prof.time")
  case $kind in
    none) ;;
    gsymprof) "${ptime[@]}" "$GSYMPROF" profile -p "$pid" -F "$hz" -o "$TMP/prof.out" 2>"$TMP/prof.err" & prof=$! ;;
    gsymprof-fp | gsymprof-dwarf)
      "${ptime[@]}" "$GSYMPROF" profile -p "$pid" -F "$hz" --call-graph "${kind#gsymprof-}" -o "$TMP/prof.out" 2>"$TMP/prof.err" & prof=$! ;;
    bpftrace)
      "${ptime[@]}" bpftrace -e "profile:hz:$hz /pid == $pid/ { @[ustack] = count(); }" > "$TMP/prof.out" 2>"$TMP/prof.err" & prof=$! ;;
    perf)
      "${ptime[@]}" perf record -q -F "$hz" -g -p "$pid" -o "$TMP/perf.data" 2>"$TMP/prof.err" & prof=$! ;;
    perf-dwarf)
      "${ptime[@]}" perf record -q -F "$hz" --call-graph dwarf -p "$pid" -o "$TMP/perf.data" 2>"$TMP/prof.err" & prof=$! ;;
  esac
  if [[ -n $prof ]]; then
    # Ready when the profiler holds a perf_event fd (sampling attached), and
    # bpftrace has said "Attaching"; then a short grace for the rest of the
    # set-up. At most 15 s.
    local waited=0 tool=""
    while ((waited < 150)); do
      kill -0 "$prof" 2>/dev/null || break
      [[ -n $tool ]] || tool=$(pgrep -P "$prof" | head -n 1)
      if [[ -n $tool ]] && ls -l "/proc/$tool/fd" 2>/dev/null | grep -q 'perf_event'; then
        [[ $kind != bpftrace ]] || grep -q Attaching "$TMP/prof.out" 2>/dev/null && break
      fi
      sleep 0.1; ((waited++))
    done
    ((waited < 150)) || log "$kind did not attach within 15 s"
    sleep 0.3
  fi
  echo go > "$gate"
  # bpftrace prints raw addresses for a process that has exited: keep the
  # workload's maps to place main in them.
  local exe=$SQLITE/speedtest1-$variant
  : > "$TMP/work.maps"
  for _ in $(seq 100); do
    if [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$exe" ]]; then cat "/proc/$pid/maps" > "$TMP/work.maps" 2>/dev/null; break; fi
    sleep 0.02
  done
  WORK_EXE=$exe
  wait "$timer"
  if [[ -n $prof ]]; then
    # gsymprof and perf -p stop when the target exits; bpftrace needs a
    # signal. Signals go to the profiler itself: cputime ignores SIGINT.
    local tool
    tool=$(pgrep -P "$prof" | head -n 1)
    [[ $kind == bpftrace && -n $tool ]] && kill -INT "$tool" 2>/dev/null
    local n=0
    while kill -0 "$prof" 2>/dev/null && ((n < 1200)); do
      sleep 0.1; ((n++))
      [[ $n == 300 && -n $tool ]] && { log "$kind still running 30 s after the workload: SIGINT"; kill -INT "$tool" 2>/dev/null; }
      [[ $n == 900 && -n $tool ]] && { log "$kind ignored SIGINT: SIGKILL"; kill -KILL "$tool" 2>/dev/null; }
    done
    wait "$prof"
  fi
  local wall
  wall=$(awk '/TOTAL/ { sub(/s$/, "", $NF); print $NF }' "$TMP/work.out")
  local pc="-" pr="-"
  [[ -s $TMP/prof.time ]] && read -r pc pr < <(awk '{ printf("%.3f %d\n", $1 + $2, $3) }' "$TMP/prof.time")
  awk -v w="${wall:--}" -v pc="$pc" -v pr="$pr" '{ printf("%.3f %s %s %s\n", $1 + $2, w, pc, pr) }' "$TMP/work.time" >> "$result"
}

profiler_ready() {
  case $1 in
    none) return 0 ;;
    gsymprof) subcommand_works profile ;;
    gsymprof-fp) subcommand_has --call-graph profile ;;
    gsymprof-dwarf) subcommand_has 'fp|dwarf' profile ;;
    bpftrace) command -v bpftrace >/dev/null ;;
    perf | perf-dwarf) command -v perf >/dev/null ;;
  esac
}

# wait_attached NAME PID ERR: waits (up to 10 s) until profiler PID holds a
# perf event, then a second more for the rest; false, with ERR's last line
# logged, when it exits first.
wait_attached() {
  local waited=0
  while ((waited < 100)); do
    kill -0 "$2" 2>/dev/null || { log "$1 exited early: $(tail -n 1 "$3")"; return 1; }
    find "/proc/$2/fd" -lname '*perf_event*' 2>/dev/null | grep -q . && break
    sleep 0.1; ((waited++))
  done
  sleep 1
}

# stop_profiler PID FILES...: stops profiler PID (SIGINT: it writes its
# output), waits for it, removes FILES. Nothing when PID is empty.
stop_profiler() {
  [[ -n $1 ]] || return 0
  kill -INT "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  shift
  rm -f "$@"
}

# Samples in a perf.data file (perf script ends each sample with a blank line).
perf_sample_count() {
  perf script -i "$1" -F ip --no-inline 2>/dev/null | awk 'NF == 0 { if (inside) n++; inside = 0; next } { inside = 1 } END { print n + inside }'
}

# private_gsymprof NAME: copies $GSYMPROF, with the HTTP module it loads
# from beside it (gsymprof-http.so), to $TMP/NAME, so that a rebuild during
# a long section cannot mix two builds; false when a copy fails.
private_gsymprof() {
  cp -p "$GSYMPROF" "$TMP/$1" && cp -p "$(dirname "$GSYMPROF")/gsymprof-http.so" "$TMP/gsymprof-http.so"
}
