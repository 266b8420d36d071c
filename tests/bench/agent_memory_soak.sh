#!/bin/bash
# tests/bench/agent_memory_soak.sh GSYMPROF DIR MINUTES: the agent's memory
# on a busy host (tests/bench/README.md, the agent). `GSYMPROF agent` on the
# whole host at 19 Hz (--listen, --output-dir, its own GSYM cache in DIR)
# for MINUTES, VmHWM / VmRSS / RssAnon / RssFile (kB) and CPU ticks every
# 10 s in DIR/rss, while every minute a fresh -g C++ program (a new build
# ID: a constant from the clock) is built and run for 3 s, so there is a
# new binary to convert, and a short-lived process starts every 100 ms.
# Run several side by side (one DIR each) to compare binaries under the
# same load; AGENT_SOAK_LOAD=0 leaves the load to the first.
# Ends with DIR/summary: median, max and 10/20/30-minute VmRSS, peak, CPU.
set -u
bin=$1 dir=$2 minutes=$3
rm -rf "$dir" && mkdir -p "$dir/cache" "$dir/pprof" "$dir/load" && chmod 700 "$dir/cache" || exit 1
load=()
if [[ ${AGENT_SOAK_LOAD:-1} != 0 ]]; then
  (while :; do sleep 0.1; done) & load+=($!)
  (n=0
   while :; do
     n=$((n + 1))
     cat > "$dir/load/fresh.cpp" <<CPP
#include <chrono>
#include <iostream>
#include <map>
#include <regex>
#include <string>
static const long kStamp = $(date +%s%N);
__attribute__((noinline)) long churn_map(int rounds) {
  std::map<std::string, long> counts;
  for (int i = 0; i < rounds; ++i) counts[std::to_string(i % 997)] += i;
  long sum = kStamp & 1;
  for (auto& [key, value] : counts) sum += value + static_cast<long>(key.size());
  return sum;
}
__attribute__((noinline)) long match_regex(int rounds) {
  std::regex pattern("([a-z]+)-([0-9]+)");
  long hits = 0;
  for (int i = 0; i < rounds; ++i) hits += std::regex_match("abc-" + std::to_string(i), pattern);
  return hits;
}
int main() {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  long total = 0;
  while (std::chrono::steady_clock::now() < until) total += churn_map(20000) + match_regex(2000);
  std::cout << total << "\n";
}
CPP
     nice g++ -std=c++20 -g -O1 -o "$dir/load/fresh-$n" "$dir/load/fresh.cpp" && "$dir/load/fresh-$n" > /dev/null
     rm -f "$dir/load/fresh-$((n - 2))"
     sleep 50
   done) > /dev/null 2>&1 & load+=($!)
fi
GSYMPROF_CACHE=$dir/cache "$bin" agent -F 19 --listen 127.0.0.1:0 --output-dir "$dir/pprof" > "$dir/out" 2> "$dir/err" &
agent=$!
s=0
: > "$dir/rss"
while ((s < minutes * 60)) && kill -0 $agent 2>/dev/null; do
  sleep 10; s=$((s + 10))
  echo "$s $(awk '$1 == "VmHWM:" || $1 == "VmRSS:" || $1 == "RssAnon:" || $1 == "RssFile:" { printf(" %s", $2) }' /proc/$agent/status) $(awk '{ print $14 + $15 }' /proc/$agent/stat)" >> "$dir/rss"
done
kill -TERM $agent; wait $agent
((${#load[@]})) && { kill "${load[@]}"; wait "${load[@]}" 2>/dev/null; }
median=$(awk 'NF >= 6 { print $3 }' "$dir/rss" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
awk -v median="$median" -v hz="$(getconf CLK_TCK)" 'NF >= 6 { if ($3 > max) max = $3; hwm = $2; t = $1; c = $6
    if ($1 == 60) c1 = $6; if ($1 == 600) a10 = $3; if ($1 == 1200) a20 = $3; if ($1 == 1800) a30 = $3 }
  END { printf("VmRSS MB over %d s: median %.1f, max %.1f, at 10/20/30 min %.1f / %.1f / %.1f; VmHWM %.1f; CPU %.2f s/min from minute 1\n",
    t, median / 1024, max / 1024, a10 / 1024, a20 / 1024, a30 / 1024, hwm / 1024, (c - c1) / hz / ((t - 60) / 60)) }' "$dir/rss" | tee "$dir/summary"
