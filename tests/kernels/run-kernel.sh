#!/bin/bash
# Kernel matrix (tests/kernels/): boots one kernel under qemu (TCG: nested
# KVM fails on these machines, see field-notes "Kernels") with the
# initramfs from make-initramfs.sh, and checks what its /init (init.sh)
# printed on the serial console:
#   - gsymprof profile (-- CMD and -p PID), record and symbolize each
#     exited 0;
#   - in both profiles' output and in symbolize's, the fixture's dominant stack
#     (>= 50% of its samples) runs from _start to main;hot_loop;hot_step_[i]:
#     complete (unwound to the root without frame pointers) and named, with
#     the inline frame.
# Prints "PASS|FAIL RELEASE: reason" and exits 0 on PASS, 1 on FAIL.
#
# Usage: run-kernel.sh KERNEL_DIR [INITRD]
#   KERNEL_DIR holds vmlinuz (fetch-kernel.sh's cache entry); its name is
#   the kernel release. INITRD defaults to $BUILD/test-kernels/initrd.gz.
#   Output: $BUILD/test-kernels/RELEASE/: console.log (cleaned), console.raw
#   (as qemu wrote it), qemu.err, p.folded, s.folded, STEP.stderr
#   Env: BUILD (default build), KERNEL_TIMEOUT (seconds, default 300),
#   KERNEL_SMP (guest CPUs, default 2), KERNEL_APPEND (more kernel
#   parameters; NAME=VALUE ones become the guest's environment, e.g.
#   KERNEL_APPEND=GSYMPROF_DEBUG_BPF=1 for the verifier's log),
#   KERNEL_CONSOLE_LOG (check this console log instead of booting: for
#   testing the checks themselves, selftest.sh).
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
KDIR=${1:?usage: run-kernel.sh KERNEL_DIR [INITRD]}
INITRD=${2:-$BUILD/test-kernels/initrd.gz}
TIMEOUT=${KERNEL_TIMEOUT:-300}
SMP=${KERNEL_SMP:-2}
RELEASE=$(basename "$KDIR")
OUT=$BUILD/test-kernels/$RELEASE
# The expected stack, root to leaf, below the comm; libc's frames between
# _start and main are whatever they are named on that libc.
ROOT_RE='_start'
LEAF_CHAIN='main;hot_loop;hot_step_[i]'
MIN_PERCENT=50

fail() {
  echo "FAIL $RELEASE: $1"
  shift
  # Whatever explains it (stderr tails, console tail), indented.
  for f in "$@"; do
    [[ -s $f ]] || continue
    echo "  --- $(basename "$f") (last 15 lines):"
    tail -n 15 "$f" | sed 's/^/  | /'
  done
  echo "  (full console log: $OUT/console.log)"
  exit 1
}

mkdir -p "$OUT" || { echo "FAIL $RELEASE: cannot create $OUT"; exit 1; }
rm -f "$OUT"/*.folded "$OUT"/*.stderr "$OUT"/*.stdout
start=$SECONDS
if [[ -n ${KERNEL_CONSOLE_LOG:-} ]]; then
  [[ $KERNEL_CONSOLE_LOG -ef $OUT/console.raw ]] ||
    cp "$KERNEL_CONSOLE_LOG" "$OUT/console.raw" || fail "cannot read $KERNEL_CONSOLE_LOG"
  : >"$OUT/qemu.err"
  qrc=0
else
  [[ -s $KDIR/vmlinuz ]] || fail "no vmlinuz in $KDIR"
  [[ -s $INITRD ]] || fail "no initramfs $INITRD (make-initramfs.sh)"
  # -nic none: no network, and no NIC option ROM to load. stdin from
  # /dev/null: -nographic's monitor mux must not read the caller's terminal.
  # timeout -k: qemu ignoring SIGTERM would still die.
  timeout -k 10 "$TIMEOUT" qemu-system-x86_64 -accel tcg -cpu max -m 2048 -smp "$SMP" \
    -nographic -no-reboot -nic none \
    -kernel "$KDIR/vmlinuz" -initrd "$INITRD" \
    -append "console=ttyS0 quiet panic=-1${KERNEL_APPEND:+ $KERNEL_APPEND}" \
    </dev/null >"$OUT/console.raw" 2>"$OUT/qemu.err"
  qrc=$?
fi
elapsed=$((SECONDS - start))
# console.log: console.raw without what would disturb a terminal or the
# parsing: CRs (the serial console ends lines with CR LF), the escape
# sequences SeaBIOS and the kernel send (ESC c resets the terminal, on the
# line the first marker is printed on), other control characters; and a
# marker that does not start its line (SeaBIOS's "Booting from ROM.." has
# no newline) gets a line of its own.
sed -e 's/\x1b\[[0-9;?]*[@-~]//g' -e 's/\x1b[@-Z\\-_a-z]//g' \
  -e 's/[\x00-\x08\x0b-\x1f\x7f]//g' -e 's/\(.\)\(=== GSYMPROF-KM \)/\1\n\2/g' \
  "$OUT/console.raw" >"$OUT/console.log"
LOG=$OUT/console.log

M='=== GSYMPROF-KM'
# section NAME: the lines between "$M BEGIN NAME" and "$M END NAME".
section() {
  awk -v b="$M BEGIN $1" -v e="$M END $1" '$0 == e {f = 0} f {print} $0 == b {f = 1}' "$LOG"
}
# status NAME: the exit status init.sh printed for step NAME, or nothing.
status() { awk -v s="$M STATUS $1" 'index($0, s " ") == 1 {print $5; exit}' "$LOG"; }
# seconds NAME: how long step NAME took in the guest.
seconds() { awk -v s="$M STATUS $1" 'index($0, s " ") == 1 {print $6; exit}' "$LOG"; }

for name in version doctor profile pid record symbolize offcpu; do
  section "$name.stderr" >"$OUT/$name.stderr"
done
section p.folded >"$OUT/p.folded"
section pp.folded >"$OUT/pp.folded"
section s.folded >"$OUT/s.folded"
section o.folded >"$OUT/o.folded"

started=$(grep -m1 "^$M START" "$LOG")
if [[ -z $started ]]; then
  if ((qrc == 124 || qrc == 137)); then
    fail "the guest never reached /init within ${TIMEOUT}s (qemu exit $qrc)" "$OUT/qemu.err" "$LOG"
  fi
  fail "the guest never reached /init (qemu exit $qrc: boot failure or panic)" "$OUT/qemu.err" "$LOG"
fi
guest_kernel=$(sed -n 's/.* kernel=\([^ ]*\).*/\1/p' <<<"$started")
if ! grep -q "^$M DONE" "$LOG"; then
  ((qrc == 124 || qrc == 137)) && why="timed out after ${TIMEOUT}s" || why="qemu exit $qrc"
  last=$(grep "^$M STATUS" "$LOG" | tail -n 1)
  fail "the guest did not finish ($why; last step: ${last:-none})" \
    "$OUT/profile.stderr" "$OUT/record.stderr" "$OUT/symbolize.stderr" "$LOG"
fi

# dominant FOLDED: "OK|BAD summary" for the fixture's (comm "fixture")
# dominant stack, as described at the top.
dominant() {
  awk -v root="$ROOT_RE" -v chain="$LEAF_CHAIN" -v min="$MIN_PERCENT" '
    NF == 0 { next }
    {
      count = $NF; line = substr($0, 1, length($0) - length(count) - 1)
      n = index(line, ";"); comm = n ? substr(line, 1, n - 1) : line
      if (comm != "fixture" || count !~ /^[0-9]+$/) next
      stack = n ? substr(line, n + 1) : ""
      total += count
      if (count > best) { best = count; top = stack }
    }
    END {
      if (total == 0) { print "BAD no samples of the fixture"; exit }
      pct = 100 * best / total
      ok_chain = top == chain || (length(top) > length(chain) &&
        substr(top, length(top) - length(chain)) == ";" chain)
      ok_root = index(top ";", root ";") == 1
      summary = sprintf("%.1f%% of %d samples: %s", pct, total, top)
      if (!ok_chain) print "BAD dominant stack does not end in " chain " (" summary ")"
      else if (!ok_root) print "BAD dominant stack is not complete, its root is not " root " (" summary ")"
      else if (pct < min) print "BAD dominant stack has < " min "% (" summary ")"
      else print "OK " summary
    }' "$1"
}

problems=() notes=()
for step in profile pid record symbolize offcpu; do
  rc=$(status "$step")
  if [[ -z $rc ]]; then problems+=("$step: no exit status printed")
  elif [[ $rc != 0 ]]; then
    problems+=("$step exited $rc: $(grep -v '^[[:space:]]*$' "$OUT/$step.stderr" | tail -n 1)")
  else notes+=("$step $(seconds "$step")s")
  fi
done
# doctor: sampling works, every program loaded in every configuration, each
# within gsymprof's verifier budget (200,000 instructions, 20% of the limit).
section doctor.stdout >"$OUT/doctor.stdout"
if [[ $(status doctor) != 0 ]]; then
  problems+=("doctor exited $(status doctor): $(tail -n 1 "$OUT/doctor.stderr")")
else
  budget=$(awk '/^  (sample_stack|follow_fork|off_cpu_switch|off_cpu_sys_exit|all) / {
      if ($0 ~ /not loaded/) { print "not loaded: " $0; bad = 1; next }
      n = 0; for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/ && $(i + 1) ~ /^\(/) n = $i
      if (n > 200000) { print "over budget: " $0; bad = 1 }
      if (n > most) most = n; seen++ }
    END { if (!bad) { if (seen < 4) print "only " seen " programs reported"; else print "OK " most } }' "$OUT/doctor.stdout")
  if [[ $budget == OK* ]]; then notes+=("doctor: most verifier instructions ${budget#OK }")
  else problems+=("doctor: ${budget}"); fi
fi
# The stacks are checked only where the command succeeded (else the
# failure above says it all).
if [[ $(status profile) == 0 ]]; then
  r=$(dominant "$OUT/p.folded")
  if [[ $r == OK* ]]; then notes+=("profile: ${r#OK }"); else problems+=("profile output: ${r#BAD }"); fi
fi
if [[ $(status pid) == 0 ]]; then
  r=$(dominant "$OUT/pp.folded")
  if [[ $r == OK* ]]; then notes+=("profile -p: ${r#OK }"); else problems+=("profile -p output: ${r#BAD }"); fi
fi
if [[ $(status record) == 0 && $(status symbolize) == 0 ]]; then
  r=$(dominant "$OUT/s.folded")
  if [[ $r == OK* ]]; then notes+=("record+symbolize: ${r#OK }"); else problems+=("record+symbolize output: ${r#BAD }"); fi
fi
# --off-cpu of `sleep 1`: a second in [off-cpu S], under the kernel's
# nanosleep.
if [[ $(status offcpu) == 0 ]]; then
  r=$(awk '{ n = $NF; if ($0 ~ /nanosleep_\[k\];.*\[off-cpu S\] [0-9]+$/) slept += n }
    END { if (slept >= 0.9e9 && slept <= 1.2e9) printf "OK %.3f s asleep in nanosleep\n", slept / 1e9
          else printf "BAD %.3f s in [off-cpu S] under nanosleep, not about 1 s\n", slept / 1e9 }' "$OUT/o.folded")
  if [[ $r == OK* ]]; then notes+=("off-cpu: ${r#OK }"); else problems+=("off-cpu output: ${r#BAD }"); fi
fi

if ((${#problems[@]})); then
  reason=$(printf '%s; ' "${problems[@]}")
  fail "${reason%; } (guest ${guest_kernel:-?}, ${elapsed}s)" \
    "$OUT/profile.stderr" "$OUT/record.stderr" "$OUT/symbolize.stderr"
fi
echo "PASS $RELEASE: guest ${guest_kernel:-?}, ${elapsed}s"
printf '  %s\n' "${notes[@]}"
exit 0
