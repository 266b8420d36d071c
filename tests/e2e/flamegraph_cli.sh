#!/bin/bash
# gsymprof flamegraph: exit codes, one-line errors naming the file,
# deterministic output (stdout and -o identical, reruns identical), stdin.
set -u
source "$(dirname "$0")/fixtures/cli_common.bash"

printf 'app;main;work 3\napp;main;idle 1\n' > "$tmp/good.folded"
printf 'app;main;work 3\nbroken line\n' > "$tmp/bad.folded"

expect 0 "" flamegraph --help
grep -q '^usage: gsymprof flamegraph FOLDED' "$tmp/out" || fail "--help does not print the usage"
expect 2 "gsymprof flamegraph: missing FOLDED input file" flamegraph
expect 2 "gsymprof flamegraph: unknown option --bogus" flamegraph "$tmp/good.folded" --bogus
expect 2 "gsymprof flamegraph: more than one input file" flamegraph "$tmp/good.folded" "$tmp/good.folded"
expect 2 "gsymprof flamegraph: --title needs a value" flamegraph "$tmp/good.folded" --title
expect 1 "gsymprof flamegraph: $tmp/missing.folded: cannot open: No such file or directory" flamegraph "$tmp/missing.folded"
expect 1 "gsymprof flamegraph: $tmp/bad.folded: line 2: sample count \"line\" is not an unsigned integer" flamegraph \
  "$tmp/bad.folded" -o "$tmp/bad.svg"
[[ -e $tmp/bad.svg ]] && fail "bad input left an output file"
[[ $(wc -l < "$tmp/err") == 1 ]] || fail "error is not one line"
expect 1 "gsymprof flamegraph: $tmp/nodir/x.svg: cannot open the output directory: No such file or directory" flamegraph \
  "$tmp/good.folded" -o "$tmp/nodir/x.svg"

expect 0 "" flamegraph "$tmp/good.folded" --title "T & <t>"
cp "$tmp/out" "$tmp/stdout.svg"
expect 0 "" flamegraph "$tmp/good.folded" --title "T & <t>" -o "$tmp/file.svg"
[[ -s $tmp/out ]] && fail "-o given, yet stdout has output"
cmp -s "$tmp/stdout.svg" "$tmp/file.svg" || fail "stdout and -o outputs differ"
"$GSYMPROF" flamegraph - --title "T & <t>" < "$tmp/good.folded" > "$tmp/stdin.svg" || fail "reading stdin failed"
cmp -s "$tmp/stdout.svg" "$tmp/stdin.svg" || fail "stdin input gives other output"
# Reordered input, same graph.
printf 'app;main;idle 1\napp;main;work 2\napp;main;work 1\n' > "$tmp/reordered.folded"
"$GSYMPROF" flamegraph "$tmp/reordered.folded" --title "T & <t>" > "$tmp/reordered.svg" || fail "reordered input failed"
cmp -s "$tmp/stdout.svg" "$tmp/reordered.svg" || fail "output depends on input order"
grep -q '<text id="title" x="600" y="24">T &amp; &lt;t&gt;</text>' "$tmp/file.svg" || fail "title not escaped"
grep -q '<title>work (3 samples, 75.00%)</title><rect x="305.00" y="[0-9]*" width="885.00"' "$tmp/file.svg" ||
  fail "work frame not 3/4 of the width after idle"
if command -v xmllint > /dev/null; then xmllint --noout "$tmp/file.svg" || fail "SVG is not well-formed XML"; fi
echo "ok: flamegraph CLI"
