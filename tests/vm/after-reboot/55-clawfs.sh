# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# Boot 2, same disk and TPM: the TPM opens /clawfs by itself, the first-boot
# unit leaves the formatted partition alone, and an operator who lost the
# recovery key gets a new one that replaces it (specs/clawfs/encryption.md).
check "clawfs: after the reboot the TPM opened /clawfs with no prompt" bash -c "
  ! grep -aq 'Please enter .* for disk' '$VM_SERIAL'"
check "clawfs: the first-boot format leaves the encrypted partition alone" vm_ssh '
  journalctl -b -u clawos-clawfs-format -o cat | grep -q "is already the encrypted /clawfs" &&
    test "$(cat /clawfs/.boot-test-marker)" = "written on boot 1"'
clawfs_new_recovery_key() {
  local old=$VMS/clawfs-recovery-key.old
  # Once enrolled the new key is the only one: boot 3 types it.
  (umask 077; vm_ssh 'clawfs-keys recovery-key' > "$VMS/clawfs-recovery-key.new") || return 1
  mv "$VMS/clawfs-recovery-key" "$old"; mv "$VMS/clawfs-recovery-key.new" "$VMS/clawfs-recovery-key"
  grep -qxE '([cbdefghijklnrtuv]{8}-){7}[cbdefghijklnrtuv]{8}' "$VMS/clawfs-recovery-key" || return 1
  ! cmp -s "$old" "$VMS/clawfs-recovery-key" || { echo "the same key again"; return 1; }
  vm_ssh 'install -d -m 0700 /run/clawfs-test && cat > /run/clawfs-test/old' < "$old" || return 1
  vm_ssh 'cat > /run/clawfs-test/new' < "$VMS/clawfs-recovery-key" || return 1
  rm -f "$old"
  vm_ssh '
    dev=/dev/disk/by-partlabel/clawos-data
    rc=0
    tr -d "\n" < /run/clawfs-test/new | cryptsetup open --test-passphrase --disable-external-tokens --key-file=- $dev || { echo "the new key does not open it"; rc=1; }
    if tr -d "\n" < /run/clawfs-test/old | cryptsetup open --test-passphrase --disable-external-tokens --key-file=- $dev 2>/dev/null; then echo "the old key still opens it"; rc=1; fi
    test "$(cryptsetup luksDump --dump-json-metadata $dev | jq "[.tokens[] | select(.type == \"systemd-recovery\")] | length")" = 1 || { echo "not one recovery token"; rc=1; }
    rm -rf /run/clawfs-test
    exit $rc'
}
check "clawfs: clawfs-keys recovery-key after a reboot enrolls a new recovery key and the old one stops opening /clawfs" \
  clawfs_new_recovery_key
