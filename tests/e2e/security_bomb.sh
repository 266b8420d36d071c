#!/bin/bash
# e2e security: decompression bombs. An ELF whose SHF_COMPRESSED debug
# sections claim or hold far more than they should must not crash gsymprof
# or make it use more than 1 GB, whether converted explicitly (gsym convert)
# or by the profiler's own conversion of a user's file (symbolize of a
# capture naming it, as root would when profiling the user's process):
#  - bomb-claim: objcopy --compress-debug-sections=zlib of a -g binary with
#    the Elf64_Chdr ch_size of .debug_info (and .debug_line, .debug_str,
#    .debug_abbrev) patched to 0x80000000;
#  - bomb-zeros: .debug_info replaced by 200 MB of zeros, zlib-compressed
#    (~200 KB on disk), with an honest ch_size.
# Each run: under prlimit --as=3000000000 and timeout 20; no signal (exit <
# 128), no hang, peak RSS < 1 GB; a second run of the same bomb is no slower
# (2x + 1 s) than the first. Root not needed.
set -u
source "$(dirname "$0")/fixtures/security_common.bash"
command -v gcc > /dev/null || skip "no gcc"
command -v objcopy > /dev/null || skip "no objcopy"
command -v prlimit > /dev/null || skip "no prlimit"
[[ -x $PY ]] || skip "no python3"
[[ -x $GSYMPROF ]] || fatal "$GSYMPROF is not built"

B=$WORK/bombs
mkdir -p "$B"
build "$B/base" "$SEC_FIX/busy.c"

# bomb-claim
objcopy --compress-debug-sections=zlib "$B/base" "$B/bomb-claim" || fatal "objcopy --compress-debug-sections"
for s in .debug_info .debug_line .debug_str .debug_abbrev; do
  LC_ALL=C readelf -S -W "$B/bomb-claim" | grep -E " \\$s +" | grep -q ' [A-Z]*C[A-Z]* ' ||
    { [[ $s == .debug_info ]] && fatal "$s is not compressed in bomb-claim"; continue; }
  "$PY" "$SEC_FIX/elf_bomb.py" claim-size "$B/bomb-claim" "$s" 0x80000000 || fatal "cannot patch $s"
done

# bomb-zeros
"$PY" "$SEC_FIX/elf_bomb.py" zeros-blob "$B/zeros.z" $((200 << 20)) || fatal "cannot make the zeros blob"
objcopy --remove-section=.debug_info --add-section .debug_info="$B/zeros.z" \
  --set-section-flags .debug_info=readonly,debug --set-section-alignment .debug_info=8 \
  "$B/base" "$B/bomb-zeros" || fatal "objcopy --add-section"
"$PY" "$SEC_FIX/elf_bomb.py" set-compressed "$B/bomb-zeros" .debug_info || fatal "cannot flag .debug_info compressed"
rm -f "$B/zeros.z"
note "bomb-claim $(stat -c %s "$B/bomb-claim") bytes, bomb-zeros $(stat -c %s "$B/bomb-zeros") bytes on disk"

LIMIT_AS=3000000000 MAX_RSS_KB=$((1000 * 1000))
# ASan reserves terabytes of shadow address space: there the address-space
# limit cannot apply, and the peak-RSS bound alone holds the ceiling.
if grep -qa "__asan_init" "$GSYMPROF"; then
  LIMIT_AS=unlimited
  note "sanitizer build: no address-space limit, peak RSS still bounded"
fi

# bounded_peak OUT ERR CMD...: CMD under prlimit --as and timeout 20; sets
# RC, ELAPSED and PEAK_KB (max RSS: GNU time when installed, else VmHWM
# polled from /proc).
bounded_peak() {
  local out=$1 err=$2 t0 t1 pid hwm
  shift 2
  t0=$(date +%s.%N)
  PEAK_KB=0
  if [[ -x /usr/bin/time && -z ${SEC_NO_GNU_TIME:-} ]]; then  # SEC_NO_GNU_TIME=1: test the fallback
    /usr/bin/time -f '%M' -o "$WORK/time.out" \
      prlimit --as=$LIMIT_AS -- timeout -k 5 20 "$@" > "$out" 2> "$err" < /dev/null
    RC=$?
    PEAK_KB=$(tail -1 "$WORK/time.out")
    [[ $PEAK_KB =~ ^[0-9]+$ ]] || PEAK_KB=0
  else
    prlimit --as=$LIMIT_AS -- "$@" > "$out" 2> "$err" < /dev/null &
    pid=$!
    local deadline=$((SECONDS + 20))
    while kill -0 "$pid" 2> /dev/null; do
      hwm=$(awk '/^VmHWM:/ {print $2}' /proc/$pid/status 2> /dev/null)
      [[ -n $hwm ]] && ((hwm > PEAK_KB)) && PEAK_KB=$hwm
      ((SECONDS > deadline)) && kill -KILL "$pid" 2> /dev/null
      sleep 0.02
    done
    wait "$pid"
    RC=$?
    ((SECONDS > deadline)) && RC=124
  fi
  t1=$(date +%s.%N)
  ELAPSED=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
}

# judge WHAT: the last bounded_peak run survived within the bounds.
judge() {
  local what=$1
  if [[ $RC == 124 || $RC == 137 ]]; then
    bad "$what: expected it to finish within 20 s, it hung (killed; peak RSS $((PEAK_KB / 1024)) MB)"
  elif ((RC >= 128)); then
    bad "$what: expected no crash, died of signal $((RC - 128)) after ${ELAPSED}s (peak RSS $((PEAK_KB / 1024)) MB): $(first_lines "$WORK/b.err")"
  elif ((PEAK_KB > MAX_RSS_KB)); then
    bad "$what: expected peak RSS < 1 GB, it used $((PEAK_KB / 1024)) MB (exit $RC after ${ELAPSED}s)"
  else
    ok "$what: exit $RC after ${ELAPSED}s, peak RSS $((PEAK_KB / 1024)) MB: $(head -1 "$WORK/b.err")"
  fi
}

for bomb in bomb-claim bomb-zeros; do
  section "gsym convert $bomb"
  bounded_peak "$WORK/b.out" "$WORK/b.err" "$GSYMPROF" gsym convert "$B/$bomb" -o "$WORK/$bomb.gsym"
  judge "gsym convert $bomb"
  first=$ELAPSED
  bounded_peak "$WORK/b.out" "$WORK/b.err" "$GSYMPROF" gsym convert "$B/$bomb" -o "$WORK/$bomb.gsym"
  judge "gsym convert $bomb (second run)"
  if awk -v a="$first" -v b="$ELAPSED" 'BEGIN {exit !(b > 2 * a + 1)}'; then
    bad "gsym convert $bomb (second run): expected it as fast as the first (${first}s), took ${ELAPSED}s"
  fi

  section "symbolize of a capture naming $bomb (the profiler's conversion)"
  "$PY" "$SEC_FIX/make_capture.py" "$WORK/$bomb.json" "$B/$bomb" "$(build_id_of "$B/$bomb")" \
    "0x$(nm "$B/base" | awk '$3 == "sec_busy_leaf" {print $1}')"
  rm -rf "$GSYMPROF_CACHE"
  bounded_peak "$WORK/b.out" "$WORK/b.err" "$GSYMPROF" symbolize "$WORK/$bomb.json"
  judge "symbolize (conversion of $bomb)"
  [[ $RC == 0 ]] || bad "symbolize (conversion of $bomb): expected exit 0 (the module only lacks symbols), got exit $RC: $(first_lines "$WORK/b.err")"
done

finish
