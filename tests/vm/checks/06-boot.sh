# shellcheck shell=bash
# shellcheck disable=SC2154  # version: from out/image/sealed.env, which run.sh sources
# The boot path of image/seal.sh and the first-boot layout
# (specs/update/README.md): systemd-boot starts this build's UKI from the
# ESP with boot counting, the box blesses it once booted, root slot B waits
# empty, and the console shows a ClawOS banner instead of kernel chatter.

efivar() { # NAME: a systemd-boot/systemd-stub EFI variable as text (UTF-16 in firmware)
  # efivarfs files cannot seek: read whole, drop the 4-byte attribute word.
  vm_ssh "cat /sys/firmware/efi/efivars/$1-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f | tail -c +5" | tr -d '\0'
}
boot_loader_is_systemd_boot() {
  local info entry
  info=$(efivar LoaderInfo) && entry=$(efivar LoaderEntrySelected) || return 1
  echo "loader: $info; entry: $entry"
  [[ $info == systemd-boot* && $entry == "clawos_${version}.efi" ]]
}
check "boot: systemd-boot started this build's UKI (entry clawos_$version.efi)" boot_loader_is_systemd_boot

# systemd-bless-boot renames EFI/Linux/clawos_<v>+2-1.efi (the try systemd-boot
# counted) to clawos_<v>.efi after boot-complete.target.
check "boot: the health gate passed and recorded it; the booted UKI is then blessed (no try counter left in its name)" vm_ssh "
  systemctl is-active -q clawos-update-gate.service boot-complete.target systemd-bless-boot.service ||
    { systemctl status --no-pager clawos-update-gate.service boot-complete.target systemd-bless-boot.service; exit 1; }
  clawctl update status --json | jq -e --arg v '$version' '.recent_gates[0].version == \$v and .recent_gates[0].healthy' >/dev/null || { clawctl update status; exit 1; }
  ls /efi/EFI/Linux/
  test -f /efi/EFI/Linux/clawos_${version}.efi && ! ls /efi/EFI/Linux/ | grep -q '+'"

check "boot: os-release names this version and the default target is multi-user.target" vm_ssh "
  . /usr/lib/os-release; echo \"\$PRETTY_NAME / \$IMAGE_VERSION / \$(systemctl get-default)\"
  [ \"\$IMAGE_VERSION\" = '$version' ] && [ \"\$NAME\" = ClawOS ] && [ \"\$(systemctl get-default)\" = multi-user.target ]"

# Partitions 1-3 come with the image, 4-6 from systemd-repart at first boot
# (rootfs-overlay/usr/lib/repart.d). lsblk's PARTTYPE is the GPT type UUID.
check "boot: slot A is labelled clawos_$version, slot B (root + verity) was made empty, the data partition follows" vm_ssh "
  lsblk -nro PARTN,PARTLABEL,PARTTYPE,SIZE /dev/\$(lsblk -ndo PKNAME /dev/disk/by-partlabel/esp) | sort -n | tee /dev/stderr | awk '
    \$1 == 1 && \$3 == \"c12a7328-f81f-11d2-ba4b-00a0c93ec93b\" { n++ }
    \$1 == 2 && \$2 == \"clawos_$version\" && \$3 == \"4f68bce3-e8cd-4db1-96e7-fbcaf984b709\" { n++ }
    \$1 == 3 && \$2 == \"clawos_${version}_verity\" && \$3 == \"2c7357ed-ebd2-46d9-aec1-23d437ec2bf5\" { n++ }
    \$1 == 4 && \$2 == \"_empty\" && \$3 == \"4f68bce3-e8cd-4db1-96e7-fbcaf984b709\" && \$4 == \"768M\" { n++ }
    \$1 == 5 && \$2 == \"_empty\" && \$3 == \"2c7357ed-ebd2-46d9-aec1-23d437ec2bf5\" { n++ }
    \$1 == 6 && \$2 == \"clawos-data\" { n++ }
    END { exit n != 6 }' 2>&1"

# The serial console as a person at it sees it (QEMU's log of ttyS0).
console_is_clean() {
  local plain fp
  plain=$(sed 's/\x1b\[[0-9;]*[a-zA-Z]//g; s/\r//g' "$VM_SERIAL")
  fp=$(vm_ssh "ssh-keygen -lf /var/lib/clawos/ssh/ssh_host_ed25519_key.pub" | cut -d' ' -f2) || return 1
  echo "banner: $(grep -m1 'ClawOS ' <<<"$plain")"; echo "fingerprint: $fp"
  grep -q "ClawOS $version (" <<<"$plain" || { echo "no 'ClawOS $version' banner on the console"; return 1; }
  grep -qF "SSH host key: $fp (ED25519)" <<<"$plain" || { echo "the banner does not show the host key's fingerprint"; return 1; }
  grep -q "Debian GNU/Linux" <<<"$plain" && { echo "a Debian banner on the console"; return 1; }
  if grep -q 'audit: type=' <<<"$plain"; then echo "audit records on the console:"; grep -m3 'audit: type=' <<<"$plain"; return 1; fi
  # The BPF program loads' records (kmsg or the audit socket, either way in
  # the journal).
  vm_ssh "journalctl -b -o cat | grep -qE 'prog-id=[0-9]+ op=LOAD'" || { echo "no audit record of a BPF load in the journal either"; return 1; }
}
check "console: a ClawOS banner with the SSH host key fingerprint; audit records in the journal, not on the console" console_is_clean
