# tests/bench/sections/tail.sh - the `tail` section of tests/bench/run.sh:
# seconds from the end of sampling to the output, cold and warm, vs perf.
# Sourced by run.sh after tests/bench/common.sh; defines section_tail.
# shellcheck shell=bash

# tail_run KIND CACHE OUT: profiles a clang++ -O2 compile of a small C++17
# file; appends the seconds from the compile's end to the profile's output
# (gsymprof: its exit; perf: the end of `perf script` after `perf record`).
tail_run() {
  local kind=$1 cache=$2 out=$3 end=$TMP/tail.end
  local workload="clang++ -O2 -std=c++17 -c '$TMP/tail.cpp' -o /dev/null; date +%s.%N > '$end'"
  rm -f "$end"
  case $kind in
    gsymprof)
      GSYMPROF_CACHE=$cache "$GSYMPROF" profile -F 999 -o "$TMP/tail.folded" -- sh -c "$workload" 2> "$TMP/tail.err" || return 1 ;;
    perf-dwarf)
      perf record -q --call-graph dwarf -F 999 -o "$TMP/tail.data" -- sh -c "$workload" 2> /dev/null > /dev/null || return 1
      timeout 600 perf script -i "$TMP/tail.data" > /dev/null 2>&1 || return 1 ;;
  esac
  echo "$(date +%s.%N) $(cat "$end")" | awk '{ printf("%.2f\n", $1 - $2) }' >> "$out"
}

section_tail() {
  section_begin tail
  [[ $(id -u) -eq 0 ]] || { log "tail section needs root: skipped"; return 0; }
  command -v clang++ > /dev/null || { log "no clang++ (Debian clang): tail section skipped"; return 0; }
  cat > "$TMP/tail.cpp" <<'CPP'
#include <algorithm>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>
struct Item { std::string name; int value; };
int main() {
  std::vector<Item> items;
  for (int i = 0; i < 100; ++i) items.push_back({std::to_string(i), i});
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.name < b.name; });
  std::map<std::string, int> m;
  for (auto& it : items) m[it.name] = it.value;
  std::regex r("[0-9]+");
  std::ostringstream out;
  for (auto& [k, v] : m) if (std::regex_match(k, r)) out << k << v;
  std::cout << out.str().size() << "\n";
}
CPP
  md "## From the end of sampling to the output (issue 11)"
  md
  machine_line
  md
  md "\`clang++ -O2 -std=c++17 -c\` of a small file using the standard library (Debian clang: clang, libclang-cpp, libLLVM), profiled at 999 Hz; seconds from the compile's end to the output."
  md "gsymprof cold: an empty GSYM cache (every module converted, from the start of sampling on, in the background); warm: the cache filled. perf: \`perf record --call-graph dwarf\`, then \`perf script\`."
  md "Medians of $ROUNDS alternating rounds (perf: ${TAIL_PERF_ROUNDS:-1} of them, its minutes dwarf the spread)."
  md
  local kinds=(gsymprof-cold gsymprof-warm) kind r
  profiler_ready perf-dwarf && kinds+=(perf-dwarf)
  for kind in "${kinds[@]}"; do : > "$TMP/tail-$kind"; done
  for ((r = 0; r < ROUNDS; r++)); do
    rm -rf "$TMP/tail-cache"; mkdir -m 700 "$TMP/tail-cache"
    tail_run gsymprof "$TMP/tail-cache" "$TMP/tail-gsymprof-cold" || log "run failed: gsymprof cold"
    tail_run gsymprof "$TMP/tail-cache" "$TMP/tail-gsymprof-warm" || log "run failed: gsymprof warm"
    # perf script takes minutes here (513 s once): TAIL_PERF_ROUNDS of it.
    [[ " ${kinds[*]} " == *" perf-dwarf "* ]] && ((r < ${TAIL_PERF_ROUNDS:-1})) &&
      { tail_run perf-dwarf - "$TMP/tail-perf-dwarf" || log "run failed: perf"; }
  done
  md "| profiler | seconds to output (median) | min | max |"
  md "|---|---:|---:|---:|"
  for kind in "${kinds[@]}"; do
    md "| $kind | $(median < "$TMP/tail-$kind") | $(sort -g "$TMP/tail-$kind" | head -1) | $(sort -g "$TMP/tail-$kind" | tail -1) |"
  done
  write_section tail "$SECTION_MD"
}
