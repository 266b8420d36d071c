#!/bin/bash
# e2e (issue 32): uploads to `gsymprof serve` by build ID.
#  1. a stripped fixture (strip --strip-all; its debug file made by objcopy
#     --only-keep-debug) is recorded; its pprof, names stripped, POSTed to a
#     serve with an empty store: the fixture's frames stay unnamed;
#  2. uploads refused with a 4xx and one line: another file's build ID
#     (libhot.so under the fixture's ID: 422, nothing stored, GET 404), a
#     file that is not ELF, a URL ID that is not hex;
#  3. PUT /buildid/ID/debuginfo of the debug file: 201; the worker converts
#     it off the request path (a POST meanwhile answers at once, its frames
#     counted pending_conversion or named), then the fixture's stack is
#     named with its inline frames, through the debug file's executable
#     segment (the stripped file itself is not in the store);
#  4. elfutils' debuginfod-find downloads the debug file from the service,
#     the same bytes;
#  5. a second service with an empty store and --debuginfod-urls pointing at
#     the first fetches the debug file, stores it by build ID, converts it
#     and names the same stack.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
source "$(dirname "$0")/fixtures/serve_common.bash"
require_live_profiling
require_pprof_tools
command -v debuginfod-find > /dev/null || skip "no debuginfod-find (Debian debuginfod)"

build_fixture pie
D=$WORK/pie FIX=$D/profile_fixture
objcopy --only-keep-debug "$FIX" "$D/profile_fixture.debug" || fail "objcopy --only-keep-debug failed"
strip --strip-all "$FIX" || fail "strip failed"
id=$(LC_ALL=C readelf -n "$FIX" | awk '/Build ID:/ {print $3}')
lib_id=$(LC_ALL=C readelf -n "$D/libhot.so" | awk '/Build ID:/ {print $3}')
[[ -n $id && -n $lib_id ]] || fail "the fixture has no build ID"

"$FIX" exec 20 & exec_pid=$!
sleep 0.3
"$GSYMPROF" record -p "$exec_pid" -d 2 -F 499 --user-callchains -o "$WORK/capture.json" 2> "$WORK/record.err" ||
  { cat "$WORK/record.err"; fail "record failed"; }
kill "$exec_pid"
wait "$exec_pid" 2> /dev/null
"$GSYMPROF" symbolize "$WORK/capture.json" --format pprof -o "$WORK/stripped.pb.gz" 2> /dev/null || fail "symbolize failed"
"$STRIP" "$WORK/stripped.pb.gz" "$WORK/bare.pb.gz" || fail "pprof_strip_names failed"

mkdir -p "$WORK/store"
start_serve serve --gsym-dir "$WORK/store"
echo "empty store: the fixture's frames unnamed"
curl -sf --data-binary @"$WORK/bare.pb.gz" -o "$WORK/answer0.pb.gz" "$serve_url/symbolize/pprof" || fail "POST failed"
pprof_folded "$WORK/answer0.pb.gz" | grep -q exec_leaf && fail "named exec_leaf without any symbols"
nosym=$(serve_metric 'gsymprof_serve_frames_total{outcome="no_symbols"}')
((nosym > 0)) || fail "no frame counted no_symbols"

echo "uploads refused"
put() {  # FILE ID KIND: prints the status; the body in $WORK/put.txt
  curl -s -o "$WORK/put.txt" -w '%{http_code}' -T "$1" "$serve_url/buildid/$2/$3"
}
code=$(put "$D/libhot.so" "$id" debuginfo)
[[ $code == 422 && $(wc -l < "$WORK/put.txt") == 1 ]] && grep -q "build ID is $lib_id, not $id" "$WORK/put.txt" ||
  { cat "$WORK/put.txt"; fail "an upload under another build ID gave $code"; }
echo "   wrong ID: $code $(cat "$WORK/put.txt")"
code=$(curl -s -o /dev/null -w '%{http_code}' "$serve_url/buildid/$id/debuginfo")
[[ $code == 404 ]] || fail "the refused upload is served ($code)"
[[ -z $(ls -A "$WORK/store/debug") ]] || { ls -la "$WORK/store/debug"; fail "the refused upload left a file"; }
code=$(put "$FIXTURES/libhot.c" "$id" debuginfo)
[[ $code == 422 ]] || { cat "$WORK/put.txt"; fail "a file that is not ELF gave $code"; }
code=$(put "$D/profile_fixture.debug" "not-hex-0123" debuginfo)
[[ $code == 400 ]] || { cat "$WORK/put.txt"; fail "a URL ID that is not hex gave $code"; }
code=$(curl -s -o /dev/null -w '%{http_code}' --path-as-is "$serve_url/buildid/..%2f..%2fetc%2fpasswd/debuginfo")
[[ $code == 400 || $code == 404 ]] || fail "a path in the ID gave $code"

echo "upload the debug file"
code=$(put "$D/profile_fixture.debug" "$id" debuginfo)
[[ $code == 201 ]] || { cat "$WORK/put.txt"; fail "the upload gave $code"; }
named=
for _ in $(seq 60); do
  curl -sf --data-binary @"$WORK/bare.pb.gz" -o "$WORK/answer.pb.gz" "$serve_url/symbolize/pprof" || fail "POST failed"
  if pprof_folded "$WORK/answer.pb.gz" > "$WORK/answer.folded" && grep -q exec_leaf "$WORK/answer.folded"; then named=1; break; fi
  sleep 0.5
done
[[ -n $named ]] || { cat "$WORK/serve.err"; fail "the fixture's frames were never named after the upload"; }
grep -q '^profile_fixture;.*;main;phase_exec;exec_outer_inline_\[i\];exec_inner_inline_\[i\];exec_leaf [0-9]*$' "$WORK/answer.folded" ||
  { cat "$WORK/answer.folded"; fail "the stripped fixture's stack lacks its inline frames"; }
grep -m1 'exec_leaf ' "$WORK/answer.folded" | sed 's/^/   /'
[[ $(serve_metric 'gsymprof_serve_conversions_total{outcome="converted"}') == 1 ]] || fail "/metrics counts no conversion"

echo "debuginfod-find from the service"
got=$(DEBUGINFOD_URLS=$serve_url DEBUGINFOD_CACHE_PATH=$WORK/dcache debuginfod-find debuginfo "$id" 2> "$WORK/find.err") ||
  { cat "$WORK/find.err"; fail "debuginfod-find failed"; }
cmp -s "$got" "$D/profile_fixture.debug" || fail "debuginfod-find got other bytes"
DEBUGINFOD_URLS=$serve_url DEBUGINFOD_CACHE_PATH=$WORK/dcache debuginfod-find debuginfo "$lib_id" > /dev/null 2>&1 &&
  fail "debuginfod-find found a file never uploaded"
echo "   debuginfod-find debuginfo $id: the uploaded bytes"

echo "a second service with an empty store fetches from the first (--debuginfod-urls)"
upstream_url=$serve_url upstream_pid=$serve_pid
mkdir -p "$WORK/store2"
start_serve serve2 --gsym-dir "$WORK/store2" --debuginfod-urls "$upstream_url"
named=
for _ in $(seq 60); do
  curl -sf --data-binary @"$WORK/bare.pb.gz" -o "$WORK/answer2.pb.gz" "$serve_url/symbolize/pprof" || fail "POST to the second service failed"
  if pprof_folded "$WORK/answer2.pb.gz" > "$WORK/answer2.folded" && grep -q exec_leaf "$WORK/answer2.folded"; then named=1; break; fi
  sleep 0.5
done
[[ -n $named ]] || { cat "$WORK/serve2.err"; fail "the second service never named the frames from its upstream"; }
cmp -s "$WORK/answer.folded" "$WORK/answer2.folded" || fail "the second service names the stack otherwise than the first"
cmp -s "$WORK/store2/debug/$id.debuginfo" "$D/profile_fixture.debug" || fail "the fetched debug file is not stored by its build ID"
[[ $(serve_metric 'gsymprof_serve_conversions_total{outcome="converted"}') == 1 ]] || fail "the second service counts no conversion"
echo "   fetched, stored as debug/$id.debuginfo, converted: the same stack"
stop_serve
serve_url=$upstream_url serve_pid=$upstream_pid
stop_serve
echo "ok"
