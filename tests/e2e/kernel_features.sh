#!/bin/bash
# e2e: what gsymprof does on kernels that lack a feature, tried on this one
# (GSYMPROF_KERNEL_WITHOUT makes probed features count as missing; the
# kernel matrix, tests/kernels/, boots real older kernels).
#  - doctor: every program loads in every configuration within the verifier
#    budget (200,000 instructions, 20% of the kernel's limit), and a
#    missing feature is reported as missing.
#  - A kernel without the side-band records, the stack copy's helpers,
#    bpf_find_vma, raw tracepoints or off-CPU support (--wall) still gives a
#    complete CPU profile of the fixture, with one line saying what is lost,
#    counted in the summary and --stats (features_off); --off-cpu alone
#    there fails with one line.
#  - Without the ring buffer, profile fails with a line naming it and the
#    first kernel that has it; doctor exits 1.
#  - While `profile -p` runs, no program of gsymprof's is attached to a
#    system call: only perf events and the fork tracepoint.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
build_fixture pie
FIX=$WORK/pie/profile_fixture
ROOT="_start;__libc_start_main_impl;__libc_start_call_main;main"
EXEC_STACK="$ROOT;phase_exec;exec_outer_inline_[i];exec_inner_inline_[i];exec_leaf"

# --- doctor: programs and the budget ---
"$GSYMPROF" doctor --json >"$WORK/doctor.json" 2>"$WORK/doctor.err" || {
  cat "$WORK/doctor.err" "$WORK/doctor.json" >&2; fail "doctor exited $? on this kernel"; }
python3 - "$WORK/doctor.json" <<'EOF' || fail "doctor: programs over budget or not loaded"
import json, sys
d = json.load(open(sys.argv[1]))
budget = d["budget"]
assert budget == 200000 and d["verifier_limit"] == 1000000, d
bad = 0
for p in d["programs"]:
    line = f'  {p["program"]:14} {p["configuration"]:36} {p["verified_insns"]:8}'
    if not p["loaded"]:
        print(line + "  NOT LOADED: " + p["error"]); bad += 1
    elif p["verified_insns"] == 0 or p["verified_insns"] > budget:
        print(line + "  OVER BUDGET or unknown"); bad += 1
    else:
        print(line)
names = {(p["program"], p["configuration"]) for p in d["programs"] if p["loaded"]}
assert ("sample_stack", "stack copy 1 MiB, -p filter") in names, names
assert ("follow_fork", "frame pointers, -p filter") in names, names
sys.exit(1 if bad else 0)
EOF
GSYMPROF_KERNEL_WITHOUT=find_vma "$GSYMPROF" doctor >"$WORK/doctor.txt" 2>&1 || fail "doctor failed without bpf_find_vma"
grep -q "^  NO  bpf_find_vma (Linux 5.17): stack copies of threads" "$WORK/doctor.txt" ||
  { cat "$WORK/doctor.txt" >&2; fail "doctor does not report bpf_find_vma missing"; }

# --- degraded kernels: still a complete profile, and one line why ---
# without_run KEYS EXPECTED_LINE [profile flags...]
without_run() {
  local keys=$1 line=$2; shift 2
  echo "without $keys"
  GSYMPROF_KERNEL_WITHOUT=$keys "$GSYMPROF" profile -F 499 "$@" -o "$WORK/$keys.folded" -- \
    "$FIX" exec 2 "$WORK/pie/libplugin.so" 2>"$WORK/$keys.err" >/dev/null ||
    { cat "$WORK/$keys.err" >&2; fail "profile failed without $keys"; }
  grep -qF "gsymprof: $line" "$WORK/$keys.err" ||
    { cat "$WORK/$keys.err" >&2; fail "without $keys: no line '$line'"; }
}
without_run perf_sideband "side-band off: this kernel refuses perf's side-band records; mappings are learnt from /proc only"
expect_dominant "$WORK/perf_sideband.folded" profile_fixture "$EXEC_STACK" 60
without_run ringbuf_dynptr "call graph: this kernel lacks bpf_ringbuf_reserve_dynptr (Linux 5.19): --call-graph dwarf (the stack copy) falls back to frame pointers"
# Frame pointers through an FP-less build: the leaf is still named.
grep -q "exec_leaf" "$WORK/ringbuf_dynptr.folded" || fail "without ringbuf_dynptr: no exec_leaf samples"
without_run find_vma "stack copy: this kernel lacks bpf_find_vma (Linux 5.17)"
expect_dominant "$WORK/find_vma.folded" profile_fixture "$EXEC_STACK" 60
# -- CMD follows forks: without raw tracepoints the line says so.
without_run raw_tracepoint "fork following off: this kernel lacks raw tracepoint programs (Linux 4.17)"
expect_dominant "$WORK/raw_tracepoint.folded" profile_fixture "$EXEC_STACK" 60

# --- off-CPU time needs sched_switch + bpf_get_task_stack: --wall keeps its
# CPU samples and says what is lost; --off-cpu alone has nothing left: exit 1.
without_run off_cpu "off-CPU time off: this kernel lacks" --wall --stats "$WORK/off_cpu.stats.json"
expect_dominant "$WORK/off_cpu.folded" profile_fixture "$EXEC_STACK" 60
grep -q '\[off-cpu ' "$WORK/off_cpu.folded" && fail "without off_cpu: off-CPU stacks anyway"
# The summary counts what was off, for scripts.
python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); assert s["features_off"] == 1, s["features_off"]; assert "off-CPU" in s["features_off_reasons"][0]' \
  "$WORK/off_cpu.stats.json" || fail "--stats: features_off is not 1 without off_cpu"
grep -q "1 kernel feature off for this session" "$WORK/off_cpu.err" || fail "without off_cpu: the summary does not count the feature off"
if GSYMPROF_KERNEL_WITHOUT=off_cpu "$GSYMPROF" profile --off-cpu -d 1 -o "$WORK/off.folded" -- true 2>"$WORK/off.err"; then
  fail "--off-cpu without off_cpu support exited 0"
fi
grep -q "^gsymprof profile: --off-cpu: this kernel lacks" "$WORK/off.err" || { cat "$WORK/off.err" >&2; fail "--off-cpu without support: no one-line reason"; }

# --- sampling itself impossible: one line, exit 1 ---
GSYMPROF_KERNEL_WITHOUT=ringbuf "$GSYMPROF" profile -d 1 -o "$WORK/none.folded" -- true 2>"$WORK/none.err"
status=$?
[[ $status == 1 ]] || { cat "$WORK/none.err" >&2; fail "profile without a ring buffer exited $status, not 1"; }
grep -q "cannot run the sampler: it lacks BPF ring buffer (Linux 5.8 and later have it)" "$WORK/none.err" ||
  { cat "$WORK/none.err" >&2; fail "profile without a ring buffer does not say why"; }
GSYMPROF_KERNEL_WITHOUT=ringbuf "$GSYMPROF" doctor >/dev/null 2>&1 && fail "doctor exits 0 where sampling cannot run"

# --- nothing attached to system calls ---
if command -v bpftool >/dev/null; then
  "$FIX" exec 6 "$WORK/pie/libplugin.so" &
  target=$!
  "$GSYMPROF" profile -p "$target" -d 4 -o "$WORK/attached.folded" 2>"$WORK/attached.err" &
  profiler=$!
  sleep 2
  # The programs gsymprof attached: those whose maps include its counters.
  bpftool -j link show >"$WORK/links.json" 2>/dev/null
  bpftool -j prog show >"$WORK/progs.json" 2>/dev/null
  wait "$profiler" || { cat "$WORK/attached.err" >&2; fail "profile -p failed"; }
  kill "$target" 2>/dev/null
  python3 - "$WORK/links.json" "$WORK/progs.json" <<'EOF' || fail "a gsymprof program is attached where it runs on system calls"
import json, sys
links = json.load(open(sys.argv[1]))
progs = {p["id"]: p for p in json.load(open(sys.argv[2]))}
ours = [l for l in links if progs.get(l.get("prog_id"), {}).get("name") in ("sample_stack", "follow_fork")]
kinds = sorted({(progs[l["prog_id"]]["name"], l.get("type"), l.get("tp_name", "")) for l in ours})
for k in kinds: print("  attached:", *k)
assert any(k[0] == "sample_stack" and k[1] == "perf_event" for k in kinds), kinds
for name, kind, tp in kinds:
    assert (name, kind) in {("sample_stack", "perf_event"), ("follow_fork", "raw_tracepoint")}, (name, kind)
    assert kind != "raw_tracepoint" or tp == "sched_process_fork", tp
# Nothing else of ours, e.g. a sys_exit program, is loaded.
names = {p["name"] for p in progs.values()}
assert not names & {"note_mmap", "note_exec", "note_exit"}, names
EOF
fi
echo "ok"
