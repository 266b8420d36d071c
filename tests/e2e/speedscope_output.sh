#!/bin/bash
# e2e (root): --format speedscope, checked with speedscope's own files.
#  1. record two fixture processes (inline frames in the executable and in a
#     linked shared library); `symbolize --format speedscope` of the capture
#     has one sampled profile per process/thread, and each profile's samples
#     (frame names joined root first, with their weights) are exactly the
#     folded output's stacks of that pid (--pid-in-comm); `profile --format
#     speedscope -o FILE` of a live run too;
#  2. both validate against the JSON schema the speedscope npm package ships
#     (dist/release/file-format-schema.json; speedscope pinned, installed once
#     into ${GSYMPROF_TEST_CACHE:-/var/cache/gsymprof-tests}/npm), with python3
#     jsonschema, else ajv (pinned, from npm) under node;
#  3. speedscope's importer loads it: the package ships no importer for node
#     (dist/release holds only the browser app, one bundled script; bin/cli.mjs
#     just opens a browser), so the app itself, served from 127.0.0.1, is
#     loaded in headless Chromium with #profileURL=...&view=sandwich, and its
#     sandwich table must list the fixture's frames with the right total and
#     self weights.
# Skips (77) when npm's registry is unreachable and nothing is cached.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
SPEEDSCOPE_VERSION=1.25.0 AJV_VERSION=8.17.1
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
build_fixture pie
FIX=$WORK/pie/profile_fixture

npm_install "speedscope@$SPEEDSCOPE_VERSION"
SPEEDSCOPE=$NPM_CACHE/node_modules/speedscope
SCHEMA=$(find "$SPEEDSCOPE/dist" -name file-format-schema.json | head -1)
[[ -f $SCHEMA ]] || fail "speedscope $SPEEDSCOPE_VERSION ships no file-format-schema.json"

echo "symbolize --format speedscope: a profile per thread, the folded output's stacks"
"$FIX" exec 20 & exec_pid=$!
"$FIX" lib 20 & lib_pid=$!
sleep 0.3
"$GSYMPROF" record -p "$exec_pid,$lib_pid" -d 2 -F 999 -o "$WORK/capture.json" 2> "$WORK/record.err" ||
  { cat "$WORK/record.err"; fail "record failed"; }
kill "$exec_pid" "$lib_pid"
wait "$exec_pid" "$lib_pid" 2> /dev/null
"$GSYMPROF" symbolize "$WORK/capture.json" --format speedscope -o "$WORK/capture.speedscope.json" 2> "$WORK/ss.err" ||
  { cat "$WORK/ss.err"; fail "symbolize --format speedscope failed"; }
"$GSYMPROF" symbolize "$WORK/capture.json" --pid-in-comm -o "$WORK/capture.folded" 2> /dev/null || fail "symbolize failed"
"$GSYMPROF" symbolize "$WORK/capture.json" --format speedscope -o "$WORK/again.json" 2> /dev/null || fail "second symbolize failed"
cmp -s "$WORK/capture.speedscope.json" "$WORK/again.json" || fail "the same capture gave different speedscope bytes"

# Each profile as folded lines: "COMM-PID;frame;... WEIGHT" (the profile's
# name is "COMM pid PID tid TID"); equal stacks of a process's threads summed.
speedscope_folded() {  # FILE
  python3 - "$1" <<'EOF'
import json, re, sys
from collections import Counter
doc = json.load(open(sys.argv[1]))
frames = [f["name"] for f in doc["shared"]["frames"]]
lines = Counter()
for p in doc["profiles"]:
    m = re.fullmatch(r"(.*) pid (\d+)(?: tid (\d+))?", p["name"])
    assert m, p["name"]
    for stack, weight in zip(p["samples"], p["weights"]):
        lines[";".join([m.group(1) + "-" + m.group(2)] + [frames[i] for i in stack])] += weight
for text in sorted(lines, key=lambda s: s.encode()):
    print(text, lines[text])
EOF
}
speedscope_folded "$WORK/capture.speedscope.json" > "$WORK/speedscope.folded" || fail "cannot read the speedscope file back"
diff <(LC_ALL=C sort "$WORK/capture.folded") "$WORK/speedscope.folded" > "$WORK/diff" ||
  { head -20 "$WORK/diff"; fail "speedscope's stacks differ from the folded output's"; }
ROOT="_start;__libc_start_main_impl;__libc_start_call_main;main"
grep -q "^profile_fixture-$exec_pid;$ROOT;phase_exec;exec_outer_inline_\[i\];exec_inner_inline_\[i\];exec_leaf [0-9]*$" \
  "$WORK/speedscope.folded" || fail "no exec stack with its inline frames"
grep -q "^profile_fixture-$lib_pid;$ROOT;phase_lib;lib_entry;lib_inline_\[i\];lib_leaf [0-9]*$" "$WORK/speedscope.folded" ||
  fail "no libhot.so stack with its inline frame"
python3 - "$WORK/capture.speedscope.json" "$exec_pid" "$lib_pid" <<'EOF' || fail "speedscope document"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["exporter"] == "gsymprof" and doc["activeProfileIndex"] == 0, doc.keys()
names = [p["name"] for p in doc["profiles"]]
# Single-threaded fixtures: each process is one thread, sorted by pid.
want = sorted([(int(sys.argv[2]), "profile_fixture pid %s tid %s" % (sys.argv[2], sys.argv[2])),
               (int(sys.argv[3]), "profile_fixture pid %s tid %s" % (sys.argv[3], sys.argv[3]))])
assert names == [w[1] for w in want], names
frames = doc["shared"]["frames"]
assert [f["name"] for f in frames] == sorted(f["name"] for f in frames), "frames not sorted"
for p in doc["profiles"]:
    assert p["type"] == "sampled" and p["unit"] == "none" and p["startValue"] == 0, p["name"]
    assert len(p["samples"]) == len(p["weights"]) and sum(p["weights"]) == p["endValue"], p["name"]
    assert all(0 <= i < len(frames) for s in p["samples"] for i in s), p["name"]
leaf = next(f for f in frames if f["name"] == "exec_leaf")
assert leaf.get("file", "").endswith("profile_fixture.c"), leaf
EOF

echo "profile --format speedscope"
"$GSYMPROF" profile -F 999 --format speedscope -o "$WORK/live.json" -- "$FIX" exec 1 2> "$WORK/live.err" ||
  { cat "$WORK/live.err"; fail "profile --format speedscope failed"; }
speedscope_folded "$WORK/live.json" > "$WORK/live.folded"
grep -q "^profile_fixture-[0-9]*;$ROOT;phase_exec;exec_outer_inline_\[i\];exec_inner_inline_\[i\];exec_leaf [0-9]*$" \
  "$WORK/live.folded" || { head "$WORK/live.folded"; fail "profile --format speedscope lacks the exec stack"; }

echo "speedscope $SPEEDSCOPE_VERSION's schema"
if python3 -c 'import jsonschema' 2> /dev/null; then
  python3 - "$SCHEMA" "$WORK/capture.speedscope.json" "$WORK/live.json" <<'EOF' || fail "schema validation"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
for path in sys.argv[2:]:
    jsonschema.validate(json.load(open(path)), schema)
    print("  valid (python3 jsonschema):", path.rsplit("/", 1)[1])
EOF
else
  npm_install "ajv@$AJV_VERSION"
  NODE_PATH=$NPM_CACHE/node_modules node - "$SCHEMA" "$WORK/capture.speedscope.json" "$WORK/live.json" <<'EOF' ||
const fs = require("fs"), Ajv = require("ajv");
const [schema, ...files] = process.argv.slice(2);
const validate = new Ajv({strict: false}).compile(JSON.parse(fs.readFileSync(schema, "utf8")));
for (const file of files) {
  if (!validate(JSON.parse(fs.readFileSync(file, "utf8")))) {
    console.error(file, JSON.stringify(validate.errors));
    process.exit(1);
  }
  console.log("  valid (ajv):", file.replace(/.*\//, ""));
}
EOF
    fail "schema validation"
fi
# The validator catches what the schema forbids.
python3 -c '
import json, sys
doc = json.load(open(sys.argv[1])); doc["profiles"][0]["unit"] = "furlongs"
json.dump(doc, open(sys.argv[2], "w"))' "$WORK/live.json" "$WORK/broken.json"
if python3 -c 'import jsonschema' 2> /dev/null; then
  python3 -c 'import json, sys, jsonschema; jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])))' \
    "$SCHEMA" "$WORK/broken.json" 2> /dev/null && fail "the schema check passed a broken file"
fi

echo "speedscope's importer (its app in headless Chromium)"
[[ -x $CHROMIUM ]] || { echo "  (no $CHROMIUM: the importer check is skipped; structure and schema checked above)"; echo "ok"; exit 0; }
mkdir -p "$WORK/www"
cp -r "$SPEEDSCOPE/dist/release/." "$WORK/www/"
cp "$WORK/live.json" "$WORK/www/profile.json"
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$WORK/www" > "$WORK/http.log" 2>&1 &
server=$!
for _ in $(seq 50); do
  port=$(sed -n 's/.* port \([0-9]*\) .*/\1/p' "$WORK/http.log" | head -1)
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || { kill "$server"; cat "$WORK/http.log"; fail "no HTTP server for speedscope"; }
# On a loaded machine Chromium can dump the DOM before the sandwich table
# rows are drawn (CI saw it once in three runs): up to three loads, the checks
# below on the last.
for _ in 1 2 3; do
  timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --window-size=1400,3000 \
    --user-data-dir="$WORK/chromium" --virtual-time-budget=10000 \
    --dump-dom "http://127.0.0.1:$port/index.html#profileURL=http://127.0.0.1:$port/profile.json&view=sandwich" \
    > "$WORK/dom.html" 2> "$WORK/chromium.log"
  grep -qE '<tr[^>]*><td[^>]*>[0-9,]+ \(' "$WORK/dom.html" && break
done
kill "$server"
wait "$server" 2> /dev/null
python3 - "$WORK/dom.html" "$WORK/live.json" <<'EOF' || { cp "$WORK/dom.html" /tmp/speedscope-dom.html 2>/dev/null; fail "speedscope did not import the profile as expected (DOM: /tmp/speedscope-dom.html)"; }
import html, json, re, sys
from collections import Counter
dom = open(sys.argv[1]).read()
doc = json.load(open(sys.argv[2]))
profile = doc["profiles"][0]
assert profile["name"] in dom, "profile name %r not shown" % profile["name"]
# Sandwich rows: total, self, then the frame's name.
rows = {}
for total, self_, name in re.findall(
        r'<tr[^>]*><td[^>]*>([\d,]+) \([^<]*<div.*?</td><td[^>]*>([\d,]+) \([^<]*<div.*?</td>'
        r'<td[^>]*><span[^>]*></span>(.*?)</td></tr>', dom):
    rows[html.unescape(name)] = (int(total.replace(",", "")), int(self_.replace(",", "")))
assert rows, "no sandwich table in the DOM"
frames = [f["name"] for f in doc["shared"]["frames"]]
want_total, want_self = Counter(), Counter()
for stack, weight in zip(profile["samples"], profile["weights"]):
    for i in set(stack):
        want_total[frames[i]] += weight
    if stack:
        want_self[frames[stack[-1]]] += weight
for name in ("exec_leaf", "exec_inner_inline_[i]", "main"):
    assert name in rows, "speedscope lists no %s (rows: %s)" % (name, sorted(rows))
    assert rows[name] == (want_total[name], want_self[name]), (name, rows[name], want_total[name], want_self[name])
for name, (total, self_) in rows.items():
    assert (total, self_) == (want_total[name], want_self[name]), (name, total, self_)
print("  speedscope lists %d frames; exec_leaf total %d self %d, main total %d, as written"
      % (len(rows), rows["exec_leaf"][0], rows["exec_leaf"][1], rows["main"][0]))
EOF
echo "ok"
