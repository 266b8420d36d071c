#!/bin/bash
# Renders a flame graph of a known folded file in headless Chromium and
# checks, from a script running inside the SVG document, that it loads
# without script errors and that click-to-zoom, Reset Zoom and search work
# with exact widths and percentages; then takes a screenshot (a PNG of the
# right size must come out; look at it with KEEP=1).
set -u
GSYMPROF=${GSYMPROF:-build/gsymprof}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[[ -x $GSYMPROF ]] || { echo "FAIL: $GSYMPROF not built"; exit 1; }
[[ -x $CHROMIUM ]] || { echo "skip: $CHROMIUM missing (scripts/install-deps.sh installs it)"; exit 77; }

tmp=$(mktemp -d)
trap '[[ -n ${KEEP:-} ]] && echo "kept $tmp" || rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

chromium() {  # ARGS...: headless, no network, no state kept
  timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$(mktemp -d "$tmp/profile.XXXXXX")" "$@" 2> "$tmp/chromium.log"
}

# 127 samples; names with XML metacharacters, inlined, kernel and unresolved frames.
cat > "$tmp/in.folded" <<'EOF2'
app;_start;__libc_start_main;main;compute;sq_[i] 50
app;_start;__libc_start_main;main;compute;cube_[i] 30
app;_start;__libc_start_main;main;work<std::vector<int> >;a<b>&"c" 15
app;_start;__libc_start_main;main;libx.so+0x1a2b 4
app;[unknown] 1
app;_start;__libc_start_main;main;syscall;entry_SYSCALL_64_[k];do_sys_[k] 7
other;main;busy 20
EOF2
"$GSYMPROF" flamegraph "$tmp/in.folded" -o "$tmp/graph.svg" --title 'Browser <test> & "graph"' ||
  fail "gsymprof flamegraph failed"

# The same document with two extra scripts: one first, recording every
# error event, and one last, driving the page and writing its findings into
# a <text id="result"> element that --dump-dom prints.
{
  sed -n '1,/^<svg /p' "$tmp/graph.svg"
  cat <<'EOF2'
<script type="text/ecmascript"><![CDATA[
window.__errors = [];
window.addEventListener("error", function (e) { window.__errors.push(String(e.message)); });
]]></script>
EOF2
  sed -e '1,/^<svg /d' -e '/^<\/svg>$/d' "$tmp/graph.svg"
  cat <<'EOF2'
<script type="text/ecmascript"><![CDATA[
(function () {
  var out = [];
  function frame(name) {
    var gs = document.querySelectorAll("#frames > g");
    for (var i = 0; i < gs.length; i++) {
      var t = gs[i].querySelector("title").textContent;
      if (t.slice(0, t.lastIndexOf(" (")) === name) return gs[i];
    }
    throw new Error("no frame " + name);
  }
  function width(name) { return frame(name).querySelector("rect").getAttribute("width"); }
  function shown(name) { return !frame(name).classList.contains("hidden"); }
  function click(el) { el.dispatchEvent(new MouseEvent("click", {bubbles: true})); }
  try {
    out.push("frames=" + document.querySelectorAll("#frames > g").length);
    out.push("initial compute=" + width("compute") + " sq=" + width("sq_[i]"));
    out.push("tooltip=" + frame("a<b>&\"c\"").querySelector("title").textContent);
    click(frame("compute").querySelector("rect"));
    out.push("zoomed compute=" + width("compute") + " sq=" + width("sq_[i]") + " cube=" +
             width("cube_[i]") + " main=" + width("main") + " busy-shown=" + shown("busy") +
             " all-parent=" + frame("all").classList.contains("parent") +
             " reset-shown=" + !document.getElementById("reset").classList.contains("hidden"));
    click(document.getElementById("reset"));
    out.push("reset compute=" + width("compute") + " busy-shown=" + shown("busy"));
    var box = document.getElementById("search");
    box.value = "SQ|cube";
    box.dispatchEvent(new Event("input"));
    out.push("search " + document.getElementById("matched").textContent + " sq-fill=" +
             frame("sq_[i]").querySelector("rect").getAttribute("fill") + " matches=" +
             document.querySelectorAll("#frames > g.match").length);
    box.value = "";
    box.dispatchEvent(new Event("input"));
    out.push("cleared=" + document.getElementById("matched").textContent + "|" +
             document.querySelectorAll("#frames > g.match").length);
  } catch (e) {
    out.push("EXCEPTION " + e);
  }
  out.push("errors=" + window.__errors.length + (window.__errors.length ? ":" + window.__errors.join("|") : ""));
  var t = document.createElementNS("http://www.w3.org/2000/svg", "text");
  t.setAttribute("id", "result");
  t.textContent = out.join("\n");
  document.documentElement.appendChild(t);
})();
]]></script>
</svg>
EOF2
} > "$tmp/test.svg"

chromium --dump-dom "file://$tmp/test.svg" > "$tmp/dom.txt" || { tail -5 "$tmp/chromium.log"; fail "chromium --dump-dom failed"; }
sed -n '/<text id="result">/,/<\/text>/p' "$tmp/dom.txt" | sed -e 's/.*<text id="result">//' -e 's/<\/text>.*//' > "$tmp/result.txt"
[[ -s $tmp/result.txt ]] || { head -c 2000 "$tmp/dom.txt"; fail "the test script did not run (SVG not well-formed or scripts blocked?)"; }

# Expected: graph width 1180 px; compute = 80/127, sq = 50/127 of it; zoomed
# into compute (80 samples): sq = 50/80, cube = 30/80; main (an ancestor)
# full width; the other process hidden; search "SQ|cube" (case-insensitive)
# matches 80 of 127 samples = 62.99%.
cat > "$tmp/expected.txt" <<'EOF2'
frames=18
initial compute=743.31 sq=464.57
tooltip=a&lt;b&gt;&amp;"c" (15 samples, 11.81%)
zoomed compute=1180.00 sq=737.50 cube=442.50 main=1180.00 busy-shown=false all-parent=true reset-shown=true
reset compute=743.31 busy-shown=true
search Matched: 62.99% sq-fill=rgb(230,0,230) matches=2
cleared=|0
errors=0
EOF2
diff -u "$tmp/expected.txt" "$tmp/result.txt" || fail "the flame graph did not behave as expected in Chromium"

# A page with a deliberate script error must be caught by the same harness
# (proves the error check can fail).
# (Only the first IIFE, the flame graph's own script, is broken.)
sed '0,/^(function () {$/s//(function () { undefinedFunctionCall();/' "$tmp/test.svg" > "$tmp/broken.svg"
grep -q undefinedFunctionCall "$tmp/broken.svg" || fail "could not build the broken page"
chromium --dump-dom "file://$tmp/broken.svg" > "$tmp/broken-dom.txt" || fail "chromium --dump-dom (broken) failed"
grep -q 'errors=[1-9]' "$tmp/broken-dom.txt" || fail "a script error went unnoticed by the harness"

# Screenshot of the plain SVG.
(cd "$tmp" && chromium --hide-scrollbars --window-size=1200,260 --screenshot="$tmp/graph.png" "file://$tmp/graph.svg") ||
  fail "chromium --screenshot failed"
[[ -s $tmp/graph.png ]] || fail "no screenshot written"
[[ $(head -c 8 "$tmp/graph.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "screenshot is not a PNG"
w=$(od -An -tu1 -j16 -N8 "$tmp/graph.png" | awk '{print $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8}')
[[ $w == "1200 260" ]] || fail "screenshot is $w, expected 1200 260"
[[ -n ${SCREENSHOT_OUT:-} ]] && cp "$tmp/graph.png" "$SCREENSHOT_OUT"
echo "ok: flame graph loads without script errors; zoom, reset and search work; screenshot $w"
