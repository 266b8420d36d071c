# tests/bench/sections/rust_peers.sh - the `rust_peers` section of
# tests/bench/run.sh (issue 31.4): gsymprof's GSYM reader and converter
# against the published Rust crates gsym-rs (its reader, and its gsymtool
# command) and blazesym (its symbolizer over a GSYM file, and over the ELF
# file with its DWARF, its usual input), on the same GSYM files and address
# lists as the lookup section, runs alternating, medians (min-max).
# The crates are pinned in tests/bench/rust_peers/Cargo.toml and Cargo.lock
# (gsymtool: `cargo install --locked` of the same gsym-rs version) and built
# with cargo into $CARGO_TARGET (default $BENCH_DIR/cargo-target), reused
# between runs; when cargo or the registry is missing the section says so
# and skips.
# RUST_PEERS_TABLES picks tables (default "inproc whole elf convert");
# RUST_PEERS_REPEAT (default 10): runs per timed process for the short
# whole-process commands (measure_n).
# Sourced by run.sh after tests/bench/common.sh; defines section_rust_peers.
# shellcheck shell=bash

RUST_PEERS_SRC=$HERE/rust_peers
CARGO_TARGET=${CARGO_TARGET:-$BENCH_DIR/cargo-target}
RUST_PEERS_TABLES=${RUST_PEERS_TABLES:-inproc whole elf convert}
RUST_PEERS_REPEAT=${RUST_PEERS_REPEAT:-10}
rp_table() { [[ " $RUST_PEERS_TABLES " == *" $1 "* ]]; }
# The lookup section's GSYM files, harnesses and address lists.
# shellcheck source=tests/bench/sections/lookup.sh
source "$HERE/sections/lookup.sh"
# libc_debug_file, dwarf_megabytes
# shellcheck source=tests/bench/sections/convert.sh
source "$HERE/sections/convert.sh"

# Version of crate $1 in the pinned Cargo.lock.
locked_version() {
  awk -v c="$1" '$0 == "name = \"" c "\"" { getline; gsub(/[^0-9.]/, ""); print; exit }' "$RUST_PEERS_SRC/Cargo.lock"
}

# Builds rust_peers and gsymtool; sets RUST_PEERS and GSYMTOOL ("" when
# they cannot be built, with the reason on stderr).
build_rust_peers() {
  RUST_PEERS="" GSYMTOOL=""
  local cargo
  cargo=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
  [[ -x $cargo ]] || { log "cargo not installed (rustup or Debian's cargo): Rust peers skipped"; return 1; }
  mkdir -p "$CARGO_TARGET"
  if ! CARGO_TARGET_DIR=$CARGO_TARGET nice -n 10 "$cargo" build --quiet --release --locked \
        --manifest-path "$RUST_PEERS_SRC/Cargo.toml" 2>"$TMP/cargo.err"; then
    log "cargo could not build tests/bench/rust_peers (registry refused or offline?): Rust peers skipped: $(tail -n 3 "$TMP/cargo.err")"
    return 1
  fi
  RUST_PEERS=$CARGO_TARGET/release/rust_peers
  local v root
  v=$(locked_version gsym-rs)
  root=$BENCH_DIR/gsymtool-$v
  if [[ ! -x $root/bin/gsymtool ]] &&
     ! CARGO_TARGET_DIR=$CARGO_TARGET nice -n 10 "$cargo" install --quiet --locked gsym-rs --version "=$v" \
         --root "$root" 2>"$TMP/cargo-install.err"; then
    log "cargo install gsym-rs $v failed: gsymtool rows skipped: $(tail -n 3 "$TMP/cargo-install.err")"
  fi
  [[ -x $root/bin/gsymtool ]] && GSYMTOOL=$root/bin/gsymtool
  return 0
}

# ns=... of the lines starting with "$2" in file $1, one per line.
ns_of() { grep "^$2 " "$1" | sed 's/.*ns=\([0-9.]*\).*/\1/'; }

# "equal" / "N of M differ" between two answer files.
answers_vs() {
  [[ -s $1 && -s $2 ]] || { echo "-"; return; }
  local n d
  n=$(wc -l < "$1")
  d=$(diff "$1" "$2" | grep -c '^<')
  if [[ $d == 0 ]]; then echo "equal ($n)"; else echo "**$d of $n differ**"; fi
}

# A small working set, cache-hot: the first 64 addresses of list $1
# repeated to $LOOKUP_COUNT.
make_hot_list() {
  local from=$1 out=$2
  [[ -s $out ]] && return 0
  head -n 64 "$from" > "$TMP/hot64"
  awk -v n="$LOOKUP_COUNT" '{ a[NR] = $0 } END { for (i = 0; i < n; i++) print a[i % NR + 1] }' "$TMP/hot64" > "$out"
}

section_rust_peers() {
  section_begin rust_peers
  corpus sqlite3
  build_lookup_harnesses
  md "## gsym-rs and blazesym (issue 31.4)"
  md
  machine_line
  md
  if ! build_rust_peers; then
    md "Skipped: the Rust peers could not be built here (see the log line above)."
    write_section rust_peers "$SECTION_MD"
    return 0
  fi
  local v_gsym v_blaze
  v_gsym=$(locked_version gsym-rs); v_blaze=$(locked_version blazesym)
  md "Peers: gsym-rs $v_gsym (crate \`gsym-rs\`, its reader, and its \`gsymtool\` built by \`cargo install --locked\`), blazesym $v_blaze"
  md "(features dwarf, gsym, zlib; demangling off, so names compare as stored), pinned in \`tests/bench/rust_peers/Cargo.lock\`, built by $(rustc --version 2>/dev/null || echo rustc) with \`--release\`;"
  md "LLVM 22's \`llvm-gsymutil\` beside them. Same LLVM-written GSYM file and the same $LOOKUP_COUNT addresses for every reader;"
  md "ns/lookup = thread CPU time per address, each process the median of >=3 passes after a warm-up pass, then median (min-max) of $ROUNDS alternating processes."
  md "Lists: *hot* = the first 64 addresses of the zipf list repeated (a cache-hot loop); *uniform* = random addresses, every byte of every function equally likely;"
  md "*zipf* = functions ranked at random, rank k weighted 1/k^1.1; *profile* = every frame address of a \`perf record -g\` profile (sqlite3 shell running speedtest1's SQL)."
  md "Full = name, file, line and the inline chain. gsym-rs: \`for_each_frame\` with a reused \`LookupScratch\` (its allocation-free path);"
  md "blazesym: one batch \`Symbolizer::symbolize\` of the whole list per pass, the symbolizer (and its open file) reused."
  md "answers: gsym-rs = equal checksum over every frame (name, directory, basename, line, offset), as the lookup section;"
  md "blazesym reports no per-frame offset, so its answers are compared as text: each frame's name and basename:line, innermost first."
  md

  local programs=(sqlite3 libc)
  declare -A elf=([sqlite3]=$SQLITE/sqlite3-fp)
  local libc_dbg
  if libc_dbg=$(libc_debug_file); then elf[libc]=$libc_dbg
  else log "libc debug file not found (install libc6-dbg): libc rows skipped"; programs=(sqlite3); fi
  if [[ -x $CPPCHECK/cppcheck ]]; then programs+=(cppcheck); elf[cppcheck]=$CPPCHECK/cppcheck
  else log "cppcheck not in the corpus (tests/bench/build-corpus.sh cppcheck): its rows skipped"; fi
  set_cppcheck_workload
  # gsymtool converts an executable; a separate debug file (libc's) is given
  # with --debug beside the library it belongs to.
  declare -A gt_input=([sqlite3]=${elf[sqlite3]})
  [[ -n ${elf[libc]:-} ]] && gt_input[libc]="/lib/x86_64-linux-gnu/libc.so.6 --debug ${elf[libc]}"
  [[ -n ${elf[cppcheck]:-} ]] && gt_input[cppcheck]=${elf[cppcheck]}

  local name kind r list gsym
  for name in "${programs[@]}"; do
    gsym=$(llvm_gsym "${elf[$name]}" "$name")
    make_address_lists "$name" "$gsym"
    make_hot_list "$WORK/$name.zipf.addrs" "$WORK/$name.hot.addrs"
  done

  if rp_table inproc; then
  md "### In process, ns per address"
  md
  md "| program | addresses | ours full | gsym-rs full | blazesym (GSYM) full | gsym-rs / ours | blazesym / ours | ours names | gsym-rs names | blazesym names | answers gsym-rs | answers blazesym |"
  md "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
  for name in "${programs[@]}"; do
    gsym=$WORK/$name.llvm.gsym
    for kind in hot uniform zipf profile; do
      list=$WORK/$name.$kind.addrs
      [[ -s $list ]] || continue
      local res=$TMP/rp-$name-$kind
      : > "$res.ours"; : > "$res.grs"; : > "$res.blz"
      for ((r = 0; r < ROUNDS; r++)); do
        [[ $OURS_LOOKUP_READY == 1 ]] && { "$BIN/lookup_bench" "$gsym" "$list" >> "$res.ours" || log "lookup_bench failed on $name/$kind"; }
        "$RUST_PEERS" gsym-rs "$gsym" "$list" >> "$res.grs" || log "rust_peers gsym-rs failed on $name/$kind"
        "$RUST_PEERS" blazesym-gsym "$gsym" "$list" >> "$res.blz" || log "rust_peers blazesym-gsym failed on $name/$kind"
      done
      local of gf bf on gn bn
      of=$(ns_of "$res.ours" "ours into-full" | median); gf=$(ns_of "$res.grs" "gsym-rs into-full" | median)
      bf=$(ns_of "$res.blz" "blazesym-gsym warm-full" | median)
      on=$(ns_of "$res.ours" "ours into-names" | median); gn=$(ns_of "$res.grs" "gsym-rs into-names" | median)
      bn=$(ns_of "$res.blz" "blazesym-gsym warm-names" | median)
      local ours_sum grs_sum a_grs a_blz
      ours_sum=$(grep '^ours into-full' "$res.ours" | grep -o 'checksum=[0-9a-f]*' | sort -u | tr '\n' ' ')
      grs_sum=$(grep '^gsym-rs into-full' "$res.grs" | grep -o 'checksum=[0-9a-f]*' | sort -u | tr '\n' ' ')
      if [[ -z $ours_sum || -z $grs_sum ]]; then a_grs="-"
      elif [[ $ours_sum == "$grs_sum" ]]; then a_grs="equal"; else a_grs="**differ**"; fi
      "$BIN/lookup_bench" --answers "$gsym" "$list" > "$res.ours.txt" 2>/dev/null
      "$RUST_PEERS" answers blazesym-gsym "$gsym" "$list" > "$res.blz.txt" 2>/dev/null
      a_blz=$(answers_vs "$res.ours.txt" "$res.blz.txt")
      md "| $name | $kind | $(ns_of "$res.ours" "ours into-full" | spread) | $(ns_of "$res.grs" "gsym-rs into-full" | spread) | $(ns_of "$res.blz" "blazesym-gsym warm-full" | spread) | $(ratio "$gf" "$of" 1)x | $(ratio "$bf" "$of" 1)x | $(fmt "$on") | $(fmt "$gn") | $(fmt "$bn") | $a_grs | $a_blz |"
    done
  done

  fi
  if rp_table whole; then
  md
  md "### Whole process: each tool's lookup command"
  md
  md "The list's addresses in one process: \`gsymprof gsym lookup GSYM < list\`, \`gsymtool lookup --no-call-sites GSYM ADDR...\` (addresses as arguments: it reads no stdin),"
  md "\`llvm-gsymutil --addresses-from-stdin\`; output to /dev/null. CPU seconds (user+sys) per run, each timed process $RUST_PEERS_REPEAT runs in a row, median (min-max) of $ROUNDS alternating ones; wall medians beside them."
  md
  md "| program | addresses | ours CPU s | gsymtool CPU s | LLVM CPU s | gsymtool / ours | LLVM / ours | ours wall s | gsymtool wall s | LLVM wall s |"
  md "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  for name in "${programs[@]}"; do
    gsym=$WORK/$name.llvm.gsym
    for kind in uniform profile; do
      list=$WORK/$name.$kind.addrs
      [[ -s $list ]] || continue
      awk -v g="$gsym" '{ print $1, g }' "$list" > "$TMP/llvm-stdin"
      mapfile -t addr_args < "$list"
      : > "$TMP/wp.ours"; : > "$TMP/wp.gt"; : > "$TMP/wp.llvm"
      for ((r = 0; r < ROUNDS; r++)); do
        MEASURE_STDIN=$list measure_n "$RUST_PEERS_REPEAT" "$TMP/wp.ours" "$GSYMPROF" gsym lookup "$gsym" > /dev/null || log "gsymprof gsym lookup failed on $name/$kind"
        [[ -n $GSYMTOOL ]] && { measure_n "$RUST_PEERS_REPEAT" "$TMP/wp.gt" "$GSYMTOOL" lookup --no-call-sites "$gsym" "${addr_args[@]}" > /dev/null || log "gsymtool lookup failed on $name/$kind"; }
        MEASURE_STDIN=$TMP/llvm-stdin measure_n "$RUST_PEERS_REPEAT" "$TMP/wp.llvm" "$LLVM_GSYMUTIL" --addresses-from-stdin > /dev/null
      done
      local oc gc lc
      oc=$(column "$TMP/wp.ours" 2); gc=$(column "$TMP/wp.gt" 2); lc=$(column "$TMP/wp.llvm" 2)
      md "| $name | $kind | $(awk '{ print $2 }' "$TMP/wp.ours" | spread 3) | $(awk '{ print $2 }' "$TMP/wp.gt" | spread 3) | $(awk '{ print $2 }' "$TMP/wp.llvm" | spread 3) | $(ratio "$gc" "$oc" 1)x | $(ratio "$lc" "$oc" 1)x | $(fmt "$(column "$TMP/wp.ours" 1)" 3) | $(fmt "$(column "$TMP/wp.gt" 1)" 3) | $(fmt "$(column "$TMP/wp.llvm" 1)" 3) |"
    done
  done

  fi
  if rp_table elf; then
  md
  md "### blazesym from ELF + DWARF vs gsymprof's GSYM path, cold and warm"
  md
  md "The *profile* list (a real profile's addresses; libc has none: *zipf*) and the *uniform* list symbolized from the program itself."
  md "Cold, whole process, per run ($RUST_PEERS_REPEAT runs per timed process): blazesym = \`rust_peers answers blazesym-elf ELF list\` (a new Symbolizer reads the ELF and its DWARF, symbolizes the list, prints it);"
  md "ours = \`gsymprof gsym convert ELF --threads 1\` + \`gsymprof gsym lookup\` of the new file (the conversion a cold GSYM cache pays once per build ID),"
  md "ours cached = \`gsymprof gsym lookup\` alone (the GSYM already cached, as on every later profile). blazesym in process = its first batch in a new Symbolizer (thread CPU)."
  md "Warm, in process (ns/address): blazesym's Symbolizer after its first batch vs our Reader's lookup_into. answers: blazesym's text vs ours (lookup_bench --answers on our own conversion)."
  md
  md "| program | list | blazesym cold wall s | blazesym cold CPU s | ours cold CPU s (convert + lookup) | blazesym / ours cold CPU | ours cached CPU s | blazesym cold / ours cached CPU | blazesym first batch in process ms | blazesym warm ns | ours warm ns | blazesym / ours warm | answers |"
  md "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
  for name in "${programs[@]}"; do
    local e=${elf[$name]} og=$TMP/ours-$name.gsym first=profile
    [[ -s $WORK/$name.profile.addrs ]] || first=zipf
    rm -f "$og"
    "$GSYMPROF" gsym convert "$e" --threads 1 -o "$og" >/dev/null 2>&1 || log "gsymprof gsym convert failed on $name"
    for kind in "$first" uniform; do
      list=$WORK/$name.$kind.addrs
      : > "$TMP/bz.cold"; : > "$TMP/ours.cv"; : > "$TMP/ours.lk"; : > "$TMP/ours.cached"; : > "$TMP/bz.warm"; : > "$TMP/ours.warm"
      for ((r = 0; r < ROUNDS; r++)); do
        measure_n "$RUST_PEERS_REPEAT" "$TMP/bz.cold" "$RUST_PEERS" answers blazesym-elf "$e" "$list" > /dev/null || log "blazesym-elf failed on $name"
        measure_n "$RUST_PEERS_REPEAT" "$TMP/ours.cv" "$GSYMPROF" gsym convert "$e" --threads 1 -o "$og" >/dev/null 2>&1 || log "gsymprof gsym convert failed on $name"
        MEASURE_STDIN=$list measure_n "$RUST_PEERS_REPEAT" "$TMP/ours.cached" "$GSYMPROF" gsym lookup "$og" > /dev/null
        "$RUST_PEERS" blazesym-elf "$e" "$list" >> "$TMP/bz.warm" 2>/dev/null
        [[ $OURS_LOOKUP_READY == 1 ]] && "$BIN/lookup_bench" "$og" "$list" >> "$TMP/ours.warm"
      done
      # cold = conversion + a lookup of the list, paired round by round
      paste -d' ' "$TMP/ours.cv" "$TMP/ours.cached" | awk '{ print $2 + $6 }' > "$TMP/ours.cold"
      local bc occ ocs bw ow
      bc=$(column "$TMP/bz.cold" 2); occ=$(median < "$TMP/ours.cold"); ocs=$(column "$TMP/ours.cached" 2)
      bw=$(ns_of "$TMP/bz.warm" "blazesym-elf warm-full" | median); ow=$(ns_of "$TMP/ours.warm" "ours into-full" | median)
      "$RUST_PEERS" answers blazesym-elf "$e" "$list" > "$TMP/bz-elf.txt" 2>/dev/null
      "$BIN/lookup_bench" --answers "$og" "$list" > "$TMP/ours-elf.txt" 2>/dev/null
      md "| $name | $kind | $(fmt "$(column "$TMP/bz.cold" 1)" 3) | $(awk '{ print $2 }' "$TMP/bz.cold" | spread 3) | $(spread 3 < "$TMP/ours.cold") | $(ratio "$bc" "$occ" 2)x | $(awk '{ print $2 }' "$TMP/ours.cached" | spread 3) | $(ratio "$bc" "$ocs" 1)x | $(grep -o 'cold cpu_ms=[0-9.]*' "$TMP/bz.warm" | sed 's/.*=//' | spread 1) | $(ns_of "$TMP/bz.warm" "blazesym-elf warm-full" | spread) | $(ns_of "$TMP/ours.warm" "ours into-full" | spread) | $(ratio "$bw" "$ow" 1)x | $(answers_vs "$TMP/ours-elf.txt" "$TMP/bz-elf.txt") |"
    done
  done
  fi
  if rp_table convert; then
  md
  md "### Conversion: ELF/DWARF -> GSYM"
  md
  md "\`gsymprof gsym convert X -o OUT\` (\`--threads 1\`, and default threads), \`gsymtool convert X -o OUT\` (one input: one thread; its \`--jobs\` spreads inputs, not one file;"
  md "libc: \`gsymtool convert libc.so.6 --debug DEBUGFILE\`, as it refuses a debug file alone: no executable sections), \`llvm-gsymutil --convert X --num-threads=1\` (and default)."
  md "CPU seconds per run, median (min-max) of $ROUNDS alternating timed processes of $RUST_PEERS_REPEAT runs each (3 for cppcheck); wall and peak RSS medians."
  md "answers: the uniform list looked up by lookup_bench in gsymtool's file vs in ours (checksum over every frame; else the text answers compared); size in KB."
  md
  md "| input | DWARF MiB | ours 1T CPU s | gsymtool CPU s | LLVM 1T CPU s | gsymtool / ours | LLVM / ours | ours 1T wall s | gsymtool wall s | LLVM 1T wall s | ours default wall s | LLVM default wall s | RSS MB ours / gsymtool / LLVM | KB ours / gsymtool | answers |"
  md "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"
  for name in "${programs[@]}"; do
    local e=${elf[$name]} out=$TMP/cv-$name rep=$RUST_PEERS_REPEAT gt_args
    [[ $name == cppcheck ]] && rep=3
    read -ra gt_args <<< "${gt_input[$name]}"
    mkdir -p "$out"
    for f in ours gt llvm oursN llvmN; do : > "$out/$f.m"; done
    for ((r = 0; r < ROUNDS; r++)); do
      rm -f "$out"/*.gsym
      measure_n "$rep" "$out/ours.m" "$GSYMPROF" gsym convert "$e" --threads 1 -o "$out/ours.gsym" >/dev/null 2>&1
      [[ -n $GSYMTOOL ]] && DEBUGINFOD_URLS="" measure_n "$rep" "$out/gt.m" "$GSYMTOOL" --quiet convert "${gt_args[@]}" -o "$out/gt.gsym" >/dev/null 2>&1
      measure_n "$rep" "$out/llvm.m" "$LLVM_GSYMUTIL" --convert "$e" --num-threads=1 --quiet -o "$out/llvm.gsym" >/dev/null 2>&1
      measure_n "$rep" "$out/oursN.m" "$GSYMPROF" gsym convert "$e" -o "$out/oursN.gsym" >/dev/null 2>&1
      measure_n "$rep" "$out/llvmN.m" "$LLVM_GSYMUTIL" --convert "$e" --quiet -o "$out/llvmN.gsym" >/dev/null 2>&1
    done
    local oc gc lc mb rss sizes ans="-"
    oc=$(column "$out/ours.m" 2); gc=$(column "$out/gt.m" 2); lc=$(column "$out/llvm.m" 2)
    mb=$(dwarf_megabytes "$e")
    mbs() { awk -v k="$(column "$1" 3)" 'BEGIN { if (k == "-") print "-"; else printf("%.0f", k / 1024) }'; }
    rss="$(mbs "$out/ours.m") / $(mbs "$out/gt.m") / $(mbs "$out/llvm.m")"
    sizes="$(( $(stat -c %s "$out/ours.gsym" 2>/dev/null || echo 0) / 1024 )) / $(( $(stat -c %s "$out/gt.gsym" 2>/dev/null || echo 0) / 1024 ))"
    if [[ -s $out/gt.gsym && -s $out/ours.gsym && $OURS_LOOKUP_READY == 1 ]]; then
      local s1 s2
      s1=$("$BIN/lookup_bench" "$out/ours.gsym" "$WORK/$name.uniform.addrs" 1 0 | grep -o 'checksum=[0-9a-f]*' | head -n 1)
      s2=$("$BIN/lookup_bench" "$out/gt.gsym" "$WORK/$name.uniform.addrs" 1 0 | grep -o 'checksum=[0-9a-f]*' | head -n 1)
      if [[ $s1 == "$s2" ]]; then ans=equal
      else
        "$BIN/lookup_bench" --answers "$out/ours.gsym" "$WORK/$name.uniform.addrs" > "$out/a1" 2>/dev/null
        "$BIN/lookup_bench" --answers "$out/gt.gsym" "$WORK/$name.uniform.addrs" > "$out/a2" 2>/dev/null
        ans="checksums differ; text: $(answers_vs "$out/a1" "$out/a2")"
      fi
    fi
    md "| $name | $mb | $(awk '{ print $2 }' "$out/ours.m" | spread 3) | $(awk '{ print $2 }' "$out/gt.m" | spread 3) | $(awk '{ print $2 }' "$out/llvm.m" | spread 3) | $(ratio "$gc" "$oc" 2)x | $(ratio "$lc" "$oc" 2)x | $(fmt "$(column "$out/ours.m" 1)" 3) | $(fmt "$(column "$out/gt.m" 1)" 3) | $(fmt "$(column "$out/llvm.m" 1)" 3) | $(fmt "$(column "$out/oursN.m" 1)" 3) | $(fmt "$(column "$out/llvmN.m" 1)" 3) | $rss | $sizes | $ans |"
    rm -rf "$out"
  done
  fi
  write_section rust_peers "$SECTION_MD"
}
