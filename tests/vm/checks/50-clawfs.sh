# /clawfs is the writable data partition and holds /var.
check "clawfs: /clawfs is a read-write ext4 data partition" \
  vm_ssh 'findmnt -no FSTYPE,OPTIONS /clawfs | grep -E "^ext4 rw"'
check "clawfs: /var is bound from /clawfs/var" vm_ssh 'test "$(stat -c %d:%i /var)" = "$(stat -c %d:%i /clawfs/var)"'
check "clawfs: the data partition was grown to fill the disk" \
  vm_ssh 'test "$(df --output=size -BM /clawfs | tail -1 | tr -dc 0-9)" -gt 3000'
check "clawfs: writable (marker for the reboot test)" \
  vm_ssh 'echo "written on boot 1" > /clawfs/.boot-test-marker && sync'
