#!/usr/bin/env bash
# `make bench-first-boot`: a fresh box's first boot to ready on a 4 GiB and
# on a 64 GiB disk, one after the other in the same run; not part of `make
# test`. The first boot formats the data partition without writing all of
# it (specs/clawfs/encryption.md, "First boot: no wipe"), so its time must
# not grow with the disk. Prints, per disk: boot to ready (as the boot
# suite measures it), the format's own time (clawfs-keys' "encrypted in N
# s") and how much of the disk the boot wrote (the copy-on-write disk's
# allocated bytes on the host). Fails if the 64 GiB boot took more than
# BENCH_FIRST_BOOT_MAX_RATIO (1.5 by default) times the 4 GiB one's time.
source "$(dirname "$0")/../../scripts/lib.sh"
source "$REPO/tests/vm/lib.sh"
BENCH_FIRST_BOOT_MAX_RATIO=${BENCH_FIRST_BOOT_MAX_RATIO:-1.5}
IMAGE="$OUT/clawos.raw"
trap vm_kill EXIT

declare -A ready
for size in 4G 64G; do
  state="$OUT/vm/bench-first-boot-$size"
  log "first boot on a $size disk"
  vm_boot "$IMAGE" "$state" --fresh --disk-size "$size" || die "the first boot on a $size disk did not get ready"
  ready[$size]=$VM_READY_S
  format=$(vm_ssh 'journalctl -b -u clawos-clawfs-format -o cat | grep -o "encrypted in [0-9]* s"') ||
    die "the $size boot's journal has no format time"
  partition=$(vm_ssh 'blockdev --getsize64 /dev/disk/by-partlabel/clawos-data')
  vm_poweroff
  written=$(qemu-img info --output=json "$state/disk.qcow2" | jq '."actual-size"')
  printf '%-4s disk: ready after %s s; /clawfs %s (a %s MiB partition); %s MiB written to the disk\n' \
    "$size" "${ready[$size]}" "$format" $((partition / 1048576)) $((written / 1048576))
  rm -rf "$state"
done
ratio=$(printf "%.2f" "$(echo "${ready[64G]} / ${ready[4G]}" | bc -l)")
echo "first boot to ready, 64 GiB against 4 GiB: ${ratio}x"
(( $(echo "$ratio <= $BENCH_FIRST_BOOT_MAX_RATIO" | bc) )) ||
  die "the first boot grows with the disk: ${ratio}x on a 16x larger disk (at most ${BENCH_FIRST_BOOT_MAX_RATIO}x)"
