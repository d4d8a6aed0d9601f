# shellcheck shell=bash
# shellcheck disable=SC2154  # roothash: the build's, from the host (guest/env.sh)
# The root filesystem is read-only erofs on a dm-verity device.

root_is_erofs_read_only() {
  findmnt -no SOURCE,FSTYPE,OPTIONS / | grep -E "^/dev/(dm-0|mapper/clawos-root) erofs ro"
}
check "root: / is erofs mounted read-only from dm-0" root_is_erofs_read_only

root_is_verity() {
  test -n "$roothash" && dmsetup table clawos-root | grep -q " verity .* $roothash "
}
check "root: dm-0 is a verity target carrying the build's root hash" root_is_verity

root_refuses_writes() {
  ! touch /clawos-write-test 2>/dev/null
}
check "root: writing to / fails" root_refuses_writes

# The console banner's SSH command is one that works from where the
# operator is (scripts/stage-rootfs.sh): this test image trusts out/ssh's
# key, and QEMU's user network is reached through make run's port 2222;
# no bare `ssh root@<guest address>`, which the host cannot reach.
banner_gives_a_working_ssh_command() {
  cat /etc/issue /etc/issue.d/*.issue 2>/dev/null
  grep -qx '  under make run, from that machine: ssh -i out/ssh/id_ed25519 -p 2222 root@127.0.0.1' \
    /etc/issue.d/40-clawos-ssh-command.issue && ! grep -q 'ssh root@' /etc/issue
}
check "root: the console banner gives the SSH command that reaches this test image from the host" banner_gives_a_working_ssh_command
