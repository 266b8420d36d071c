#!/bin/bash
# Offline symbolization of a hand-written capture against a real -O2 -g
# program, with llvm-symbolizer (DWARF) as the oracle for inline chains:
#  1. every address of the fixture's hot function symbolizes to exactly
#     llvm-symbolizer's chain, root first, inlined frames marked _[i];
#  2. the same capture after the binary was rebuilt (new build ID) with only
#     the new GSYM available: every frame is fixture+0xOFFSET (file offset),
#     and stderr says why (no GSYM for the old ID, the file has another ID);
#  3. with the binary gone: "file missing".
# No root, no BPF: the capture is built from the ELF's own program headers.
# Non-PIE, so a file offset (0x1xxx) cannot be confused with an address.
set -u
GSYMPROF=${GSYMPROF:-build/gsymprof}
SYMBOLIZER=/usr/lib/llvm-22/bin/llvm-symbolizer
[[ -x $GSYMPROF ]] || { echo "skip: $GSYMPROF not built"; exit 77; }
[[ -x $SYMBOLIZER ]] || { echo "skip: $SYMBOLIZER missing"; exit 77; }
command -v gcc >/dev/null || { echo "skip: no gcc"; exit 77; }

tmp=$(mktemp -d)
trap '[[ -n ${KEEP:-} ]] && echo "kept $tmp" || rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export GSYMPROF_CACHE=$tmp/cache  # never touch the machine's cache

cat > "$tmp/fixture.c" <<'EOF'
static inline __attribute__((always_inline)) int square(int x) { return x * x + (x >> 3); }
static inline __attribute__((always_inline)) int pair(int x) { return square(x) ^ square(x + 7); }
__attribute__((noinline)) int hot(int n) {
  int s = 0;
  for (int i = 0; i < n; i++) s += pair(i) + (s >> 5);
  return s;
}
int main(int argc, char** argv) { (void)argv; return hot(argc * 100000) & 1; }
EOF
build() {  # build-id
  gcc -O2 -g -fno-omit-frame-pointer -no-pie -Wl,--build-id="$1" -o "$tmp/fixture" "$tmp/fixture.c" ||
    fail "cannot compile the fixture"
}
build 0x5eed0001aa00000000000000000000000000cafe
old_id=5eed0001aa00000000000000000000000000cafe
got_id=$(readelf -n "$tmp/fixture" | awk '/Build ID:/ {print $3}')
[[ $got_id == "$old_id" ]] || fail "fixture build ID is '$got_id', expected $old_id"

# The executable PT_LOAD, mapped at a made-up load bias.
read -r seg_offset seg_vaddr seg_memsz < <(readelf -lW "$tmp/fixture" |
  awk '$1 == "LOAD" && / R E / {print $2, $3, $6; exit}')
[[ -n ${seg_vaddr:-} ]] || fail "no executable PT_LOAD in the fixture"
bias=0  # non-PIE: unslid == runtime, and the file offset differs from both
map_start=$((bias + (seg_vaddr & ~0xfff)))
map_end=$((bias + ((seg_vaddr + seg_memsz + 0xfff) & ~0xfff)))
map_offset=$((seg_offset & ~0xfff))

# Every address of hot() that DWARF names (one stack each, comm = address).
read -r hot_start hot_size < <(nm -S "$tmp/fixture" | awk '$4 == "hot" {print $1, $2}')
[[ -n ${hot_start:-} ]] || fail "no symbol 'hot' in the fixture"
addresses=()
for ((a = 0x$hot_start; a < 0x$hot_start + 0x$hot_size; a++)); do addresses+=("$(printf '0x%x' $a)"); done

# Expected folded lines from llvm-symbolizer: innermost first -> root first.
"$SYMBOLIZER" --obj="$tmp/fixture" --inlining --functions=linkage --no-demangle "${addresses[@]}" \
  > "$tmp/oracle.txt" || fail "llvm-symbolizer failed"
awk -v addrs="${addresses[*]}" '
  BEGIN { n = split(addrs, a, " "); i = 1; depth = 0 }
  function flush(   line, k) {
    if (depth == 0) return
    line = a[i]
    for (k = depth; k >= 1; k--) line = line ";" names[k] (k < depth ? "_[i]" : "")
    print line " 1"
    depth = 0
  }
  /^$/ { flush(); i++; next }
  !/:[0-9]+:[0-9]+$/ && !/^\?\?:/ { names[++depth] = $0 }
  END { flush() }
' "$tmp/oracle.txt" | LC_ALL=C sort > "$tmp/expected.folded"
[[ $(wc -l < "$tmp/expected.folded") == "${#addresses[@]}" ]] ||
  fail "oracle gave $(wc -l < "$tmp/expected.folded") chains for ${#addresses[@]} addresses"
grep -q ';hot;pair_\[i\];square_\[i\] 1$' "$tmp/expected.folded" ||
  fail "fixture has no hot -> pair -> square inline chain (compiler changed?)"

{
  printf '{"format":"gsymprof-capture","version":1,"host":"h","kernel_release":"k",'
  printf '"frequency_hz":99,"start_time_unix_ns":0,"duration_ns":0,"call_graph":"fp",'
  printf '"samples":%d,"lost":{},' "${#addresses[@]}"
  printf '"modules":[{"path":"%s","build_id":"%s","load_bias":"0x%x",' "$tmp/fixture" "$old_id" "$bias"
  printf '"mappings":[{"start":"0x%x","end":"0x%x","file_offset":"0x%x","perms":"r-xp"}],"error":""}],' \
    "$map_start" "$map_end" "$map_offset"
  printf '"processes":[{"pid":1,"comm":"fixture","modules":[0]}],"stacks":['
  sep=
  for a in "${addresses[@]}"; do
    printf '%s{"pid":1,"comm":"%s","count":1,"truncated":false,"frames":[{"module":0,"address":"%s"}]}' \
      "$sep" "$a" "$a"
    sep=,
  done
  printf ']}\n'
} > "$tmp/capture.json"

# 1. GSYM from a --gsym-dir under an arbitrary name.
mkdir -p "$tmp/gsyms"
"$GSYMPROF" gsym convert "$tmp/fixture" -o "$tmp/gsyms/whatever-name.gsym" > /dev/null 2> "$tmp/convert.log" ||
  fail "gsym convert failed"
"$GSYMPROF" symbolize "$tmp/capture.json" --gsym-dir "$tmp/gsyms" > "$tmp/got.folded" 2> "$tmp/stderr1" ||
  { cat "$tmp/stderr1"; fail "symbolize failed"; }
if ! diff -u "$tmp/expected.folded" "$tmp/got.folded" > "$tmp/diff1"; then
  head -40 "$tmp/diff1"
  fail "symbolized chains differ from llvm-symbolizer's"
fi
grep -q "whatever-name.gsym" "$tmp/stderr1" || { cat "$tmp/stderr1"; fail "report does not name the GSYM used"; }

# 2. Rebuilt binary (new build ID), only its GSYM available.
new_id=5eed0002bb00000000000000000000000000beef
build 0x$new_id
rm -rf "$tmp/gsyms" && mkdir "$tmp/gsyms"
"$GSYMPROF" gsym convert "$tmp/fixture" -o "$tmp/gsyms/new.gsym" > /dev/null 2> "$tmp/convert.log" || fail "gsym convert (new) failed"
"$GSYMPROF" symbolize "$tmp/capture.json" --gsym-dir "$tmp/gsyms" > "$tmp/got2.folded" 2> "$tmp/stderr2" ||
  { cat "$tmp/stderr2"; fail "symbolize (rebuilt) failed"; }
for a in "${addresses[@]}"; do
  printf '%s;fixture+0x%x 1\n' "$a" $((a + bias - map_start + map_offset))
done | LC_ALL=C sort > "$tmp/expected2.folded"
diff -u "$tmp/expected2.folded" "$tmp/got2.folded" > "$tmp/diff2" ||
  { head -20 "$tmp/diff2"; fail "rebuilt module: frames should be fixture+0xOFFSET"; }
grep -qF "no GSYM for build ID $old_id; build-ID mismatch (file has $new_id)" "$tmp/stderr2" ||
  { cat "$tmp/stderr2"; fail "rebuilt module: report should give both build IDs"; }
[[ -z $(ls -A "$tmp/cache" 2>/dev/null) ]] || fail "a GSYM with another build ID was cached"

# 3. Binary gone.
rm -f "$tmp/fixture"
"$GSYMPROF" symbolize "$tmp/capture.json" > "$tmp/got3.folded" 2> "$tmp/stderr3" ||
  { cat "$tmp/stderr3"; fail "symbolize (binary gone) failed"; }
diff -q "$tmp/expected2.folded" "$tmp/got3.folded" > /dev/null || fail "binary gone: frames should be fixture+0xOFFSET"
grep -qF "no GSYM for build ID $old_id; file missing" "$tmp/stderr3" ||
  { cat "$tmp/stderr3"; fail "binary gone: report should say file missing"; }

echo "ok: ${#addresses[@]} addresses match llvm-symbolizer; rebuilt and missing modules fall back to file offsets"
