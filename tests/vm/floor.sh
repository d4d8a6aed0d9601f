#!/usr/bin/env bash
# The boot-time floor: the ClawOS kernel booting an initramfs whose /init is
# busybox printing a line and powering off. Prints the wall seconds from QEMU
# start to that line, so boot-time numbers can be read as a ratio to it.
source "$(dirname "$0")/../lib.sh"
dir="$OUT/vm/floor"; rm -rf "$dir"; mkdir -p "$dir/root/bin"
cp "$OUT/buildroot/usr/bin/busybox" "$dir/root/bin/busybox"
printf '#!/bin/busybox sh\n/bin/busybox echo CLAWOS-FLOOR-READY\n/bin/busybox poweroff -f\n' > "$dir/root/init"
chmod +x "$dir/root/init"
initramfs_pack "$dir/root" "$dir/initramfs.gz"
# 2 GiB, as the image's VM (qemu/run.sh), so the kernel sizes its boot alike.
t0=$(date +%s.%N)
kernel_boot 120 2048 "$dir/initramfs.gz" "console=ttyS0 rdinit=/init" "$dir/serial.log"
grep -q CLAWOS-FLOOR-READY "$dir/serial.log" || die "floor boot did not reach its init"
printf '%.1f\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
