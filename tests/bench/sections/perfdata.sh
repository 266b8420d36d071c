# tests/bench/sections/perfdata.sh - the `perfdata` section of tests/bench/run.sh:
# gsymprof symbolize perf.data vs perf script --inline, one perf.data.
# Sourced by run.sh after tests/bench/common.sh; defines section_perfdata.
# shellcheck shell=bash

# One perf.data of cppcheck (perf record --call-graph dwarf, so that perf
# script has inline frames to print too) read by both tools: perf script
# --inline to /dev/null vs gsymprof symbolize (folded, inline frames) with
# the GSYM cache filled (warm) and emptied before each run (cold). Rounds
# alternate perf, cold, warm; wall-clock medians.
section_perfdata() {
  section_begin perfdata
  # Only the cppcheck binary is needed (not the testrunner the corpus adds).
  [[ -x $CPPCHECK/cppcheck && -e $CPPCHECK/cfg/std.cfg ]] || corpus cppcheck
  set_cppcheck_workload
  [[ $(id -u) -eq 0 ]] || { log "perfdata section needs root (perf record): skipped"; return 0; }
  command -v perf >/dev/null || { log "no perf: perfdata section skipped"; return 0; }
  subcommand_has --event symbolize || { log "gsymprof symbolize cannot read perf.data: skipped"; return 0; }
  local data=$TMP/cpp-dwarf.data cache=$TMP/perfdata-cache
  perf record -q -F 999 --call-graph dwarf -o "$data" -- "$CPPCHECK/cppcheck" "${CPPCHECK_WORKLOAD[@]}" >/dev/null 2>&1 ||
    die "perf record of cppcheck failed"
  local perf_samples size_mb
  perf_samples=$(perf_sample_count "$data")
  size_mb=$(awk -v b="$(stat -c %s "$data")" 'BEGIN { printf("%.1f", b / 1048576) }')
  # One run first: the cache for the warm runs, and the sample counts.
  rm -rf "$cache"
  GSYMPROF_CACHE=$cache "$GSYMPROF" symbolize "$data" -o "$TMP/perfdata.folded" 2> "$TMP/perfdata.err" ||
    die "gsymprof symbolize of the perf.data failed: $(tail -n 1 "$TMP/perfdata.err")"
  local samples stacks
  samples=$(sed -n 's/^gsymprof: \([0-9]*\) samples, .*/\1/p' "$TMP/perfdata.err")
  stacks=$(wc -l < "$TMP/perfdata.folded")
  : > "$TMP/pd.perf"; : > "$TMP/pd.cold"; : > "$TMP/pd.warm"
  local r perf_rounds=${PERF_INLINE_ROUNDS:-3}
  for ((r = 0; r < ROUNDS; r++)); do
    # perf script --inline takes minutes here (addr2line per address): fewer rounds.
    if ((r < perf_rounds)); then
      measure "$TMP/pd.perf" perf script -i "$data" --inline > /dev/null 2>&1
    fi
    rm -rf "$cache"
    GSYMPROF_CACHE=$cache measure "$TMP/pd.cold" "$GSYMPROF" symbolize "$data" > /dev/null 2>&1
    GSYMPROF_CACHE=$cache measure "$TMP/pd.warm" "$GSYMPROF" symbolize "$data" > /dev/null 2>&1
  done
  local perf_s cold warm perf_rss warm_rss cold_rss perf_cpu cold_cpu warm_cpu
  perf_s=$(column "$TMP/pd.perf" 1); cold=$(column "$TMP/pd.cold" 1); warm=$(column "$TMP/pd.warm" 1)
  perf_cpu=$(column "$TMP/pd.perf" 2); cold_cpu=$(column "$TMP/pd.cold" 2); warm_cpu=$(column "$TMP/pd.warm" 2)
  perf_rss=$(column "$TMP/pd.perf" 3); cold_rss=$(column "$TMP/pd.cold" 3); warm_rss=$(column "$TMP/pd.warm" 3)
  md "## perf.data: gsymprof symbolize vs perf script --inline (issue 14)"
  md
  machine_line
  md
  md "One perf.data: \`perf record -F 999 --call-graph dwarf\` of \`cppcheck --quiet\` on check64bit.cpp and checkstring.cpp ($size_mb MB, $perf_samples samples)."
  md "perf: \`perf script -i FILE --inline > /dev/null\` (perf unwinds the stack copies, then addr2line names inline frames)."
  md "gsymprof: \`gsymprof symbolize FILE > /dev/null\` (CFI unwinding, folded stacks with inline frames); cold = empty GSYM cache before each run"
  md "(every module converted from its DWARF), warm = cache filled. Wall seconds, CPU seconds (user + system of the process and the children it"
  md "waited for) and peak RSS: medians of $(wc -l < "$TMP/pd.perf") perf and $(wc -l < "$TMP/pd.warm") gsymprof runs, alternating. perf's dwarf stack copies are"
  md "8 KiB: both tools stop where a copy ends (gsymprof's summary counts those stacks as truncated, unwind_stack_copy_too_small)."
  md "perf's CPU (in parentheses) is perf's alone: the addr2line processes doing its inline work (busy most of the run) are not"
  md "children it waits for, so their CPU is not counted; compare wall times."
  md
  md "| tool | samples | folded lines | wall s | CPU s | peak RSS MB | perf / this (wall) |"
  md "|---|---:|---:|---:|---:|---:|---:|"
  md "| perf script --inline | $perf_samples | - | $(fmt "$perf_s" 2) | ($(fmt "$perf_cpu" 2)) | $(fmt "$(ratio "$perf_rss" 1024 1)" 0) | 1x |"
  md "| gsymprof symbolize, cold | $samples | $stacks | $(fmt "$cold" 2) | $(fmt "$cold_cpu" 2) | $(fmt "$(ratio "$cold_rss" 1024 1)" 0) | $(ratio "$perf_s" "$cold" 1)x |"
  md "| gsymprof symbolize, warm | $samples | $stacks | $(fmt "$warm" 3) | $(fmt "$warm_cpu" 2) | $(fmt "$(ratio "$warm_rss" 1024 1)" 0) | $(ratio "$perf_s" "$warm" 0)x |"
  write_section perfdata "$SECTION_MD"
}
