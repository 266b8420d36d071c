#!/bin/bash
# Kernel matrix (tests/kernels/): checks run-kernel.sh's verdicts on fake
# console logs (KERNEL_CONSOLE_LOG), so that a harness bug cannot pass or
# fail a kernel for the wrong reason: a passing run (CR LF line ends and
# terminal escapes as the serial console has them), and one log per way to
# fail. Takes well under a second; run by run-all.sh before booting anything.
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
WORK=$(mktemp -d) || exit 1
trap 'rm -rf "$WORK" "$BUILD/test-kernels/selftest-kernel"' EXIT
failures=0
M='=== GSYMPROF-KM'
ROOT='_start;__libc_start_main_impl;__libc_start_call_main'
GOOD="fixture;$ROOT;main;hot_loop;hot_step_[i]"

# log NAME: writes a console log from stdin's lines (marker lines and
# outputs), each ending CR LF as the serial console's do, into $WORK/NAME,
# after what SeaBIOS prints: escapes, and a line the first marker continues.
log() {
  { printf '\033c\033[?7l\033[2JSeaBIOS (version 1.16.2-debian-1.16.2-1)\n'
    printf 'Booting from ROM..\033c\033[?7l\033[2J'
    cat; } | sed 's/$/\r/' >"$WORK/$1"
}

# steps P_RC R_RC S_RC P_FOLDED S_FOLDED: the markers init.sh prints.
steps() {
  echo "$M START kernel=6.1.0-99-cloud-amd64 cpus=2 btf=yes"
  echo "$M BEGIN version.stderr"; echo "gsymprof: unknown command"; echo "$M END version.stderr"
  echo "$M STATUS version 2 0"
  # doctor's program lines; DOCTOR_INSNS sets the stack copy's cost.
  echo "$M BEGIN doctor.stdout"
  echo "programs (instructions the verifier processed; limit 1000000, gsymprof's budget 200000):"
  echo "  sample_stack   frame pointers, every process             655 (0.1% of the limit)"
  echo "  sample_stack   frame pointers, -p filter                 660 (0.1% of the limit)"
  echo "  follow_fork    frame pointers, -p filter                  79 (0.0% of the limit)"
  echo "  sample_stack   stack copy 1 MiB, -p filter            ${DOCTOR_INSNS:-52995} (5.3% of the limit)"
  echo "$M END doctor.stdout"
  echo "$M BEGIN doctor.stderr"; echo "$M END doctor.stderr"
  echo "$M STATUS doctor 0 1"
  echo "$M BEGIN profile.stderr"
  if [[ $1 == 0 ]]; then echo "1497 samples taken, 1497 recorded, 0 lost (3.00 s at 499 Hz)"
  else echo "gsymprof profile: cannot load the BPF program: Invalid argument (-22)"; fi
  echo "$M END profile.stderr"
  echo "$M STATUS profile $1 14"
  echo "$M BEGIN p.folded"; printf '%s\n' "$4"; echo "$M END p.folded"
  echo "$M BEGIN pid.stderr"; echo "$M END pid.stderr"
  echo "$M STATUS pid $1 9"
  echo "$M BEGIN pp.folded"; printf '%s\n' "$4"; echo "$M END pp.folded"
  echo "$M BEGIN record.stderr"; echo "record says $2"; echo "$M END record.stderr"
  echo "$M STATUS record $2 12"
  echo "$M BEGIN symbolize.stderr"; echo "symbolize says $3"; echo "$M END symbolize.stderr"
  echo "$M STATUS symbolize $3 3"
  echo "$M BEGIN s.folded"; printf '%s\n' "$5"; echo "$M END s.folded"
  echo "$M BEGIN offcpu.stderr"; echo "$M END offcpu.stderr"
  echo "$M STATUS offcpu 0 1"
  echo "$M BEGIN o.folded"; printf '%s\n' "${OFFCPU_FOLDED:-$SLEPT}"; echo "$M END o.folded"
  echo "$M DONE"
  echo "[    3.482216] reboot: Power down"
}

# expect NAME PASS|FAIL [REGEX]: run-kernel.sh on log NAME gives this
# verdict, with a first line matching REGEX.
checked=0
expect() {
  local out rc first
  checked=$((checked + 1))
  out=$(KERNEL_CONSOLE_LOG=$WORK/$1 tests/kernels/run-kernel.sh "$WORK/selftest-kernel" 2>&1)
  rc=$?
  first=$(head -n 1 <<<"$out")
  if [[ $2 == PASS && $rc != 0 ]] || [[ $2 == FAIL && $rc != 1 ]] ||
     [[ $first != "$2 "* ]] || [[ -n ${3:-} && ! $first =~ $3 ]]; then
    echo "selftest: $1: expected $2${3:+ matching /$3/}, got exit $rc:" >&2
    echo "  ${out//$'\n'/$'\n'  }" >&2
    failures=$((failures + 1))
  fi
}

# `sleep 1` under --off-cpu: a second asleep under the kernel's nanosleep.
SLEPT="sleep;_start;main;nanosleep;entry_SYSCALL_64_after_hwframe_[k];do_syscall_64_[k];hrtimer_nanosleep_[k];[off-cpu S] 1000512345"

main_stack=$(printf '%s 1400\n%s;clock_gettime 3\nfixture;%s;main;hot_loop 40\ngsymprof;_start;main 7' \
  "$GOOD" "${GOOD%;hot_step_\[i\]}" "$ROOT")

steps 0 0 0 "$main_stack" "$main_stack" | log pass
expect pass PASS
# The escapes are gone from the log run-kernel.sh keeps.
if grep -q $'[\r\033]' "$BUILD/test-kernels/selftest-kernel/console.log"; then
  echo "selftest: console.log still has CRs or escapes" >&2
  failures=$((failures + 1))
fi

DOCTOR_INSNS=250000 steps 0 0 0 "$main_stack" "$main_stack" | log over_budget
expect over_budget FAIL 'doctor: over budget: .*stack copy 1 MiB'

steps 22 0 0 "" "$main_stack" | log profile_failed
expect profile_failed FAIL 'profile exited 22: gsymprof profile: cannot load the BPF program'

steps 0 1 1 "$main_stack" "" | log record_failed
expect record_failed FAIL 'record exited 1: record says 1; symbolize exited 1'

no_inline="fixture;$ROOT;main;hot_loop 1400"
steps 0 0 0 "$no_inline" "$main_stack" | log no_inline
expect no_inline FAIL 'profile output: dominant stack does not end in main;hot_loop;hot_step_\[i\]'

truncated="fixture;main;hot_loop;hot_step_[i] 1400"
steps 0 0 0 "$main_stack" "$truncated" | log truncated
expect truncated FAIL 'record\+symbolize output: dominant stack is not complete'

split=$(printf '%s 600\nfixture;[unknown] 700\n' "$GOOD")
steps 0 0 0 "$split" "$main_stack" | log split
expect split FAIL 'dominant stack does not end'

minority=$(printf '%s 450\nfixture;%s;main;hot_loop;clock_gettime 300\nfixture;%s;main;hot_loop 300\n' \
  "$GOOD" "$ROOT" "$ROOT")
steps 0 0 0 "$minority" "$main_stack" | log minority
expect minority FAIL 'dominant stack has < 50% \(42\.9% of 1050 samples'

other_comm=$(printf 'other;%s;main;hot_loop;hot_step_[i] 1400\n' "$ROOT")
steps 0 0 0 "$other_comm" "$main_stack" | log other_comm
expect other_comm FAIL 'profile output: no samples of the fixture'

steps 0 0 0 "$main_stack" "$main_stack" | grep -v "DONE\|s.folded\|symbolize\|offcpu\|o.folded" | log unfinished
expect unfinished FAIL 'the guest did not finish \(qemu exit 0; last step: .*STATUS record 0 12\)'

OFFCPU_FOLDED="sleep;_start;main;[off-cpu S] 1000512345" steps 0 0 0 "$main_stack" "$main_stack" | log offcpu_no_kernel
expect offcpu_no_kernel FAIL 'off-cpu output: 0\.000 s in \[off-cpu S\] under nanosleep'

printf 'SeaBIOS\nKernel panic - not syncing: VFS: Unable to mount root fs\n' | log panic
expect panic FAIL 'the guest never reached /init'

if ((failures)); then echo "selftest: $failures failed" >&2; exit 1; fi
echo "selftest: run-kernel.sh's checks behave on $checked fake console logs"
