# shellcheck shell=bash
# Helpers shared by the test scripts that boot the ClawOS kernel directly on
# an initramfs, without firmware or a disk (tests/ebpf-vm/run.sh,
# tests/vm/floor.sh). Sourced, never run; brings scripts/lib.sh with it.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

# initramfs_pack ROOT FILE: the directory ROOT as a gzip'd newc cpio archive,
# the format the kernel unpacks as its initramfs. gzip -1: the archive is
# made on every run and read once, so packing time matters, not its size.
initramfs_pack() {
  (cd "$1" && find . | cpio -o -H newc --quiet | gzip -1) > "$2"
}

# kernel_boot TIMEOUT MEMORY_MIB INITRAMFS APPEND SERIAL: boots the kernel
# `make kernel` built straight into INITRAMFS with the command line APPEND,
# its console written to the file SERIAL, and returns QEMU's exit status
# (124 when `timeout` stopped it after TIMEOUT seconds).
kernel_boot() {
  local limit=$1 memory=$2 initramfs=$3 append=$4 serial=$5
  [[ -f $OUT/kernel/bzImage ]] || die "no kernel at $OUT/kernel/bzImage: run make kernel"
  # Always TCG, as both callers had before sharing this: the harness's time
  # limits and the floor's numbers were measured under it, and nested KVM
  # hangs on the CI machines (qemu/run.sh). -no-reboot: the guest powering
  # off, or rebooting after a panic (panic=-1), ends QEMU. No display and no
  # monitor: only the serial file, which the caller reads afterwards.
  timeout "$limit" qemu-system-x86_64 -machine q35 -accel tcg -smp 2 -m "$memory" -no-reboot -display none \
    -kernel "$OUT/kernel/bzImage" -initrd "$initramfs" -append "$append" \
    -serial "file:$serial" -monitor none
}
