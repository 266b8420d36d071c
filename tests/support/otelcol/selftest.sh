#!/usr/bin/env bash
# Self-test of the Collector harness (issue 27): builds the Collector and the
# sender (once, cached), starts the Collector with otelcol.bash, sends one
# profile over OTLP/gRPC and one over OTLP/HTTP (sendtest/), restarts the
# Collector on the same ports and sends again, then checks that decode.py
# prints exactly what was sent (stacks with inline frames, values, attributes,
# mappings with build IDs), that the file survived the restart (append), and
# that decode.py --lint catches a broken dictionary.
# Exit: 0 pass, 1 fail, 77 skipped (no Go >= 1.26 to build with).
# Takes ~5 s with the build cached (build.sh: ~100 s the first time).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=otelcol.bash
. "$here/otelcol.bash"

if ! "$here/build.sh" --check-go >/dev/null; then
  echo "selftest: SKIP: no Go >= 1.26" >&2
  exit 77
fi
"$here/build.sh" >/dev/null
sender=$("$here/build.sh" sendtest)

work=$(mktemp -d "${TMPDIR:-/tmp}/otelcol-selftest.XXXXXX")
cleanup() { otelcol_stop; if [[ ${KEEP:-0} == 1 ]]; then echo "selftest: kept $work" >&2; else rm -rf "$work"; fi; }
trap cleanup EXIT

passed=0 failed=0
check() {   # check NAME EXPECTED_FILE ACTUAL_FILE
  if diff -u "$2" "$3" >"$work/$1.diff"; then
    passed=$((passed + 1)); echo "ok   $1"
  else
    failed=$((failed + 1)); echo "FAIL $1"; cat "$work/$1.diff"
  fi
}

T=1700000010000000000   # the profiles' end time (start: T - 10 s)
out=$work/profiles.jsonl

otelcol_start "$out" "$work"
echo "collector: grpc $OTELCOL_GRPC, http $OTELCOL_HTTP_URL"
"$sender" -time $T -grpc "$OTELCOL_GRPC" >/dev/null
otelcol_wait_records 1 20
"$sender" -time $T -http "$OTELCOL_HTTP" >/dev/null
otelcol_wait_records 2 20

# Restart on the same ports: the file is appended to, not truncated.
grpc_port=$OTELCOL_GRPC_PORT
otelcol_stop
otelcol_start "$out" "$work"
[[ $OTELCOL_GRPC_PORT == "$grpc_port" ]] || { echo "FAIL restart changed ports" >&2; exit 1; }
"$sender" -time $T -http "$OTELCOL_HTTP" >/dev/null
otelcol_wait_records 3 20
otelcol_stop

# --- every sample --------------------------------------------------------
tab=$'\t'
res() { echo "resource${tab}gsymprof.selftest.transport=$1${tab}service.name=fixture"; }
attrs() { echo "gsymprof.selftest.transport=$1${tab}process.pid=4242${tab}scope.name=gsymprof${tab}scope.version=selftest${tab}service.name=fixture${tab}thread.id=$2${tab}thread.name=$3"; }
record() {   # record TRANSPORT N: what decode.py prints for one request
  local t=$1 n=$2 p=52631578 S="__libc_start_call_main;main"
  res "$t"
  echo "profile${tab}cpu/nanoseconds${tab}period=cpu/nanoseconds:$p${tab}time_unix_nano=1700000000000000000${tab}duration_nano=10000000000${tab}samples=3${tab}profile_id=0102030405060708090a0b0c0d0e0f10${tab}scope.name=gsymprof${tab}scope.version=selftest"
  echo "sample${tab}cpu/nanoseconds${tab}$((n * p))${tab}0${tab}$S;hot_loop;add_one_[i]${tab}$(attrs "$t" 4242 fixture)"
  echo "sample${tab}cpu/nanoseconds${tab}$((2 * p))${tab}0${tab}$S;hot_loop;add_one_[i];mix_[i]${tab}$(attrs "$t" 4242 fixture)"
  echo "sample${tab}cpu/nanoseconds${tab}$p${tab}0${tab}$S;fixture+0x400700${tab}$(attrs "$t" 4243 "worker 1")"
  echo "profile${tab}samples/count${tab}period=cpu/nanoseconds:$p${tab}time_unix_nano=1700000000000000000${tab}duration_nano=10000000000${tab}samples=4${tab}scope.name=gsymprof${tab}scope.version=selftest"
  echo "sample${tab}samples/count${tab}$n${tab}0${tab}$S;hot_loop;add_one_[i]${tab}$(attrs "$t" 4242 fixture)"
  echo "sample${tab}samples/count${tab}2${tab}0${tab}$S;hot_loop;add_one_[i];mix_[i]${tab}$(attrs "$t" 4242 fixture)"
  echo "sample${tab}samples/count${tab}1${tab}0${tab}$S;fixture+0x400700${tab}$(attrs "$t" 4243 "worker 1")"
  echo "sample${tab}samples/count${tab}4${tab}4${tab}$S;hot_loop;add_one_[i]${tab}$(attrs "$t" 4243 "worker 1")"
}
{
  echo "mapping${tab}/usr/bin/fixture${tab}0x400000-0x401000@0x0${tab}process.executable.build_id.gnu=0123456789abcdef0123456789abcdef01234567"
  echo "mapping${tab}/usr/lib/x86_64-linux-gnu/libc.so.6${tab}0x7f0000028000-0x7f00001bd000@0x28000${tab}process.executable.build_id.gnu=fedcba9876543210fedcba9876543210fedcba98"
  record grpc 3
  record http 5
  record http 5
} >"$work/want.samples"
python3 "$here/decode.py" --lint "$out" >"$work/got.samples"
check samples "$work/want.samples" "$work/got.samples"

# --- summary -------------------------------------------------------------
cat >"$work/want.summary" <<'TXT'
records	3
mappings	2	with_build_id=2
type	cpu/nanoseconds	profiles=3	samples=9	value=1157894716
type	samples/count	profiles=3	samples=12	value=34
by	thread.name	fixture	cpu/nanoseconds	samples=6	value=999999982
by	thread.name	fixture	samples/count	samples=6	value=19
by	thread.name	worker 1	cpu/nanoseconds	samples=3	value=157894734
by	thread.name	worker 1	samples/count	samples=6	value=15
by	service.name	fixture	cpu/nanoseconds	samples=9	value=1157894716
by	service.name	fixture	samples/count	samples=12	value=34
by	process.pid	4242	cpu/nanoseconds	samples=9	value=1157894716
by	process.pid	4242	samples/count	samples=12	value=34
TXT
python3 "$here/decode.py" --lint --summary "$out" >"$work/got.summary"
check summary "$work/want.summary" "$work/got.summary"

# --- folded, gsymprof's convention (comm first) -------------------------
cat >"$work/want.folded" <<'TXT'
fixture;__libc_start_call_main;main;hot_loop;add_one_[i] 13
fixture;__libc_start_call_main;main;hot_loop;add_one_[i];mix_[i] 6
worker 1;__libc_start_call_main;main;fixture+0x400700 3
worker 1;__libc_start_call_main;main;hot_loop;add_one_[i] 12
TXT
python3 "$here/decode.py" --lint --folded --comm-attr thread.name "$out" >"$work/got.folded"
check folded "$work/want.folded" "$work/got.folded"

# --- --lint catches a dictionary without its zero entries ---------------
bad=$work/broken.jsonl
otelcol_start "$bad" "$work/broken"
"$sender" -time $T -broken -grpc "$OTELCOL_GRPC" >/dev/null
otelcol_wait_records 1 20
otelcol_stop
if python3 "$here/decode.py" --lint "$bad" >/dev/null 2>"$work/lint.err"; then
  echo "lint: accepted a broken dictionary" >"$work/lint.got"
else
  grep -o -e 'string_table\[0\] is not ""' -e 'mapping_table\[0\] is not the zero value' "$work/lint.err" >"$work/lint.got" || true
fi
printf '%s\n' 'string_table[0] is not ""' 'mapping_table[0] is not the zero value' >"$work/lint.want"
check lint "$work/lint.want" "$work/lint.got"

echo "selftest: $passed passed, $failed failed"
((failed == 0))
