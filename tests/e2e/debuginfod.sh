#!/bin/bash
# e2e (root): debug info from debuginfod. elfutils' own server (Debian
# `debuginfod`) on 127.0.0.1 serves a fixture's debug file and its stripped
# executable; a stripped copy of the fixture is profiled
#  1. without DEBUGINFOD_URLS: no names (the test is real), nothing fetched;
#  2. with it, the same GSYM cache: names and inline frames from the debug
#     file (the symbols-only GSYM of run 1 is converted again);
#  3. recorded, the binary deleted, symbolized with a fresh cache: the
#     executable and its debug file both come from the server;
#  4. a server that is gone, or that accepts and never answers, is a reason
#     in the summary, not a hang.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
command -v debuginfod > /dev/null && command -v debuginfod-find > /dev/null ||
  skip "no debuginfod server (Debian debuginfod)"
build_fixture pie
D=$WORK/pie
SRV=$WORK/served
mkdir -p "$SRV" "$WORK/run"
objcopy --only-keep-debug "$D/profile_fixture" "$SRV/profile_fixture.debug"
strip --strip-all -o "$SRV/profile_fixture" "$D/profile_fixture"
cp "$SRV/profile_fixture" "$WORK/run/profile_fixture"
cp "$D/libhot.so" "$WORK/run/"
FIX=$WORK/run/profile_fixture
ID=$(LC_ALL=C readelf -n "$FIX" | awk '/Build ID/ {print $3}')
[[ -n $ID ]] || fail "the fixture has no build ID"
EXEC_STACK="_start;__libc_start_main_impl;__libc_start_call_main;main;phase_exec;exec_outer_inline_[i];exec_inner_inline_[i];exec_leaf"

server_pid=
stop_server() { [[ -n $server_pid ]] && kill "$server_pid" 2> /dev/null && wait "$server_pid" 2> /dev/null; }
trap 'stop_server; cleanup' EXIT
for attempt in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 20000))
  debuginfod -F -p "$port" -d "$WORK/server.sqlite" -t 0 -g 0 "$SRV" > "$WORK/server.log" 2>&1 &
  server_pid=$!
  # Indexed when a fresh client (no negative cache) gets the debug file.
  for i in $(seq 60); do
    kill -0 "$server_pid" 2> /dev/null || break
    DEBUGINFOD_URLS=http://127.0.0.1:$port DEBUGINFOD_CACHE_PATH=$WORK/probe-$attempt-$i \
      debuginfod-find debuginfo "$ID" > /dev/null 2>&1 && break 2
    sleep 0.5
  done
  stop_server
  server_pid=
done
[[ -n $server_pid ]] || { cat "$WORK/server.log"; fail "debuginfod did not start or index $SRV"; }
URL=http://127.0.0.1:$port
export GSYMPROF_CACHE=$WORK/cache DEBUGINFOD_CACHE_PATH=$WORK/client-cache
unset DEBUGINFOD_URLS

echo "without DEBUGINFOD_URLS: no names from debug info, nothing fetched"
profile_run "$WORK/plain.folded" "$WORK/plain.err" -F 999 -- "$FIX" exec 1
grep -q 'exec_outer_inline' "$WORK/plain.folded" && fail "names without the debug file: the test is not real"
[[ -e $DEBUGINFOD_CACHE_PATH ]] && fail "something was fetched without DEBUGINFOD_URLS"

echo "with DEBUGINFOD_URLS: the debug file from the server"
DEBUGINFOD_URLS=$URL profile_run "$WORK/served.folded" "$WORK/served.err" -F 999 -- "$FIX" exec 1
expect_dominant "$WORK/served.folded" profile_fixture "$EXEC_STACK" 60
[[ -s $DEBUGINFOD_CACHE_PATH/$ID/debuginfo ]] || fail "the debug file was not fetched"
[[ -e $DEBUGINFOD_CACHE_PATH/$ID/executable ]] && fail "the executable was fetched although it was there"

echo "record, delete the binary, symbolize: executable and debug file from the server"
"$GSYMPROF" record -F 999 -o "$WORK/capture.json" -- "$FIX" exec 1 2> "$WORK/record.err" ||
  { cat "$WORK/record.err"; fail "record failed"; }
rm -f "$FIX"
GSYMPROF_CACHE=$WORK/cache-offline DEBUGINFOD_URLS=$URL "$GSYMPROF" symbolize "$WORK/capture.json" \
  > "$WORK/offline.folded" 2> "$WORK/offline.err" || { cat "$WORK/offline.err"; fail "symbolize failed"; }
expect_dominant "$WORK/offline.folded" profile_fixture "$EXEC_STACK" 60
grep -q "^  $FIX (build ID $ID): converted .*executable from debuginfod: .*debug file from debuginfod: " \
  "$WORK/offline.err" || { cat "$WORK/offline.err"; fail "report does not name the downloads"; }
GSYMPROF_CACHE=$WORK/cache-none "$GSYMPROF" symbolize "$WORK/capture.json" > "$WORK/none.folded" 2> "$WORK/none.err" ||
  fail "symbolize without debuginfod failed"
grep -q "^  $FIX (build ID $ID): no symbols: no GSYM for build ID $ID; file missing$" "$WORK/none.err" ||
  { cat "$WORK/none.err"; fail "without debuginfod the missing binary is not just 'file missing'"; }

echo "a server that does not answer: a reason, not a hang"
stop_server
server_pid=
start=$SECONDS
GSYMPROF_CACHE=$WORK/cache-dead DEBUGINFOD_URLS=$URL DEBUGINFOD_TIMEOUT=3 DEBUGINFOD_CACHE_PATH=$WORK/dead-cache \
  "$GSYMPROF" symbolize "$WORK/capture.json" > /dev/null 2> "$WORK/dead.err" || fail "symbolize with a dead server failed"
(( SECONDS - start < 60 )) || fail "a dead server held symbolize for $((SECONDS - start)) s"
grep -q "^  $FIX (build ID $ID): no symbols: no GSYM for build ID $ID; file missing; debuginfod: executable for $ID: " \
  "$WORK/dead.err" || { cat "$WORK/dead.err"; fail "no debuginfod reason in the report"; }
# A server that accepts and then says nothing: DEBUGINFOD_TIMEOUT ends it.
if command -v python3 > /dev/null; then
  python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
conns = []
while True:
    conns.append(s.accept()[0])' > "$WORK/silent.port" &
  silent_pid=$!
  for i in $(seq 50); do [[ -s $WORK/silent.port ]] && break; sleep 0.1; done
  start=$SECONDS
  GSYMPROF_CACHE=$WORK/cache-silent DEBUGINFOD_URLS=http://127.0.0.1:$(cat "$WORK/silent.port") DEBUGINFOD_TIMEOUT=2 \
    DEBUGINFOD_CACHE_PATH=$WORK/silent-cache "$GSYMPROF" symbolize "$WORK/capture.json" > /dev/null 2> "$WORK/silent.err"
  rc=$?
  kill "$silent_pid"
  [[ $rc == 0 ]] || { cat "$WORK/silent.err"; fail "symbolize with a silent server failed"; }
  (( SECONDS - start < 60 )) || fail "a silent server held symbolize for $((SECONDS - start)) s"
  grep -q "file missing; debuginfod: executable for $ID: " "$WORK/silent.err" ||
    { cat "$WORK/silent.err"; fail "no debuginfod reason for a silent server"; }
  grep "debuginfod: executable for $ID" "$WORK/silent.err" | sed 's/^/  /'
fi
echo "ok"
