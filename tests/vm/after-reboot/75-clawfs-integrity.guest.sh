# shellcheck shell=bash
# After the chaos's kills under writes, as after boot 1
# (checks/98-clawfs-integrity.guest.sh).
check "clawfs: after the chaos, no sector whose tag was never written was read (no integrity error in the kernel log)" \
  clawfs_no_integrity_error
