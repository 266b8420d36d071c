#!/bin/bash
# e2e: the kernel matrix (tests/kernels/run-all.sh, also make test-kernels):
# gsymprof profile, record and symbolize inside Debian 12's 6.1 kernel and
# bookworm's 6.12, each booted under qemu (TCG), on a fixture without frame
# pointers whose hot loop is an inlined function. About 40 s with the
# kernels cached (the first run downloads ~25 MB of kernel packages).
# Skips (77) when qemu/busybox-static/cpio are missing and cannot be
# installed, or no kernel can be fetched.
set -u
exec "$(dirname "$0")/../kernels/run-all.sh"
