#!/bin/bash
# What the CLI says to a new user (issue 33): a long form for every short
# flag, --version, `gsymprof help COMMAND` (= COMMAND --help), "did you mean"
# for a mistyped option, command or subcommand, an examples section in every
# command's --help, the manual page written from the same option tables
# (every option of every --help in it, and it renders), a missing output
# directory told from an unwritable one, flamegraph given a capture or a
# perf.data file saying what to run, symbolize's --svg/--title/--stats.
# No root needed (the unwritable-directory check runs as nobody when root).
set -u
BUILD=${BUILD:-build}
source "$(dirname "$0")/fixtures/cli_common.bash"

# Every command and gsym subcommand, from the lists gsymprof prints.
commands=$("$GSYMPROF" help | awk '/^commands:/ {f = 1; next} f && /^  [a-z]/ {print $1} f && /^$/ {exit}')
subcommands=$("$GSYMPROF" gsym help | awk '/^subcommands:/ {f = 1; next} f && /^  [a-z]/ {print $1} f && /^$/ {exit}')
[[ $commands == *profile* && $commands == *symbolize* && $subcommands == *lookup* ]] ||
  fail "command lists: '$commands' / '$subcommands'"
all=()
for c in $commands; do [[ $c == gsym ]] || all+=("$c"); done
for s in $subcommands; do all+=("gsym $s"); done

echo "--help of every command: examples, a long form for every short flag, = help COMMAND"
for cmd in "${all[@]}"; do
  # shellcheck disable=SC2086
  "$GSYMPROF" $cmd --help > "$tmp/help" 2> "$tmp/err" || fail "$cmd --help: exit $?"
  # shellcheck disable=SC2086
  "$GSYMPROF" help $cmd > "$tmp/help2" 2>&1 || fail "help $cmd: exit $?"
  cmp -s "$tmp/help" "$tmp/help2" || fail "'gsymprof help $cmd' is not '$cmd --help'"
  awk 'length > 80 { exit 1 }' "$tmp/help" || fail "$cmd --help has lines over 80 columns"
  # An examples section whose commands are this command's.
  sed -n '/^examples:$/,/^$/p' "$tmp/help" > "$tmp/examples"
  grep -q "^    \(.* | \)\?\(sudo \)\?gsymprof $cmd\( \|$\)" "$tmp/examples" ||
    fail "$cmd --help: no example of 'gsymprof $cmd' under 'examples:'"
  # Short flags: each with its long form ("-p, --pid").
  if grep -E '^  -[a-zA-Z]( |$)' "$tmp/help"; then fail "$cmd --help: a short flag without a long form"; fi
done
# What -d does to -- CMD is documented where the flag is.
"$GSYMPROF" profile --help | tr -s ' \n' ' ' |
  grep -q 'With -- CMD, a command still running then gets SIGTERM (SIGKILL 2 s later)' ||
  fail "profile --help does not say what -d does to -- CMD"
# The top-level help lists the program's own option.
"$GSYMPROF" help | grep -q '^  --version ' || fail "top-level help does not list --version"

echo "long forms of -p, -F, -d: the same values, the same checks"
expect 2 "gsymprof profile: -F: frequency must be 1..100000 Hz, not '0'" profile --freq 0
expect 2 "gsymprof profile: -F: frequency must be 1..100000 Hz, not '0'" profile --freq=0
expect 2 "gsymprof profile: -p: bad process id list 'x'" profile --pid x
expect 2 "gsymprof record: -d: duration must be a positive number of seconds, not 'abc'" record -o x --duration abc
expect 2 "gsymprof profile: -p and a command (-- CMD) cannot be combined" profile --pid=1 --duration=1 -- true
expect 2 "gsymprof profile: -v takes no value" profile --verbose=1

echo "--version: version, git revision, libbpf, kernel"
expect 0 "" --version
[[ $(wc -l < "$tmp/out") == 3 ]] || fail "--version: not three lines: $(cat "$tmp/out")"
grep -Eq '^gsymprof [0-9]+\.[0-9]+\.[0-9]+ \(git [0-9a-f]{12}(-dirty)?\)$|^gsymprof [0-9.]+ \(git unknown\)$' "$tmp/out" ||
  fail "--version: first line '$(head -n1 "$tmp/out")'"
if git -C "$(dirname "$0")" rev-parse HEAD > /dev/null 2>&1; then
  head=$(git -C "$(dirname "$0")" rev-parse --short=12 HEAD)
  # The binary may predate the newest commit; it must name a commit of this repository.
  rev=$(sed -n 's/.*(git \([0-9a-f]*\).*/\1/p' "$tmp/out")
  git -C "$(dirname "$0")" cat-file -e "$rev^{commit}" 2> /dev/null ||
    fail "--version names git $rev, not a commit here (HEAD is $head)"
fi
grep -Eq '^libbpf [0-9]+\.[0-9]+' "$tmp/out" || fail "--version: no libbpf version"
grep -q "^kernel $(uname -s) $(uname -r) " "$tmp/out" || fail "--version: not the running kernel"

echo "did you mean"
expect 2 "gsymprof profile: unknown option '--outptu' (did you mean '--output'?)" profile --outptu x
expect 2 "gsymprof profile: unknown option '--frequency=99' (did you mean '--freq'?)" profile --frequency=99
expect 2 "gsymprof symbolize: unknown option '--svgg' (did you mean '--svg'?)" symbolize x --svgg y
expect 2 "gsymprof flamegraph: unknown option --titel (did you mean --title?)" flamegraph x --titel T
expect 2 "gsymprof profile: unknown option '--bogus'" profile --bogus
expect 2 "gsymprof: unknown command 'profil' (did you mean 'profile'?)" profil -p 1
grep -q '^usage: gsymprof COMMAND' "$tmp/err" || fail "unknown command: no command list"
expect 2 "gsymprof: unknown command 'symbolise' (did you mean 'symbolize'?)" help symbolise
expect 2 "gsymprof gsym: unknown subcommand 'lokup' (did you mean 'lookup'?)" gsym lokup x
expect 2 "gsymprof: unknown command 'perf'" perf

echo "the manual page: every option of every --help, rendered without warnings"
man_page=$BUILD/gsymprof.1
[[ -s $man_page ]] || fail "$man_page not built"
"$GSYMPROF" --man > "$tmp/man.1" || fail "--man failed"
cmp -s "$tmp/man.1" "$man_page" || fail "$man_page is not what --man writes now"
for cmd in "${all[@]}"; do
  grep -q "^\.SS \"gsymprof $cmd\"$" "$man_page" || fail "man page: no section for $cmd"
  # shellcheck disable=SC2086
  "$GSYMPROF" $cmd --help | grep -oE '^  (-[a-zA-Z], )?--[a-z][-a-z]*' | grep -oE -- '--[a-z][-a-z]*' | sort -u |
    while read -r option; do
      [[ $option == --help ]] && continue
      grep -qF -- "\\fB${option//-/\\-}" "$man_page" || grep -qF -- ", ${option//-/\\-}" "$man_page" ||
        { echo "man page: $cmd $option missing"; exit 1; }
    done || fail "the man page lacks options of $cmd"
done
if command -v groff > /dev/null; then
  groff -man -Tutf8 -ww -z "$man_page" 2> "$tmp/groff.err"
  [[ -s $tmp/groff.err ]] && { cat "$tmp/groff.err"; fail "groff warns about the man page"; }
  MANWIDTH=80 man -l "$man_page" 2> /dev/null | grep -q -- '--duration SECONDS' || fail "man -l: no --duration"
fi

echo "output directories: missing, not a directory, not writable"
expect 1 "gsymprof profile: $tmp/no/dir/out: directory $tmp/no/dir/ does not exist" profile -o "$tmp/no/dir/out" -d 0.1
expect 1 "gsymprof symbolize: $tmp/no/flame.svg: directory $tmp/no/ does not exist" symbolize x.json --svg "$tmp/no/flame.svg"
: > "$tmp/file"
expect 1 "gsymprof record: $tmp/file/c.json: $tmp/file/ is not a directory" record -o "$tmp/file/c.json" -d 1
if [[ $(id -u) == 0 ]] && command -v setpriv > /dev/null; then
  mkdir -m 755 "$tmp/ro"
  chmod 711 "$tmp"
  setpriv --reuid=65534 --regid=65534 --clear-groups "$GSYMPROF" profile -o "$tmp/ro/out" -d 0.1 \
    > /dev/null 2> "$tmp/ro.err" && fail "an unwritable -o directory was accepted"
  [[ $(head -n1 "$tmp/ro.err") == "gsymprof profile: $tmp/ro/out: directory $tmp/ro/ is not writable" ]] ||
    fail "unwritable directory: '$(head -n1 "$tmp/ro.err")'"
  chmod 700 "$tmp"
fi

echo "flamegraph given a capture or a perf.data file: what to run instead"
c='{"format":"gsymprof-capture","version":1,"host":"h","kernel_release":"k","frequency_hz":99,'
c+='"start_time_unix_ns":1,"duration_ns":2,"call_graph":"fp","samples":2,"lost":{},'
c+='"modules":[{"path":"/nonexistent/libgone.so","build_id":"0102030405","load_bias":"0x7f0000000000",'
c+='"mappings":[{"start":"0x7f0000001000","end":"0x7f0000002000","file_offset":"0x1000","perms":"r-xp"}],"error":""}],'
c+='"processes":[{"pid":7,"comm":"app","modules":[0]}],'
c+='"stacks":[{"pid":7,"comm":"app","count":2,"truncated":false,"frames":[{"module":0,"address":"0x1234"}]}]}'
printf '%s\n' "$c" > "$tmp/cap.json"
expect 1 "gsymprof flamegraph: $tmp/cap.json is a gsymprof capture, not folded stacks: run 'gsymprof symbolize --svg OUT.svg $tmp/cap.json' to draw its flame graph" \
  flamegraph "$tmp/cap.json"
printf 'PERFILE2\0\0\0\0\0\0\0\0' > "$tmp/perf.data"
expect 1 "gsymprof flamegraph: $tmp/perf.data is a perf.data file, not folded stacks: run 'gsymprof symbolize --svg OUT.svg $tmp/perf.data' to draw its flame graph" \
  flamegraph "$tmp/perf.data"
"$GSYMPROF" flamegraph - < "$tmp/cap.json" > /dev/null 2> "$tmp/err" && fail "flamegraph - of a capture succeeded"
grep -qF "<stdin> is a gsymprof capture, not folded stacks: run 'gsymprof symbolize --svg OUT.svg FILE'" "$tmp/err" ||
  fail "flamegraph - of a capture: $(cat "$tmp/err")"

echo "symbolize --svg --title --stats"
expect 0 "" symbolize "$tmp/cap.json" -o "$tmp/s.folded" --svg "$tmp/s.svg" --title 'Cap <1>' --stats "$tmp/s.json"
grep -q '>Cap &lt;1&gt;</text>' "$tmp/s.svg" || fail "symbolize --title: not the SVG's title"
grep -q '^app;libgone.so+0x1234 2$' "$tmp/s.folded" || fail "symbolize -o: $(cat "$tmp/s.folded")"
"$GSYMPROF" flamegraph "$tmp/s.folded" --title 'Cap <1>' -o "$tmp/f.svg" || fail "flamegraph failed"
cmp -s "$tmp/s.svg" "$tmp/f.svg" || fail "symbolize --svg differs from flamegraph of its folded output"
grep -qx "gsymprof: wrote $tmp/s.folded (folded stacks), $tmp/s.svg (flame graph), $tmp/s.json (summary as JSON)" "$tmp/err" ||
  { cat "$tmp/err"; fail "symbolize: no line naming the files written"; }
python3 - "$tmp/s.json" <<'EOF' || fail "symbolize --stats: not the summary's facts"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["format"] == "gsymprof-stats" and s["version"] == 1 and s["command"] == "symbolize", s
assert s["samples"] == 2 and s["lost"] == 0 and s["processes"] == 1 and s["unique_stacks"] == 1, s
assert s["samples_taken"] is None and s["stop_reason"] is None and s["command_exit"] is None, s
assert s["modules_with_unnamed_frames"] == 1 and s["module_reports"][0]["resolved"] is False, s
assert [f["what"] for f in s["files"]] == ["folded stacks", "flame graph", "summary as JSON"], s
for key in ("lost_by_reason", "truncated_by_reason", "user_stacks", "hints", "call_graph", "duration_s"):
    assert key in s, key
EOF
expect 2 "gsymprof symbolize: --svg draws the folded stacks: it cannot be combined with --format json" \
  symbolize "$tmp/cap.json" --format json --svg "$tmp/x.svg"
echo "ok: CLI help, version, did you mean, man page, messages"
