#!/bin/bash
# e2e (issue 32): `gsymprof serve` names a pprof that has addresses and
# build-ID mappings but no functions.
#  1. record the fixture (inline frames in the executable and in libhot.so),
#     write its pprof, then strip every location of a mapping with a build
#     ID of its lines (tests/tools/pprof_strip_names): go tool pprof shows
#     none of the fixture's names in it;
#  2. POST it to /symbolize/pprof of a serve whose --gsym-dir holds GSYMs
#     of the modules (gsymprof gsym convert): the answer, read by go tool
#     pprof -traces, is the same folded stacks as the original pprof (names,
#     inline frames, counts), and -raw shows the inline functions;
#  3. the plain (not gzipped) body gives the same; a body that is no pprof
#     is a 400 with one line, a body over --max-request-bytes a 413;
#     /metrics counts the named frames and requests; SIGTERM exits 0.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
source "$(dirname "$0")/fixtures/serve_common.bash"
require_live_profiling
require_pprof_tools

build_fixture pie
D=$WORK/pie FIX=$D/profile_fixture
"$FIX" exec 20 & exec_pid=$!
"$FIX" lib 20 & lib_pid=$!
sleep 0.3
"$GSYMPROF" record -p "$exec_pid,$lib_pid" -d 2 -F 499 --user-callchains -o "$WORK/capture.json" 2> "$WORK/record.err" ||
  { cat "$WORK/record.err"; fail "record failed"; }
kill "$exec_pid" "$lib_pid"
wait "$exec_pid" "$lib_pid" 2> /dev/null
"$GSYMPROF" symbolize "$WORK/capture.json" --format pprof -o "$WORK/named.pb.gz" 2> "$WORK/symbolize.err" ||
  { cat "$WORK/symbolize.err"; fail "symbolize --format pprof failed"; }
pprof_folded "$WORK/named.pb.gz" > "$WORK/expected.folded"
grep -q 'exec_outer_inline_\[i\];exec_inner_inline_\[i\];exec_leaf ' "$WORK/expected.folded" ||
  { cat "$WORK/expected.folded"; fail "the reference pprof lacks the fixture's inline stack"; }

echo "strip the names: addresses and build IDs only"
"$STRIP" "$WORK/named.pb.gz" "$WORK/bare.pb.gz" || fail "pprof_strip_names failed"
"$GO" tool pprof -raw -symbolize=none "$WORK/bare.pb.gz" > "$WORK/bare.raw" 2>&1 || { cat "$WORK/bare.raw"; fail "pprof -raw of the bare profile failed"; }
grep -q 'exec_leaf\|lib_leaf\|main' "$WORK/bare.raw" && fail "the stripped pprof still names the fixture's functions"

echo "a GSYM store with every module of the profile"
mkdir -p "$WORK/store"
chmod 700 "$WORK/store"
n=0
while read -r path; do
  [[ -f $path ]] || continue
  n=$((n + 1))
  # --profiler-names, as symbolize's cache converts: a sample in a PLT stub
  # (rare) is then lib_entry@plt on both sides, not _init on one.
  "$GSYMPROF" gsym convert --profiler-names "$path" -o "$WORK/store/module$n.gsym" 2> "$WORK/convert.err" ||
    { cat "$WORK/convert.err"; fail "gsym convert $path failed"; }
done < <(sed -n '/^Mappings/,$p' "$WORK/bare.raw" | awk '$2 ~ /^0x/ && $3 ~ /^\// {print $3}' | sort -u)
((n >= 3)) || { sed -n '/^Mappings/,$p' "$WORK/bare.raw"; fail "expected the fixture, libhot.so and libc among the mappings, found $n files"; }

start_serve serve --gsym-dir "$WORK/store" --max-request-bytes 1048576
curl -sf --data-binary @"$WORK/bare.pb.gz" -o "$WORK/answer.pb.gz" "$serve_url/symbolize/pprof" ||
  fail "POST /symbolize/pprof failed"
[[ $(head -c 2 "$WORK/answer.pb.gz" | od -An -tx1 | tr -d ' ') == 1f8b ]] || fail "the answer is not gzip"
pprof_folded "$WORK/answer.pb.gz" > "$WORK/answer.folded"
cp "$WORK/answer.folded" "$WORK/answer.whole.folded"
# The vDSO is no file, so the store has no GSYM of it: serve leaves its
# frames as they came ([[vdso]]) where symbolize names them from the
# vDSO image (clock_gettime). A sample taken there (rare) is left out of
# both sides; every other stack must be identical.
python3 - "$WORK/expected.folded" "$WORK/answer.folded" <<'PY' || fail "cannot leave out the vDSO stacks"
import sys
expected, answer = (open(p).read().splitlines() for p in sys.argv[1:3])
prefixes = [line.split(";[[vdso]]")[0] + ";" for line in answer if ";[[vdso]]" in line]
keep_answer = [line for line in answer if ";[[vdso]]" not in line]
keep_expected = [line for line in expected if line in keep_answer or not any(line.startswith(p) for p in prefixes)]
for path, lines in zip(sys.argv[1:3], (keep_expected, keep_answer)):
    open(path, "w").write("".join(l + "\n" for l in lines))
if prefixes:
    print(f"   left out: {len(prefixes)} stack(s) through the vDSO")
PY
diff "$WORK/expected.folded" "$WORK/answer.folded" > "$WORK/diff" ||
  { cat "$WORK/diff"; fail "the served names differ from gsymprof symbolize's"; }
echo "   $(wc -l < "$WORK/answer.folded") stacks named as symbolize names them, e.g."
grep -m1 'exec_leaf ' "$WORK/answer.folded" | sed 's/^/   /'
"$GO" tool pprof -raw -symbolize=none "$WORK/answer.pb.gz" > "$WORK/answer.raw" 2>&1 || fail "pprof -raw of the answer failed"
for fn in exec_outer_inline exec_inner_inline exec_leaf lib_inline lib_leaf main; do
  grep -q " $fn " "$WORK/answer.raw" || fail "pprof -raw of the answer lacks $fn"
done

echo "a plain body, hostile bodies"
gzip -dc "$WORK/bare.pb.gz" > "$WORK/bare.pb"
curl -sf --data-binary @"$WORK/bare.pb" -o "$WORK/answer2.pb.gz" "$serve_url/symbolize/pprof" || fail "plain POST failed"
pprof_folded "$WORK/answer2.pb.gz" | diff -q "$WORK/answer.whole.folded" - > /dev/null || fail "the plain body was named differently"
code=$(printf 'not a profile \x01\x02' | curl -s -o "$WORK/bad.txt" -w '%{http_code}' --data-binary @- "$serve_url/symbolize/pprof")
[[ $code == 400 && $(wc -l < "$WORK/bad.txt") == 1 ]] || { cat "$WORK/bad.txt"; fail "garbage gave $code, not a one-line 400"; }
head -c 2000000 /dev/zero > "$WORK/big"
code=$(curl -s -o "$WORK/big.txt" -w '%{http_code}' --data-binary @"$WORK/big" "$serve_url/symbolize/pprof")
[[ $code == 413 ]] || { cat "$WORK/big.txt"; fail "a body over --max-request-bytes gave $code, not 413"; }
# A gzip bomb: 1 MiB compressed of zeros inflating beyond 8 x the limit.
head -c 100000000 /dev/zero | gzip -9 > "$WORK/bomb.gz"
code=$(curl -s -o "$WORK/bomb.txt" -w '%{http_code}' --data-binary @"$WORK/bomb.gz" "$serve_url/symbolize/pprof")
[[ $code == 400 ]] && grep -q 'decompresses to more than' "$WORK/bomb.txt" || { cat "$WORK/bomb.txt"; fail "a gzip bomb gave $code"; }

named=$(serve_metric 'gsymprof_serve_frames_total{outcome="named"}')
((named > 0)) || fail "/metrics counts no named frames"
ok=$(serve_metric 'gsymprof_serve_requests_total{path="/symbolize/pprof",code="200"}')
[[ $ok == 2 ]] || fail "/metrics counts $ok answered pprof requests, not 2"
echo "   /metrics: $named frames named, $ok requests answered"
stop_serve
echo "ok"
