#!/bin/bash
# Kernel matrix (tests/kernels/): fetches the kernels to boot, from
# Debian's archive through apt (the host's sources):
#   - Debian 12's own kernel, the newest linux-image-6.1.0-N-cloud-amd64-unsigned
#   - the newest bookworm 6.12 kernel, linux-image-6.12.*+deb12-cloud-amd64-unsigned,
#     if apt knows one
# The cloud flavour is small and boots under qemu without modules (8250
# serial console, BTF, perf events, BPF, tracefs all built in); "unsigned"
# is the plain vmlinuz, no shim/secure-boot packaging.
#
# Cache: ${GSYMPROF_TEST_CACHE:-/var/cache/gsymprof-tests}/kernels/RELEASE/
# holds vmlinuz, config and deb-version (written last: the entry is complete).
# An entry whose deb-version equals apt's candidate is reused without
# downloading; without network, the newest complete cached entry of each
# series is used. The directory is mode 0700 and must be owned by the user
# running this (root): the kernels it holds are booted by the tests.
#
# Prints one line per kernel on stdout: "RELEASE DEB_VERSION DIR"; messages
# on stderr. Exit 0 if at least the 6.1 kernel is available, 1 if not.
set -u
export LC_ALL=C

log() { echo "fetch-kernel: $*" >&2; }

CACHE_ROOT=${GSYMPROF_TEST_CACHE:-/var/cache/gsymprof-tests}
CACHE=$CACHE_ROOT/kernels

# Private cache: created 0700 (umask 077), refused if someone else owns it
# or others may write into it (they could plant the kernel we boot).
umask 077
mkdir -p "$CACHE" || { log "cannot create $CACHE"; exit 1; }
for d in "$CACHE_ROOT" "$CACHE"; do
  read -r owner mode < <(stat -c '%u %a' "$d")
  if [[ $owner != "$(id -u)" ]] || (( 8#$mode & 8#022 )); then
    log "$d: owned by uid $owner, mode $mode; want owner $(id -u) and no group/other write"
    exit 1
  fi
done
chmod 0700 "$CACHE"

# newest_package REGEX: the newest package name apt knows matching REGEX
# (version-sorted: 6.1.0-9 < 6.1.0-57, 6.12.9 < 6.12.118), or nothing.
newest_package() {
  apt-cache search --names-only "$1" 2>/dev/null | awk '{print $1}' | sort -V | tail -n 1
}

# candidate_version PKG: apt's candidate version of PKG, or nothing.
candidate_version() {
  apt-cache policy "$1" 2>/dev/null | awk '$1 == "Candidate:" && $2 != "(none)" {print $2; exit}'
}

# newest_cached GLOB: the newest complete cache entry matching GLOB.
newest_cached() {
  local d
  for d in "$CACHE"/$1; do
    [[ -s $d/deb-version && -s $d/vmlinuz ]] && basename "$d"
  done | sort -V | tail -n 1
}

# fetch PKG: downloads and unpacks PKG's candidate into the cache unless it
# is there already; prints "RELEASE DEB_VERSION DIR". Returns 1 on failure.
fetch() {
  local pkg=$1 release version dir tmp deb
  release=${pkg#linux-image-}
  release=${release%-unsigned}
  version=$(candidate_version "$pkg")
  [[ -n $version ]] || { log "$pkg: apt has no candidate version"; return 1; }
  dir=$CACHE/$release
  if [[ -s $dir/vmlinuz && $(cat "$dir/deb-version" 2>/dev/null) == "$version" ]]; then
    log "$release ($pkg $version): cached in $dir"
    echo "$release $version $dir"
    return 0
  fi
  log "$release ($pkg $version): downloading"
  tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX") || return 1
  # APT::Sandbox::User=root: the 0700 cache is not readable by _apt, and
  # apt would otherwise warn that it downloads unsandboxed.
  if ! (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$pkg=$version" >/dev/null); then
    log "$pkg=$version: apt-get download failed"
    rm -rf "$tmp"
    return 1
  fi
  deb=$(compgen -G "$tmp/*.deb" | head -n 1)
  # Only the kernel image and its config are kept (the modules are ~100 MB
  # and not needed: the init script loads none).
  if [[ -z $deb ]] || ! dpkg-deb -x "$deb" "$tmp/x" ||
     [[ ! -s $tmp/x/boot/vmlinuz-$release ]]; then
    log "$pkg: cannot unpack boot/vmlinuz-$release from ${deb:-the download}"
    rm -rf "$tmp"
    return 1
  fi
  rm -rf "$dir"
  if ! mkdir -p "$dir" || ! cp "$tmp/x/boot/vmlinuz-$release" "$dir/vmlinuz"; then
    log "cannot store $release in $dir"
    rm -rf "$tmp" "$dir"
    return 1
  fi
  cp "$tmp/x/boot/config-$release" "$dir/config" 2>/dev/null
  # deb-version last: its presence marks a complete entry.
  echo "$version" >"$dir/deb-version.tmp" && mv "$dir/deb-version.tmp" "$dir/deb-version"
  rm -rf "$tmp"
  log "$release ($pkg $version): unpacked into $dir"
  echo "$release $version $dir"
}

# A fresh container may have no package lists yet.
if [[ -z $(newest_package '^linux-image-6\.1\.0-[0-9]+-cloud-amd64-unsigned$') &&
      $(id -u) == 0 ]]; then
  log "apt knows no 6.1 cloud kernel; running apt-get update"
  apt-get update -qq >&2 || log "apt-get update failed"
fi

status=0
# series: "label regex cache-glob"; the 6.1 kernel is required, 6.12 optional.
for series in '6.1 ^linux-image-6\.1\.0-[0-9]+-cloud-amd64-unsigned$ 6.1.0-*-cloud-amd64' \
              '6.12 ^linux-image-6\.12\.[0-9]+\+deb12-cloud-amd64-unsigned$ 6.12.*+deb12-cloud-amd64'; do
  read -r label regex glob <<<"$series"
  pkg=$(newest_package "$regex")
  if [[ -n $pkg ]] && fetch "$pkg"; then continue; fi
  cached=$(newest_cached "$glob")
  if [[ -n $cached ]]; then
    log "$label: using cached $cached ($(cat "$CACHE/$cached/deb-version")) instead"
    echo "$cached $(cat "$CACHE/$cached/deb-version") $CACHE/$cached"
  elif [[ $label == 6.1 ]]; then
    log "no Debian 12 6.1 kernel available (apt has ${pkg:-none}, nothing cached)"
    status=1
  else
    log "no bookworm $label kernel available (apt has ${pkg:-none}); skipping it"
  fi
done
exit $status
