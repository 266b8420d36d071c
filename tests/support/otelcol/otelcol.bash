# shellcheck shell=bash
# Start and stop the test OpenTelemetry Collector (issue 27). Source this file:
#
#   . tests/support/otelcol/otelcol.bash
#   otelcol_start /tmp/t/profiles.jsonl /tmp/t/otelcol   # OUT_FILE [STATE_DIR]
#   ... send to $OTELCOL_GRPC (gRPC) or $OTELCOL_HTTP_URL (HTTP) ...
#   otelcol_wait_records 2 30     # >= 2 export records in OUT_FILE within 30 s
#   otelcol_stop                  # SIGTERM, waits; the file is flushed
#   otelcol_start "$OTELCOL_OUT" "$OTELCOL_DIR"   # again, SAME ports, appends
#   otelcol_stop
#
# otelcol_start builds the binary once (build.sh; the first build takes
# minutes), picks two free TCP ports on 127.0.0.1 (kept when already set, so a
# restart listens where the agent already sends), writes STATE_DIR/otelcol.yaml
# from the template below, starts the Collector in the background (its log:
# STATE_DIR/otelcol.log) and returns once both ports accept connections.
# Exit status: 0 started; 1 failed (log tail on stderr); 77 no usable Go to
# build it (a test may treat that as "skipped"). The Collector outlives a
# shell killed by SIGKILL: call otelcol_stop from an EXIT trap.
#
# After a start these are set (and exported):
#   OTELCOL_PID        the Collector's process id
#   OTELCOL_GRPC       127.0.0.1:PORT  OTLP/gRPC, service
#                      opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export
#   OTELCOL_HTTP       127.0.0.1:PORT  OTLP/HTTP
#   OTELCOL_HTTP_URL   http://127.0.0.1:PORT/v1development/profiles
#   OTELCOL_GRPC_PORT, OTELCOL_HTTP_PORT, OTELCOL_OUT, OTELCOL_DIR,
#   OTELCOL_CONFIG, OTELCOL_LOG, OTELCOL_BIN
# The output file is OTLP JSON, one ExportProfilesServiceRequest-shaped
# ProfilesData object per line, appended to across restarts (append: true);
# decode it with decode.py. Set OTELCOL_TLS_CERT and OTELCOL_TLS_KEY (PEM
# files) before otelcol_start to serve both receivers over TLS.

OTELCOL_SUPPORT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# A TCP port on 127.0.0.1 that nothing listens on, from 20000-32767: below
# Linux's default ephemeral range, so outgoing connections never take it.
_otelcol_free_port() {
  local port tries
  for ((tries = 0; tries < 200; tries++)); do
    port=$((20000 + RANDOM % 12768))
    [[ $port == "${1:-}" ]] && continue
    if python3 - "$port" <<'PY' 2>/dev/null; then
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.close()
PY
      echo "$port"
      return 0
    fi
  done
  return 1
}

_otelcol_listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

_otelcol_write_config() {
  local tls=""
  if [[ -n ${OTELCOL_TLS_CERT:-} ]]; then
    tls="
        tls:
          cert_file: $OTELCOL_TLS_CERT
          key_file: $OTELCOL_TLS_KEY"
  fi
  cat >"$OTELCOL_CONFIG" <<YAML
# Written by tests/support/otelcol/otelcol.bash
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$OTELCOL_GRPC_PORT$tls
      http:
        endpoint: 127.0.0.1:$OTELCOL_HTTP_PORT$tls
exporters:
  file:
    path: $OTELCOL_OUT
    format: json
    append: true
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: info
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [file]
YAML
}

otelcol_start() {
  local out=${1:?usage: otelcol_start OUT_FILE [STATE_DIR]} dir=${2:-}
  if [[ -n ${OTELCOL_PID:-} ]] && kill -0 "$OTELCOL_PID" 2>/dev/null; then
    echo "otelcol_start: already running (pid $OTELCOL_PID)" >&2
    return 1
  fi
  local bin rc=0
  bin=$("$OTELCOL_SUPPORT_DIR/build.sh") || rc=$?
  if ((rc != 0)); then
    if ! "$OTELCOL_SUPPORT_DIR/build.sh" --check-go >/dev/null 2>&1; then return 77; fi
    return 1
  fi
  [[ -n $dir ]] || dir=$(dirname "$out")
  mkdir -p "$dir" "$(dirname "$out")"
  export OTELCOL_BIN=$bin OTELCOL_DIR=$dir OTELCOL_OUT=$out
  export OTELCOL_CONFIG=$dir/otelcol.yaml OTELCOL_LOG=$dir/otelcol.log
  local fixed_ports=0 attempt deadline
  [[ -n ${OTELCOL_GRPC_PORT:-} && -n ${OTELCOL_HTTP_PORT:-} ]] && fixed_ports=1
  for ((attempt = 1; attempt <= 5; attempt++)); do
    if ((fixed_ports == 0)); then
      OTELCOL_GRPC_PORT=$(_otelcol_free_port) || return 1
      OTELCOL_HTTP_PORT=$(_otelcol_free_port "$OTELCOL_GRPC_PORT") || return 1
    fi
    export OTELCOL_GRPC_PORT OTELCOL_HTTP_PORT
    export OTELCOL_GRPC=127.0.0.1:$OTELCOL_GRPC_PORT OTELCOL_HTTP=127.0.0.1:$OTELCOL_HTTP_PORT
    export OTELCOL_HTTP_URL=http://$OTELCOL_HTTP/v1development/profiles
    _otelcol_write_config
    echo "--- otelcol_start $(date -u +%FT%TZ) grpc=$OTELCOL_GRPC http=$OTELCOL_HTTP" >>"$OTELCOL_LOG"
    "$bin" --config "file:$OTELCOL_CONFIG" >>"$OTELCOL_LOG" 2>&1 &
    export OTELCOL_PID=$!
    deadline=$((SECONDS + 30))
    while ((SECONDS < deadline)); do
      if ! kill -0 "$OTELCOL_PID" 2>/dev/null; then break; fi
      if _otelcol_listening "$OTELCOL_GRPC_PORT" && _otelcol_listening "$OTELCOL_HTTP_PORT"; then
        return 0
      fi
      sleep 0.1
    done
    if kill -0 "$OTELCOL_PID" 2>/dev/null; then
      echo "otelcol_start: ports not listening after 30 s" >&2
      otelcol_stop
      tail -20 "$OTELCOL_LOG" >&2
      return 1
    fi
    wait "$OTELCOL_PID" 2>/dev/null
    OTELCOL_PID=
    # A port taken between the check and the bind: try other ports, or the
    # same ones again a little later when they were asked for.
    if tail -5 "$OTELCOL_LOG" | grep -q 'address already in use'; then
      ((fixed_ports)) && sleep 1
      continue
    fi
    break
  done
  echo "otelcol_start: the Collector did not start; $OTELCOL_LOG:" >&2
  tail -20 "$OTELCOL_LOG" >&2
  return 1
}

# SIGTERM, then up to 15 s for a clean shutdown (the file exporter flushes),
# then SIGKILL. Only ever signals the pid otelcol_start started.
otelcol_stop() {
  local pid=${OTELCOL_PID:-} i
  [[ -n $pid ]] || return 0
  if kill -TERM "$pid" 2>/dev/null; then
    for ((i = 0; i < 150; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "otelcol_stop: pid $pid did not stop in 15 s; SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null
    fi
  fi
  wait "$pid" 2>/dev/null
  OTELCOL_PID=
  return 0
}

# Number of export records (lines) the file exporter wrote so far.
otelcol_records() { if [[ -f ${OTELCOL_OUT:-} ]]; then wc -l <"$OTELCOL_OUT"; else echo 0; fi; }

# otelcol_wait_records N [TIMEOUT_S=30]: wait until OUT_FILE has >= N records.
otelcol_wait_records() {
  local want=${1:?usage: otelcol_wait_records N [TIMEOUT_S]} deadline=$((SECONDS + ${2:-30}))
  while (($(otelcol_records) < want)); do
    ((SECONDS < deadline)) || { echo "otelcol_wait_records: $(otelcol_records) of $want records after ${2:-30} s" >&2; return 1; }
    sleep 0.1
  done
}

# otelcol_start_for_test OUT_FILE STATE_DIR: otelcol_start for a
# tests/e2e script (it uses their skip and fail): skipped without a Go
# that builds the Collector, failed when it does not start; stopped by the
# script's EXIT trap (which must call otelcol_stop).
otelcol_start_for_test() {
  otelcol_start "$@"
  case $? in
    0) ;;
    77) skip "no Go >= 1.26 to build the Collector" ;;
    *) fail "the Collector did not start" ;;
  esac
}
