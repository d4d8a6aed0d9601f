# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# What boot 1 wrote to the data partition is still there after a reboot.
check "clawfs: the marker written before the reboot survived" \
  vm_ssh 'test "$(cat /clawfs/.boot-test-marker)" = "written on boot 1"'
# Without --merge: both boots must be in this machine id's journal, which
# also proves the machine id is stable across reboots.
check "journal: boot 1 is still in the persistent journal" \
  vm_ssh 'test "$(journalctl --list-boots -o json | jq length)" -ge 2'
