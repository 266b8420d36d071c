#!/bin/sh
# Installs every Debian package the build, the tests and the demo need.
# Idempotent: when everything is present it does nothing (no apt-get at all).
set -eu

# qemu-system-x86 (without recommends: seabios and ipxe-qemu are hard
# dependencies), busybox-static and cpio: the kernel matrix (tests/kernels/).
# cppcheck: the dead-function check (tests/checks/unused_functions.sh).
# python3-venv: the venv py-spy is installed into (tests/e2e/profile_python.sh).
# strace: profile_kernel.sh checks that a warm run names kernel frames
# without reading /proc/kallsyms.
# python3.11, python3.11-dev: Debian 12's CPython, profiled by profile_python.sh,
# and its headers, which the unit tests compile tests/tools/python_offsets.c
# against to check the layout table.
PACKAGES="
build-essential make pkg-config git
clang llvm lld libclang-rt-14-dev cppcheck
libbpf-dev bpftool linux-libc-dev
libelf-dev libdw-dev zlib1g-dev libdeflate-dev libzstd-dev liblzma-dev xz-utils libiberty-dev
libprotobuf-dev protobuf-compiler golang-go
libgrpc++-dev protobuf-compiler-grpc
libcpp-httplib-dev libbrotli-dev
libdebuginfod-dev debuginfod libssl-dev openssl curl
nlohmann-json3-dev doctest-dev libcli11-dev
llvm-22
libc6-dbg
procps linux-perf strace
nodejs
dwz
zstd python3 python3-venv python3.11 python3.11-dev
qemu-system-x86 busybox-static cpio
"
# Extra packages only the benchmarks need (make bench passes --bench).
# bpfcc-tools: offcputime-bpfcc, the off-CPU peer (tests/bench/sections/offcpu.sh;
# it needs kprobes and kernel headers, so on a kernel without them the
# section says so and compares with bpftrace only). stress-ng: the busy
# workload of the agent section (tests/bench/sections/agent.sh). graphviz: dot,
# which go tool pprof -svg needs (tests/bench/sections/diff.sh).
BENCH_PACKAGES="llvm-22-dev linux-perf bpftrace bpfcc-tools dpkg-dev hyperfine time stress-ng graphviz"
# The flame-graph browser test (headless Chromium) needs these.
BROWSER_PACKAGES="chromium"

want="$PACKAGES $BROWSER_PACKAGES"
for arg in "$@"; do
  case "$arg" in
    --bench) want="$want $BENCH_PACKAGES" ;;
    --no-browser) want="$PACKAGES" ;;
    *) echo "install-deps.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

missing=""
for p in $want; do
  if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

if [ -z "$missing" ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: missing packages:$missing; run as root (sudo make deps)" >&2
  exit 1
fi

echo "install-deps.sh: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || { echo "install-deps.sh: apt-get update failed" >&2; exit 1; }
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
