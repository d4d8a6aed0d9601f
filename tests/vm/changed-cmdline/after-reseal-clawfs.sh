# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# Boot 4: the changed UKI again, after `clawfs-keys reseal` on boot 3, and
# with one byte of the tamper canary's first block flipped on the disk while
# the box was off (run.sh).
check "changed cmdline, resealed: the TPM opened /clawfs with no prompt" bash -c "
  ! grep -aq 'Please enter .* for disk' '$VM_SERIAL'"
check "changed cmdline, resealed: /clawfs's other data reads back" vm_ssh '
  test "$(cat /clawfs/.boot-test-marker)" = "written on boot 1"'
# dm-crypt checks each sector's HMAC against its tag in dm-integrity: the
# edited sector is refused (EIO to the reader, "INTEGRITY AEAD ERROR" in the
# kernel log), never returned as other bytes.
clawfs_edit_detected() {
  local out
  out=$(vm_ssh '
    echo 3 > /proc/sys/vm/drop_caches
    if sum=$(sha256sum < /clawfs/.clawfs-tamper-canary); then echo "read: ${sum%% *}"; else echo "read failed"; fi
    dmesg | grep -E "INTEGRITY AEAD ERROR|integrity.*[Cc]hecksum failed" | tail -n 3') || true
  echo "$out"
  if grep -q "^read: $(cat "$VMS/clawfs-canary.sha256")$" <<<"$out"; then
    echo "the canary read back intact: the flipped byte missed it"; return 1
  fi
  grep -q "^read: " <<<"$out" && { echo "the edited canary was read without an error"; return 1; }
  grep -q "^read failed$" <<<"$out" && grep -qE "INTEGRITY AEAD ERROR|[Cc]hecksum failed" <<<"$out"
}
check "clawfs: the file edited offline does not read (integrity error), it is never returned changed" clawfs_edit_detected
# The second boot on the larger disk (boot 3 was the first): when repart
# grew the partition, this boot's volume took the new size and the boot
# waited on /dev/mapper/clawfs (specs/clawfs/encryption.md, "A larger disk").
clawfs_size_kept() {
  local size
  [[ -s $VMS/clawfs-mapping-size ]] || { echo "no size from boot 3"; return 1; }
  size=$(vm_ssh blockdev --getsize64 /dev/mapper/clawfs) || return 1
  [[ $size == "$(cat "$VMS/clawfs-mapping-size")" ]] || { echo "the mapping is $size bytes, $(cat "$VMS/clawfs-mapping-size") at boot 3"; return 1; }
}
check "clawfs: the second boot on the larger disk opens /clawfs at the size it was formatted with" clawfs_size_kept
