#!/bin/bash
# tests/bench/run.sh - the benchmarks behind `make bench` (never part of make
# test). Every number is measured side by side with a peer tool in the same
# run, ours and the peer's runs alternating, and quoted as a median.
#
#   tests/bench/run.sh [lookup] [convert] [profile] [symbolize] [perfdata] [stacks] [deepstacks] [memory] [tail]   (none: all)
#
# Sections (each prints a markdown table and replaces its own block in
# tests/bench/RESULTS.md; a section whose tool is not ready says so and skips):
#   lookup   gsym::Reader vs LLVM 22 GsymReader, in process and whole process
#   convert  gsymprof gsym convert vs llvm-gsymutil --convert
#   profile  profiler overhead vs bpftrace / perf
#   symbolize  symbolizing a cppcheck profile (cold/warm) vs perf script
#   perfdata   gsymprof symbolize perf.data vs perf script --inline, one perf.data
#   stacks   stack completeness with and without frame pointers
#   deepstacks  deep stacks (sqlite3 CLI, clang++) and cost per sample vs perf dwarf
#               (the sampling interrupt timed with bpftrace, when installed)
#   memory   peak RSS per unique stack (unique_stacks.c) vs perf / bpftrace
#   tail     seconds from the end of sampling to the output, cold and warm, vs perf
#
# Environment: BUILD (build dir, default build), GSYMPROF (default
# $BUILD/gsymprof), BENCH_DIR (corpus cache, default
# /var/cache/gsymprof-bench), ROUNDS (alternating rounds, default 5),
# RESULTS (default tests/bench/RESULTS.md), DEEP_HZ (deepstacks rates, default "999 9999"),
# TAIL_PERF_ROUNDS (rounds with perf in the tail section, default 1).
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD == /* ]] || BUILD=$ROOT/$BUILD
GSYMPROF=${GSYMPROF:-$BUILD/gsymprof}
[[ $GSYMPROF == /* ]] || GSYMPROF=$ROOT/$GSYMPROF
export BENCH_DIR=${BENCH_DIR:-/var/cache/gsymprof-bench}
ROUNDS=${ROUNDS:-5}
RESULTS=${RESULTS:-$HERE/RESULTS.md}
LLVM_GSYMUTIL=${LLVM_GSYMUTIL:-/usr/lib/llvm-22/bin/llvm-gsymutil}
LLVM_PREFIX=/usr/lib/llvm-22
WORK=$BENCH_DIR/work
BIN=$BUILD/bench
SQLITE=$BENCH_DIR/sqlite3
CPPCHECK=$BENCH_DIR/cppcheck

TMP=$(mktemp -d /tmp/gsymprof-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

log() { echo "bench: $*" >&2; }
die() { echo "bench: $*" >&2; exit 1; }

# ---------------------------------------------------------------- helpers --

# Median of the numbers on stdin ("-" when there are none).
median() {
  sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "-"; exit }
    if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ratio A B [DIGITS]: A / B, "-" when either is missing or B is zero.
ratio() {
  awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN {
    if (a == "-" || b == "-" || a == "" || b == "" || b + 0 == 0) print "-";
    else printf("%.*f\n", d, a / b) }'
}

# fmt NUMBER [DIGITS]: rounds, passes "-" through.
fmt() {
  awk -v a="$1" -v d="${2:-1}" 'BEGIN { if (a == "-" || a == "") print "-"; else printf("%.*f\n", d, a) }'
}

# measure FILE CMD...: runs CMD (stdin/stdout as given), appends
# "wall_s cpu_s maxrss_kb exit" to FILE. Wall from the shell clock; CPU
# (user+sys) and peak RSS from GNU time, of CMD and its waited-for children.
measure() {
  local out=$1
  shift
  local t0 t1 rc
  t0=$EPOCHREALTIME
  /usr/bin/time -f '%U %S %M' -o "$TMP/time.out" "$@"
  rc=$?
  t1=$EPOCHREALTIME
  awk -v t0="$t0" -v t1="$t1" -v rc="$rc" '{ printf("%.4f %.3f %d %d\n", t1 - t0, $1 + $2, $3, rc) }' \
    "$TMP/time.out" >> "$out"
  return $rc
}

# column FILE N: the median of column N of FILE.
column() { awk -v n="$2" '{ print $n }' "$1" | median; }

# Replaces the block of section $1 in $RESULTS with the file $2 (markdown).
write_section() {
  local name=$1 body=$2
  local begin="<!-- bench:$name -->" end="<!-- /bench:$name -->"
  if [[ ! -f $RESULTS ]]; then
    {
      echo "# gsymprof benchmark results"
      echo
      echo "Written by \`tests/bench/run.sh\` (\`make bench\`); each section is replaced when it runs."
      echo "Medians of alternating runs on a shared, noisy 2-vCPU KVM guest."
    } > "$RESULTS"
  fi
  awk -v begin="$begin" -v end="$end" -v body="$body" '
    $0 == begin { skip = 1; while ((getline line < body) > 0) buf = buf line "\n"; printf("%s\n%s%s\n", begin, buf, end); done = 1; next }
    $0 == end { skip = 0; next }
    !skip { print }
    END { if (!done) { printf("\n%s\n", begin); while ((getline line < body) > 0) print line; print end } }
  ' "$RESULTS" > "$RESULTS.tmp" && mv "$RESULTS.tmp" "$RESULTS"
}

# The section's markdown is collected here and printed as it goes.
section_begin() { SECTION_MD=$TMP/section-$1.md; : > "$SECTION_MD"; }
md() { printf '%s\n' "$*" | tee -a "$SECTION_MD"; }

machine_line() {
  md "_$(date -u +%Y-%m-%d) on $(nproc) CPUs, kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); tree at commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), gsymprof built $(date -u -r "$GSYMPROF" '+%H:%M UTC' 2>/dev/null || echo "-")._"
}

gsymprof_ready() { [[ -x $GSYMPROF ]]; }

subcommand_has() {
  local flag=$1
  shift
  gsymprof_ready && "$GSYMPROF" "$@" --help 2>&1 | grep -q -- "$flag"
}
subcommand_works() { gsymprof_ready && "$GSYMPROF" "$@" --help >/dev/null 2>&1; }

corpus() { "$HERE/build-corpus.sh" "$@" || die "corpus build failed"; }

# LLVM-made GSYM of $1 in $WORK (the same file for both readers).
llvm_gsym() {
  local elf=$1 out=$WORK/$2.llvm.gsym
  mkdir -p "$WORK"
  if [[ ! -s $out ]]; then
    "$LLVM_GSYMUTIL" --convert "$elf" --num-threads=1 --quiet -o "$out.tmp" >/dev/null ||
      die "llvm-gsymutil --convert $elf failed"
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}

# ----------------------------------------------------------------- lookup --

build_lookup_harnesses() {
  mkdir -p "$BIN"
  local common=(-std=c++20 -O2 -g -Wall -Wextra -Werror)
  if [[ ! -x $BIN/llvm_lookup_bench || $HERE/llvm_lookup_bench.cpp -nt $BIN/llvm_lookup_bench ||
        $HERE/bench_common.h -nt $BIN/llvm_lookup_bench ]]; then
    [[ -f $LLVM_PREFIX/include/llvm/DebugInfo/GSYM/GsymReader.h ]] ||
      die "llvm-22-dev missing (scripts/install-deps.sh --bench)"
    g++ "${common[@]}" -isystem "$LLVM_PREFIX/include" -D_GNU_SOURCE -D__STDC_CONSTANT_MACROS \
      -D__STDC_FORMAT_MACROS -D__STDC_LIMIT_MACROS -fno-exceptions \
      "$HERE/llvm_lookup_bench.cpp" -o "$BIN/llvm_lookup_bench" \
      -L"$LLVM_PREFIX/lib" -lLLVM-22 -Wl,-rpath,"$LLVM_PREFIX/lib" || die "llvm_lookup_bench failed to build"
  fi
  OURS_LOOKUP_READY=0
  if [[ -f $BUILD/libgsym.a ]] &&
     g++ "${common[@]}" -I"$ROOT" "$HERE/lookup_bench.cpp" "$BUILD/libgsym.a" -o "$BIN/lookup_bench.tmp" 2>"$TMP/lookup_bench.err"; then
    mv "$BIN/lookup_bench.tmp" "$BIN/lookup_bench"
    OURS_LOOKUP_READY=1
  else
    log "lookup_bench does not build against $BUILD/libgsym.a (our side skipped): $(head -n 3 "$TMP/lookup_bench.err" 2>/dev/null)"
  fi
}

# Addresses from a real profile: every frame perf saw in module $1 (the
# sample IP, and return address - 1 for callers), dso-relative = unslid.
perf_profile_addresses() {
  local module=$1 out=$2
  shift 2
  perf record -q -F 999 -g -o "$TMP/perf-lookup.data" -- "$@" >/dev/null 2>"$TMP/perf-lookup.err" ||
    { log "perf record failed: $(tail -n 1 "$TMP/perf-lookup.err")"; return 1; }
  perf script -i "$TMP/perf-lookup.data" -F ip,dso 2>/dev/null | perl -ne '
    BEGIN { $mod = "(" . shift(@ARGV) . ")" }
    if (/^\s*$/) { $depth = 0; next }
    my ($ip, $dso) = split;
    printf("0x%x\n", hex($ip) - ($depth > 0 ? 1 : 0)) if $dso eq $mod;
    $depth++;
  ' "$module" | head -n "$LOOKUP_COUNT" > "$out"
  [[ -s $out ]]
}

LOOKUP_COUNT=${LOOKUP_COUNT:-20000}

# Address lists for program $1 (GSYM $2) -> $WORK/$1.{uniform,zipf,profile}.addrs
make_address_lists() {
  local name=$1 gsym=$2 kind
  for kind in uniform zipf; do
    [[ -s $WORK/$name.$kind.addrs ]] ||
      "$BIN/llvm_lookup_bench" addresses "$gsym" "$kind" "$LOOKUP_COUNT" 1 > "$WORK/$name.$kind.addrs" ||
      die "cannot make $kind addresses for $name"
  done
  if [[ ! -s $WORK/$name.profile.addrs ]]; then
    case $name in
      sqlite3)
        "$SQLITE/speedtest1-fp" --script "$TMP/speedtest.sql" --size 40 --memdb >/dev/null 2>&1
        perf_profile_addresses "$SQLITE/sqlite3-fp" "$WORK/$name.profile.addrs" \
          sh -c "exec '$SQLITE/sqlite3-fp' :memory: < '$TMP/speedtest.sql'" ;;
      cppcheck)
        perf_profile_addresses "$CPPCHECK/cppcheck" "$WORK/$name.profile.addrs" \
          "$CPPCHECK/cppcheck" "${CPPCHECK_WORKLOAD[@]}" ;;
    esac || { rm -f "$WORK/$name.profile.addrs"; log "$name: no profile address list (perf failed)"; }
  fi
}

# cppcheck checking two of its own sources: ~11 s of C++ work, ~10k
# samples at 999 Hz (the size of the profile in field-notes.md).
CPPCHECK_WORKLOAD=()
set_cppcheck_workload() {
  CPPCHECK_WORKLOAD=(--quiet "$CPPCHECK/src/lib/check64bit.cpp" "$CPPCHECK/src/lib/checkstring.cpp")
}

section_lookup() {
  section_begin lookup
  corpus sqlite3 cppcheck
  set_cppcheck_workload
  build_lookup_harnesses
  local programs=(sqlite3 cppcheck)
  declare -A elf=([sqlite3]=$SQLITE/sqlite3-fp [cppcheck]=$CPPCHECK/cppcheck)

  md "## GSYM lookup (issue 2)"
  md
  machine_line
  md
  md "Same LLVM-written GSYM files (\`llvm-gsymutil --convert\`) and the same $LOOKUP_COUNT addresses for both readers;"
  md "ns/lookup is thread CPU time (the machine is shared), median of $ROUNDS alternating LLVM/ours processes, each the median of ≥3 passes."
  md "Lists: *uniform* = every byte of every function range equally likely; *zipf* = functions in random order, rank k weighted 1/k^1.1;"
  md "*profile* = every frame address of a \`perf record -g\` profile of the program (sqlite3 shell running speedtest1's SQL; cppcheck --quiet on check64bit.cpp and checkstring.cpp)."
  md "\"answers\" = equal checksum over every frame (name, dir, file, line, offset) from both readers."
  md
  md "| program | addresses | LLVM lookup ns | ours lookup_into full | ours lookup() full | LLVM / ours (into) | ours names-only into | ours names-only lookup() | find_function | answers |"
  md "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
  local name kind r list
  for name in "${programs[@]}"; do
    local gsym
    gsym=$(llvm_gsym "${elf[$name]}" "$name")
    make_address_lists "$name" "$gsym"
    for kind in uniform zipf profile; do
      list=$WORK/$name.$kind.addrs
      [[ -s $list ]] || { md "| $name | $kind | (no list) | | | | | | | |"; continue; }
      local res=$TMP/lookup-$name-$kind
      : > "$res.llvm"; : > "$res.ours"
      for ((r = 0; r < ROUNDS; r++)); do
        "$BIN/llvm_lookup_bench" lookup "$gsym" "$list" >> "$res.llvm" || log "llvm_lookup_bench failed on $name/$kind"
        if [[ $OURS_LOOKUP_READY == 1 ]]; then
          "$BIN/lookup_bench" "$gsym" "$list" >> "$res.ours" || log "lookup_bench failed on $name/$kind"
        fi
      done
      local llvm_ns into_full alloc_full into_names alloc_names find_ns answers
      llvm_ns=$(grep '^llvm full' "$res.llvm" | sed 's/.*ns=\([0-9.]*\).*/\1/' | median)
      pick() { grep "^ours $1 " "$res.ours" | sed 's/.*ns=\([0-9.]*\).*/\1/' | median; }
      into_full=$(pick into-full); alloc_full=$(pick alloc-full)
      into_names=$(pick into-names); alloc_names=$(pick alloc-names); find_ns=$(pick find)
      local llvm_sum ours_sum
      llvm_sum=$(grep -o 'checksum=[0-9a-f]*' "$res.llvm" | sort -u | tr '\n' ' ')
      ours_sum=$(grep '^ours into-full' "$res.ours" | grep -o 'checksum=[0-9a-f]*' | sort -u | tr '\n' ' ')
      if [[ -z $ours_sum ]]; then answers="-"
      elif [[ $llvm_sum == "$ours_sum" ]]; then answers="equal"
      else answers="**differ**"; fi
      md "| $name | $kind | $(fmt "$llvm_ns") | $(fmt "$into_full") | $(fmt "$alloc_full") | $(ratio "$llvm_ns" "$into_full" 1)x | $(fmt "$into_names") | $(fmt "$alloc_names") | $(fmt "$find_ns") | $answers |"
    done
  done

  md
  md "Whole process, same lists on stdin: \`llvm-gsymutil --addresses-from-stdin\` (lines \`ADDR GSYM\`) vs \`gsymprof gsym lookup GSYM\` (text output to /dev/null); wall and CPU seconds, medians of $ROUNDS alternating runs."
  md
  md "| program | addresses | LLVM wall s | ours wall s | LLVM / ours wall | LLVM CPU s | ours CPU s | LLVM / ours CPU |"
  md "|---|---|---:|---:|---:|---:|---:|---:|"
  local ours_cli=0
  subcommand_works gsym lookup && ours_cli=1
  [[ $ours_cli == 1 ]] || log "gsymprof gsym lookup not ready: whole-process rows have no 'ours' column"
  for name in "${programs[@]}"; do
    local gsym=$WORK/$name.llvm.gsym
    for kind in uniform zipf profile; do
      list=$WORK/$name.$kind.addrs
      [[ -s $list ]] || continue
      awk -v g="$gsym" '{ print $1, g }' "$list" > "$TMP/llvm-stdin"
      : > "$TMP/proc.llvm"; : > "$TMP/proc.ours"
      for ((r = 0; r < ROUNDS; r++)); do
        measure "$TMP/proc.llvm" "$LLVM_GSYMUTIL" --addresses-from-stdin < "$TMP/llvm-stdin" > /dev/null
        if [[ $ours_cli == 1 ]]; then
          measure "$TMP/proc.ours" "$GSYMPROF" gsym lookup "$gsym" < "$list" > /dev/null ||
            log "gsymprof gsym lookup failed on $name/$kind"
        fi
      done
      local lw ow lc oc
      lw=$(column "$TMP/proc.llvm" 1); lc=$(column "$TMP/proc.llvm" 2)
      ow=$(column "$TMP/proc.ours" 1); oc=$(column "$TMP/proc.ours" 2)
      md "| $name | $kind | $(fmt "$lw" 3) | $(fmt "$ow" 3) | $(ratio "$lw" "$ow" 1)x | $(fmt "$lc" 3) | $(fmt "$oc" 3) | $(ratio "$lc" "$oc" 1)x |"
    done
  done
  write_section lookup "$SECTION_MD"
}

# ---------------------------------------------------------------- convert --

# Separate debug file of libc.so.6, by build ID.
libc_debug_file() {
  local libc=/lib/x86_64-linux-gnu/libc.so.6 id
  id=$(readelf -n "$libc" 2>/dev/null | awk '/Build ID:/ { print $3; exit }')
  [[ -n $id ]] || return 1
  local path=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
  [[ -r $path ]] && echo "$path"
}

# MiB of DWARF (.debug_* section sizes as stored, i.e. compressed if so).
dwarf_megabytes() {
  readelf -SW "$1" 2>/dev/null | perl -ne '
    if (/\]\s+(\.debug_\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)/) { $sum += hex($2) }
    END { printf("%.1f\n", $sum / 1048576) }'
}

section_convert() {
  section_begin convert
  corpus sqlite3 cppcheck
  md "## ELF/DWARF -> GSYM conversion (issue 3)"
  md
  machine_line
  md
  md "\`gsymprof gsym convert X -o OUT [--threads 1]\` vs \`llvm-gsymutil --convert X -o OUT [--num-threads=1]\`, runs alternating, medians of $ROUNDS."
  md "Wall time is noisy here (shared machine); CPU = user+sys. \"same bytes\" = ours with 1 thread and default threads wrote identical files;"
  md "\"= LLVM\" = ours is byte-identical to LLVM's file (1-thread rows: LLVM's multi-threaded output is not reproducible)."
  md
  md "| input | DWARF MiB | threads | LLVM wall s | ours wall s | LLVM / ours wall | LLVM CPU s | ours CPU s | LLVM RSS MB | ours RSS MB | LLVM size KB | ours size KB | same bytes | = LLVM |"
  md "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
  local ours=0
  subcommand_works gsym convert && ours=1
  [[ $ours == 1 ]] || log "gsymprof gsym convert not ready: LLVM column only"
  local inputs=("sqlite3 shell|$SQLITE/sqlite3-fp" "cppcheck|$CPPCHECK/cppcheck"
                "cppcheck testrunner|$CPPCHECK/testrunner")
  local libc_dbg
  if libc_dbg=$(libc_debug_file); then inputs+=("libc debug file|$libc_dbg")
  else log "libc debug file not found (install libc6-dbg): row skipped"; fi
  local entry label input threads r out=$TMP/convert
  mkdir -p "$out"
  for entry in "${inputs[@]}"; do
    label=${entry%%|*}; input=${entry#*|}
    local mb
    mb=$(dwarf_megabytes "$input")
    for threads in 1 default; do
      local llvm_args=() ours_args=()
      [[ $threads == 1 ]] && { llvm_args=(--num-threads=1); ours_args=(--threads 1); }
      : > "$out/llvm.m"; : > "$out/ours.m"
      for ((r = 0; r < ROUNDS; r++)); do
        rm -f "$out/llvm.gsym" "$out/ours.gsym"
        measure "$out/llvm.m" "$LLVM_GSYMUTIL" --convert "$input" "${llvm_args[@]}" --quiet -o "$out/llvm.gsym" >/dev/null
        if [[ $ours == 1 ]]; then
          measure "$out/ours.m" "$GSYMPROF" gsym convert "$input" "${ours_args[@]}" -o "$out/ours.gsym" \
            >/dev/null 2>"$out/ours.err" || log "gsymprof gsym convert $input failed: $(tail -n 1 "$out/ours.err")"
        fi
      done
      local lsize="-" osize="-" same="-" as_llvm="-"
      [[ -f $out/llvm.gsym ]] && lsize=$(( $(stat -c %s "$out/llvm.gsym") / 1024 ))
      if [[ -f $out/ours.gsym ]]; then
        osize=$(( $(stat -c %s "$out/ours.gsym") / 1024 ))
        if [[ $threads == 1 && -f $out/llvm.gsym ]]; then
          cmp -s "$out/ours.gsym" "$out/llvm.gsym" && as_llvm=yes || as_llvm=no
        fi
        if [[ $threads == 1 ]]; then cp "$out/ours.gsym" "$out/ours-t1.gsym"
        elif [[ -f $out/ours-t1.gsym ]]; then cmp -s "$out/ours.gsym" "$out/ours-t1.gsym" && same=yes || same="**no**"; fi
      fi
      local lw ow lc oc lr or
      lw=$(column "$out/llvm.m" 1); ow=$(column "$out/ours.m" 1)
      lc=$(column "$out/llvm.m" 2); oc=$(column "$out/ours.m" 2)
      lr=$(column "$out/llvm.m" 3); or=$(column "$out/ours.m" 3)
      [[ $lr != - ]] && lr=$(awk -v k="$lr" 'BEGIN { printf("%.0f", k / 1024) }')
      [[ $or != - ]] && or=$(awk -v k="$or" 'BEGIN { printf("%.0f", k / 1024) }')
      md "| $label | $mb | $threads | $(fmt "$lw" 3) | $(fmt "$ow" 3) | $(ratio "$lw" "$ow" 2)x | $(fmt "$lc" 3) | $(fmt "$oc" 3) | $lr | $or | $lsize | $osize | $same | $as_llvm |"
    done
    rm -f "$out/ours-t1.gsym"
  done
  write_section convert "$SECTION_MD"
}

# ---------------------------------------------------------------- profile --

SPEEDTEST_SIZE=${SPEEDTEST_SIZE:-60}

# Runs speedtest1 variant $2 (fp|nofp) held at a gate, so that the profiler
# started by $3... attaches before the first instruction of the workload:
#   run_gated RESULTFILE VARIANT PROFILER-KIND HZ
# PROFILER-KIND: none | gsymprof | bpftrace | perf | perf-dwarf | gsymprof-fp | gsymprof-dwarf
# Appends "workload_cpu_s workload_wall_s profiler_cpu_s profiler_rss_kb" to
# RESULTFILE and leaves the profiler's output in $TMP/prof.out.
run_gated() {
  local result=$1 variant=$2 kind=$3 hz=$4
  local gate=$TMP/gate
  rm -f "$gate" "$TMP/prof.out" "$TMP/prof.err" "$TMP/prof.time" "$TMP/work.time" "$TMP/work.out"
  mkfifo "$gate"
  # The gated shell execs speedtest1 in place, so its pid is the workload's.
  /usr/bin/time -f '%U %S' -o "$TMP/work.time" \
    bash -c 'read -r _ < "$1"; exec "$2" --memdb --size "$3"' _ "$gate" "$SQLITE/speedtest1-$variant" "$SPEEDTEST_SIZE" \
    > "$TMP/work.out" 2>&1 &
  local timer=$! pid=""
  for _ in $(seq 100); do pid=$(pgrep -P "$timer" | head -n 1); [[ -n $pid ]] && break; sleep 0.05; done
  [[ -n $pid ]] || { log "workload did not start"; return 1; }
  local prof=""
  local ptime=(/usr/bin/time -f '%U %S %M' -o "$TMP/prof.time")
  case $kind in
    none) ;;
    gsymprof) "${ptime[@]}" "$GSYMPROF" profile -p "$pid" -F "$hz" -o "$TMP/prof.out" 2>"$TMP/prof.err" & prof=$! ;;
    gsymprof-fp | gsymprof-dwarf)
      "${ptime[@]}" "$GSYMPROF" profile -p "$pid" -F "$hz" --call-graph "${kind#gsymprof-}" -o "$TMP/prof.out" 2>"$TMP/prof.err" & prof=$! ;;
    bpftrace)
      "${ptime[@]}" bpftrace -e "profile:hz:$hz /pid == $pid/ { @[ustack] = count(); }" > "$TMP/prof.out" 2>"$TMP/prof.err" & prof=$! ;;
    perf)
      "${ptime[@]}" perf record -q -F "$hz" -g -p "$pid" -o "$TMP/perf.data" 2>"$TMP/prof.err" & prof=$! ;;
    perf-dwarf)
      "${ptime[@]}" perf record -q -F "$hz" --call-graph dwarf -p "$pid" -o "$TMP/perf.data" 2>"$TMP/prof.err" & prof=$! ;;
  esac
  if [[ -n $prof ]]; then
    # Ready when the profiler holds a perf_event fd (sampling attached), and
    # bpftrace has said "Attaching"; then a short grace for the rest of the
    # set-up. At most 15 s.
    local waited=0 tool=""
    while ((waited < 150)); do
      kill -0 "$prof" 2>/dev/null || break
      [[ -n $tool ]] || tool=$(pgrep -P "$prof" | head -n 1)
      if [[ -n $tool ]] && ls -l "/proc/$tool/fd" 2>/dev/null | grep -q 'perf_event'; then
        [[ $kind != bpftrace ]] || grep -q Attaching "$TMP/prof.out" 2>/dev/null && break
      fi
      sleep 0.1; ((waited++))
    done
    ((waited < 150)) || log "$kind did not attach within 15 s"
    sleep 0.3
  fi
  echo go > "$gate"
  # bpftrace prints raw addresses for a process that has exited: keep the
  # workload's maps to place main in them.
  local exe=$SQLITE/speedtest1-$variant
  : > "$TMP/work.maps"
  for _ in $(seq 100); do
    if [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$exe" ]]; then cat "/proc/$pid/maps" > "$TMP/work.maps" 2>/dev/null; break; fi
    sleep 0.02
  done
  WORK_EXE=$exe
  wait "$timer"
  if [[ -n $prof ]]; then
    # gsymprof and perf -p stop when the target exits; bpftrace needs a
    # signal. Signals go to the profiler itself: GNU time ignores SIGINT.
    local tool
    tool=$(pgrep -P "$prof" | head -n 1)
    [[ $kind == bpftrace && -n $tool ]] && kill -INT "$tool" 2>/dev/null
    local n=0
    while kill -0 "$prof" 2>/dev/null && ((n < 1200)); do
      sleep 0.1; ((n++))
      [[ $n == 300 && -n $tool ]] && { log "$kind still running 30 s after the workload: SIGINT"; kill -INT "$tool" 2>/dev/null; }
      [[ $n == 900 && -n $tool ]] && { log "$kind ignored SIGINT: SIGKILL"; kill -KILL "$tool" 2>/dev/null; }
    done
    wait "$prof"
  fi
  local wall
  wall=$(awk '/TOTAL/ { sub(/s$/, "", $NF); print $NF }' "$TMP/work.out")
  local pc="-" pr="-"
  [[ -s $TMP/prof.time ]] && read -r pc pr < <(awk '{ printf("%.3f %d\n", $1 + $2, $3) }' "$TMP/prof.time")
  awk -v w="${wall:--}" -v pc="$pc" -v pr="$pr" '{ printf("%.3f %s %s %s\n", $1 + $2, w, pc, pr) }' "$TMP/work.time" >> "$result"
}

profiler_ready() {
  case $1 in
    none) return 0 ;;
    gsymprof) subcommand_works profile ;;
    gsymprof-fp) subcommand_has --call-graph profile ;;
    gsymprof-dwarf) subcommand_has 'fp|dwarf' profile ;;
    bpftrace) command -v bpftrace >/dev/null ;;
    perf | perf-dwarf) command -v perf >/dev/null ;;
  esac
}

section_profile() {
  section_begin profile
  corpus sqlite3 cppcheck
  set_cppcheck_workload
  [[ $(id -u) -eq 0 ]] || { log "profile section needs root: skipped"; return 0; }
  md "## Profiler overhead (issue 4)"
  md
  machine_line
  md
  md "Workload: \`speedtest1 --memdb --size $SPEEDTEST_SIZE\` (sqlite 3.40.1, -O2 -g -fno-omit-frame-pointer), held at a gate until the profiler"
  md "is attached to its pid. Slowdown = workload CPU time (user+sys, where sampling interrupts are charged) over the unprofiled run's;"
  md "wall = speedtest1's own TOTAL. bpftrace: \`profile:hz:N /pid == PID/ { @[ustack] = count(); }\`; perf: \`perf record -F N -g -p PID\`;"
  md "gsymprof: \`gsymprof profile -p PID -F N\`. Profiler CPU and peak RSS from GNU time. Medians of $ROUNDS alternating rounds."
  md
  md "| Hz | profiler | workload CPU s | slowdown (CPU) | extra CPU per sample µs | workload wall s | slowdown (wall) | profiler CPU s | profiler RSS MB |"
  md "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
  local kinds=(none gsymprof bpftrace perf) kind hz r
  local ready=()
  for kind in "${kinds[@]}"; do
    if profiler_ready "$kind"; then ready+=("$kind"); else log "profiler $kind not ready: skipped"; fi
  done
  for hz in 99 999 9999; do
    for kind in "${ready[@]}"; do : > "$TMP/ovh-$hz-$kind"; done
    for ((r = 0; r < ROUNDS; r++)); do
      for kind in "${ready[@]}"; do
        run_gated "$TMP/ovh-$hz-$kind" fp "$kind" "$hz" || log "run failed: $kind at $hz Hz"
        [[ $kind == gsymprof ]] && cp "$TMP/prof.err" "$TMP/gsymprof-$hz.err" 2>/dev/null
      done
    done
    local base_cpu base_wall
    base_cpu=$(column "$TMP/ovh-$hz-none" 1); base_wall=$(column "$TMP/ovh-$hz-none" 2)
    for kind in "${ready[@]}"; do
      local f=$TMP/ovh-$hz-$kind cpu wall pcpu prss per
      cpu=$(column "$f" 1); wall=$(column "$f" 2); pcpu=$(column "$f" 3); prss=$(column "$f" 4)
      [[ $prss != - ]] && prss=$(awk -v k="$prss" 'BEGIN { printf("%.0f", k / 1024) }')
      # samples ~= hz * unprofiled CPU seconds (one CPU busy)
      per=$(awk -v c="$cpu" -v b="$base_cpu" -v hz="$hz" 'BEGIN { if (c == "-" || b == "-" || b + 0 == 0) print "-"; else printf("%.1f", (c - b) / (hz * b) * 1e6) }')
      [[ $kind == none ]] && per="-"
      md "| $hz | ${kind/none/(none)} | $(fmt "$cpu" 3) | $(ratio "$cpu" "$base_cpu" 3) | $per | $(fmt "$wall" 3) | $(ratio "$wall" "$base_wall" 3) | $( [[ $kind == none ]] && echo - || fmt "$pcpu" 3) | $( [[ $kind == none ]] && echo - || echo "$prss") |"
    done
  done
  if [[ -f $TMP/gsymprof-999.err ]]; then
    md
    md "gsymprof's own report at 999 Hz (last round):"
    md
    md '```'
    while IFS= read -r line; do md "$line"; done < <(tail -n 12 "$TMP/gsymprof-999.err")
    md '```'
  fi

  write_section profile "$SECTION_MD"
}

# Samples in a perf.data file (perf script ends each sample with a blank line).
perf_sample_count() {
  perf script -i "$1" -F ip --no-inline 2>/dev/null | awk 'NF == 0 { if (inside) n++; inside = 0; next } { inside = 1 } END { print n + inside }'
}

# Symbolization of a cppcheck profile: gsymprof record + symbolize (cold:
# empty cache, GSYMs converted; warm: cached) vs perf script on a perf
# profile of the same workload.
section_symbolize() {
  section_begin symbolize
  corpus cppcheck
  set_cppcheck_workload
  [[ $(id -u) -eq 0 ]] || { log "symbolize section needs root: skipped"; return 0; }
  md "## Symbolization: cppcheck profile (issue 4; 999 Hz, -O2 -g -fno-omit-frame-pointer)"
  md
  machine_line
  md
  md "Workload: \`cppcheck --quiet\` on check64bit.cpp and checkstring.cpp of its own sources."
  md "gsymprof: time of \`gsymprof symbolize CAPTURE\` (folded, inline frames) after \`gsymprof record\`; cold = empty GSYM cache (every module converted), warm = cache filled."
  md "perf: \`perf script\` on \`perf record -F 999\` of the same workload: with \`-g\` perf prints no inline frames at all, so the inline row uses"
  md "\`--call-graph dwarf\` (perf then runs addr2line for inlines, as in field-notes.md). Wall seconds, medians."
  md
  md "| tool | samples | unique stacks | cold s | warm s | that / ours (warm) |"
  md "|---|---:|---:|---:|---:|---:|"
  local perf_inline="-" perf_plain="-" perf_fp="-" perf_samples="-" perf_fp_samples="-"
  if command -v perf >/dev/null; then
    perf record -q -F 999 -g -o "$TMP/cpp-perf.data" -- "$CPPCHECK/cppcheck" "${CPPCHECK_WORKLOAD[@]}" >/dev/null 2>&1
    perf record -q -F 999 --call-graph dwarf -o "$TMP/cpp-perf-dwarf.data" -- "$CPPCHECK/cppcheck" "${CPPCHECK_WORKLOAD[@]}" >/dev/null 2>&1
    perf_fp_samples=$(perf_sample_count "$TMP/cpp-perf.data")
    perf_samples=$(perf_sample_count "$TMP/cpp-perf-dwarf.data")
    : > "$TMP/ps.fp"; : > "$TMP/ps.plain"; : > "$TMP/ps.inline"
    local r
    for ((r = 0; r < ROUNDS; r++)); do
      measure "$TMP/ps.fp" perf script -i "$TMP/cpp-perf.data" --no-inline > /dev/null 2>&1
      measure "$TMP/ps.plain" perf script -i "$TMP/cpp-perf-dwarf.data" --no-inline > /dev/null 2>&1
    done
    # --inline spawns addr2line per address (tens of seconds): few rounds.
    for ((r = 0; r < (ROUNDS < 2 ? ROUNDS : 2); r++)); do
      measure "$TMP/ps.inline" perf script -i "$TMP/cpp-perf-dwarf.data" --inline > /dev/null 2>&1
    done
    perf_fp=$(column "$TMP/ps.fp" 1); perf_plain=$(column "$TMP/ps.plain" 1); perf_inline=$(column "$TMP/ps.inline" 1)
  fi
  local cold="-" warm="-" samples="-" stacks="-"
  if subcommand_works record && subcommand_works symbolize; then
    local cache=$TMP/gsym-cache
    if "$GSYMPROF" record -F 999 -o "$TMP/cpp.capture" -- "$CPPCHECK/cppcheck" "${CPPCHECK_WORKLOAD[@]}" >/dev/null 2>"$TMP/record.err"; then
      : > "$TMP/sym.cold"; : > "$TMP/sym.warm"
      local r
      for ((r = 0; r < ROUNDS; r++)); do
        rm -rf "$cache"
        GSYMPROF_CACHE=$cache measure "$TMP/sym.cold" "$GSYMPROF" symbolize "$TMP/cpp.capture" -o "$TMP/cpp.folded" 2>/dev/null
        GSYMPROF_CACHE=$cache measure "$TMP/sym.warm" "$GSYMPROF" symbolize "$TMP/cpp.capture" -o "$TMP/cpp.folded" 2>/dev/null
      done
      cold=$(column "$TMP/sym.cold" 1); warm=$(column "$TMP/sym.warm" 1)
      samples=$(awk '{ n += $NF } END { print n + 0 }' "$TMP/cpp.folded" 2>/dev/null)
      stacks=$(wc -l < "$TMP/cpp.folded" 2>/dev/null)
    else
      log "gsymprof record failed: $(tail -n 1 "$TMP/record.err")"
    fi
  else
    log "gsymprof record/symbolize not ready: symbolization row skipped"
  fi
  md "| gsymprof symbolize (inline) | $samples | $stacks | $(fmt "$cold" 3) | $(fmt "$warm" 3) | |"
  md "| perf script --inline (dwarf) | $perf_samples | - | - | $(fmt "$perf_inline" 3) | $(ratio "$perf_inline" "$warm" 1)x |"
  md "| perf script --no-inline (dwarf) | $perf_samples | - | - | $(fmt "$perf_plain" 3) | $(ratio "$perf_plain" "$warm" 1)x |"
  md "| perf script (-g, no inline frames) | $perf_fp_samples | - | - | $(fmt "$perf_fp" 3) | $(ratio "$perf_fp" "$warm" 1)x |"
  write_section symbolize "$SECTION_MD"
}

# ---------------------------------------------------------------- perfdata --

# One perf.data of cppcheck (perf record --call-graph dwarf, so that perf
# script has inline frames to print too) read by both tools: perf script
# --inline to /dev/null vs gsymprof symbolize (folded, inline frames) with
# the GSYM cache filled (warm) and emptied before each run (cold). Rounds
# alternate perf, cold, warm; wall-clock medians.
section_perfdata() {
  section_begin perfdata
  # Only the cppcheck binary is needed (not the testrunner the corpus adds).
  [[ -x $CPPCHECK/cppcheck && -e $CPPCHECK/cfg/std.cfg ]] || corpus cppcheck
  set_cppcheck_workload
  [[ $(id -u) -eq 0 ]] || { log "perfdata section needs root (perf record): skipped"; return 0; }
  command -v perf >/dev/null || { log "no perf: perfdata section skipped"; return 0; }
  subcommand_has --event symbolize || { log "gsymprof symbolize cannot read perf.data: skipped"; return 0; }
  local data=$TMP/cpp-dwarf.data cache=$TMP/perfdata-cache
  perf record -q -F 999 --call-graph dwarf -o "$data" -- "$CPPCHECK/cppcheck" "${CPPCHECK_WORKLOAD[@]}" >/dev/null 2>&1 ||
    die "perf record of cppcheck failed"
  local perf_samples size_mb
  perf_samples=$(perf_sample_count "$data")
  size_mb=$(awk -v b="$(stat -c %s "$data")" 'BEGIN { printf("%.1f", b / 1048576) }')
  # One run first: the cache for the warm runs, and the sample counts.
  rm -rf "$cache"
  GSYMPROF_CACHE=$cache "$GSYMPROF" symbolize "$data" -o "$TMP/perfdata.folded" 2> "$TMP/perfdata.err" ||
    die "gsymprof symbolize of the perf.data failed: $(tail -n 1 "$TMP/perfdata.err")"
  local samples stacks
  samples=$(sed -n 's/^gsymprof: \([0-9]*\) samples, .*/\1/p' "$TMP/perfdata.err")
  stacks=$(wc -l < "$TMP/perfdata.folded")
  : > "$TMP/pd.perf"; : > "$TMP/pd.cold"; : > "$TMP/pd.warm"
  local r perf_rounds=${PERF_INLINE_ROUNDS:-3}
  for ((r = 0; r < ROUNDS; r++)); do
    # perf script --inline takes minutes here (addr2line per address): fewer rounds.
    if ((r < perf_rounds)); then
      measure "$TMP/pd.perf" perf script -i "$data" --inline > /dev/null 2>&1
    fi
    rm -rf "$cache"
    GSYMPROF_CACHE=$cache measure "$TMP/pd.cold" "$GSYMPROF" symbolize "$data" > /dev/null 2>&1
    GSYMPROF_CACHE=$cache measure "$TMP/pd.warm" "$GSYMPROF" symbolize "$data" > /dev/null 2>&1
  done
  local perf_s cold warm perf_rss warm_rss cold_rss perf_cpu cold_cpu warm_cpu
  perf_s=$(column "$TMP/pd.perf" 1); cold=$(column "$TMP/pd.cold" 1); warm=$(column "$TMP/pd.warm" 1)
  perf_cpu=$(column "$TMP/pd.perf" 2); cold_cpu=$(column "$TMP/pd.cold" 2); warm_cpu=$(column "$TMP/pd.warm" 2)
  perf_rss=$(column "$TMP/pd.perf" 3); cold_rss=$(column "$TMP/pd.cold" 3); warm_rss=$(column "$TMP/pd.warm" 3)
  md "## perf.data: gsymprof symbolize vs perf script --inline (issue 14)"
  md
  machine_line
  md
  md "One perf.data: \`perf record -F 999 --call-graph dwarf\` of \`cppcheck --quiet\` on check64bit.cpp and checkstring.cpp ($size_mb MB, $perf_samples samples)."
  md "perf: \`perf script -i FILE --inline > /dev/null\` (perf unwinds the stack copies, then addr2line names inline frames)."
  md "gsymprof: \`gsymprof symbolize FILE > /dev/null\` (CFI unwinding, folded stacks with inline frames); cold = empty GSYM cache before each run"
  md "(every module converted from its DWARF), warm = cache filled. Wall seconds, CPU seconds (user + system of the process and the children it"
  md "waited for) and peak RSS: medians of $(wc -l < "$TMP/pd.perf") perf and $(wc -l < "$TMP/pd.warm") gsymprof runs, alternating. perf's dwarf stack copies are"
  md "8 KiB: both tools stop where a copy ends (gsymprof's summary counts those stacks as truncated, unwind_stack_copy_too_small)."
  md "perf's CPU (in parentheses) is perf's alone: the addr2line processes doing its inline work (busy most of the run) are not"
  md "children it waits for, so GNU time cannot count them; compare wall times."
  md
  md "| tool | samples | folded lines | wall s | CPU s | peak RSS MB | perf / this (wall) |"
  md "|---|---:|---:|---:|---:|---:|---:|"
  md "| perf script --inline | $perf_samples | - | $(fmt "$perf_s" 2) | (${perf_cpu}) | $(fmt "$(ratio "$perf_rss" 1024 1)" 0) | 1x |"
  md "| gsymprof symbolize, cold | $samples | $stacks | $(fmt "$cold" 2) | $(fmt "$cold_cpu" 2) | $(fmt "$(ratio "$cold_rss" 1024 1)" 0) | $(ratio "$perf_s" "$cold" 1)x |"
  md "| gsymprof symbolize, warm | $samples | $stacks | $(fmt "$warm" 3) | $(fmt "$warm_cpu" 2) | $(fmt "$(ratio "$warm_rss" 1024 1)" 0) | $(ratio "$perf_s" "$warm" 0)x |"
  write_section perfdata "$SECTION_MD"
}

# ----------------------------------------------------------------- stacks --

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

# ------------------------------------------------------------------ memory --

# memory_run KIND SECONDS OUT: profiles unique_stacks for SECONDS at 999 Hz;
# appends "maxrss_kb unique_stacks" to OUT (unique stacks: gsymprof's count;
# bpftrace's @ map entries; perf keeps every sample, so its count is the
# samples in perf.data).
memory_run() {
  local kind=$1 seconds=$2 out=$3 gen=$TMP/unique_stacks
  case $kind in
    gsymprof)
      /usr/bin/time -f '%M' -o "$TMP/mem.time" "$GSYMPROF" profile -F 999 -o "$TMP/mem.folded" \
        -- "$gen" "$seconds" 2> "$TMP/mem.err" || return 1
      echo "$(cat "$TMP/mem.time") $(sed -n 's/.*unique stacks: \([0-9]*\).*/\1/p' "$TMP/mem.err")" >> "$out" ;;
    perf-dwarf)
      /usr/bin/time -f '%M' -o "$TMP/mem.time" perf record -q --call-graph dwarf -F 999 -o "$TMP/mem.data" \
        -- "$gen" "$seconds" 2> "$TMP/mem.err" > /dev/null || return 1
      echo "$(cat "$TMP/mem.time") $(perf report -i "$TMP/mem.data" --stats 2>/dev/null |
        awk '/SAMPLE events:/ { print $3; exit }')" >> "$out" ;;
    bpftrace)
      /usr/bin/time -f '%M' -o "$TMP/mem.time" bpftrace -c "$gen $seconds" \
        -e 'profile:hz:999 /pid == cpid/ { @[ustack] = count(); }' > "$TMP/mem.out" 2> "$TMP/mem.err" || return 1
      echo "$(cat "$TMP/mem.time") $(grep -c '^@\[' "$TMP/mem.out")" >> "$out" ;;
  esac
}

# memory_system KIND SECONDS OUT: a system-wide profile of SECONDS at 999 Hz
# while this tree builds (make -j2 into a scratch build dir); appends
# "maxrss_kb unique_stacks_or_samples dropped" to OUT.
memory_system() {
  local kind=$1 seconds=$2 out=$3 tree=$TMP/tree-build
  rm -rf "$tree"
  setsid make -C "$ROOT" -j2 BUILD="$tree" all > /dev/null 2>&1 &
  local build=$!
  sleep 2
  case $kind in
    gsymprof)
      /usr/bin/time -f '%M' -o "$TMP/mem.time" "$GSYMPROF" profile -F 999 -d "$seconds" -o "$TMP/mem.folded" \
        2> "$TMP/mem.err"
      echo "$(cat "$TMP/mem.time") $(sed -n 's/.*unique stacks: \([0-9]*\).*/\1/p' "$TMP/mem.err")" \
        "$(sed -n 's/.*ringbuf_full \([0-9]*\).*/\1/p' "$TMP/mem.err")" >> "$out" ;;
    perf-dwarf)
      /usr/bin/time -f '%M' -o "$TMP/mem.time" perf record -q -a --call-graph dwarf -F 999 -o "$TMP/mem.data" \
        -- sleep "$seconds" 2> "$TMP/mem.err" > /dev/null
      echo "$(cat "$TMP/mem.time") $(perf report -i "$TMP/mem.data" --stats 2>/dev/null |
        awk '/SAMPLE events:/ { print $3; exit }') $(perf report -i "$TMP/mem.data" --stats 2>/dev/null |
        awk '/LOST events:/ { print $3; exit }')" >> "$out" ;;
    bpftrace)
      /usr/bin/time -f '%M' -o "$TMP/mem.time" timeout -s INT "$seconds" bpftrace \
        -e 'profile:hz:999 { @[comm, kstack, ustack] = count(); }' > "$TMP/mem.out" 2> "$TMP/mem.err"
      echo "$(cat "$TMP/mem.time") $(grep -c '^@\[' "$TMP/mem.out") -" >> "$out" ;;
  esac
  kill -- -"$build" 2> /dev/null
  wait "$build" 2> /dev/null
  rm -rf "$tree"
}

section_memory() {
  section_begin memory
  [[ $(id -u) -eq 0 ]] || { log "memory section needs root: skipped"; return 0; }
  cc -O2 -g -o "$TMP/unique_stacks" "$HERE/unique_stacks.c" || die "cannot build unique_stacks"
  local short=${MEMORY_SHORT_S:-10} long=${MEMORY_LONG_S:-40} kind r kinds=()
  for kind in gsymprof perf-dwarf bpftrace; do
    profiler_ready "$kind" && kinds+=("$kind") || log "profiler $kind not ready: skipped"
  done
  md "## Memory per unique stack (issue 11)"
  md
  machine_line
  md
  md "\`tests/bench/unique_stacks.c\` (a random walk through 64 functions, 8-31 calls deep: nearly every sample is a new stack) profiled at 999 Hz for ${short} s and ${long} s."
  md "KB per unique stack = (peak RSS after ${long} s - after ${short} s) / (unique stacks after ${long} s - after ${short} s): the slope, the profiler's fixed base removed."
  md "Medians of $ROUNDS alternating rounds (GSYM cache warm for gsymprof)."
  md
  md "| profiler | peak RSS ${short} s (MB) | peak RSS ${long} s (MB) | unique stacks ${short} s | unique stacks ${long} s | KB per unique stack |"
  md "|---|---:|---:|---:|---:|---:|"
  for kind in "${kinds[@]}"; do : > "$TMP/mem-$kind-short"; : > "$TMP/mem-$kind-long"; done
  [[ " ${kinds[*]} " == *" gsymprof "* ]] && memory_run gsymprof 1 "$TMP/mem-warmup"  # converts the GSYMs once
  for ((r = 0; r < ROUNDS; r++)); do
    for kind in "${kinds[@]}"; do
      memory_run "$kind" "$short" "$TMP/mem-$kind-short" || log "run failed: $kind ${short} s"
      memory_run "$kind" "$long" "$TMP/mem-$kind-long" || log "run failed: $kind ${long} s"
    done
  done
  for kind in "${kinds[@]}"; do
    local rss_s rss_l n_s n_l per
    rss_s=$(column "$TMP/mem-$kind-short" 1); rss_l=$(column "$TMP/mem-$kind-long" 1)
    n_s=$(column "$TMP/mem-$kind-short" 2); n_l=$(column "$TMP/mem-$kind-long" 2)
    per=$(awk -v a="$rss_s" -v b="$rss_l" -v m="$n_s" -v n="$n_l" 'BEGIN {
      if (a == "-" || b == "-" || m == "-" || n == "-" || n - m <= 0) print "-"; else printf("%.2f\n", (b - a) / (n - m)) }')
    md "| $kind | $(fmt "$(awk -v k="$rss_s" 'BEGIN { print (k == "-") ? "-" : k / 1024 }')" 1) | $(fmt "$(awk -v k="$rss_l" 'BEGIN { print (k == "-") ? "-" : k / 1024 }')" 1) | $(fmt "$n_s" 0) | $(fmt "$n_l" 0) | $per |"
    [[ $kind == gsymprof && $per != - ]] && awk -v p="$per" 'BEGIN { exit !(p > 2) }' &&
      log "gsymprof: $per KB per unique stack is above the 2 KB bound (issue 11)"
  done
  md
  md "perf keeps every sample (in perf.data, not in memory): its count is the samples; bpftrace's is its \`@[ustack]\` entries."
  local system_s=${MEMORY_SYSTEM_S:-60}
  if [[ $system_s != 0 ]]; then
    md
    md "System-wide, ${system_s} s at 999 Hz while this tree builds (\`make -j2\`, C++ compiles), one run each (medians of $ROUNDS):"
    md
    md "| profiler | peak RSS (MB) | unique stacks (perf: samples) | KB per unique stack, whole RSS | dropped |"
    md "|---|---:|---:|---:|---:|"
    for kind in "${kinds[@]}"; do : > "$TMP/memsys-$kind"; done
    for ((r = 0; r < ROUNDS; r++)); do
      for kind in "${kinds[@]}"; do memory_system "$kind" "$system_s" "$TMP/memsys-$kind"; done
    done
    for kind in "${kinds[@]}"; do
      local rss n dropped
      rss=$(column "$TMP/memsys-$kind" 1); n=$(column "$TMP/memsys-$kind" 2); dropped=$(column "$TMP/memsys-$kind" 3)
      md "| $kind | $(fmt "$(awk -v k="$rss" 'BEGIN { print (k == "-") ? "-" : k / 1024 }')" 1) | $(fmt "$n" 0) | $(awk -v k="$rss" -v n="$n" 'BEGIN { if (k == "-" || n == "-" || n == 0) print "-"; else printf("%.2f\n", k / n) }') | $dropped |"
    done
  fi
  write_section memory "$SECTION_MD"
}

# -------------------------------------------------------------------- tail --

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

# ------------------------------------------------------------- deepstacks --
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
# rule for both tools; GNU time's own samples are left out.
DEEP_START='^(_start|__libc_start_main.*|__libc_start_call_main|_dl_start)$'
deep_stats() {
  case $1 in
    gsymprof)
      perl -e 'my ($re) = $ARGV[0]; my ($s, $c, $d) = (0, 0, 0);
        open(my $in, "<", $ARGV[1]) or die;
        while (<$in>) { chomp; my ($line, $n) = /^(.*) (\d+)$/ or next;
          my ($comm, @f) = split(/;/, $line); next if $comm eq "time";
          @f = grep { !/_\[k\]$/ && !/_\[i\]$/ && $_ ne "[truncated]" } @f;
          $s += $n; $d += $n * @f; $c += $n if grep { /$re/ } @f }
        printf("%d %.1f %.1f\n", $s, $s ? 100 * $c / $s : 0, $s ? $d / $s : 0)' "$DEEP_START" "$TMP/deep.out" ;;
    perf-*)
      perf script -i "$TMP/perf.data" -F comm,ip,sym,dso --no-inline 2>/dev/null | awk -v re="$DEEP_START" '
        function end_sample() { if (inside && comm != "time") { s++; d += depth; if (start) c++ } inside = 0; depth = 0; start = 0 }
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
  local fn
  fn=$(awk '$3 == "perf_swevent_hrtimer" { print $1; exit }' /proc/kallsyms)
  [[ -n $fn && $fn != 0000000000000000 ]] || return 0
  bpftrace -e "tracepoint:timer:hrtimer_expire_entry /cpu == $DEEP_CPU && (uint64)args->function == 0x$fn/ { @start = nsecs; @timer = (uint64)args->hrtimer; }
    tracepoint:timer:hrtimer_expire_exit /cpu == $DEEP_CPU && @start && (uint64)args->hrtimer == @timer/ { @ns = stats(nsecs - @start); @start = 0; }" \
    > "$TMP/deep.trace" 2>&1 &
  DEEP_TRACE_PID=$!
  local i
  for ((i = 0; i < 100; i++)); do grep -qs '^Attaching' "$TMP/deep.trace" && return 0; sleep 0.1; done
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
# is charged) from GNU time around the workload alone.
deep_run() {
  local result=$1 kind=$2 hz=$3 name=$4 stats=${5:-yes}
  deep_workload "$name"
  rm -f "$TMP/deep.work" "$TMP/deep.prof" "$TMP/deep.out" "$TMP/deep.err" "$TMP/perf.data"
  local inner=(taskset -c "$DEEP_CPU" /usr/bin/time -f '%U %S' -o "$TMP/deep.work" "${DEEP_CMD[@]}")
  local outer=(taskset -c 0 /usr/bin/time -f '%U %S' -o "$TMP/deep.prof")
  [[ $kind == none ]] || deep_callback_start
  case $kind in
    none) "${inner[@]}" < "$DEEP_STDIN" > /dev/null 2>&1 ;;
    gsymprof)
      "${outer[@]}" "$GSYMPROF" profile -F "$hz" -o "$TMP/deep.out" -- "${inner[@]}" \
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
  md "- *workload µs*: (workload CPU - the same round's unprofiled CPU) / samples, user+sys from GNU time, median (min-max): everything"
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
    /usr/bin/time -f '%U %S %M' -o "$TMP/deep.prof" "$GSYMPROF" profile -F 999 -d 20 -o "$TMP/deep.out" 2> "$TMP/deep.err"
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
  write_section deepstacks "$SECTION_MD"
}

# ------------------------------------------------------------------- main --

sections=("$@")
[[ ${#sections[@]} -gt 0 ]] || sections=(lookup convert profile symbolize perfdata stacks deepstacks memory tail)
for s in "${sections[@]}"; do
  case $s in
    lookup | convert | profile | symbolize | perfdata | stacks | deepstacks | memory | tail) ;;
    *) echo "usage: tests/bench/run.sh [lookup] [convert] [profile] [symbolize] [perfdata] [stacks] [deepstacks] [memory] [tail]" >&2; exit 2 ;;
  esac
done
command -v /usr/bin/time >/dev/null || die "GNU time missing (scripts/install-deps.sh --bench)"
gsymprof_ready || log "$GSYMPROF not built: sections measure the peers only where ours is missing"
for s in "${sections[@]}"; do
  log "== $s"
  "section_$s"
done
log "results in $RESULTS"
