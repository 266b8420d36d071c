#!/bin/bash
# e2e (root): a shared library rebuilt after the capture (new build ID),
# with only the new library's GSYM available: its frames are
# libhot.so+0xOFFSET (the file offsets inside the OLD library's lib_entry /
# lib_leaf), never names from the new GSYM; everything else resolves, and the
# report gives both build IDs.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
build_fixture pie
D=$WORK/pie FIX=$D/profile_fixture
ROOT="_start;__libc_start_main_impl;__libc_start_call_main;main"
cp "$D/libhot.so" "$WORK/libhot.old.so"

"$FIX" lib 20 & pid=$!
sleep 0.3
"$GSYMPROF" record -p "$pid" -d 2 -F 999 -o "$WORK/capture.json" 2> "$WORK/record.err" ||
  { cat "$WORK/record.err"; fail "record failed"; }
kill "$pid"; wait "$pid" 2> /dev/null

# Rebuild the library in place: one more function, so a new build ID and a
# new layout whose names would be wrong for the old addresses.
printf 'unsigned rebuilt_marker(unsigned x) { return x * 3u + 1u; }\n' > "$WORK/extra.c"
gcc -O2 -g -fno-omit-frame-pointer -fPIC -shared "$WORK/extra.c" "$FIXTURES/libhot.c" -o "$D/libhot.so" ||
  fail "cannot rebuild libhot.so"
old_id=$(readelf -n "$WORK/libhot.old.so" | awk '/Build ID/ {print $3}')
new_id=$(readelf -n "$D/libhot.so" | awk '/Build ID/ {print $3}')
[[ -n $old_id && $old_id != "$new_id" ]] || fail "rebuilt library has the same build ID"
grep -q "\"build_id\":\"$old_id\"" "$WORK/capture.json" || fail "capture lacks the old library's build ID"

mkdir "$WORK/gsyms"
"$GSYMPROF" gsym convert "$D/libhot.so" -o "$WORK/gsyms/libhot-new.gsym" > /dev/null 2>&1 &&
  "$GSYMPROF" gsym convert "$FIX" -o "$WORK/gsyms/exe.gsym" > /dev/null 2>&1 || fail "gsym convert failed"
"$GSYMPROF" symbolize "$WORK/capture.json" --gsym-dir "$WORK/gsyms" > "$WORK/out.folded" 2> "$WORK/out.err" ||
  { cat "$WORK/out.err"; fail "symbolize failed"; }

grep -qF "  $D/libhot.so (build ID $old_id): no symbols: no GSYM for build ID $old_id; build-ID mismatch (file has $new_id)" \
  "$WORK/out.err" || { cat "$WORK/out.err"; fail "report does not give both build IDs"; }
grep -q 'lib_leaf\|lib_entry\|lib_inline\|rebuilt_marker' "$WORK/out.folded" &&
  { cat "$WORK/out.folded"; fail "names from a GSYM with another build ID"; }
[[ -z $(ls -A "$WORK/cache" 2> /dev/null | grep "$new_id") ]] || fail "the mismatching library was converted into the cache"

# Dominant: the executable's frames named, then one or two library frames
# as file offsets.
awk -v root="profile_fixture;$ROOT;phase_lib" '
  { c = $NF; total += c; s = substr($0, 1, length($0) - length(c) - 1)
    if (index(s, root ";") == 1 && substr(s, length(root) + 2) ~ /^libhot\.so\+0x[0-9a-f]+(;libhot\.so\+0x[0-9a-f]+)?$/) hit += c }
  END { printf "  %d of %d samples in phase_lib -> libhot.so+0x...\n", hit, total; exit !(total > 0 && hit * 100 >= total * 60) }
' "$WORK/out.folded" || { cat "$WORK/out.folded"; fail "library frames are not libhot.so+0xOFFSET under named frames"; }

# Each offset lies inside the OLD library's lib_entry or lib_leaf (file
# offset = vaddr - p_vaddr + p_offset of the executable PT_LOAD).
read -r seg_offset seg_vaddr < <(readelf -lW "$WORK/libhot.old.so" | awk '$1 == "LOAD" && / R E / {print $2, $3; exit}')
ranges=$(nm -S "$WORK/libhot.old.so" | awk -v o=$((seg_offset)) -v v=$((seg_vaddr)) \
  '$4 == "lib_entry" || $4 == "lib_leaf" { s = strtonum("0x" $1) - v + o; printf "%d %d\n", s, s + strtonum("0x" $2) }' 2> /dev/null)
if [[ -z $ranges ]]; then  # mawk has no strtonum
  ranges=$(nm -S "$WORK/libhot.old.so" | while read -r addr size _ name; do
    [[ $name == lib_entry || $name == lib_leaf ]] && echo "$((0x$addr - seg_vaddr + seg_offset)) $((0x$addr - seg_vaddr + seg_offset + 0x$size))"
  done)
fi
[[ $(wc -l <<< "$ranges") == 2 ]] || fail "cannot find lib_entry/lib_leaf in the old library"
# lib_entry calls lib_leaf through the library's PLT, where the CFI unwinder
# can be sampled too: the PLT sections count as inside (file offset ranges).
while read -r name _ _ off size _; do
  [[ $name == .plt* ]] && ranges+=$'\n'"$((0x$off)) $((0x$off + 0x$size))"
done < <(readelf -SW "$WORK/libhot.old.so" | sed -n 's/^ *\[ *[0-9]*\] *//p')
# Only the phase_lib stacks: a rare sample elsewhere (e.g. in the library's
# PLT while the dynamic loader binds a symbol) is legitimately outside both.
offsets=$(grep -F "profile_fixture;$ROOT;phase_lib;" "$WORK/out.folded" |
  grep -o 'libhot\.so+0x[0-9a-f]*' | sort -u | sed 's/libhot.so+//')
[[ -n $offsets ]] || fail "no libhot.so offsets"
for off in $offsets; do
  inside=0
  while read -r lo hi; do (( off >= lo && off < hi )) && inside=1; done <<< "$ranges"
  [[ $inside == 1 ]] || fail "libhot.so+$off is outside the old lib_entry/lib_leaf"
done
expect_resolved "$WORK/out.folded" profile_fixture
echo "ok: rebuilt library -> libhot.so+0xOFFSET inside the old functions; the rest resolves"
