#!/bin/bash
# e2e: a process's first instructions are the root of its stack. ld.so's
# entry (`_start`, then `_dl_start_user`) is bare assembly without CFI and
# named only by untyped local symbols in libc6-dbg's debug file; a
# fork/exec loop of /bin/true spends most of its time there. Every stack
# unwound through ld.so's startup (`_dl_start` or `_dl_init` a caller, not
# the leaf) must start at `_start;_dl_start` (or `_dl_start_user;_dl_init`),
# named, with no `[truncated]` root. (A leaf-only walk can still end early
# when the process exec'ed and exited before its maps were read: the
# unwinder never saw ld.so then, `unwind_no_module` in the summary.)
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
LDSO=$(readlink -f /lib64/ld-linux-x86-64.so.2)
id=$(readelf -n "$LDSO" | awk '/Build ID/ {print $3}')
[[ -r /usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug ]] || skip "no debug file for $LDSO (libc6-dbg)"

profile_run "$WORK/true.folded" "$WORK/true.err" -F 999 -- \
  /bin/sh -c 'i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done'
# These are checks of the user stack: the kernel's leafward frames (page
# faults in ld.so's startup) are left out.
sed -E 's/(;[^;]*_\[k\])+ ([0-9]+)$/ \2/' "$WORK/true.folded" >"$WORK/true.user.folded"
# Stacks through ld.so's startup functions, and how they start.
awk '{ c = $NF; s = substr($0, 1, length($0) - length(c) - 1); split(s, p, ";")
       if (p[1] != "true") next
       # A caller: a frame of another function (not inlined into it) follows.
       caller = 0; n = length(p)
       for (k = 2; k < n; ++k)
         if (p[k] == "_dl_start" || p[k] == "_dl_init")
           for (j = k + 1; j <= n; ++j) if (p[j] !~ /_\[i\]$/) caller = 1
       if (!caller) next
       total += c
       if (s ~ /^true;_start;_dl_start(;|$)/ || s ~ /^true;_dl_start_user;_dl_init(;|$)/) good += c
       else { bad += c; print "  not rooted at the entry: " $0 }
     }
     END { printf "  %d samples through ld.so startup, %d rooted at _start/_dl_start_user\n", total, good
           exit !(total >= 50 && bad == 0) }' "$WORK/true.user.folded" ||
  fail "ld.so startup stacks do not all start at its entry"
grep -q '^true;_start ' "$WORK/true.user.folded" ||
  { grep '^true;' "$WORK/true.user.folded" | head >&2; fail "no sample in ld.so's _start itself"; }
# (A leaf-only `[truncated];_start` is the race above: no caller was unwound.)
if grep -E '^true;\[truncated\];(_start;|_dl_start_user;|ld-linux-x86-64\.so\.2\+0x[0-9a-f]+;_dl_start)' \
  "$WORK/true.user.folded" >&2; then
  fail "an ld.so entry frame under [truncated]"
fi
echo "ok"
