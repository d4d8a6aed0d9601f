# shellcheck shell=bash
# What boot 1 wrote to the data partition is still there after a reboot.

reboot_marker_survived() { test "$(cat /clawfs/.boot-test-marker)" = "written on boot 1"; }
check "clawfs: the marker written before the reboot survived" reboot_marker_survived

# Without --merge: both boots must be in this machine id's journal, which
# also proves the machine id is stable across reboots.
journal_keeps_boot_1() { test "$(journalctl --list-boots -o json | jq length)" -ge 2; }
check "journal: boot 1 is still in the persistent journal" journal_keeps_boot_1
