# shellcheck shell=bash
# The offline edit of /clawfs (specs/clawfs/encryption.md, "Integrity"):
# where a file's first block lies on the VM's disk, and one byte of it
# flipped in the disk while the VM is off. Sourced by tests/vm/run.sh.

# clawfs_layout_facts FILE (runs in the guest): key=value facts about how
# the first block of FILE reaches the disk, for tests/vm/clawfs-sector.py.
clawfs_layout_facts() {
  set -e
  local part src bs block crypt integrity
  part=$(readlink -f /dev/disk/by-partlabel/clawos-data)
  src=$(findmnt -no SOURCE /clawfs)
  bs=$(stat -f -c %S /clawfs)
  block=$(filefrag -e -b"$bs" "$1" | awk '$1 == "0:" { sub(/\.\.$/, "", $4); print $4; exit }')
  [ -n "$block" ]
  echo "partition_start_sector=$(cat "/sys/class/block/${part#/dev/}/start") block_size=$bs block=$block"
  if [ "$(readlink -f "$src")" = "$part" ]; then echo "layout=plain"; return 0; fi
  # dm-crypt: start length crypt cipher key iv_offset device offset ...
  read -r -a crypt <<<"$(dmsetup table "${src#/dev/mapper/}")"
  [ "${crypt[2]}" = crypt ]
  # dm-integrity below it: start length integrity device offset tag_size mode ...
  read -r -a integrity <<<"$(dmsetup table -j "${crypt[6]%:*}" -m "${crypt[6]#*:}")"
  [ "${integrity[2]}" = integrity ]
  [ "${integrity[3]}" = "$(cat "/sys/class/block/${part#/dev/}/dev")" ]
  echo "layout=integrity crypt_offset=${crypt[7]} integrity_start=${integrity[4]}"
  echo "integrity_superblock=$(dd if="$part" bs=512 skip="${integrity[4]}" count=1 status=none | od -An -v -tx1 | tr -d ' \n')"
}

# clawfs_locate FILE: byte offset on the VM's disk of FILE's first block
# (the VM running).
clawfs_locate() {
  local facts
  facts=$(vm_ssh "$(declare -f clawfs_layout_facts); clawfs_layout_facts '$1'") || { echo "$facts"; return 1; }
  python3 "$REPO/tests/vm/clawfs-sector.py" <<<"$facts"
}

# clawfs_flip_byte QCOW2 OFFSET: inverts the byte at OFFSET of a VM's disk
# (the VM off), as someone with the disk in their hands would.
clawfs_flip_byte() {
  local disk=$1 offset=$2 byte
  byte=$(qemu-io -f qcow2 -c "read -v $offset 1" "$disk" | awk 'NR == 1 { print $2 }')
  [[ $byte =~ ^[0-9a-f]{2}$ ]] || { echo "cannot read byte $offset of $disk"; return 1; }
  qemu-io -f qcow2 -c "write -P $(( 0x$byte ^ 0xff )) $offset 1" "$disk" >/dev/null
  echo "flipped byte $offset of $disk: 0x$byte -> $(printf '0x%02x' $(( 0x$byte ^ 0xff )))"
}
