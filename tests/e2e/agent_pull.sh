#!/bin/bash
# e2e (issue 27): `gsymprof agent` without a backend.
#  - --listen: `go tool pprof -raw http://127.0.0.1:PORT/debug/pprof/profile?seconds=3`
#    (net/http/pprof's contract, Go's own client) gives the fixture's
#    complete stack with its inline frames, and the agent's labels
#    (process.executable.name, service.name from --service-env) on its
#    samples; /metrics parses with Prometheus's own text parser
#    (tests/support/otelcol promparse) and counts what happened (ticks,
#    samples, windows exported by sink, pulls served); a bad ?seconds= is 400,
#    another path 404.
#  - --output-dir: one pprof per window, the newest kept within
#    --output-max-files, in a private (0700) directory; the fixture's
#    share of each full window's samples is what a whole-host profile of a
#    busy fixture gives (at least half).
#  - --comm: only the named processes' samples.
#  - SIGTERM: the window in progress is written, exit 0.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
ROOT_DIR=$(cd "$(dirname "$0")/../.." && pwd)
require_go_pprof  # and the Go of the metrics parser
PROMPARSE=$("$ROOT_DIR/tests/support/otelcol/build.sh" promparse) || fail "cannot build the metrics parser"

build_fixture pie
FIX=$WORK/pie/profile_fixture
EXEC_STACK="_start;__libc_start_main_impl;__libc_start_call_main;main;phase_exec;exec_outer_inline_[i];exec_inner_inline_[i];exec_leaf"

# Long enough for a loaded host (the cleanup stops it).
SERVICE=checkout "$FIX" exec 300 >/dev/null 2>&1 &
fixture=$!
agent_err=$WORK/agent.err
"$GSYMPROF" agent -F 199 --window 2 --listen 127.0.0.1:0 --output-dir "$WORK/out" --output-max-files 3 \
  --service-env SERVICE 2>"$agent_err" &
agent=$!
port=
for _ in $(seq 100); do
  port=$(grep -o 'http://127.0.0.1:[0-9]*' "$agent_err" | head -1 | sed 's/.*://')
  [[ -n $port ]] && break
  kill -0 $agent 2>/dev/null || { cat "$agent_err" >&2; fail "the agent exited at start"; }
  sleep 0.1
done
[[ -n $port ]] || { cat "$agent_err" >&2; fail "the agent said no port"; }
echo "agent on port $port"
# At once, while the agent's first windows convert the host's modules into
# its empty cache: the pull is answered on its own thread, within go tool
# pprof's deadline (1.5 times the seconds asked).

echo "pull: go tool pprof -raw"
"$GO" tool pprof -raw "http://127.0.0.1:$port/debug/pprof/profile?seconds=3" >"$WORK/raw.txt" 2>"$WORK/raw.err" ||
  { cat "$WORK/raw.err" >&2; fail "go tool pprof could not fetch the profile"; }
# -raw prints each sample's location ids, then labels; the locations table
# names them (innermost first per location).
python3 - "$WORK/raw.txt" "$fixture" <<'PY' || fail "the pulled profile does not hold the fixture's stack and labels"
import re, sys
text = open(sys.argv[1]).read()
pid = sys.argv[2]
samples_part, _, rest = text.partition("Locations")
locations_part = rest.split("Mappings")[0]
names = {}
for line in locations_part.splitlines():
    m = re.match(r"\s+(\d+): 0x[0-9a-f]+ M=\d+ (.*)", line)
    if not m:
        m2 = re.match(r"\s+(\S.*)", line)
        if m2 and names and last is not None:
            names[last].append(m2.group(1))  # an inlined caller of the line above
        continue
    last = m.group(1)
    names[last] = [m.group(2)]
def fn(entry):
    return entry.split(" ")[0]
fixture = exec_leaf = 0
ok_labels = False
lines = samples_part.splitlines()
for i, line in enumerate(lines):
    m = re.match(r"\s+(\d+)\s+\d+: ([\d ]+)$", line)
    if not m:
        continue
    count = int(m.group(1))
    frames = []
    for loc in m.group(2).split():
        frames += [fn(e) for e in names.get(loc, [])]
    labels = " ".join(lines[i + 1:i + 3])
    if f"pid:[{pid}]" in labels:
        fixture += count
        if frames[:3] == ["exec_leaf", "exec_inner_inline", "exec_outer_inline"] and "main" in frames and "_start" in frames:
            exec_leaf += count
        if "process.executable.name:[profile_fixture]" in labels and "service.name:[checkout]" in labels:
            ok_labels = True
print(f"  fixture samples {fixture}, complete exec_leaf stacks {exec_leaf}, labels {'ok' if ok_labels else 'MISSING'}")
sys.exit(0 if fixture >= 100 and exec_leaf >= 0.9 * fixture and ok_labels else 1)
PY

echo "bad requests"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/debug/pprof/profile?seconds=abc")
[[ $code == 400 ]] || fail "?seconds=abc answered $code, not 400"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/debug/pprof/profile?seconds=100000")
[[ $code == 400 ]] || fail "?seconds=100000 answered $code, not 400"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/etc/passwd")
[[ $code == 404 ]] || fail "/etc/passwd answered $code, not 404"

echo "metrics"
# The export thread symbolizes behind sampling (converting the host's
# modules the first time): wait up to 60 s for two windows written.
metric() { awk -v m="$1" 'index($0, m " ") == 1 { print $2 }' "$WORK/metrics.parsed"; }
for _ in $(seq 60); do
  curl -sf "http://127.0.0.1:$port/metrics" >"$WORK/metrics.txt" || fail "/metrics did not answer"
  "$PROMPARSE" <"$WORK/metrics.txt" >"$WORK/metrics.parsed" || fail "/metrics is not Prometheus text"
  exported=$(metric 'gsymprof_windows_total{sink="files",outcome="exported"}')
  (( ${exported%.*} >= 2 )) && break
  sleep 1
done
ticks=$(metric 'gsymprof_ticks_total{}') samples=$(metric 'gsymprof_samples_total{}')
pulls=$(metric 'gsymprof_pulls_total{outcome="served"}')
rss=$(metric 'gsymprof_process_resident_memory_bytes{}')
echo "  ticks $ticks, samples $samples, windows written $exported, pulls served $pulls, rss $rss"
(( ${ticks%.*} >= 3 && ${samples%.*} > 0 && ${exported%.*} >= 2 && ${pulls%.*} == 1 && ${rss%.*} > 0 )) ||
  { cat "$WORK/metrics.parsed" >&2; fail "/metrics does not count what happened"; }

echo "SIGTERM: the window in progress is written"
kill -TERM $agent
wait $agent; rc=$?
[[ $rc == 0 ]] || { cat "$agent_err" >&2; fail "the agent exited $rc on SIGTERM"; }
grep -q "stopped after" "$agent_err" || fail "the agent did not say it stopped"
mode=$(stat -c %a "$WORK/out")
[[ $mode == 700 ]] || fail "--output-dir is mode $mode, not 700"
files=$(ls "$WORK/out" | grep -c '^profile-.*\.pb\.gz$')
[[ $files == 3 ]] || { ls -la "$WORK/out" >&2; fail "--output-max-files 3 kept $files files"; }
newest=$(ls "$WORK/out" | sort | tail -1)
"$GO" tool pprof -raw "$WORK/out/$newest" >"$WORK/last.txt" 2>/dev/null || fail "the last window is not a pprof profile"
grep -q "pid:\[$fixture\]" "$WORK/last.txt" || fail "the last window holds no sample of the fixture"

echo "--comm: only the named processes"
"$GSYMPROF" agent -F 199 --window 2 --comm profile_fixture --output-dir "$WORK/comm" 2>"$WORK/comm.err" &
agent=$!
sleep 5
kill -TERM $agent; wait $agent || fail "agent --comm failed"
for f in "$WORK"/comm/*.pb.gz; do "$GO" tool pprof -raw "$f" 2>/dev/null; done >"$WORK/comm.txt"
others=$(grep -o 'comm:\[[^]]*\]' "$WORK/comm.txt" | sort -u | grep -v 'comm:\[profile_fixture\]' || true)
[[ -z $others ]] || fail "--comm profile_fixture kept other processes: $others"
grep -q 'comm:\[profile_fixture\]' "$WORK/comm.txt" || fail "--comm profile_fixture kept no sample of it"
kill $fixture 2>/dev/null
echo "ok"
