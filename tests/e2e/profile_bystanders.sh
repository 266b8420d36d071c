#!/bin/bash
# e2e (issue 31): profiling running processes (-p) interrupts only the CPUs
# while they run one, never the rest of the machine. The sampling program's
# run count (kernel.bpf_stats_enabled, `bpftool prog show`), read twice
# while `profile -p` runs, is the number of sampling interrupts:
# - a target that sleeps throughout: none (an event per CPU: every CPU, at
#   the rate, about 2 x 999 a second here);
# - a target spinning on one CPU: its rate, once per 1/999 s of its CPU time;
# - every process: each online CPU, at the rate (still an event per CPU).
# The per-thread events are inherited: a thread the target starts later is
# sampled like its main thread. Once a target starts a process, sampling
# goes to an event per CPU (inherited events would start a whole period at
# each new process and never sample the short ones): a -p'd shell loop of
# /bin/true gets the samples its CPU time is worth, as -- CMD does (events
# per CPU from the start). A target with more threads than per-thread events
# are worth gets an event per CPU, and says so.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
command -v bpftool >/dev/null || skip "bpftool not installed (scripts/install-deps.sh)"
[[ -w /proc/sys/kernel/bpf_stats_enabled ]] || skip "kernel.bpf_stats_enabled is not writable"

gcc -O2 -g -pthread "$FIXTURES/spread_burn.c" -o "$WORK/spread_burn" || fail "cannot build spread_burn"
rate=999
cpus=$(nproc)

stats_was=$(sysctl -n kernel.bpf_stats_enabled)
restore_stats() { sysctl -q -w kernel.bpf_stats_enabled="$stats_was"; cleanup; }
trap restore_stats EXIT
sysctl -q -w kernel.bpf_stats_enabled=1

# sample_runs PROFILER-PID: run_cnt of the sample_stack programs it holds.
sample_runs() {
  local prof=$1 ids
  ids=$(for fdinfo in "/proc/$prof/fdinfo/"*; do
          awk '/^prog_id:/ { print $2 }' "$fdinfo" 2>/dev/null
        done | sort -u)
  [[ -n $ids ]] || return 1
  bpftool -j prog show | python3 -c '
import json, sys
ids = {int(i) for i in sys.argv[1:]}
runs = [p.get("run_cnt", 0) for p in json.load(sys.stdin) if p["id"] in ids and p.get("name") == "sample_stack"]
if not runs: sys.exit(1)
print(sum(runs))' $ids
}

# cpu_ticks PID: the process's CPU time so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# interrupts NAME SECONDS PROFILE-ARGS...: sampling interrupts over SECONDS
# once gsymprof has attached (it holds a BPF link), printed; the CPU time
# of $watch (a pid) meanwhile goes to $WORK/NAME.ticks.
watch=
interrupts() {
  local name=$1 seconds=$2 waited=0 before after ticks_before
  shift 2
  "$GSYMPROF" profile -F "$rate" -d $((seconds + 4)) -o "$WORK/$name.folded" "$@" 2>"$WORK/$name.err" &
  local prof=$!
  while ((waited < 50)); do
    kill -0 "$prof" 2>/dev/null || break
    grep -qs '^link_id:' "/proc/$prof/fdinfo/"* && break
    sleep 0.1; ((waited++))
  done
  sleep 0.5
  before=$(sample_runs "$prof") || { kill "$prof"; cat "$WORK/$name.err" >&2; fail "$name: no sample_stack program seen"; }
  [[ -n $watch ]] && ticks_before=$(cpu_ticks "$watch")
  sleep "$seconds"
  after=$(sample_runs "$prof") || { kill "$prof"; fail "$name: sample_stack went away"; }
  [[ -n $watch ]] && echo $(( $(cpu_ticks "$watch") - ticks_before )) > "$WORK/$name.ticks"
  wait "$prof" || { cat "$WORK/$name.err" >&2; fail "$name: profile $* failed"; }
  echo $((after - before))
}

sleep 120 &
sleeper=$!
taskset -c 0 "$WORK/spread_burn" crowd 0 60 >/dev/null &
spinner=$!

seconds=2
n=$(interrupts sleeper "$seconds" -p "$sleeper")
echo "  -p of a sleeping process: $n sampling interrupts in $seconds s (an event per CPU: about $((cpus * rate * seconds)))"
(( n <= 10 )) || fail "-p of a sleeping process interrupted the CPUs $n times in $seconds s"

watch=$spinner
n=$(interrupts spinner "$seconds" -p "$spinner")
watch=
ticks=$(cat "$WORK/spinner.ticks")
expected=$((ticks * rate / $(getconf CLK_TCK)))
echo "  -p of a process spinning on one CPU: $n in $seconds s (its rate over its CPU time: $expected)"
(( n >= expected * 8 / 10 && n <= expected * 12 / 10 + 20 )) ||
  fail "-p of a spinning process: $n sampling interrupts in $seconds s, not about $expected"
kill "$spinner"

n=$(interrupts system "$seconds")
echo "  every process: $n in $seconds s (each of $cpus CPUs at the rate: $((cpus * rate * seconds)))"
(( n >= cpus * rate * seconds * 7 / 10 )) ||
  fail "every process: $n sampling interrupts in $seconds s, fewer than $cpus CPUs at $rate Hz"

# -p of a process that starts a thread only later: the thread inherits.
"$WORK/spread_burn" later 2 1 &
later=$!
"$GSYMPROF" profile -F "$rate" -p "$later" -o "$WORK/later.folded" 2>"$WORK/later.err" ||
  { cat "$WORK/later.err" >&2; fail "profile -p spread_burn later failed"; }
got=$(awk '/;burn_thread(;|_\[i\]|$| )/ { t += $NF } END { print t + 0 }' "$WORK/later.folded")
echo "  -p, a thread started after attaching: burn_thread $got samples (1 s of CPU: $rate)"
(( got >= rate * 7 / 10 && got <= rate * 13 / 10 )) ||
  { cat "$WORK/later.folded" >&2; fail "-p: a later thread has $got samples, not about $rate"; }

# -p of a shell loop that forks short processes: as many samples as its CPU
# time (the shell's and its children's, bash's `times`) is worth.
cat > "$WORK/forks.sh" <<'LOOP'
sleep 0.5; i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done; times
LOOP
bash "$WORK/forks.sh" > "$WORK/forks.times" &
forks=$!
"$GSYMPROF" profile -F "$rate" -p "$forks" -o "$WORK/forks.folded" 2>"$WORK/forks.err" ||
  { cat "$WORK/forks.err" >&2; fail "profile -p of a fork loop failed"; }
wait "$forks"
cpu=$(awk '{ gsub(/[ms]/, " "); t += $1 * 60 + $2 + $3 * 60 + $4 } END { print t }' "$WORK/forks.times")
total=$(awk '{ t += $NF } END { print t + 0 }' "$WORK/forks.folded")
expected=$(awk -v c="$cpu" -v r="$rate" 'BEGIN { printf "%d", c * r }')
echo "  -p of a /bin/true loop: $total samples for $cpu s of CPU ($expected at $rate Hz)"
(( total * 10 >= expected * 8 && total * 10 <= expected * 13 )) ||
  fail "-p of a fork loop: $total samples for $cpu s of CPU time, not within 20% of $expected"

# -- CMD: main, a thread and a forked child, 1 s of CPU each; bash's
# `times` prints its children's user and system time after they end.
"$GSYMPROF" profile -F "$rate" -o "$WORK/tree.folded" -- \
  bash -c "'$WORK/spread_burn' tree 1; times" >"$WORK/tree.out" 2>"$WORK/tree.err" ||
  { cat "$WORK/tree.err" >&2; fail "profile -- spread_burn tree failed"; }
cpu=$(awk 'NR == 2 { gsub(/[ms]/, " "); print $1 * 60 + $2 + $3 * 60 + $4 }' "$WORK/tree.out")
for burner in burn_main burn_thread burn_child; do
  got=$(awk -v f="$burner" '$0 ~ ";" f "(;|_\\[i\\]|$| )" { t += $NF } END { print t + 0 }' "$WORK/tree.folded")
  echo "  -- CMD: $burner $got samples"
  (( got >= rate * 7 / 10 )) || { cat "$WORK/tree.folded" >&2; fail "-- CMD: $burner has $got samples, not about $rate"; }
done
total=$(awk '{ t += $NF } END { print t + 0 }' "$WORK/tree.folded")
expected=$(awk -v c="$cpu" -v r="$rate" 'BEGIN { printf "%d", c * r }')
echo "  -- CMD: $total samples for ${cpu} s of CPU ($expected at $rate Hz)"
(( total * 10 >= expected * 8 && total * 10 <= expected * 12 )) ||
  fail "-- CMD: $total samples for $cpu s of CPU time, not within 20% of $expected"

# More threads than per-thread events are worth: an event per CPU, said.
"$WORK/spread_burn" crowd 300 30 > "$WORK/crowd.out" &
crowd=$!
for _ in $(seq 50); do [[ -s $WORK/crowd.out ]] && break; sleep 0.1; done
n=$(interrupts crowd "$seconds" -p "$crowd")
echo "  -p of a process with 301 threads: $n in $seconds s"
grep -q 'sampling every CPU: the targets have 301 threads' "$WORK/crowd.err" ||
  { cat "$WORK/crowd.err" >&2; fail "-p of 301 threads: no notice of the events per CPU"; }
(( n >= cpus * rate * seconds * 7 / 10 )) || fail "-p of 301 threads: $n interrupts, not every CPU's"
grep -q 'burn_crowd' "$WORK/crowd.folded" || fail "-p of 301 threads: burn_crowd not sampled"
echo "ok"
