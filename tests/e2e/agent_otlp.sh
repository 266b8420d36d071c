#!/bin/bash
# e2e (issue 27): `gsymprof agent` exporting OTLP Profiles to a real
# OpenTelemetry Collector (tests/support/otelcol), read back by decode.py.
#  - gRPC, then HTTP/protobuf: decode.py --lint passes; the fixture's
#    complete stack with its inline frames; its labels (process.pid,
#    thread.name, process.executable.name, service.name); the GNU build IDs
#    on its mappings are readelf's; its sample rate agrees with a
#    `gsymprof profile -p PID` of the same fixture over the same seconds.
#  - The spool: the Collector stopped for two windows and started again on
#    the same ports: the spooled windows arrive, none twice, none missing.
#  - A small --spool-max-bytes: the windows missing at the Collector are
#    exactly the dropped ones /metrics counts.
#  - Hostile endpoints (garbage, a hang, an early close) over both
#    protocols: one error line each, sampling goes on (/metrics ticks
#    grow), exit 0 on SIGTERM.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
ROOT_DIR=$(cd "$(dirname "$0")/../.." && pwd)
SUPPORT=$ROOT_DIR/tests/support/otelcol
source "$SUPPORT/otelcol.bash"
trap 'otelcol_stop; cleanup' EXIT
otelcol_start_for_test "$WORK/profiles.jsonl" "$WORK/otelcol"

build_fixture pie
FIX=$WORK/pie/profile_fixture
EXEC_STACK="_start;__libc_start_main_impl;__libc_start_call_main;main;phase_exec;exec_outer_inline_[i];exec_inner_inline_[i];exec_leaf"
SERVICE=checkout "$FIX" exec 120 >/dev/null 2>&1 &
fixture=$!

# What the checks below read from the Collector's file: per record (line)
# its first profile's time_unix_nano, and the fixture's samples.
cat >"$WORK/records.py" <<'PY'
import json, sys
# records.py FILE FIRST_LINE -> one line per record from FIRST_LINE (1-based):
# "TIME_UNIX_NANO DURATION_NANO"
path, first = sys.argv[1], int(sys.argv[2])
for n, line in enumerate(open(path), 1):
    if n < first or not line.strip():
        continue
    rec = json.loads(line)
    times = {(int(p.get("timeUnixNano", 0)), int(p.get("durationNano", 0)))
             for r in rec.get("resourceProfiles", []) for s in r.get("scopeProfiles", [])
             for p in s.get("profiles", [])}
    if len(times) != 1:
        sys.exit("a record with profiles of %d different times" % len(times))
    t, d = times.pop()
    print(t, d)
PY

# start_agent NAME ARGS...: an agent on the fixture, its stderr in
# $WORK/NAME.err, its /metrics port in $port, its pid in $agent.
start_agent() {
  local name=$1
  shift
  "$GSYMPROF" agent -p "$fixture" -F 99 --window 2 --listen 127.0.0.1:0 --service-env SERVICE "$@" \
    2>"$WORK/$name.err" &
  agent=$!
  port=
  for _ in $(seq 100); do
    port=$(grep -so 'http://127.0.0.1:[0-9]*' "$WORK/$name.err" | head -1 | sed 's/.*://')
    [[ -n $port ]] && return 0
    kill -0 $agent 2>/dev/null || { cat "$WORK/$name.err" >&2; fail "agent $name exited at start"; }
    sleep 0.1
  done
  cat "$WORK/$name.err" >&2
  fail "agent $name said no port"
}

# stop_agent NAME [PID]: SIGTERM (unless sent already: SIGNALLED=1), exit 0 within 20 s.
stop_agent() {
  local name=$1 pid=${2:-$agent} rc
  [[ ${SIGNALLED:-0} == 1 ]] || kill -TERM "$pid"
  for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; fail "agent $name did not exit in 20 s after SIGTERM"; }
  wait "$pid"; rc=$?
  [[ $rc == 0 ]] || { cat "$WORK/$name.err" >&2; fail "agent $name exited $rc on SIGTERM"; }
}

metric() {  # metric PORT NAME{LABELS}
  curl -sf --max-time 5 "http://127.0.0.1:$1/metrics" | awk -v m="$2" 'index($0, m " ") == 1 { print $2 }'
}

# check_export FIRST_LINE PROTOCOL PROFILE_FOLDED: the checks of the
# records from FIRST_LINE on.
check_export() {
  local first=$1 protocol=$2 reference=$3
  tail -n +"$first" "$OTELCOL_OUT" >"$WORK/$protocol.jsonl"
  python3 "$SUPPORT/decode.py" --lint "$WORK/$protocol.jsonl" >"$WORK/$protocol.decoded" ||
    fail "$protocol: decode.py --lint found the records malformed"
  python3 "$SUPPORT/decode.py" --folded --type samples --comm-attr thread.name "$WORK/$protocol.jsonl" \
    >"$WORK/$protocol.folded" || fail "$protocol: decode.py --folded failed"
  expect_dominant "$WORK/$protocol.folded" profile_fixture "$EXEC_STACK" 90
  local build_id libc libc_id
  build_id=$(LC_ALL=C readelf -n "$FIX" | awk '/Build ID:/ {print $3}')
  libc=$(awk '$NF ~ /\/libc\.so\.6$/ {print $NF; exit}' /proc/$fixture/maps)
  libc_id=$(LC_ALL=C readelf -n "$libc" | awk '/Build ID:/ {print $3}')
  python3 - "$WORK/$protocol.decoded" "$fixture" "$FIX" "$build_id" "$libc" "$libc_id" "$reference" \
    "$WORK/$protocol.jsonl" <<'PY' || fail "$protocol: labels, build IDs or counts wrong"
import json, sys
decoded, pid, fix, fix_id, libc, libc_id, reference, records = sys.argv[1:]
mapping_ids, samples, labels_ok, labels_bad = {}, 0, 0, []
for line in open(decoded):
    f = line.rstrip("\n").split("\t")
    if f[0] == "mapping":
        attrs = dict(a.split("=", 1) for a in f[3:] if "=" in a)
        mapping_ids.setdefault(f[1], set()).add(attrs.get("process.executable.build_id.gnu"))
    elif f[0] == "sample" and f[1] == "samples/count":
        attrs = dict(a.split("=", 1) for a in f[5:] if "=" in a)
        if attrs.get("process.pid") != pid:
            continue
        samples += int(f[2])
        want = {"thread.name": "profile_fixture", "process.executable.name": "profile_fixture",
                "process.executable.path": fix, "service.name": "checkout"}
        bad = {k: attrs.get(k) for k, v in want.items() if attrs.get(k) != v}
        if bad: labels_bad.append(bad)
        else: labels_ok += 1
for path, want in ((fix, fix_id), (libc, libc_id)):
    got = set().union(*[ids for name, ids in mapping_ids.items() if name == path] or [set()])
    if got != {want}:
        sys.exit(f"  build IDs of {path}: {got}, readelf says {want}")
print(f"  build IDs of {fix.split('/')[-1]} and libc.so.6 are readelf's; labels right on {labels_ok} samples")
if labels_bad or not labels_ok:
    sys.exit(f"  wrong labels: {labels_bad[:3]}")
# Rates: samples per second of the fixture in the export vs gsymprof profile.
seconds = 0
for line in open(records):
    rec = json.loads(line)
    times = {(int(p["timeUnixNano"]), int(p.get("durationNano", 0))) for r in rec["resourceProfiles"]
             for s in r["scopeProfiles"] for p in s["profiles"]}
    seconds += sum(d for _, d in times) / 1e9
ref = sum(int(l.rsplit(" ", 1)[1]) for l in open(reference) if l.startswith("profile_fixture;"))
ref_rate, rate = ref / 6.0, samples / seconds
print(f"  fixture: {samples} samples in {seconds:.1f} s = {rate:.1f}/s; gsymprof profile: {ref} in 6 s = {ref_rate:.1f}/s")
# Both sample the same busy thread at 99 Hz over overlapping seconds: they
# differ by timer jitter and the edges of ticks (a few percent); 15% leaves
# room for a loaded 2-CPU machine stealing the fixture's CPU unevenly.
if not (ref_rate > 10 and abs(rate - ref_rate) <= 0.15 * ref_rate):
    sys.exit("  the rates disagree by more than 15% (or the fixture hardly ran)")
PY
}

echo "gRPC"
first=$(( $(otelcol_records) + 1 ))
start_agent grpc --otlp-endpoint "$OTELCOL_GRPC" --otlp-protocol grpc --otlp-insecure --spool-dir "$WORK/spool-grpc"
"$GSYMPROF" profile -p "$fixture" -d 6 -F 99 >"$WORK/reference.folded" 2>"$WORK/reference.err" ||
  { cat "$WORK/reference.err" >&2; fail "gsymprof profile -p failed"; }
otelcol_wait_records $((first + 2)) 30 || { cat "$WORK/grpc.err" >&2; fail "gRPC: fewer than 3 windows arrived"; }
stop_agent grpc
sleep 0.5
check_export "$first" grpc "$WORK/reference.folded"

echo "HTTP/protobuf"
first=$(( $(otelcol_records) + 1 ))
start_agent http --otlp-endpoint "$OTELCOL_HTTP" --otlp-protocol http --otlp-insecure --spool-dir "$WORK/spool-http"
"$GSYMPROF" profile -p "$fixture" -d 6 -F 99 >"$WORK/reference2.folded" 2>"$WORK/reference2.err" ||
  { cat "$WORK/reference2.err" >&2; fail "gsymprof profile -p failed"; }
otelcol_wait_records $((first + 2)) 30 || { cat "$WORK/http.err" >&2; fail "HTTP: fewer than 3 windows arrived"; }
stop_agent http
sleep 0.5
check_export "$first" http "$WORK/reference2.folded"

# windows_check FIRST_LINE MISSING: the records' windows, none twice, and
# MISSING 2-s windows absent between the first and the last.
windows_check() {
  python3 "$WORK/records.py" "$OTELCOL_OUT" "$1" >"$WORK/windows.txt" || fail "records unreadable"
  python3 - "$WORK/windows.txt" "$2" <<'PY' || fail "the windows that arrived are not the ones expected"
import sys
times = [int(l.split()[0]) for l in open(sys.argv[1])]
if len(times) != len(set(times)):
    sys.exit(f"  a window arrived twice: {sorted(times)}")
times.sort()
missing = sum(round((b - a) / 2e9) - 1 for a, b in zip(times, times[1:]))
print(f"  {len(times)} windows arrived, none twice; {missing} missing between them (expected {sys.argv[2]})")
sys.exit(0 if missing == int(sys.argv[2]) else 1)
PY
}

echo "spool: the Collector stopped for two windows"
first=$(( $(otelcol_records) + 1 ))
start_agent spool --otlp-endpoint "$OTELCOL_GRPC" --otlp-insecure --spool-dir "$WORK/spool"
otelcol_wait_records "$first" 20 || fail "spool: no first window"
otelcol_stop
sleep 4.5
spooled=$(ls "$WORK/spool" | grep -c '^otlp-.*\.pb$')
echo "  $spooled windows spooled while the Collector was down"
(( spooled >= 2 )) || fail "spool: $spooled windows in the spool after two windows down"
otelcol_start "$OTELCOL_OUT" "$OTELCOL_DIR" || fail "the Collector did not start again"
deadline=$((SECONDS + 40))
while ls "$WORK/spool" | grep -q '^otlp-'; do
  ((SECONDS < deadline)) || fail "spool: the spooled windows were not sent within 40 s"
  sleep 0.2
done
stop_agent spool
sleep 0.5
windows_check "$first" 0
grep -q 'otlp: exporting again' "$WORK/spool.err" || fail "spool: the agent did not say it exported again"
errors=$(grep -c 'gsymprof agent: otlp:' "$WORK/spool.err")
(( errors == 2 )) || { cat "$WORK/spool.err" >&2; fail "spool: $errors lines for one outage, not 2 (down, up)"; }

echo "spool: --spool-max-bytes 4096 drops the oldest, counted"
first=$(( $(otelcol_records) + 1 ))
start_agent small --otlp-endpoint "$OTELCOL_GRPC" --otlp-insecure --spool-dir "$WORK/small" --spool-max-bytes 4096
otelcol_wait_records "$first" 20 || fail "small spool: no first window"
otelcol_stop
sleep 7
otelcol_start "$OTELCOL_OUT" "$OTELCOL_DIR" || fail "the Collector did not start again"
deadline=$((SECONDS + 40))
while ls "$WORK/small" | grep -q '^otlp-'; do
  ((SECONDS < deadline)) || fail "small spool: not sent within 40 s"
  sleep 0.2
done
sleep 2.5  # one more window after the outage, so the gap is closed on both sides
dropped=$(metric "$port" 'gsymprof_windows_total{sink="otlp",outcome="dropped"}')
exported=$(metric "$port" 'gsymprof_windows_total{sink="otlp",outcome="exported"}')
echo "  /metrics: $exported exported, $dropped dropped"
[[ -n $dropped ]] && (( dropped >= 1 )) || fail "small spool: $dropped windows counted dropped"
windows_check "$first" "$dropped"
stop_agent small

echo "hostile endpoints"
cat >"$WORK/hostile.py" <<'PY'
import os, socket, sys, threading, time
# hostile.py MODE: listens on 127.0.0.1:0, prints the port, then per
# connection: garbage (reads a little, answers random bytes, closes),
# hang (accepts and never answers), close (closes at once).
mode = sys.argv[1]
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(16)
print(server.getsockname()[1], flush=True)
held = []
def serve(conn):
    if mode == "garbage":
        conn.settimeout(2)
        try: conn.recv(4096)
        except OSError: pass
        conn.sendall(os.urandom(3000))
        conn.close()
    elif mode == "hang":
        held.append(conn)
    else:
        conn.close()
while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
PY
declare -A hostile_port hostile_pid agents ports
for mode in garbage hang close; do
  python3 "$WORK/hostile.py" $mode >"$WORK/hostile-$mode.port" &
  hostile_pid[$mode]=$!
  for _ in $(seq 50); do [[ -s $WORK/hostile-$mode.port ]] && break; sleep 0.1; done
  hostile_port[$mode]=$(cat "$WORK/hostile-$mode.port")
  [[ -n ${hostile_port[$mode]} ]] || fail "the $mode server did not start"
  for protocol in grpc http; do
    start_agent "$mode-$protocol" --otlp-endpoint "127.0.0.1:${hostile_port[$mode]}" --otlp-protocol $protocol \
      --otlp-insecure --spool-dir "$WORK/spool-$mode-$protocol"
    agents[$mode-$protocol]=$agent
    ports[$mode-$protocol]=$port
  done
done
declare -A ticks
for name in "${!agents[@]}"; do ticks[$name]=$(metric "${ports[$name]}" 'gsymprof_ticks_total'); done
sleep 12  # a hanging endpoint answers nothing for the 10 s of an export's timeout
for name in "${!agents[@]}"; do
  now=$(metric "${ports[$name]}" 'gsymprof_ticks_total')
  [[ -n $now ]] || fail "$name: /metrics does not answer"
  (( ${now%.*} > ${ticks[$name]%.*} )) || fail "$name: ticks did not grow (${ticks[$name]} -> $now)"
  errors=$(grep -c 'gsymprof agent: otlp:' "$WORK/$name.err")
  line=$(grep -m1 'gsymprof agent: otlp:' "$WORK/$name.err")
  echo "  $name: ticks ${ticks[$name]} -> $now, $errors error lines: ${line:0:150}"
  (( errors == 1 )) || { cat "$WORK/$name.err" >&2; fail "$name: $errors error lines"; }
done
for name in "${!agents[@]}"; do kill -TERM "${agents[$name]}"; done
for name in "${!agents[@]}"; do SIGNALLED=1 stop_agent "$name" "${agents[$name]}"; done
for mode in garbage hang close; do kill "${hostile_pid[$mode]}" 2>/dev/null; done
kill $fixture 2>/dev/null
echo "ok"
