#!/bin/bash
# e2e security (root, live profiling): temporary files.
#  - `profile -o OUT -d 30 -- ./prog` interrupted by SIGINT, and by SIGTERM,
#    at ~0.5 s (sampling), and again during symbolization (a profile of
#    gsymprof itself converting libc: many modules to convert with a fresh
#    cache): after it exits (bounded), no *.tmp* / .*tmp* file remains in
#    OUT's dir or the cache dir, no gsymprof* file appeared in /tmp, $TMPDIR
#    or /run, and OUT is either complete folded output or absent;
#  - with TMPDIR set to a user-owned dir holding symlinks named like
#    gsymprof's temporary files (gsymprof-vdso-*, *.tmp*) that point to a
#    root-owned victim, profile / symbolize / gsym convert / flamegraph never
#    change the victim and create nothing in TMPDIR (not even for a moment:
#    TMPDIR's mtime must not change).
set -u
source "$(dirname "$0")/fixtures/security_common.bash"
require_root
have_bpf || skip "live profiling is unavailable"
sec_make_user

build "$WORK/busy" "$SEC_FIX/busy.c"
export TMPDIR=$WORK/tmpdir  # root's own TMPDIR for the interruption runs
mkdir -m 700 "$TMPDIR"

# snap: gsymprof* entries in /tmp, $TMPDIR, /run (with owner and mtime).
snap() {
  { find /tmp "$TMPDIR" -maxdepth 1 -name 'gsymprof*' -printf '%p\n' 2> /dev/null
    find /run -maxdepth 2 -name 'gsymprof*' -printf '%p\n' 2> /dev/null; } | sort
}

# leftovers DIR...: *.tmp* / .*tmp* files under the DIRs.
leftovers() {
  local d
  for d in "$@"; do
    [[ -d $d ]] && find "$d" -name '*.tmp*' -o -name '.*tmp*'
  done
}

# complete_folded FILE: non-empty, ends with a newline, every line "STACK COUNT".
complete_folded() {
  [[ -s $1 && $(tail -c 1 "$1" | od -An -c | tr -d ' ') == '\n' ]] &&
    ! grep -vqE '^[^ ].* [0-9]+$' "$1"
}

# interrupt SIG PHASE: one interrupted profile (PHASE sampling|symbolizing).
interrupt() {
  local sig=$1 phase=$2 what="profile -o OUT, SIG$1 during $2"
  local d=$WORK/run-$sig-$phase out cache before after waited children pid
  mkdir -p "$d"
  out=$d/out.folded cache=$d/cache
  before=$(snap)
  if [[ $phase == sampling ]]; then
    GSYMPROF_CACHE=$cache "$GSYMPROF" profile -F 199 -d 30 -o "$out" -- "$WORK/busy" 60 vdso \
      > "$d/stdout" 2> "$d/stderr" < /dev/null &
  else
    # gsymprof converting libc, profiled: when it exits, the profile has
    # gsymprof, libc, libstdc++, libdw, libelf, libz, ld.so, ... to convert.
    GSYMPROF_CACHE=$cache "$GSYMPROF" profile -F 999 -d 30 -o "$out" -- sh -c \
      '"$1" gsym convert "$2" -o "$3/target.gsym" && "$1" gsym convert "$2" -o "$3/target.gsym" --threads 1; touch "$3/target-done"' \
      _ "$GSYMPROF" "$LIBC" "$d" > "$d/stdout" 2> "$d/stderr" < /dev/null &
  fi
  pid=$!
  SEC_PIDS+=("$pid")
  if [[ $phase == sampling ]]; then
    sleep 0.5
  else
    for _ in $(seq 1500); do [[ -e $d/target-done ]] && break; sleep 0.01; done
    sleep 0.15
  fi
  children=$(pgrep -P "$pid" | tr '\n' ' ')
  if ! kill -0 "$pid" 2> /dev/null; then
    note "$what: profile had already exited before the signal (symbolization too short to interrupt)"
  fi
  kill -"$sig" "$pid" 2> /dev/null
  waited=0
  while kill -0 "$pid" 2> /dev/null && ((waited < 300)); do sleep 0.1; waited=$((waited + 1)); done
  if kill -0 "$pid" 2> /dev/null; then
    bad "$what: expected profile to exit after SIG$sig, still running 30 s later (killed)"
    kill -KILL "$pid" 2> /dev/null
  fi
  wait "$pid" 2> /dev/null
  local rc=$?
  for p in $children; do kill -KILL "$p" 2> /dev/null; done
  note "$what: $(describe_rc $rc) $(awk -v w=$waited 'BEGIN {printf "%.1f", w / 10}')s after the signal; stderr: $(tail -1 "$d/stderr")"
  local left
  left=$(leftovers "$d" "$cache")
  [[ -z $left ]] && ok "$what: no temporary file left in OUT's dir or the cache" ||
    bad "$what: expected no *.tmp* file left, found: $(tr '\n' ' ' <<< "$left")"
  after=$(snap)
  local new
  new=$(comm -13 <(echo "$before") <(echo "$after"))
  [[ -z $new ]] && ok "$what: nothing new in /tmp, \$TMPDIR, /run" ||
    bad "$what: expected no new gsymprof* file in /tmp, \$TMPDIR or /run, found: $(for f in $new; do stat -c '%n (%U, %y)' "$f"; done | tr '\n' ' ')"
  if [[ -e $out ]]; then
    complete_folded "$out" && ok "$what: OUT is complete folded output ($(wc -l < "$out") stacks)" ||
      bad "$what: expected OUT complete folded output or absent, it is $(file_kind "$out") of $(stat -c %s "$out") bytes ending: $(tail -c 80 "$out" | tr -c '[:print:]' '.')"
  else
    ok "$what: OUT absent"
  fi
}

for sig in INT TERM; do
  section "SIG$sig during sampling"
  interrupt "$sig" sampling
  section "SIG$sig during symbolization"
  interrupt "$sig" symbolizing
done

section "TMPDIR is a user-owned dir with symlinks named like gsymprof temporary files"
VICTIM=$WORK/victim.sh
make_victim "$VICTIM"
UT=$UDIR/tmp
"${AS_USER[@]}" mkdir "$UT"
for name in gsymprof-vdso-000000 gsymprof-vdso-XXXXXX gsymprof-vdso-aaaaaa gsymprof.tmp \
  gsymprof-vdso-000000.tmp.000000 gsymprof-vdso-XXXXXX.tmp.XXXXXX .gsymprof.tmp gsymprof; do
  "${AS_USER[@]}" ln -s "$VICTIM" "$UT/$name"
done
before=$(list_tree "$UT")
"$PY" "$SEC_FIX/make_capture.py" "$WORK/cap.json" "$WORK/busy" "$(build_id_of "$WORK/busy")" \
  "0x$(nm "$WORK/busy" | awk '$3 == "sec_busy_leaf" {print $1}')"
printf 'a;b 1\n' > "$WORK/in.folded"
cmds=(
  "profile -F 199 -o $WORK/t.folded -- $WORK/busy 1 vdso"
  "symbolize $WORK/cap.json -o $WORK/t2.folded"
  "gsym convert $WORK/busy -o $WORK/t.gsym"
  "flamegraph $WORK/in.folded -o $WORK/t.svg"
)
for c in "${cmds[@]}"; do
  # shellcheck disable=SC2086
  mtime=$(stat -c %y "$UT")
  sleep 0.01
  run_bounded 40 "$WORK/c.out" "$WORK/c.err" env TMPDIR="$UT" GSYMPROF_CACHE="$WORK/cache-tmpdir" "$GSYMPROF" $c
  [[ $RC == 0 ]] || bad "TMPDIR=user dir: gsymprof $c: expected exit 0, got $(describe_rc $RC): $(first_lines "$WORK/c.err")"
  victim_intact "$VICTIM" "TMPDIR=user dir: gsymprof ${c%% *}" && ok "TMPDIR=user dir: gsymprof ${c%% -*}: victim unchanged"
  after=$(list_tree "$UT")
  # A file created and removed again during the run still changes the dir's mtime.
  if [[ $after == "$before" && $(stat -c %y "$UT") != "$mtime" ]]; then
    bad "TMPDIR=user dir: gsymprof $c: expected nothing created in TMPDIR, but entries were created/removed in it during the run (its mtime changed from $mtime to $(stat -c %y "$UT"))"
  fi
  if [[ $after != "$before" ]]; then
    bad "TMPDIR=user dir: gsymprof $c: expected nothing created in TMPDIR, it now has: $(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')"
    before=$after
  fi
done

finish
