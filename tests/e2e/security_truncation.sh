#!/bin/bash
# e2e security (root): a GSYM file in a --gsym-dir the unprivileged user
# owns may shrink or change while root reads it (mapped). Root runs
# `symbolize CAP --gsym-dir DIR -o /dev/null` ~200 times while the user
# truncates the file in place (to 0, 16 bytes, 4 KiB, half, size - 1),
# rewrites it, truncates it again ... in a tight loop: no run may die of a
# signal (SIGBUS from a mapping past EOF) or hang; exits 0 and 1 are fine.
# The GSYM is libc's (several MB, many functions) and the capture looks up
# ~300 addresses spread over it, so lookups touch many pages.
set -u
source "$(dirname "$0")/fixtures/security_common.bash"
require_root
sec_make_user

[[ -n $LIBC && -f $LIBC ]] || skip "no /lib/x86_64-linux-gnu/libc.so.6"
libc_id=$(build_id_of "$LIBC")
[[ -n $libc_id ]] || skip "libc has no build ID"
"${AS_USER[@]}" mkdir "$UDIR/gsyms"
G=$UDIR/gsyms/libc.gsym
"$GSYMPROF" gsym convert "$LIBC" -o "$WORK/libc.gsym" > /dev/null 2> "$WORK/convert.err" ||
  fatal "gsym convert $LIBC: $(cat "$WORK/convert.err")"
cp "$WORK/libc.gsym" "$G" && chown "$SEC_UID:$SEC_GID" "$G"
# ~300 function addresses spread over libc (every n-th defined function).
mapfile -t addrs < <(nm -D --defined-only "$LIBC" | awk '$2 ~ /^[TtWi]$/ {print "0x" $1}' | sort -u |
  awk 'NR % 5 == 0' | head -300)
((${#addrs[@]} > 50)) || fatal "too few libc addresses from nm -D"
"$PY" "$SEC_FIX/make_capture.py" "$WORK/cap.json" /nonexistent/libc.so.6 "$libc_id" "${addrs[@]}"
gcc -O2 -o "$UDIR/truncator" "$SEC_FIX/truncator.c" || fatal "cannot build the truncator"
chown "$SEC_UID:$SEC_GID" "$UDIR/truncator"

section "baseline: the intact GSYM is used"
run_bounded 20 "$WORK/s.out" "$WORK/s.err" "$GSYMPROF" symbolize "$WORK/cap.json" --gsym-dir "$UDIR/gsyms"
[[ $RC == 0 ]] || bad "baseline symbolize: expected exit 0, got $(describe_rc $RC): $(first_lines "$WORK/s.err")"
grep -q 'libc\.so\.6+0x' "$WORK/s.out" &&
  bad "baseline symbolize: expected every address named from the GSYM dir, got: $(grep -m1 'libc\.so\.6+0x' "$WORK/s.out")"

section "symbolize x200 while the user truncates and rewrites the mapped GSYM"
sec_bg "${AS_USER[@]}" "$UDIR/truncator" "$G" 60
trunc=$!
sleep 0.1
runs=200
declare -A codes=()
signalled=()
t0=$SECONDS
for ((i = 0; i < runs; ++i)); do
  # (in a subshell, so that its "Bus error" notice goes to /dev/null)
  (timeout -k 2 10 "$GSYMPROF" symbolize "$WORK/cap.json" --gsym-dir "$UDIR/gsyms" -o /dev/null \
    > /dev/null 2> "$WORK/run.err" < /dev/null) 2> /dev/null
  rc=$?
  codes[$rc]=$((${codes[$rc]:-0} + 1))
  ((rc >= 2)) && signalled+=("run $i: $(describe_rc $rc) $(head -1 "$WORK/run.err")")
  kill -0 "$trunc" 2> /dev/null || { note "the truncator stopped early"; break; }
done
kill "$trunc" 2> /dev/null
wait "$trunc" 2> /dev/null
summary=$(for c in "${!codes[@]}"; do printf '%s x exit %s, ' "${codes[$c]}" "$c"; done)
note "$i runs in $((SECONDS - t0))s: ${summary%, }"
if ((${#signalled[@]})); then
  bad "runs ended other than exit 0/1 (expected none to die of a signal or hang): ${#signalled[@]} of $i, e.g. ${signalled[*]:0:3}"
else
  ok "no run died of a signal or hung"
fi

finish
