#!/bin/bash
# e2e: `gsymprof profile` contract: --help, usage errors (exit 2), bad input
# and failures (exit 1, one line on stderr), atomic -o.
set -u
: "${GSYMPROF:?GSYMPROF must name the gsymprof binary}"
fail() { echo "FAIL: $*" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export GSYMPROF_CACHE=$WORK/cache

# expect CODE STDERR_SUBSTRING ARGS...: exit code and a one-line message.
expect() {
  local code=$1 message=$2 rc
  shift 2
  "$GSYMPROF" profile "$@" >"$WORK/out" 2>"$WORK/err"
  rc=$?
  [[ $rc == "$code" ]] || { cat "$WORK/err" >&2; fail "profile $* exited $rc, want $code"; }
  grep -qF -- "$message" "$WORK/err" || { cat "$WORK/err" >&2; fail "profile $*: no '$message'"; }
  [[ $(head -n1 "$WORK/err") == "gsymprof profile: "* ]] || fail "profile $*: message not prefixed"
}

"$GSYMPROF" profile --help >"$WORK/help" || fail "--help exited non-zero"
for flag in -p -F -d -o --gsym-dir --no-inline --pid-in-comm --call-graph -- ; do
  grep -qF -- "$flag" "$WORK/help" || fail "--help does not mention $flag"
done
grep -q '^usage: gsymprof profile \[-p PID\[,PID...\]\] \[-F HZ\] \[-d SECONDS\] \[-o OUT\]' "$WORK/help" ||
  fail "--help usage line differs"

expect 2 "unknown option '--bogus'" --bogus
expect 2 "-p needs a value" -p
expect 2 "-p: bad process id list 'x'" -p x
expect 2 "-p: bad process id list '1,,2'" -p 1,,2
expect 2 "-F: frequency must be 1..100000 Hz, not '0'" -F 0
expect 2 "-F: frequency must be 1..100000 Hz, not '200000'" -F 200000
expect 2 "-d: duration must be a positive number of seconds, not '-1'" -d -1
expect 2 "-d: duration must be a positive number of seconds, not 'abc'" -d abc
expect 2 "-- needs a command" --
expect 2 "-p and a command (-- CMD) cannot be combined" -p 1 -- true
expect 2 "--call-graph: unsupported mode 'lbr'" --call-graph lbr
expect 1 "$WORK/nope" --gsym-dir "$WORK/nope" -d 0.1
for line_count in $(wc -l <"$WORK/err"); do
  [[ $line_count == 1 ]] || fail "error is not one line: $(cat "$WORK/err")"
done

if [[ $(id -u) != 0 || ! -r /sys/kernel/btf/vmlinux ]]; then
  echo "SKIP: the rest needs root and BPF" >&2
  exit 77
fi

# A pid that does not exist (pid_max is at most 2^22).
expect 1 "no process with pid 4194000" -p 4194000 -d 1
expect 1 "cannot run $WORK/missing-command: No such file or directory" -- "$WORK/missing-command"

# -o: written whole, stdout empty; an unwritable -o fails with exit 1 after sampling.
"$GSYMPROF" profile -F 999 -o "$WORK/out.folded" -- /bin/sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done' \
  >"$WORK/stdout" 2>"$WORK/stderr" || { cat "$WORK/stderr" >&2; fail "profile -o failed"; }
[[ -s $WORK/stdout ]] && fail "stdout not empty with -o"
[[ -s $WORK/out.folded ]] || fail "-o file empty"
grep -qE '^sh;.* [0-9]+$' "$WORK/out.folded" || fail "no sh stacks in $(cat "$WORK/out.folded")"
sort -c "$WORK/out.folded" 2>/dev/null || LC_ALL=C sort -c "$WORK/out.folded" || fail "output not sorted"
grep -qE '^gsymprof: [0-9]+ samples taken, [0-9]+ recorded, [0-9]+ lost, ' "$WORK/stderr" || fail "no summary"
grep -qE '^gsymprof: [0-9]+ samples taken, .*, [1-9][0-9]* process(es)?, ' "$WORK/stderr" || fail "no process count"
grep -qE '^gsymprof: [0-9]+ samples taken, .*, [1-9][0-9]* modules?, [1-9][0-9]* unique stacks? \(' "$WORK/stderr" ||
  fail "no module and stack count"
grep -qx "gsymprof: wrote $WORK/out.folded (folded stacks)" "$WORK/stderr" || fail "no line naming the file written"
ls "$WORK" | grep -q '^out.folded.' && fail "temporary file left behind"
expect 1 "$WORK/no/such/dir/out" -d 0.2 -o "$WORK/no/such/dir/out" -- sleep 1

# A stripped distribution binary (Debian's dd): frames it cannot name get one
# grouped line with the remedy, never a "conversion failed" error.
mkdir -m 700 "$WORK/cache-dd"
GSYMPROF_CACHE=$WORK/cache-dd "$GSYMPROF" profile -F 999 -o "$WORK/dd.folded" -- \
  dd if=/dev/zero of=/dev/null bs=1 count=1500000 2> "$WORK/dd.err" || { cat "$WORK/dd.err" >&2; fail "profile dd failed"; }
grep -q "conversion failed" "$WORK/dd.err" && { cat "$WORK/dd.err" >&2; fail "a stripped binary reported as a failed conversion"; }
if grep -q '^dd;.*;dd+0x' "$WORK/dd.folded"; then
  grep -qE '^  stripped, no debug file: frames without names \([0-9]+: (.*, )?dd(, .*)?\): install their debug symbols .*DEBUGINFOD_URLS' \
    "$WORK/dd.err" || { cat "$WORK/dd.err" >&2; fail "no grouped remedy line for dd's unnamed frames"; }
else
  echo "  dd has names here (debug symbols installed?): remedy line not expected"
fi
echo "ok"
