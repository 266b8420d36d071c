#!/bin/bash
# e2e security (root): the GSYM cache ($GSYMPROF_CACHE) holds symbols of
# root-only programs, and root trusts what is in it. Contract:
#  - after symbolize / profile with GSYMPROF_CACHE=DIR (DIR absent before),
#    DIR is mode 0700 and every file in it 0600; a pre-existing root-owned
#    0755 DIR is tightened to 0700; the unprivileged user can neither list
#    DIR nor read a file in it (a root program in a 0700 root dir, profiled
#    by root: its symbols stay root's);
#  - a cache DIR owned by the user, or group- or other-writable, is neither
#    read nor written: a planted <build-id>.gsym in it (a GSYM with the
#    module's build ID but other names) is NOT used, nothing new appears in
#    DIR, and stderr says the cache dir was refused (mentions "cache" and
#    DIR).
set -u
source "$(dirname "$0")/fixtures/security_common.bash"
require_root
sec_make_user

# A root-only program: root-owned, in a 0700 root dir.
ROOTDIR=$WORK/rootonly
mkdir -m 700 "$ROOTDIR"
build "$ROOTDIR/secret_prog" "$SEC_FIX/busy.c"
prog_id=$(build_id_of "$ROOTDIR/secret_prog")
leaf=$(nm "$ROOTDIR/secret_prog" | awk '$3 == "sec_busy_leaf" {print $1}')
[[ -n $prog_id && -n $leaf ]] || fatal "cannot read the build ID / sec_busy_leaf of secret_prog"
"$PY" "$SEC_FIX/make_capture.py" "$WORK/cap.json" "$ROOTDIR/secret_prog" "$prog_id" "0x$leaf"

# cache_is_private WHAT DIR: DIR 0700 root, every file 0600, every subdir
# 0700, and the user can neither list DIR nor read its files.
cache_is_private() {
  local what=$1 dir=$2 f loose readable='' failures=$SEC_FAILURES
  if [[ ! -d $dir ]]; then
    bad "$what: expected the cache dir $dir to exist, it is $(file_kind "$dir")"
    return
  fi
  [[ $(stat -c '%a %U' "$dir") == "700 root" ]] ||
    bad "$what: expected cache dir $dir mode 700 owned by root, it is $(stat -c '%a %U' "$dir")"
  [[ -n $(find "$dir" -type f) ]] || bad "$what: nothing was cached in $dir (expected a converted GSYM)"
  loose=$(find "$dir" -mindepth 1 \( -type f ! -perm 600 -o -type d ! -perm 700 -o ! -type f ! -type d \) -printf '%P (%y %m) ')
  [[ -z $loose ]] || bad "$what: expected every file in $dir 0600 (dirs 0700), found: $loose"
  if "${AS_USER[@]}" ls "$dir" > "$WORK/ls.out" 2>&1; then
    bad "$what: expected the user unable to list $dir, it listed: $(tr '\n' ' ' < "$WORK/ls.out")"
  fi
  for f in $(find "$dir" -type f); do
    "${AS_USER[@]}" cat "$f" > /dev/null 2>&1 && readable+="${f##*/} "
  done
  [[ -z $readable ]] || bad "$what: expected the user unable to read the cached files, it read: $readable"
  ((SEC_FAILURES == failures)) &&
    ok "$what: $dir is $(stat -c '%a %U' "$dir"), files: $(find "$dir" -type f -printf '%P %m; ')user cannot list or read"
}

section "symbolize with a fresh cache dir"
C=$WORK/cache-fresh
run_bounded 30 "$WORK/s.out" "$WORK/s.err" env GSYMPROF_CACHE="$C" "$GSYMPROF" symbolize "$WORK/cap.json"
[[ $RC == 0 ]] || bad "symbolize (fresh cache): expected exit 0, got $(describe_rc $RC): $(first_lines "$WORK/s.err")"
grep -q sec_busy_leaf "$WORK/s.out" || bad "symbolize (fresh cache): expected sec_busy_leaf in the output: $(first_lines "$WORK/s.out")"
cache_is_private "symbolize, fresh cache" "$C"
# The name the cache gives secret_prog's GSYM (it carries the converter's
# version): the planted decoys below use it.
CACHED_NAME=$(cd "$C" && ls | grep -m1 "^$prog_id\..*gsym\$")
[[ -n $CACHED_NAME ]] || fatal "no cache file for $prog_id in $C: $(ls "$C")"

section "symbolize with a pre-existing root-owned 0755 cache dir"
C=$WORK/cache-0755
mkdir -m 755 "$C"
run_bounded 30 "$WORK/s.out" "$WORK/s.err" env GSYMPROF_CACHE="$C" "$GSYMPROF" symbolize "$WORK/cap.json"
[[ $RC == 0 ]] || bad "symbolize (0755 cache): expected exit 0, got $(describe_rc $RC): $(first_lines "$WORK/s.err")"
cache_is_private "symbolize, pre-existing 0755 cache" "$C"

if have_bpf; then
  section "profile of a root-only program with a fresh cache dir"
  C=$WORK/cache-profile
  run_bounded 40 "$WORK/p.out" "$WORK/p.err" env GSYMPROF_CACHE="$C" "$GSYMPROF" profile -F 199 -- "$ROOTDIR/secret_prog" 1 vdso
  [[ $RC == 0 ]] || bad "profile (fresh cache): expected exit 0, got $(describe_rc $RC): $(first_lines "$WORK/p.err")"
  grep -q sec_busy_leaf "$WORK/p.out" || bad "profile (fresh cache): expected sec_busy_leaf in the output: $(first_lines "$WORK/p.out")"
  cache_is_private "profile, fresh cache" "$C"
  section "profile with a pre-existing root-owned 0755 cache dir"
  C=$WORK/cache-profile-0755
  mkdir -m 755 "$C"
  run_bounded 40 "$WORK/p.out" "$WORK/p.err" env GSYMPROF_CACHE="$C" "$GSYMPROF" profile -F 199 -- "$ROOTDIR/secret_prog" 1
  [[ $RC == 0 ]] || bad "profile (0755 cache): expected exit 0, got $(describe_rc $RC): $(first_lines "$WORK/p.err")"
  cache_is_private "profile, pre-existing 0755 cache" "$C"
else
  note "profile parts skipped (no live profiling)"
fi

# A GSYM with secret_prog's build ID but other names: the same source with
# the functions renamed, linked with secret_prog's build ID.
build "$WORK/decoy" "$SEC_FIX/busy.c" -Dsec_busy_leaf=planted_decoy_leaf \
  -Dsec_busy_outer=planted_decoy_outer -Wl,--build-id=0x"$prog_id"
[[ $(build_id_of "$WORK/decoy") == "$prog_id" ]] || fatal "the decoy does not carry secret_prog's build ID"
"$GSYMPROF" gsym convert "$WORK/decoy" -o "$WORK/decoy.gsym" > /dev/null 2>&1 || fatal "gsym convert of the decoy"
"$GSYMPROF" gsym lookup "$WORK/decoy.gsym" "0x$leaf" | grep -q planted_decoy_leaf ||
  fatal "the decoy GSYM does not name 0x$leaf planted_decoy_leaf"

# Control: the same decoy under that name in a cache root owns IS read, so
# the refusals below are refusals, not misses.
C=$WORK/cache-control
mkdir -m 700 "$C" && cp "$WORK/decoy.gsym" "$C/$CACHED_NAME"
run_bounded 30 "$WORK/r.out" "$WORK/r.err" env GSYMPROF_CACHE="$C" "$GSYMPROF" symbolize "$WORK/cap.json"
grep -q planted_decoy "$WORK/r.out" || fatal "control: a root-owned cache's $CACHED_NAME was not used: $(first_lines "$WORK/r.err")"

# plant KIND: a cache dir of that kind holding the decoy as <prog_id>.gsym
# and under the cache's own name;
# sets C.
plant() {
  C=$WORK/cache-$1
  case $1 in user-owned*) C=$UDIR/cache-$1 ;; esac
  case $1 in
    user-owned) "${AS_USER[@]}" mkdir -m 755 "$C" ;;
    user-owned-0700) "${AS_USER[@]}" mkdir -m 700 "$C" ;;
    group-writable) mkdir "$C" && chgrp "$SEC_GID" "$C" && chmod 775 "$C" ;;
    other-writable) mkdir "$C" && chmod 777 "$C" ;;
    sticky-other-writable) mkdir "$C" && chmod 1777 "$C" ;;
  esac
  "${AS_USER[@]}" cp "$WORK/decoy.gsym" "$C/$prog_id.gsym" || fatal "the user cannot plant into $C"
  "${AS_USER[@]}" cp "$WORK/decoy.gsym" "$C/$CACHED_NAME" || fatal "the user cannot plant into $C"
}

# refused WHAT DIR BEFORE: checks after a run with the refused cache DIR.
refused() {
  local what=$1 dir=$2 before=$3 after dir_re
  if grep -q planted_decoy "$WORK/r.out"; then
    bad "$what: the planted $dir/$prog_id.gsym was used: $(grep -m1 planted_decoy "$WORK/r.out")"
  else
    ok "$what: planted GSYM not used"
    grep -q sec_busy_leaf "$WORK/r.out" || note "$what: secret_prog's frames have no names (a conversion kept in memory would give sec_busy_leaf)"
  fi
  after=$(list_tree "$dir")
  [[ $after == "$before" ]] || bad "$what: expected nothing new in $dir, before: [$before] after: [$after]"
  # A line naming the dir itself (not a file in it, as "cache DIR/ID.gsym" does).
  dir_re=$(sed 's/[][\.*^$+?(){}|]/\\&/g' <<< "$dir")
  if grep -i cache "$WORK/r.err" | grep -Eq "$dir_re([^/]|$)"; then
    ok "$what: refusal reported: $(grep -i cache "$WORK/r.err" | grep -E "$dir_re([^/]|$)" | head -1)"
  else
    bad "$what: expected stderr to say the cache dir $dir was refused (a line with 'cache' and the dir's path), stderr lines with 'cache': [$(grep -i cache "$WORK/r.err" | head -2 | tr '\n' '|')], stderr starts: $(first_lines "$WORK/r.err")"
  fi
}

for kind in user-owned user-owned-0700 group-writable other-writable sticky-other-writable; do
  section "symbolize with a $kind cache dir holding a planted GSYM"
  plant "$kind"
  before=$(list_tree "$C")
  run_bounded 30 "$WORK/r.out" "$WORK/r.err" env GSYMPROF_CACHE="$C" "$GSYMPROF" symbolize "$WORK/cap.json"
  [[ $RC == 0 ]] || bad "symbolize ($kind cache): expected exit 0, got $(describe_rc $RC): $(first_lines "$WORK/r.err")"
  refused "symbolize, $kind cache $C" "$C" "$before"
done

if have_bpf; then
  for kind in user-owned other-writable; do
    section "profile with a $kind cache dir holding a planted GSYM"
    rm -rf "$WORK/cache-$kind" "$UDIR/cache-$kind"
    plant "$kind"
    before=$(list_tree "$C")
    run_bounded 40 "$WORK/r.out" "$WORK/r.err" env GSYMPROF_CACHE="$C" "$GSYMPROF" profile -F 199 -- "$ROOTDIR/secret_prog" 1
    [[ $RC == 0 ]] || bad "profile ($kind cache): expected exit 0, got $(describe_rc $RC): $(first_lines "$WORK/r.err")"
    grep -q 'secret_prog;' "$WORK/r.out" || bad "profile ($kind cache): no samples of secret_prog: $(first_lines "$WORK/r.out")"
    refused "profile, $kind cache $C" "$C" "$before"
  done
fi

finish
