# tests/bench/sections/stacks.sh - the `stacks` section of tests/bench/run.sh:
# stack completeness with and without frame pointers.
# Sourced by run.sh after tests/bench/common.sh; defines section_stacks.
# shellcheck shell=bash

# Prints "samples reached_main_pct mean_depth" for one profiler output.
stack_stats() {
  local kind=$1 out=$2
  case $kind in
    bpftrace)
      # @[\n  frame\n  frame\n]: count   (frames leaf first, user only);
      # a frame is a name+off, or a raw address once the process is gone,
      # placed in main via the load bias from the workload's saved maps.
      local main_lo main_size bias
      read -r main_lo main_size < <(nm -S --defined-only "$WORK_EXE" 2>/dev/null | awk '$4 == "main" { print $1, $2; exit }')
      bias=$(awk -v exe="$WORK_EXE" '$6 == exe && $3 ~ /^0+$/ { split($1, r, "-"); print r[1]; exit }' "$TMP/work.maps")
      perl -e '
        my ($lo, $size, $bias) = map { defined && length ? hex($_) : undef } @ARGV[0..2];
        open(my $in, "<", $ARGV[3]) or die;
        my ($s, $m, $d, $depth, $main) = (0, 0, 0, 0, 0);
        while (<$in>) {
          if (/^@\[$/) { $depth = 0; $main = 0; next }
          if (/^\]: (\d+)$/) { $s += $1; $d += $1 * $depth; $m += $1 if $main; next }
          next unless /^\s+(\S+)/;
          my $f = $1; $depth++;
          $main = 1 if $f =~ /^main(\+|$)/;
          if ($f =~ /^0x([0-9a-f]+)$/ && defined $lo && defined $bias) {
            my $a = hex($1) - $bias;
            $main = 1 if $a >= $lo && $a < $lo + $size;
          }
        }
        if ($s) { printf("%d %.1f %.2f\n", $s, 100 * $m / $s, $d / $s) } else { print "0 - -\n" }
      ' "${main_lo:-}" "${main_size:-}" "${bias:-}" "$out" ;;
    perf | perf-dwarf)
      perf script -i "$TMP/perf.data" -F ip,sym,dso 2>/dev/null | awk '
        NF == 0 { if (inside) { s++; d += depth; if (main) m++ } inside = 0; depth = 0; main = 0; next }
        { inside = 1; if ($NF == "([kernel.kallsyms])") next; depth++; if ($2 == "main") main = 1 }
        END { if (inside) { s++; d += depth; if (main) m++ }
              if (s) printf("%d %.1f %.2f\n", s, 100 * m / s, d / s); else print "0 - -" }' ;;
    gsymprof*)
      # comm;root;...;leaf count - inlined frames (_[i]) are not stack frames.
      awk '
        { n = $NF; sub(/ [0-9]+$/, ""); k = split($0, f, ";"); depth = 0; main = 0
          for (i = 2; i <= k; i++) { if (f[i] ~ /_\[i\]$/) continue; if (f[i] ~ /_\[k\]$/) continue; depth++; if (f[i] == "main") main = 1 }
          s += n; d += n * depth; if (main) m += n }
        END { if (s) printf("%d %.1f %.2f\n", s, 100 * m / s, d / s); else print "0 - -" }' "$out" ;;
  esac
}

section_stacks() {
  section_begin stacks
  corpus sqlite3
  [[ $(id -u) -eq 0 ]] || { log "stacks section needs root: skipped"; return 0; }
  md "## Stack completeness (issue 6)"
  md
  machine_line
  md
  md "\`speedtest1 --memdb --size $SPEEDTEST_SIZE\` built -O2 -g with and without frame pointers, sampled at 999 Hz from a gate (see overhead)."
  md "Reaching main = % of samples whose user stack contains \`main\`; depth = mean number of user frames (inline frames not counted)."
  md "Medians of $ROUNDS alternating rounds."
  md
  md "| build | profiler | samples | reaching main % | mean user depth | workload CPU s | slowdown (CPU) | profiler CPU s | bytes/sample |"
  md "|---|---|---:|---:|---:|---:|---:|---:|---:|"
  local kinds=(none bpftrace perf perf-dwarf gsymprof-fp gsymprof-dwarf) kind variant r
  local ready=()
  for kind in "${kinds[@]}"; do
    if profiler_ready "$kind"; then ready+=("$kind")
    else
      # Before --call-graph lands, gsymprof's only walk is the fp one.
      if [[ $kind == gsymprof-fp ]] && profiler_ready gsymprof; then ready+=(gsymprof); log "no --call-graph yet: gsymprof default walk measured"
      else log "profiler $kind not ready: skipped"; fi
    fi
  done
  for variant in nofp fp; do
    for kind in "${ready[@]}"; do : > "$TMP/stk-$variant-$kind"; : > "$TMP/stk-$variant-$kind.stats"; : > "$TMP/stk-$variant-$kind.bytes"; done
    for ((r = 0; r < ROUNDS; r++)); do
      for kind in "${ready[@]}"; do
        run_gated "$TMP/stk-$variant-$kind" "$variant" "$kind" 999 || { log "run failed: $kind ($variant)"; continue; }
        [[ $kind == none ]] && continue
        stack_stats "$kind" "$TMP/prof.out" >> "$TMP/stk-$variant-$kind.stats"
        case $kind in
          perf | perf-dwarf) stat -c %s "$TMP/perf.data" >> "$TMP/stk-$variant-$kind.bytes" ;;
        esac
      done
    done
    local base_cpu
    base_cpu=$(column "$TMP/stk-$variant-none" 1)
    for kind in "${ready[@]}"; do
      [[ $kind == none ]] && continue
      local st=$TMP/stk-$variant-$kind.stats samples pct depth cpu pcpu bytes="-"
      samples=$(column "$st" 1); pct=$(column "$st" 2); depth=$(column "$st" 3)
      cpu=$(column "$TMP/stk-$variant-$kind" 1); pcpu=$(column "$TMP/stk-$variant-$kind" 3)
      if [[ -s $TMP/stk-$variant-$kind.bytes && $samples != - && $samples != 0 ]]; then
        bytes=$(awk -v b="$(median < "$TMP/stk-$variant-$kind.bytes")" -v s="$samples" 'BEGIN { printf("%.0f", b / s) }')
      fi
      md "| $variant | $kind | $(fmt "$samples" 0) | $(fmt "$pct" 1) | $(fmt "$depth" 2) | $(fmt "$cpu" 3) | $(ratio "$cpu" "$base_cpu" 3) | $(fmt "$pcpu" 3) | $bytes |"
    done
  done
  md
  md "perf bytes/sample = perf.data size / samples (whole file, headers included)."
  write_section stacks "$SECTION_MD"
}
