#!/usr/bin/env bash
# Seals an OS tree built by mkosi into a bootable ClawOS disk and the files
# of an update of the same version. Runs inside the build root
# (image/build.sh, scripts/update-artifacts.sh call it).
#
#   seal.sh [TREE] [DEST]     (defaults /out/image/clawos-root, /out/image)
#
# The layout is image/repart.d (systemd-repart):
#   1 esp                  systemd-boot, EFI/Linux/clawos_<version>+3.efi
#   2 clawos_<version>     root slot A: erofs, read-only
#   3 clawos_<version>_verity  its dm-verity hash tree
#   (4-5 slot B and 6 clawos-data: made on the box at first boot,
#    rootfs-overlay/usr/lib/repart.d)
#
# The UKI's command line carries the verity root hash inside a dm-mod.create=
# table, so the kernel itself builds the verified root device without an
# initrd, and whatever measures the UKI (firmware into PCR 4, systemd-stub into
# PCR 11) covers every byte of the root filesystem. Since the UKI needs the
# root hash, repart runs twice: the root and its hash tree first, the ESP
# with the UKI after.
#
# DEST gets clawos.raw (the disk), clawos.efi (the UKI), and
# clawos.root.raw / clawos.root-verity.raw (the two partitions alone, what an
# update writes into the other slot); DEST/sealed.env describes them.
set -euo pipefail
TREE=${1:-/out/image/clawos-root}
DEST=${2:-/out/image}
# Fixed: image/repart.d's CopyBlocks=/CopyFiles= name these paths.
WORK=/out/image/seal
KERNEL=/out/kernel
EPOCH=${SOURCE_DATE_EPOCH:?}
rm -rf "$WORK"; mkdir -p "$WORK" "$DEST"; cd "$WORK"

# shellcheck source=/dev/null  # the OS tree's os-release
version=$(. "$TREE/usr/lib/os-release" && echo "${IMAGE_VERSION:?}")
# Deterministic identifiers from the tree's content, so equal inputs give an
# equal image.
seed=$(sha256sum "$TREE/usr/lib/clawos/build-inputs" "$TREE/usr/lib/os-release" | sha256sum | cut -c1-64)
uuid_of() { local h=$1; echo "${h:0:8}-${h:8:4}-${h:12:4}-${h:16:4}-${h:20:12}"; }

mkfs.erofs -zlz4hc,12 -T"$EPOCH" --ignore-mtime -U "$(uuid_of "$seed")" -L clawos-root root.erofs "$TREE" >/dev/null

# --offline: no loop devices; the ESP is filled with mtools.
repart() {
  systemd-repart --offline=yes --seed="$(uuid_of "${seed:32:32}")" --definitions=/src/image/repart.d \
    --dry-run=no --json=short "$@" disk.raw
}
repart --empty=create --size=auto --defer-partitions=esp > layout.json
part() { jq -r --arg t "$1" ".[] | select(.type == \$t) | .$2" layout.json; }
roothash=$(part root-x86-64 roothash)
root_uuid=$(part root-x86-64 uuid); verity_uuid=$(part root-x86-64-verity uuid)
root_offset=$(part root-x86-64 offset); verity_offset=$(part root-x86-64-verity offset)
# The salt and block count from the hash tree's superblock (repart derives
# the salt from the seed and hashes the whole partition).
dd if=disk.raw of=superblock bs=4096 skip=$((verity_offset / 4096)) count=1 status=none
salt=$(veritysetup dump superblock | awk '/^Salt:/ { print $2 }')
blocks=$(veritysetup dump superblock | awk '/^Data blocks:/ { print $3 }')
sectors=$((blocks * 8))

# hash_start_block 1: the verity superblock occupies block 0 of the hash device.
table="clawos-root,,,ro,0 $sectors verity 1 PARTUUID=$root_uuid PARTUUID=$verity_uuid 4096 4096 $blocks 1 sha256 $roothash $salt 1 panic_on_corruption"
# The root is read-only, so /etc/machine-id stays empty and systemd would
# invent a new one every boot (a new journal directory, a new DHCP client id);
# systemd.machine_id=firmware takes the box's SMBIOS product UUID instead.
# systemd.gpt_auto=0: the root comes from the table above and the ESP is
# mounted at /efi by /etc/fstab; systemd-gpt-auto-generator would mount it
# at /boot as well. systemd.ssh_auto=0: sshd is set up explicitly
# (ssh.service), and systemd-ssh-generator's AF_VSOCK probe fails on the
# console of a box without vsock.
# loglevel=4: the console shows warnings and worse; the kernel's notices
# (among them the audit records of every BPF program load) go to the
# journal only.
cmdline="console=ttyS0,115200 loglevel=4 systemd.gpt_auto=0 systemd.ssh_auto=0 ro root=/dev/dm-0 rootfstype=erofs dm-mod.waitfor=PARTUUID=$root_uuid,PARTUUID=$verity_uuid dm-mod.create=\"$table\" init=/usr/lib/systemd/systemd systemd.machine_id=firmware lockdown=integrity panic=30"
ukify build --linux="$KERNEL/bzImage" --uname="$(cat "$KERNEL/release")" --cmdline="$cmdline" \
  --os-release=@"$TREE/usr/lib/os-release" --stub=/usr/lib/systemd/boot/efi/linuxx64.efi.stub \
  --output=clawos.efi >/dev/null

# systemd-boot boots the newest version whose tries are not used up; "+3":
# three tries before it counts as bad (specs/update/README.md).
mkdir -p esp/EFI/BOOT esp/EFI/systemd esp/EFI/Linux esp/loader
install -m 0644 /usr/lib/systemd/boot/efi/systemd-bootx64.efi esp/EFI/BOOT/BOOTX64.EFI
install -m 0644 /usr/lib/systemd/boot/efi/systemd-bootx64.efi esp/EFI/systemd/systemd-bootx64.efi
install -m 0644 clawos.efi "esp/EFI/Linux/clawos_${version}+3.efi"
install -m 0644 /src/image/loader.conf esp/loader/loader.conf
find esp -exec touch -h -d "@$EPOCH" {} +
repart --split=yes > layout.json
esp_offset=$(part esp offset); esp_bytes=$(part esp raw_size)
# Slot A named for its version, as systemd-sysupdate names the slots it
# writes (rootfs-overlay/usr/lib/sysupdate.d).
sfdisk -q --no-reread --no-tell-kernel --part-label disk.raw 2 "clawos_${version}"
sfdisk -q --no-reread --no-tell-kernel --part-label disk.raw 3 "clawos_${version}_verity"

touch -d "@$EPOCH" clawos.efi
mv disk.raw "$DEST/clawos.raw"; mv clawos.efi "$DEST/clawos.efi"
mv disk.root.raw "$DEST/clawos.root.raw"; mv disk.root-verity.raw "$DEST/clawos.root-verity.raw"
{
  echo "version=$version"
  echo "roothash=$roothash"
  echo "root_partuuid=$root_uuid"
  echo "verity_partuuid=$verity_uuid"
  echo "esp_offset=$esp_offset"
  echo "esp_bytes=$esp_bytes"
  echo "root_offset=$root_offset"
  echo "root_bytes=$(stat -c %s root.erofs)"
  printf 'cmdline=%q\n' "$cmdline"
} > "$DEST/sealed.env"
echo "image: $DEST/clawos.raw $(( $(stat -c %s "$DEST/clawos.raw") / 1048576 )) MiB (root $(( $(stat -c %s root.erofs) / 1048576 )) MiB erofs in a 768 MiB slot), version $version, roothash $roothash"
