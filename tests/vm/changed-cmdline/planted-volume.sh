# shellcheck shell=bash disable=SC2016  # the guest's commands are single-quoted: their $ expands in the guest
# Boot 4, then boot 6: a data volume made elsewhere, by someone holding the
# disk and the box's TPM, sealed to the PCRs of the box's own boot, must not
# be opened by the TPM (specs/clawfs/encryption.md, "The volume's anchor").
# Boot 4 makes one, the size of the data partition, exactly as clawfs-keys
# formats (label included), with a TPM2 keyslot sealed to PCRs 4+12 of this
# boot, and shows that the TPM opens it in this boot without a key. The host
# writes it over the data partition while the VM is off, and boot 6 (the
# same UKI, so the same PCRs) must stop at the console, saying why and
# asking for its recovery key. Sourced by run.sh with boot 4 up; ends with
# the VM stopped. The disk is a copy (boots 3, 4 and 6), removed after.

# In the guest: the volume in /clawfs/planted.img; the TPM opens it now.
clawfs_plant_volume() {
  vm_ssh '
    set -e
    dev=/dev/disk/by-partlabel/clawos-data img=/clawfs/planted.img key=/run/clawos-test/planted-key
    install -d -m 0700 /run/clawos-test
    rm -f "$img"; truncate -s "$(blockdev --getsize64 "$dev")" "$img"
    loop=$(losetup --show -f "$img")
    trap "cryptsetup close clawfs-planted 2>/dev/null; losetup -d $loop; rm -f $key" EXIT
    head -c 64 /dev/urandom > "$key"
    cryptsetup luksFormat --batch-mode --type luks2 --label clawfs \
      --cipher aes-xts-plain64 --key-size 512 --integrity hmac-sha256 --integrity-no-wipe --sector-size 4096 \
      --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file "$key" "$loop"
    systemd-cryptenroll --unlock-key-file="$key" --tpm2-device=auto --tpm2-pcrs=4+12 "$loop" 2>&1
    # No key given and no prompt allowed: only the TPM can open it.
    /usr/lib/systemd/systemd-cryptsetup attach clawfs-planted "$loop" - tpm2-device=auto,headless=true 2>&1
    cryptsetup status clawfs-planted | head -n 1'
}

# On the host, the VM off: the volume written over the data partition of
# the copy's disk (a raw image again, which the next vm_start backs a new
# copy-on-write disk with); nothing of the old volume is left in it.
clawfs_plant_on_disk() {
  local raw="$CHANGED/planted.raw" img="$CHANGED/planted.img" start size sector
  vm_ssh 'tar -S -czf - -C /clawfs planted.img && rm /clawfs/planted.img' | tar -xzf - -C "$CHANGED" || return 1
  vm_poweroff
  qemu-img convert -O raw "$CHANGED/disk.qcow2" "$raw" || return 1
  read -r sector start size < <(sfdisk -J "$raw" |
    jq -r '.partitiontable as $t | $t.partitions[] | select(.name == "clawos-data") | "\($t.sectorsize) \(.start) \(.size)"')
  [[ -n $size ]] || { echo "no clawos-data partition on $raw"; return 1; }
  (( $(stat -c %s "$img") == size * sector )) || { echo "the volume is not the partition's size"; return 1; }
  fallocate --punch-hole --offset $((start * sector)) --length $((size * sector)) "$raw"
  dd if="$img" of="$raw" bs=1M seek=$((start * sector)) oflag=seek_bytes conv=sparse,notrunc status=none
  rm -f "$img" "$CHANGED/disk.qcow2"
  mv "$raw" "$CHANGED/clawos.raw"
  echo "written over clawos-data ($size sectors of $sector bytes from sector $start)"
}

# Boot 6: the console says the TPM's anchor does not name this volume and
# asks for its recovery key; the TPM did not open it (no Cryptography Setup
# finished, no SSH) and nothing else asks.
clawfs_planted_stays_closed() {
  local console
  vm_wait_console "$CLAWFS_PROMPT" 1 "$BOOT_TIMEOUT" || return 1
  sleep 20
  console=$(sed 's/\x1b\[[0-9;]*[a-zA-Z]//g; s/\r/\n/g' "$VM_SERIAL")
  grep -a "TPM does not name as its own" <<<"$console" || { echo "the console did not say why it asks"; return 1; }
  grep -aE "$CLAWFS_PROMPT" <<<"$console" | tail -n 1
  if grep -aE "Finished .*Cryptography Setup for clawfs" <<<"$console"; then echo "the TPM opened the volume"; return 1; fi
  if VM_SSH_TIMEOUT=15 vm_ssh true 2>/dev/null; then echo "SSH answers: the volume was opened"; return 1; fi
  (( $(vm_console_count "$CLAWFS_PROMPT") == 1 )) || { echo "asked more than once"; return 1; }
}

PLANT_FAILED=$FAILED
check "clawfs: a volume made elsewhere and sealed to this boot's PCRs 4+12 is opened by the TPM in this boot" \
  clawfs_plant_volume
(( FAILED > PLANT_FAILED )) ||
  check "clawfs: that volume is written over the data partition while the box is off" clawfs_plant_on_disk
if (( FAILED == PLANT_FAILED )); then
  log "boot 6: the changed UKI again, its data partition holding the volume made elsewhere"
  vm_start "$CHANGED/clawos.raw" "$CHANGED" --disk-size "$CHANGED_DISK_SIZE" --console-socket "$CHANGED/console.sock"
  check "clawfs: a volume made elsewhere and sealed to the box's PCRs stays closed: the console says the TPM's anchor does not name it and asks for its recovery key" \
    clawfs_planted_stays_closed
  vm_kill; vm_wait_exit 30 || true
else
  vm_poweroff
fi
