#!/usr/bin/env bash
# The boot-time floor: the ClawOS kernel booting an initramfs whose /init is
# busybox printing a line and powering off. Prints the wall seconds from QEMU
# start to that line, so boot-time numbers can be read as a ratio to it.
source "$(dirname "$0")/../../scripts/lib.sh"
dir="$OUT/vm/floor"; rm -rf "$dir"; mkdir -p "$dir/root/bin"
cp "$OUT/buildroot/usr/bin/busybox" "$dir/root/bin/busybox"
printf '#!/bin/busybox sh\n/bin/busybox echo CLAWOS-FLOOR-READY\n/bin/busybox poweroff -f\n' > "$dir/root/init"
chmod +x "$dir/root/init"
(cd "$dir/root" && find . | cpio -o -H newc --quiet | gzip -1) > "$dir/initramfs.gz"
t0=$(date +%s.%N)
timeout 120 qemu-system-x86_64 -machine q35 -accel tcg -smp 2 -m 2048 -no-reboot -display none \
  -kernel "$OUT/kernel/bzImage" -initrd "$dir/initramfs.gz" -append "console=ttyS0 rdinit=/init" \
  -serial "file:$dir/serial.log" -monitor none
grep -q CLAWOS-FLOOR-READY "$dir/serial.log" || die "floor boot did not reach its init"
printf '%.1f\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
