#!/bin/bash
# PLT stubs get their own names ("puts@plt", as objdump and perf name them)
# when gsymprof converts a module for symbolization: without them a frame in
# a stub reads as the symbol before it (usually _init). Checked against
# objdump's <name@plt> labels for classic lazy .plt, IBT's .plt.sec and a
# BIND_NOW link; `gsym convert` itself stays byte-compatible with LLVM (no PLT
# names).
set -u
GSYMPROF=${GSYMPROF:-build/gsymprof}
[[ -x $GSYMPROF ]] || { echo "skip: $GSYMPROF not built"; exit 77; }
command -v gcc >/dev/null && command -v objdump >/dev/null || { echo "skip: no gcc/objdump"; exit 77; }
[[ $(uname -m) == x86_64 ]] || { echo "skip: PLT naming is x86-64 only"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export GSYMPROF_CACHE=$tmp/cache

cat > "$tmp/plt.c" <<'EOF2'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int cmp(const void* a, const void* b) { return *(const int*)a - *(const int*)b; }
int main(int argc, char** argv) {
  int v[4] = {argc, 3, 1, 2};
  qsort(v, 4, sizeof v[0], cmp);
  char buf[64];
  snprintf(buf, sizeof buf, "%d", v[0]);
  puts(buf);
  return (int)strlen(argv[0]) + atoi(buf);
}
EOF2

check() {  # NAME CFLAGS...
  local name=$1
  shift
  gcc -O1 -no-pie "$@" -o "$tmp/$name" "$tmp/plt.c" || fail "$name: cannot build"
  # objdump's stubs: "0000000000401030 <puts@plt>:"
  objdump -d --no-show-raw-insn "$tmp/$name" |
    awk '/^[0-9a-f]+ <[^>]*@plt>:$/ { gsub(/[<>:]/, "", $2); print $1, $2 }' > "$tmp/$name.stubs"
  local count
  count=$(wc -l < "$tmp/$name.stubs")
  (( count >= 4 )) || fail "$name: objdump shows only $count PLT stubs"
  local id
  id=$(readelf -n "$tmp/$name" | awk '/Build ID:/ {print $3}')
  read -r seg_offset seg_vaddr seg_memsz < <(readelf -lW "$tmp/$name" |
    awk '$1 == "LOAD" && / R E / {print $2, $3, $6; exit}')
  {
    printf '{"format":"gsymprof-capture","version":1,"host":"h","kernel_release":"k",'
    printf '"frequency_hz":99,"start_time_unix_ns":0,"duration_ns":0,"call_graph":"fp",'
    printf '"samples":%d,"lost":{},' "$count"
    printf '"modules":[{"path":"%s","build_id":"%s","load_bias":"0x0",' "$tmp/$name" "$id"
    printf '"mappings":[{"start":"0x%x","end":"0x%x","file_offset":"0x%x","perms":"r-xp"}],"error":""}],' \
      $((seg_vaddr & ~0xfff)) $(((seg_vaddr + seg_memsz + 0xfff) & ~0xfff)) $((seg_offset & ~0xfff))
    printf '"processes":[{"pid":1,"comm":"p","modules":[0]}],"stacks":['
    local sep= addr stub
    while read -r addr stub; do
      # A leaf frame two bytes into the stub (frame 0 is taken as is).
      printf '%s{"pid":1,"comm":"0x%s","count":1,"truncated":false,"frames":[{"module":0,"address":"0x%x"}]}' \
        "$sep" "$addr" $((16#$addr + 2))
      sep=,
    done < "$tmp/$name.stubs"
    printf ']}\n'
  } > "$tmp/$name.json"
  "$GSYMPROF" symbolize "$tmp/$name.json" > "$tmp/$name.folded" 2> "$tmp/$name.err" ||
    { cat "$tmp/$name.err"; fail "$name: symbolize failed"; }
  awk '{ print "0x" $1 ";" $2 " 1" }' "$tmp/$name.stubs" | LC_ALL=C sort > "$tmp/$name.want"
  if ! diff -u "$tmp/$name.want" "$tmp/$name.folded" > "$tmp/$name.diff"; then
    head -20 "$tmp/$name.diff"
    fail "$name: PLT frames are not named like objdump's stubs"
  fi
  echo "ok: $name: $count stubs named $(cut -d' ' -f2 "$tmp/$name.stubs" | tr '\n' ' ')"
}

check lazy -fcf-protection=none
check ibt -fcf-protection=full
check bind-now -fcf-protection=none -Wl,-z,now

# gsym convert stays LLVM's: no @plt names in its file.
"$GSYMPROF" gsym convert "$tmp/ibt" -o "$tmp/ibt.gsym" > /dev/null 2>&1 || fail "gsym convert failed"
addr=$(head -n 1 "$tmp/ibt.stubs" | cut -d' ' -f1)
"$GSYMPROF" gsym lookup "$tmp/ibt.gsym" "0x$addr" > "$tmp/lookup.txt" 2>&1
grep -q '@plt' "$tmp/lookup.txt" && fail "gsym convert named a PLT stub: $(cat "$tmp/lookup.txt")"
echo "ok: gsym convert leaves PLT stubs unnamed, as llvm-gsymutil does"
