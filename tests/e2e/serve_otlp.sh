#!/bin/bash
# e2e (issue 32): `gsymprof agent --symbolize none` -> `gsymprof serve`
# (OTLP/gRPC in, --forward over gRPC) -> the OpenTelemetry Collector
# (tests/support/otelcol) -> its file output, beside a `gsymprof agent`
# that names frames on the host and exports to the same Collector, both
# sampling the same fixture over the same seconds.
#  - serve's store is filled by uploads: the fixture's and libc's
#    executables PUT under their build IDs, converted by its worker;
#  - decode.py --lint passes on what serve forwarded; the fixture's stacks
#    named through serve are the host agent's (every stack with 1% of the
#    samples or more, names and inline frames), the inline stack dominant in
#    both, and the sample counts agree within 15% (two agents, two timers);
#  - serve's /metrics counts named frames and forwarded requests;
#  - OTLP/HTTP on --listen: a request forwarded over HTTP to the Collector.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
source "$(dirname "$0")/fixtures/serve_common.bash"
require_live_profiling
ROOT_DIR=$(cd "$(dirname "$0")/../.." && pwd)
SUPPORT=$ROOT_DIR/tests/support/otelcol
source "$SUPPORT/otelcol.bash"
trap 'otelcol_stop; cleanup' EXIT
otelcol_start_for_test "$WORK/profiles.jsonl" "$WORK/otelcol"

build_fixture pie
FIX=$WORK/pie/profile_fixture
EXEC_STACK="_start;__libc_start_main_impl;__libc_start_call_main;main;phase_exec;exec_outer_inline_[i];exec_inner_inline_[i];exec_leaf"
"$FIX" exec 120 > /dev/null 2>&1 &
fixture=$!
sleep 0.3

mkdir -p "$WORK/store"
start_serve serve --gsym-dir "$WORK/store" --otlp-listen 127.0.0.1:0 --forward "$OTELCOL_GRPC" --forward-insecure
grpc=$(grep -so 'OTLP/gRPC on 127.0.0.1:[0-9]*' "$WORK/serve.err" | sed 's/.* on //')
[[ -n $grpc ]] || { cat "$WORK/serve.err"; fail "serve said no OTLP/gRPC address"; }

echo "uploads: the fixture's and libc's executables"
libc=$(awk '$NF ~ /\/libc\.so\.6$/ {print $NF; exit}' /proc/$fixture/maps)
for file in "$FIX" "$libc"; do
  id=$(LC_ALL=C readelf -n "$file" | awk '/Build ID:/ {print $3}')
  code=$(curl -s -o "$WORK/put.txt" -w '%{http_code}' -T "$file" "$serve_url/buildid/$id/executable")
  [[ $code == 201 ]] || { cat "$WORK/put.txt"; fail "upload of $file gave $code"; }
done
for _ in $(seq 120); do
  [[ $(serve_metric 'gsymprof_serve_conversions_total{outcome="converted"}') == 2 ]] && break
  sleep 0.5
done
[[ $(serve_metric 'gsymprof_serve_conversions_total{outcome="converted"}') == 2 ]] ||
  { cat "$WORK/serve.err"; fail "serve did not convert the two uploads"; }

echo "two agents: --symbolize none through serve, and host"
first=$(($(otelcol_records) + 1))
agents=()
for mode in serve host; do
  if [[ $mode == serve ]]; then args=(--symbolize none --otlp-endpoint "$grpc"); else args=(--otlp-endpoint "$OTELCOL_GRPC"); fi
  "$GSYMPROF" agent -p "$fixture" -F 99 --window 2 --user-callchains --service-name "via-$mode" --otlp-insecure \
    --spool-dir "$WORK/spool-$mode" "${args[@]}" 2> "$WORK/agent-$mode.err" &
  agents+=($!)
done
sleep 9
kill -TERM "${agents[@]}"
for pid in "${agents[@]}"; do wait "$pid" || fail "an agent exited $? on SIGTERM"; done
otelcol_wait_records $((first + 5)) 30 || { cat "$WORK"/agent-*.err "$WORK/serve.err"; fail "fewer than 6 windows arrived"; }
sleep 1
tail -n +"$first" "$OTELCOL_OUT" > "$WORK/all.jsonl"
grep '"via-serve"' "$WORK/all.jsonl" > "$WORK/serve.jsonl"
grep '"via-host"' "$WORK/all.jsonl" > "$WORK/host.jsonl"
[[ -s $WORK/serve.jsonl && -s $WORK/host.jsonl ]] || fail "the Collector lacks one agent's windows"
python3 "$SUPPORT/decode.py" --lint "$WORK/serve.jsonl" > /dev/null || fail "decode.py --lint: what serve forwarded is malformed"
for mode in serve host; do
  python3 "$SUPPORT/decode.py" --folded --type samples --comm-attr thread.name "$WORK/$mode.jsonl" |
    grep '^profile_fixture;' | LC_ALL=C sort > "$WORK/$mode.folded"
done
expect_dominant "$WORK/serve.folded" profile_fixture "$EXEC_STACK" 90
expect_dominant "$WORK/host.folded" profile_fixture "$EXEC_STACK" 90
python3 - "$WORK/serve.folded" "$WORK/host.folded" <<'PY' || fail "the stacks named through serve are not the host agent's"
import sys
def read(path):
    stacks = {}
    for line in open(path):
        stack, count = line.rstrip("\n").rsplit(" ", 1)
        stacks[stack] = stacks.get(stack, 0) + int(count)
    return stacks
serve, host = read(sys.argv[1]), read(sys.argv[2])
ts, th = sum(serve.values()), sum(host.values())
print(f"   fixture samples: {ts} through serve, {th} named on the host")
big = lambda s, t: {k for k, v in s.items() if v >= 0.01 * t}
if big(serve, ts) != big(host, th):
    print("   through serve only:", sorted(big(serve, ts) - big(host, th)))
    print("   host only:", sorted(big(host, th) - big(serve, ts)))
    sys.exit(1)
for k in sorted(big(host, th)):
    print(f"   {k}: {serve[k]} / {host[k]}")
if not th or abs(ts - th) > 0.15 * th:
    sys.exit("   the counts differ by more than 15%")
PY
named=$(serve_metric 'gsymprof_serve_frames_total{outcome="named"}')
sent=$(serve_metric 'gsymprof_serve_forwards_total{outcome="sent"}')
((named > 0 && sent >= 3)) || fail "/metrics: $named frames named, $sent requests forwarded"
echo "   serve /metrics: $named frames named, $sent requests forwarded"
stop_serve

echo "OTLP/HTTP on --listen, forwarded over HTTP"
start_serve serve-http --gsym-dir "$WORK/store" --forward "$OTELCOL_HTTP" --forward-protocol http --forward-insecure
first=$(($(otelcol_records) + 1))
"$GSYMPROF" agent -p "$fixture" -F 99 --window 2 --user-callchains --symbolize none --service-name via-http \
  --otlp-endpoint "${serve_url#http://}" --otlp-protocol http --otlp-insecure --spool-dir "$WORK/spool-http" \
  2> "$WORK/agent-http.err" &
agent=$!
otelcol_wait_records $((first + 1)) 30 || { cat "$WORK/agent-http.err" "$WORK/serve-http.err"; fail "nothing arrived over HTTP"; }
kill -TERM "$agent"
wait "$agent" || fail "the HTTP agent exited $?"
sleep 1
tail -n +"$first" "$OTELCOL_OUT" | grep '"via-http"' |
  python3 "$SUPPORT/decode.py" --folded --type samples --comm-attr thread.name - > "$WORK/http.folded"
expect_dominant "$WORK/http.folded" profile_fixture "$EXEC_STACK" 90
stop_serve
kill "$fixture"
echo "ok"
