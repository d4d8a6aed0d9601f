# What boot 1 wrote to the data partition is still there after a reboot.
check "clawfs: the marker written before the reboot survived" \
  vm_ssh 'test "$(cat /clawfs/.boot-test-marker)" = "written on boot 1"'
check "journal: boot 1 is still in the persistent journal" \
  vm_ssh 'test "$(journalctl --merge --list-boots --no-legend | wc -l)" -ge 2'
