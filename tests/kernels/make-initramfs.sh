#!/bin/bash
# Kernel matrix (tests/kernels/): builds the guest's initramfs, a gzip'd
# newc cpio holding
#   - Debian's busybox-static (/bin/busybox; the init script makes its applet
#     links at boot),
#   - $BUILD/gsymprof as /usr/bin/gsymprof and every library ldd names, at
#     the same paths, plus the dynamic loader, and the host's merged-/usr
#     symlinks (/lib -> usr/lib, ...) so those paths resolve as on the host,
#   - libc's separate debug file if the host has it (libc6-dbg), so the
#     guest names libc's frames as the host does,
#   - /fixture, tests/kernels/fixture_inline.c built without frame pointers,
#   - /init (tests/kernels/init.sh).
# Usage: make-initramfs.sh OUT.gz   (env BUILD, default build)
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1
HERE=tests/kernels
BUILD=${BUILD:-build}
OUT=${1:?usage: make-initramfs.sh OUT.gz}

die() { echo "make-initramfs: $*" >&2; exit 1; }

GSYMPROF=$BUILD/gsymprof
[[ -x $GSYMPROF ]] || die "$GSYMPROF is not built (make all)"
BUSYBOX=$(dpkg -L busybox-static 2>/dev/null | grep -m1 '/bin/busybox$')
[[ -n $BUSYBOX && -x $BUSYBOX ]] || die "busybox-static is not installed"
# The Debian busybox package (not -static) is dynamically linked: refuse it.
readelf -l "$BUSYBOX" | grep -q INTERP && die "$BUSYBOX is not statically linked"
for tool in gcc cpio gzip ldd readelf; do
  command -v "$tool" >/dev/null || die "$tool is missing"
done

ROOT=$(mktemp -d) || die "mktemp failed"
trap 'rm -rf "$ROOT"' EXIT

# Merged /usr: mirror the host's top-level symlinks so that a path ldd
# prints (/lib/x86_64-linux-gnu/..., /lib64/ld-linux-x86-64.so.2) is the
# same file as its /usr twin, as on the host.
for top in bin sbin lib lib32 lib64 libx32; do
  [[ -L /$top ]] || continue
  target=$(readlink "/$top")
  # A relative target (usr/lib) must exist for paths through it to resolve.
  [[ $target == /* ]] || mkdir -p "$ROOT/$target" || die "mkdir failed"
  ln -s "$target" "$ROOT/$top" || die "cannot link /$top"
done
mkdir -p "$ROOT"/{usr/bin,usr/sbin,bin,sbin,proc,sys,dev,tmp,run,root} || die "mkdir failed"

# The fixture: -fomit-frame-pointer is the point (the CFI unwinder must do
# the work); -g so that the GSYM conversion in the guest finds the inline
# frame. Built here, with the host's compiler, against the host's libc,
# which goes into the image with gsymprof's libraries.
gcc -O2 -g -fomit-frame-pointer -Wall -Wextra -o "$ROOT/fixture" "$HERE/fixture_inline.c" ||
  die "cannot build the fixture"

cp "$BUSYBOX" "$ROOT/bin/busybox" || die "cannot copy busybox"
cp "$GSYMPROF" "$ROOT/usr/bin/gsymprof" || die "cannot copy gsymprof"
install -m 0755 "$HERE/init.sh" "$ROOT/init" || die "cannot copy init.sh"

# Libraries: "name => /path (addr)" and the loader's "/path (addr)"; copied
# dereferenced (the soname symlink becomes the file) to the same path.
libs=$( { ldd "$GSYMPROF"; ldd "$ROOT/fixture"; } |
  awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u)
[[ -n $libs ]] || die "ldd named no libraries for $GSYMPROF"
for lib in $libs; do
  if ! mkdir -p "$ROOT$(dirname "$lib")" || ! cp -L "$lib" "$ROOT$lib"; then
    die "cannot copy $lib"
  fi
done

# libc's debug file, found by build ID as gsymprof looks for it.
libc=$(grep -m1 '/libc\.so\.6$' <<<"$libs")
id=$(readelf -n "$libc" 2>/dev/null | awk '/Build ID:/ {print $3; exit}')
dbg=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
if [[ -n $id && -f $dbg ]]; then
  if ! mkdir -p "$ROOT$(dirname "$dbg")" || ! cp "$dbg" "$ROOT$dbg"; then
    die "cannot copy $dbg"
  fi
fi

mkdir -p "$(dirname "$OUT")" || die "cannot create $(dirname "$OUT")"
# -R 0:0: every file root's, whoever built the image; written to a
# temporary first so that a failed build leaves no truncated image.
set -o pipefail
if ! (cd "$ROOT" && find . -mindepth 1 | sort | cpio --quiet -o -H newc -R 0:0) |
     gzip -6 >"$OUT.tmp" || ! mv "$OUT.tmp" "$OUT"; then
  rm -f "$OUT.tmp"
  die "cannot write $OUT"
fi
echo "make-initramfs: $OUT ($(du -k "$OUT" | cut -f1) KiB; gsymprof, $(wc -w <<<"$libs") libraries, busybox, fixture)" >&2
