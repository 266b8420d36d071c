#!/bin/bash
# e2e (issue 27): `gsymprof agent --otlp-ca FILE` over TLS to a real
# OpenTelemetry Collector (tests/support/otelcol) serving both receivers
# with a certificate signed by a CA made here (openssl): OTLP/gRPC and
# OTLP/HTTP windows arrive with the fixture's samples. With another CA's
# file the Collector's certificate is refused: nothing arrives, the agent
# says why in one line, counts the failures (/metrics), keeps sampling and
# exits 0 on SIGTERM.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
command -v openssl >/dev/null || skip "no openssl"
ROOT_DIR=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT_DIR/tests/support/otelcol/otelcol.bash"
trap 'otelcol_stop; cleanup' EXIT

# make_ca NAME: $WORK/NAME.ca.pem and its key.
make_ca() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=gsymprof test $1" \
    -keyout "$WORK/$1.ca.key" -out "$WORK/$1.ca.pem" 2>/dev/null || fail "openssl: cannot make CA $1"
}
make_ca good
make_ca other
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$WORK/server.key" -out "$WORK/server.csr" 2>/dev/null &&
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$WORK/san.ext" &&
  openssl x509 -req -in "$WORK/server.csr" -CA "$WORK/good.ca.pem" -CAkey "$WORK/good.ca.key" -CAcreateserial \
    -days 2 -extfile "$WORK/san.ext" -out "$WORK/server.pem" 2>/dev/null || fail "openssl: cannot sign the server certificate"

export OTELCOL_TLS_CERT=$WORK/server.pem OTELCOL_TLS_KEY=$WORK/server.key
otelcol_start_for_test "$WORK/profiles.jsonl" "$WORK/otelcol"

build_fixture pie
FIX=$WORK/pie/profile_fixture
"$FIX" exec 60 >/dev/null 2>&1 &
fixture=$!

# run_agent NAME SECONDS ARGS...: the agent on the fixture for SECONDS,
# then SIGTERM; must exit 0. Its /metrics in $WORK/NAME.metrics.
run_agent() {
  local name=$1 seconds=$2 port= agent
  shift 2
  "$GSYMPROF" agent -p "$fixture" -F 99 --window 2 --listen 127.0.0.1:0 --spool-dir "$WORK/spool-$name" "$@" \
    2>"$WORK/$name.err" &
  agent=$!
  for _ in $(seq 100); do
    port=$(grep -so 'http://127.0.0.1:[0-9]*' "$WORK/$name.err" | head -1 | sed 's/.*://')
    [[ -n $port ]] && break
    sleep 0.1
  done
  [[ -n $port ]] || { cat "$WORK/$name.err" >&2; fail "agent $name said no port"; }
  sleep "$seconds"
  curl -sf --max-time 5 "http://127.0.0.1:$port/metrics" >"$WORK/$name.metrics" || true
  kill -TERM $agent
  wait $agent || { cat "$WORK/$name.err" >&2; fail "agent $name did not exit 0 on SIGTERM"; }
}

# fixture_samples FROM_LINE: the fixture's samples in the records from FROM_LINE on.
fixture_samples() {
  tail -n +"$1" "$OTELCOL_OUT" | grep -o "\"intValue\":\"$fixture\"" | wc -l
}

for protocol in grpc http; do
  endpoint=$OTELCOL_GRPC
  [[ $protocol == http ]] && endpoint=$OTELCOL_HTTP
  echo "$protocol over TLS, the CA that signed the Collector's certificate"
  first=$(( $(otelcol_records) + 1 ))
  run_agent "$protocol-good" 5 --otlp-endpoint "$endpoint" --otlp-protocol "$protocol" --otlp-ca "$WORK/good.ca.pem"
  otelcol_wait_records "$first" 20 || { cat "$WORK/$protocol-good.err" >&2; fail "$protocol: no window arrived over TLS"; }
  sleep 1
  n=$(fixture_samples "$first")
  echo "  $(( $(otelcol_records) - first + 1 )) records, the fixture's pid in $n samples' attributes"
  (( n > 0 )) || fail "$protocol: the records over TLS lack the fixture's samples"

  echo "$protocol over TLS, another CA: refused"
  first=$(( $(otelcol_records) + 1 ))
  run_agent "$protocol-other" 5 --otlp-endpoint "$endpoint" --otlp-protocol "$protocol" --otlp-ca "$WORK/other.ca.pem"
  sleep 1
  (( $(otelcol_records) < first )) || fail "$protocol: a window arrived though the CA does not match"
  failed=$(awk '/^gsymprof_windows_total\{/ && /outcome="failed"/ { s += $2 } END { print s + 0 }' "$WORK/$protocol-other.metrics")
  echo "  windows failed: $failed; $(grep -c 'otlp' "$WORK/$protocol-other.err") error lines"
  grep -qiE 'certificate|ssl|tls|handshake|unavailable' "$WORK/$protocol-other.err" ||
    { cat "$WORK/$protocol-other.err" >&2; fail "$protocol: no line saying why the export failed"; }
done
grep -h otlp "$WORK"/*-other.err | head -2 | cut -c1-200
echo ok
