# tests/bench/sections/bystanders.sh - the `bystanders` section of
# tests/bench/run.sh (issue 31): what profiling one process costs the rest of
# the machine. fixed_work.c (BYSTANDER_WORK iterations, timed inside) runs
# on CPU 0 alone, and while a profiler samples another process at
# BYSTANDER_RATE Hz: `gsymprof profile -p PID`, `perf record -p PID`, and
# with BYSTANDER_BASELINE=PATH another gsymprof build (e.g. one that sampled
# -p targets with an event per CPU). The profiled process sleeps throughout
# (`sleep`), so every cost the bystander sees is the profiler's sampling
# timer on its CPU, not the reader's work. Conditions alternate in each
# round; median (min-max) of ROUNDS; the ratio is to *alone*, median of the
# per-round ratios.
# Sourced by run.sh after tests/bench/common.sh; defines section_bystanders.
# shellcheck shell=bash

BYSTANDER_WORK=${BYSTANDER_WORK:-2000000000}
BYSTANDER_RATE=${BYSTANDER_RATE:-9999}
BYSTANDER_BASELINE=${BYSTANDER_BASELINE:-}

# bystanders_start KIND TARGET: profiler KIND (none | gsymprof | baseline |
# perf) of pid TARGET, attached; sets BY_PROF to its pid.
bystanders_start() {
  BY_PROF=""
  case $1 in
    none) return 0 ;;
    gsymprof) "$GSYMPROF" profile -F "$BYSTANDER_RATE" -p "$2" -o "$TMP/by.folded" 2>"$TMP/by.err" & BY_PROF=$! ;;
    baseline) "$BYSTANDER_BASELINE" profile -F "$BYSTANDER_RATE" -p "$2" -o "$TMP/by.folded" 2>"$TMP/by.err" & BY_PROF=$! ;;
    perf) perf record -q -F "$BYSTANDER_RATE" -p "$2" -o "$TMP/by.perf.data" 2>"$TMP/by.err" & BY_PROF=$! ;;
  esac
  wait_attached "$1" "$BY_PROF" "$TMP/by.err"
}

bystanders_stop() { stop_profiler "$BY_PROF" "$TMP/by.perf.data" "$TMP/by.folded"; }

section_bystanders() {
  section_begin bystanders
  mkdir -p "$BIN"
  cc -O2 -o "$BIN/fixed_work" "$HERE/fixed_work.c" || die "cannot build fixed_work"
  local kinds=(none)
  gsymprof_ready && kinds+=(gsymprof)
  [[ -n $BYSTANDER_BASELINE ]] && kinds+=(baseline)
  if command -v perf >/dev/null; then kinds+=(perf); else log "perf not installed: its row skipped"; fi
  sleep 100000 &
  local target=$!
  md "## What profiling one process costs the others (issue 31)"
  md
  machine_line
  md
  md "A fixed loop ($BYSTANDER_WORK iterations, wall time) on CPU 0, alone and while a profiler samples a sleeping process at $BYSTANDER_RATE Hz."
  md "Conditions alternate in each round; median (min-max) of $ROUNDS rounds; the ratio is to *alone*, median of the per-round ratios."
  md
  local k r
  for k in "${kinds[@]}"; do : > "$TMP/by.$k"; done
  for ((r = 0; r < ROUNDS; r++)); do
    for k in "${kinds[@]}"; do
      bystanders_start "$k" "$target" || continue
      taskset -c 0 "$BIN/fixed_work" "$BYSTANDER_WORK" | awk '{ printf("%.3f\n", $1 / 1e9) }' >> "$TMP/by.$k"
      bystanders_stop
    done
  done
  kill "$target" 2>/dev/null
  declare -A label=([none]="alone" [gsymprof]="\`gsymprof profile -p PID\`"
                    [baseline]="\`gsymprof profile -p PID\`, $BYSTANDER_BASELINE" [perf]="\`perf record -p PID\`")
  md "| condition | loop s | x alone |"
  md "|---|---:|---:|"
  for k in "${kinds[@]}"; do
    local ratio_alone
    ratio_alone=$(paste -d' ' "$TMP/by.$k" "$TMP/by.none" | awk '$2 > 0 { print $1 / $2 }' | median)
    md "| ${label[$k]} | $(spread 3 < "$TMP/by.$k") | $(fmt "$ratio_alone" 3) |"
  done
  write_section bystanders "$SECTION_MD"
}
