#!/bin/bash
# e2e: nothing of gsymprof's runs on every system call (issue 31.1) unless
# --off-cpu (or --wall, which includes it) asks for it. While `profile -p PID` and a whole-system
# `profile` run, the BPF programs and links that gsymprof's own process
# holds (its /proc/PID/fdinfo: prog_id, link_id) are looked up in `bpftool
# prog show` / `bpftool link show` and every attach point is named; the
# test fails when one is per-syscall: a raw or BTF tracepoint sys_enter /
# sys_exit, a syscalls:* tracepoint, or a program of a kind whose attach
# point this check cannot name (tracepoint, kprobe, fentry/fexit), so a
# new program has to be admitted here on purpose. Only perf_event programs
# (on the sampling events) and raw tracepoints that fire on scheduler and
# process events are accepted. Modes: -p PID, every process, -- CMD.
# The check must be able to fail: with --off-cpu, which needs sys_exit (a
# thread's user stack as it returns from a blocking call), the same check
# must find off_cpu_sys_exit on sys_exit.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
command -v bpftool >/dev/null || skip "bpftool not installed (scripts/install-deps.sh)"

# A target for -p that stays alive and makes system calls.
bash -c 'while :; do sleep 0.01; done' &
target=$!

# attached MODE PROFILE-ARGS...: runs `gsymprof profile` with them, snapshots
# what its process holds once sampling is attached, then classifies it;
# exit status 0 = no per-syscall attach point, 1 = one (or an unknown kind),
# 2 = the snapshot could not be taken.
attached() {
  local mode=$1
  shift
  "$GSYMPROF" profile -d 6 -o "$WORK/$mode.folded" "$@" 2>"$WORK/$mode.err" &
  local prof=$! waited=0
  : > "$WORK/$mode.ids"
  # Attached once it holds a BPF link, then a second's grace for the rest;
  # at most 5 s.
  while ((waited < 40)); do
    kill -0 "$prof" 2>/dev/null || break
    grep -qs '^link_id:' "/proc/$prof/fdinfo/"* && break
    sleep 0.1; ((waited++))
  done
  sleep 1
  # fdinfo of a BPF program fd has prog_id; of a link fd link_id and prog_id.
  # One awk per fd: a file descriptor closed meanwhile (gsymprof opens and
  # closes files all along) would end a single awk at that file.
  for fdinfo in "/proc/$prof/fdinfo/"*; do
    awk '/^(prog_id|link_id):/ { print FILENAME, $1, $2 }' "$fdinfo" 2>/dev/null
  done > "$WORK/$mode.ids"
  bpftool -j prog show > "$WORK/$mode.progs.json" 2>/dev/null
  bpftool -j link show > "$WORK/$mode.links.json" 2>/dev/null
  wait "$prof" || { cat "$WORK/$mode.err" >&2; echo "profile $* failed" >&2; return 2; }
  [[ -s $WORK/$mode.ids ]] || { echo "$mode: gsymprof held no BPF program fd" >&2; return 2; }
  python3 - "$mode" "$WORK/$mode.ids" "$WORK/$mode.progs.json" "$WORK/$mode.links.json" <<'EOF'
import json, re, sys
mode, ids_file, progs_file, links_file = sys.argv[1:]
prog_ids, link_ids = set(), set()
for line in open(ids_file):
    _, key, value = line.split()
    (prog_ids if key == "prog_id:" else link_ids).add(int(value))
progs = {p["id"]: p for p in json.load(open(progs_file))}
links = [l for l in json.load(open(links_file)) if l["id"] in link_ids or l.get("prog_id") in prog_ids]
prog_ids |= {l["prog_id"] for l in links}
if not prog_ids:
    sys.exit(2)
per_syscall = re.compile(r"^(sys_enter|sys_exit)|^syscalls[:/]|^__x64_sys_|^__do_sys_|^do_syscall_64$|^x64_sys_call$")
bad = []
for pid in sorted(prog_ids):
    prog = progs.get(pid)
    if prog is None:
        continue  # unloaded between the two listings
    name, ptype = prog.get("name", "?"), prog.get("type", "?")
    mine = [l for l in links if l.get("prog_id") == pid]
    if not mine:
        # No link: attached through a perf event (PERF_EVENT_IOC_SET_BPF) or
        # not attached. A perf_event program can only sample; any other kind
        # could sit on a syscall tracepoint unseen.
        where = "perf event (no link)"
        print(f"  {mode}: {name} ({ptype}) on {where}")
        if ptype != "perf_event":
            bad.append(f"{name}: a {ptype} program without a link: attach point unknown")
        continue
    for l in mine:
        ltype, tp = l.get("type", "?"), l.get("tp_name", "")
        where = f"{ltype} {tp}".strip()
        print(f"  {mode}: {name} ({ptype}) on {where}")
        if ltype == "perf_event" and ptype == "perf_event":
            continue
        if ltype == "raw_tracepoint" and tp and not per_syscall.search(tp):
            continue
        if ltype == "raw_tracepoint" and per_syscall.search(tp):
            bad.append(f"{name}: per-syscall tracepoint {tp}")
        else:
            bad.append(f"{name}: {where}: an attach point this check does not admit")
for b in bad:
    print(f"  {mode}: PER-SYSCALL OR UNKNOWN: {b}")
sys.exit(1 if bad else 0)
EOF
}

# check MODE WHAT PROFILE-ARGS...: no per-syscall program, and the sampling
# program itself seen (else the snapshot missed gsymprof's programs).
check() {
  local mode=$1 what=$2
  shift 2
  echo "profile $* ($what)"
  attached "$mode" "$@" > "$WORK/$mode.out"
  local status=$?
  cat "$WORK/$mode.out"
  case $status in
    0) ;;
    1) fail "$what: gsymprof attached a program that runs on system calls" ;;
    *) fail "$what: no snapshot of gsymprof's programs" ;;
  esac
  grep -q 'sample_stack (perf_event)' "$WORK/$mode.out" ||
    fail "$what: the sampling program was not seen (the snapshot misses gsymprof's programs)"
}
check pid "one process" -p "$target"
check system "every process"
# shellcheck disable=SC2016
check cmd "a command it starts" -- bash -c 'for i in $(seq 300); do sleep 0.01; done'

# The control: --off-cpu attaches off_cpu_sys_exit to sys_exit, and the same
# check sees it.
if "$GSYMPROF" profile --off-cpu -o "$WORK/probe.folded" -- true 2>"$WORK/probe.err"; then
  echo "profile --off-cpu -p PID (must be seen attached to sys_exit)"
  attached offcpu --off-cpu -p "$target" > "$WORK/offcpu.out"
  status=$?
  cat "$WORK/offcpu.out"
  [[ $status == 1 ]] || fail "--off-cpu: the check did not flag its sys_exit program (status $status)"
  grep -q 'off_cpu_sys_exit: per-syscall tracepoint sys_exit' "$WORK/offcpu.out" ||
    fail "--off-cpu: off_cpu_sys_exit on sys_exit not named"
else
  echo "(--off-cpu unavailable here: $(tail -n 1 "$WORK/probe.err"); control skipped)"
fi
echo "ok"
