# tests/bench/sections/offcpu.sh - the `offcpu` section of tests/bench/run.sh
# (issue 28): what off-CPU profiling costs a context-switch storm, gsymprof
# vs bcc's offcputime, a bpftrace equivalent and perf record --off-cpu, and
# whether they agree with each other and with a fixture that times its own
# waits (tests/e2e/fixtures/offcpu_waits.c).
# Sourced by run.sh after tests/bench/common.sh; defines section_offcpu.
# Environment: OFFCPU_LOOPS (perf bench sched pipe -l, default 500000: ~2 s
# unprofiled here), OFFCPU_SECONDS (the fixture's run, default 3).
# shellcheck shell=bash

OFFCPU_LOOPS=${OFFCPU_LOOPS:-500000}
OFFCPU_SECONDS=${OFFCPU_SECONDS:-3}
OFFCPU_MIN_US=1000  # gsymprof's default --off-cpu-min-us; the peers get the same threshold
OFFCPUTIME_BCC=${OFFCPUTIME_BCC:-/usr/sbin/offcputime-bpfcc}

# bpftrace's offcputime: the stacks at switch-out, charged at switch-in with
# the time off the CPU. Only tracepoints: bcc's offcputime needs a kprobe on
# finish_task_switch, which kernels without CONFIG_KPROBES do not have.
# $1 = tgid, $2 = minimum wait in µs.
offcpu_bt_script() {
  cat > "$TMP/offcpu.bt" <<'EOF'
tracepoint:sched:sched_switch {
  if (pid == $1) { @start[tid] = nsecs; @us[tid] = ustack; @ks[tid] = kstack; @comm[tid] = comm; }
  $n = args->next_pid; $s = @start[$n];
  if ($s) { if (nsecs - $s >= $2 * 1000) { @[@comm[$n], @us[$n], @ks[$n]] = sum(nsecs - $s); } delete(@start[$n]); }
}
END { clear(@start); clear(@us); clear(@ks); clear(@comm); }
EOF
}

# offcpu_ready KIND: whether KIND can run here; says why not on stderr.
offcpu_ready() {
  case $1 in
    none) return 0 ;;
    gsymprof)
      subcommand_has --off-cpu profile || { log "gsymprof profile has no --off-cpu yet"; return 1; }
      "$GSYMPROF" profile --off-cpu -o "$TMP/probe.folded" -- true 2>"$TMP/probe.err" ||
        { log "gsymprof profile --off-cpu fails here: $(head -n 1 "$TMP/probe.err")"; return 1; } ;;
    bcc)
      [[ -x $OFFCPUTIME_BCC ]] || { log "no $OFFCPUTIME_BCC (bpfcc-tools, scripts/install-deps.sh --bench)"; return 1; }
      timeout 120 "$OFFCPUTIME_BCC" -f 1 >/dev/null 2>"$TMP/bcc-probe.err" || {
        local why
        why=$(grep -m 1 -E 'Exception|Failed|cannot|No such' "$TMP/bcc-probe.err")
        zcat /proc/config.gz 2>/dev/null | grep -q '^CONFIG_KPROBES=y' || why="$why; this kernel has no CONFIG_KPROBES (offcputime attaches a kprobe to finish_task_switch)"
        [[ -d /lib/modules/$(uname -r)/build ]] || why="$why; no kernel headers in /lib/modules/$(uname -r)/build"
        log "offcputime-bpfcc does not run on this kernel: ${why#; }"
        OFFCPU_BCC_WHY=${why#; }
        return 1
      } ;;
    bpftrace)
      command -v bpftrace >/dev/null || { log "no bpftrace"; return 1; }
      tracefs_ready || return 1
      timeout 60 bpftrace -e 'tracepoint:sched:sched_switch { exit(); }' >/dev/null 2>&1 ||
        { log "bpftrace cannot attach to tracepoint:sched:sched_switch"; return 1; } ;;
    perf)
      command -v perf >/dev/null || { log "no perf"; return 1; }
      perf record --off-cpu -q -o "$TMP/probe.data" -- true >"$TMP/perf-probe.err" 2>&1
      if grep -q -i 'off-cpu.*ignored\|BUILD_BPF_SKEL' "$TMP/perf-probe.err"; then
        OFFCPU_PERF_WHY=$(grep -m 1 -i 'off-cpu' "$TMP/perf-probe.err")
        log "perf record --off-cpu is not supported by this perf: $OFFCPU_PERF_WHY"
        return 1
      fi ;;
  esac
}

# offcpu_start KIND PID OUT: starts KIND on PID under cputime (profiler CPU
# and RSS into OUT.time); sets OFFCPU_PROF to the time process.
offcpu_start() {
  local kind=$1 pid=$2 out=$3
  local ptime=("$CPUTIME" -f '%U %S %M' -o "$out.time")
  rm -f "$out" "$out.time" "$out.err"
  case $kind in
    gsymprof) "${ptime[@]}" "$GSYMPROF" profile --off-cpu --off-cpu-min-us "$OFFCPU_MIN_US" -p "$pid" -o "$out" 2>"$out.err" & ;;
    bcc) "${ptime[@]}" "$OFFCPUTIME_BCC" -f -m "$OFFCPU_MIN_US" -p "$pid" >"$out" 2>"$out.err" & ;;
    bpftrace) "${ptime[@]}" bpftrace "$TMP/offcpu.bt" "$pid" "$OFFCPU_MIN_US" >"$out" 2>"$out.err" & ;;
    perf) "${ptime[@]}" perf record -q --off-cpu -p "$pid" -o "$out.data" 2>"$out.err" & ;;
  esac
  OFFCPU_PROF=$!
}

# offcpu_attached TIMEPID KIND OUT: waits (at most 60 s: bcc compiles its
# program first) until the profiler holds a perf event or BPF link, and
# bpftrace has said "Attaching"; then a short grace for the rest.
offcpu_attached() {
  local prof=$1 kind=$2 out=$3 tool="" waited=0
  while ((waited < 600)); do
    kill -0 "$prof" 2>/dev/null || { log "$kind exited before attaching: $(tail -n 2 "$out.err" 2>/dev/null)"; return 1; }
    [[ -n $tool ]] || tool=$(pgrep -P "$prof" | head -n 1)
    if [[ -n $tool ]] && ls -l "/proc/$tool/fd" 2>/dev/null | grep -Eq 'perf_event|bpf[-_]link'; then
      [[ $kind != bpftrace ]] || grep -q Attaching "$out" 2>/dev/null && break
    fi
    sleep 0.1; ((waited++))
  done
  ((waited < 600)) || log "$kind did not attach within 60 s"
  sleep 0.5
}

# offcpu_stop TIMEPID KIND: gsymprof and perf -p stop with their target;
# bcc and bpftrace print on SIGINT (to the tool: cputime ignores it).
offcpu_stop() {
  local prof=$1 kind=$2 tool n=0
  tool=$(pgrep -P "$prof" | head -n 1)
  [[ ($kind == bcc || $kind == bpftrace) && -n $tool ]] && kill -INT "$tool" 2>/dev/null
  while kill -0 "$prof" 2>/dev/null && ((n < 1200)); do
    sleep 0.1; ((n++))
    [[ $n == 300 && -n $tool ]] && { log "$kind still running 30 s after its target: SIGINT"; kill -INT "$tool" 2>/dev/null; }
    [[ $n == 900 && -n $tool ]] && { log "$kind ignored SIGINT: SIGKILL"; kill -KILL "$tool" 2>/dev/null; }
  done
  wait "$prof" 2>/dev/null
}

# offcpu_storm RESULT KIND: one `perf bench sched pipe -T` (two threads of
# one process: every tool follows the same pid) held at a gate until KIND is
# attached; appends "usecs_per_op ops_per_s profiler_cpu_s profiler_rss_kb".
offcpu_storm() {
  local result=$1 kind=$2 gate=$TMP/offcpu-gate out=$TMP/storm-prof
  rm -f "$gate" "$TMP/storm.out"; mkfifo "$gate"
  bash -c 'read -r _ < "$1"; exec perf bench sched pipe -T -l "$2"' _ "$gate" "$OFFCPU_LOOPS" >"$TMP/storm.out" 2>&1 &
  local pid=$!
  if [[ $kind != none ]]; then
    offcpu_start "$kind" "$pid" "$out"
    offcpu_attached "$OFFCPU_PROF" "$kind" "$out" || { echo go > "$gate"; wait "$pid"; return 1; }
  fi
  echo go > "$gate"
  wait "$pid"
  [[ $kind != none ]] && offcpu_stop "$OFFCPU_PROF" "$kind"
  local usecs ops pc="-" pr="-"
  usecs=$(awk '$2 == "usecs/op" { print $1 }' "$TMP/storm.out")
  ops=$(awk '$2 == "ops/sec" { print $1 }' "$TMP/storm.out")
  [[ -n $usecs ]] || { log "perf bench printed no usecs/op: $(tail -n 3 "$TMP/storm.out")"; return 1; }
  [[ $kind != none && -s $out.time ]] && read -r pc pr < <(awk '{ printf("%.3f %d\n", $1 + $2, $3) }' "$out.time")
  echo "$usecs $ops $pc $pr" >> "$result"
  [[ $kind == gsymprof ]] && cp "$out.err" "$TMP/offcpu-gsymprof.err" 2>/dev/null
  return 0
}

# offcpu_classify KIND OUT SYMS: "function ns" per wait function of the
# fixture, each stack charged to its innermost fixture frame (SYMS: "start
# size symbol function": the start routines map to their wait function, as
# frame-pointer walks lose the caller of libc's syscall wrappers), else to
# its thread's name (the fixture names its threads after their start
# routines: a frame-pointer walk through libc code that uses rbp finds no
# fixture frame at all), then
# "(main) ns", "(COMM) ns" for the rest by thread name (pipe_writer,
# lock_holder, ...) and "(top) f1 f2 f3 f4", what the four heaviest stacks
# map to.
offcpu_classify() {
  local kind=$1 out=$2 syms=$3
  case $kind in
    gsymprof | bcc)
      # folded, root first; bcc in µs, its frames without _[k].
      awk -v scale="$([[ $kind == bcc ]] && echo 1000 || echo 1)" '
        FNR == NR { as[$3] = $4; next }
        { n = $NF * scale; s = substr($0, 1, length($0) - length($NF) - 1); k = split(s, f, ";"); fn = ""
          for (i = 2; i <= k; i++) { g = f[i]; sub(/_\[[ik]\]$/, "", g); if (g in as) fn = as[g] }
          if (fn == "" && (f[1] in as)) fn = as[f[1]]
          print (fn == "" ? "(" f[1] ")" : fn), n }' "$syms" "$out" ;;
    bpftrace)
      # @[comm, \n ustack \n, \n kstack \n]: ns - frames leaf first, named
      # while the fixture lives (it lingers), else raw addresses (non-PIE).
      awk '
        function hex(s,   i, v) { v = 0; s = tolower(s); sub(/^0x/, "", s)
          for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
          return v }
        FNR == NR { lo[$3] = hex($1); hi[$3] = lo[$3] + hex($2); as[$3] = $4; next }
        /^@\[/ { fn = ""; comm = $0; sub(/^@\[/, "", comm); sub(/, *$/, "", comm); next }
        /^\]: [0-9]+$/ { if (fn == "" && (comm in as)) fn = as[comm]; print (fn == "" ? "(" comm ")" : fn), $2; next }
        fn == "" {
          g = $1; sub(/,$/, "", g)
          if (g ~ /^0x/) { a = hex(g); for (x in lo) if (a >= lo[x] && a < hi[x]) fn = as[x] }
          else { sub(/\+[0-9]+$/, "", g); if (g in as) fn = as[g] }
        }' "$syms" "$out" ;;
  esac | awk '{ t[$1] += $2; top[NR] = $1; w[NR] = $2 }
    END {
      for (f in t) printf("%s %.0f\n", f, t[f])
      # the four heaviest stacks (selection: at most a few hundred lines)
      line = "(top)"
      for (j = 1; j <= 4; j++) { best = 0
        for (i = 1; i <= NR; i++) if (!(i in used) && (best == 0 || w[i] > w[best])) best = i
        if (best) { used[best] = 1; line = line " " top[best] } }
      print line }'
}

# The agreement run: the fixture (non-PIE, frame pointers, lingering so
# that bcc and bpftrace name its frames) with gsymprof and every ready peer
# attached to the same pid at once.
offcpu_agreement() {
  local kinds=("$@") kind
  local fixture=$TMP/offcpu_waits measured=$TMP/offcpu-measured gate=$TMP/offcpu-gate
  gcc -O2 -g -fno-omit-frame-pointer -fno-pie -no-pie -pthread "$ROOT/tests/e2e/fixtures/offcpu_waits.c" -o "$fixture" ||
    { log "cannot build the offcpu_waits fixture"; return 1; }
  nm -S "$fixture" | awk 'BEGIN { m["wait_sleep"] = m["sleeper"] = "wait_sleep"; m["wait_pipe"] = m["pipe_reader"] = "wait_pipe"
      m["wait_lock"] = m["lock_waiter"] = "wait_lock"; m["burn"] = m["burner"] = "burn"; m["main"] = "(main)" }
    ($4 in m) { print $1, $2, $4, m[$4] }' > "$TMP/offcpu-syms"
  rm -f "$gate" "$measured"; mkfifo "$gate"
  bash -c 'read -r _ < "$1"; exec "$2" "$3" "$4" 3' _ "$gate" "$fixture" "$OFFCPU_SECONDS" "$measured" >/dev/null 2>&1 &
  local pid=$! profs=()
  for kind in "${kinds[@]}"; do
    offcpu_start "$kind" "$pid" "$TMP/agree-$kind"
    profs+=("$OFFCPU_PROF")
    offcpu_attached "$OFFCPU_PROF" "$kind" "$TMP/agree-$kind"
  done
  echo go > "$gate"
  # Stop the peers once the fixture has written its measurements (it then
  # lingers 3 s, its maps still readable); gsymprof stops when it exits.
  local n=0
  while ! [[ -f $measured && $(wc -l < "$measured") -ge 4 ]] && ((n < 600)); do sleep 0.1; ((n++)); done
  sleep 0.2
  local i
  for i in "${!kinds[@]}"; do offcpu_stop "${profs[$i]}" "${kinds[$i]}" & done
  wait
  [[ -s $measured ]] || { log "the fixture wrote no measurements"; return 1; }

  md
  md "Agreement on \`offcpu_waits $OFFCPU_SECONDS\` (tests/e2e/fixtures/offcpu_waits.c, -O2 -g -fno-omit-frame-pointer, non-PIE), all tools on the same run"
  md "(attached to its pid before it starts; waits of at least $OFFCPU_MIN_US µs): ms off the CPU charged to each wait function (a stack counts for its"
  md "innermost fixture frame; a thread's start routine stands for its wait function, which frame-pointer walks lose) vs the fixture's own"
  md "CLOCK_MONOTONIC around its blocking calls; in brackets the difference. *top stacks*: what the four heaviest stacks map to"
  md "(\`(main)\`: the main thread's join and linger; \`(COMM)\`: a stack without a fixture frame, by its thread's name)."
  md
  local header="| function | fixture ms |" sep="|---|---:|"
  for kind in "${kinds[@]}"; do
    header="$header $kind ms |"; sep="$sep---:|"
    offcpu_classify "$kind" "$TMP/agree-$kind" "$TMP/offcpu-syms" > "$TMP/agree-$kind.sum"
  done
  md "$header"
  md "$sep"
  local fn want row got all_ok=yes
  for fn in wait_sleep wait_pipe wait_lock; do
    want=$(awk -v f="$fn" '$1 == f { print $2 }' "$measured")
    row="| $fn | $(awk -v w="$want" 'BEGIN { printf("%.1f", w / 1e6) }') |"
    for kind in "${kinds[@]}"; do
      got=$(awk -v f="$fn" '$1 == f { print $2 }' "$TMP/agree-$kind.sum")
      row="$row $(awk -v g="${got:-0}" -v w="$want" 'BEGIN { printf("%.1f (%+.1f%%)", g / 1e6, w ? 100 * (g - w) / w : 0) }') |"
      awk -v g="${got:-0}" -v w="$want" 'BEGIN { d = w ? (g - w) / w : 1; exit !(d <= 0.1 && d >= -0.1) }' || all_ok=no
    done
    md "$row"
  done
  row="| *top stacks* | - |"
  for kind in "${kinds[@]}"; do
    row="$row $(awk '$1 == "(top)" { $1 = ""; sub(/^ /, ""); print }' "$TMP/agree-$kind.sum") |"
  done
  md "$row"
  md
  md "Every tool within ±10% of the fixture for every wait function: **$all_ok**."
}

section_offcpu() {
  section_begin offcpu
  [[ $(id -u) -eq 0 ]] || { log "offcpu section needs root: skipped"; return 0; }
  command -v perf >/dev/null || { log "offcpu section needs perf (linux-perf): skipped"; return 0; }
  offcpu_bt_script
  OFFCPU_BCC_WHY="" OFFCPU_PERF_WHY=""
  local kinds=(none gsymprof bcc bpftrace perf) kind r ready=()
  for kind in "${kinds[@]}"; do
    if offcpu_ready "$kind"; then ready+=("$kind"); else log "offcpu: $kind not ready: skipped"; fi
  done
  md "## Off-CPU profiling (issue 28)"
  md
  machine_line
  md
  md "Workload: \`perf bench sched pipe -T -l $OFFCPU_LOOPS\` (two threads of one process ping-ponging a pipe: a context switch every few µs),"
  md "held at a gate until the profiler is attached to its pid. gsymprof: \`gsymprof profile --off-cpu -p PID\` (waits under $OFFCPU_MIN_US µs summed"
  md "in the kernel); bcc: \`offcputime-bpfcc -f -m $OFFCPU_MIN_US -p PID\`; bpftrace: the stacks at \`tracepoint:sched:sched_switch\`, charged at"
  md "switch-in when the wait lasted $OFFCPU_MIN_US µs or more (\`pid == PID\` filter); perf: \`perf record --off-cpu -p PID\`."
  md "Slowdown = usecs/op (as perf bench prints it) over the unprofiled run's. Profiler CPU and peak RSS from wait4 (tests/bench/cputime.c). Medians of $ROUNDS alternating rounds."
  [[ -n $OFFCPU_BCC_WHY ]] && md "bcc: no row, \`offcputime-bpfcc\` does not run on this kernel: $OFFCPU_BCC_WHY."
  [[ -n $OFFCPU_PERF_WHY ]] && md "perf: no row, Debian's perf does not support \`--off-cpu\`: \"$OFFCPU_PERF_WHY\"."
  md
  md "| profiler | usecs/op | ops/s | slowdown | profiler CPU s | profiler RSS MB |"
  md "|---|---:|---:|---:|---:|---:|"
  for kind in "${ready[@]}"; do : > "$TMP/offcpu-$kind"; done
  for ((r = 0; r < ROUNDS; r++)); do
    for kind in "${ready[@]}"; do
      offcpu_storm "$TMP/offcpu-$kind" "$kind" || log "run failed: $kind"
    done
  done
  local base
  base=$(column "$TMP/offcpu-none" 1)
  for kind in "${ready[@]}"; do
    local f=$TMP/offcpu-$kind usecs ops pcpu prss
    usecs=$(column "$f" 1); ops=$(column "$f" 2); pcpu=$(column "$f" 3); prss=$(column "$f" 4)
    [[ $prss != - ]] && prss=$(awk -v k="$prss" 'BEGIN { printf("%.0f", k / 1024) }')
    [[ $kind == none ]] && { pcpu=-; prss=-; }
    md "| ${kind/none/(none)} | $(fmt "$usecs" 3) | $(fmt "$ops" 0) | $(ratio "$usecs" "$base" 2) | $( [[ $pcpu == - ]] && echo - || fmt "$pcpu" 3) | $prss |"
  done
  if [[ -f $TMP/offcpu-gsymprof.err ]]; then
    md
    md "gsymprof's own report (last round):"
    md
    md '```'
    while IFS= read -r line; do md "$line"; done < <(tail -n 8 "$TMP/offcpu-gsymprof.err")
    md '```'
  fi

  # Agreement: gsymprof and the peers that print stacks (perf's would need
  # perf script: not compared).
  local agree=()
  for kind in "${ready[@]}"; do [[ $kind == gsymprof || $kind == bcc || $kind == bpftrace ]] && agree+=("$kind"); done
  if [[ ${#agree[@]} -gt 0 ]]; then
    offcpu_agreement "${agree[@]}" || log "offcpu: agreement run failed"
  fi
  tracefs_release

  write_section offcpu "$SECTION_MD"
}
