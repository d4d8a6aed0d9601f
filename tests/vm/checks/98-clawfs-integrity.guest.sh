# shellcheck shell=bash
# The first boot's format wrote no integrity tags (specs/clawfs/encryption.md,
# "First boot: no wipe"): a sector's tag is written with its first data, and
# reading a sector never written is an integrity error. After all of boot
# 1's writes nothing has read such a sector: not udev, not mkfs, not ext4.
check "clawfs: after boot 1's writes, no sector whose tag was never written was read (no integrity error in the kernel log)" \
  clawfs_no_integrity_error
