# tests/bench/sections/profile.sh - the `profile` section of tests/bench/run.sh:
# profiler overhead vs bpftrace / perf (run_gated is in common.sh).
# Sourced by run.sh after tests/bench/common.sh; defines section_profile.
# shellcheck shell=bash

section_profile() {
  section_begin profile
  corpus sqlite3 cppcheck
  set_cppcheck_workload
  [[ $(id -u) -eq 0 ]] || { log "profile section needs root: skipped"; return 0; }
  md "## Profiler overhead (issue 4)"
  md
  machine_line
  md
  md "Workload: \`speedtest1 --memdb --size $SPEEDTEST_SIZE\` (sqlite 3.40.1, -O2 -g -fno-omit-frame-pointer), held at a gate until the profiler"
  md "is attached to its pid. Slowdown = workload CPU time (user+sys, where sampling interrupts are charged) over the unprofiled run's;"
  md "wall = speedtest1's own TOTAL. bpftrace: \`profile:hz:N /pid == PID/ { @[ustack] = count(); }\`; perf: \`perf record -F N -g -p PID\`;"
  md "gsymprof: \`gsymprof profile -p PID -F N\`. Profiler CPU and peak RSS from wait4 (tests/bench/cputime.c). Medians of $ROUNDS alternating rounds."
  md
  md "| Hz | profiler | workload CPU s | slowdown (CPU) | extra CPU per sample µs | workload wall s | slowdown (wall) | profiler CPU s | profiler RSS MB |"
  md "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
  local kinds=(none gsymprof bpftrace perf) kind hz r
  local ready=()
  for kind in "${kinds[@]}"; do
    if profiler_ready "$kind"; then ready+=("$kind"); else log "profiler $kind not ready: skipped"; fi
  done
  for hz in 99 999 9999; do
    for kind in "${ready[@]}"; do : > "$TMP/ovh-$hz-$kind"; done
    for ((r = 0; r < ROUNDS; r++)); do
      for kind in "${ready[@]}"; do
        run_gated "$TMP/ovh-$hz-$kind" fp "$kind" "$hz" || log "run failed: $kind at $hz Hz"
        [[ $kind == gsymprof ]] && cp "$TMP/prof.err" "$TMP/gsymprof-$hz.err" 2>/dev/null
      done
    done
    local base_cpu base_wall
    base_cpu=$(column "$TMP/ovh-$hz-none" 1); base_wall=$(column "$TMP/ovh-$hz-none" 2)
    for kind in "${ready[@]}"; do
      local f=$TMP/ovh-$hz-$kind cpu wall pcpu prss per
      cpu=$(column "$f" 1); wall=$(column "$f" 2); pcpu=$(column "$f" 3); prss=$(column "$f" 4)
      [[ $prss != - ]] && prss=$(awk -v k="$prss" 'BEGIN { printf("%.0f", k / 1024) }')
      # samples ~= hz * unprofiled CPU seconds (one CPU busy)
      per=$(awk -v c="$cpu" -v b="$base_cpu" -v hz="$hz" 'BEGIN { if (c == "-" || b == "-" || b + 0 == 0) print "-"; else printf("%.1f", (c - b) / (hz * b) * 1e6) }')
      [[ $kind == none ]] && per="-"
      md "| $hz | ${kind/none/(none)} | $(fmt "$cpu" 3) | $(ratio "$cpu" "$base_cpu" 3) | $per | $(fmt "$wall" 3) | $(ratio "$wall" "$base_wall" 3) | $( [[ $kind == none ]] && echo - || fmt "$pcpu" 3) | $( [[ $kind == none ]] && echo - || echo "$prss") |"
    done
  done
  if [[ -f $TMP/gsymprof-999.err ]]; then
    md
    md "gsymprof's own report at 999 Hz (last round):"
    md
    md '```'
    while IFS= read -r line; do md "$line"; done < <(tail -n 12 "$TMP/gsymprof-999.err")
    md '```'
  fi

  write_section profile "$SECTION_MD"
}
