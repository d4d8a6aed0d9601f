#!/usr/bin/env bash
# Builds the eBPF programs under ebpf/ in the build root with Debian's rustc
# (prebuilt core for bpfel-unknown-none; RUSTC_BOOTSTRAP unlocks the unstable
# flags the BPF target needs on a stable compiler). cargo's target directory
# is in the cache (the build root's /cache), keyed by cargo's fingerprints,
# so a fresh clone does not rebuild aya-ebpf and its dependencies.
source "$(dirname "$0")/lib.sh"
mkdir -p "$OUT/ebpf"
"$REPO/scripts/in-buildroot.sh" sh -c '
  set -e
  cd /src/ebpf
  RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=/cache/target-ebpf cargo build --release --locked -p clawos-ebpf-programs
  cp /cache/target-ebpf/bpfel-unknown-none/release/clawos-monitor /out/ebpf/clawos-monitor.bpf.o'
log "ebpf: $OUT/ebpf/clawos-monitor.bpf.o"
