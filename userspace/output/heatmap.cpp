#include "userspace/output/heatmap.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "userspace/base/json_text.h"
#include "userspace/output/folded_output.h"
#include "userspace/output/frame_chains.h"

namespace gsymprof {
namespace {

constexpr uint64_t kMicrosPerSecond = 1000000;

// The page before and after its data. The script reads the data from the
// JSON block, draws the heatmap on a canvas and the flame graphs as boxes;
// every name goes through textContent or an attribute.
constexpr std::string_view kPageHead = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>gsymprof heatmap</title>
<style>
body { font-family: Verdana, "DejaVu Sans", sans-serif; font-size: 12px; margin: 10px; color: #000; background: #fff; }
h1 { font-size: 17px; margin: 0 0 4px 0; }
#info, #hint { color: #555; margin-bottom: 6px; }
#controls { margin: 6px 0; }
#controls > * { margin-right: 10px; }
#map-box { overflow-x: auto; border: 1px solid #ddd; }
#heatmap { display: block; cursor: crosshair; }
#cell-info { height: 16px; color: #333; margin: 4px 0; }
#flame-title { font-weight: bold; margin: 10px 0 4px 0; }
#flame { position: relative; width: 100%; min-height: 20px; border-top: 1px solid #ddd; overflow: hidden; }
.frame { position: absolute; height: 16px; box-sizing: border-box; border: 1px solid #fff; border-radius: 2px;
         overflow: hidden; white-space: nowrap; text-overflow: ellipsis; font-size: 11px; line-height: 14px;
         padding-left: 2px; cursor: pointer; }
.frame:hover { border-color: #000; }
#matched { color: #a0a; }
</style>
</head>
<body>
<h1 id="title"></h1>
<div id="info"></div>
<div id="controls">
<label>Lanes <select id="lane"></select></label>
<label>Search <input id="search" size="24" placeholder="regular expression"></label>
<span id="matched"></span>
<button id="clear" type="button">Clear selection</button>
<button id="reset-zoom" type="button">Reset zoom</button>
</div>
<div id="hint">Columns are seconds, rows are slices of a second, colour is samples. Drag over cells to see that range's flame graph; shift+drag a second range to compare it with the first (widths from the second, red grew, blue shrank). Click a frame to zoom.</div>
<div id="map-box"><canvas id="heatmap"></canvas></div>
<div id="cell-info"></div>
<div id="flame-title"></div>
<div id="flame"></div>
<script type="application/json" id="heatmap-data">)HTML";

constexpr std::string_view kPageTail = R"HTML(</script>
<script>
(function () {
"use strict";
var D = JSON.parse(document.getElementById("heatmap-data").textContent);
function $(id) { return document.getElementById(id); }
var ROWS = D.rows, COLS = Math.max(D.columns, 1), CELLS = ROWS * COLS;
var stacks = D.stacks.map(function (s) { return {lane: s[0], frames: s[1], cells: s[2], match: false}; });
var lanes = D.lanes.map(function (l) { return {pid: l[0], tid: l[1], comm: l[2]}; });
var laneChoice = "all", searchRe = null, rangeA = null, rangeB = null, zoom = [];
var MARGIN_LEFT = 56, MARGIN_TOP = 18;
var cellW = Math.max(3, Math.min(24, Math.floor(1100 / COLS)));
var cellH = Math.max(4, Math.min(20, Math.floor(320 / ROWS)));
var canvas = $("heatmap"), ctx = canvas.getContext("2d");
var shown = new Float64Array(CELLS), shownMax = 0;

document.title = D.title;
$("title").textContent = D.title;
$("info").textContent = (D.host ? D.host + ", " : "") + new Date(D.start_unix_ns / 1e6).toISOString() + ", " +
  (D.duration_us / 1e6).toFixed(1) + " s, " + D.samples + " " + D.unit + ", rows of " + D.slice_us / 1000 + " ms" +
  (D.untimed_samples ? " (" + D.untimed_samples + " samples without a time left out)" : "");

function laneOk(s) {
  if (laneChoice === "all") return true;
  var lane = lanes[s.lane];
  if (laneChoice.charAt(0) === "p") return "p" + lane.pid === laneChoice;
  return "t" + s.lane === laneChoice;
}
function cellStart(cell) {  // microseconds after the start
  return Math.floor(cell / ROWS) * 1e6 + (cell % ROWS) * D.slice_us;
}
function cellEnd(cell) { return Math.min(Math.floor(cell / ROWS) * 1e6 + 1e6, cellStart(cell) + D.slice_us); }
function seconds(us) { return (us / 1e6).toFixed(3) + " s"; }

// ---- the heatmap ----
function computeShown() {
  shown.fill(0);
  stacks.forEach(function (s) {
    if (!laneOk(s) || (searchRe && !s.match)) return;
    for (var k = 0; k < s.cells.length; k += 2) shown[s.cells[k]] += s.cells[k + 1];
  });
  shownMax = 0;
  for (var i = 0; i < CELLS; i++) shownMax = Math.max(shownMax, shown[i]);
}
function heat(v) {  // white to yellow to red, by the share of the busiest cell
  if (v <= 0) return "rgb(245,245,245)";
  var t = Math.sqrt(v / shownMax);
  return "rgb(" + Math.round(255 - 55 * t) + "," + Math.round(235 - 215 * t) + "," + Math.round(170 - 150 * t) + ")";
}
function inRange(range, cell) { return range && cell >= range[0] && cell <= range[1]; }
function drawHeatmap() {
  canvas.width = MARGIN_LEFT + COLS * cellW + 4;
  canvas.height = MARGIN_TOP + ROWS * cellH + 4;
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.fillStyle = "#333";
  ctx.font = "10px Verdana, sans-serif";
  ctx.textBaseline = "middle";
  var rowEvery = Math.max(1, Math.ceil(12 / cellH));
  for (var r = 0; r < ROWS; r += rowEvery)
    ctx.fillText(r * D.slice_us / 1000 + " ms", 2, MARGIN_TOP + r * cellH + cellH / 2);
  var colEvery = Math.max(1, Math.ceil(30 / cellW));
  for (var c = 0; c < COLS; c += colEvery) ctx.fillText(c + " s", MARGIN_LEFT + c * cellW, 8);
  for (var cell = 0; cell < CELLS; cell++) {
    var box = cellBox(cell);
    ctx.fillStyle = heat(shown[cell]);
    ctx.fillRect(box.x, box.y, box.w - 1, box.h - 1);
    if (inRange(rangeA, cell) || inRange(rangeB, cell)) {
      ctx.fillStyle = inRange(rangeB, cell) ? "rgba(0,160,0,0.45)" : "rgba(0,80,255,0.45)";
      ctx.fillRect(box.x, box.y, box.w - 1, box.h - 1);
    }
  }
}
function cellBox(cell) {  // canvas pixels
  return {x: MARGIN_LEFT + Math.floor(cell / ROWS) * cellW, y: MARGIN_TOP + (cell % ROWS) * cellH, w: cellW, h: cellH};
}
function cellAt(event) {
  var rect = canvas.getBoundingClientRect();
  var col = Math.floor((event.clientX - rect.left - MARGIN_LEFT) / cellW);
  var row = Math.floor((event.clientY - rect.top - MARGIN_TOP) / cellH);
  col = Math.max(0, Math.min(COLS - 1, col));
  row = Math.max(0, Math.min(ROWS - 1, row));
  return col * ROWS + row;
}

var drag = null;  // {which: "A" | "B", from: cell}
canvas.addEventListener("mousedown", function (e) {
  var cell = cellAt(e);
  drag = {which: e.shiftKey && rangeA ? "B" : "A", from: cell};
  if (drag.which === "A") rangeB = null;
  setRange(drag.which, [cell, cell]);
  drawHeatmap();
  e.preventDefault();
});
window.addEventListener("mousemove", function (e) {
  if (e.target === canvas) {
    var cell = cellAt(e);
    $("cell-info").textContent = "second " + Math.floor(cell / ROWS) + ", " + seconds(cellStart(cell)) + " to " +
      seconds(cellEnd(cell)) + ": " + shown[cell] + " " + D.unit;
  }
  if (!drag) return;
  var to = cellAt(e);
  setRange(drag.which, [Math.min(drag.from, to), Math.max(drag.from, to)]);
  drawHeatmap();
});
window.addEventListener("mouseup", function () {
  if (!drag) return;
  drag = null;
  zoom = [];
  drawFlame();
});
function setRange(which, range) { if (which === "A") rangeA = range; else rangeB = range; }

// ---- the flame graph of a range ----
function rangeTree(range) {
  var root = {name: -1, total: 0, self: 0, children: new Map()};
  stacks.forEach(function (s) {
    if (!laneOk(s)) return;
    var n = 0;
    for (var k = 0; k < s.cells.length; k += 2)
      if (s.cells[k] >= range[0] && s.cells[k] <= range[1]) n += s.cells[k + 1];
    if (!n) return;
    var node = root;
    root.total += n;
    s.frames.forEach(function (f) {
      var child = node.children.get(f);
      if (!child) node.children.set(f, child = {name: f, total: 0, self: 0, children: new Map()});
      child.total += n;
      node = child;
    });
    node.self += n;
  });
  return root;
}
function nameOf(node) { return node.name < 0 ? "all" : D.frames[node.name]; }
function hash(text) {
  var h = 2166136261;
  for (var i = 0; i < text.length; i++) { h ^= text.charCodeAt(i); h = Math.imul(h, 16777619); }
  return h >>> 0;
}
function kindColour(name) {  // as the SVG flame graphs colour kinds
  if (/_\[i\]$/.test(name)) return "rgb(80," + (190 + hash(name) % 50) + ",210)";
  if (/_\[k\]$/.test(name)) return "rgb(230," + (140 + hash(name) % 60) + ",40)";
  if (/_\[j\]$/.test(name)) return "rgb(60," + (180 + hash(name) % 60) + ",60)";
  if (/_\[p\]$/.test(name)) return "rgb(" + (215 + hash(name) % 40) + "," + (195 + hash(name) % 45) + ",60)";
  if (/^\[|\+0x[0-9a-f]+$/.test(name)) return "rgb(190,190,190)";
  var h = hash(name);
  return "rgb(" + (205 + h % 50) + "," + ((h >>> 8) % 230) + "," + ((h >>> 16) % 55) + ")";
}
function diffColour(delta, maxDelta) {  // red grew, blue shrank
  var k = maxDelta > 0 ? Math.round(210 * Math.min(1, Math.abs(delta) / maxDelta)) : 0;
  return delta > 0 ? "rgb(255," + (255 - k) + "," + (255 - k) + ")" : "rgb(" + (255 - k) + "," + (255 - k) + ",255)";
}
function percent(part, whole) { return whole ? (100 * part / whole).toFixed(2) + "%" : "0%"; }
function rangeText(range) {
  return seconds(cellStart(range[0])) + " to " + seconds(cellEnd(range[1]));
}
function descend(tree, path) {
  var node = tree;
  for (var i = 0; i < path.length && node; i++) node = node.children.get(path[i]);
  return node;
}

var drawnFrames = [];
function drawFlame() {
  var flame = $("flame");
  flame.textContent = "";
  drawnFrames = [];
  if (!rangeA) { $("flame-title").textContent = "Select a range in the heatmap."; updateMatched(null); return; }
  var treeA = rangeTree(rangeA), treeB = rangeB ? rangeTree(rangeB) : null;
  var tree = treeB || treeA;
  $("flame-title").textContent = treeB
    ? "Range 2, " + rangeText(rangeB) + " (" + treeB.total + " " + D.unit + ") against range 1, " + rangeText(rangeA) +
      " (" + treeA.total + "): widths from range 2, red grew, blue shrank (shares of each range)"
    : "Range " + rangeText(rangeA) + ": " + treeA.total + " " + D.unit;
  var focus = descend(tree, zoom);
  if (!focus) { zoom = []; focus = tree; }
  var width = flame.clientWidth || 1200, rowH = 17, total = focus.total || 1, maxDepth = 0;
  var boxes = [];
  // Ancestors of the zoomed frame, full width.
  var node = tree, path = [];
  for (var depth = 0; depth < zoom.length; depth++) {
    boxes.push({node: node, path: path.slice(), depth: depth, x: 0, w: width});
    path.push(zoom[depth]);
    node = node.children.get(zoom[depth]);
  }
  (function layout(node, path, depth, x) {
    var w = width * node.total / total;
    if (w < 0.5) return;
    boxes.push({node: node, path: path, depth: depth, x: x, w: w});
    maxDepth = Math.max(maxDepth, depth);
    var children = Array.from(node.children.values()).sort(function (a, b) {
      var p = D.frames[a.name], q = D.frames[b.name];
      return p < q ? -1 : p > q ? 1 : 0;
    });
    children.forEach(function (child) {
      layout(child, path.concat([child.name]), depth + 1, x);
      x += width * child.total / total;
    });
  })(focus, zoom.slice(), zoom.length, 0);
  maxDepth = Math.max(maxDepth, zoom.length);
  var maxDelta = 0, deltas = new Map();
  if (treeB) boxes.forEach(function (b) {
    var before = descend(treeA, b.path);
    var delta = b.node.total / (treeB.total || 1) - (before ? before.total : 0) / (treeA.total || 1);
    deltas.set(b, {delta: delta, before: before ? before.total : 0});
    maxDelta = Math.max(maxDelta, Math.abs(delta));
  });
  flame.style.height = (maxDepth + 1) * rowH + "px";
  boxes.forEach(function (b) {
    var name = nameOf(b.node), div = document.createElement("div");
    div.className = "frame";
    div.style.left = (100 * b.x / width) + "%";
    div.style.width = (100 * b.w / width) + "%";
    div.style.bottom = b.depth * rowH + "px";
    var title = name + " (" + b.node.total + " " + D.unit + ", " + percent(b.node.total, tree.total) + ")";
    var fill = kindColour(name);
    if (treeB) {
      var d = deltas.get(b);
      fill = diffColour(d.delta, maxDelta);
      title = name + " (range 2: " + b.node.total + ", " + percent(b.node.total, treeB.total) + "; range 1: " +
        d.before + ", " + percent(d.before, treeA.total) + "; " + (d.delta >= 0 ? "+" : "") +
        (100 * d.delta).toFixed(2) + " points)";
    }
    var hit = searchRe && b.node.name >= 0 && searchRe.test(name);
    div.style.background = hit ? "rgb(230,0,230)" : fill;
    if (b.w > 30) div.textContent = name;  // narrower frames: the tooltip only
    div.title = title;
    div.dataset.name = name;
    div.dataset.total = b.node.total;
    div.dataset.self = b.node.self;
    div.dataset.depth = b.depth;
    if (hit) div.dataset.match = "1";
    div.addEventListener("click", function () { zoom = b.path; drawFlame(); });
    flame.appendChild(div);
    drawnFrames.push({name: name, total: b.node.total, self: b.node.self, depth: b.depth, match: !!hit});
  });
  updateMatched(tree);
}
function updateMatched(tree) {
  if (!searchRe) { $("matched").textContent = ""; return; }
  var matched = 0, all = 0;
  stacks.forEach(function (s) {
    if (!laneOk(s)) return;
    var n = 0;
    for (var k = 0; k < s.cells.length; k += 2)
      if (!tree || inRange(rangeB || rangeA, s.cells[k])) n += s.cells[k + 1];
    all += n;
    if (s.match) matched += n;
  });
  $("matched").textContent = "Matched: " + percent(matched, all) + " of " + (tree ? "the range" : "the capture") +
    " (" + matched + " " + D.unit + "); the heatmap shows matching samples only";
}

// ---- lanes and search ----
(function fillLanes() {
  var select = $("lane"), perLane = new Float64Array(lanes.length), perPid = new Map();
  stacks.forEach(function (s) {
    for (var k = 1; k < s.cells.length; k += 2) perLane[s.lane] += s.cells[k];
  });
  lanes.forEach(function (l, i) {
    var p = perPid.get(l.pid) || {pid: l.pid, comm: l.comm, n: 0, best: -1, threads: []};
    p.n += perLane[i];
    if (perLane[i] > p.best) { p.best = perLane[i]; p.comm = l.comm; }
    p.threads.push(i);
    perPid.set(l.pid, p);
  });
  function option(value, text) {
    var o = document.createElement("option");
    o.value = value;
    o.textContent = text;
    select.appendChild(o);
  }
  option("all", "all threads (" + D.samples + ")");
  perPid.forEach(function (p) {
    option("p" + p.pid, "process " + p.pid + " " + p.comm + " (" + p.n + ")");
    if (p.threads.length > 1 || lanes[p.threads[0]].tid !== p.pid)
      p.threads.forEach(function (i) {
        option("t" + i, "\u00a0\u00a0thread " + lanes[i].tid + " " + lanes[i].comm + " (" + perLane[i] + ")");
      });
  });
  select.addEventListener("change", function () { laneChoice = select.value; zoom = []; redraw(); });
})();
$("search").addEventListener("input", function () {
  var text = $("search").value;
  searchRe = null;
  if (text) {
    try { searchRe = new RegExp(text, "i"); }
    catch (err) { searchRe = new RegExp(text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i"); }
  }
  var frameMatch = D.frames.map(function (name) { return !!searchRe && searchRe.test(name); });
  stacks.forEach(function (s) { s.match = s.frames.some(function (f) { return frameMatch[f]; }); });
  redraw();
});
$("clear").addEventListener("click", function () { rangeA = rangeB = null; zoom = []; redraw(); });
$("reset-zoom").addEventListener("click", function () { zoom = []; drawFlame(); });
window.addEventListener("keydown", function (e) { if (e.key === "Escape") { zoom = []; drawFlame(); } });

function redraw() { computeShown(); drawHeatmap(); drawFlame(); }
redraw();

// For tests and scripts: what is drawn, where the cells are.
window.gsymprofHeatmap = {
  rows: ROWS, columns: COLS,
  cells: function () { return Array.from(shown); },
  cellCenter: function (column, row) {  // client coordinates
    var rect = canvas.getBoundingClientRect(), box = cellBox(column * ROWS + row);
    return {x: rect.left + box.x + box.w / 2, y: rect.top + box.y + box.h / 2};
  },
  ranges: function () { return {first: rangeA, second: rangeB}; },
  frames: function () { return drawnFrames.slice(); },
  loadMs: performance.now()
};
document.body.dataset.ready = "1";
})();
</script>
</body>
</html>
)HTML";

// `text` as a JSON string that cannot close the script block: '<', '>' and
// '&' (which JSON allows raw) become \u escapes.
void append_data_string(std::string& out, std::string_view text) {
  std::string json;
  append_terminal_safe_json_string(json, text);
  for (char c : json) {
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else out += c;
  }
}

void append_number(std::string& out, uint64_t value) { out += std::to_string(value); }

// A capture stack's frame names, root first: its comm, "[truncated]" where
// the unwinder stopped, each frame's inline chain, the off-CPU reason.
std::vector<std::string> folded_names(const CaptureStack& stack, const FrameChains& chains) {
  std::vector<std::string> names{sanitize_folded_name(stack.comm)};
  if (stack.truncated) names.push_back("[truncated]");
  for (auto frame = stack.frames.rbegin(); frame != stack.frames.rend(); ++frame)
    for (uint32_t id : chains.chains[chains.numbers.at(*frame)])
      names.push_back(folded_frame(chains.symbolized.frames[id]));
  if (stack.off_cpu != OffCpuReason::None) names.push_back(off_cpu_frame_name(stack.off_cpu));
  return names;
}

// Counts `capture`'s samples with and without times into `page`; returns
// the last sample's time (microseconds from the start).
uint64_t count_sample_times(const Capture& capture, HeatmapPage& page) {
  uint64_t last_us = 0;
  for (const CaptureStack& stack : capture.stacks) {
    if (stack.times_us.size() == stack.count && stack.count != 0) {
      page.samples += stack.count;
      last_us = std::max(last_us, stack.times_us.back());
    } else {
      page.untimed_samples += stack.count;
    }
  }
  return last_us;
}

// Numbers a map's entries 0, 1, ... in key order.
template <typename Key>
void number_in_order(std::map<Key, uint32_t>& numbers) {
  uint32_t next = 0;
  for (auto& [key, number] : numbers) number = next++;
}

// One stack of the page's data: [lane, [frame numbers, root first], [cell,
// samples, ...]].
void append_stack(std::string& data, uint32_t lane, const std::vector<std::string>& names,
                  const std::map<std::string_view, uint32_t>& frame_numbers,
                  const std::map<uint64_t, uint64_t>& cells) {
  data += '[';
  append_number(data, lane);
  data += ",[";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) data += ',';
    append_number(data, frame_numbers.at(names[i]));
  }
  data += "],[";
  bool first = true;
  for (const auto& [cell, count] : cells) {
    if (!first) data += ',';
    first = false;
    append_number(data, cell);
    data += ',';
    append_number(data, count);
  }
  data += "]]";
}

}  // namespace

gsym::Expected<HeatmapPage> heatmap_page(const Capture& capture, GsymLocator& locator,
                                         const SymbolizeOptions& symbolize_options,
                                         const HeatmapOptions& options) {
  if (options.slice_ms == 0 || options.slice_ms > kMaxHeatmapSliceMs)
    return gsym::Error("slice of " + std::to_string(options.slice_ms) + " ms: must be 1 to " +
                       std::to_string(kMaxHeatmapSliceMs) + " ms");
  HeatmapPage page;
  const uint64_t last_us = count_sample_times(capture, page);
  if (page.samples == 0)
    return gsym::Error("no sample times in this capture (written before gsymprof kept them, or from perf.data): "
                       "record it with 'gsymprof record'");

  gsym::Expected<FrameChains> chains = symbolize_frames(capture, locator, symbolize_options);
  if (!chains) return chains.error();

  const uint64_t slice_us = uint64_t{options.slice_ms} * 1000;
  const uint64_t rows = (kMicrosPerSecond + slice_us - 1) / slice_us;
  const uint64_t duration_us = std::max(capture.duration_ns / 1000, last_us + 1);
  const uint64_t seconds = (duration_us + kMicrosPerSecond - 1) / kMicrosPerSecond;  // the columns

  // (thread, names root first) -> cell -> samples; names numbered once all
  // are known, in name order.
  using Thread = std::pair<uint32_t, uint32_t>;
  std::map<std::pair<Thread, std::vector<std::string>>, std::map<uint64_t, uint64_t>> entries;
  std::map<Thread, std::map<std::string, uint64_t>> thread_comms;  // samples per comm
  for (const CaptureStack& stack : capture.stacks) {
    if (stack.times_us.size() != stack.count || stack.count == 0) continue;
    const Thread thread{stack.pid, stack.tid};
    thread_comms[thread][sanitize_folded_name(stack.comm)] += stack.count;
    std::map<uint64_t, uint64_t>& cells = entries[{thread, folded_names(stack, *chains)}];
    for (uint64_t t : stack.times_us)
      ++cells[t / kMicrosPerSecond * rows + t % kMicrosPerSecond / slice_us];
  }
  std::map<std::string_view, uint32_t> frame_numbers;
  for (const auto& [key, cells] : entries)
    for (const std::string& name : key.second) frame_numbers.emplace(name, 0);
  number_in_order(frame_numbers);
  std::map<Thread, uint32_t> lane_numbers;
  for (const auto& [thread, comms] : thread_comms) lane_numbers.emplace(thread, 0);
  number_in_order(lane_numbers);

  std::string data = "{\"title\":";
  append_data_string(data, options.title);
  data += ",\"host\":";
  append_data_string(data, capture.host);
  const std::pair<const char*, uint64_t> numbers[] = {
      {"start_unix_ns", capture.start_time_unix_ns}, {"duration_us", duration_us}, {"slice_us", slice_us},
      {"rows", rows}, {"columns", seconds}, {"samples", page.samples}, {"untimed_samples", page.untimed_samples}};
  for (const auto& [key, value] : numbers) {
    data += std::string(",\"") + key + "\":";
    append_number(data, value);
  }
  data += ",\"unit\":\"samples\",\n\"frames\":[";
  for (const auto& [name, number] : frame_numbers) {
    if (number) data += ',';
    append_data_string(data, name);
  }
  data += "],\n\"lanes\":[";
  for (const auto& [thread, comms] : thread_comms) {
    if (lane_numbers.at(thread)) data += ',';
    data += '[' + std::to_string(thread.first) + ',' + std::to_string(thread.second) + ',';
    append_data_string(data, most_sampled_comm(comms));
    data += ']';
  }
  data += "],\n\"stacks\":[";
  for (const auto& [key, cells] : entries) {
    data += page.stacks++ ? ",\n" : "\n";
    append_stack(data, lane_numbers.at(key.first), key.second, frame_numbers, cells);
  }
  data += "\n]}";

  page.html.reserve(kPageHead.size() + data.size() + kPageTail.size());
  page.html += kPageHead;
  page.html += data;
  page.html += kPageTail;
  page.symbolized = std::move(chains->symbolized);
  return page;
}

}  // namespace gsymprof
