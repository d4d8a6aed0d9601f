# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# /clawfs is the writable data partition and holds /var.
check "clawfs: /clawfs is a read-write ext4 data partition" \
  vm_ssh 'findmnt -no FSTYPE,OPTIONS /clawfs | grep -E "^ext4 rw"'
check "clawfs: /var is bound from /clawfs/var" vm_ssh 'test "$(stat -c %d:%i /var)" = "$(stat -c %d:%i /clawfs/var)"'
# It comes last (rootfs-overlay/usr/lib/repart.d, after slot B) and takes
# the rest of the disk: it ends within 2 MiB of the disk's end (the backup
# GPT and alignment).
check "clawfs: the data partition was grown to fill the disk" vm_ssh '
  part=$(basename "$(readlink -f /dev/disk/by-partlabel/clawos-data)"); disk=$(lsblk -ndo PKNAME "/dev/$part")
  start=$(cat /sys/class/block/$part/start); size=$(cat /sys/class/block/$part/size); total=$(cat /sys/class/block/$disk/size)
  echo "$part: sectors $start-$((start + size)) of $total on $disk"
  [ $((total - start - size)) -lt 4096 ]'
check "clawfs: writable (marker for the reboot test)" \
  vm_ssh 'echo "written on boot 1" > /clawfs/.boot-test-marker && sync'
