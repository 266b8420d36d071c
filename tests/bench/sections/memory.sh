# tests/bench/sections/memory.sh - the `memory` section of tests/bench/run.sh:
# peak RSS per unique stack (unique_stacks.c) vs perf / bpftrace.
# Sourced by run.sh after tests/bench/common.sh; defines section_memory.
# shellcheck shell=bash

# memory_run KIND SECONDS OUT: profiles unique_stacks for SECONDS at 999 Hz;
# appends "maxrss_kb unique_stacks" to OUT (unique stacks: gsymprof's count;
# bpftrace's @ map entries; perf keeps every sample, so its count is the
# samples in perf.data).
memory_run() {
  local kind=$1 seconds=$2 out=$3 gen=$TMP/unique_stacks
  case $kind in
    gsymprof)
      "$CPUTIME" -f '%M' -o "$TMP/mem.time" "$GSYMPROF" profile -v -F 999 -o "$TMP/mem.folded" \
        -- "$gen" "$seconds" 2> "$TMP/mem.err" || return 1
      echo "$(cat "$TMP/mem.time") $(sed -n 's/.* \([0-9]*\) unique stacks.*/\1/p' "$TMP/mem.err")" >> "$out" ;;
    perf-dwarf)
      "$CPUTIME" -f '%M' -o "$TMP/mem.time" perf record -q --call-graph dwarf -F 999 -o "$TMP/mem.data" \
        -- "$gen" "$seconds" 2> "$TMP/mem.err" > /dev/null || return 1
      echo "$(cat "$TMP/mem.time") $(perf report -i "$TMP/mem.data" --stats 2>/dev/null |
        awk '/SAMPLE events:/ { print $3; exit }')" >> "$out" ;;
    bpftrace)
      "$CPUTIME" -f '%M' -o "$TMP/mem.time" bpftrace -c "$gen $seconds" \
        -e 'profile:hz:999 /pid == cpid/ { @[ustack] = count(); }' > "$TMP/mem.out" 2> "$TMP/mem.err" || return 1
      echo "$(cat "$TMP/mem.time") $(grep -c '^@\[' "$TMP/mem.out")" >> "$out" ;;
  esac
}

# memory_system KIND SECONDS OUT: a system-wide profile of SECONDS at 999 Hz
# while this tree builds (make -j2 into a scratch build dir); appends
# "maxrss_kb unique_stacks_or_samples dropped" to OUT.
memory_system() {
  local kind=$1 seconds=$2 out=$3 tree=$TMP/tree-build
  rm -rf "$tree"
  setsid make -C "$ROOT" -j2 BUILD="$tree" all > /dev/null 2>&1 &
  local build=$!
  sleep 2
  case $kind in
    gsymprof)
      "$CPUTIME" -f '%M' -o "$TMP/mem.time" "$GSYMPROF" profile -v -F 999 -d "$seconds" -o "$TMP/mem.folded" \
        2> "$TMP/mem.err"
      echo "$(cat "$TMP/mem.time") $(sed -n 's/.* \([0-9]*\) unique stacks.*/\1/p' "$TMP/mem.err")" \
        "$(sed -n 's/.*ringbuf_full \([0-9]*\).*/\1/p' "$TMP/mem.err")" >> "$out" ;;
    perf-dwarf)
      "$CPUTIME" -f '%M' -o "$TMP/mem.time" perf record -q -a --call-graph dwarf -F 999 -o "$TMP/mem.data" \
        -- sleep "$seconds" 2> "$TMP/mem.err" > /dev/null
      echo "$(cat "$TMP/mem.time") $(perf report -i "$TMP/mem.data" --stats 2>/dev/null |
        awk '/SAMPLE events:/ { print $3; exit }') $(perf report -i "$TMP/mem.data" --stats 2>/dev/null |
        awk '/LOST events:/ { print $3; exit }')" >> "$out" ;;
    bpftrace)
      "$CPUTIME" -f '%M' -o "$TMP/mem.time" timeout -s INT "$seconds" bpftrace \
        -e 'profile:hz:999 { @[comm, kstack, ustack] = count(); }' > "$TMP/mem.out" 2> "$TMP/mem.err"
      echo "$(cat "$TMP/mem.time") $(grep -c '^@\[' "$TMP/mem.out") -" >> "$out" ;;
  esac
  kill -- -"$build" 2> /dev/null
  wait "$build" 2> /dev/null
  rm -rf "$tree"
}

section_memory() {
  section_begin memory
  [[ $(id -u) -eq 0 ]] || { log "memory section needs root: skipped"; return 0; }
  cc -O2 -g -o "$TMP/unique_stacks" "$HERE/unique_stacks.c" || die "cannot build unique_stacks"
  local short=${MEMORY_SHORT_S:-10} long=${MEMORY_LONG_S:-40} kind r kinds=()
  for kind in gsymprof perf-dwarf bpftrace; do
    profiler_ready "$kind" && kinds+=("$kind") || log "profiler $kind not ready: skipped"
  done
  md "## Memory per unique stack (issue 11)"
  md
  machine_line
  md
  md "\`tests/bench/unique_stacks.c\` (a random walk through 64 functions, 8-31 calls deep: nearly every sample is a new stack) profiled at 999 Hz for ${short} s and ${long} s."
  md "KB per unique stack = (peak RSS after ${long} s - after ${short} s) / (unique stacks after ${long} s - after ${short} s): the slope, the profiler's fixed base removed."
  md "Medians of $ROUNDS alternating rounds (GSYM cache warm for gsymprof)."
  md
  md "| profiler | peak RSS ${short} s (MB) | peak RSS ${long} s (MB) | unique stacks ${short} s | unique stacks ${long} s | KB per unique stack |"
  md "|---|---:|---:|---:|---:|---:|"
  for kind in "${kinds[@]}"; do : > "$TMP/mem-$kind-short"; : > "$TMP/mem-$kind-long"; done
  [[ " ${kinds[*]} " == *" gsymprof "* ]] && memory_run gsymprof 1 "$TMP/mem-warmup"  # converts the GSYMs once
  for ((r = 0; r < ROUNDS; r++)); do
    for kind in "${kinds[@]}"; do
      memory_run "$kind" "$short" "$TMP/mem-$kind-short" || log "run failed: $kind ${short} s"
      memory_run "$kind" "$long" "$TMP/mem-$kind-long" || log "run failed: $kind ${long} s"
    done
  done
  for kind in "${kinds[@]}"; do
    local rss_s rss_l n_s n_l per
    rss_s=$(column "$TMP/mem-$kind-short" 1); rss_l=$(column "$TMP/mem-$kind-long" 1)
    n_s=$(column "$TMP/mem-$kind-short" 2); n_l=$(column "$TMP/mem-$kind-long" 2)
    per=$(awk -v a="$rss_s" -v b="$rss_l" -v m="$n_s" -v n="$n_l" 'BEGIN {
      if (a == "-" || b == "-" || m == "-" || n == "-" || n - m <= 0) print "-"; else printf("%.2f\n", (b - a) / (n - m)) }')
    md "| $kind | $(fmt "$(awk -v k="$rss_s" 'BEGIN { print (k == "-") ? "-" : k / 1024 }')" 1) | $(fmt "$(awk -v k="$rss_l" 'BEGIN { print (k == "-") ? "-" : k / 1024 }')" 1) | $(fmt "$n_s" 0) | $(fmt "$n_l" 0) | $per |"
    [[ $kind == gsymprof && $per != - ]] && awk -v p="$per" 'BEGIN { exit !(p > 2) }' &&
      log "gsymprof: $per KB per unique stack is above the 2 KB bound (issue 11)"
  done
  md
  md "perf keeps every sample (in perf.data, not in memory): its count is the samples; bpftrace's is its \`@[ustack]\` entries."
  local system_s=${MEMORY_SYSTEM_S:-60}
  if [[ $system_s != 0 ]]; then
    md
    md "System-wide, ${system_s} s at 999 Hz while this tree builds (\`make -j2\`, C++ compiles), one run each (medians of $ROUNDS):"
    md
    md "| profiler | peak RSS (MB) | unique stacks (perf: samples) | KB per unique stack, whole RSS | dropped |"
    md "|---|---:|---:|---:|---:|"
    for kind in "${kinds[@]}"; do : > "$TMP/memsys-$kind"; done
    for ((r = 0; r < ROUNDS; r++)); do
      for kind in "${kinds[@]}"; do memory_system "$kind" "$system_s" "$TMP/memsys-$kind"; done
    done
    for kind in "${kinds[@]}"; do
      local rss n dropped
      rss=$(column "$TMP/memsys-$kind" 1); n=$(column "$TMP/memsys-$kind" 2); dropped=$(column "$TMP/memsys-$kind" 3)
      md "| $kind | $(fmt "$(awk -v k="$rss" 'BEGIN { print (k == "-") ? "-" : k / 1024 }')" 1) | $(fmt "$n" 0) | $(awk -v k="$rss" -v n="$n" 'BEGIN { if (k == "-" || n == "-" || n == 0) print "-"; else printf("%.2f\n", k / n) }') | $dropped |"
    done
  fi
  write_section memory "$SECTION_MD"
}
