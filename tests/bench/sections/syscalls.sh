# tests/bench/sections/syscalls.sh - the `syscalls` section of
# tests/bench/run.sh (issue 31.1): what a profiler of every process costs a
# program that does nothing but system calls. A getppid() loop
# (syscall_loop.c, SYSCALL_CALLS calls) and `dd if=/dev/zero of=/dev/null
# bs=1 count=SYSCALL_DD` (a read and a write per byte) run alone, under
# `gsymprof profile -F 99` of every process, under `perf record -a -g -F 99`,
# and, to show what a per-syscall program costs, under `gsymprof profile
# --off-cpu` (its sys_exit program), conditions alternating in each round;
# ns per call, median (min-max) of ROUNDS.
# Sourced by run.sh after tests/bench/common.sh; defines section_syscalls.
# shellcheck shell=bash

SYSCALL_CALLS=${SYSCALL_CALLS:-3000000}
SYSCALL_DD=${SYSCALL_DD:-2000000}

# Starts profiler KIND (none | gsymprof | gsymprof-offcpu | perf) on every
# CPU, waits until it holds its perf events; sets SC_PROF to its pid.
syscalls_profiler_start() {
  SC_PROF=""
  case $1 in
    none) return 0 ;;
    gsymprof) "$GSYMPROF" profile -F 99 -o "$TMP/sc.folded" 2>"$TMP/sc.err" & SC_PROF=$! ;;
    gsymprof-offcpu) "$GSYMPROF" profile --off-cpu -F 99 -o "$TMP/sc.folded" 2>"$TMP/sc.err" & SC_PROF=$! ;;
    perf) perf record -q -a -g -F 99 -o "$TMP/sc.perf.data" 2>"$TMP/sc.err" & SC_PROF=$! ;;
  esac
  wait_attached "$1" "$SC_PROF" "$TMP/sc.err"
}

syscalls_profiler_stop() { stop_profiler "$SC_PROF" "$TMP/sc.perf.data" "$TMP/sc.folded"; }

section_syscalls() {
  section_begin syscalls
  mkdir -p "$BIN"
  cc -O2 -o "$BIN/syscall_loop" "$HERE/syscall_loop.c" || die "cannot build syscall_loop"
  local kinds=(none)
  gsymprof_ready && kinds+=(gsymprof)
  if command -v perf >/dev/null; then kinds+=(perf); else log "perf not installed: its column skipped"; fi
  if gsymprof_ready && "$GSYMPROF" profile --off-cpu -o "$TMP/probe.folded" -- true 2>/dev/null; then
    kinds+=(gsymprof-offcpu)
  fi
  md "## System calls under a whole-system profiler (issue 31.1)"
  md
  machine_line
  md
  md "A \`getppid()\` loop ($SYSCALL_CALLS calls through syscall(2), timed inside) and \`dd if=/dev/zero of=/dev/null bs=1 count=$SYSCALL_DD\`"
  md "(a read and a write per byte: ns per call = wall / $((2 * SYSCALL_DD))), alone and while each profiler samples every process at 99 Hz:"
  md "\`gsymprof profile -F 99\`, \`perf record -a -g -F 99\`, and \`gsymprof profile --off-cpu -F 99\` (the one mode with a per-syscall program: sys_exit)."
  md "Conditions alternate in each round; median (min-max) of $ROUNDS rounds; the ratio is to *alone*, median of the per-round ratios."
  md
  local k r
  for k in "${kinds[@]}"; do : > "$TMP/sc.$k.ppid"; : > "$TMP/sc.$k.dd"; done
  for ((r = 0; r < ROUNDS; r++)); do
    for k in "${kinds[@]}"; do
      syscalls_profiler_start "$k" || continue
      "$BIN/syscall_loop" "$SYSCALL_CALLS" | sed 's/.*=//' >> "$TMP/sc.$k.ppid"
      local t0=$EPOCHREALTIME
      dd if=/dev/zero of=/dev/null bs=1 count="$SYSCALL_DD" status=none
      awk -v a="$t0" -v b="$EPOCHREALTIME" -v n="$((2 * SYSCALL_DD))" 'BEGIN { printf("%.1f\n", (b - a) * 1e9 / n) }' >> "$TMP/sc.$k.dd"
      syscalls_profiler_stop
    done
  done
  declare -A label=([none]="alone" [gsymprof]="\`gsymprof profile -F 99\` (every process)"
                    [perf]="\`perf record -a -g -F 99\`" [gsymprof-offcpu]="\`gsymprof profile --off-cpu -F 99\` (sys_exit program)")
  md "| condition | getppid ns/call | x alone | dd bs=1 ns/call | x alone |"
  md "|---|---:|---:|---:|---:|"
  for k in "${kinds[@]}"; do
    local rp rd
    rp=$(paste -d' ' "$TMP/sc.$k.ppid" "$TMP/sc.none.ppid" | awk '$2 > 0 { print $1 / $2 }' | median)
    rd=$(paste -d' ' "$TMP/sc.$k.dd" "$TMP/sc.none.dd" | awk '$2 > 0 { print $1 / $2 }' | median)
    md "| ${label[$k]} | $(spread 1 < "$TMP/sc.$k.ppid") | $(fmt "$rp" 3) | $(spread 1 < "$TMP/sc.$k.dd") | $(fmt "$rd" 3) |"
  done
  write_section syscalls "$SECTION_MD"
}
