# shellcheck shell=bash
# /clawfs is the writable data partition and holds /var.

clawfs_is_ext4_rw() { findmnt -no FSTYPE,OPTIONS /clawfs | grep -E "^ext4 rw"; }
check "clawfs: /clawfs is a read-write ext4 data partition" clawfs_is_ext4_rw

var_is_on_clawfs() { test "$(stat -c %d:%i /var)" = "$(stat -c %d:%i /clawfs/var)"; }
check "clawfs: /var is bound from /clawfs/var" var_is_on_clawfs

# It comes last (rootfs-overlay/usr/lib/repart.d, after slot B) and takes
# the rest of the disk: it ends within 2 MiB of the disk's end (the backup
# GPT and alignment).
data_partition_fills_the_disk() {
  local part disk start size total
  part=$(basename "$(readlink -f /dev/disk/by-partlabel/clawos-data)"); disk=$(lsblk -ndo PKNAME "/dev/$part")
  start=$(cat "/sys/class/block/$part/start"); size=$(cat "/sys/class/block/$part/size"); total=$(cat "/sys/class/block/$disk/size")
  echo "$part: sectors $start-$((start + size)) of $total on $disk"
  [ $((total - start - size)) -lt 4096 ]
}
check "clawfs: the data partition was grown to fill the disk" data_partition_fills_the_disk

write_reboot_marker() { echo "written on boot 1" > /clawfs/.boot-test-marker && sync; }
check "clawfs: writable (marker for the reboot test)" write_reboot_marker
