#!/bin/busybox sh
# Kernel matrix (tests/kernels/): /init of the guest (PID 1, busybox sh).
# Runs gsymprof profile, record and symbolize on /fixture and prints every
# output, stderr and exit status between "=== GSYMPROF-KM" markers on the
# serial console, for tests/kernels/run-kernel.sh to check. Ends with
# poweroff -f (the VM runs with -no-reboot and panic=-1, so should this
# script die instead, the kernel's panic ends the VM too).
# shellcheck shell=sh disable=SC3045
# (SC3045: busybox sh's ulimit takes -l.)

/bin/busybox mkdir -p /proc /sys /dev /tmp /usr/bin /usr/sbin /bin /sbin
/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# The kernel opened no console for us (the image has no /dev/console node):
# use devtmpfs's.
exec </dev/console >/dev/console 2>&1
mount -t tmpfs -o mode=1777 tmpfs /tmp
# tracefs/debugfs/bpffs where the kernel has them; gsymprof may or may not
# need them, and an older kernel may lack one: errors are not fatal.
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mkdir -p /sys/fs/bpf 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
ulimit -l unlimited 2>/dev/null

# Anything else the kernel command line set (run-kernel.sh's
# KERNEL_APPEND, e.g. GSYMPROF_DEBUG_BPF=1) is in our environment already:
# the kernel hands unknown NAME=VALUE parameters to init.

# Writable caches on the tmpfs (the GSYM cache defaults to /var/cache).
export HOME=/tmp XDG_CACHE_HOME=/tmp/.cache GSYMPROF_CACHE=/tmp/gsym-cache
unset DEBUGINFOD_URLS
mkdir -p "$XDG_CACHE_HOME" "$GSYMPROF_CACHE"

M='=== GSYMPROF-KM'
# (A newline first: SeaBIOS leaves its last line unterminated.)
echo
echo "$M START kernel=$(uname -r) cpus=$(nproc) btf=$([ -r /sys/kernel/btf/vmlinux ] && echo yes || echo no)"

# show NAME FILE [MAX_BYTES [head|tail]]: FILE between BEGIN/END markers
# (at most MAX_BYTES of it, its head or its tail: the serial console is
# slow under TCG, and a verifier log can be megabytes).
show() {
  echo "$M BEGIN $1"
  if [ -n "${3:-}" ] && [ -f "$2" ] && [ "$(wc -c <"$2")" -gt "$3" ]; then
    if [ "${4:-head}" = tail ]; then
      echo "[... $(wc -c <"$2") bytes in all, the last $3:]"; tail -c "$3" "$2"; echo
    else
      head -c "$3" "$2"; echo; echo "[... $(wc -c <"$2") bytes in all]"
    fi
  else
    cat "$2" 2>/dev/null
  fi
  echo "$M END $1"
}

# step NAME CMD...: runs CMD, stdout and stderr to /tmp/NAME.{out,err},
# then prints both and "STATUS NAME RC SECONDS".
step() {
  name=$1; shift
  t0=$(date +%s)
  "$@" >"/tmp/$name.out" 2>"/tmp/$name.err"
  rc=$?
  t1=$(date +%s)
  [ -s "/tmp/$name.out" ] && show "$name.stdout" "/tmp/$name.out" 4096
  show "$name.stderr" "/tmp/$name.err" 16384 tail
  echo "$M STATUS $name $rc $((t1 - t0))"
}

# Informational (the commands may not exist yet): their status is printed,
# never checked.
step version gsymprof --version
step doctor gsymprof doctor

step profile gsymprof profile -F 499 -o /tmp/p.folded -- /fixture
show p.folded /tmp/p.folded
# -p of a running process: an event per thread (inherited), not per CPU.
/fixture 8 &
fixture_pid=$!
sleep 0.5
step pid gsymprof profile -F 499 -p "$fixture_pid" -o /tmp/pp.folded
wait "$fixture_pid"
show pp.folded /tmp/pp.folded
step record gsymprof record -F 499 -o /tmp/c.gsymcap -- /fixture
show c.gsymcap /tmp/c.gsymcap 2048
step symbolize gsymprof symbolize /tmp/c.gsymcap -o /tmp/s.folded
show s.folded /tmp/s.folded
step offcpu gsymprof profile --off-cpu -o /tmp/o.folded -- sleep 1
show o.folded /tmp/o.folded

echo "$M DONE"
sync
poweroff -f
