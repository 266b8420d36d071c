#!/bin/bash
# e2e (root): gsymprof heatmap in headless Chromium.
#  1. `record -- heatmap_phases 6` (phase_a() for a second, phase_b() for
#     the next, ...); the capture has a time per sample, and `symbolize`
#     gives the same folded stacks with the times removed (times change no
#     stack);
#  2. `heatmap` writes one HTML page, loaded in Debian's chromium driven by
#     playwright-core (pinned, from npm, installed once into
#     ${GSYMPROF_TEST_CACHE:-/var/cache/gsymprof-tests}/npm, as
#     npm_install in fixtures/profile_common.bash) with every request routed
#     and refused: the page must load with no script error and no request;
#  3. searching phase_a, then phase_b, the heatmap's whole-second columns
#     alternate between the two (each column's larger one), starting with
#     phase_a; dragging the mouse over a phase_b second shows a flame graph
#     whose hottest leaf (most self samples) is phase_b, a phase_a second
#     phase_a; a shift+drag over the next second shows the diff of the two;
#     choosing the process in the lane selector keeps the samples;
#  4. a screenshot goes to $WORK (kept with KEEP=1, or copied to
#     $SCREENSHOT_OUT).
# Skips (77) when npm's registry is unreachable and nothing is cached.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
PLAYWRIGHT_VERSION=1.65.2
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[[ -x $CHROMIUM ]] || skip "$CHROMIUM missing (scripts/install-deps.sh installs it)"
if [[ -n ${KEEP:-} ]]; then
  trap 'echo "kept $WORK"; jobs -p | xargs -r kill 2> /dev/null' EXIT
fi

npm_install "playwright-core@$PLAYWRIGHT_VERSION"

gcc -O2 -g -fno-omit-frame-pointer -o "$WORK/heatmap_phases" "$FIXTURES/heatmap_phases.c" || fail "cannot build the fixture"

echo "record: a time per sample; symbolize: the same stacks without them"
"$GSYMPROF" record -F 999 -o "$WORK/cap.json" -- "$WORK/heatmap_phases" 6 > /dev/null 2> "$WORK/record.err" ||
  { cat "$WORK/record.err"; fail "record failed"; }
python3 - "$WORK/cap.json" "$WORK/untimed.json" <<'EOF' || fail "the capture's sample times are wrong"
import json, sys
capture = json.load(open(sys.argv[1]))
timed = 0
for stack in capture["stacks"]:
    times = stack.pop("times", None)
    if times is None:
        continue
    assert len(times) == stack["count"], stack
    assert all(t >= 0 for t in times)
    assert sum(times) <= capture["duration_ns"] // 1000 + 1000, (sum(times), capture["duration_ns"])
    timed += stack["count"]
assert timed == capture["samples"], (timed, capture["samples"])
json.dump(capture, open(sys.argv[2], "w"))
EOF
"$GSYMPROF" symbolize "$WORK/cap.json" -o "$WORK/timed.folded" 2> /dev/null || fail "symbolize failed"
"$GSYMPROF" symbolize "$WORK/untimed.json" -o "$WORK/untimed.folded" 2> /dev/null || fail "symbolize (no times) failed"
cmp -s "$WORK/timed.folded" "$WORK/untimed.folded" || fail "sample times changed the folded output"
grep -q ';main;phase_a ' "$WORK/timed.folded" && grep -q ';main;phase_b ' "$WORK/timed.folded" ||
  { cat "$WORK/timed.folded"; fail "the fixture's phases are not in the folded output"; }

echo "heatmap: one self-contained page"
"$GSYMPROF" heatmap "$WORK/cap.json" -o "$WORK/heat.html" 2> "$WORK/heatmap.err" ||
  { cat "$WORK/heatmap.err"; fail "heatmap failed"; }
if grep -Eo '(src|href)=["'\'']?[a-z]+://' "$WORK/heat.html" | head -3 | grep -q .; then
  fail "the page refers to a URL"
fi
"$GSYMPROF" heatmap "$WORK/untimed.json" -o "$WORK/none.html" 2> "$WORK/none.err" &&
  fail "a capture without times gave a heatmap"
grep -q "no sample times" "$WORK/none.err" || { cat "$WORK/none.err"; fail "no reason given for a capture without times"; }

cat > "$WORK/drive.js" <<'EOF'
const { chromium } = require(process.env.NPM_CACHE + "/node_modules/playwright-core");
(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const requests = [], errors = [];
  // Every request but the page itself is refused and counted.
  await page.route("**/*", (route) => {
    if (route.request().url() === process.env.PAGE_URL) return route.continue();
    requests.push(route.request().url());
    return route.abort();
  });
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  const started = Date.now();
  await page.goto(process.env.PAGE_URL);
  await page.waitForSelector("body[data-ready='1']", { timeout: 30000 });
  const loadMs = Date.now() - started;
  const api = () => page.evaluate(() => ({ rows: gsymprofHeatmap.rows, columns: gsymprofHeatmap.columns }));
  const { rows, columns } = await api();
  const search = async (text) => {
    await page.fill("#search", text);
    return page.evaluate(() => gsymprofHeatmap.cells());
  };
  const perColumn = (cells) => Array.from({ length: columns }, (_, c) =>
    cells.slice(c * rows, (c + 1) * rows).reduce((a, b) => a + b, 0));
  const a = perColumn(await search("^phase_a$")), b = perColumn(await search("^phase_b$"));
  await search("");
  // Whole seconds only: the last column is the part of a second the
  // process lived in after its 6 s.
  const dominant = [];
  for (let c = 0; c < Math.min(columns, 6); c++) dominant.push(a[c] > b[c] ? "phase_a" : "phase_b");
  const cell = (column, row) => page.evaluate(([c, r]) => gsymprofHeatmap.cellCenter(c, r), [column, row]);
  const dragColumn = async (column, shift) => {
    // Rows 2 to rows-3: away from the phase boundaries at the column's edges.
    const from = await cell(column, 2), to = await cell(column, rows - 3);
    if (shift) await page.keyboard.down("Shift");
    await page.mouse.move(from.x, from.y);
    await page.mouse.down();
    await page.mouse.move(to.x, to.y, { steps: 5 });
    await page.mouse.up();
    if (shift) await page.keyboard.up("Shift");
    const frames = await page.evaluate(() => gsymprofHeatmap.frames());
    let hottest = null;
    for (const f of frames) if (!hottest || f.self > hottest.self) hottest = f;
    return { hottest: hottest && hottest.name, title: await page.textContent("#flame-title"),
             frames: frames.length };
  };
  const bSecond = dominant.indexOf("phase_b"), aSecond = dominant.indexOf("phase_a");
  const dragB = await dragColumn(bSecond, false);
  const dragA = await dragColumn(aSecond, false);
  const diff = await dragColumn(aSecond + 1, true);
  await page.selectOption("#lane", { index: 1 });
  const laneTotal = (await page.evaluate(() => gsymprofHeatmap.cells())).reduce((x, y) => x + y, 0);
  await page.screenshot({ path: process.env.SCREENSHOT, fullPage: true });
  await browser.close();
  console.log(JSON.stringify({ loadMs, rows, columns, dominant, a, b, dragB, dragA, diff, laneTotal,
                               requests, errors }));
})().catch((e) => { console.log(JSON.stringify({ exception: String(e) })); process.exit(1); });
EOF
echo "chromium: alternation, a range's flame graph, no request"
NPM_CACHE=$NPM_CACHE CHROMIUM=$CHROMIUM PAGE_URL="file://$WORK/heat.html" SCREENSHOT="$WORK/heatmap.png" \
  timeout 120 node "$WORK/drive.js" > "$WORK/result.json" 2> "$WORK/node.err" ||
  { cat "$WORK/result.json" "$WORK/node.err" | tail -20; fail "driving the page in chromium failed"; }
python3 - "$WORK/result.json" "$WORK/cap.json" <<'EOF' || fail "the heatmap did not behave as expected (above)"
import json, sys
r = json.load(open(sys.argv[1]))
samples = json.load(open(sys.argv[2]))["samples"]
print("  loaded in %d ms; %d columns x %d rows; dominant: %s" % (r["loadMs"], r["columns"], r["rows"], " ".join(r["dominant"])))
print("  phase_b second: hottest %s (%s); phase_a second: hottest %s" % (r["dragB"]["hottest"], r["dragB"]["title"], r["dragA"]["hottest"]))
problems = []
if r["errors"]: problems.append("script errors: %s" % r["errors"])
if r["requests"]: problems.append("requests left the page: %s" % r["requests"])
if r["rows"] != 20 or r["columns"] < 6: problems.append("expected 20 rows and at least 6 columns")
if r["dominant"] != ["phase_a", "phase_b"] * 3: problems.append("columns do not alternate: %s (a %s, b %s)" % (r["dominant"], r["a"], r["b"]))
if r["dragB"]["hottest"] != "phase_b": problems.append("a phase_b second's flame graph: hottest leaf %s" % r["dragB"]["hottest"])
if r["dragA"]["hottest"] != "phase_a": problems.append("a phase_a second's flame graph: hottest leaf %s" % r["dragA"]["hottest"])
if not r["diff"]["title"].startswith("Range 2"): problems.append("shift+drag gave no diff: %s" % r["diff"]["title"])
if r["laneTotal"] != samples: problems.append("the process lane shows %d of %d samples" % (r["laneTotal"], samples))
for p in problems: print("  " + p)
sys.exit(1 if problems else 0)
EOF
[[ $(head -c 8 "$WORK/heatmap.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "no PNG screenshot"
[[ -n ${SCREENSHOT_OUT:-} ]] && cp "$WORK/heatmap.png" "$SCREENSHOT_OUT"

# The harness can fail: a page whose script throws is caught.
sed 's/^var D = JSON.parse/undefinedFunctionCall();\nvar D = JSON.parse/' "$WORK/heat.html" > "$WORK/broken.html"
grep -q undefinedFunctionCall "$WORK/broken.html" || fail "could not build the broken page"
NPM_CACHE=$NPM_CACHE CHROMIUM=$CHROMIUM PAGE_URL="file://$WORK/broken.html" SCREENSHOT="$WORK/broken.png" \
  timeout 120 node "$WORK/drive.js" > "$WORK/broken.json" 2>&1 && fail "a broken page passed the harness"
echo "ok: heatmap alternates phase_a/phase_b, a phase_b second's flame graph tops out in phase_b, no request left the page"
