#!/bin/bash
# e2e (root): gsymprof diff on two live profiles of a fixture whose hot
# function's work grows by a known factor (tests/e2e/fixtures/diff_work.c:
# hot_work 100 ms -> 400 ms of CPU, cold_work 100 ms and steady_work 200 ms
# both times):
#  1. profile it twice (folded, -o X.folded): hot_work's samples grew ~4x;
#  2. the SVG (default, to -o and to stdout) colours hot_work red and every
#     frame by FlameGraph's rule, recomputed here from the two folded files
#     (BASE scaled to NEW's total, self change per stack, rgb(255,v,v) /
#     rgb(v,v,255), v = int(210 x (max - |change|) / max)); its tooltip has
#     both counts; --negate draws BASE's widths;
#  3. the text table ranks hot_work first and says how it normalized; JSON is
#     byte-identical across runs, hot_work first, its fields as documented;
#  4. the same runs as pprof (profile --format pprof): `go tool pprof
#     -diff_base BASE -top NEW` and `gsymprof diff` on the same two files
#     agree that hot_work changed most; a capture (record) as BASE too;
#  5. bad input: one-line errors, usage errors exit 2.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
FIX=$WORK/diff_work
gcc -O1 -g -fno-omit-frame-pointer "$FIXTURES/diff_work.c" -o "$FIX" || fail "cannot build diff_work"
BASE_ARGS=(100 100 200) NEW_ARGS=(400 100 200)

profile_to() {  # OUT FORMAT ARGS...: one profile of the fixture
  local out=$1 format=$2
  shift 2
  "$GSYMPROF" profile -F 999 --format "$format" -o "$out" -- "$FIX" "$@" 2> "$out.err" ||
    { cat "$out.err"; fail "profile --format $format of diff_work $* failed"; }
}
profile_to "$WORK/base.folded" folded "${BASE_ARGS[@]}"
profile_to "$WORK/new.folded" folded "${NEW_ARGS[@]}"

samples_of() {  # FOLDED FUNCTION: samples whose leaf is FUNCTION
  awk -v f="$2" '{ n = split($1, frames, ";"); if (frames[n] == f) s += $NF } END { print s + 0 }' \
    FS=' ' "$1"
}
total_of() { awk '{ s += $NF } END { print s + 0 }' "$1"; }
inclusive_of() {  # FOLDED FUNCTION: samples whose stack has FUNCTION
  awk -v f="$2" '{ n = split($1, frames, ";"); for (i = 1; i <= n; i++) if (frames[i] == f) { s += $NF; break } }
                 END { print s + 0 }' "$1"
}
base_hot=$(samples_of "$WORK/base.folded" hot_work) new_hot=$(samples_of "$WORK/new.folded" hot_work)
base_total=$(total_of "$WORK/base.folded") new_total=$(total_of "$WORK/new.folded")
echo "  hot_work: $base_hot of $base_total samples -> $new_hot of $new_total"
awk -v b="$base_hot" -v n="$new_hot" 'BEGIN { exit !(b > 50 && n / b > 3 && n / b < 5.3) }' ||
  fail "hot_work did not grow about 4x ($base_hot -> $new_hot samples)"

echo "svg: hot_work red, every frame coloured by FlameGraph's rule"
"$GSYMPROF" diff "$WORK/base.folded" "$WORK/new.folded" -o "$WORK/diff.svg" 2> "$WORK/diff.err" ||
  { cat "$WORK/diff.err"; fail "diff -o diff.svg failed"; }
"$GSYMPROF" diff "$WORK/base.folded" "$WORK/new.folded" > "$WORK/stdout.svg" || fail "diff to stdout failed"
cmp -s "$WORK/diff.svg" "$WORK/stdout.svg" || fail "the SVG on stdout differs from -o's"
head -c 200 "$WORK/diff.svg" | grep -q '^<?xml' || fail "diff's default output is not SVG"
grep -q "data-total=\"$new_total\"" "$WORK/diff.svg" || fail "widths are not NEW's $new_total samples"

# Expected fill per frame path ("all" excluded): self change per stack,
# BASE scaled to NEW's total, the largest |change| the scale's end.
expected_fills() {  # BASE NEW -> "PATH FILL" lines
  awk '
    FNR == 1 { file++ }
    { n = $NF; stack = substr($0, 1, length($0) - length(n) - 1)
      if (file == 1) { base[stack] += n; bt += n } else { new[stack] += n; nt += n }
      seen[stack] = 1 }
    END {
      scale = nt / bt; max = 0
      for (s in seen) { d = new[s] - base[s] * scale; change[s] = d; if (d < 0) d = -d; if (d > max) max = d }
      for (s in seen) {
        d = change[s]; a = d < 0 ? -d : d; v = int(210 * (max - a) / max)
        if (a <= max * 1e-9) fill = "rgb(255,255,255)"
        else if (d > 0) fill = "rgb(255," v "," v ")"
        else fill = "rgb(" v "," v ",255)"
        print s, fill
      }
    }' "$1" "$2"
}
# The SVG's frames: "PATH FILL", PATH rebuilt from the depth of each <g> in
# drawing order (pre-order).
svg_fills() {  # SVG
  sed -n 's|^<g data-s="[0-9]*" data-n="[0-9]*" data-d="\([0-9]*\)"><title>\(.*\) (new .*</title><rect .* fill="\([^"]*\)"/>.*|\1 \2 \3|p' "$1" |
    awk '{ d = $1; fill = $NF; name = substr($0, length($1) + 2); name = substr(name, 1, length(name) - length(fill) - 1)
           path[d] = name; if (d == 0) next
           p = path[1]; for (i = 2; i <= d; i++) p = p ";" path[i]
           print p, fill }'
}
expected_fills "$WORK/base.folded" "$WORK/new.folded" | LC_ALL=C sort > "$WORK/fills.want"
svg_fills "$WORK/diff.svg" | LC_ALL=C sort > "$WORK/fills.svg"
# Leaves only: a frame's colour is its own change, so compare the frames
# that end a stack of NEW (the SVG also has their ancestors, white or not).
join -j1 <(awk '{ print $1 }' "$WORK/new.folded" | LC_ALL=C sort -u) "$WORK/fills.svg" > "$WORK/fills.got" 2> /dev/null
hot_path=$(awk '$1 ~ /;hot_work$/ { print $1 }' "$WORK/fills.got" | head -1)
[[ -n $hot_path ]] || { head "$WORK/fills.svg"; fail "no hot_work frame in the SVG"; }
while read -r path fill; do
  want=$(awk -v p="$path" '$1 == p { print $2 }' "$WORK/fills.want")
  # int() of the same quotient in awk and C++: equal, or 1 apart at a boundary.
  awk -v a="$fill" -v b="$want" 'BEGIN {
    gsub(/[rgb()]/, "", a); gsub(/[rgb()]/, "", b); split(a, x, ","); split(b, y, ",")
    for (i = 1; i <= 3; i++) { d = x[i] - y[i]; if (d < -1 || d > 1) exit 1 } }' ||
    fail "$path: fill $fill, FlameGraph's rule gives $want"
done < "$WORK/fills.got"
hot_fill=$(awk -v p="$hot_path" '$1 == p { print $2 }' "$WORK/fills.got")
echo "  hot_work $hot_fill ($(wc -l < "$WORK/fills.got") stack ends checked)"
[[ $hot_fill =~ ^rgb\(255,([0-9]+),([0-9]+)\)$ && ${BASH_REMATCH[1]} -le 40 ]] ||
  fail "hot_work is not (nearly) full red: $hot_fill"
for cooled in cold_work steady_work; do
  path=$(awk -v f=";$cooled" 'index($1, f) == length($1) - length(f) + 1 { print $1 }' "$WORK/fills.got" | head -1)
  fill=$(awk -v p="$path" '$1 == p { print $2 }' "$WORK/fills.got")
  [[ $fill =~ ^rgb\(([0-9]+),([0-9]+),255\)$ ]] || fail "$cooled shrank in share but is $fill, not blue"
done
grep -q "<title>hot_work (new $(inclusive_of "$WORK/new.folded" hot_work) samples [0-9.]*%, base $(inclusive_of "$WORK/base.folded" hot_work) samples [0-9.]*%, self change +[0-9.]*)</title>" \
  "$WORK/diff.svg" || { grep -o '<title>hot_work[^<]*' "$WORK/diff.svg"; fail "hot_work's tooltip lacks both counts"; }
grep -q "BASE x[0-9.]* to NEW&#39;s total" "$WORK/diff.svg" || fail "the SVG does not say how it normalized"

"$GSYMPROF" diff --negate "$WORK/base.folded" "$WORK/new.folded" -o "$WORK/negated.svg" || fail "diff --negate failed"
grep -q "data-total=\"$base_total\"" "$WORK/negated.svg" || fail "--negate does not draw BASE's widths"
grep -q "<title>hot_work (new $(inclusive_of "$WORK/new.folded" hot_work) samples" "$WORK/negated.svg" ||
  fail "--negate lost hot_work's tooltip"

echo "text and json: hot_work ranked first"
"$GSYMPROF" diff --format text "$WORK/base.folded" "$WORK/new.folded" > "$WORK/diff.txt" || fail "diff --format text failed"
head -4 "$WORK/diff.txt" | sed 's/^/  /'
grep -q "^BASE's counts scaled x[0-9.]* to NEW's total" "$WORK/diff.txt" || fail "the table does not say how it normalized"
[[ $(sed -n 5p "$WORK/diff.txt" | awk '{ print $NF }') == hot_work ]] || fail "hot_work is not ranked first"
"$GSYMPROF" diff --format json "$WORK/base.folded" "$WORK/new.folded" -o "$WORK/a.json" || fail "diff --format json failed"
"$GSYMPROF" diff --format json "$WORK/base.folded" "$WORK/new.folded" > "$WORK/b.json" || fail "second json diff failed"
cmp -s "$WORK/a.json" "$WORK/b.json" || fail "two JSON diffs of the same files differ"
python3 - "$WORK/a.json" "$base_hot" "$new_hot" <<'EOF' || fail "JSON diff"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["format"] == "gsymprof-diff" and doc["version"] == 1 and doc["normalized"] is True, doc
first = doc["functions"][0]
assert first["name"] == "hot_work", first
assert first["self_base"] == int(sys.argv[2]) and first["self_new"] == int(sys.argv[3]), first
assert first["self_change"] > 0 and first["self_change_percent"] > 20, first
keys = ["name", "self_base", "self_new", "self_change", "self_base_percent", "self_new_percent",
        "self_change_percent", "total_base", "total_new", "total_change", "total_base_percent",
        "total_new_percent", "total_change_percent"]
assert all(list(f) == keys for f in doc["functions"]), list(first)
EOF
"$GSYMPROF" diff --format text --no-normalize "$WORK/base.folded" "$WORK/new.folded" > "$WORK/raw.txt" ||
  fail "diff --no-normalize failed"
grep -q "^counts compared raw (--no-normalize)" "$WORK/raw.txt" || fail "--no-normalize does not say so"

echo "pprof: go tool pprof -diff_base agrees"
profile_to "$WORK/base.pb.gz" pprof "${BASE_ARGS[@]}"
profile_to "$WORK/new.pb.gz" pprof "${NEW_ARGS[@]}"
"$GSYMPROF" diff --format text "$WORK/base.pb.gz" "$WORK/new.pb.gz" > "$WORK/pprof.txt" 2> "$WORK/pprof.err" ||
  { cat "$WORK/pprof.err"; fail "diff of two pprof files failed"; }
[[ $(sed -n 5p "$WORK/pprof.txt" | awk '{ print $NF }') == hot_work ]] ||
  { head -8 "$WORK/pprof.txt"; fail "diff of the pprof files does not rank hot_work first"; }
"$GSYMPROF" diff --format text --no-normalize "$WORK/base.pb.gz" "$WORK/new.pb.gz" > "$WORK/pprof-raw.txt" ||
  fail "diff --no-normalize of two pprof files failed"
if use_go_pprof; then
  "$GO" tool pprof -diff_base "$WORK/base.pb.gz" -top -sample_index=samples -symbolize=none "$WORK/new.pb.gz" \
    > "$WORK/pprof-top.txt" 2>&1 || { cat "$WORK/pprof-top.txt"; fail "go tool pprof -diff_base failed"; }
  # The first row after the "flat flat% sum% cum cum%" header.
  pprof_top=$(awk 'found { print $NF; exit } $1 == "flat" { found = 1 }' "$WORK/pprof-top.txt")
  ours=$(sed -n 5p "$WORK/pprof-raw.txt" | awk '{ print $NF }')
  echo "  go tool pprof -diff_base: $pprof_top; gsymprof diff --no-normalize: $ours"
  [[ $pprof_top == hot_work && $ours == hot_work ]] ||
    { cat "$WORK/pprof-top.txt"; head -8 "$WORK/pprof-raw.txt"; fail "pprof and gsymprof disagree on the top change"; }
else
  echo "  (no go: go tool pprof's side skipped)"
fi

echo "a capture as BASE, symbolized on the way"
"$GSYMPROF" record -F 999 -o "$WORK/base.json" -- "$FIX" "${BASE_ARGS[@]}" 2> "$WORK/record.err" ||
  { cat "$WORK/record.err"; fail "record failed"; }
"$GSYMPROF" diff --format text "$WORK/base.json" "$WORK/new.folded" > "$WORK/capture.txt" 2> "$WORK/capture.err" ||
  { cat "$WORK/capture.err"; fail "diff of a capture and folded stacks failed"; }
grep -q "^gsymprof: BASE .*base.json: [0-9]* samples; modules resolved: " "$WORK/capture.err" ||
  { cat "$WORK/capture.err"; fail "no symbolization summary for the capture"; }
[[ $(sed -n 5p "$WORK/capture.txt") == *" hot_work" ]] || { head -8 "$WORK/capture.txt"; fail "capture diff: hot_work not first"; }
# The same stacks both ways: nothing changed.
"$GSYMPROF" symbolize "$WORK/base.json" -o "$WORK/base-capture.folded" 2> /dev/null || fail "symbolize failed"
"$GSYMPROF" diff --format json "$WORK/base.json" "$WORK/base-capture.folded" > "$WORK/same.json" 2> /dev/null ||
  fail "same diff failed"
python3 -c '
import json, sys
doc = json.load(open(sys.argv[1]))
assert all(f["self_change"] == 0 and f["total_change"] == 0 for f in doc["functions"]), doc["functions"][0]
' "$WORK/same.json" || fail "a capture and its own folded stacks differ"

echo "bad input"
printf 'not folded\n' > "$WORK/bad.txt"
printf '\x1f\x8b\x08\x00garbage' > "$WORK/bad.pb.gz"
for bad in "$WORK/bad.txt" "$WORK/bad.pb.gz" "$WORK/missing.folded"; do
  "$GSYMPROF" diff "$bad" "$WORK/new.folded" > /dev/null 2> "$WORK/bad.err"
  rc=$?
  [[ $rc == 1 && $(wc -l < "$WORK/bad.err") == 1 ]] || { cat "$WORK/bad.err"; fail "diff $bad: exit $rc, not one line and 1"; }
  sed 's/^/  /' "$WORK/bad.err"
done
"$GSYMPROF" diff --negate --format text "$WORK/base.folded" "$WORK/new.folded" > /dev/null 2>&1
[[ $? == 2 ]] || fail "--negate with --format text is not a usage error"
"$GSYMPROF" diff --format html "$WORK/base.folded" "$WORK/new.folded" > /dev/null 2>&1
[[ $? == 2 ]] || fail "--format html is not a usage error"
"$GSYMPROF" diff "$WORK/base.folded" > /dev/null 2>&1
[[ $? == 2 ]] || fail "a missing NEW is not a usage error"
echo "ok"
