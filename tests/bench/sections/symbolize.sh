# tests/bench/sections/symbolize.sh - the `symbolize` section of tests/bench/run.sh:
# symbolizing a cppcheck profile (cold/warm) vs perf script.
# Sourced by run.sh after tests/bench/common.sh; defines section_symbolize.
# shellcheck shell=bash

# Symbolization of a cppcheck profile: gsymprof record + symbolize (cold:
# empty cache, GSYMs converted; warm: cached) vs perf script on a perf
# profile of the same workload.
section_symbolize() {
  section_begin symbolize
  corpus cppcheck
  set_cppcheck_workload
  [[ $(id -u) -eq 0 ]] || { log "symbolize section needs root: skipped"; return 0; }
  md "## Symbolization: cppcheck profile (issue 4; 999 Hz, -O2 -g -fno-omit-frame-pointer)"
  md
  machine_line
  md
  md "Workload: \`cppcheck --quiet\` on check64bit.cpp and checkstring.cpp of its own sources."
  md "gsymprof: time of \`gsymprof symbolize CAPTURE\` (folded, inline frames) after \`gsymprof record\`; cold = empty GSYM cache (every module converted), warm = cache filled."
  md "perf: \`perf script\` on \`perf record -F 999\` of the same workload: with \`-g\` perf prints no inline frames at all, so the inline row uses"
  md "\`--call-graph dwarf\` (perf then runs addr2line for inlines, as in field-notes.md). Wall seconds, medians."
  md
  md "| tool | samples | unique stacks | cold s | warm s | that / ours (warm) |"
  md "|---|---:|---:|---:|---:|---:|"
  local perf_inline="-" perf_plain="-" perf_fp="-" perf_samples="-" perf_fp_samples="-"
  if command -v perf >/dev/null; then
    perf record -q -F 999 -g -o "$TMP/cpp-perf.data" -- "$CPPCHECK/cppcheck" "${CPPCHECK_WORKLOAD[@]}" >/dev/null 2>&1
    perf record -q -F 999 --call-graph dwarf -o "$TMP/cpp-perf-dwarf.data" -- "$CPPCHECK/cppcheck" "${CPPCHECK_WORKLOAD[@]}" >/dev/null 2>&1
    perf_fp_samples=$(perf_sample_count "$TMP/cpp-perf.data")
    perf_samples=$(perf_sample_count "$TMP/cpp-perf-dwarf.data")
    : > "$TMP/ps.fp"; : > "$TMP/ps.plain"; : > "$TMP/ps.inline"
    local r
    for ((r = 0; r < ROUNDS; r++)); do
      measure "$TMP/ps.fp" perf script -i "$TMP/cpp-perf.data" --no-inline > /dev/null 2>&1
      measure "$TMP/ps.plain" perf script -i "$TMP/cpp-perf-dwarf.data" --no-inline > /dev/null 2>&1
    done
    # --inline spawns addr2line per address (tens of seconds): few rounds.
    for ((r = 0; r < (ROUNDS < 2 ? ROUNDS : 2); r++)); do
      measure "$TMP/ps.inline" perf script -i "$TMP/cpp-perf-dwarf.data" --inline > /dev/null 2>&1
    done
    perf_fp=$(column "$TMP/ps.fp" 1); perf_plain=$(column "$TMP/ps.plain" 1); perf_inline=$(column "$TMP/ps.inline" 1)
  fi
  local cold="-" warm="-" samples="-" stacks="-"
  if subcommand_works record && subcommand_works symbolize; then
    local cache=$TMP/gsym-cache
    if "$GSYMPROF" record -F 999 -o "$TMP/cpp.capture" -- "$CPPCHECK/cppcheck" "${CPPCHECK_WORKLOAD[@]}" >/dev/null 2>"$TMP/record.err"; then
      : > "$TMP/sym.cold"; : > "$TMP/sym.warm"
      local r
      for ((r = 0; r < ROUNDS; r++)); do
        rm -rf "$cache"
        GSYMPROF_CACHE=$cache measure "$TMP/sym.cold" "$GSYMPROF" symbolize "$TMP/cpp.capture" -o "$TMP/cpp.folded" 2>/dev/null
        GSYMPROF_CACHE=$cache measure "$TMP/sym.warm" "$GSYMPROF" symbolize "$TMP/cpp.capture" -o "$TMP/cpp.folded" 2>/dev/null
      done
      cold=$(column "$TMP/sym.cold" 1); warm=$(column "$TMP/sym.warm" 1)
      samples=$(awk '{ n += $NF } END { print n + 0 }' "$TMP/cpp.folded" 2>/dev/null)
      stacks=$(wc -l < "$TMP/cpp.folded" 2>/dev/null)
    else
      log "gsymprof record failed: $(tail -n 1 "$TMP/record.err")"
    fi
  else
    log "gsymprof record/symbolize not ready: symbolization row skipped"
  fi
  md "| gsymprof symbolize (inline) | $samples | $stacks | $(fmt "$cold" 3) | $(fmt "$warm" 3) | |"
  md "| perf script --inline (dwarf) | $perf_samples | - | - | $(fmt "$perf_inline" 3) | $(ratio "$perf_inline" "$warm" 1)x |"
  md "| perf script --no-inline (dwarf) | $perf_samples | - | - | $(fmt "$perf_plain" 3) | $(ratio "$perf_plain" "$warm" 1)x |"
  md "| perf script (-g, no inline frames) | $perf_fp_samples | - | - | $(fmt "$perf_fp" 3) | $(ratio "$perf_fp" "$warm" 1)x |"
  write_section symbolize "$SECTION_MD"
}
