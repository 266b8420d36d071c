#!/bin/bash
# e2e (issue 11.2): a binary that exists only inside a private mount namespace
# (a tmpfs mounted over a directory by `unshare --mount`), with a DIFFERENT
# binary at the same path on the host. Its frames are named from the file the
# process mapped (opened through /proc/PID/map_files and kept), while it runs
# and after it exited mid-profile, live (-- CMD and -p PID) and through
# record + symbolize; the host's file is never used.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
command -v unshare >/dev/null || skip "no unshare"
unshare --mount true 2>/dev/null || skip "cannot make a mount namespace"
SRC=$FIXTURES/identity/spin.c
BOX=$WORK/box
mkdir -p "$BOX"
gcc -O2 -g -DPREFIX=container "$SRC" -o "$WORK/container_app" &&
  gcc -O2 -g -DPREFIX=container -Wl,--build-id=none "$SRC" -o "$WORK/container_nobid" &&
  gcc -O2 -g -DPREFIX=decoy "$SRC" -o "$BOX/app" || fail "cannot build the fixtures"
STACK="_start;__libc_start_main_impl;__libc_start_call_main;main;container_outer;container_hot"

# in_box APP SECONDS AFTER: the command that runs APP as $BOX/app inside a
# private mount namespace for SECONDS, then sleeps AFTER seconds (the
# profile goes on after the app exited).
in_box() {
  echo "mount -t tmpfs none '$BOX' && cp '$1' '$BOX/app' && '$BOX/app' $2 && sleep $3"
}

# check FOLDED ERR: the app's hot stack dominates, named from the container's
# file, and nothing came from the host's decoy.
check() {
  expect_dominant "$1" app "$STACK" 60
  if grep -q decoy "$1"; then grep decoy "$1" >&2; fail "frames named from the host's file"; fi
  if grep -E "^app;.*app\+0x" "$1" >&2; then fail "frames of the container's app are unnamed"; fi
}

for app in container_app container_nobid; do
  echo "$app: profile -- unshare ..., exits mid-profile"
  profile_run "$WORK/$app.folded" "$WORK/$app.err" -F 499 -- \
    unshare --mount sh -c "$(in_box "$WORK/$app" 1 1)"
  check "$WORK/$app.folded"
  [[ $app != container_nobid ]] || grep -q "^  $BOX/app (SHA-256 [0-9a-f]*): converted" "$WORK/$app.err" ||
    { cat "$WORK/$app.err" >&2; fail "the summary does not say the container's app was identified by SHA-256"; }
done

echo "record + symbolize (the host's file is still at the path)"
# A cache of their own: record itself must make the GSYM.
export GSYMPROF_CACHE=$WORK/record-cache
"$GSYMPROF" record -F 499 -o "$WORK/cap.json" -- \
  unshare --mount sh -c "$(in_box "$WORK/container_app" 1 0.5)" 2>"$WORK/record.err" ||
  { cat "$WORK/record.err" >&2; fail "record failed"; }
grep -q "^  $BOX/app (build ID [0-9a-f]*): converted $GSYMPROF_CACHE/" "$WORK/record.err" ||
  { cat "$WORK/record.err" >&2; fail "record did not make the container's GSYM ready"; }
"$GSYMPROF" symbolize "$WORK/cap.json" >"$WORK/sym.folded" 2>"$WORK/sym.err" ||
  { cat "$WORK/sym.err" >&2; fail "symbolize failed"; }
check "$WORK/sym.folded"
# Without the cache, the host's file at the path is another build: refused.
GSYMPROF_CACHE=$WORK/empty-cache "$GSYMPROF" symbolize "$WORK/cap.json" >"$WORK/nocache.folded" \
  2>"$WORK/nocache.err" || fail "symbolize without cache failed"
grep -q "^  $BOX/app (build ID [0-9a-f]*): no symbols: .*build-ID mismatch" "$WORK/nocache.err" ||
  { cat "$WORK/nocache.err" >&2; fail "the host's file was not refused"; }
if grep -q decoy "$WORK/nocache.folded"; then fail "frames named from the host's file"; fi

echo "profile -p PID of the container's app: while it runs, then as it exits mid-profile"
unshare --mount sh -c "mount -t tmpfs none '$BOX' && cp '$WORK/container_app' '$BOX/app' && exec '$BOX/app' 4" &
PID=$!
for _ in $(seq 100); do
  [[ $(readlink "/proc/$PID/exe" 2>/dev/null) == "$BOX/app" ]] && break
  sleep 0.02
done
[[ $(readlink "/proc/$PID/exe" 2>/dev/null) == "$BOX/app" ]] || fail "the container's app did not start"
profile_run "$WORK/alive.folded" "$WORK/alive.err" -F 499 -d 1 -p "$PID"
[[ -d /proc/$PID ]] || fail "the app ended before the first profile did"
check "$WORK/alive.folded"
profile_run "$WORK/pid.folded" "$WORK/pid.err" -F 499 -d 6 -p "$PID"
wait "$PID"
check "$WORK/pid.folded"
echo "ok"
