#!/bin/bash
# gsymprof symbolize / record on bad input and bad usage: exit 1 with one
# line on stderr naming the file and the problem (bad capture), exit 2 for
# usage errors, never a crash. No root needed.
set -u
source "$(dirname "$0")/fixtures/cli_common.bash"

# expect_whole CODE STDERR ARGS...: cli_common's expect, and stderr is
# exactly the one line STDERR ("" = don't care about stderr).
expect_whole() {
  local want=$2
  expect "$1" "" "${@:3}"
  [[ -z $want || $(cat "$tmp/err") == "$want" ]] || fail "gsymprof ${*:3}: stderr
  '$(cat "$tmp/err")'
expected
  '$want'"
}

good='{"format":"gsymprof-capture","version":1,"host":"h","kernel_release":"k","frequency_hz":99,'
good+='"start_time_unix_ns":1,"duration_ns":2,"call_graph":"fp","samples":3,"lost":{"ringbuf_full":0},'
good+='"modules":[{"path":"/nonexistent/libgone.so","build_id":"0102030405","load_bias":"0x7f0000000000",'
good+='"mappings":[{"start":"0x7f0000001000","end":"0x7f0000002000","file_offset":"0x1000","perms":"r-xp"}],"error":""}],'
good+='"processes":[{"pid":7,"comm":"app","modules":[0]}],'
good+='"stacks":[{"pid":7,"comm":"app","count":2,"truncated":false,"frames":[{"module":0,"address":"0x1234"},'
good+='{"unresolved":"anonymous-mapping","address":"0x7ffc00000000"}]},'
good+='{"pid":7,"comm":"app","count":1,"truncated":true,"frames":[{"module":0,"address":"0x1010"}]}]}'
printf '%s\n' "$good" > "$tmp/good.json"

# The good capture symbolizes (nothing resolves: the module is gone).
expect_whole 0 "" symbolize "$tmp/good.json"
printf 'app;[truncated];libgone.so+0x1010 1\napp;[unknown];libgone.so+0x1234 2\n' > "$tmp/expected.folded"
diff -u "$tmp/expected.folded" "$tmp/out" || fail "good capture: unexpected folded output"
grep -qxF '  /nonexistent/libgone.so (build ID 0102030405): no symbols: no GSYM for build ID 0102030405; file missing' "$tmp/err" ||
  { cat "$tmp/err"; fail "good capture: report does not say why the module is unresolved"; }
expect_whole 0 "" symbolize "$tmp/good.json" --pid-in-comm --no-inline
grep -q '^app-7;\[unknown\];libgone.so+0x1234 2$' "$tmp/out" || fail "--pid-in-comm root is not comm-PID"
expect_whole 0 "" symbolize "$tmp/good.json" --format json -o "$tmp/out.json"
grep -qF '{"name":"libgone.so+0x1234","kind":"module-offset","file":"","line":0,"inlined":false,"module":"/nonexistent/libgone.so","build_id":"0102030405"}' "$tmp/out.json" ||
  { cat "$tmp/out.json"; fail "json output lacks the module-offset frame"; }
grep -qF '{"path":"/nonexistent/libgone.so","build_id":"0102030405","build_id_kind":"gnu","resolved":false,"source":"none","gsym":"","reason":"no GSYM for build ID 0102030405; file missing"}' "$tmp/out.json" ||
  { cat "$tmp/out.json"; fail "json output lacks the module report"; }

# Usage errors: exit 2.
expect_whole 0 "" symbolize --help
grep -q '^usage: gsymprof symbolize CAPTURE' "$tmp/out" || fail "symbolize --help"
expect_whole 2 "" symbolize
expect_whole 2 "" symbolize "$tmp/good.json" --format yaml
expect_whole 2 "" symbolize "$tmp/good.json" --bogus
expect_whole 2 "" symbolize "$tmp/good.json" -o
expect_whole 0 "" record --help
grep -q '^usage: gsymprof record ' "$tmp/out" || fail "record --help"
expect_whole 2 "" record -d 1
expect_whole 2 "" record -o "$tmp/c.json" --bogus
expect_whole 1 "gsymprof record: $tmp/nodir/c.json: directory $tmp/nodir/ does not exist" record -d 1 -o "$tmp/nodir/c.json"

# Bad captures: exit 1, one line naming the file and the problem.
bad() {  # NAME CONTENT EXPECTED_PROBLEM
  printf '%s' "$2" > "$tmp/$1.json"
  expect_whole 1 "gsymprof symbolize: $tmp/$1.json: $3" symbolize "$tmp/$1.json"
  [[ -s $tmp/out ]] && fail "$1: output written for a bad capture"
}
expect_whole 1 "gsymprof symbolize: $tmp/none.json: cannot open: No such file or directory" symbolize "$tmp/none.json"
bad empty '' "not valid JSON: parse error at line 1, column 1: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal"
bad text 'hello' "not valid JSON: parse error at line 1, column 1: syntax error while parsing value - invalid literal; last read: 'h'"
bad array '[1,2]' "capture: expected a JSON object at top level"
bad perf '{"format":"perf-script"}' 'format: not a gsymprof capture (format is "perf-script")'
bad v6 "${good/\"version\":1/\"version\":6}" "version: unsupported capture version 6 (this gsymprof reads versions 1 to 5)"
bad type "${good/\"frequency_hz\":99/\"frequency_hz\":\"99\"}" "frequency_hz: expected an unsigned integer, got a string"
bad index "${good/\"module\":0,\"address\":\"0x1010\"/\"module\":3,\"address\":\"0x1010\"}" \
  "stacks[1].frames[0].module: module index 3 out of range (1 modules)"
bad procidx "${good/\"modules\":\[0\]/\"modules\":[1]}" "processes[0].modules[0]: module index 1 out of range (1 modules)"
bad count "${good/\"samples\":3/\"samples\":4}" "samples: 4 does not equal the sum of stack counts (3)"
bad reason "${good/anonymous-mapping/jit}" 'stacks[0].frames[1].unresolved: unknown reason "jit"'
# The first problem in document order: inside the top-level object (an array
# of arrays at the top is "expected a JSON object at top level" first).
bad deep "{\"x\":$(printf '%.0s[' {1..100000})" "not a capture: JSON nested deeper than 16 levels"
# Truncated at every 7th byte: always an error, never a crash.
for ((n = 0; n < ${#good}; n += 7)); do
  printf '%s' "${good:0:n}" > "$tmp/trunc.json"
  "$GSYMPROF" symbolize "$tmp/trunc.json" > /dev/null 2> "$tmp/err"
  rc=$?
  [[ $rc == 1 ]] || fail "capture truncated to $n bytes: exit $rc"
  [[ $(wc -l < "$tmp/err") == 1 ]] || fail "capture truncated to $n bytes: error is not one line"
  grep -q "^gsymprof symbolize: $tmp/trunc.json: " "$tmp/err" || fail "truncated capture: error does not name the file"
done
# A --gsym-dir that is not a directory.
expect_whole 1 "" symbolize "$tmp/good.json" --gsym-dir "$tmp/good.json"
grep -qF "$tmp/good.json" "$tmp/err" || fail "bad --gsym-dir: error does not name it"
echo "ok: bad captures and usage errors"
