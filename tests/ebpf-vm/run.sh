#!/usr/bin/env bash
# The eBPF monitor's VM test (issue 7): boots the ClawOS kernel (make kernel)
# under QEMU on a small initramfs whose /init is clawos-ebpf-vmtest (the
# harness in tests/ebpf-vm/harness, built here statically) next to the
# monitor object (make ebpf). The harness runs every scenario against the
# real programs in the real kernel and prints `VMTEST PASS|FAIL <scenario>`
# and `VMTEST BENCH ...` lines on the serial console, then powers off.
# Fails unless every scenario passed.
#   usage: run.sh [--bench]   (--bench adds the overhead and rate benchmarks)
source "$(dirname "$0")/../lib.sh"
append="console=ttyS0 rdinit=/init panic=-1 quiet"
[[ ${1:-} == --bench ]] && append+=" clawos.vmtest=bench"
kernel="$OUT/kernel/bzImage"
object="$OUT/ebpf/clawos-monitor.bpf.o"
[[ -f $kernel ]] || die "no kernel at $kernel: run make kernel"
[[ -f $object ]] || die "no eBPF object at $object: run make ebpf"

# Static, so the initramfs needs no libraries: glibc's static libc.a, the
# host toolchain. (RUSTFLAGS with an explicit --target reach only the
# harness's own crates, not build scripts, so the host build stays warm.)
target=x86_64-unknown-linux-gnu
RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked --target "$target" -p clawos-ebpf-vmtest
harness="${CARGO_TARGET_DIR:-$REPO/target}/$target/release/clawos-ebpf-vmtest"

dir="$OUT/vm/ebpf"; rm -rf "$dir"; mkdir -p "$dir/root"
install -m 0755 "$harness" "$dir/root/init"
install -m 0644 "$object" "$dir/root/clawos-monitor.bpf.o"
initramfs_pack "$dir/root" "$dir/initramfs.gz"

# The scenarios take ~15 s under TCG, the benchmarks about a minute more.
limit=240; [[ ${1:-} == --bench ]] && limit=600
boot() {
  log "ebpf-vm: booting $kernel with the harness"
  local started; started=$(date +%s)
  # panic=-1 turns a kernel panic into a reboot, which ends QEMU. 1 GiB is
  # plenty for the harness and the monitor's maps.
  kernel_boot "$limit" 1024 "$dir/initramfs.gz" "$append" "$dir/serial.log" || warn "qemu exited with $?"
  log "ebpf-vm: VM ran $(( $(date +%s) - started )) s"
}
boot
# A boot that never reached the harness (TCG occasionally stalls the kernel
# early, RCU stall warnings and no init) says nothing about the monitor:
# boot once more. A harness that ran and failed is not retried.
if ! grep -aq '^VMTEST' "$dir/serial.log"; then
  warn "ebpf-vm: the kernel never reached the harness; booting again"
  tail -n 5 "$dir/serial.log" >&2
  boot
fi

grep -a '^VMTEST' "$dir/serial.log" || true
grep -aq '^VMTEST DONE passed=[1-9][0-9]* failed=0' "$dir/serial.log" || {
  warn "ebpf-vm: not every scenario passed; the whole console is in $dir/serial.log"
  tail -n 40 "$dir/serial.log" >&2
  exit 1
}
