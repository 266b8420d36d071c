# tests/bench/sections/reader.sh - the `reader` section of tests/bench/run.sh
# (issue 31.3): what gsymprof's own process (the reader: ring buffer,
# unwinding, aggregating, naming) costs at 9999 Hz, per session and per
# million samples. `gsymprof profile -p PID -F 9999 -d D` of Debian's sqlite3
# CLI running a recursive CTE in a loop (FP-less, 13 KB stacks), pinned to
# CPU 1, the profiler to CPU 0, for D = READER_SHORT and READER_LONG
# seconds; CPU (user+sys) of the profiler process from `perf stat`. Per extra sample = the slope
# between the two durations (the session's fixed cost drops out); per
# session = what is left at D = 0. With READER_BASELINE=PATH (another
# gsymprof binary, e.g. an older commit's build) both run alternating in
# each round, side by side; then the two profile the same sqlite3 at the
# same time (both on CPU 0, the one started first alternating), so that the
# machine's drift, which moves sequential runs of one binary by 25%, hits
# both alike: per-round ratios of the same binary under two names stay
# within about 12%. GSYM caches warm for both (a first unmeasured run).
# Median (min-max) of ROUNDS.
# Sourced by run.sh after tests/bench/common.sh; defines section_reader.
# shellcheck shell=bash

READER_SHORT=${READER_SHORT:-1}
READER_LONG=${READER_LONG:-10}
READER_BASELINE=${READER_BASELINE:-}
# 0: no paired runs. They mislead against a build that samples -p targets
# with an event per CPU (before 05e8a8a): its interrupts on the readers' CPU
# are charged to whichever reader runs there, ours included.
READER_PAIRED=${READER_PAIRED:-1}

# The workload: sqlite3's recursive CTE loop on CPU 1 (READER_PID).
reader_workload_start() {
  taskset -c 1 sqlite3 -init /dev/null :memory: < "$TMP/reader.sql" > /dev/null 2>&1 &
  READER_PID=$!
  sleep 0.3
}
reader_workload_stop() { kill "$READER_PID" 2> /dev/null; wait "$READER_PID" 2> /dev/null; }

# reader_profile BINARY SECONDS NAME: BINARY profiles the workload from CPU 0
# under perf stat, into $TMP/NAME.{stat,folded,err}.
reader_profile() {
  taskset -c 0 perf stat -o "$TMP/$3.stat" "$1" profile -p "$READER_PID" -F 9999 -d "$2" \
    -o "$TMP/$3.folded" 2> "$TMP/$3.err"
}

# reader_result NAME: "cpu_s samples " of reader_profile's NAME.
reader_result() {
  awk '/seconds user/ { u = $1 } /seconds sys/ { s = $1 } END { printf("%.4f ", u + s) }' "$TMP/$1.stat"
  awk '{ n += $NF } END { printf("%d ", n + 0) }' "$TMP/$1.folded"
}

# reader_pair_run BINARY_A BINARY_B SECONDS FIRST: both profile one sqlite3
# for SECONDS at once, FIRST (a or b) started first; prints their CPU
# seconds and samples: "cpu_a samples_a cpu_b samples_b".
reader_pair_run() {
  local a=$1 b=$2 seconds=$3 first=$4
  reader_workload_start
  local -A binary=([a]=$a [b]=$b) job
  local w
  for w in $first $([[ $first == a ]] && echo b || echo a); do
    reader_profile "${binary[$w]}" "$seconds" "pair.$w" &
    job[$w]=$!
  done
  wait "${job[a]}" "${job[b]}"
  reader_workload_stop
  reader_result pair.a
  reader_result pair.b
  echo
}

# reader_run BINARY SECONDS: one session; prints "cpu_s samples".
reader_run() {
  reader_workload_start
  reader_profile "$1" "$2" reader
  reader_workload_stop
  reader_result reader
  echo
}

section_reader() {
  section_begin reader
  gsymprof_ready || { log "no gsymprof: reader section skipped"; return 0; }
  [[ $(id -u) -eq 0 ]] || { log "reader section needs root: skipped"; return 0; }
  command -v sqlite3 > /dev/null && command -v perf > /dev/null ||
    { log "reader section needs sqlite3 and perf: skipped"; return 0; }
  (($(nproc) >= 2)) || { log "reader section needs 2 CPUs: skipped"; return 0; }
  local i
  for ((i = 0; i < 40; i++)); do sed -n '3,4p' "$HERE/deep_workloads/recursive_cte.sql"; done > "$TMP/reader.sql"
  local -A bins=([gsymprof]=$GSYMPROF)
  local names=(gsymprof)
  if [[ -n $READER_BASELINE ]]; then
    if [[ -x $READER_BASELINE ]]; then bins[baseline]=$READER_BASELINE; names+=(baseline)
    else log "READER_BASELINE=$READER_BASELINE is not executable: no baseline column"; fi
  fi
  md "## The reader's CPU at 9999 Hz (issue 31.3)"
  md
  machine_line
  md
  md "\`gsymprof profile -p PID -F 9999 -d D\` of sqlite3 running a recursive CTE in a loop (pinned to CPU 1; the profiler on CPU 0),"
  md "D = $READER_SHORT and $READER_LONG s; CPU of the profiler process (user+sys, \`perf stat\`). Per extra sample: the slope between"
  md "the two durations; per session: the cost left at D = 0."
  [[ ${#names[@]} -gt 1 ]] && md "Baseline: \`$READER_BASELINE\`, alternating with this tree's build in each round."
  md "Median (min-max) of $ROUNDS rounds."
  md
  local n r
  for n in "${names[@]}"; do reader_run "${bins[$n]}" 1 > /dev/null; : > "$TMP/reader.$n"; done  # warm the caches
  for ((r = 0; r < ROUNDS; r++)); do
    for n in "${names[@]}"; do
      local short long
      short=$(reader_run "${bins[$n]}" "$READER_SHORT")
      long=$(reader_run "${bins[$n]}" "$READER_LONG")
      # cpu_short samples_short cpu_long samples_long
      echo "$short $long" >> "$TMP/reader.$n"
    done
  done
  md "| binary | samples in ${READER_LONG} s | CPU s, ${READER_SHORT} s | CPU s, ${READER_LONG} s | s per million samples (µs per sample) | s per session |"
  md "|---|---:|---:|---:|---:|---:|"
  for n in "${names[@]}"; do
    local f=$TMP/reader.$n
    md "| $n | $(awk '{ print $4 }' "$f" | spread 0) | $(awk '{ print $1 }' "$f" | spread 3) | $(awk '{ print $3 }' "$f" | spread 3) | $(awk '$4 > $2 { print 1e6 * ($3 - $1) / ($4 - $2) }' "$f" | spread 2) | $(awk '$4 > $2 { s = ($3 - $1) / ($4 - $2); print $1 - s * $2 }' "$f" | spread 3) |"
  done
  if [[ ${#names[@]} -gt 1 ]]; then
    local short_ratio long_ratio
    short_ratio=$(paste -d' ' "$TMP/reader.gsymprof" "$TMP/reader.baseline" | awk '$5 > 0 { print $1 / $5 }' | median)
    long_ratio=$(paste -d' ' "$TMP/reader.gsymprof" "$TMP/reader.baseline" | awk '$7 > 0 { print $3 / $7 }' | median)
    md
    md "gsymprof / baseline, median of the per-round ratios: ${READER_SHORT} s session $(fmt "$short_ratio" 2)x, ${READER_LONG} s session $(fmt "$long_ratio" 2)x;"
    md "per extra sample (the slopes) $(paste -d' ' "$TMP/reader.gsymprof" "$TMP/reader.baseline" |
      awk '$4 > $2 && $8 > $6 && $7 > $5 { print (($3 - $1) / ($4 - $2)) / (($7 - $5) / ($8 - $6)) }' | spread 2)x."
    [[ $READER_PAIRED == 1 ]] || { write_section reader "$SECTION_MD"; return; }
    # Paired: both at once on the same workload, the first started alternating.
    : > "$TMP/reader.pairs"
    reader_pair_run "$GSYMPROF" "$READER_BASELINE" 1 a > /dev/null  # warm the caches
    local first
    for ((r = 0; r < ROUNDS; r++)); do
      first=a; ((r % 2)) && first=b
      echo "$(reader_pair_run "$GSYMPROF" "$READER_BASELINE" "$READER_SHORT" "$first") $(reader_pair_run "$GSYMPROF" "$READER_BASELINE" "$READER_LONG" "$first")" >> "$TMP/reader.pairs"
    done
    # Columns: short (cpu_a n_a cpu_b n_b), long (cpu_a n_a cpu_b n_b).
    md
    md "Paired (the two profiling the same sqlite3 at once, both on CPU 0, $ROUNDS rounds): per extra sample"
    md "gsymprof $(awk '$6 > $2 { print 1e6 * ($5 - $1) / ($6 - $2) }' "$TMP/reader.pairs" | spread 2) µs, baseline $(awk '$8 > $4 { print 1e6 * ($7 - $3) / ($8 - $4) }' "$TMP/reader.pairs" | spread 2) µs;"
    md "per-round ratio of the slopes $(awk '$6 > $2 && $8 > $4 && $7 > $3 { print (($5 - $1) / ($6 - $2)) / (($7 - $3) / ($8 - $4)) }' "$TMP/reader.pairs" | spread 2)x, of the ${READER_LONG} s sessions' CPU $(awk '$7 > 0 { print $5 / $7 }' "$TMP/reader.pairs" | spread 2)x."
  fi
  write_section reader "$SECTION_MD"
}
