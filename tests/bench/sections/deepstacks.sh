# tests/bench/sections/deepstacks.sh - the `deepstacks` section of tests/bench/run.sh:
# deep stacks (sqlite3 CLI, clang++) and cost per sample vs perf dwarf.
# Sourced by run.sh after tests/bench/common.sh; defines section_deepstacks.
# shellcheck shell=bash

# Deep user stacks in programs nobody here wrote (issue 13): Debian's stripped
# sqlite3 CLI (big VDBE frames) and a clang++ -O2 compile (deep parser
# recursion), both without frame pointers, under gsymprof's default call
# graph and perf's dwarf mode, each launching the workload itself.

DEEP_DIR=$HERE/deep_workloads
# deep_workload NAME: the workload's argv (DEEP_CMD) and stdin (DEEP_STDIN).
deep_workload() {
  case $1 in
    sqlite3-cte) DEEP_CMD=(sqlite3 -init /dev/null :memory:); DEEP_STDIN=$DEEP_DIR/recursive_cte.sql; DEEP_COMM=sqlite3 ;;
    clang-compile) DEEP_CMD=(clang++ -std=c++17 -O2 -c "$DEEP_DIR/stdlib_small.cpp" -o /dev/null); DEEP_STDIN=/dev/null; DEEP_COMM=clang++ ;;
  esac
}

# deep_stats KIND: "samples complete_pct mean_user_depth" of the last run. A
# stack is complete when a user frame is the process's start (_start,
# __libc_start_main, __libc_start_call_main, or ld.so's _dl_start), the same
# rule for both tools; cputime's own samples are left out.
DEEP_START='^(_start|__libc_start_main.*|__libc_start_call_main|_dl_start)$'
deep_stats() {
  case $1 in
    gsymprof)
      perl -e 'my ($re) = $ARGV[0]; my ($s, $c, $d) = (0, 0, 0);
        open(my $in, "<", $ARGV[1]) or die;
        while (<$in>) { chomp; my ($line, $n) = /^(.*) (\d+)$/ or next;
          my ($comm, @f) = split(/;/, $line); next if $comm eq "cputime";
          @f = grep { !/_\[k\]$/ && !/_\[i\]$/ && $_ ne "[truncated]" } @f;
          $s += $n; $d += $n * @f; $c += $n if grep { /$re/ } @f }
        printf("%d %.1f %.1f\n", $s, $s ? 100 * $c / $s : 0, $s ? $d / $s : 0)' "$DEEP_START" "$TMP/deep.out" ;;
    perf-*)
      perf script -i "$TMP/perf.data" -F comm,ip,sym,dso --no-inline 2>/dev/null | awk -v re="$DEEP_START" '
        function end_sample() { if (inside && comm != "cputime") { s++; d += depth; if (start) c++ } inside = 0; depth = 0; start = 0 }
        NF == 0 { end_sample(); next }
        !inside { inside = 1; comm = $1; next }
        { if ($NF == "([kernel.kallsyms])") next; depth++; if ($2 ~ re) start = 1 }
        END { end_sample(); printf("%d %.1f %.1f\n", s, s ? 100 * c / s : 0, s ? d / s : 0) }' ;;
  esac
}

# The sampling interrupt's own cost, measured directly: bpftrace times each
# run of the cpu-clock event's hrtimer callback (perf_swevent_hrtimer: perf's
# sample output, or gsymprof's BPF program) on the workload's CPU, between the
# timer:hrtimer_expire_entry and _exit tracepoints. Machine drift, which
# swamps differences of whole-run CPU time here, barely moves it. It leaves
# out the interrupt's entry and exit (the same for every tool).
DEEP_CPU=1  # the workload's CPU; the profiler runs on CPU 0
deep_callback_start() {
  DEEP_TRACE_PID=
  command -v bpftrace > /dev/null || return 0
  tracefs_ready || return 0
  local fn
  fn=$(awk '$3 == "perf_swevent_hrtimer" { print $1; exit }' /proc/kallsyms)
  [[ -n $fn && $fn != 0000000000000000 ]] || return 0
  bpftrace -e "tracepoint:timer:hrtimer_expire_entry /cpu == $DEEP_CPU && (uint64)args->function == 0x$fn/ { @start = nsecs; @timer = (uint64)args->hrtimer; }
    tracepoint:timer:hrtimer_expire_exit /cpu == $DEEP_CPU && @start && (uint64)args->hrtimer == @timer/ { @ns = stats(nsecs - @start); @start = 0; }" \
    > "$TMP/deep.trace" 2>&1 &
  DEEP_TRACE_PID=$!
  local i
  for ((i = 0; i < 100; i++)); do
    grep -qs '^Attaching' "$TMP/deep.trace" && return 0
    kill -0 "$DEEP_TRACE_PID" 2> /dev/null || break
    sleep 0.1
  done
  log "bpftrace did not attach to the timer tracepoints (interrupt column left empty): $(grep -m1 -i error "$TMP/deep.trace")"
  kill "$DEEP_TRACE_PID" 2> /dev/null; wait "$DEEP_TRACE_PID" 2> /dev/null
  DEEP_TRACE_PID=
}
# deep_callback_stop: sets DEEP_CALLBACK to the mean callback ns, or "-".
# (Not in a subshell: it waits for its own child.)
deep_callback_stop() {
  DEEP_CALLBACK=-
  [[ -n $DEEP_TRACE_PID ]] || return 0
  kill -INT "$DEEP_TRACE_PID"; wait "$DEEP_TRACE_PID" 2> /dev/null
  DEEP_CALLBACK=$(sed -n 's/^@ns: count [0-9]*, average \([0-9]*\),.*/\1/p' "$TMP/deep.trace")
  DEEP_CALLBACK=${DEEP_CALLBACK:--}
}

# deep_run RESULT KIND HZ NAME: runs workload NAME under KIND (none,
# perf-plain, perf-dwarf, perf-dwarf-max, gsymprof, bpftrace) at HZ, the workload pinned
# to CPU $DEEP_CPU and the profiler to CPU 0, and appends "workload_cpu_s
# profiler_cpu_s samples complete_pct mean_depth bytes_per_sample
# callback_ns" to RESULT. Workload CPU (user+sys, where the sampling interrupt
# is charged) from cputime around the workload alone.
deep_run() {
  local result=$1 kind=$2 hz=$3 name=$4 stats=${5:-yes}
  deep_workload "$name"
  rm -f "$TMP/deep.work" "$TMP/deep.prof" "$TMP/deep.out" "$TMP/deep.err" "$TMP/perf.data"
  local inner=(taskset -c "$DEEP_CPU" "$CPUTIME" -f '%U %S' -o "$TMP/deep.work" "${DEEP_CMD[@]}")
  local outer=(taskset -c 0 "$CPUTIME" -f '%U %S' -o "$TMP/deep.prof")
  [[ $kind == none ]] || deep_callback_start
  case $kind in
    none) "${inner[@]}" < "$DEEP_STDIN" > /dev/null 2>&1 ;;
    gsymprof)
      "${outer[@]}" "$GSYMPROF" profile -v -F "$hz" -o "$TMP/deep.out" -- "${inner[@]}" \
        < "$DEEP_STDIN" 2> "$TMP/deep.err" > /dev/null ;;
    bpftrace)
      # bpftrace -c wants one executable path: a script that runs the pinned,
      # timed workload.
      printf '%q ' exec "${inner[@]}" > "$TMP/deep-cmd.sh"; echo '> /dev/null' >> "$TMP/deep-cmd.sh"
      # For completeness the map is printed every 50 ms: bpftrace names user
      # addresses only while their process lives. What is left at exit
      # follows the END marker, counted in samples but not in completeness.
      local periodic=
      [[ $stats == yes ]] && periodic='interval:ms:50 { print(@); clear(@); } END { printf("AT-EXIT\n"); }'
      "${outer[@]}" bpftrace -e "profile:hz:$hz /comm == \"$DEEP_COMM\"/ { @[ustack] = count(); } $periodic" \
        -c "/bin/bash $TMP/deep-cmd.sh" < "$DEEP_STDIN" > "$TMP/deep.bt" 2> "$TMP/deep.err" ;;
    perf-*)
      local graph=()
      [[ $kind == perf-dwarf ]] && graph=(--call-graph dwarf)
      [[ $kind == perf-dwarf-max ]] && graph=(--call-graph dwarf,65528)
      "${outer[@]}" perf record -q -F "$hz" "${graph[@]}" -o "$TMP/perf.data" -- "${inner[@]}" \
        < "$DEEP_STDIN" > /dev/null 2> "$TMP/deep.err" ;;
  esac
  local callback=-
  [[ $kind == none ]] || { deep_callback_stop; callback=$DEEP_CALLBACK; }
  [[ -s $TMP/deep.work ]] || { log "$kind: $name did not run"; return 1; }
  local work prof="-" samples="-" pct="-" depth="-" bytes="-"
  work=$(awk '{ print $1 + $2 }' "$TMP/deep.work")
  [[ -s $TMP/deep.prof ]] && prof=$(awk -v w="$work" '{ printf("%.3f", $1 + $2 - w) }' "$TMP/deep.prof")
  case $kind in
    gsymprof)
      samples=$(sed -n 's/^gsymprof: \([0-9]*\) samples taken.*/\1/p' "$TMP/deep.err")
      bytes=$(sed -n 's/.*ring buffer: [0-9]* KiB, \([0-9]*\) bytes per sample record.*/\1/p' "$TMP/deep.err") ;;
    bpftrace)
      # Samples and mean frames per stack from the @[ustack] prints;
      # completeness over the stacks printed while the process lived.
      read -r samples pct depth < <(awk -v re="$DEEP_START" '
        /^AT-EXIT$/ { tail = 1; next }
        /^@\[/ { n = 0; start = 0; next }
        /^\]: [0-9]+$/ { c = $2; s += c; d += c * n; if (!tail) { named += c; if (start) hit += c }; next }
        /^ +[^ ]/ { n++; f = $1; sub(/\+[0-9]+$/, "", f); if (f ~ re) start = 1 }
        END { printf("%d %s %.1f\n", s, named ? sprintf("%.1f", 100 * hit / named) : "-", s ? d / s : 0) }' "$TMP/deep.bt") ;;
    perf-*)
      samples=$(perf script -i "$TMP/perf.data" -F time -G 2>/dev/null | wc -l)
      ((samples > 0)) && bytes=$(( $(stat -c %s "$TMP/perf.data") / samples )) ;;
  esac
  if [[ $kind != none && $kind != perf-plain && $kind != bpftrace && $stats == yes ]]; then read -r samples pct depth < <(deep_stats "$kind"); fi
  echo "$work $prof ${samples:--} $pct $depth ${bytes:--} $callback" >> "$result"
}

section_deepstacks() {
  section_begin deepstacks
  [[ $(id -u) -eq 0 ]] || { log "deepstacks section needs root: skipped"; return 0; }
  command -v sqlite3 >/dev/null && command -v clang++ >/dev/null && command -v perf >/dev/null ||
    { log "deepstacks needs sqlite3, clang++ and perf: skipped"; return 0; }
  md "## Deep stacks and cost per sample, default call graph vs perf's dwarf mode (issue 13)"
  md
  machine_line
  md
  md "Workloads (no frame pointers, not built here): Debian's stripped \`sqlite3\` CLI running a recursive CTE + ORDER BY"
  md "(tests/bench/deep_workloads/recursive_cte.sql), and \`clang++ -std=c++17 -O2 -c\` of a small file using the standard library"
  md "(deep_workloads/stdlib_small.cpp, Debian clang $(clang++ --version | sed -n 's/.*clang version \([0-9.]*\).*/\1/p;q')). Each profiler launches the workload (\`gsymprof profile -F HZ -- CMD\`,"
  md "\`perf record -F HZ [--call-graph dwarf[,65528]] -- CMD\`). Complete = a user frame is the process's start (\`_start\`,"
  md "\`__libc_start_main\`, \`__libc_start_call_main\`, ld.so's \`_dl_start\`), the same rule for both tools; depth = mean user frames."
  md "The workload runs pinned to CPU $DEEP_CPU, the profiler to CPU 0. Two costs per sample:"
  md "- *interrupt µs*: the sampling callback itself (perf's sample output, or gsymprof's BPF program with its stack copy), timed by"
  md "  bpftrace between timer:hrtimer_expire_entry and _exit of \`perf_swevent_hrtimer\` on the workload's CPU; mean per run, median"
  md "  over rounds (min-max). It leaves out the interrupt's entry and exit, the same for every tool; \`perf record\` without a call"
  md "  graph (*perf, no call graph*) is the floor any sampler pays."
  md "- *workload µs*: (workload CPU - the same round's unprofiled CPU) / samples, user+sys from wait4, median (min-max): everything"
  md "  the workload pays, the interrupt's entry and exit and cache effects included, but this guest's speed drifts by 10-30% between"
  md "  runs, so its spread is wide."
  md "Bytes/sample: gsymprof = ring-buffer bytes per sample record; perf = perf.data size / samples. $ROUNDS alternating rounds."
  md
  md "| workload | Hz | profiler | samples | complete % | depth | interrupt µs/sample | workload µs/sample | workload CPU s | profiler CPU s | bytes/sample |"
  md "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  # median (min-max) of a list of numbers, one per line
  spread() { awk '$1 != "-" { print }' | sort -g | awk '{ v[NR] = $1 } END { if (!NR) { print "-"; exit }
      m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf("%.2f (%.2f-%.2f)\n", m, v[1], v[NR]) }'; }
  local name hz kind r kinds
  for name in sqlite3-cte clang-compile; do
    for hz in ${DEEP_HZ:-999 9999}; do
      kinds=(none gsymprof perf-dwarf)
      [[ $hz == 999 ]] && kinds+=(perf-dwarf-max) || kinds+=(perf-plain)
      command -v bpftrace > /dev/null && kinds+=(bpftrace)
      for kind in "${kinds[@]}"; do : > "$TMP/deep-$name-$hz-$kind"; done
      for ((r = 0; r < ROUNDS; r++)); do
        for kind in "${kinds[@]}"; do
          # Completeness from the 999 Hz runs (perf script of 9999 Hz dwarf data is slow).
          deep_run "$TMP/deep-$name-$hz-$kind" "$kind" "$hz" "$name" "$([[ $hz == 999 ]] && echo yes || echo no)" ||
            log "run failed: $kind $name $hz Hz"
        done
      done
      for kind in "${kinds[@]}"; do
        local f=$TMP/deep-$name-$hz-$kind cpu prof samples pct depth bytes per callback
        cpu=$(column "$f" 1); prof=$(column "$f" 2); samples=$(column "$f" 3); pct=$(column "$f" 4)
        depth=$(column "$f" 5); bytes=$(column "$f" 6)
        callback=$(awk '$7 != "-" { printf("%.3f\n", $7 / 1000) }' "$f" | spread)
        # Paired by round (the unprofiled run just before).
        per=$(awk 'NR == FNR { base[FNR] = $1; next }
                   $3 != "-" && $3 + 0 > 0 && (FNR in base) { printf("%.2f\n", ($1 - base[FNR]) / $3 * 1e6) }' \
                "$TMP/deep-$name-$hz-none" "$f" | spread)
        if [[ $kind == none ]]; then
          md "| $name | $hz | (none) | - | - | - | - | - | $(fmt "$cpu" 3) | - | - |"
        else
          local shown=${kind/perf-dwarf-max/perf dwarf,65528}
          shown=${shown/perf-dwarf/perf dwarf}
          shown=${shown/perf-plain/perf, no call graph}
          shown=${shown/bpftrace/bpftrace @[ustack]}
          local complete=- mean=-
          [[ $hz == 999 && $kind != perf-plain ]] && { complete=$(fmt "$pct" 1); mean=$(fmt "$depth" 1); }
          md "| $name | $hz | $shown | $(fmt "$samples" 0) | $complete | $mean | $callback | $per | $(fmt "$cpu" 3) | $(fmt "$prof" 3) | $(fmt "$bytes" 0) |"
        fi
      done
    done
  done

  # The ring buffer's sizing rule on a busy machine: system-wide at 999 Hz
  # while two compile loops keep both CPUs busy.
  md
  md "System-wide \`gsymprof profile -F 999 -d 20\` (default options) while two loops of the clang++ workload keep both CPUs busy:"
  md
  md '| round | samples taken | lost (ringbuf_full) | ring buffer | bytes per sample record | truncated stacks | gsymprof CPU s | peak RSS MB |'
  md '|---:|---:|---:|---:|---:|---:|---:|---:|'
  deep_workload clang-compile
  for ((r = 0; r < (ROUNDS < 3 ? ROUNDS : 3); r++)); do
    local stop=$TMP/deep.stop loops=()
    rm -f "$stop"
    for _ in 1 2; do
      ( while [[ ! -e $stop ]]; do "${DEEP_CMD[@]}" > /dev/null 2>&1; done ) & loops+=($!)
    done
    sleep 1
    "$CPUTIME" -f '%U %S %M' -o "$TMP/deep.prof" "$GSYMPROF" profile -v -F 999 -d 20 -o "$TMP/deep.out" 2> "$TMP/deep.err"
    touch "$stop"; wait "${loops[@]}"
    local taken lost ring bytes trunc cpu rss
    taken=$(sed -n 's/^gsymprof: \([0-9]*\) samples taken.*/\1/p' "$TMP/deep.err")
    lost=$(sed -n 's/.*ringbuf_full \([0-9]*\).*/\1/p' "$TMP/deep.err")
    ring=$(sed -n 's/.*ring buffer: \([0-9]*\) KiB.*/\1/p' "$TMP/deep.err")
    bytes=$(sed -n 's/.*KiB, \([0-9]*\) bytes per sample record.*/\1/p' "$TMP/deep.err")
    trunc=$(sed -n 's/^gsymprof: truncated stacks: \([0-9]*\).*/\1/p' "$TMP/deep.err")
    read -r cpu rss < <(awk '{ printf("%.2f %.0f\n", $1 + $2, $3 / 1024) }' "$TMP/deep.prof")
    md "| $((r + 1)) | ${taken:--} | ${lost:--} | $(( ${ring:-0} / 1024 )) MiB | ${bytes:--} | ${trunc:--} | $cpu | $rss |"
  done
  tracefs_release
  write_section deepstacks "$SECTION_MD"
}
