#!/bin/bash
# The conventions every gsymprof command shares (userspace/cli/command_line.h):
# --flag=value as well as --flag value for every valued long flag, attached
# short values (-F99), options before or after positional arguments, "--"
# ending the options (and, for profile and record, starting the command,
# whose own flags are left alone), flags refusing a value, exit 2 with one
# "gsymprof CMD: " line then the usage for usage errors, usage lines within
# 80 columns. No root needed.
set -u
source "$(dirname "$0")/fixtures/cli_common.bash"

# Every usage error: one message line, then the usage.
expect 2 "gsymprof profile: --call-graph: unsupported mode 'lbr' (supported: fp, dwarf[,SIZE])" \
  profile --call-graph=lbr
[[ $(sed -n 2p "$tmp/err") == "usage: gsymprof profile "* ]] || fail "usage does not follow the message"

# --flag=VALUE reaches the same check as --flag VALUE.
expect 2 "gsymprof profile: --call-graph: stack copy size must be a multiple of 8 from 64 to 1048576, not '7'" \
  profile --call-graph=dwarf,7
expect 2 "gsymprof record: --call-graph: unsupported mode 'x' (supported: fp, dwarf[,SIZE])" \
  record -o "$tmp/c.json" --call-graph=x
expect 1 "" profile --gsym-dir="$tmp/nope" -d 0.1
grep -qF "$tmp/nope" "$tmp/err" || fail "profile --gsym-dir=DIR: error does not name DIR"
expect 1 "gsymprof profile: $tmp/no/dir/out.svg: directory $tmp/no/dir/ does not exist" \
  profile --svg="$tmp/no/dir/out.svg" -d 0.1
expect 1 "gsymprof profile: $tmp/no/dir/out: directory $tmp/no/dir/ does not exist" \
  profile --output="$tmp/no/dir/out" -d 0.1
expect 1 "gsymprof record: $tmp/no/dir/c.json: directory $tmp/no/dir/ does not exist" \
  record --output="$tmp/no/dir/c.json" -d 1
expect 1 "gsymprof profile: $tmp/no/dir/s.json: directory $tmp/no/dir/ does not exist" \
  profile --stats="$tmp/no/dir/s.json" -d 0.1
: > "$tmp/plain"
expect 1 "gsymprof profile: $tmp/plain/out: $tmp/plain/ is not a directory" profile -o "$tmp/plain/out" -d 0.1
expect 2 "gsymprof symbolize: --format must be folded, json, pprof or speedscope, not 'yaml'" symbolize x.json --format=yaml
expect 2 "gsymprof profile: --svg draws the folded stacks: it cannot be combined with --format pprof" profile --format=pprof -o x.pb.gz --svg x.svg -d 1
expect 2 "gsymprof gsym convert: --threads needs a number from 1 to 1024" gsym convert x --threads=0
expect 2 "gsymprof gsym convert: --gsym-version must be 1 or 2, not '3'" gsym convert x --gsym-version=3

# Short flags take an attached value too.
expect 2 "gsymprof profile: -F: frequency must be 1..100000 Hz, not '0'" profile -F0
expect 2 "gsymprof profile: -p: bad process id list 'x'" profile -px

# A flag without a value refuses one; a valued flag given last lacks one.
expect 2 "gsymprof symbolize: --no-inline takes no value" symbolize x.json --no-inline=yes
expect 2 "gsymprof gsym lookup: --json takes no value" gsym lookup x.gsym --json=1
expect 2 "gsymprof symbolize: --format needs a value" symbolize x.json --format
expect 2 "gsymprof profile: --svg needs a non-empty value" profile --svg=

# Everything after "--" is the command: its flags are not gsymprof's.
expect 2 "gsymprof profile: -p and a command (-- CMD) cannot be combined" profile -p 1 -- true --bogus -p
expect 2 "gsymprof profile: unexpected argument 'true'" profile true
expect 2 "gsymprof record: -- needs a command" record -o "$tmp/c.json" --

# A capture that symbolizes without any GSYM (its module is gone).
c='{"format":"gsymprof-capture","version":1,"host":"h","kernel_release":"k","frequency_hz":99,'
c+='"start_time_unix_ns":1,"duration_ns":2,"call_graph":"fp","samples":2,"lost":{},'
c+='"modules":[{"path":"/nonexistent/libgone.so","build_id":"0102030405","load_bias":"0x7f0000000000",'
c+='"mappings":[{"start":"0x7f0000001000","end":"0x7f0000002000","file_offset":"0x1000","perms":"r-xp"}],"error":""}],'
c+='"processes":[{"pid":7,"comm":"app","modules":[0]}],'
c+='"stacks":[{"pid":7,"comm":"app","count":2,"truncated":false,"frames":[{"module":0,"address":"0x1234"}]}]}'
printf '%s\n' "$c" > "$tmp/cap.json"
mkdir "$tmp/gsyms"

# Options before and after the positional argument, both spellings: same output.
expect 0 "" symbolize "$tmp/cap.json" --format json -o "$tmp/a.json" --gsym-dir "$tmp/gsyms"
expect 0 "" symbolize --format=json --output="$tmp/b.json" --gsym-dir="$tmp/gsyms" "$tmp/cap.json"
[[ -s $tmp/a.json ]] || fail "symbolize -o wrote nothing"
cmp -s "$tmp/a.json" "$tmp/b.json" || fail "symbolize: --flag=value output differs from --flag value"
grep -qF '"name":"libgone.so+0x1234"' "$tmp/b.json" || fail "symbolize --format=json: not JSON frames"

printf 'app;main;work 3\napp;main;idle 1\n' > "$tmp/in.folded"
expect 0 "" flamegraph "$tmp/in.folded" --title "T1" -o "$tmp/a.svg"
expect 0 "" flamegraph --title=T1 --output="$tmp/b.svg" "$tmp/in.folded"
cmp -s "$tmp/a.svg" "$tmp/b.svg" || fail "flamegraph: --flag=value output differs from --flag value"
grep -q '>T1</text>' "$tmp/b.svg" || fail "flamegraph --title=T1: title missing"
# "--" ends the options: a file whose name starts with '-'.
cp "$tmp/in.folded" "$tmp/-dash.folded"
(cd "$tmp" && "$GSYMPROF" flamegraph --title=T1 -- -dash.folded > "$tmp/c.svg") || fail "flamegraph -- -FILE failed"
cmp -s "$tmp/a.svg" "$tmp/c.svg" || fail "flamegraph -- -FILE: other output"

if command -v gcc > /dev/null; then
  printf '%s\n' 'int twice(int x) { return 2 * x; }' 'int main(int c, char** v) { (void)v; return twice(c); }' \
    > "$tmp/prog.c"
  gcc -g -O0 -o "$tmp/prog" "$tmp/prog.c" || fail "gcc failed"
  expect 0 "" gsym convert "$tmp/prog" -o "$tmp/a.gsym" --threads 1
  expect 0 "" gsym convert --threads=2 --output="$tmp/b.gsym" --debug-file="$tmp/prog" "$tmp/prog"
  cmp -s "$tmp/a.gsym" "$tmp/b.gsym" || fail "gsym convert: --flag=value output differs"
  twice=$(nm "$tmp/prog" | awk '$3 == "twice" {print "0x" $1}')
  expect 0 "" gsym lookup "$tmp/b.gsym" "$twice" --json --no-lines
  grep -qF '"name":"twice"' "$tmp/out" || fail "gsym lookup FILE ADDR --json: $(cat "$tmp/out")"
  expect 0 "" gsym lookup --json "$tmp/b.gsym" --no-lines "$twice"
  grep -qF '"name":"twice"' "$tmp/out" || fail "gsym lookup with options between arguments"
else
  echo "note: no gcc, gsym convert/lookup checks skipped"
fi

# --help: exit 0 on stdout, usage lines within 80 columns, every flag of the
# usage line described.
for cmd in profile record symbolize flamegraph "gsym convert" "gsym lookup" "gsym verify"; do
  # shellcheck disable=SC2086
  "$GSYMPROF" $cmd --help > "$tmp/help" 2> "$tmp/err" || fail "$cmd --help: exit $?"
  [[ -s $tmp/err ]] && fail "$cmd --help wrote to stderr"
  awk 'length > 80 { exit 1 }' "$tmp/help" || fail "$cmd --help has lines over 80 columns"
  sed -n '/^usage:/,/^$/p' "$tmp/help" | grep -oE '\[?-[-a-zA-Z]+' | tr -d '[' | sort -u |
    while read -r flag; do
      [[ $flag == -- ]] && continue
      grep -qE "^  (-[a-zA-Z], )?$flag( |,|$)" "$tmp/help" || fail "$cmd --help: $flag is not described"
    done || exit 1
done
echo "ok: CLI conventions"
