# shellcheck shell=bash
# shellcheck disable=SC2154  # roothash: from out/image/sealed.env, which run.sh sources
# The root filesystem is read-only erofs on a dm-verity device.
check "root: / is erofs mounted read-only from dm-0" \
  vm_ssh 'findmnt -no SOURCE,FSTYPE,OPTIONS / | grep -E "^/dev/(dm-0|mapper/clawos-root) erofs ro"'
check "root: dm-0 is a verity target carrying the build's root hash" \
  vm_ssh "dmsetup table clawos-root | grep -q ' verity .* $roothash '"
check "root: writing to / fails" vm_ssh '! touch /clawos-write-test 2>/dev/null'
