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
