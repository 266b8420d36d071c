#!/bin/bash
# Terminal and output hygiene: control characters in comm, module paths and
# file names from DWARF (any user chooses them; gsymprof runs as root) reach
# stdout and stderr escaped as \xHH, never raw: no byte below 0x20 but '\n',
# no DEL, no C1 control, no NUL from a capture's "\u0000". No root needed.
set -u
source "$(dirname "$0")/fixtures/cli_common.bash"

# raw_controls FILE: the offending bytes (hex, one per line) of FILE: C0 but
# '\n', DEL, and the lead of a UTF-8 C1 control (0xc2 followed by 0x80-0x9f).
raw_controls() {
  od -An -v -tx1 "$1" | tr -s ' ' '\n' | grep -v '^$' |
    awk 'prev == "c2" && $1 ~ /^[89]/ { print "c2 " $1 }
         $1 != "0a" && ($1 ~ /^[01]/ || $1 == "7f") { print }
         { prev = $1 }'
}
# assert_clean FILE WHAT: od finds nothing, and grep -P agrees.
assert_clean() {
  local bad
  bad=$(raw_controls "$1" | sort -u | tr '\n' ' ')
  [[ -z $bad ]] || { od -c "$1" | head -20; fail "$2 has raw control bytes: $bad"; }
  LC_ALL=C grep -aqP '[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]' "$1" && fail "$2: grep -P finds a raw control byte"
  return 0
}
# has FILE TEXT WHAT: FILE contains TEXT literally.
has() { grep -aqF -- "$2" "$1" || { cat "$1"; fail "$3: '$2' missing"; }; }

# A capture whose comm holds ESC (a colour sequence), BEL, NUL, DEL and the
# C1 CSI (U+009B), and whose module path holds an OSC title sequence.
comm='ev\u001b[31mil\u0007x\u0000y\u007fz\u009b2J'
comm_escaped='ev\x1b[31mil\x07x\x00y\x7fz\xc2\x9b2J'
path='/nonexistent/\u001b]0;pwned\u0007/lib\u001b[2Jgone.so'
path_escaped='/nonexistent/\x1b]0;pwned\x07/lib\x1b[2Jgone.so'
# make_capture PATH BUILD_ID ADDRESS: one module, one process, one stack.
make_capture() {
  local c='{"format":"gsymprof-capture","version":1,"host":"h","kernel_release":"k","frequency_hz":99,'
  c+='"start_time_unix_ns":1,"duration_ns":2,"call_graph":"fp","samples":2,"lost":{},'
  c+='"modules":[{"path":"'$1'","build_id":"'$2'","load_bias":"0x7f0000000000",'
  c+='"mappings":[{"start":"0x7f0000001000","end":"0x7f0000002000","file_offset":"0x1000","perms":"r-xp"}],"error":""}],'
  c+='"processes":[{"pid":7,"comm":"'$comm'","modules":[0]}],'
  c+='"stacks":[{"pid":7,"comm":"'$comm'","count":2,"truncated":false,"frames":[{"module":0,"address":"'$3'"},'
  c+='{"unresolved":"anonymous-mapping","address":"0x7ffc00000000"}]}]}'
  printf '%s\n' "$c"
}
capture=$(make_capture "$path" 0102030405 0x1234)
printf '%s\n' "$capture" > "$tmp/capture.json"
# The reader decodes these escapes to the raw bytes under test.
grep -qF '\u0000' "$tmp/capture.json" || fail "fixture lacks \\u0000"

# Folded output and the stderr report.
"$GSYMPROF" symbolize "$tmp/capture.json" > "$tmp/out" 2> "$tmp/err" || { cat "$tmp/err"; fail "symbolize failed"; }
assert_clean "$tmp/out" "folded stdout"
assert_clean "$tmp/err" "symbolize stderr"
# ';' in the path's basename becomes ':' in the frame; nothing else changes.
want="$comm_escaped;[unknown];lib\\x1b[2Jgone.so+0x1234 2"
[[ $(cat "$tmp/out") == "$want" ]] || fail "folded output
  '$(cat "$tmp/out")'
expected
  '$want'"
has "$tmp/err" "  $path_escaped (build ID 0102030405): no symbols: no GSYM for build ID 0102030405; file missing" \
  "symbolize report"

# JSON: C0 controls (\u0000, \u001b, \u0007) never raw; DEL and C1, legal
# raw in JSON but acted on by terminals, \u-escaped too (base/json_text.h).
"$GSYMPROF" symbolize "$tmp/capture.json" --format json > "$tmp/json" 2> "$tmp/err" || fail "symbolize --format json failed"
od -An -v -tx1 "$tmp/json" | tr -s ' ' '\n' | grep -E '^[01][0-9a-f]$' | grep -qv '^0a$' &&
  fail "json output has a raw C0 byte"
has "$tmp/json" '"comm":"ev\u001b[31mil\u0007x\u0000y\u007fz\u009b2J' "json comm"
LC_ALL=C grep -q $'\x7f\\|\xc2[\x80-\x9f]' "$tmp/json" && fail "json output has a raw DEL or C1 control"
assert_clean "$tmp/err" "symbolize --format json stderr"

# A bad capture at a path with ESC in it: the one-line error naming the
# file is escaped.
bad=$tmp/$'bad\e[2J.json'
printf '[1,2]\n' > "$bad"
"$GSYMPROF" symbolize "$bad" > "$tmp/out" 2> "$tmp/err" && fail "bad capture accepted"
assert_clean "$tmp/err" "bad-capture error"
has "$tmp/err" "gsymprof symbolize: $tmp/bad\x1b[2J.json: capture: expected a JSON object at top level" \
  "bad-capture error"

# A module that resolves, at a path with ESC and BEL in it, built with a
# source file name holding them too (DWARF line table): the report line
# (converted, cache path) and `gsym lookup` / `gsym dump` stay escaped.
if command -v gcc > /dev/null && command -v readelf > /dev/null; then
  dir=$tmp/$'bin\e[1m'
  mkdir -p "$dir"
  printf '%s\n' '#line 1 "/tmp/src\033[31m/f\007ile.c"' 'int evil(int x) { return x * 3 + 1; }' \
    'int main(int argc, char** argv) { (void)argv; return evil(argc); }' > "$tmp/prog.c"
  gcc -g -O0 -o "$dir/prog"$'\a' "$tmp/prog.c" || fail "gcc failed"
  prog="$dir/prog"$'\a'
  build_id=$(readelf -n "$prog" | awk '/Build ID:/ {print $3}')
  [[ -n $build_id ]] || fail "no build ID in the test program"
  evil=$(nm "$prog" | awk '$3 == "evil" {print "0x" $1}')
  [[ -n $evil ]] || fail "no symbol evil"
  json_path="$tmp/bin\\u001b[1m/prog\\u0007"
  make_capture "$json_path" "$build_id" "$evil" > "$tmp/good.json"
  "$GSYMPROF" symbolize "$tmp/good.json" > "$tmp/out" 2> "$tmp/err" || { cat "$tmp/err"; fail "symbolize (resolved) failed"; }
  assert_clean "$tmp/out" "folded stdout (resolved)"
  assert_clean "$tmp/err" "symbolize stderr (resolved)"
  has "$tmp/out" "$comm_escaped;[unknown];evil 2" "resolved folded output"
  has "$tmp/err" "  $tmp/bin\\x1b[1m/prog\\x07 (build ID $build_id): converted " "resolved report"

  "$GSYMPROF" gsym convert "$prog" -o "$tmp/prog.gsym" > /dev/null 2>&1 || fail "gsym convert failed"
  "$GSYMPROF" gsym lookup "$tmp/prog.gsym" "$evil" > "$tmp/out" 2> "$tmp/err" || fail "gsym lookup failed"
  assert_clean "$tmp/out" "gsym lookup stdout"
  has "$tmp/out" "evil @ /tmp/src\\x1b[31m/f\\x07ile.c:1" "gsym lookup text"
  "$GSYMPROF" gsym lookup --json "$tmp/prog.gsym" "$evil" > "$tmp/out" 2> "$tmp/err" || fail "gsym lookup --json failed"
  assert_clean "$tmp/out" "gsym lookup --json stdout"
  has "$tmp/out" '"directory":"/tmp/src\u001b[31m","basename":"f\u0007ile.c"' "gsym lookup json"
  "$GSYMPROF" gsym dump "$tmp/prog.gsym" > "$tmp/out" 2> "$tmp/err" || fail "gsym dump failed"
  assert_clean "$tmp/out" "gsym dump stdout"
  has "$tmp/out" "/tmp/src\\x1b[31m/f\\x07ile.c" "gsym dump file table"
else
  echo "note: no gcc/readelf, resolved-module and gsym lookup checks skipped"
fi

# Folded output a flame graph is drawn from: the escaped names stay visible
# and the SVG has no raw control byte either.
printf '%s\n' "$want" > "$tmp/in.folded"
"$GSYMPROF" flamegraph "$tmp/in.folded" -o "$tmp/out.svg" 2> "$tmp/err" || { cat "$tmp/err"; fail "flamegraph failed"; }
assert_clean "$tmp/out.svg" "flame graph"
has "$tmp/out.svg" "lib\\x1b[2Jgone.so+0x1234" "flame graph frame name"
echo "ok"
