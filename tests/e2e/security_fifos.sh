#!/bin/bash
# e2e security (root): FIFOs (which an unprivileged user can put wherever it
# writes) never make gsymprof hang. Each run is bounded by `timeout 10`
# (the live profile by 30) and must end with exit 1 and a message naming the
# FIFO, or exit 0 where the FIFO is only one of many inputs:
#  - symbolize FIFO, gsym convert FIFO, gsym lookup FIFO 0x1000,
#    flamegraph FIFO: exit 1 (FIFO with no writer, and FIFO held open by a
#    writer that never writes);
#  - symbolize --gsym-dir DIR where DIR/x.gsym is a FIFO: exit 0, x.gsym
#    skipped, the other GSYM in DIR still used;
#  - gsym convert of a stripped ELF whose .gnu_debuglink names a FIFO (next
#    to it, or in .debug/): finishes (exit 0 or 1);
#  - symbolize of a capture whose module path is a FIFO: exit 0;
#  - live: a user process dlopened two libraries from its own dir, then
#    renamed one away and unlinked the other (keeping a hard link), putting
#    FIFOs at both paths: profile -p PID -d 2 exits 0.
set -u
source "$(dirname "$0")/fixtures/security_common.bash"
require_root
sec_make_user

"${AS_USER[@]}" mkfifo "$UDIR/fifo"
build "$WORK/small" "$SEC_FIX/busy.c"
small_id=$(build_id_of "$WORK/small")
leaf=$(nm "$WORK/small" | awk '$3 == "sec_busy_leaf" {print $1}')
[[ -n $small_id && -n $leaf ]] || fatal "cannot read the build ID / sec_busy_leaf of $WORK/small"

# expect_refused WHAT CMD...: exit 1 within 10 s with a message naming the FIFO.
expect_refused() {
  local what=$1
  shift
  run_bounded 10 "$WORK/r.out" "$WORK/r.err" "$@"
  if [[ $RC != 1 ]]; then
    bad "$what: expected exit 1 with a message, got $(describe_rc $RC) after ${ELAPSED}s: $(first_lines "$WORK/r.err")"
  elif ! grep -qF "$UDIR/fifo" "$WORK/r.err"; then
    bad "$what: exit 1 but no message naming $UDIR/fifo: $(first_lines "$WORK/r.err")"
  else
    ok "$what: exit 1: $(head -1 "$WORK/r.err")"
  fi
}

# expect_finishes WHAT WANT_RC_REGEX SECS CMD...
expect_finishes() {
  local what=$1 want=$2 secs=$3
  shift 3
  run_bounded "$secs" "$WORK/f.out" "$WORK/f.err" "$@"
  if [[ ! $RC =~ ^($want)$ ]]; then
    bad "$what: expected exit $want within ${secs}s, got $(describe_rc $RC) after ${ELAPSED}s: $(first_lines "$WORK/f.err")"
    return 1
  fi
  ok "$what: exit $RC after ${ELAPSED}s"
}

run_fifo_inputs() {  # CONTEXT
  expect_refused "symbolize FIFO ($1)" "$GSYMPROF" symbolize "$UDIR/fifo" -o "$WORK/out.folded"
  expect_refused "gsym convert FIFO ($1)" "$GSYMPROF" gsym convert "$UDIR/fifo" -o "$WORK/out.gsym"
  expect_refused "gsym lookup FIFO 0x1000 ($1)" "$GSYMPROF" gsym lookup "$UDIR/fifo" 0x1000
  expect_refused "flamegraph FIFO ($1)" "$GSYMPROF" flamegraph "$UDIR/fifo" -o "$WORK/out.svg"
}

section "FIFO inputs, no writer"
run_fifo_inputs "no writer"
section "FIFO inputs, a writer holds the FIFO open and never writes"
exec 8<> "$UDIR/fifo"  # O_RDWR: a writer that never writes (and never closes)
run_fifo_inputs "idle writer"
exec 8>&-

section "--gsym-dir with a FIFO named x.gsym"
"${AS_USER[@]}" mkdir "$UDIR/gsyms"
"$GSYMPROF" gsym convert "$WORK/small" -o "$WORK/small.gsym" > /dev/null 2>&1 || fatal "gsym convert of $WORK/small"
cp "$WORK/small.gsym" "$UDIR/gsyms/good.gsym" && chown "$SEC_UID:$SEC_GID" "$UDIR/gsyms/good.gsym"
"${AS_USER[@]}" mkfifo "$UDIR/gsyms/x.gsym"
"$PY" "$SEC_FIX/make_capture.py" "$WORK/small-cap.json" /nonexistent/small "$small_id" "0x$leaf"
if expect_finishes "symbolize --gsym-dir DIR (DIR/x.gsym a FIFO)" 0 10 \
  "$GSYMPROF" symbolize "$WORK/small-cap.json" --gsym-dir "$UDIR/gsyms"; then
  grep -q 'sec_busy_leaf' "$WORK/f.out" ||
    bad "symbolize --gsym-dir with a FIFO: the valid GSYM beside it was not used (expected sec_busy_leaf): $(first_lines "$WORK/f.out")"
fi
exec 8<> "$UDIR/gsyms/x.gsym"
expect_finishes "symbolize --gsym-dir DIR (DIR/x.gsym a FIFO held open by an idle writer)" 0 10 \
  "$GSYMPROF" symbolize "$WORK/small-cap.json" --gsym-dir "$UDIR/gsyms"
exec 8>&-

section "gsym convert of a stripped ELF whose .gnu_debuglink names a FIFO"
for where in beside .debug; do
  d=$UDIR/dl-$where
  "${AS_USER[@]}" mkdir -p "$d"
  build "$d/prog" "$SEC_FIX/busy.c"
  objcopy --only-keep-debug "$d/prog" "$d/prog.debug" &&
    objcopy --strip-debug "$d/prog" "$d/prog.stripped" &&
    objcopy --add-gnu-debuglink="$d/prog.debug" "$d/prog.stripped" || fatal "objcopy"
  rm -f "$d/prog" "$d/prog.debug"
  chown "$SEC_UID:$SEC_GID" "$d/prog.stripped"
  if [[ $where == beside ]]; then
    "${AS_USER[@]}" mkfifo "$d/prog.debug"
  else
    "${AS_USER[@]}" mkdir "$d/.debug" && "${AS_USER[@]}" mkfifo "$d/.debug/prog.debug"
  fi
  expect_finishes "gsym convert of a stripped ELF, debuglink -> FIFO ($where)" '0|1' 10 \
    "$GSYMPROF" gsym convert "$d/prog.stripped" -o "$WORK/dl-$where.gsym"
  # The same through the profiler's conversion (symbolize of a capture naming it).
  "$PY" "$SEC_FIX/make_capture.py" "$WORK/dl-$where.json" "$d/prog.stripped" \
    "$(build_id_of "$d/prog.stripped")" "0x$(nm "$WORK/small" | awk '$3 == "main" {print $1}')"
  GSYMPROF_CACHE=$WORK/cache-dl-$where expect_finishes \
    "symbolize of a capture naming the stripped ELF, debuglink -> FIFO ($where)" 0 10 \
    "$GSYMPROF" symbolize "$WORK/dl-$where.json"
done

section "capture whose module path is a FIFO"
"$PY" "$SEC_FIX/make_capture.py" "$WORK/fifo-cap.json" "$UDIR/fifo" "$small_id" 0x1234
expect_finishes "symbolize of a capture whose module is a FIFO" 0 10 \
  "$GSYMPROF" symbolize "$WORK/fifo-cap.json"
exec 8<> "$UDIR/fifo"
expect_finishes "symbolize of a capture whose module is a FIFO held open by an idle writer" 0 10 \
  "$GSYMPROF" symbolize "$WORK/fifo-cap.json"
exec 8>&-

section "live: dlopened libraries replaced by FIFOs"
if have_bpf; then
  L=$UDIR/live
  "${AS_USER[@]}" mkdir "$L"
  gcc -O2 -g -fPIC -shared -o "$L/liba.so" "$SEC_FIX/dlopen_lib.c" &&
    gcc -O2 -g -fPIC -shared -o "$L/libb.so" "$SEC_FIX/dlopen_lib.c" -DDL_VARIANT=2 &&
    gcc -O2 -g -o "$L/dlopen_spin" "$SEC_FIX/dlopen_spin.c" -ldl || fatal "cannot build the dlopen fixture"
  chown -R "$SEC_UID:$SEC_GID" "$L"
  sec_bg "${AS_USER[@]}" "$L/dlopen_spin" "$L/ready" 20 "$L/liba.so" "$L/libb.so"
  spin=$!
  for _ in $(seq 100); do [[ -e $L/ready ]] && break; sleep 0.05; done
  [[ -e $L/ready ]] || fatal "dlopen_spin did not start"
  "${AS_USER[@]}" sh -c 'cd "$1" && mv liba.so liba.so.away && mkfifo liba.so &&
    ln libb.so libb.so.keep && rm libb.so && mkfifo libb.so' _ "$L" || fatal "cannot swap the libraries for FIFOs"
  note "maps of the user process now: $(grep -E 'lib[ab]\.so' /proc/$spin/maps | awk '$2 ~ /x/ {print $6, $7}' | tr '\n' ';')"
  if expect_finishes "profile -p PID -d 2 (its dlopened libraries replaced by FIFOs)" 0 30 \
    "$GSYMPROF" profile -p "$spin" -d 2 -F 199; then
    grep -q 'dl_spin_leaf\|lib[ab]\.so' "$WORK/f.out" || note "no frame of liba/libb in the profile"
  fi
  kill "$spin" 2> /dev/null
else
  note "skipped (no live profiling)"
fi

finish
