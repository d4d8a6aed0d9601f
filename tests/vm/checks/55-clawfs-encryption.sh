# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# The data partition (/clawfs) is encrypted and authenticated (specs/clawfs/encryption.md):
# LUKS2, AES-XTS over dm-integrity with an HMAC-SHA256 tag per sector, its
# key in a TPM2 keyslot sealed to PCRs 4,12 and a recovery key the operator
# takes once. The changed boot chain (boot 3 in run.sh) must stop at the
# console until the recovery key is typed, and a byte of a file flipped on
# the disk while the box is off (between boots 3 and 4) must fail to read.
CLAWFS_DEV=/dev/disk/by-partlabel/clawos-data

check "clawfs: /clawfs is ext4 on dm-crypt (LUKS2, AES-XTS) over dm-integrity (HMAC-SHA256 per 4 KiB sector)" vm_ssh '
  set -e
  findmnt -no SOURCE,FSTYPE /clawfs | grep -qx "/dev/mapper/clawfs ext4"
  status=$(cryptsetup status clawfs); echo "$status"
  echo "$status" | grep -qE "^ +type: +LUKS2$"
  echo "$status" | grep -qE "^ +cipher: +aes-xts-plain64$"
  echo "$status" | grep -qE "^ +integrity: +hmac\(sha256\)$"
  echo "$status" | grep -qE "^ +sector size: +4096$"
  # The device below dm-crypt is a dm-integrity target on the data partition.
  dmsetup table clawfs | grep -q " crypt capi:authenc(hmac(sha256),xts(aes))-plain64 "
  dmsetup table clawfs_dif | grep -q " integrity "'

check "clawfs: the LUKS2 header has a TPM2 keyslot sealed to PCRs 4,12 (sha256), a recovery key, and no other keyslot" vm_ssh "
  cryptsetup luksDump --dump-json-metadata $CLAWFS_DEV > /run/clawfs-luks.json || exit 1
  jq -e '
    (.segments[\"0\"].integrity.type == \"hmac(sha256)\") and
    ([.tokens[] | .type] | sort == [\"systemd-recovery\", \"systemd-tpm2\"]) and
    ([.tokens[] | select(.type == \"systemd-tpm2\") | .\"tpm2-pcrs\", .\"tpm2-pcr-bank\"] == [[4, 12], \"sha256\"]) and
    ([.keyslots | keys[]] | sort) == ([.tokens[] | .keyslots[]] | sort) and (.keyslots | length == 2)' /run/clawfs-luks.json ||
    { jq '{keyslots: (.keyslots | keys), tokens, segments}' /run/clawfs-luks.json; exit 1; }"

# Nobody typed anything on boot 1's console: the TPM opened it.
clawfs_opened_by_tpm() {
  if grep -aq 'Please enter .* for disk' "$VM_SERIAL"; then echo "the console asked for a key"; return 1; fi
  vm_ssh "cryptsetup open --test-passphrase --token-only --token-type systemd-tpm2 $CLAWFS_DEV"
}
check "clawfs: the TPM opened /clawfs at boot with no prompt, and its keyslot alone opens it" clawfs_opened_by_tpm

check "clawfs: formatted at first boot by clawos-clawfs-format.service" vm_ssh '
  systemctl is-active -q clawos-clawfs-format.service &&
  journalctl -b -u clawos-clawfs-format -o cat | grep -E "^clawfs-keys: /clawfs encrypted in [0-9]+ s"'

# specs/clawfs/encryption.md, "The volume's anchor": the TPM names this
# volume, and nothing without the box's owner authorisation (kept root-only
# on /clawfs) can remove or rewrite that, nor clear the TPM (the lockout's).
check "clawfs: the TPM's anchor names this volume, the TPM's owner and lockout authorisations are the box's, and the anchor cannot be removed without them" vm_ssh '
  set -e
  status=$(clawfs-keys anchor); echo "$status"
  volume=$(echo "$status" | sed -n "s/^volume //p"); anchor=$(echo "$status" | sed -n "s/^anchor //p")
  [ ${#volume} -eq 64 ] && [ "$volume" = "$anchor" ]
  [ "$(tpm2_getcap properties-variable | grep -cE "^ +(owner|lockout)AuthSet: +1$")" -eq 2 ]
  tpm2_getcap handles-persistent | grep -ix -- "- 0x81000001"
  [ "$(stat -c "%a %U" /clawfs/var/lib/clawfs-keys /clawfs/var/lib/clawfs-keys/owner.auth /clawfs/var/lib/clawfs-keys/lockout.auth | tr "\n" " ")" = "700 root 400 root 400 root " ]
  if tpm2_nvundefine 0x0100c1a5 -C o 2>/dev/null; then echo "the anchor was removed with an empty owner authorisation"; exit 1; fi
  if head -c 32 /dev/zero | tpm2_nvwrite 0x0100c1a5 -C 0x0100c1a5 -i - 2>/dev/null; then echo "the anchor was rewritten with its own (empty) authorisation"; exit 1; fi
  journalctl -b -u clawos-clawfs-anchor -o cat | grep -q "the TPM.s anchor names this volume: the TPM opens it"'

# The operator takes the recovery key once, as with `clawctl vault init`,
# and keeps it off the box (here: on the host, for boot 3's console).
clawfs_take_recovery_key() {
  vm_ssh 'clawfs-keys recovery-key' > "$VMS/clawfs-recovery-key" || return 1
  chmod 0600 "$VMS/clawfs-recovery-key"
  cat "$VMS/clawfs-recovery-key"
  grep -qxE '([cbdefghijklnrtuv]{8}-){7}[cbdefghijklnrtuv]{8}' "$VMS/clawfs-recovery-key" &&
    vm_ssh 'test ! -e /run/clawos-clawfs/recovery-key'
}
check "clawfs: the first-boot recovery key is shown once, then gone from the box" clawfs_take_recovery_key

# --disable-external-tokens: cryptsetup open tries the tokens first, and the
# TPM2 one (systemd's plugin) would open the volume whatever key is given.
clawfs_recovery_key_opens() {
  vm_ssh 'install -d -m 0700 /run/clawfs-test && cat > /run/clawfs-test/recovery-key' < "$VMS/clawfs-recovery-key" || return 1
  vm_ssh "
    tr -d '\n' < /run/clawfs-test/recovery-key | cryptsetup open --test-passphrase --disable-external-tokens --key-file=- $CLAWFS_DEV || exit 1
    od -An -N32 -tx1 /dev/urandom | tr -d ' \n' | cryptsetup open --test-passphrase --disable-external-tokens --key-file=- $CLAWFS_DEV 2>/dev/null && exit 1
    exit 0"
}
check "clawfs: the recovery key opens the volume and a wrong key does not" clawfs_recovery_key_opens

check "clawfs: the recovery key is not in plaintext on /clawfs or in the journal" vm_ssh '
  sync
  key=$(cat /run/clawfs-test/recovery-key 2>/dev/null)
  [ -n "$key" ] || { echo "no recovery key to look for"; exit 1; }
  rc=0
  for form in "$key" "$(printf %s "$key" | tr -d -)"; do
    if grep -rlaF -e "$form" /clawfs; then echo "found on /clawfs"; rc=1; fi
    if journalctl -b -o export | grep -qaF -e "$form"; then echo "found in the journal"; rc=1; fi
  done
  rm -f /run/clawfs-test/recovery-key
  exit $rc'

# The tamper canary: random bytes in a file of their own, whose first block
# tests/vm/run.sh flips on the disk between boots 3 and 4. Its SHA-256 and
# disk offset are kept on the host.
clawfs_write_canary() {
  vm_ssh 'head -c 1048576 /dev/urandom > /clawfs/.clawfs-tamper-canary && sync &&
          sha256sum < /clawfs/.clawfs-tamper-canary | cut -d" " -f1' > "$VMS/clawfs-canary.sha256" || return 1
  clawfs_locate /clawfs/.clawfs-tamper-canary > "$VMS/clawfs-canary.offset" || { cat "$VMS/clawfs-canary.offset"; return 1; }
  echo "canary sha256 $(cat "$VMS/clawfs-canary.sha256"), first block at byte $(cat "$VMS/clawfs-canary.offset") of the disk"
  [[ $(cat "$VMS/clawfs-canary.offset") =~ ^[0-9]+$ ]]
}
check "clawfs: a tamper canary is written and its first block located on the disk" clawfs_write_canary
