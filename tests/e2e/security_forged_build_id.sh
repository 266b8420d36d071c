#!/bin/bash
# e2e security (root, live profiling): cache poisoning with a forged build
# ID. The unprivileged user runs its own program linked with libc's build ID
# (-Wl,--build-id=0x<libc's>) whose symbols are forged_marker_* (one of them
# covering every address libc's code could have). Whatever root does with
# that process, a root-owned program's libc frames must never be named from
# the user's file:
#  1. root profiles the user's process (fresh cache), then profiles a root
#     program that spends its time in libc with the SAME cache: no
#     forged_marker_* anywhere, and libc's own names (qsort / msort / memcpy
#     / strlen family) are there;
#  2. one profile -p USERPID,ROOTPID of both at once: the root process's
#     frames never carry the user's names;
#  3. a capture whose module (libc's build ID) points at the user's forged
#     file is symbolized with a fresh cache; a later profile of the root
#     program with that cache still shows libc's names, not the user's.
set -u
source "$(dirname "$0")/fixtures/security_common.bash"
require_root
have_bpf || skip "live profiling is unavailable"
sec_make_user

[[ -n $LIBC && -f $LIBC ]] || skip "no /lib/x86_64-linux-gnu/libc.so.6"
libc_id=$(build_id_of "$LIBC")
[[ -n $libc_id ]] || skip "libc has no build ID"
build "$UDIR/forged" "$SEC_FIX/forged.c" -Wl,--build-id=0x"$libc_id"
chown "$SEC_UID:$SEC_GID" "$UDIR/forged"
[[ $(build_id_of "$UDIR/forged") == "$libc_id" ]] || fatal "the forged program does not carry libc's build ID"
ROOTDIR=$WORK/rootonly
mkdir -m 700 "$ROOTDIR"
build "$ROOTDIR/libc_heavy" "$SEC_FIX/libc_heavy.c"

# libc's names are only checked when this libc has symbols for its internal
# functions (its debug file, libc6-dbg); the forged names are checked always.
LIBC_NAMES='(^|;)([_A-Za-z]*qsort[_a-z]*|msort_with_tmp[^;]*|__mem(cpy|move)[^;]*|mem(cpy|move)|__strlen[^;]*|strlen)(;|$)'
libc_debug=/usr/lib/debug/.build-id/${libc_id:0:2}/${libc_id:2}.debug
if [[ -f $libc_debug ]] || LC_ALL=C readelf -S "$LIBC" | grep -q '\.symtab'; then
  check_libc_names=yes
else
  check_libc_names=no
  note "libc has no .symtab and no $libc_debug: libc names not checked"
fi

# root_clean WHAT FOLDED: the root program's lines carry no forged names and
# (when checkable) libc's names.
root_clean() {
  local what=$1 folded=$2 root_lines
  root_lines=$(grep '^libc_heavy;' "$folded")
  if [[ -z $root_lines ]]; then
    bad "$what: no samples of the root program libc_heavy: $(first_lines "$folded")"
    return
  fi
  if grep -q forged_marker <<< "$root_lines"; then
    bad "$what: root program frames named from the user's forged file, e.g.: $(grep -m1 forged_marker <<< "$root_lines")"
  else
    ok "$what: no forged_marker in the root program's $(wc -l <<< "$root_lines") stacks"
  fi
  if [[ $check_libc_names == yes ]]; then
    if awk '{ $NF = ""; print }' <<< "$root_lines" | sed 's/ $//' | grep -Eq "$LIBC_NAMES"; then
      ok "$what: libc frames named ($(awk '{ $NF = ""; print }' <<< "$root_lines" | grep -Eo "$LIBC_NAMES" | tr -d ';' | sort -u | head -4 | tr '\n' ' '))"
    else
      bad "$what: expected libc names (qsort/msort_with_tmp/memcpy/strlen family) in the root program's stacks, got: $(head -3 <<< "$root_lines")"
    fi
  fi
}

# profile_bounded WHAT OUT ERR ARGS...: gsymprof profile under timeout 40.
profile_bounded() {
  local what=$1 out=$2 err=$3
  shift 3
  run_bounded 40 "$out" "$err" "$GSYMPROF" profile "$@"
  [[ $RC == 0 ]] || bad "$what: expected exit 0, got $(describe_rc $RC): $(first_lines "$err")"
}

section "1. profile the user's forged process, then the root program, same cache"
export GSYMPROF_CACHE=$WORK/cache-1
sec_bg "${AS_USER[@]}" "$UDIR/forged" 6
upid=$!
sleep 0.2
profile_bounded "profile -p USERPID" "$WORK/user.folded" "$WORK/user.err" -p "$upid" -d 2 -F 499
if grep -q forged_marker "$WORK/user.folded"; then
  note "the user's own profile names its forged functions (expected)"
else
  note "the user's own profile has no forged_marker names (the forged module was not symbolized at all): $(grep -F "$UDIR/forged" "$WORK/user.err" | head -1)"
fi
kill "$upid" 2> /dev/null
wait "$upid" 2> /dev/null
note "cache after the user's profile: $(list_tree "$GSYMPROF_CACHE" | tr '\n' ' ')"
profile_bounded "profile -- root program (after the user's)" "$WORK/root1.folded" "$WORK/root1.err" -F 499 -- "$ROOTDIR/libc_heavy" 2
root_clean "profile -- root program, cache shared with the user's profile" "$WORK/root1.folded"

section "2. one profile of both processes"
export GSYMPROF_CACHE=$WORK/cache-2
sec_bg "${AS_USER[@]}" "$UDIR/forged" 8
upid=$!
sec_bg "$ROOTDIR/libc_heavy" 8
rpid=$!
sleep 0.2
profile_bounded "profile -p USERPID,ROOTPID" "$WORK/both.folded" "$WORK/both.err" -p "$upid,$rpid" -d 3 -F 499
root_clean "profile -p USERPID,ROOTPID" "$WORK/both.folded"
truncated=$(awk '/^libc_heavy;\[truncated\]/ {t += $NF} /^libc_heavy;/ {n += $NF} END {if (n) printf "%d of %d", t, n}' "$WORK/both.folded")
note "root program samples cut short ([truncated]) in the joint profile: ${truncated:-none} (libc's CFI taken from the forged file would cut them)"
grep -q '^forged;' "$WORK/both.folded" || note "no samples of the forged process in the joint profile"
kill "$upid" "$rpid" 2> /dev/null
wait "$upid" "$rpid" 2> /dev/null

section "3. symbolize a capture pointing libc's build ID at the user's file, then profile the root program"
export GSYMPROF_CACHE=$WORK/cache-3
addrs=$(nm -D --defined-only "$LIBC" | awk '$2 ~ /^[TtWi]$/ && $3 ~ /^(qsort|qsort_r|memcpy|memmove|strlen|malloc|free)(@|$)/ {print "0x" $1}' | sort -u)
[[ -n $addrs ]] || fatal "no libc function addresses from nm -D"
# shellcheck disable=SC2086
"$PY" "$SEC_FIX/make_capture.py" "$WORK/forged-cap.json" "$UDIR/forged" "$libc_id" $addrs --comm libc_heavy
run_bounded 30 "$WORK/cap.out" "$WORK/cap.err" "$GSYMPROF" symbolize "$WORK/forged-cap.json"
[[ $RC == 0 ]] || bad "symbolize of the forged capture: expected exit 0, got $(describe_rc $RC): $(first_lines "$WORK/cap.err")"
note "symbolize of the forged capture: $(grep -F "$UDIR/forged" "$WORK/cap.err" | head -1)"
note "cache after: $(list_tree "$GSYMPROF_CACHE" | tr '\n' ' ')"
profile_bounded "profile -- root program (after the forged capture)" "$WORK/root3.folded" "$WORK/root3.err" -F 499 -- "$ROOTDIR/libc_heavy" 2
root_clean "profile -- root program, cache shared with the forged capture's symbolize" "$WORK/root3.folded"

finish
