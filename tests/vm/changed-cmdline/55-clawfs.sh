# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# Boot 3, after the recovery key opened /clawfs at the console (10-clawfs-console.sh).
CLAWFS_DEV=/dev/disk/by-partlabel/clawos-data
check "changed cmdline: /clawfs is open, its data from boot 1 intact" vm_ssh '
  test "$(cat /clawfs/.boot-test-marker)" = "written on boot 1"'
check "changed cmdline: systemd-cryptsetup says the TPM did not unlock /clawfs" vm_ssh '
  journalctl -b -u systemd-cryptsetup@clawfs -o cat | grep -E "Failed to unseal secret using TPM2|falling back to traditional unlocking"'
check "changed cmdline: the TPM2 keyslot alone does not open /clawfs" vm_ssh "
  ! cryptsetup open --test-passphrase --token-only --token-type systemd-tpm2 $CLAWFS_DEV 2>/dev/null"
# The canary is intact before the offline edit (run.sh flips a byte of it
# after this boot), so that boot 4's read error is the edit's doing.
clawfs_canary_intact() {
  local sum
  sum=$(vm_ssh 'sha256sum < /clawfs/.clawfs-tamper-canary | cut -d" " -f1') || return 1
  [[ $sum == "$(cat "$VMS/clawfs-canary.sha256")" ]] || { echo "canary sha256 $sum"; return 1; }
}
check "changed cmdline: the tamper canary reads back intact" clawfs_canary_intact
clawfs_reseal() {
  vm_ssh 'clawfs-keys reseal' < "$VMS/clawfs-recovery-key" || return 1
  vm_ssh "cryptsetup open --test-passphrase --token-only --token-type systemd-tpm2 $CLAWFS_DEV &&
    cryptsetup luksDump --dump-json-metadata $CLAWFS_DEV |
      jq -e '[.tokens[] | .type] | sort == [\"systemd-recovery\", \"systemd-tpm2\"]'"
}
check "changed cmdline: clawfs-keys reseal with the recovery key seals /clawfs to this boot, one TPM2 keyslot" clawfs_reseal
# The disk is 2 GiB larger than the one boot 1 formatted /clawfs on
# (run.sh): repart leaves the data partition as it was, and the journal says
# what lies unused after it (specs/clawfs/encryption.md, "A larger disk").
clawfs_partition_kept() {
  local out
  out=$(vm_ssh '
    part=$(basename "$(readlink -f /dev/disk/by-partlabel/clawos-data)")
    disk=$(basename "$(dirname "$(readlink -f "/sys/class/block/$part")")")
    echo "unused $(( ($(cat /sys/block/$disk/size) - $(cat /sys/class/block/$part/start) - $(cat /sys/class/block/$part/size)) * 512 / 1048576 ))"
    echo "partition $(( $(cat /sys/class/block/$part/size) * 512 ))"
    echo "mapping $(blockdev --getsize64 /dev/mapper/clawfs)"
    grep "^SizeMaxBytes=" /run/repart.d/50-clawos-data.conf
    journalctl -b -u systemd-repart -o cat | grep "after the data partition that /clawfs does not use"') || { echo "$out"; return 1; }
  echo "$out"
  (( $(awk '/^unused/ {print $2}' <<<"$out") >= 2000 )) || { echo "the partition grew into the new space"; return 1; }
  grep -qx "SizeMaxBytes=$(awk '/^partition/ {print $2}' <<<"$out")" <<<"$out" || { echo "repart's cap is not the partition's size"; return 1; }
  awk '/^mapping/ {print $2}' <<<"$out" > "$VMS/clawfs-mapping-size"
}
check "clawfs: on a disk made 2 GiB larger, repart leaves the data partition as it was, and the journal says how much lies unused after it" \
  clawfs_partition_kept
