# tests/bench/sections/convert.sh - the `convert` section of tests/bench/run.sh:
# gsymprof gsym convert vs llvm-gsymutil --convert.
# Sourced by run.sh after tests/bench/common.sh; defines section_convert.
# shellcheck shell=bash

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
  md "Wall time is noisy here (shared machine); CPU = user+sys of the whole process; \"ours / LLVM CPU\" = the median of the per-round ratios"
  md "(each round runs both, one after the other). \"same bytes\" = ours with 1 thread and default threads wrote identical files;"
  md "\"= LLVM\" = ours is byte-identical to LLVM's file (1-thread rows: LLVM's multi-threaded output is not reproducible)."
  md
  md "| input | DWARF MiB | threads | LLVM wall s | ours wall s | LLVM / ours wall | LLVM CPU s | ours CPU s | ours / LLVM CPU | LLVM RSS MB | ours RSS MB | LLVM size KB | ours size KB | same bytes | = LLVM |"
  md "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
  local ours=0
  subcommand_works gsym convert && ours=1
  [[ $ours == 1 ]] || log "gsymprof gsym convert not ready: LLVM column only"
  local inputs=("sqlite3 shell|$SQLITE/sqlite3-fp" "sqlite3 shell (clang 14, DWARF 5)|$SQLITE/sqlite3-clang"
                "cppcheck|$CPPCHECK/cppcheck" "cppcheck testrunner|$CPPCHECK/testrunner")
  # clang's largest library: Debian ships it without DWARF or .symtab (the
  # debug file is in a dbgsym package this machine cannot reach), so the
  # row converts its .dynsym; llvm-gsymutil reads only .symtab and refuses.
  local libllvm
  libllvm=$(ls /usr/lib/x86_64-linux-gnu/libLLVM.so.[0-9]* 2>/dev/null | sort -V | tail -n 1)
  if [[ -n $libllvm ]]; then inputs+=("clang's largest library ($(basename "$libllvm"), symbols only)|$libllvm")
  else log "no libLLVM.so (clang's largest library) installed: row skipped"; fi
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
      [[ -s $out/llvm.gsym ]] && lsize=$(( $(stat -c %s "$out/llvm.gsym") / 1024 ))
      if [[ -f $out/ours.gsym ]]; then
        osize=$(( $(stat -c %s "$out/ours.gsym") / 1024 ))
        if [[ $threads == 1 && -s $out/llvm.gsym ]]; then
          cmp -s "$out/ours.gsym" "$out/llvm.gsym" && as_llvm=yes || as_llvm=no
        fi
        if [[ $threads == 1 ]]; then cp "$out/ours.gsym" "$out/ours-t1.gsym"
        elif [[ -f $out/ours-t1.gsym ]]; then cmp -s "$out/ours.gsym" "$out/ours-t1.gsym" && same=yes || same="**no**"; fi
      fi
      local lw ow lc oc lr or
      lw=$(column "$out/llvm.m" 1); ow=$(column "$out/ours.m" 1)
      lc=$(column "$out/llvm.m" 2); oc=$(column "$out/ours.m" 2)
      lr=$(column "$out/llvm.m" 3); or=$(column "$out/ours.m" 3)
      if awk '$4 != 0 { bad = 1 } END { exit !bad }' "$out/llvm.m"; then
        lw=refused lr=-   # a failed run's time is no conversion's
      fi
      [[ $lr != - ]] && lr=$(awk -v k="$lr" 'BEGIN { printf("%.0f", k / 1024) }')
      [[ $or != - ]] && or=$(awk -v k="$or" 'BEGIN { printf("%.0f", k / 1024) }')
      local lw_cell lc_cell ratio_cell cpu_ratio_cell=-
      lw_cell=$(fmt "$lw" 3) lc_cell=$(fmt "$lc" 3) ratio_cell="$(ratio "$lw" "$ow" 2)x"
      if [[ -s $out/ours.m ]]; then  # rounds line up: the two files are written in turn
        local per_round
        per_round=$(paste -d' ' "$out/ours.m" "$out/llvm.m" | awk '$6 > 0 { print $2 / $6 }' | median)
        [[ $per_round != - ]] && cpu_ratio_cell="$(fmt "$per_round" 3)x"
      fi
      [[ $lw == refused ]] && { lw_cell=refused lc_cell=refused ratio_cell=- cpu_ratio_cell=-; }
      md "| $label | $mb | $threads | $lw_cell | $(fmt "$ow" 3) | $ratio_cell | $lc_cell | $(fmt "$oc" 3) | $cpu_ratio_cell | $lr | $or | $lsize | $osize | $same | $as_llvm |"
    done
    rm -f "$out/ours-t1.gsym"
  done
  write_section convert "$SECTION_MD"
}
