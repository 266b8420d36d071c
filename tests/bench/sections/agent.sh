# tests/bench/sections/agent.sh - the `agent` section of tests/bench/run.sh
# (issue 27): what `gsymprof agent` (continuous, whole host) costs while both
# CPUs are busy, at 19 and 99 Hz, side by side with the OpenTelemetry eBPF
# profiler (go.opentelemetry.io/ebpf-profiler, built by
# tests/bench/build-ebpf-profiler.sh, exporting to the test Collector of
# tests/support/otelcol), and its memory over a soak.
# Sourced by run.sh after tests/bench/common.sh; defines section_agent.
#
# Environment:
#   AGENT_HZ            rates measured (default "19 99")
#   AGENT_RUN_SECONDS   workload seconds per run (default 60)
#   AGENT_SOAK_MINUTES  the soak at 19 Hz, RSS every 10 s (default 5; 60 for
#                       the issue's hour-long soak, not for CI)
#   AGENT_PEERS         peers beside gsymprof (default: otel; perf and
#                       bpftrace too when the OTel profiler cannot run here)
#
# Workload: `stress-ng --cpu 1` (Debian's, stripped: the usual case of a
# package without debug info) and agent_burn.c (built here -O2 -g without
# frame pointers: a program whose debug info is on the host), one per CPU,
# for AGENT_RUN_SECONDS. Each run: the profiler started, ready (attached and
# settled), then the workload; CPU = the profiler's utime+stime (+ waited-for
# children) from /proc/PID/stat over the workload's run, plus its BPF
# programs' run_time_ns (kernel.bpf_stats_enabled=1 for the section,
# restored after; programs found through the process's bpf-prog / bpf_link
# fds, their times read with `bpftool prog show`), both per minute.
# shellcheck shell=bash

AGENT_HZ=${AGENT_HZ:-"19 99"}
AGENT_RUN_SECONDS=${AGENT_RUN_SECONDS:-60}
AGENT_SOAK_MINUTES=${AGENT_SOAK_MINUTES:-5}
AGENT_PEERS=${AGENT_PEERS:-}
AGENT_OTEL_BIN="" AGENT_OTEL_LABEL="" AGENT_OTEL_WHY=""
AGENT_TRACEFS_MOUNTED="" AGENT_BPF_STATS_WAS=""
GO_BIN=${GO_BIN:-/usr/local/go/bin/go}

# The second workload: three noinline levels of integer mixing, iterations
# per second printed at the end.
agent_burn_source() {
  cat > "$TMP/agent_burn.c" <<'EOF'
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
__attribute__((noinline)) static uint64_t burn_mix(uint64_t x) {
  for (int i = 0; i < 64; i++) { x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 29; }
  return x;
}
__attribute__((noinline)) static uint64_t burn_inner(uint64_t x) { for (int i = 0; i < 16; i++) x = burn_mix(x + i); return x; }
__attribute__((noinline)) static uint64_t burn_outer(uint64_t x) { for (int i = 0; i < 16; i++) x = burn_inner(x ^ i); return x; }
int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 10, t0 = now(), t;
  uint64_t x = 1, n = 0;
  while ((t = now()) - t0 < seconds) { x = burn_outer(x); n++; }
  printf("%.1f iterations/s %llu\n", n / (t - t0), (unsigned long long)(x & 1));
  return 0;
}
EOF
  gcc -O2 -g -fomit-frame-pointer "$TMP/agent_burn.c" -o "$TMP/agent_burn"
}

# agent_cpu_ticks PID: utime+stime+cutime+cstime (clock ticks).
agent_cpu_ticks() {
  awk '{ sub(/^.*\) /, ""); print $12 + $13 + $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}
agent_rss_kb() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# agent_bpf_ns PID: the summed run_time_ns of the BPF programs PID holds
# (bpf-prog fds, and the programs of its bpf_link fds), per bpftool.
agent_bpf_ns() {
  local pid=$1 fd ids=()
  for fd in /proc/"$pid"/fd/*; do
    case $(readlink "$fd" 2>/dev/null) in
      anon_inode:bpf-prog | anon_inode:bpf_link | anon_inode:bpf-link)
        ids+=("$(awk '$1 == "prog_id:" { print $2 }' "/proc/$pid/fdinfo/${fd##*/}" 2>/dev/null)") ;;
    esac
  done
  bpftool prog show --json 2>/dev/null | python3 -c '
import json, sys
want = set(int(i) for i in sys.argv[1:] if i)
print(sum(p.get("run_time_ns", 0) for p in json.load(sys.stdin) if p.get("id") in want))' "${ids[@]}" 2>/dev/null || echo 0
}

# The OTel profiler: stock first; when the stock binary cannot start here,
# say exactly why, then the variant that only tolerates the EPERM of its
# memlock raise (build-ebpf-profiler.sh --memlock-eperm). Sets
# AGENT_OTEL_BIN and AGENT_OTEL_LABEL, or AGENT_OTEL_WHY.
agent_otel_probe_one() {
  local bin=$1 log=$TMP/otel-probe.log n=0
  "$bin" -collection-agent "$OTELCOL_GRPC" -disable-tls -samples-per-second 19 > "$log" 2>&1 &
  local pid=$!
  while ((n < 300)) && kill -0 "$pid" 2>/dev/null; do
    grep -q 'Attached sched monitor' "$log" && break
    sleep 0.1; ((n++))
  done
  if kill -0 "$pid" 2>/dev/null && grep -q 'Attached sched monitor' "$log"; then
    kill -TERM "$pid"; wait "$pid" 2>/dev/null; return 0
  fi
  kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  AGENT_OTEL_WHY=$(grep -m 1 -E 'level=(ERROR|FATAL)' "$log" | sed 's/.*msg="//; s/"$//; s/\\"/"/g')
  [[ -n $AGENT_OTEL_WHY ]] || AGENT_OTEL_WHY="did not attach within 30 s: $(tail -n 1 "$log")"
  return 1
}

agent_otel_ready() {
  local bin version why_stock
  version=$("$HERE/build-ebpf-profiler.sh" --version)
  bin=$("$HERE/build-ebpf-profiler.sh" 2> "$TMP/otel-build.err") ||
    { AGENT_OTEL_WHY="cannot build go.opentelemetry.io/ebpf-profiler $version: $(tail -n 2 "$TMP/otel-build.err" | tr '\n' ' ')"; return 1; }
  # It attaches to sched:sched_process_free through tracefs.
  if [[ ! -e /sys/kernel/tracing/events/sched ]]; then
    if mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null; then
      AGENT_TRACEFS_MOUNTED=1
      log "mounted tracefs on /sys/kernel/tracing for the OTel profiler (unmounted at the end of the section)"
    fi
  fi
  if agent_otel_probe_one "$bin"; then
    AGENT_OTEL_BIN=$bin AGENT_OTEL_LABEL="OTel eBPF profiler $version"
    return 0
  fi
  why_stock=$AGENT_OTEL_WHY
  log "the OTel eBPF profiler $version does not start here: $why_stock"
  if [[ $why_stock == *"rlimit"*"operation not permitted"* ]]; then
    why_stock="$why_stock (it raises RLIMIT_MEMLOCK to infinity before loading its programs; root here lacks CAP_SYS_RESOURCE, hard limit $(ulimit -Hl) KiB)"
    bin=$("$HERE/build-ebpf-profiler.sh" --memlock-eperm 2> "$TMP/otel-build.err") ||
      { AGENT_OTEL_WHY="stock: $why_stock; the --memlock-eperm variant did not build"; return 1; }
    if agent_otel_probe_one "$bin"; then
      AGENT_OTEL_BIN=$bin AGENT_OTEL_LABEL="OTel eBPF profiler $version (memlock EPERM tolerated)"
      AGENT_OTEL_WHY="stock binary: $why_stock. Measured: the same source with EPERM from that setrlimit ignored (build-ebpf-profiler.sh --memlock-eperm; since Linux 5.11 BPF memory is charged to the memory cgroup, not RLIMIT_MEMLOCK)"
      return 0
    fi
    AGENT_OTEL_WHY="stock: $why_stock; with memlock EPERM tolerated: $AGENT_OTEL_WHY"
  else
    AGENT_OTEL_WHY=$why_stock
  fi
  return 1
}

agent_ready() {
  case $1 in
    none) return 0 ;;
    gsymprof) subcommand_has --output-dir agent || { log "gsymprof has no agent subcommand yet"; return 1; } ;;
    otel) [[ -n $AGENT_OTEL_BIN ]] ;;
    perf) command -v perf >/dev/null ;;
    bpftrace) command -v bpftrace >/dev/null ;;
  esac
}

agent_has_perf_event() {
  local fd
  for fd in /proc/"$1"/fd/*; do [[ $(readlink "$fd" 2>/dev/null) == *perf_event* ]] && return 0; done
  return 1
}

# agent_start KIND HZ DIR: starts KIND in the background; AGENT_PID is the
# tool's own pid. Waits (60 s at most) until it samples, then 3 s to settle.
agent_start() {
  local kind=$1 hz=$2 dir=$3 n=0
  mkdir -p "$dir"
  case $kind in
    gsymprof)
      local otlp=()
      subcommand_has --otlp-endpoint agent && otlp=(--otlp-endpoint "$OTELCOL_GRPC" --otlp-protocol grpc --otlp-insecure)
      "$GSYMPROF" agent -F "$hz" --listen 127.0.0.1:0 --output-dir "$dir/pprof" "${otlp[@]}" > "$dir/out" 2> "$dir/err" & ;;
    otel)
      "$AGENT_OTEL_BIN" -collection-agent "$OTELCOL_GRPC" -disable-tls -samples-per-second "$hz" \
        -reporter-interval 10s > "$dir/err" 2>&1 & ;;
    perf) perf record -q -a -F "$hz" -g -o "$dir/perf.data" > "$dir/out" 2> "$dir/err" & ;;
    bpftrace) bpftrace -e "profile:hz:$hz { @[ustack, kstack] = count(); }" > "$dir/out" 2> "$dir/err" & ;;
  esac
  AGENT_PID=$!
  while ((n < 600)); do
    kill -0 "$AGENT_PID" 2>/dev/null || { log "$kind exited before sampling: $(tail -n 2 "$dir/err")"; return 1; }
    case $kind in
      gsymprof) grep -q 'sampling' "$dir/err" 2>/dev/null && break ;;
      otel) grep -q 'Attached sched monitor' "$dir/err" 2>/dev/null && break ;;
      perf) agent_has_perf_event "$AGENT_PID" && break ;;
      bpftrace) grep -q Attaching "$dir/out" 2>/dev/null && break ;;
    esac
    sleep 0.1; ((n++))
  done
  ((n < 600)) || log "$kind did not say it samples within 60 s"
  sleep 3
}

agent_stop() {
  local kind=$1 pid=$2 n=0
  case $kind in
    gsymprof | otel) kill -TERM "$pid" 2>/dev/null ;;
    perf | bpftrace) kill -INT "$pid" 2>/dev/null ;;
  esac
  while kill -0 "$pid" 2>/dev/null && ((n < 300)); do sleep 0.1; ((n++)); done
  kill -0 "$pid" 2>/dev/null && { log "$kind ignored its signal for 30 s: SIGKILL"; kill -KILL "$pid"; }
  wait "$pid" 2>/dev/null
}

# agent_workload SECONDS DIR: stress-ng --cpu 1 and agent_burn side by side;
# DIR/stress.yaml and DIR/burn.out.
agent_workload() {
  local secs=$1 dir=$2
  stress-ng --cpu 1 --timeout "${secs}s" --metrics-brief --yaml "$dir/stress.yaml" > "$dir/stress.out" 2>&1 &
  local s=$!
  "$TMP/agent_burn" "$secs" > "$dir/burn.out" 2>&1
  wait "$s"
}

# agent_named_pprof DIR: "samples named% workload_samples workload_named%"
# from the gsymprof agent's pprof files (go tool pprof -raw). A frame is
# unnamed when its location has no function or the name is MODULE+0xOFFSET
# (gsymprof's stand-in for an address it cannot name); a sample counts as
# named when every frame (inline frames included) is.
agent_named_pprof() {
  local dir=$1 f
  for f in "$dir"/pprof/*.pb.gz; do
    [[ -e $f ]] || continue
    "$GO_BIN" tool pprof -raw "$f" 2>/dev/null | python3 -c '
import re, sys
unnamed = re.compile(r"^(\S*\+0x[0-9a-f]+|0x[0-9a-f]+|\[unknown\])$")
samples, locs, section = [], {}, None
cur = lid = None
for line in sys.stdin:
    s = line.rstrip("\n")
    if s in ("Samples:", "Locations", "Mappings"): section = s; continue
    if section == "Samples:":
        m = re.match(r"^\s+(\d+)\s+\d+: ([\d ]+)\s*$", s)
        if m: cur = [int(m.group(1)), m.group(2).split(), ""]; samples.append(cur); continue
        m = re.search(r"process\.executable\.name:\[([^\]]*)\]", s)
        if m and cur: cur[2] = m.group(1)
    elif section == "Locations":
        m = re.match(r"^\s+(\d+): 0x[0-9a-f]+ M=\d+\s?(.*)$", s)
        if m: lid = m.group(1); rest = m.group(2)
        elif s.startswith("             ") and lid: rest = s.strip()
        else: continue
        name = re.sub(r" \S*:\d+:\d+ s=\d+.*$", "", rest).strip()
        ok = bool(name) and not unnamed.match(name)
        locs[lid] = locs.get(lid, True) and ok
for n, ids, exe in samples:
    ok = all(locs.get(i, False) for i in ids)
    print(n, 1 if ok else 0, exe)'
  done | agent_named_sum
}

# agent_named_otlp FILE FROM TO: the same from the Collector's file output,
# records FROM..TO (1-based lines), decoded by tests/support/otelcol/decode.py:
# a frame that prints as MODULE+0xADDRESS, 0xADDRESS or [unknown] is unnamed.
agent_named_otlp() {
  local file=$1 from=$2 to=$3
  ((to >= from)) || { echo "0 - - -"; return; }
  sed -n "${from},${to}p" "$file" > "$TMP/agent-otlp-slice.jsonl"
  python3 "$ROOT/tests/support/otelcol/decode.py" "$TMP/agent-otlp-slice.jsonl" 2>/dev/null | python3 -c '
import re, sys
unnamed = re.compile(r"^(\S*\+0x[0-9a-f]+|0x[0-9a-f]+|\[unknown\])$")
for line in sys.stdin:
    f = line.rstrip("\n").split("\t")
    if f[0] != "sample" or not f[1].startswith("samples/"): continue
    frames = [re.sub(r"(_\[[ik]\])+$", "", x) for x in f[4].split(";")] if f[4] else []
    ok = bool(frames) and not any(unnamed.match(x) for x in frames)
    exe = next((a.split("=", 1)[1] for a in f[5:] if a.startswith("process.executable.name=")), "")
    print(f[2], 1 if ok else 0, exe)'| agent_named_sum
}

# "COUNT NAMED EXE" lines -> "samples named% stress-ng_named% agent_burn_named%".
agent_named_sum() {
  awk 'function pct(a, b) { return b ? sprintf("%.1f", 100 * a / b) : "-" }
    { t += $1; if ($2) n += $1; c[$3] += $1; if ($2) k[$3] += $1 }
    END { printf("%d %s %s %s\n", t, pct(n, t), pct(k["stress-ng"], c["stress-ng"]), pct(k["agent_burn"], c["agent_burn"])) }'
}

# agent_run RESULT KIND HZ DIR: one run; appends
# "stress_ops burn_ips cpu_s_per_min bpf_s_per_min rss_kb startup_cpu_s samples named% stress-ng_named% agent_burn_named%".
agent_run() {
  local result=$1 kind=$2 hz=$3 dir=$4
  rm -rf "$dir"; mkdir -p "$dir"
  local pid="" t0=0 b0=0 t1 b1 rss="-" startup="-" rec0=0
  if [[ $kind != none ]]; then
    rec0=$(otelcol_records)
    agent_start "$kind" "$hz" "$dir" || { agent_stop "$kind" "$AGENT_PID"; return 1; }
    pid=$AGENT_PID
    t0=$(agent_cpu_ticks "$pid"); b0=$(agent_bpf_ns "$pid")
    startup=$(awk -v t="$t0" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf("%.2f", t / hz) }')
  fi
  local w0=$EPOCHREALTIME
  agent_workload "$AGENT_RUN_SECONDS" "$dir"
  local w1=$EPOCHREALTIME
  local cpu="-" bpf="-"
  if [[ -n $pid ]]; then
    t1=$(agent_cpu_ticks "$pid"); b1=$(agent_bpf_ns "$pid"); rss=$(agent_rss_kb "$pid")
    read -r cpu bpf < <(awk -v t0="$t0" -v t1="$t1" -v b0="$b0" -v b1="$b1" -v hz="$(getconf CLK_TCK)" -v w0="$w0" -v w1="$w1" \
      'BEGIN { m = (w1 - w0) / 60; printf("%.3f %.3f\n", (t1 - t0) / hz / m, (b1 - b0) / 1e9 / m) }')
    # The OTel profiler sends every 10 s (+ up to 20% jitter) and nothing on
    # SIGTERM: one more interval, so the samples of the workload's run reach
    # the Collector (gsymprof exports its window in progress on SIGTERM).
    [[ $kind == otel ]] && sleep 12
    agent_stop "$kind" "$pid"
  fi
  local ops ips named="- - - -"
  ops=$(awk '$1 == "bogo-ops-per-second-real-time:" { print $2 }' "$dir/stress.yaml" 2>/dev/null)
  ips=$(awk '{ print $1 }' "$dir/burn.out")
  case $kind in
    gsymprof)
      if subcommand_has --otlp-endpoint agent; then
        sleep 1; named=$(agent_named_otlp "$OTELCOL_OUT" $((rec0 + 1)) "$(otelcol_records)")
      else
        named=$(agent_named_pprof "$dir")
      fi ;;
    otel) sleep 1; named=$(agent_named_otlp "$OTELCOL_OUT" $((rec0 + 1)) "$(otelcol_records)") ;;
  esac
  echo "${ops:--} ${ips:--} $cpu $bpf $rss $startup $named" >> "$result"
  [[ $kind == gsymprof ]] && cp "$dir/err" "$TMP/agent-gsymprof.err"
  rm -rf "$dir"
  return 0
}

# The soak: gsymprof agent at 19 Hz for AGENT_SOAK_MINUTES while the
# workload runs and a shell starts a short-lived process every 100 ms;
# VmRSS every 10 s.
agent_soak() {
  local dir=$TMP/agent-soak secs=$((AGENT_SOAK_MINUTES * 60))
  rm -rf "$dir"; mkdir -p "$dir"
  agent_start gsymprof 19 "$dir" || { agent_stop gsymprof "$AGENT_PID"; return 1; }
  local pid=$AGENT_PID t0 b0 t1 b1 w0 w1
  t0=$(agent_cpu_ticks "$pid"); b0=$(agent_bpf_ns "$pid")
  (while :; do sleep 0.1; done) &
  local churn=$!
  w0=$EPOCHREALTIME
  agent_workload "$secs" "$dir" &
  local work=$! s=0
  : > "$dir/rss"
  while kill -0 "$work" 2>/dev/null; do
    sleep 10; s=$((s + 10))
    echo "$s $(agent_rss_kb "$pid") $(awk '$1 == "RssAnon:" || $1 == "RssFile:" { printf(" %s", $2) }' "/proc/$pid/status" 2>/dev/null)" >> "$dir/rss"
  done
  wait "$work"
  w1=$EPOCHREALTIME
  kill "$churn"; wait "$churn" 2>/dev/null
  t1=$(agent_cpu_ticks "$pid"); b1=$(agent_bpf_ns "$pid")
  agent_stop gsymprof "$pid"
  local cpu bpf
  read -r cpu bpf < <(awk -v t0="$t0" -v t1="$t1" -v b0="$b0" -v b1="$b1" -v hz="$(getconf CLK_TCK)" -v w0="$w0" -v w1="$w1" \
    'BEGIN { m = (w1 - w0) / 60; printf("%.3f %.3f\n", (t1 - t0) / hz / m, (b1 - b0) / 1e9 / m) }')
  local at1 atn max min1 series
  at1=$(awk '$1 >= 60 { printf("%.1f", $2 / 1024); exit }' "$dir/rss")
  atn=$(awk 'END { printf("%.1f", $2 / 1024) }' "$dir/rss")
  max=$(awk '$2 > m { m = $2 } END { printf("%.1f", m / 1024) }' "$dir/rss")
  min1=$(awk '$1 >= 60 && (m == "" || $2 < m) { m = $2 } END { printf("%.1f", m / 1024) }' "$dir/rss")
  series=$(awk '$1 % 60 == 0 { printf("%s%d min %.1f (anon %.1f, file %.1f)", sep, $1 / 60, $2 / 1024, $3 / 1024, $4 / 1024); sep = ", " }' "$dir/rss")
  md
  md "### Soak: gsymprof agent at 19 Hz for $AGENT_SOAK_MINUTES min"
  md
  md "The same workload for the whole soak, and a short-lived process started every 100 ms (\`sleep 0.1\` in a loop: 600 new processes a minute)."
  md "\`AGENT_SOAK_MINUTES=60\` runs the issue's hour-long soak (not in CI)."
  md
  md "| agent CPU s/min | BPF s/min | % of one core | RSS MB after 1 min | RSS MB after $AGENT_SOAK_MINUTES min | min / max RSS MB from minute 1 on |"
  md "|---:|---:|---:|---:|---:|---:|"
  md "| $cpu | $bpf | $(awk -v c="$cpu" -v b="$bpf" 'BEGIN { printf("%.2f", (c + b) / 60 * 100) }') | ${at1:--} | $atn | ${min1:--} / $max |"
  md
  md "RSS MB by minute (RssAnon, RssFile: mapped GSYM and ELF files count in RSS as they are read): ${series:--}."
}

agent_cleanup() {
  otelcol_stop 2>/dev/null
  [[ -n $AGENT_BPF_STATS_WAS ]] && sysctl -q -w kernel.bpf_stats_enabled="$AGENT_BPF_STATS_WAS"
  if [[ -n $AGENT_TRACEFS_MOUNTED ]]; then umount /sys/kernel/tracing 2>/dev/null; AGENT_TRACEFS_MOUNTED=""; fi
}

section_agent() {
  section_begin agent
  [[ $(id -u) -eq 0 ]] || { log "agent section needs root: skipped"; return 0; }
  agent_ready gsymprof || { log "agent section: gsymprof agent not ready: skipped"; return 0; }
  # A private copy: a rebuild of $GSYMPROF during the section's half hour
  # would otherwise mix two builds in one table.
  private_gsymprof gsymprof-agent || { log "cannot copy $GSYMPROF"; return 0; }
  local GSYMPROF=$TMP/gsymprof-agent
  command -v stress-ng >/dev/null || { log "agent section needs stress-ng (scripts/install-deps.sh --bench): skipped"; return 0; }
  command -v bpftool >/dev/null || { log "agent section needs bpftool: skipped"; return 0; }
  [[ -x $GO_BIN ]] || GO_BIN=$(command -v go || echo go)
  agent_burn_source || { log "cannot build agent_burn.c: skipped"; return 0; }
  # shellcheck source=tests/support/otelcol/otelcol.bash
  source "$ROOT/tests/support/otelcol/otelcol.bash"
  unset OTELCOL_GRPC_PORT OTELCOL_HTTP_PORT
  mkdir -p "$TMP/otelcol"
  # One Collector for the whole section (every kind runs beside it, so all
  # pay for it alike); its CPU is not counted for anybody.
  local have_col=yes
  otelcol_start "$TMP/otelcol/profiles.jsonl" "$TMP/otelcol" || { have_col=""; log "no test Collector (tests/support/otelcol): no OTel peer"; }
  AGENT_BPF_STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled)
  sysctl -q -w kernel.bpf_stats_enabled=1

  local peers=() kind
  if [[ -n $AGENT_PEERS ]]; then
    read -r -a peers <<< "$AGENT_PEERS"
  else
    peers=(otel)
  fi
  if [[ " ${peers[*]} " == *" otel "* ]]; then
    if [[ -z $have_col ]] || ! agent_otel_ready; then
      [[ -n $have_col ]] || AGENT_OTEL_WHY="the test Collector did not start"
      log "OTel eBPF profiler not measured: $AGENT_OTEL_WHY; perf and bpftrace instead"
      local p2=()
      for kind in "${peers[@]}"; do [[ $kind == otel ]] || p2+=("$kind"); done
      peers=("${p2[@]}" perf bpftrace)
    elif [[ -n $AGENT_OTEL_WHY ]]; then
      log "OTel eBPF profiler: $AGENT_OTEL_WHY"
    fi
  fi
  local kinds=(none gsymprof) ready=()
  for kind in "${peers[@]}"; do [[ " ${kinds[*]} " == *" $kind "* ]] || kinds+=("$kind"); done
  for kind in "${kinds[@]}"; do
    if agent_ready "$kind"; then ready+=("$kind"); else log "agent: $kind not ready: skipped"; fi
  done

  md "## Continuous profiling: \`gsymprof agent\` (issue 27)"
  md
  machine_line
  md
  md "Whole host, both CPUs busy: \`stress-ng --cpu 1\` (Debian's, stripped) and \`agent_burn\` (three noinline levels of integer mixing, built"
  md "here \`-O2 -g\` without frame pointers) side by side for $AGENT_RUN_SECONDS s, started once the profiler samples (3 s after). gsymprof:"
  # shellcheck disable=SC2016 # backquotes of markdown
  md "\`gsymprof agent -F HZ --listen 127.0.0.1:0 --output-dir DIR\` (windows of 10 s)$(subcommand_has --otlp-endpoint agent && echo ' and `--otlp-endpoint` to the test Collector over gRPC')."
  [[ " ${ready[*]} " == *" otel "* ]] &&
    md "OTel: \`ebpf-profiler -collection-agent COLLECTOR -disable-tls -samples-per-second HZ -reporter-interval 10s\`, $AGENT_OTEL_LABEL, built from its Go module by \`tests/bench/build-ebpf-profiler.sh\`, exporting to the test Collector (tests/support/otelcol) over gRPC."
  [[ -n $AGENT_OTEL_WHY ]] && md "OTel eBPF profiler: $AGENT_OTEL_WHY."
  [[ " ${ready[*]} " == *" perf "* ]] && md "perf: \`perf record -a -g -F HZ\`; bpftrace: \`profile:hz:HZ { @[ustack, kstack] = count(); }\`."
  md "The test Collector runs through every run (so all pay alike); its CPU is nobody's."
  md "*CPU s/min*: the profiler's utime+stime (/proc/PID/stat) over the workload's run, per minute; *BPF s/min*: its BPF programs' run_time_ns"
  md "(\`kernel.bpf_stats_enabled=1\`, \`bpftool prog show\`); *% core*: both, of one CPU. *RSS*: VmRSS at the end of the run. *startup s*: CPU before"
  md "the workload (loading, first scan of /proc, GSYM conversions). Throughput: stress-ng's bogo ops/s (real time) and agent_burn's iterations/s,"
  md "in brackets over the run without a profiler. *named*: % of samples in which every frame is named (a function, not MODULE+0xOFFSET or an"
  md "address; kernel and inline frames included), of all the host's samples (this machine is shared: other sessions' builds run too) and of each"
  md "workload's (stress-ng is stripped: dynamic symbols only). *samples*: those exported for the run (the OTel profiler's: what reached the Collector)."
  md "Medians of $ROUNDS alternating rounds."
  md
  md "| Hz | profiler | CPU s/min | BPF s/min | % core | RSS MB | startup s | stress-ng ops/s | agent_burn it/s | samples | named % all | named % stress-ng | named % agent_burn |"
  md "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  local hz r
  for hz in $AGENT_HZ; do
    for kind in "${ready[@]}"; do : > "$TMP/agent-$hz-$kind"; done
    for ((r = 0; r < ROUNDS; r++)); do
      for kind in "${ready[@]}"; do
        log "agent: $hz Hz, round $((r + 1))/$ROUNDS, $kind"
        agent_run "$TMP/agent-$hz-$kind" "$kind" "$hz" "$TMP/agent-run" || log "run failed: $kind at $hz Hz"
      done
    done
    local base_ops base_ips
    base_ops=$(column "$TMP/agent-$hz-none" 1); base_ips=$(column "$TMP/agent-$hz-none" 2)
    for kind in "${ready[@]}"; do
      local f=$TMP/agent-$hz-$kind ops ips cpu bpf rss st label
      ops=$(column "$f" 1); ips=$(column "$f" 2)
      case $kind in
        none) label="(none)" ;; gsymprof) label="gsymprof agent" ;; otel) label="OTel eBPF profiler" ;; *) label=$kind ;;
      esac
      if [[ $kind == none ]]; then
        md "| $hz | $label | - | - | - | - | - | $(fmt "$ops" 0) | $(fmt "$ips" 0) | - | - | - | - |"
        continue
      fi
      cpu=$(column "$f" 3); bpf=$(column "$f" 4); rss=$(column "$f" 5); st=$(column "$f" 6)
      local pct named="-" sn="-" bn="-" ns="-"
      pct=$(awk -v c="$cpu" -v b="$bpf" 'BEGIN { if (c == "-") print "-"; else printf("%.2f", (c + b) / 60 * 100) }')
      if [[ $kind == gsymprof || $kind == otel ]]; then
        ns=$(fmt "$(column "$f" 7)" 0); named=$(fmt "$(column "$f" 8)" 1)
        sn=$(fmt "$(column "$f" 9)" 1); bn=$(fmt "$(column "$f" 10)" 1)
      fi
      md "| $hz | $label | $(fmt "$cpu" 3) | $(fmt "$bpf" 3) | $pct | $(awk -v k="$rss" 'BEGIN { if (k == "-") print "-"; else printf("%.0f", k / 1024) }') | $(fmt "$st" 2) | $(fmt "$ops" 0) ($(ratio "$ops" "$base_ops" 3)) | $(fmt "$ips" 0) ($(ratio "$ips" "$base_ips" 3)) | $ns | $named | $sn | $bn |"
    done
  done
  if [[ -f $TMP/agent-gsymprof.err ]]; then
    md
    md "gsymprof agent's own report (last run):"
    md
    md '```'
    while IFS= read -r line; do md "$line"; done < <(tail -n 6 "$TMP/agent-gsymprof.err")
    md '```'
  fi

  if ((AGENT_SOAK_MINUTES > 0)); then
    log "agent: soak, $AGENT_SOAK_MINUTES min at 19 Hz"
    agent_soak || log "agent: soak failed"
  fi
  agent_cleanup
  write_section agent "$SECTION_MD"
}
