#!/bin/bash
# e2e (issue 33): the README's front door. Its first 40 lines say what
# gsymprof is, what it needs and how to install it, show the flame graph
# picture (docs/flame.png, a PNG kept in the repository), and hold the
# quick-start commands; each command is run here as written (sudo dropped:
# the tests run as root; PID: a running fixture; perf.data: recorded from the
# fixture first) in the order given, and each must draw the fixture's stack.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
README=$ROOT/README.md

head -n 40 "$README" > "$WORK/front.md"
for words in "Debian 12" "5.19" "BTF" "root" "sudo make install" "sudo make demo" "sudo make test" "gsymprof doctor"; do
  grep -qF "$words" "$WORK/front.md" || fail "the README's first 40 lines do not say '$words'"
done
grep -qE '^!\[[^]]+' "$WORK/front.md" && grep -qF '](docs/flame.png)' "$WORK/front.md" ||
  fail "the README's first 40 lines do not show docs/flame.png"
[[ $(head -c 8 "$ROOT/docs/flame.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
  fail "docs/flame.png is not a PNG"
size=$(python3 -c 'import struct, sys; d = open(sys.argv[1], "rb").read(24); print(*struct.unpack(">II", d[16:24]))' \
  "$ROOT/docs/flame.png")
read -r width height <<< "$size"
(( width >= 800 && height >= 200 )) || fail "docs/flame.png is ${width}x${height}: not a flame graph's size"

# The commands: the lines of the first ```sh block that run gsymprof.
awk '/^```sh$/ {f = 1; next} f && /^```$/ {exit} f && /^(sudo )?gsymprof / {print}' "$WORK/front.md" > "$WORK/commands"
grep -q '^sudo gsymprof profile -p PID .*--svg ' "$WORK/commands" &&
  grep -q '^sudo gsymprof record -p PID ' "$WORK/commands" &&
  grep -q '^gsymprof symbolize [^ ]*\.json ' "$WORK/commands" &&
  grep -q '^gsymprof symbolize perf\.data ' "$WORK/commands" ||
  { cat "$WORK/commands"; fail "the quick start lacks profile -p PID --svg, record, symbolize or symbolize perf.data"; }
echo "quick start ($(wc -l < "$WORK/commands") commands):"
sed 's/^/  /' "$WORK/commands"

require_live_profiling
build_fixture pie
FIX=$WORK/pie/profile_fixture
mkdir "$WORK/run"
cd "$WORK/run" || fail "no run dir"
"$FIX" exec 120 &
PID=$!
if grep -q 'perf\.data' "$WORK/commands"; then
  PERF=${PERF:-/usr/bin/perf}
  [[ -x $PERF ]] || fail "the quick start symbolizes perf.data, and there is no perf to record one"
  "$PERF" record -q -F 499 -g -o perf.data -- "$FIX" exec 2 > perf.log 2>&1 || { cat perf.log; fail "perf record failed"; }
fi

while read -r line; do
  command=${line#sudo }
  command=${command//PID/$PID}
  command=${command/#gsymprof /$GSYMPROF }
  echo "  \$ $line"
  # shellcheck disable=SC2086
  $command > out.txt 2> err.txt || { cat err.txt; fail "'$line' exited $?"; }
  # An SVG must draw the fixture's hot stack; a capture must be there for
  # the symbolize after it. The summary names each.
  svg=$(grep -oE -- '--svg [^ ]+' <<< "$line" | cut -d' ' -f2)
  output=$(grep -oE -- ' -o [^ ]+' <<< "$line" | cut -d' ' -f3)
  [[ -n $svg || -n $output ]] || fail "'$line' writes no file to check"
  if [[ -n $svg ]]; then
    [[ -s $svg ]] || { cat err.txt; fail "'$line' wrote no $svg"; }
    grep -q '<title>exec_leaf (' "$svg" || fail "'$line': $svg has no exec_leaf frame"
    grep -q "^gsymprof: wrote .*$svg (flame graph)" err.txt || { cat err.txt; fail "'$line': no line naming $svg"; }
    rm -f "$svg"
  fi
  if [[ -n $output ]]; then
    [[ -s $output ]] || { cat err.txt; fail "'$line' wrote no $output"; }
    grep -q "^gsymprof: wrote $output (" err.txt || { cat err.txt; fail "'$line': no line naming $output"; }
  fi
done < "$WORK/commands"
kill "$PID"
echo "ok: the README's quick start runs as written"
