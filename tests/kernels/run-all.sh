#!/bin/bash
# Kernel matrix (make test-kernels; issue 25 item 5): runs gsymprof under
# other kernels than the build machine's, each booted under qemu.
#   1. selftest.sh: run-kernel.sh's checks against fake console logs;
#   2. fetch-kernel.sh: Debian 12's newest 6.1 kernel and bookworm's newest
#      6.12 (cached across runs);
#   3. make-initramfs.sh, once: busybox, $BUILD/gsymprof, its libraries,
#      the fixture, init.sh;
#   4. run-kernel.sh per kernel, one after the other (a TCG guest with two
#      CPUs keeps this machine's two cores busy).
# Exit 0 if every kernel passes, 1 if one fails, 77 (skipped) if qemu,
# busybox-static or cpio are missing and cannot be installed, or no kernel
# can be fetched at all (no network and an empty cache).
# Env: BUILD (default build), and run-kernel.sh's KERNEL_* variables.
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
export BUILD
HERE=tests/kernels
OUT=$BUILD/test-kernels
start=$SECONDS

skip() { echo "SKIP: $*" >&2; exit 77; }
die() { echo "FAIL: $*" >&2; exit 1; }

[[ -x $BUILD/gsymprof ]] || die "$BUILD/gsymprof is not built (make all)"

# missing: the Debian packages of the tools the matrix needs that are absent.
# qemu-system-x86 without recommends has what -kernel boots need (seabios
# and ipxe-qemu are dependencies).
missing() {
  local m=()
  command -v qemu-system-x86_64 >/dev/null || m+=(qemu-system-x86)
  dpkg-query -W -f='${Status}\n' busybox-static 2>/dev/null | grep -q "install ok installed" ||
    m+=(busybox-static)
  command -v cpio >/dev/null || m+=(cpio)
  echo "${m[*]}"
}
need=$(missing)
if [[ -n $need ]]; then
  if [[ $(id -u) == 0 ]]; then
    echo "kernel matrix: installing $need" >&2
    # shellcheck disable=SC2086  # one word per package
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null 2>&1; }
  fi
  need=$(missing)
  [[ -z $need ]] || skip "the kernel matrix needs $need (sudo make deps)"
fi

echo "== harness self-test (fake console logs)"
"$HERE/selftest.sh" || die "the harness's own checks are broken (tests/kernels/selftest.sh)"

echo "== kernels"
kernels=$("$HERE/fetch-kernel.sh")
fetch_rc=$?
[[ -n $kernels ]] || skip "no kernel could be fetched or found in the cache (network? see above)"
while read -r release version _; do echo "   $release (Debian package version $version)"; done <<<"$kernels"

echo "== initramfs"
"$HERE/make-initramfs.sh" "$OUT/initrd.gz" || die "cannot build the initramfs"

results=() failed=0
while read -r release version dir; do
  echo "== $release ($version)"
  "$HERE/run-kernel.sh" "$dir" "$OUT/initrd.gz" | tee "$OUT/$release.result"
  rc=${PIPESTATUS[0]}
  ((rc == 0)) || failed=1
  results+=("$(head -n 1 "$OUT/$release.result")")
done <<<"$kernels"
if ((fetch_rc != 0)); then
  results+=("FAIL Debian 12's 6.1 kernel could not be fetched (see above)")
  failed=1
fi

echo "== kernel matrix summary ($((SECONDS - start))s)"
printf '%s\n' "${results[@]}"
exit $failed
