# tests/bench/sections/lookup.sh - the `lookup` section of tests/bench/run.sh:
# gsym::Reader vs LLVM 22 GsymReader, in process and whole process.
# Sourced by run.sh after tests/bench/common.sh; defines section_lookup.
# shellcheck shell=bash

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
