#!/bin/bash
# e2e security (root): output paths (-o of flamegraph, symbolize, gsym
# convert, profile -o / --svg) in a directory an unprivileged user controls.
# Contract:
#  - `-`, /dev/stdout, /dev/stderr, /dev/fd/N write to that open descriptor
#    (so `-o >(cat)` works); /dev/null discards;
#  - any other path: a new file is created beside OUT (O_EXCL, no symlink
#    followed) and renamed over it, so a symlink at OUT is REPLACED by a
#    regular file holding the output and its target (a root-owned script, a
#    FIFO, a device) is never written;
#  - a directory, device, FIFO or socket at OUT is refused: one-line error,
#    exit 1, nothing written, no hang;
#  - race: the user flips OUT between a symlink to /dev/null and one to a
#    root-owned 0700 script while root writes OUT a few hundred times: the
#    script never changes.
set -u
source "$(dirname "$0")/fixtures/security_common.bash"
require_root
sec_make_user

# Inputs.
printf 'secmain;sec_outer;sec_leaf 7\nsecmain;sec_other 3\n' > "$WORK/in.folded"
"$PY" "$SEC_FIX/make_capture.py" "$WORK/cap.json" /nonexistent/libgone.so 0102030405 0x1234
build "$WORK/small" "$SEC_FIX/busy.c"
VICTIM=$WORK/victim.sh
make_victim "$VICTIM"
mknod -m 666 "$WORK/full-dev" c 1 7   # a /dev/full-like device, not under /dev
mknod -m 666 "$WORK/null-dev" c 1 3   # a /dev/null-like device, not named /dev/null
"${AS_USER[@]}" mkfifo "$UDIR/fifo-target"

# writer_cmd W OUT: sets CMD (the command writing OUT) and LIMIT (its timeout).
writer_cmd() {
  local w=$1 out=$2
  case $w in
    flamegraph) CMD=("$GSYMPROF" flamegraph "$WORK/in.folded" -o "$out") LIMIT=5 ;;
    symbolize) CMD=("$GSYMPROF" symbolize "$WORK/cap.json" -o "$out") LIMIT=5 ;;
    convert) CMD=("$GSYMPROF" gsym convert "$WORK/small" -o "$out") LIMIT=5 ;;
    profile-o) CMD=("$GSYMPROF" profile -F 199 -o "$out" -- "$WORK/small" 0.5) LIMIT=10 ;;
    profile-svg) CMD=("$GSYMPROF" profile -F 199 -o /dev/null --svg "$out" -- "$WORK/small" 0.5) LIMIT=10 ;;
  esac
}

# writer W OUT: runs writer W with -o OUT (bounded) -> RC, $WORK/w.out, $WORK/w.err.
writer() {
  writer_cmd "$1" "$2"
  run_bounded "$LIMIT" "$WORK/w.out" "$WORK/w.err" "${CMD[@]}"
}

# has_output W FILE: FILE holds what writer W writes.
has_output() {
  case $1 in
    flamegraph | profile-svg) grep -q '<svg' "$2" && grep -q '</svg>' "$2" ;;
    symbolize) grep -qx 'secprog;libgone.so+0x1234 1' "$2" ;;
    convert) "$GSYMPROF" gsym verify "$2" > /dev/null 2>&1 ;;
    profile-o) grep -Eq '^small;.*sec_busy_leaf [0-9]+$' "$2" ;;
  esac
}

# one_line_error W OUT: stderr of a refused write: one line naming OUT for
# the one-shot commands; for symbolize/profile (which also print a report) a
# line naming OUT.
one_line_error() {
  local w=$1 out=$2 lines
  lines=$(wc -l < "$WORK/w.err")
  case $w in
    flamegraph | convert)
      [[ $lines == 1 ]] && grep -qF "$out" "$WORK/w.err" ;;
    *) grep -qF "$out" "$WORK/w.err" ;;
  esac
}

WRITERS=(flamegraph symbolize convert)
if have_bpf; then WRITERS+=(profile-o profile-svg); fi

# --- a symlink at OUT is replaced, its target never written ---
for w in "${WRITERS[@]}"; do
  section "$w: OUT is a user-owned symlink"
  for target in "$VICTIM" "$UDIR/fifo-target" "$WORK/full-dev"; do
    # profile is slow-ish: the victim and the FIFO are the interesting targets.
    [[ $w == profile-* && $target == "$WORK/full-dev" ]] && continue
    out=$UDIR/out-$w-$(basename "$target")
    rm -f "$out"
    "${AS_USER[@]}" ln -s "$target" "$out"
    writer "$w" "$out"
    what="$w -o $out (symlink to $(file_kind "$target") $target)"
    if [[ $RC != 0 ]]; then
      bad "$what: expected exit 0 (symlink replaced by a regular file), got $(describe_rc $RC): $(first_lines "$WORK/w.err")"
    elif [[ $(file_kind "$out") != regular ]]; then
      bad "$what: expected OUT to become a regular file, it is a $(file_kind "$out") -> $(readlink "$out")"
    elif ! has_output "$w" "$out"; then
      bad "$what: OUT is a regular file but lacks the output ($(head -c 100 "$out" | tr -c '[:print:]' '.'))"
    else
      ok "$what: replaced by a regular file with the output"
    fi
    case $target in
      "$VICTIM") victim_intact "$VICTIM" "$what" && ok "victim unchanged" ;;
      "$UDIR/fifo-target") [[ $(file_kind "$target") == fifo ]] || bad "$what: the FIFO target is now a $(file_kind "$target")" ;;
      "$WORK/full-dev") [[ $(file_kind "$target") == char-device ]] || bad "$what: the device target is now a $(file_kind "$target")" ;;
    esac
  done
done

# --- a directory, FIFO, device or socket at OUT is refused ---
for w in "${WRITERS[@]}"; do
  section "$w: OUT is a directory / FIFO / device / socket"
  for kind in directory fifo char-device socket; do
    [[ $w == profile-* && ($kind == directory || $kind == socket) ]] && continue
    out=$UDIR/special-$w-$kind
    case $kind in
      directory) "${AS_USER[@]}" mkdir "$out" ;;
      fifo) "${AS_USER[@]}" mkfifo "$out" ;;
      char-device) out=$WORK/dev-$w; mknod -m 666 "$out" c 1 3 ;;  # only root makes devices
      socket) "${AS_USER[@]}" "$PY" -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$out" ;;
    esac
    writer "$w" "$out"
    what="$w -o $out (a $kind)"
    if [[ $RC != 1 ]]; then
      bad "$what: expected exit 1 with a one-line error, got $(describe_rc $RC) after ${ELAPSED}s: $(first_lines "$WORK/w.err")"
    elif ! one_line_error "$w" "$out"; then
      bad "$what: exit 1 but stderr is not a one-line error naming OUT: $(first_lines "$WORK/w.err")"
    else
      ok "$what: refused: $(head -1 "$WORK/w.err")"
    fi
    [[ $(file_kind "$out") == "$kind" ]] || bad "$what: OUT is now a $(file_kind "$out"), expected it left a $kind"
    [[ $kind == directory && -n $(ls -A "$out") ]] && bad "$what: something was written into the directory: $(ls -A "$out")"
    rm -rf "$out"
  done
done

# --- descriptors and /dev/null ---
for w in "${WRITERS[@]}"; do
  section "$w: -o -, /dev/stdout, /dev/stderr, /dev/fd/N, /dev/null, >(cat)"
  for spec in - /dev/stdout; do
    # Through a pipe: nothing can be renamed over it.
    writer_cmd "$w" "$spec"
    timeout -k 5 "$LIMIT" "${CMD[@]}" 2> "$WORK/w.err" < /dev/null | cat > "$WORK/pipe.out"
    rc=${PIPESTATUS[0]}
    if [[ $rc != 0 ]]; then
      bad "$w -o $spec | cat: expected exit 0, got $(describe_rc $rc): $(first_lines "$WORK/w.err")"
    elif ! has_output "$w" "$WORK/pipe.out"; then
      bad "$w -o $spec | cat: expected the output on the pipe, got $(head -c 100 "$WORK/pipe.out" | tr -c '[:print:]' '.')"
    else
      ok "$w -o $spec to a pipe"
    fi
  done
  if [[ $w != convert ]]; then
    writer "$w" /dev/stderr
    if [[ $RC != 0 ]] || ! has_output "$w" "$WORK/w.err"; then
      bad "$w -o /dev/stderr: expected exit 0 and the output on stderr, got $(describe_rc $RC), stderr: $(first_lines "$WORK/w.err")"
    else
      ok "$w -o /dev/stderr"
    fi
  fi
  writer "$w" /dev/null
  if [[ $RC != 0 ]]; then
    bad "$w -o /dev/null: expected exit 0, got $(describe_rc $RC): $(first_lines "$WORK/w.err")"
  elif [[ $w != profile-svg && -s $WORK/w.out ]]; then
    bad "$w -o /dev/null: expected nothing on stdout, got $(head -c 100 "$WORK/w.out")"
  else
    ok "$w -o /dev/null"
  fi
  sec_check_dev_null || note "(after $w -o /dev/null)"
  rm -f "$WORK/fd7.out"
  exec 7> "$WORK/fd7.out"
  writer "$w" /dev/fd/7
  exec 7>&-
  if [[ $RC != 0 ]] || ! has_output "$w" "$WORK/fd7.out"; then
    bad "$w -o /dev/fd/7: expected exit 0 and the output in the file open as fd 7, got $(describe_rc $RC): $(first_lines "$WORK/w.err")"
  else
    ok "$w -o /dev/fd/7"
  fi
  rm -f "$WORK/subst.out"
  writer "$w" >(cat > "$WORK/subst.out")
  wait $! 2> /dev/null
  if [[ $RC != 0 ]] || ! has_output "$w" "$WORK/subst.out"; then
    bad "$w -o >(cat > file): expected exit 0 and the output in the file, got $(describe_rc $RC): $(first_lines "$WORK/w.err")"
  else
    ok "$w -o >(cat > file)"
  fi
done

# --- the race ---
section "race: the user flips OUT between symlinks to /dev/null and to a root-owned 0700 script"
RACE_VICTIM=$WORK/race-victim.sh
make_victim "$RACE_VICTIM"
gcc -O2 -o "$UDIR/flipper" "$SEC_FIX/symlink_flipper.c" || fatal "cannot build the flipper"
chown "$SEC_UID:$SEC_GID" "$UDIR/flipper"
race_out=$UDIR/race.svg
sec_bg "${AS_USER[@]}" "$UDIR/flipper" "$race_out" /dev/null "$RACE_VICTIM" 60 > "$WORK/flips"
flipper=$!
sleep 0.2
runs=300 rc0=0 rc1=0 other=()
t0=$SECONDS
for ((i = 0; i < runs; ++i)); do
  timeout -k 2 10 "$GSYMPROF" flamegraph "$WORK/in.folded" -o "$race_out" > /dev/null 2> "$WORK/race.err" < /dev/null
  rc=$?
  case $rc in
    0) rc0=$((rc0 + 1)) ;;
    1) rc1=$((rc1 + 1)) ;;
    *) other+=("run $i: $(describe_rc $rc): $(head -1 "$WORK/race.err")") ;;
  esac
  if ((i % 50 == 49)) && ! cmp -s <(sha256sum < "$RACE_VICTIM") <(echo "${SEC_VICTIM_SUM[$RACE_VICTIM]}"); then
    note "victim changed by run $i"
    break
  fi
done
kill "$flipper" 2> /dev/null
wait "$flipper" 2> /dev/null
note "$((rc0 + rc1 + ${#other[@]})) runs in $((SECONDS - t0))s: $rc0 exit 0, $rc1 exit 1, ${#other[@]} other"
if victim_intact "$RACE_VICTIM" "race (flamegraph -o $race_out, $i runs)"; then
  ok "race: the root-owned script never changed"
fi
((${#other[@]} == 0)) || bad "race: runs did not exit 0 or 1: ${other[*]:0:3}"
sec_check_dev_null || note "(after the race)"

finish
