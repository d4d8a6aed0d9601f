#!/usr/bin/env bash
# Seals the OS tree built by mkosi into the bootable ClawOS disk. Runs inside
# the build root (image/build.sh calls it).
#
#   GPT: 1 ESP (vfat)          EFI/BOOT/BOOTX64.EFI = the UKI
#        2 clawos-root         erofs, read-only
#        3 clawos-root-verity  dm-verity hash tree of partition 2
#        (4 clawos-data        created on first boot by systemd-repart)
#
# The UKI's command line carries the verity root hash inside a dm-mod.create=
# table, so the kernel itself builds the verified root device without an
# initrd, and whatever measures the UKI (firmware into PCR 4, systemd-stub into
# PCR 11) covers every byte of the root filesystem. Partition UUIDs are the two
# halves of the root hash, as systemd's discoverable-partitions convention does.
set -euo pipefail
TREE=/out/image/clawos-root
WORK=/out/image/seal
KERNEL=/out/kernel
EPOCH=${SOURCE_DATE_EPOCH:?}
ESP_MIB=32
rm -rf "$WORK"; mkdir -p "$WORK"; cd "$WORK"

# Deterministic identifiers from the tree's content, so equal inputs give an
# equal image.
seed=$(sha256sum "$TREE/usr/lib/clawos/build-inputs" | cut -c1-64)
uuid_of() { local h=$1; echo "${h:0:8}-${h:8:4}-${h:12:4}-${h:16:4}-${h:20:12}"; }

mkfs.erofs -zlz4hc,12 -T"$EPOCH" --ignore-mtime -U "$(uuid_of "$seed")" -L clawos-root root.erofs "$TREE" >/dev/null
veritysetup format --data-block-size=4096 --hash-block-size=4096 \
  --salt="${seed:0:64}" --uuid="$(uuid_of "${seed:32:32}")" root.erofs root.verity > verity.txt
roothash=$(awk '/^Root hash:/ { print $3 }' verity.txt)
data_bytes=$(stat -c %s root.erofs)
blocks=$((data_bytes / 4096)); sectors=$((data_bytes / 512))
root_uuid=$(uuid_of "${roothash:0:32}"); verity_uuid=$(uuid_of "${roothash:32:32}")

# hash_start_block 1: the verity superblock occupies block 0 of the hash device.
table="clawos-root,,,ro,0 $sectors verity 1 PARTUUID=$root_uuid PARTUUID=$verity_uuid 4096 4096 $blocks 1 sha256 $roothash ${seed:0:64} 1 panic_on_corruption"
# The root is read-only, so /etc/machine-id stays empty and systemd would
# invent a new one every boot (a new journal directory, a new DHCP client id);
# systemd.machine_id=firmware takes the box's SMBIOS product UUID instead.
cmdline="console=ttyS0,115200 ro root=/dev/dm-0 rootfstype=erofs dm-mod.waitfor=PARTUUID=$root_uuid,PARTUUID=$verity_uuid dm-mod.create=\"$table\" init=/usr/lib/systemd/systemd systemd.machine_id=firmware lockdown=integrity panic=30"
ukify build --linux="$KERNEL/bzImage" --uname="$(cat "$KERNEL/release")" --cmdline="$cmdline" \
  --os-release=@"$TREE/usr/lib/os-release" --stub=/usr/lib/systemd/boot/efi/linuxx64.efi.stub \
  --output=clawos.efi >/dev/null
touch -d "@$EPOCH" clawos.efi

mkfs.vfat -C -n CLAWOS-ESP -i "${seed:0:8}" esp.img $((ESP_MIB * 1024)) >/dev/null
mmd -i esp.img ::/EFI ::/EFI/BOOT
mcopy -m -i esp.img clawos.efi ::/EFI/BOOT/BOOTX64.EFI

mib() { echo $(( ($(stat -c %s "$1") + 1048575) / 1048576 )); }
root_mib=$(mib root.erofs); verity_mib=$(mib root.verity)
total_mib=$((1 + ESP_MIB + root_mib + verity_mib + 1))
rm -f clawos.raw; truncate -s "${total_mib}M" clawos.raw
sfdisk -q --no-reread --no-tell-kernel clawos.raw <<SFDISK
label: gpt
label-id: $(uuid_of "${seed:16:32}")
start=1MiB, size=${ESP_MIB}MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, uuid=$(uuid_of "${seed:8:32}"), name="esp"
size=${root_mib}MiB, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, uuid=$root_uuid, name="clawos-root"
size=${verity_mib}MiB, type=2C7357ED-EBD2-46D9-AEC9-CB0C8C0EFC4B, uuid=$verity_uuid, name="clawos-root-verity"
SFDISK
dd if=esp.img of=clawos.raw bs=1M seek=1 conv=notrunc status=none
dd if=root.erofs of=clawos.raw bs=1M seek=$((1 + ESP_MIB)) conv=notrunc status=none
dd if=root.verity of=clawos.raw bs=1M seek=$((1 + ESP_MIB + root_mib)) conv=notrunc status=none

mv clawos.raw clawos.efi /out/
{
  echo "roothash=$roothash"
  echo "root_partuuid=$root_uuid"
  echo "verity_partuuid=$verity_uuid"
  echo "root_offset_mib=$((1 + ESP_MIB))"
  echo "root_bytes=$data_bytes"
  printf 'cmdline=%q\n' "$cmdline"
} > /out/image/sealed.env
echo "image: /out/clawos.raw ${total_mib} MiB (root ${root_mib} MiB erofs, verity ${verity_mib} MiB, ESP ${ESP_MIB} MiB), roothash $roothash"
